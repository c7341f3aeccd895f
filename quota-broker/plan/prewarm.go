package plan

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// Prewarm is a scheduled scale-up the core places ahead of time (DESIGN L5
// "Pre-warm", issue 11 item 5): the task group's scaling policy in Nomad
// has a gputide-schedule check whose next boundary within drain_horizon
// raises its count. The Nomad adapter (and the simulator) write one entry
// per such group (snapshot key prewarm).
type Prewarm struct {
	Namespace   string
	Job         string
	Group       string
	Type        JobType  // service or batch
	Priority    int      // job priority, 1-100 (L3, L5 step 3)
	GPUs        int      // GPUs per allocation, 1-quota.MaxGPUs
	Model       string   // "" = any model
	Datacenters []string // empty = any datacenter
	NodePool    string   // "" = default
	// At is the boundary: when the schedule raises the count.
	At time.Time
	// Count is the allocations the boundary adds: the count after the
	// boundary's ramp minus the current count, 1-quota.MaxGPUs.
	Count int
	// Until is when the holds end: At + the policy's evaluation_interval
	// + settle, after At.
	Until time.Time
	// Flavors are the flavors the group may use, in the order it tries
	// them (DESIGN L13, as Pending.Flavors; snapshot key flavors). Nil:
	// every flavor of the tree, in tree order. The pre-warm is placed in
	// one of them (prewarmFlavor).
	Flavors []string
}

// Key returns the key of the group, the owner of its holds.
func (w *Prewarm) Key() GroupKey { return GroupKey{Namespace: w.Namespace, Job: w.Job, Group: w.Group} }

// pending returns the group's added allocations as a pending group of one
// allocation (the drain places them one at a time).
func (w *Prewarm) pending() *Pending {
	return &Pending{Namespace: w.Namespace, Job: w.Job, Group: w.Group, Type: w.Type, Priority: w.Priority,
		Count: 1, GPUs: w.GPUs, Model: w.Model, Datacenters: w.Datacenters, NodePool: w.NodePool}
}

// prewarmEntitled reports why pre-warm w is not entitled now (DESIGN L3,
// with booked(N) over drain_horizon as for any non-flex job), or "". Its
// GPUs are Count x GPUs on top of the group's quota node's usage now.
func (p *planner) prewarmEntitled(w *Prewarm, q *qnode) string {
	asked := min(w.Count*w.GPUs, MaxAsk)
	j := &job{namespace: w.Namespace, name: w.Job, q: q, priority: w.Priority, asked: asked}
	j.booked = p.bookedOver(p.settings.DrainHorizon)
	_, reason, _ := p.entitled(j)
	return reason
}

// prewarms checks the snapshot's pre-warm entries (part of Check).
func (c *checker) prewarms() {
	seen := map[GroupKey]int{}
	for i := range c.s.Prewarm {
		if f := c.prewarm(i, seen); f != nil {
			c.fail(f)
		}
	}
}

// prewarm checks prewarm[i]: names, listed once, type service or batch,
// priority 1-100, gpus and count 1-quota.MaxGPUs, an at, an until after
// it, datacenters non-empty and listed once.
func (c *checker) prewarm(i int, seen map[GroupKey]int) *Fault {
	w := &c.s.Prewarm[i]
	path := "prewarm[" + strconv.Itoa(i) + "]"
	bad := func(p, format string, args ...any) *Fault {
		return &Fault{Path: p, Item: ItemPrewarm, Index: i, Job: JobKey{Namespace: w.Namespace, Job: w.Job}, Message: fmt.Sprintf(format, args...)}
	}
	if p, msg := names(path, "namespace", w.Namespace, "job", w.Job, "group", w.Group); msg != "" {
		return bad(p, "%s", msg)
	}
	if j, dup := seen[w.Key()]; dup {
		return bad(path, "group %s is listed twice (also prewarm[%d])", Quote(w.Key().String()), j)
	}
	seen[w.Key()] = i
	if w.Type != JobService && w.Type != JobBatch {
		return bad(path+".type", "%s: only service and batch groups are pre-warmed", Quote(string(w.Type)))
	}
	if w.Priority < 1 || w.Priority > 100 {
		return bad(path+".priority", "%d is outside 1-100", w.Priority)
	}
	if msg := positive(w.GPUs); msg != "" {
		return bad(path+".gpus", "%s", msg)
	}
	if w.Count < 1 || w.Count > quota.MaxGPUs {
		return bad(path+".count", "must be in 1-%d, not %d", quota.MaxGPUs, w.Count)
	}
	if w.At.IsZero() {
		return bad(path+".at", "missing: a pre-warm needs its boundary")
	}
	if !w.Until.After(w.At) {
		return bad(path+".until", "%s is not after at %s", w.Until.Format(time.RFC3339), w.At.Format(time.RFC3339))
	}
	if p, msg := datacenters(path, w.Datacenters); msg != "" {
		return bad(p, "%s", msg)
	}
	if p, msg := flavorNames(path, c.s.Quota, w.Flavors); msg != "" {
		return bad(p, "%s", msg)
	}
	return nil
}

