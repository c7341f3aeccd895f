package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	nomadact "github.com/gputide/gputide/quota-broker/nomad/act"
	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/store"
)

// pruneEvery is how often the leader prunes the history (DESIGN §6), and
// storeTimeout bounds the store reads and writes of one cycle.
const (
	pruneEvery   = time.Hour
	storeTimeout = 5 * time.Second
)

// Leadership (DESIGN L12). Every agent but a dry run competes for the
// store's leader lock; only the holder acts on Nomad. The others are
// standbys: they watch Nomad and plan as a dry run would, and serve reads.

// lead holds the leader lock whenever it can until ctx ends: it blocks on
// the lock, and while it holds it waits for it to be lost, then tries
// again. It returns with the lock still held when ctx ends: Run releases
// it after its last cycle, so that no act runs after the release.
func (a *Agent) lead(ctx context.Context) {
	for {
		lock, err := a.store.Lock(ctx, a.holder)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.log.Warn("failed to take the leader lock; retrying", "error", err)
			if !sleepCtx(ctx, time.Second) {
				return
			}
			continue
		}
		a.mu.Lock()
		a.lock, a.leaderName, a.newTerm = lock, a.holder, true
		a.mu.Unlock()
		a.log.Info("holding the leader lock: acting on Nomad (L12)", "holder", a.holder)
		a.poke()
		select {
		case <-ctx.Done():
			return
		case <-lock.Lost():
			a.mu.Lock()
			if a.lock == lock {
				a.lock = nil
			}
			a.mu.Unlock()
			a.log.Warn("lost the leader lock: standing by, not acting (L12)")
			a.poke()
		}
	}
}

// releaseLock gives the lock up (graceful stop: a standby takes over at
// once, DESIGN L12: within 3 s).
func (a *Agent) releaseLock() {
	a.mu.Lock()
	lock := a.lock
	a.lock = nil
	a.mu.Unlock()
	if lock == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := lock.Release(ctx); err != nil {
		a.log.Warn("failed to release the leader lock; a standby takes over when its session expires", "error", err)
		return
	}
	a.log.Info("released the leader lock")
}

// heldLock returns the leader lock while it is held, else nil.
func (a *Agent) heldLock() *store.Lock {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lock == nil || !a.lock.IsLeader() {
		return nil
	}
	return a.lock
}

// IsLeader reports whether this agent holds the leader lock now.
func (a *Agent) IsLeader() bool { return a.heldLock() != nil }

// Store returns the agent's store (Consul, or memory without a consul
// block): the API reads and writes bookings and quota moves through it.
func (a *Agent) Store() store.Store { return a.store }

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// storeView is what one cycle reads from the store: the broker's job
// records (first_seen, queued_at, admitted_at), the intents of stops and
// the holds (DESIGN §6, L11, L12). The store is the source of truth for
// them: a successor reads what its predecessor wrote and plans the same.
type storeView struct {
	jobs    map[store.JobID]store.JobRecord
	intents []store.Intent
	holds   []store.Hold
	leader  string
}

// readStore reads the job records, the intents, the holds and the
// leader's name.
func (a *Agent) readStore(ctx context.Context) (*storeView, error) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	jobs, err := a.store.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	intents, err := a.store.Intents(ctx)
	if err != nil {
		return nil, err
	}
	holds, err := a.store.Holds(ctx)
	if err != nil {
		return nil, err
	}
	leader, err := a.store.Leader(ctx)
	if err != nil {
		return nil, err
	}
	return &storeView{jobs: jobs, intents: intents, holds: holds, leader: leader}, nil
}

// firstSeen is the job's first_seen (its place in the order of L3, DESIGN
// L11), zero without a record.
func (v *storeView) firstSeen(k plan.JobKey) time.Time { return v.jobs[jobID(k)].FirstSeen }

// queuedAt is the job's queued_at (first_seen, or the broker's last move
// of it back to the holding pool; max_wait counts from it, L11.expire),
// zero without a record.
func (v *storeView) queuedAt(k plan.JobKey) time.Time { return v.jobs[jobID(k)].QueuedAt }

// admittedAt is the job's admitted_at (max_run and settle count from it,
// L11.max_run, L11.settle), zero when the store has none.
func (v *storeView) admittedAt(k plan.JobKey) time.Time { return v.jobs[jobID(k)].AdmittedAt }

// planHolds returns the stored holds that have not ended at now (lasts,
// see holdLasts), one per owner and node, sorted by owner then node: the
// snapshot's holds (DESIGN L10).
func (v *storeView) planHolds(now time.Time, lasts func(plan.Hold) time.Time) []plan.Hold {
	var out []plan.Hold
	for _, h := range v.holds {
		for _, ph := range h.PlanHolds() {
			if lasts(ph).After(now) {
				out = append(out, ph)
			}
		}
	}
	slices.SortFunc(out, compareHolds)
	return out
}

