package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/reservation"
	"github.com/gputide/gputide/quota-broker/store"
)

// The quota tree's source (DESIGN §6). Without Consul it is the quota file,
// reloaded when it changes and copied into the memory store (so that
// readers of the store see the tree the agent plans on). With Consul the
// file only seeds an absent tree key; the tree is then read from the store
// and watched with blocking queries, so a change made through any broker
// applies at once everywhere.

// CheckTree is the one validation of a quota tree: the agent's before it
// runs a tree (useTree) and the API's before it stores one (a quota write,
// in the write's guarded transaction, api.Config.CheckTree), so that the
// store never holds a tree the running broker refuses (issue 16). It checks
// law L1 and the bookings not ended at now (reservation.CheckTree: each
// booking's namespace still bound to its node or below it, all of them
// fitting every nominal, L10), then that every namespace the
// configuration lists is bound (ErrNotGoverned). source names the tree in
// the error.
func (a *Agent) CheckTree(tree *quota.Node, bookings []reservation.Booking, now time.Time, source string) error {
	if tree == nil {
		return fmt.Errorf("%s: no quota tree", source)
	}
	if err := reservation.CheckTree(tree, bookings, now); err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	return a.cfg.CheckNamespaces(quota.Namespaces(tree), source)
}

// useTree installs a tree checked by CheckTree against bookings (the
// store's, read with the tree), the min_runtime of the configuration
// overriding the tree's; nodes whose nominal changed without a recorded
// change time get now (debt grace, law L9). An invalid tree is refused and
// the running tree stays.
func (a *Agent) useTree(tree *quota.Node, settings quota.Settings, bookings []reservation.Booking, source string) error {
	if err := a.CheckTree(tree, bookings, a.now(), source); err != nil {
		return err
	}
	if a.cfg.MinRuntime != nil {
		settings.MinRuntime = *a.cfg.MinRuntime
	}
	now := a.now()
	a.mu.Lock()
	old := a.tree
	a.mu.Unlock()
	if old != nil {
		tree.Walk(func(n *quota.Node) {
			o := old.Find(n.Name)
			if o == nil {
				return
			}
			if n.ChangedAt.IsZero() {
				n.ChangedAt = o.ChangedAt
			}
			if !maps.Equal(o.GPUs, n.GPUs) {
				if !n.ChangedAt.After(o.ChangedAt) {
					n.ChangedAt = now
				}
				a.log.Info("quota changed", "quota", n.Name, "old_gpus", o.GPUs.String(), "new_gpus", n.GPUs.String(), "source", source)
			}
		})
	}
	a.mu.Lock()
	a.tree, a.settings = tree, settings
	a.mu.Unlock()
	if !maps.Equal(quota.Namespaces(old), quota.Namespaces(tree)) {
		a.relist(source)
	}
	return nil
}

// relist makes the Nomad watchers read again what they keep only for
// governed namespaces (the jobs, the scaling policies): the tree's
// namespaces changed, so a namespace newly governed has never been read
// (issue 16: on the Consul store the first list could finish before the
// tree was read, and the queue stayed empty until a restart). Before Run
// there is nothing to read again.
func (a *Agent) relist(source string) {
	why := "the governed namespaces changed (" + source + ")"
	if a.watcher != nil {
		a.watcher.Relist(why)
	}
	if a.policyWatcher != nil {
		a.policyWatcher.Relist(why)
	}
}

// seedTree writes the quota file into the store when the store has no
// tree (Consul: retried until it succeeds or ctx ends).
func (a *Agent) seedTree(ctx context.Context) {
	if a.cfg.QuotaFile == "" {
		return
	}
	tree, settings, err := quota.LoadFile(a.cfg.QuotaFile)
	if err != nil {
		a.log.Error("not seeding the store's quota tree: the quota file is invalid", "file", a.cfg.QuotaFile, "error", err)
		return
	}
	for {
		sctx, cancel := context.WithTimeout(ctx, storeTimeout)
		stored, seeded, err := a.store.SeedTree(sctx, store.TreeRecord{Root: tree, Settings: settings, ChangedAt: a.now().UTC()})
		cancel()
		if err == nil {
			diff := ""
			if !seeded && stored != nil {
				diff = treeDiff(tree, settings, stored.Root, stored.Settings)
			}
			switch {
			case seeded:
				a.log.Info("seeded the store's quota tree from the quota file", "file", a.cfg.QuotaFile)
			case diff != "":
				a.log.Warn("the quota file differs from the store's quota tree; the store's tree is used (write the file with gputide quota apply)",
					"file", a.cfg.QuotaFile, "difference", diff)
			default:
				a.log.Info("the store has a quota tree; the quota file is not used", "file", a.cfg.QuotaFile)
			}
			return
		}
		a.log.Warn("failed to seed the store's quota tree; retrying", "error", err)
		if !sleepCtx(ctx, time.Second) {
			return
		}
	}
}

