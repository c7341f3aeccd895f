package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	nomadact "github.com/gputide/gputide/quota-broker/nomad/act"
	"github.com/gputide/gputide/quota-broker/nomad/build"
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
		a.takeLock(lock)
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
			a.mem.stand()
			a.log.Warn("lost the leader lock: standing by, not acting (L12)")
			a.poke()
		}
	}
}

// takeLock makes this agent the leader with lock: its memory loads the
// store's records at the next cycle (the term's one read of them), which
// is the first of the term (newTerm), and so does the list of recent
// stops eviction budgets count, from the history (evictLoad).
func (a *Agent) takeLock(lock *store.Lock) {
	a.mem.lead() // before the lock shows: no leader cycle on a standby's memory
	a.mu.Lock()
	a.lock, a.leaderName, a.newTerm, a.evictLoad = lock, a.holder, true, true
	a.mu.Unlock()
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

// fence is the nomadact.Fence of one leader cycle: the lock check before
// each act and the intent of each act in the memory, written through to
// the store, fenced by the lock, before the call (DESIGN L12). The stops'
// intents are recorded by the cycle's record step already; a job's times
// are written here, just before the register that changes them, and so
// are the status to write on a job about to be stopped whole (and its
// clearing once written) and the drop of an idle group's unplaced_since
// before its scale-down.
type fence struct {
	a    *Agent
	lock *store.Lock
	now  func() time.Time
	// admittedAt is the admitted_at the cycle's record step gave the
	// jobs its plan admits (recordAdmissions); zero: none.
	admittedAt time.Time
}

var _ nomadact.Fence = (*fence)(nil)

// Check fails once the lock is lost or released.
func (f *fence) Check(ctx context.Context) error {
	if !f.lock.IsLeader() {
		return store.ErrNotLeader
	}
	return nil
}

// BeforeStop makes sure intents/<alloc> names the stop's claimant (or
// reservation): recorded by the record step, else written now (fenced: a
// deposed leader's write fails and the stop is skipped).
func (f *fence) BeforeStop(ctx context.Context, act plan.Action) error {
	if in, ok := f.a.mem.intent(act.Alloc); ok && in.For == act.For && in.Reservation == act.Reservation {
		return nil
	}
	b := &batch{}
	b.putIntent(intentOf(act, f.now().UTC()))
	return f.a.mem.commit(ctx, f.lock, b)
}

// Withdraw deletes the intent of an announced stop that was not made.
func (f *fence) Withdraw(ctx context.Context, alloc string) {
	b := &batch{}
	b.deleteIntent(alloc)
	if err := f.a.mem.commit(ctx, f.lock, b); err != nil && !errors.Is(err, store.ErrNotLeader) {
		f.a.log.Warn("failed to withdraw the intent of a stop not made", "alloc", alloc, "error", err)
	}
}

// BeforeJob writes jobs/<ns>/<job> with the times the write changes:
// admitted_at for an admission (unless the record step wrote it this
// cycle, recordAdmissions), queued_at (and no admitted_at) for a move to
// the holding pool; a status write only makes sure the record exists.
func (f *fence) BeforeJob(ctx context.Context, key plan.JobKey, w nomadact.JobWrite) error {
	id := jobID(key)
	now := f.now().UTC()
	rec, ok := f.a.mem.job(id)
	if !ok {
		rec = store.JobRecord{FirstSeen: now, QueuedAt: now}
	}
	switch w {
	case nomadact.WriteAdmit:
		if ok && !f.admittedAt.IsZero() && rec.AdmittedAt.Equal(f.admittedAt) {
			return nil // recorded by the record step
		}
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
	b := &batch{}
	b.putJob(id, rec)
	return f.a.mem.commit(ctx, f.lock, b)
}

// Registered writes the JobModifyIndex Nomad answered into the record.
func (f *fence) Registered(ctx context.Context, key plan.JobKey, index uint64) {
	id := jobID(key)
	rec, ok := f.a.mem.job(id)
	if !ok {
		now := f.now().UTC()
		rec = store.JobRecord{FirstSeen: now, QueuedAt: now}
	}
	rec.JobModifyIndex = index
	b := &batch{}
	b.putJob(id, rec)
	if err := f.a.mem.commit(ctx, f.lock, b); err != nil && !errors.Is(err, store.ErrNotLeader) {
		f.a.log.Warn("failed to record the job modify index", "job", key.String(), "index", index, "error", err)
	}
}

// BeforeStopJob writes jobs/<ns>/<job>.stopped: the status to write once
// the job, about to be stopped whole, has no live allocation (fenced: a
// deposed leader's write fails and the job is not stopped).
func (f *fence) BeforeStopJob(ctx context.Context, key plan.JobKey, st build.StopStatus) error {
	id := jobID(key)
	rec, ok := f.a.mem.job(id)
	if !ok {
		now := f.now().UTC()
		rec = store.JobRecord{FirstSeen: now, QueuedAt: now}
	}
	rec.Stopped = store.StopStatus{Reason: st.Reason, JobModifyIndex: st.JobModifyIndex}
	b := &batch{}
	b.putJob(id, rec)
	return f.a.mem.commit(ctx, f.lock, b)
}

// ForgetStop clears jobs/<ns>/<job>.stopped: the status is written, or the
// job runs again.
func (f *fence) ForgetStop(ctx context.Context, key plan.JobKey) {
	id := jobID(key)
	rec, ok := f.a.mem.job(id)
	if !ok || rec.Stopped.IsZero() {
		return
	}
	rec.Stopped = store.StopStatus{}
	b := &batch{}
	b.putJob(id, rec)
	if err := f.a.mem.commit(ctx, f.lock, b); err != nil && !errors.Is(err, store.ErrNotLeader) {
		f.a.log.Warn("failed to clear the status to write of a stopped job", "job", key.String(), "error", err)
	}
}

// BeforeScale drops the group from jobs/<ns>/<job>.unplaced_since before
// its count is lowered: a group still seen unplaced afterwards (Nomad's
// new count not yet seen, or the call failed) waits settle again.
func (f *fence) BeforeScale(ctx context.Context, group plan.GroupKey) error {
	id := jobID(group.JobKey())
	rec, ok := f.a.mem.job(id)
	if _, has := rec.Unplaced[group.Group]; !ok || !has {
		return nil
	}
	rec.Unplaced = maps.Clone(rec.Unplaced) // the memory's map is shared with views
	delete(rec.Unplaced, group.Group)
	if len(rec.Unplaced) == 0 {
		rec.Unplaced = nil
	}
	b := &batch{}
	b.putJob(id, rec)
	return f.a.mem.commit(ctx, f.lock, b)
}