func compareHolds(p, q plan.Hold) int {
	return cmp.Or(cmp.Compare(p.For.Reservation, q.For.Reservation), p.For.Group.Compare(q.For.Group), cmp.Compare(p.Node, q.Node))
}

// timesInput fills in the job times of in from the store (first_seen,
// queued_at, admitted_at, DESIGN L11), each falling back to what the Actor
// remembers of this process when the store has no value (a dry run writes
// no records).
func (v *storeView) timesInput(in *build.Input, actor *nomadact.Actor) {
	in.FirstSeen = v.firstSeen
	in.AdmittedAt = func(k plan.JobKey) time.Time {
		if t := v.admittedAt(k); !t.IsZero() {
			return t
		}
		return actor.AdmittedAt(k)
	}
	in.Requeued = func(k plan.JobKey) time.Time {
		if t := v.queuedAt(k); !t.IsZero() {
			return t
		}
		return actor.Requeued(k)
	}
}

// jobID is the store's name of a job.
func jobID(k plan.JobKey) store.JobID {
	return store.JobID{Namespace: k.Namespace, Job: k.Job}
}

// admitted reports whether the store records the job as admitted (L12: a
// successor does not take the jobs its predecessor admitted for direct
// registrations).
func (v *storeView) admitted(key plan.JobKey) bool {
	return !v.jobs[jobID(key)].AdmittedAt.IsZero()
}

// stopping merges the actor's own stops with the intents read back (L12: a
// successor repeats nothing and finishes what was begun). An intent counts
// as StoppingFor (or, for a stop made for a reservation, rules L10.drain
// and L10.start, as StoppingForReservation) while its allocation is live
// and either being stopped, or announced less than grace ago (the call may
// still be reaching Nomad), or announced and not made while its claimant
// still waits in the holding pool: the predecessor died between the stops
// of one preemption, and the stop is returned in resume for this leader
// to make (once: the allocation is not being stopped yet). The intents to
// delete are returned in stale: their allocation is gone, or their stop
// was never made and its claimant no longer waits (the plan decides
// again; for a reservation's stop, the next drain).
func (v *storeView) stopping(own map[string]plan.GroupKey, ownRes map[string]string, s *watch.State, holdingPool string,
	now time.Time, grace time.Duration) (out map[string]plan.GroupKey, forRes map[string]string, resume []plan.Action, stale []string) {
	out = maps.Clone(own)
	if out == nil {
		out = map[string]plan.GroupKey{}
	}
	forRes = maps.Clone(ownRes)
	if forRes == nil {
		forRes = map[string]string{}
	}
	for _, in := range v.intents {
		al, ok := s.Alloc(in.Alloc)
		_, mine := out[in.Alloc]
		_, mineRes := forRes[in.Alloc]
		switch {
		case !ok || !al.Live():
			stale = append(stale, in.Alloc)
		case mine || mineRes:
		case in.Reservation != "" && (al.Stopping() || now.Sub(in.At) < grace):
			forRes[in.Alloc] = in.Reservation
		case in.Reservation != "":
			stale = append(stale, in.Alloc)
		case al.Stopping() || now.Sub(in.At) < grace:
			out[in.Alloc] = in.For
		case claimantWaits(s, in.For, holdingPool):
			out[in.Alloc] = in.For
			resume = append(resume, plan.Action{Action: plan.ActionStop, Namespace: in.Namespace, Job: in.Job,
				Group: al.Group, Alloc: in.Alloc, Node: al.NodeID, GPUs: len(al.GPUIDs), Rule: plan.Rule(in.Rule), For: in.For,
				Reason: "finishing the preemption the previous leader began (L12)"})
		default:
			stale = append(stale, in.Alloc)
		}
	}
	return out, forRes, resume, stale
}

// claimantWaits reports whether the claimant's job waits in the holding
// pool.
func claimantWaits(s *watch.State, claimant plan.GroupKey, holdingPool string) bool {
	if claimant.IsZero() {
		return false
	}
	j := s.Job(claimant.Namespace, claimant.Job)
	return j != nil && j.NodePool != nil && *j.NodePool == holdingPool && (j.Stop == nil || !*j.Stop)
}

