package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	nomadact "github.com/gputide/gputide/quota-broker/nomad/act"
	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/store"
)

// The broker's cycle (issue 18; DESIGN L12): one pass over Nomad's state
// and the broker's one memory (memory.go), in six named steps. Each step
// is one method below that fills in the cycle's cycleState and returns nil
// or the reason the cycle stops there; cycle logs that reason once (when
// it changes, with the step's name) and keeps it as the health's "why"
// (L12: not acting). A panic in any step is recovered (recoverCycle,
// panic.go), which names the step.
//
//  1. read: Nomad's state (the watcher's, within the staleness bound,
//     job summaries refreshed), the quota tree, and a view of the memory:
//     job records, intents, holds, bookings, the leader's name. The first
//     cycle of a leader term loads the memory from the store first, and
//     the recent stops eviction budgets count from its history
//     (evictions.go; again when a tree change widens their window); up
//     to the act nothing else reads the store (account's guarded move of
//     ended bookings and the history prune read what they write).
//  2. build: the snapshot (build.From): the intents as StoppingFor and
//     StoppingForReservation, the recorded admissions as accepted (at the
//     store's first start, everything running), the job times (L11) and
//     the holds (L10); for the Actor, the status still to write on the
//     jobs stopped whole and since when idle groups are unplaced.
//  3. plan: the core's plan (Planner), kept for the HTTP reads and the
//     metrics. A standby stops here.
//  4. record: the store writes the plan needs before any Nomad call, in
//     one fenced batch (store.WriteRecords): records of new jobs, deletes
//     of vanished jobs and stale intents, since when idle groups have had
//     allocations unplaced (unplaced_since), the plan's holds merged into
//     the stored ones (plan.MergeHold), and the intent of every stop; the
//     memory follows. A dry run records the jobs in its memory only, and
//     stops here.
//  5. act: the Actor's Nomad calls (nomadact.Actor.Execute), each after
//     its intent: the stops' are recorded, the job times of a register
//     (admitted_at, queued_at), the status to write on a job stopped
//     whole (stopped) and the drop of an idle group's unplaced_since
//     before its scale-down are written by the Fence just before the
//     call. The Actor keeps none of these between cycles.
//  6. account: preemptions into the history (and the counted ones into
//     the recent stops eviction budgets count), the outcome into the
//     metrics and the log, ended bookings moved to history, the history
//     pruned.
//
// A test drives one cycle with a.cycle(ctx), or a.runCycle(ctx, run) to
// see what each step produced, once the watcher has listed Nomad
// (a.watcher.State() is not nil) and the memory has read the bookings
// (a.watchStore runs); with a.takeLock(lock) first, the cycle is the
// leader's.
func (a *Agent) cycle(ctx context.Context) {
	run := &cycleRun{step: "start"}
	defer a.recoverCycle(run)
	a.runCycle(ctx, run)
}

// runCycle runs the steps of one cycle in order and returns what they
// produced; run names the step running.
func (a *Agent) runCycle(ctx context.Context, run *cycleRun) *cycleState {
	c := &cycleState{run: run}
	steps := []struct {
		name string
		fn   func(context.Context, *cycleState) error
	}{
		{"read", a.read}, {"build", a.build}, {"plan", a.plan}, {"record", a.record}, {"act", a.act}, {"account", a.account},
	}
	for _, s := range steps {
		run.step = s.name
		err := s.fn(ctx, c)
		if errors.Is(err, errCycleDone) {
			return c
		}
		if err != nil {
			a.setActing(false, err.Error(), s.name)
			return c
		}
	}
	return c
}

// errCycleDone ends a cycle early without an error: no state yet, a
// standby or a dry run after its last step.
var errCycleDone = errors.New("cycle done")

// cycleState is what one cycle's steps hand on to the next.
type cycleState struct {
	run      *cycleRun
	start    time.Time // the snapshot's time
	state    *watch.State
	tree     *quota.Node
	settings quota.Settings
	view     *view
	lock     *store.Lock // the leader lock; nil on a standby and in a dry run
	newTerm  bool        // the first cycle since the lock was taken
	stops    stops
	// recordedAt is when the record step wrote its batch: the admitted_at
	// it gave the jobs the plan admits (recordAdmissions).
	recordedAt time.Time
	// evictions are the recent victim stops budgets count (DESIGN L14),
	// the snapshot's.
	evictions []plan.Eviction
	b         *build.Build
	p         *plan.Plan
	out       nomadact.Outcome
}

