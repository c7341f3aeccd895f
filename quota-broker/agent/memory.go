package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/store"
)

// memory is the broker's one memory between cycles (issue 18; DESIGN §6,
// L10, L11, L12): the store's job records (first_seen, queued_at,
// admitted_at, the status still to write on a job stopped whole, since
// when its idle groups have had allocations unplaced), intents (the
// claimant of each stop announced) and holds, the bookings and the
// leader's name. Nothing else in the broker keeps these facts from one
// cycle to the next: the Actor keeps none.
//
//   - The leader loads the records once when it takes the lock (load, at
//     the first cycle of the term) and keeps them current from its own
//     writes (commit: the store first, fenced by the lock, then the
//     memory); while it leads it does not watch them (only the leader
//     writes them, so its own are the newest).
//   - A standby keeps them current from the store's blocking queries
//     (watchRecords: store.WatchRecords), so a successor reads exactly
//     what its predecessor wrote.
//   - The bookings follow the store's guarded state (store.WatchGuarded),
//     on the leader and on standbys alike, since any broker takes them.
//   - A dry run loads the records once and writes its own only here
//     (persist false): it never writes the store.
//
// Each cycle reads a view of it (view): a copy, so that the cycle's
// writes, and a concurrent watch, do not change what it planned on.
type memory struct {
	st      store.Store
	persist bool // write the store before the memory (false: a dry run)

	mu       sync.Mutex
	rec      store.Records
	res      []plan.Reservation
	resSeen  bool  // res holds the store's bookings
	leading  bool  // rec is this agent's own: watches do not replace it
	needLoad bool  // load before the next view (a new term, a partial write)
	recErr   error // the records watch's last error, nil once it answers again
	resErr   error // the bookings watch's last error, likewise
	// roles is closed and replaced when leading changes (watchRecords).
	roles chan struct{}
}

func newMemory(st store.Store, persist bool) *memory {
	return &memory{st: st, persist: persist, needLoad: true, rec: emptyRecords(), roles: make(chan struct{})}
}

// role reports whether the memory is the leader's, and a channel closed
// when that changes.
func (m *memory) role() (leading bool, changed <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leading, m.roles
}

// setRole sets leading and asks for a load; m.mu is held.
func (m *memory) setRole(leading bool) {
	m.leading, m.needLoad = leading, true
	m.recErr = nil // a leader does not watch the records; a standby's watch starts again
	close(m.roles)
	m.roles = make(chan struct{})
}

func emptyRecords() store.Records {
	return store.Records{Jobs: map[store.JobID]store.JobRecord{}, Intents: map[string]store.Intent{},
		Holds: map[plan.HoldOwner]store.Hold{}}
}

// lead marks the memory as the leader's from now on: the next view loads
// the records from the store first (the term's one read of them).
func (m *memory) lead() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setRole(true)
}

// stand marks the memory as a standby's: the store's blocking queries keep
// it current, and the next view reads the store again in case they
// delivered nothing since.
func (m *memory) stand() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setRole(false)
}

// watched applies a delivery of store.WatchRecords: the leader's name
// always, the records unless this agent leads (or is a dry run, whose
// records are its own). An error makes view fail until the store answers.
func (m *memory) watched(r *store.Records, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.recErr = err; err != nil {
		return
	}
	m.rec.Leader = r.Leader
	if m.leading || !m.persist {
		return
	}
	m.rec, m.needLoad = *r, false
}

// guarded applies a delivery of store.WatchGuarded (or the state a guarded
// write returned): the bookings, as the core's reservations.
func (m *memory) guarded(g *store.Guarded, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.resErr = err; err != nil {
		return
	}
	m.res, m.resSeen = planReservations(g.Reservations), true
}

// load reads the records from the store when needed (a new term, a
// standby's first cycle, a dry run's first, a write that failed half-way).
func (m *memory) load(ctx context.Context) error {
	m.mu.Lock()
	need := m.needLoad
	m.mu.Unlock()
	if !need {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	r, err := m.st.ReadRecords(ctx)
	if err != nil {
		return fmt.Errorf("failed to load the job records, intents and holds: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rec, m.needLoad, m.recErr = *r, false, nil
	return nil
}

// errNoBookings: the bookings have not been read yet (planning without
// them would break them, L10).
var errNoBookings = errors.New("the bookings have not been read from the store yet")

// view loads the records if needed and returns a copy of the memory, or
// the store's error (L12: no plan acts on a memory the store may have
// moved past).
func (m *memory) view(ctx context.Context) (*view, error) {
	if err := m.load(ctx); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.recErr != nil:
		return nil, m.recErr
	case m.resErr != nil:
		return nil, m.resErr
	case !m.resSeen:
		return nil, errNoBookings
	}
	return &view{jobs: maps.Clone(m.rec.Jobs), intents: maps.Clone(m.rec.Intents), holds: maps.Clone(m.rec.Holds),
		res: slices.Clone(m.res), leader: m.rec.Leader}, nil
}

// intent returns the intent recorded for an allocation.
func (m *memory) intent(alloc string) (store.Intent, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in, ok := m.rec.Intents[alloc]
	return in, ok
}

// stopping is the number of allocations with an intent: stops announced
// or made and not yet gone (the health's figure).
func (m *memory) stopping() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.rec.Intents)
}