// recordJobs is the leader's bookkeeping before it acts: each governed job
// gets its record (first_seen = queued_at = when it was first submitted as
// far as Nomad tells, build.Submitted, never later than now, so the order
// of L3 does not change once it is recorded; admitted_at, for the jobs
// accepted at the store's first start, = the earliest start of their live
// allocations, else now: a flex request's max_run counts from when it
// began to run, L11.max_run), intents whose allocation is gone are
// deleted, and so are the records of jobs Nomad no longer has.
func (a *Agent) recordJobs(ctx context.Context, lock *store.Lock, v *storeView, b *build.Build, s *watch.State,
	staleIntents []string, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	var started map[plan.JobKey]time.Time
	for _, k := range slices.SortedFunc(maps.Keys(b.Jobs), plan.JobKey.Compare) {
		id := jobID(k)
		if _, ok := v.jobs[id]; ok {
			continue
		}
		jv := b.Jobs[k]
		seen := now
		if t := build.Submitted(jv.Job); !t.IsZero() && t.Before(now) {
			seen = t
		}
		rec := store.JobRecord{FirstSeen: seen, QueuedAt: seen}
		if !jv.Holding && !jv.Direct {
			if started == nil {
				started = firstStarts(s)
			}
			rec.AdmittedAt = now
			if t, ok := started[k]; ok && t.Before(now) {
				rec.AdmittedAt = t
			}
		}
		if err := a.store.PutJob(ctx, lock, id, rec); err != nil {
			return err
		}
		v.jobs[id] = rec
	}
	for _, alloc := range staleIntents {
		if err := a.store.DeleteIntent(ctx, lock, alloc); err != nil {
			return err
		}
	}
	for id := range v.jobs {
		if a.governed(id.Namespace) && s.Job(id.Namespace, id.Job) == nil {
			if err := a.store.DeleteJob(ctx, lock, id); err != nil {
				return err
			}
			delete(v.jobs, id)
		}
	}
	return nil
}

// firstStarts is the earliest start of each job's live allocations.
func firstStarts(s *watch.State) map[plan.JobKey]time.Time {
	out := map[plan.JobKey]time.Time{}
	for _, al := range s.Allocs() {
		if !al.Live() || al.StartedAt.IsZero() {
			continue
		}
		if t, ok := out[al.JobKey()]; !ok || al.StartedAt.Before(t) {
			out[al.JobKey()] = al.StartedAt
		}
	}
	return out
}

// recordHolds is the leader's write of the plan's holds (DESIGN L10 drain,
// L5 pre-warm; L12: before it acts, fenced by the lock), one record per
// owner in holds/<owner>: the plan's hold actions are merged into the
// stored ones (nomadact.MergeHold: GPUs added, the later end kept), node
// entries ended by now are dropped (holdLasts: a reservation's hold lasts
// until the reservation ends), and an owner left with none, or a
// reservation not among the unended bookings res, is deleted. Only the
// records that change are written; v.holds is updated to what is stored.
func (a *Agent) recordHolds(ctx context.Context, lock *store.Lock, v *storeView, p *plan.Plan, res []plan.Reservation,
	now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	lasts := holdLasts(res)
	before := map[plan.HoldOwner]store.Hold{}
	after := map[plan.HoldOwner][]plan.Hold{}
	for _, h := range v.holds {
		before[h.For] = h
		after[h.For] = h.PlanHolds()
	}
	for _, act := range p.Actions {
		if h, ok := nomadact.HoldAction(act); ok {
			after[h.For] = nomadact.MergeHold(after[h.For], h)
		}
	}
	known := make(map[string]bool, len(res))
	for _, r := range res {
		known[r.ID] = true
	}
	var kept []store.Hold
	for _, owner := range slices.SortedFunc(maps.Keys(after), compareOwners) {
		hs := slices.DeleteFunc(after[owner], func(h plan.Hold) bool { return !lasts(h).After(now) })
		old, stored := before[owner]
		if len(hs) == 0 || (owner.Reservation != "" && !known[owner.Reservation]) {
			if stored {
				if err := a.store.DeleteHold(ctx, lock, owner); err != nil {
					return err
				}
			}
			continue
		}
		rec := store.HoldOf(owner, hs)
		if !stored || !sameHold(old, rec) {
			if err := a.store.PutHold(ctx, lock, rec); err != nil {
				return err
			}
		}
		kept = append(kept, rec)
	}
	v.holds = kept
	return nil
}

func compareOwners(p, q plan.HoldOwner) int {
	return cmp.Or(cmp.Compare(p.Reservation, q.Reservation), p.Group.Compare(q.Group))
}

// sameHold reports whether two records of one owner hold the same GPUs of
// the same nodes until the same instants.
func sameHold(p, q store.Hold) bool {
	return slices.EqualFunc(p.Nodes, q.Nodes, func(x, y store.HeldGPUs) bool {
		return x.Node == y.Node && x.Until.Equal(y.Until) && slices.Equal(x.GPUIDs, y.GPUIDs)
	})
}