// read is step 1.
func (a *Agent) read(ctx context.Context, c *cycleState) error {
	a.observeConnection()
	if c.state = a.watcher.State(); c.state == nil {
		return errCycleDone
	}
	if ok, why := a.fresh(); !ok {
		return errors.New(why)
	}
	if err := a.loadQuota(); err != nil {
		a.log.Error("keeping the running quota tree", "error", err)
	}
	a.mu.Lock()
	c.tree, c.settings, c.newTerm = a.tree, a.settings, a.newTerm
	a.mu.Unlock()
	if c.tree == nil {
		return errors.New("no quota tree in the store yet")
	}
	if lock := a.heldLock(); lock != nil && !a.dryRun {
		c.lock = lock
	}
	v, err := a.mem.view(ctx)
	if err != nil {
		return fmt.Errorf("the store is unavailable: %w", err)
	}
	c.view = v
	a.setLeaderName(v.leader)
	// The holding pool exists before the agent says it acts: jobs are
	// submitted into it, and Nomad refuses a job in a pool it lacks.
	if c.lock != nil && !a.poolOK {
		if err := a.ensureHoldingPool(ctx); err != nil {
			return fmt.Errorf("failed to create the holding pool %q: %w", a.cfg.HoldingPool, err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	if err := c.state.Refresh(rctx, a.client); err != nil {
		return fmt.Errorf("failed to refresh job summaries: %w", err)
	}
	c.start = a.now()
	return a.evictions(ctx, c)
}

// observeConnection feeds the metrics of Nomad's connection.
func (a *Agent) observeConnection() {
	if a.metrics == nil {
		return
	}
	st := a.watcher.Status()
	if st.Connected {
		a.metrics.Connected.Set(1)
	} else {
		a.metrics.Connected.Set(0)
	}
	if !st.SyncedAt.IsZero() {
		a.metrics.StateAge.Set(a.now().Sub(st.SyncedAt).Seconds())
	}
}

// firstStart reports whether this cycle is the store's first start: what
// runs in a real pool was there before the broker and is accepted as it
// is (past it, a job in a real pool without admitted_at is a direct
// registration). A leader's first cycle finds no job record; a dry run,
// which records only in its memory, takes its first cycle.
func (a *Agent) firstStart(c *cycleState) bool {
	if a.dryRun {
		return !a.seeded
	}
	return c.lock != nil && c.newTerm && len(c.view.jobs) == 0
}

// build is step 2.
func (a *Agent) build(_ context.Context, c *cycleState) error {
	c.stops = c.view.stopping(c.state, a.cfg.HoldingPool, c.start, a.cfg.Staleness)
	var accepted func(plan.JobKey) bool // the records' admitted_at
	if a.firstStart(c) {
		accepted = func(plan.JobKey) bool { return true }
	}
	in := build.Input{Now: c.start, Quota: c.tree, Settings: c.settings, HoldingPool: a.cfg.HoldingPool,
		Governed: a.governed, AdmitPools: a.cfg.AdmitPools, Policies: a.policies, Accepted: accepted,
		Stopping: c.stops.forGroup, StoppingForReservation: c.stops.forRes,
		Reservations: forFlavors(c.view.res, c.tree), Holds: c.view.planHolds(c.start),
		Record: c.view.record, UnplacedSince: c.view.unplacedSince, Memo: &a.memo, Evictions: c.evictions}
	c.b = build.From(c.state, in)
	c.run.snap = c.b.Snapshot
	a.logLeft(c.b.Left)
	if c.b.Invalid != nil {
		return fmt.Errorf("the quota tree or the settings are invalid: %w", c.b.Invalid)
	}
	return nil
}

// plan is step 3. A standby stops after it.
func (a *Agent) plan(_ context.Context, c *cycleState) error {
	p, err := a.planner(c.b.Snapshot)
	if err != nil {
		return fmt.Errorf("failed to plan: %w", err)
	}
	if a.lastPanic != "" {
		a.log.Info("planning succeeds again after a panic", "last_panic", a.lastPanic)
		a.lastPanic = ""
	}
	// The build's warnings (jobs admitted uncounted because they ask only
	// for ungoverned devices, DESIGN L13) join the plan's.
	p.Warnings = append(p.Warnings, c.b.Warnings...)
	c.p = p
	a.observe(c.b, p, a.now().Sub(c.start))
	if c.lock == nil && !a.dryRun {
		who := c.view.leader
		if who == "" {
			who = "none yet"
		}
		a.setActing(false, "standby: the leader lock is held by "+who, "plan")
		return errCycleDone
	}
	return nil
}

// record is step 4: one batch of store writes before any Nomad call (L12),
// fenced by the lock. A dry run records the jobs in its memory only, and
// stops after it.
func (a *Agent) record(ctx context.Context, c *cycleState) error {
	if c.lock != nil {
		if ok, why := a.fresh(); !ok {
			return errors.New(why)
		}
	}
	b := &batch{}
	a.recordJobs(b, c)
	if c.lock != nil {
		c.recordedAt = a.now().UTC()
		recordUnplaced(b, c)
		recordHolds(b, c)
		recordStops(b, c, c.recordedAt)
		recordAdmissions(b, c, c.recordedAt)
		if err := a.verifyLock(ctx, c.lock, b); err != nil {
			return err
		}
	}
	if err := a.mem.commit(ctx, c.lock, b); err != nil {
		if errors.Is(err, store.ErrNotLeader) {
			_ = c.lock.Verify(ctx) // the lock is lost: marked so at once
		}
		return fmt.Errorf("failed to record the jobs, holds and intents in the store: %w", err)
	}
	a.mu.Lock()
	a.newTerm = false
	a.mu.Unlock()
	if a.dryRun {
		a.seeded = true
		a.setActing(true, "", "record")
		return errCycleDone
	}
	return nil
}

// verifyLock makes sure, before the acts, that this broker still holds
// the leader lock (L12; each act then checks the lock again, and every
// write is fenced). A batch written to the store proves it: the store's
// transaction checks the lock's session (store.KV.fenced) as a
// consistent read of the lock would, and fails without it. An empty
// batch, or one the memory does not persist, is no proof: the lock is
// read consistently (Lock.Verify).
func (a *Agent) verifyLock(ctx context.Context, lock *store.Lock, b *batch) error {
	if len(b.writes) > 0 && a.mem.persist {
		return nil
	}
	vctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	if err := lock.Verify(vctx); err != nil {
		return fmt.Errorf("the leader lock could not be verified: %w", err)
	}
	return nil
}

// recordJobs adds to b a record for each governed job of the build
// without one (first_seen = queued_at = when it was first submitted as far
// as Nomad tells, jobmeta.Submitted, never later than now, so the order of
// L3 does not change once it is recorded; admitted_at, for a job running
// in its pool that is not a direct registration, = the earliest start of
// its live allocations, else now: a flex request's max_run counts from
// when it began to run, L11.max_run), deletes of stale intents, and
// deletes of the records of jobs Nomad no longer has.
func (a *Agent) recordJobs(b *batch, c *cycleState) {
	now := c.start
	var started map[plan.JobKey]time.Time
	for _, k := range c.b.Unrecorded {
		jv := c.b.Jobs[k]
		seen := now
		if t := jobmeta.Submitted(jv.Job); !t.IsZero() && t.Before(now) {
			seen = t
		}
		rec := store.JobRecord{FirstSeen: seen, QueuedAt: seen}
		if !jv.Holding && !jv.Direct {
			if started == nil {
				started = firstStarts(c.state)
			}
			rec.AdmittedAt = now
			if t, ok := started[k]; ok && t.Before(now) {
				rec.AdmittedAt = t
			}
		}
		b.putJob(jobID(k), rec)
	}
	for _, alloc := range c.stops.stale {
		b.deleteIntent(alloc)
	}
	for _, id := range a.vanishedJobs(c) {
		b.deleteJob(id)
	}
}

// vanishedJobs are the records of governed jobs Nomad no longer has, in
// order: those whose job the build lacks, each confirmed against the
// state as it is now (a job the events brought back since the build
// keeps its record). When the records are exactly as many as the build's
// jobs that have one (build.Build.Unrecorded), each is a job's of the
// build and none is read (10,000 records a cycle, issue 18).
func (a *Agent) vanishedJobs(c *cycleState) []store.JobID {
	if len(c.view.jobs) == len(c.b.Jobs)-len(c.b.Unrecorded) {
		return nil
	}
	var out []store.JobID
	governed := map[string]bool{} // by namespace: governed reads the tree each call
	for id := range c.view.jobs {
		if _, ok := c.b.Jobs[plan.JobKey{Namespace: id.Namespace, Job: id.Job}]; ok {
			continue
		}
		g, ok := governed[id.Namespace]
		if !ok {
			g = a.governed(id.Namespace)
			governed[id.Namespace] = g
		}
		if g && c.state.Job(id.Namespace, id.Job) == nil {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, compareJobIDs)
	return out
}

// recordUnplaced adds to b the job records whose unplaced_since changes
// (issue 11 item 4; issue 18: a successor scales an idle group down settle
// after its predecessor first saw it unplaced, not after its own start):
// an idle group with allocations unplaced (policies.IdleView.Unplaced) keeps
// its recorded instant, or gets the cycle's time; a group placed, or no
// longer idle, is dropped. Nothing changes while the idle groups are
// unknown (the scaling policies not synced). A job's record written
// earlier in b (recordJobs: a job seen for the first time) is written
// again, with the instants; one deleted in b stays deleted.
func recordUnplaced(b *batch, c *cycleState) {
	if c.b.Idle == nil {
		return
	}
	want := map[store.JobID]map[string]time.Time{}
	for g, iv := range c.b.Idle {
		if !iv.Unplaced() {
			continue
		}
		id := jobID(g.JobKey())
		if want[id] == nil {
			want[id] = map[string]time.Time{}
		}
		want[id][g.Group] = c.start
		if !iv.UnplacedSince.IsZero() {
			want[id][g.Group] = iv.UnplacedSince
		}
	}
	recs := maps.Clone(c.view.jobs)
	maps.Copy(recs, b.jobs) // the records of jobs seen for the first time
	ids := slices.Collect(maps.Keys(want))
	for id, rec := range c.view.jobs {
		if len(rec.Unplaced) > 0 && want[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, compareJobIDs)
	for _, id := range ids {
		rec, ok := recs[id]
		if !ok || b.gone[id] || maps.EqualFunc(rec.Unplaced, want[id], time.Time.Equal) {
			continue
		}
		rec.Unplaced = want[id]
		b.putJob(id, rec)
	}
}

func compareJobIDs(p, q store.JobID) int {
	return plan.JobKey{Namespace: p.Namespace, Job: p.Job}.Compare(plan.JobKey{Namespace: q.Namespace, Job: q.Job})
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

// recordHolds adds to b the plan's holds (DESIGN L10 drain, L5 pre-warm;
// L12: before the stops that free them), one record per owner in
// holds/<owner>: the plan's hold actions merged into the stored ones
// (plan.MergeHold: GPUs added, the later end kept), entries ended at the
// cycle's time dropped (plan.HoldEnds: a reservation's hold lasts until the
// reservation ends, a booking no longer stored has none), an owner left
// with none deleted. Only the records that change are written.
func recordHolds(b *batch, c *cycleState) {
	ends := plan.HoldEnds(c.view.res)
	after := map[plan.HoldOwner][]plan.Hold{}
	for owner, h := range c.view.holds {
		after[owner] = h.PlanHolds()
	}
	for _, act := range c.p.Actions {
		if h, ok := plan.HoldOfAction(act); ok {
			after[h.For] = plan.MergeHold(after[h.For], h)
		}
	}
	for _, owner := range slices.SortedFunc(maps.Keys(after), plan.HoldOwner.Compare) {
		hs := slices.DeleteFunc(after[owner], func(h plan.Hold) bool { return !ends(h).After(c.start) })
		old, stored := c.view.holds[owner]
		switch {
		case len(hs) == 0 && stored:
			b.deleteHold(owner)
		case len(hs) == 0:
		case !stored || !slices.EqualFunc(old.PlanHolds(), hs, plan.Hold.Equal):
			b.putHold(store.HoldOf(owner, hs))
		}
	}
}

// recordStops adds to b the intent of each stop the Actor will make (DESIGN
// L12: the claimant, or the reservation, of each stop is recorded before
// the first call, so that a successor finishes a preemption begun instead
// of choosing other victims): none while allocations stop for a claimant
// the broker cannot name (Execute then defers every stop), and none for a
// stop already recorded for the same owner (a stop resumed from a
// predecessor).
func recordStops(b *batch, c *cycleState, at time.Time) {
	if len(c.b.UnknownStopping) > 0 {
		return
	}
	for _, act := range c.p.Actions {
		if act.Action != plan.ActionStop {
			continue
		}
		if in, ok := c.view.intents[act.Alloc]; ok && in.For == act.For && in.Reservation == act.Reservation {
			continue
		}
		b.putIntent(intentOf(act, at))
	}
}

// recordAdmissions adds to b the admission of each job the plan admits
// from the holding pool: its record with admitted_at = at, the intent of
// the register (L12: written before the Nomad call; the Fence finds it
// and writes nothing more, fence.BeforeJob). A record written earlier in
// b is the one updated. The acceptance of a direct registration is left
// to the Fence: admitted_at makes a job in its pool accepted, so it is
// written only once the Actor accepts it (an admission it then skips,
// its victims not stopped, leaves a job in the holding pool, where
// admitted_at decides nothing until its next admission writes it again).
func recordAdmissions(b *batch, c *cycleState, at time.Time) {
	for _, act := range c.p.Actions {
		if act.Action != plan.ActionAdmit {
			continue
		}
		if v := c.b.Jobs[plan.JobKey{Namespace: act.Namespace, Job: act.Job}]; v == nil || !v.Holding {
			continue
		}
		id := store.JobID{Namespace: act.Namespace, Job: act.Job}
		rec, ok := b.jobs[id]
		if !ok {
			rec, ok = c.view.jobs[id]
		}
		if !ok {
			rec = store.JobRecord{FirstSeen: at, QueuedAt: at}
		}
		if rec.AdmittedAt.Equal(at) {
			continue // another group of the job
		}
		rec.AdmittedAt = at
		b.putJob(id, rec)
	}
}

// intentOf is the intent of a stop action, announced at at.
func intentOf(act plan.Action, at time.Time) store.Intent {
	return store.Intent{Alloc: act.Alloc, Action: "stop", Namespace: act.Namespace, Job: act.Job, For: act.For,
		Reservation: act.Reservation, Rule: string(act.Rule), At: at}
}

// act is step 5: the stops a predecessor announced and did not make come
// first (the plan counted them as stopping for their claimants), then the
// plan, through the Fence of this cycle.
func (a *Agent) act(ctx context.Context, c *cycleState) error {
	a.setActing(true, "", "act")
	p := c.p
	if len(c.stops.resume) > 0 {
		a.log.Info("finishing the preemption the previous leader began", "stops", len(c.stops.resume))
		resumed := *p // p is shared with the HTTP reads
		resumed.Actions = append(slices.Clone(c.stops.resume), p.Actions...)
		p = &resumed
	}
	a.actor.State = c.state
	a.actor.Fence = &fence{a: a, lock: c.lock, now: a.now, admittedAt: c.recordedAt}
	actx, cancel := context.WithTimeout(ctx, actTimeout)
	defer cancel()
	c.out = a.actor.Execute(actx, p, c.b) // flex max_run: the core's L11.max_run stop_job
	return nil
}

// account is step 6.
func (a *Agent) account(ctx context.Context, c *cycleState) error {
	out := c.out
	a.recorder.AddOutcome(out)
	a.recordPreemptions(ctx, c.lock, out)
	a.noteEvictions(c.tree, out, a.now())
	if ids, err := a.endBookings(ctx, c.lock, c.view.res, c.b, a.now()); err != nil {
		a.log.Error("failed to move ended bookings to history", "error", err)
	} else if len(ids) > 0 {
		a.log.Info("moved ended bookings to history", "reservations", ids)
	}
	var tree *quota.Node // the tree of the plan carried out: its namespaces name the victims' quota nodes
	if c.b != nil && c.b.Snapshot != nil {
		tree = c.b.Snapshot.Quota
	}
	a.metrics.ObserveOutcome(out, tree)
	if out.Admitted+out.Stopped+out.Suspended+out.Expired+out.MetaWrites+len(out.Errors)+out.JobsStopped+out.JobsSuspended+out.Held > 0 {
		a.log.Info("plan carried out", "admitted", out.Admitted, "stopped", out.Stopped, "suspended", out.Suspended,
			"jobs_stopped", out.JobsStopped, "jobs_suspended", out.JobsSuspended, "held", out.Held,
			"expired", out.Expired, "meta_writes", out.MetaWrites, "deferred_stops", out.Deferred, "errors", len(out.Errors),
			"dry_run", a.dryRun)
	}
	a.prune(ctx, c.lock, c.start, c.newTerm)
	return nil
}