// job returns the record of a job.
func (m *memory) job(id store.JobID) (store.JobRecord, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.rec.Jobs[id]
	return rec, ok
}

// batch is a set of record writes: what goes to the store
// (store.WriteRecords) and the same changes for the memory.
type batch struct {
	writes []store.RecordWrite
	apply  []func(*store.Records)
	jobs   map[store.JobID]store.JobRecord // the job records put, the last of each
	gone   map[store.JobID]bool            // the job records deleted
}

func (b *batch) putJob(id store.JobID, rec store.JobRecord) {
	if b.jobs == nil {
		b.jobs = map[store.JobID]store.JobRecord{}
	}
	b.jobs[id] = rec
	b.writes = append(b.writes, store.PutJobRecord(id, rec))
	b.apply = append(b.apply, func(r *store.Records) { r.Jobs[id] = rec })
}

func (b *batch) deleteJob(id store.JobID) {
	if b.gone == nil {
		b.gone = map[store.JobID]bool{}
	}
	b.gone[id] = true
	delete(b.jobs, id)
	b.writes = append(b.writes, store.DeleteJobRecord(id))
	b.apply = append(b.apply, func(r *store.Records) { delete(r.Jobs, id) })
}

func (b *batch) putIntent(in store.Intent) {
	b.writes = append(b.writes, store.PutIntentRecord(in))
	b.apply = append(b.apply, func(r *store.Records) { r.Intents[in.Alloc] = in })
}

func (b *batch) deleteIntent(alloc string) {
	b.writes = append(b.writes, store.DeleteIntentRecord(alloc))
	b.apply = append(b.apply, func(r *store.Records) { delete(r.Intents, alloc) })
}

func (b *batch) putHold(h store.Hold) {
	b.writes = append(b.writes, store.PutHoldRecord(h))
	b.apply = append(b.apply, func(r *store.Records) { r.Holds[h.For] = h })
}

func (b *batch) deleteHold(owner plan.HoldOwner) {
	b.writes = append(b.writes, store.DeleteHoldRecord(owner))
	b.apply = append(b.apply, func(r *store.Records) { delete(r.Holds, owner) })
}