// prewarmRoom reports, for pre-warm w in the planner's flavor, whether its
// group is entitled now (prewarmEntitled) and whether all its Count
// allocations fit on free GPUs of its feasible nodes now (bin-packing
// allocations of one size places as many as the nodes' free GPUs hold).
// A group whose namespace is bound to no quota is neither.
func (p *planner) prewarmRoom(w *Prewarm, cache map[feasibilityKey][]int) (entitled, free bool) {
	q := p.byNS[w.Namespace]
	if q == nil || p.prewarmEntitled(w, q) != "" {
		return false, false
	}
	g := w.pending()
	c := &claim{j: &job{namespace: w.Namespace, name: w.Job, q: q, priority: w.Priority}, g: g, cid: noClaimant, alt: noClaimant}
	room := 0
	for _, ni := range p.feasibleNodes(g, cache) {
		if room += p.freeOn(p.nodes[ni], c) / w.GPUs; room >= w.Count {
			return true, true
		}
	}
	return true, false
}

// prewarmFlavor returns the index in the tree's flavors names of the one
// flavor pre-warm w is placed in (DESIGN L5 "Pre-warm", L13: all of a
// job's allocations take one flavor), among those it allows (w.Flavors in
// its order; nil: every flavor in tree order), or -1 when it allows none
// of the tree's. ps are the flavors' planners before their drains and
// allocs their projections' allocations. In order: the first allowed
// flavor in which GPUs are held for the group already (a pre-warm stays
// where an earlier plan began it); else the first in which the job runs
// allocations (its allocations have taken that flavor); else, as L13's
// choice, the first in which the group is entitled now and fits on free
// GPUs, else the first in which it is entitled (its drain makes room by
// L5/L6 or warns), else the first (where it is warned of).
func prewarmFlavor(w *Prewarm, names []string, ps []*planner, allocs [][]*Allocation, caches []map[feasibilityKey][]int) int {
	var allowed []int
	if w.Flavors == nil {
		for fi := range names {
			allowed = append(allowed, fi)
		}
	} else {
		for _, f := range w.Flavors {
			if fi := slices.Index(names, f); fi >= 0 {
				allowed = append(allowed, fi)
			}
		}
	}
	if len(allowed) <= 1 {
		if len(allowed) == 0 {
			return -1
		}
		return allowed[0]
	}
	owner := HoldOwner{Group: w.Key()}
	for _, fi := range allowed {
		if slices.ContainsFunc(ps[fi].snap.Holds, func(h Hold) bool { return h.For == owner }) {
			return fi
		}
	}
	for _, fi := range allowed {
		if slices.ContainsFunc(allocs[fi], func(a *Allocation) bool { return a.Namespace == w.Namespace && a.Job == w.Job }) {
			return fi
		}
	}
	firstEntitled := -1
	for _, fi := range allowed {
		entitled, free := ps[fi].prewarmRoom(w, caches[fi])
		if free {
			return fi
		}
		if entitled && firstEntitled < 0 {
			firstEntitled = fi
		}
	}
	if firstEntitled >= 0 {
		return firstEntitled
	}
	return allowed[0]
}