// watchTree seeds the store's tree, then follows it (and the rest of the
// store the memory keeps, watchStore) until ctx ends.
func (a *Agent) watchTree(ctx context.Context) {
	a.seedTree(ctx)
	a.watchStore(ctx, func(st *store.Guarded) {
		if st.Tree == nil {
			a.log.Warn("the store has no quota tree yet: not planning")
			return
		}
		if err := a.useTree(st.Tree.Root, st.Tree.Settings, st.Reservations, "consul tree"); err != nil {
			a.log.Error("keeping the running quota tree: the store's tree is invalid", "error", err)
		}
	})
}

// publishTree copies the file's tree into the memory store, so that
// bookings validate against the tree the agent plans with. loadQuota has
// checked the file against the bookings (CheckTree); a booking made since
// that the tree leaves above a nominal (L10) is logged.
func (a *Agent) publishTree(ctx context.Context) {
	a.mu.Lock()
	tree := a.tree
	rec := store.TreeRecord{Root: tree.Clone(), Settings: a.settings, ChangedAt: a.now().UTC()}
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	g, err := a.store.Guarded(ctx, func(*store.Guarded) ([]store.Change, error) {
		return []store.Change{store.PutTree(rec)}, nil
	})
	if err != nil {
		a.log.Warn("failed to copy the quota tree into the memory store", "error", err)
		return
	}
	if rt, err := reservation.NewTree(tree); err == nil {
		if err := rt.Fits(g.Reservations); err != nil {
			a.log.Warn("the reloaded quota tree does not fit the bookings (L10, L13: above a nominal, or a booking of a flavor it lacks)", "error", err)
		}
	}
}

// treeDiff names the first difference between the quota file's tree and
// settings (file, fs) and the store's (stored, ss), or "" when they are the
// same tree: names, nominal GPUs, preemption flags, namespaces and children
// in order, and the settings. Change times and positions are not compared.
func treeDiff(file *quota.Node, fs quota.Settings, stored *quota.Node, ss quota.Settings) string {
	if fs != ss {
		return fmt.Sprintf("settings: file %+v, store %+v", fs, ss)
	}
	var walk func(f, s *quota.Node) string
	walk = func(f, s *quota.Node) string {
		switch {
		case f == nil || s == nil:
			if f != s {
				return "one tree is empty"
			}
			return ""
		case f.Name != s.Name:
			return fmt.Sprintf("node %q in the file, %q in the store", f.Name, s.Name)
		case !maps.Equal(f.GPUs, s.GPUs):
			return fmt.Sprintf("%s: %s GPUs in the file, %s in the store", f.Name, f.GPUs, s.GPUs)
		case !quota.SameFlavors(f.Flavors, s.Flavors):
			return fmt.Sprintf("%s: flavors differ", f.Name)
		case f.ChildPreemption != s.ChildPreemption || f.PriorityPreemption != s.PriorityPreemption:
			return fmt.Sprintf("%s: preemption flags differ", f.Name)
		case !slices.Equal(f.Namespaces, s.Namespaces):
			return fmt.Sprintf("%s: namespaces %v in the file, %v in the store", f.Name, f.Namespaces, s.Namespaces)
		case len(f.Children) != len(s.Children):
			return fmt.Sprintf("%s: %d children in the file, %d in the store", f.Name, len(f.Children), len(s.Children))
		}
		for i := range f.Children {
			if d := walk(f.Children[i], s.Children[i]); d != "" {
				return d
			}
		}
		return ""
	}
	return walk(file, stored)
}