// commit writes b to the store (fenced by lock; not in a dry run), then
// applies it to the memory. A write that failed after some of its
// transactions made the memory load the store again at the next view.
func (m *memory) commit(ctx context.Context, lock *store.Lock, b *batch) error {
	if len(b.writes) == 0 {
		return nil
	}
	if m.persist {
		ctx, cancel := context.WithTimeout(ctx, storeTimeout)
		defer cancel()
		if err := m.st.WriteRecords(ctx, lock, b.writes); err != nil {
			m.mu.Lock()
			m.needLoad = true
			m.mu.Unlock()
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, fn := range b.apply {
		fn(&m.rec)
	}
	return nil
}

// view is what one cycle reads of the memory: the job records, intents,
// holds, bookings and the leader's name, as they were when it began.
type view struct {
	jobs    map[store.JobID]store.JobRecord
	intents map[string]store.Intent
	holds   map[plan.HoldOwner]store.Hold
	res     []plan.Reservation
	leader  string
}

// jobID is the store's name of a job.
func jobID(k plan.JobKey) store.JobID {
	return store.JobID{Namespace: k.Namespace, Job: k.Job}
}

// record is what the build reads of the job's record (build.JobRecord):
// first_seen (L11: the order of L3), queued_at (the broker's last move of
// it back to the holding pool; max_wait counts from it, L11.expire),
// admitted_at (max_run and settle count from it, L11.max_run, L11.settle;
// L12: a successor does not take the jobs its predecessor admitted for
// direct registrations) and the status still to write on a job the
// broker stopped whole (jobs/<ns>/<job>.stopped; rules L10.end,
// L11.max_run). One lookup per job and cycle: 10,000 jobs read once.
func (v *view) record(k plan.JobKey) build.JobRecord {
	r, ok := v.jobs[jobID(k)]
	return build.JobRecord{Recorded: ok, FirstSeen: r.FirstSeen, QueuedAt: r.QueuedAt, AdmittedAt: r.AdmittedAt,
		Stopped: build.StopStatus{Reason: r.Stopped.Reason, JobModifyIndex: r.Stopped.JobModifyIndex}}
}

// unplacedSince is since when an idle group has had allocations unplaced
// (jobs/<ns>/<job>.unplaced_since), zero when not recorded.
func (v *view) unplacedSince(g plan.GroupKey) time.Time {
	return v.jobs[jobID(g.JobKey())].Unplaced[g.Group]
}

// planHolds returns the stored holds that have not ended at now (ends:
// plan.HoldEnds of the view's bookings), one per owner and node, in
// plan.Hold.Compare order: the snapshot's holds (DESIGN L10). The hold of
// a booking no longer stored has ended.
func (v *view) planHolds(now time.Time) []plan.Hold {
	ends := plan.HoldEnds(v.res)
	var out []plan.Hold
	for _, h := range v.holds {
		for _, ph := range h.PlanHolds() {
			if ends(ph).After(now) {
				out = append(out, ph)
			}
		}
	}
	slices.SortFunc(out, plan.Hold.Compare)
	return out
}

// stops is what the view's intents say of the allocations being stopped
// (DESIGN L12).
type stops struct {
	// forGroup: allocation -> the claimant it stops for (StoppingFor).
	forGroup map[string]plan.GroupKey
	// forRes: allocation -> the reservation it stops for (rules L10.drain,
	// L10.start: StoppingForReservation).
	forRes map[string]string
	// resume: the stops a predecessor announced and did not make, for
	// this leader to make first (once).
	resume []plan.Action
	// stale: the intents to delete.
	stale []string
}

// stopping reads the intents back against Nomad's state s (L12: a
// successor repeats nothing and finishes what was begun). An intent counts
// as StoppingFor (or, for a stop made for a reservation, as
// StoppingForReservation) while its allocation is live and either being
// stopped, or announced less than grace ago (the call may still be
// reaching Nomad), or announced and not made while its claimant still
// waits in the holding pool: the predecessor died between the stops of
// one preemption, and the stop is returned in resume. The intents whose
// allocation is gone, or whose stop was never made and whose claimant no
// longer waits (the plan decides again; for a reservation's stop, the next
// drain), are stale. Intents are read in allocation ID order.
func (v *view) stopping(s *watch.State, holdingPool string, now time.Time, grace time.Duration) stops {
	out := stops{forGroup: map[string]plan.GroupKey{}, forRes: map[string]string{}}
	for _, id := range slices.Sorted(maps.Keys(v.intents)) {
		in := v.intents[id]
		al, ok := s.Alloc(in.Alloc)
		made := ok && (al.Stopping() || now.Sub(in.At) < grace)
		switch {
		case !ok || !al.Live():
			out.stale = append(out.stale, in.Alloc)
		case in.Reservation != "" && made:
			out.forRes[in.Alloc] = in.Reservation
		case in.Reservation != "":
			out.stale = append(out.stale, in.Alloc)
		case made:
			out.forGroup[in.Alloc] = in.For
		case claimantWaits(s, in.For, holdingPool):
			out.forGroup[in.Alloc] = in.For
			out.resume = append(out.resume, plan.Action{Action: plan.ActionStop, Namespace: in.Namespace, Job: in.Job,
				Group: al.Group, Alloc: in.Alloc, Node: al.NodeID, GPUs: len(al.GPUIDs), Rule: plan.Rule(in.Rule), For: in.For,
				Reason: "finishing the preemption the previous leader began (L12)"})
		default:
			out.stale = append(out.stale, in.Alloc)
		}
	}
	return out
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

// watchStore keeps the memory current from the store's blocking queries
// until ctx ends: the bookings (and, with Consul, the tree: onTree) on
// every agent, the records on standbys (watchRecords).
func (a *Agent) watchStore(ctx context.Context, onTree func(*store.Guarded)) {
	var wg sync.WaitGroup
	if !a.dryRun {
		wg.Add(1)
		go func() { defer wg.Done(); a.watchRecords(ctx) }()
	}
	var failing bool
	_ = a.store.WatchGuarded(ctx, func(g *store.Guarded, err error) {
		a.mem.guarded(g, err)
		if err != nil {
			if !failing {
				a.log.Warn("the store is unavailable: not acting until it answers (L12)", "error", err)
			}
			failing = true
			return
		}
		failing = false
		if onTree != nil {
			onTree(g)
		}
		a.poke()
	})
	wg.Wait()
}

// watchRecords follows the store's records (store.WatchRecords) while
// this agent stands by, until ctx ends. A leader does not: it writes them
// itself, and would read every job record back after each of its writes.
func (a *Agent) watchRecords(ctx context.Context) {
	for ctx.Err() == nil {
		leading, changed := a.mem.role()
		if leading {
			select {
			case <-ctx.Done():
			case <-changed:
			}
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = a.store.WatchRecords(wctx, a.mem.watched) }()
		select {
		case <-ctx.Done():
		case <-changed:
		}
		cancel()
		<-done
	}
}

// setLeaderName keeps the name of the lock's holder, as a cycle's view has
// it, for the health reads (this agent's own while it holds the lock).
func (a *Agent) setLeaderName(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lock == nil {
		a.leaderName = name
	}
}