// recordPreemptions writes the preemptions of one Execute into the
// store's history (DESIGN §6, L8).
func (a *Agent) recordPreemptions(ctx context.Context, lock *store.Lock, out nomadact.Outcome) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	for _, s := range out.Preempted {
		p := store.Preemption{At: s.Time, Alloc: s.Alloc, Namespace: s.Namespace, Job: s.Job, GPUs: s.GPUs,
			Reservation: s.Reservation, Rule: string(s.Rule), Node: s.Node, Reason: s.Reason}
		if !s.Claimant.IsZero() { // a drain stop has none: not "//"
			p.For = s.Claimant.String()
		}
		if err := a.store.AddPreemption(ctx, lock, p); err != nil {
			a.log.Error("failed to record a preemption in the store", "alloc", s.Alloc, "error", err)
		}
	}
}

// prune deletes history past the retention and the entry cap, at most once
// per pruneEvery (and at the start of each leader term).
func (a *Agent) prune(ctx context.Context, lock *store.Lock, now time.Time, force bool) {
	if !force && now.Sub(a.prunedAt) < pruneEvery {
		return
	}
	a.prunedAt = now
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	n, err := a.store.PruneHistory(ctx, lock, now, a.cfg.HistoryRetention, store.DefaultHistoryMax)
	if err != nil {
		a.log.Warn("failed to prune the history", "error", err)
		return
	}
	if n > 0 {
		a.log.Info("pruned the history", "deleted", n, "retention", a.cfg.HistoryRetention)
	}
}

// fence is the nomadact.Fence of one leader cycle: the lock check and the
// intents written before each act (DESIGN L12).
type fence struct {
	a    *Agent
	lock *store.Lock
	now  func() time.Time

	mu   sync.Mutex
	jobs map[store.JobID]store.JobRecord // the cycle's records, updated by its writes
}

var _ nomadact.Fence = (*fence)(nil)

// Check fails once the lock is lost or released.
func (f *fence) Check(ctx context.Context) error {
	if !f.lock.IsLeader() {
		return store.ErrNotLeader
	}
	return nil
}

// BeforeStop writes intents/<alloc> with the claimant (fenced: a deposed
// leader's write fails and the stop is skipped).
func (f *fence) BeforeStop(ctx context.Context, act plan.Action) error {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	return f.a.store.PutIntent(ctx, f.lock, store.Intent{Alloc: act.Alloc, Action: "stop", Namespace: act.Namespace,
		Job: act.Job, For: act.For, Reservation: act.Reservation, Rule: string(act.Rule), At: f.now().UTC()})
}

// Withdraw deletes the intent of an announced stop that was not made.
func (f *fence) Withdraw(ctx context.Context, alloc string) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if err := f.a.store.DeleteIntent(ctx, f.lock, alloc); err != nil && !errors.Is(err, store.ErrNotLeader) {
		f.a.log.Warn("failed to withdraw the intent of a stop not made", "alloc", alloc, "error", err)
	}
}

// BeforeJob writes jobs/<ns>/<job> with the times the write changes:
// admitted_at for an admission, queued_at (and no admitted_at) for a move to
// the holding pool; a status write only makes sure the record exists.
func (f *fence) BeforeJob(ctx context.Context, key plan.JobKey, w nomadact.JobWrite) error {
	id := jobID(key)
	now := f.now().UTC()
	f.mu.Lock()
	rec, ok := f.jobs[id]
	f.mu.Unlock()
	if !ok {
		rec = store.JobRecord{FirstSeen: now, QueuedAt: now}
	}
	switch w {
	case nomadact.WriteAdmit:
		rec.AdmittedAt = now
	case nomadact.WriteRequeue:
		rec.QueuedAt, rec.AdmittedAt = now, time.Time{}
	case nomadact.WriteStatus:
		if ok {
			return nil
		}
	default:
		return fmt.Errorf("unknown job write %v", w)
	}
	return f.put(ctx, id, rec)
}

// Registered writes the JobModifyIndex Nomad answered into the record.
func (f *fence) Registered(ctx context.Context, key plan.JobKey, index uint64) {
	id := jobID(key)
	f.mu.Lock()
	rec, ok := f.jobs[id]
	f.mu.Unlock()
	if !ok {
		now := f.now().UTC()
		rec = store.JobRecord{FirstSeen: now, QueuedAt: now}
	}
	rec.JobModifyIndex = index
	if err := f.put(ctx, id, rec); err != nil && !errors.Is(err, store.ErrNotLeader) {
		f.a.log.Warn("failed to record the job modify index", "job", key.String(), "index", index, "error", err)
	}
}

func (f *fence) put(ctx context.Context, id store.JobID, rec store.JobRecord) error {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if err := f.a.store.PutJob(ctx, f.lock, id, rec); err != nil {
		return err
	}
	f.mu.Lock()
	f.jobs[id] = rec
	f.mu.Unlock()
	return nil
}
