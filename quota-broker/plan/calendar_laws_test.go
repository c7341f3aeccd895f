package plan

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/quota"
)

func pReservation(id string) pendOpt { return func(p *Pending) { p.Reservation = id } }

// booking adds a reservation of gpus GPUs for ns in quota q over [start, end).
func (b *snapBuilder) booking(id, ns, q string, gpus int, start, end time.Time) *snapBuilder {
	b.s.Reservations = append(b.s.Reservations, Reservation{ID: id, Namespace: ns, Quota: q, GPUs: gpus,
		AllocGPUs: min(gpus, 8), Start: start, End: end})
	return b
}

// displacedCluster is 8 nodes x 8 GPUs: workspace-b runs 6 whole-node
// jobs started 6h..1h ago (its nominal 48), workspace-c 2; reservation r-b
// books 16 GPUs of Quota1.1 over [t0 - 1m, t0 + 1h).
func displacedCluster() *snapBuilder {
	b := newSnap(referenceTree()).nodes(8, 8, h100)
	for i := 1; i <= 6; i++ {
		b.alloc(fmt.Sprintf("b%d", i), "workspace-b", fmt.Sprintf("t%d", i), nodeID(i), 8, started(time.Duration(7-i)*time.Hour))
	}
	b.alloc("c7", "workspace-c", "c7", nodeID(7), 8).alloc("c8", "workspace-c", "c8", nodeID(8), 8)
	return b.booking("r-b", "workspace-b", "Quota1.1", 16, t0.Add(-time.Minute), t0.Add(time.Hour))
}

// TestL10DisplacedAndStart: the 16 booked GPUs displace workspace-b's two
// youngest jobs (Usage booked 16, displaced 16); a job of the reservation
// is entitled by its booking alone and stops exactly them (rule L10.start).
func TestL10DisplacedAndStart(t *testing.T) {
	p := mustPlan(t, displacedCluster().build())
	u := usageOf(t, p, "Quota1.1")
	if u.Booked != 16 || u.Displaced != 16 {
		t.Fatalf("Quota1.1 usage = %+v, want booked 16 and displaced 16", u)
	}
	s := displacedCluster().pending("workspace-b", "res", 2, 8, pType(JobBatch), pReservation("r-b")).build()
	p = mustPlan(t, s)
	want := []brief{
		{Action: ActionStop, Alloc: "b6", Job: "t6", GPUs: 8, Rule: RuleStart},
		{Action: ActionStop, Alloc: "b5", Job: "t5", GPUs: 8, Rule: RuleStart},
		{Action: ActionAdmit, Job: "res", Count: 2, GPUs: 8, Rule: RuleReservation},
	}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("actions (-want +got):\n%s", d)
	}
	if u := usageOf(t, p, "Quota1.1"); u.Displaced != 0 || u.NonIdle != 48 {
		t.Errorf("Quota1.1 after = %+v, want displaced 0, nonidle 48", u)
	}
}

// TestL10ReservationJobLimitedByItsBooking: a job of the reservation asking
// more than the booking has left waits with the numbers.
func TestL10ReservationJobLimitedByItsBooking(t *testing.T) {
	s := displacedCluster().pending("workspace-b", "res", 3, 8, pType(JobBatch), pReservation("r-b")).build()
	p := mustPlan(t, s)
	w := actionsOf(p, ActionWait)
	if len(w) != 1 || w[0].Rule != RuleReservation || w[0].Reason != "reservation r-b: 0 of 16 GPUs in use; 8 more needed for 24 asked" {
		t.Fatalf("waits = %+v", w)
	}
}

// TestL10ReservationJobWaitsForTheStart: before the start a job naming the
// reservation waits (rule L10), and the plan wakes when the drain begins
// (start - drain_horizon).
func TestL10ReservationJobWaitsForTheStart(t *testing.T) {
	start := t0.Add(2 * time.Hour)
	s := newSnap(referenceTree()).nodes(2, 8, h100).
		booking("r-b", "workspace-b", "Quota1.1", 16, start, start.Add(time.Hour)).
		pending("workspace-b", "res", 1, 8, pReservation("r-b")).build()
	p := mustPlan(t, s)
	w := actionsOf(p, ActionWait)
	if len(w) != 1 || w[0].Rule != RuleReservation || w[0].Reason != "reservation r-b starts at 2026-12-01T10:00:00Z" {
		t.Fatalf("waits = %+v", w)
	}
	if want := start.Add(-time.Hour); !p.WakeAt.Equal(want) {
		t.Errorf("wake_at = %s, want start - drain_horizon %s", p.WakeAt, want)
	}
}

// TestL10OtherJobsSeeTheNominalLessBooked: with 16 of Quota1.1's 48 booked
// from t0 + 30m, a non-flex job of workspace-b counts booked(N) over
// drain_horizon (1h) and a flex request over its max_run: the flex
// request whose max_run crosses the start waits, one that ends before it
// is admitted.
func TestL10OtherJobsSeeTheNominalLessBooked(t *testing.T) {
	start := t0.Add(3 * time.Hour)
	base := func() *snapBuilder {
		b := newSnap(referenceTree()).nodes(8, 8, h100)
		for i := 1; i <= 5; i++ {
			b.alloc(fmt.Sprintf("b%d", i), "workspace-b", fmt.Sprintf("t%d", i), nodeID(i), 8)
		}
		return b.booking("r-b", "workspace-b", "Quota1.1", 16, start, start.Add(4*time.Hour))
	}
	// Non-flex: the booking starts beyond drain_horizon, so 40 + 8 fit 48.
	p := mustPlan(t, base().pending("workspace-b", "plain", 1, 8).build())
	if a := actionsOf(p, ActionAdmit); len(a) != 1 {
		t.Fatalf("non-flex: actions %+v, want admitted", p.Actions)
	}
	// Flex with max_run 4h crosses the start: 40 + 8 > 48 - 16.
	p = mustPlan(t, base().pending("workspace-b", "long", 1, 8, pFlex(24*time.Hour, 4*time.Hour)).build())
	w := actionsOf(p, ActionWait)
	if len(w) != 1 || w[0].Reason != "Quota1.1: 40 GPUs in use, of the 32 it may use while 16 of its 48 are booked; 8 more needed" {
		t.Fatalf("flex crossing the start: actions %+v", p.Actions)
	}
	// Flex with max_run 2h ends before the start.
	p = mustPlan(t, base().pending("workspace-b", "short", 1, 8, pFlex(24*time.Hour, 2*time.Hour)).build())
	if a := actionsOf(p, ActionAdmit); len(a) != 1 {
		t.Fatalf("flex ending before the start: actions %+v, want admitted", p.Actions)
	}
	// Within drain_horizon of the start, the non-flex job waits too.
	s := base().pending("workspace-b", "plain", 1, 8).build()
	s.Time = start.Add(-30 * time.Minute)
	for i := range s.Allocations {
		s.Allocations[i].StartedAt = s.Time.Add(-time.Hour)
	}
	p = mustPlan(t, s)
	if w := actionsOf(p, ActionWait); len(w) != 1 {
		t.Fatalf("non-flex within drain_horizon: actions %+v, want a wait", p.Actions)
	}
}

func killTimeout(d time.Duration) allocOpt { return func(a *Allocation) { a.KillTimeout = d } }

// TestL10DrainAtStartLessKillTimeoutAndMargin: a 16-GPU booking of
// Quota1.1 starts at t0 + 90s; every GPU is taken by idle allocations with
// kill_timeout 30s. Within drain_horizon the plan holds nothing and stops
// nothing until start - (30s + 60s); the first plan at or after that
// instant stops two whole-node idle jobs (rule L10.drain) and holds their
// GPUs until start + settle.
func TestL10DrainAtStartLessKillTimeoutAndMargin(t *testing.T) {
	start := t0.Add(90 * time.Second)
	build := func(now time.Time) *Snapshot {
		b := newSnap(referenceTree()).nodes(4, 8, h100)
		for i := 1; i <= 4; i++ {
			b.alloc(fmt.Sprintf("i%d", i), "workspace-c", fmt.Sprintf("idle%d", i), nodeID(i), 8, idle,
				killTimeout(30*time.Second), started(time.Duration(i)*time.Hour))
		}
		s := b.booking("r-b", "workspace-b", "Quota1.1", 16, start, start.Add(2*time.Hour)).build()
		s.Time = now
		return s
	}
	p := mustPlan(t, build(t0.Add(-time.Nanosecond)))
	if len(p.Actions) != 0 || !p.WakeAt.Equal(t0) {
		t.Fatalf("before start - 90s: actions %+v, wake_at %s; want none and %s", p.Actions, p.WakeAt, t0)
	}
	p = mustPlan(t, build(t0))
	want := []brief{
		{Action: ActionStop, Alloc: "i1", Job: "idle1", GPUs: 8, Rule: RuleDrain, Reservation: "r-b"},
		{Action: ActionHold, GPUs: 8, Rule: RuleDrain, Reservation: "r-b"},
		{Action: ActionStop, Alloc: "i2", Job: "idle2", GPUs: 8, Rule: RuleDrain, Reservation: "r-b"},
		{Action: ActionHold, GPUs: 8, Rule: RuleDrain, Reservation: "r-b"},
	}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("at start - 90s (-want +got):\n%s", d)
	}
	holds := actionsOf(p, ActionHold)
	if holds[0].Node != "node-01" || holds[1].Node != "node-02" || !holds[0].Until.Equal(start.Add(30*time.Second)) {
		t.Errorf("holds = %+v, want node-01 and node-02 until start + settle", holds)
	}
}

// TestL10HoldsWholeNodesAndNoIdleJobOnThem: a 2x8 booking within
// drain_horizon holds two whole free nodes at once (bin-packing leaves the
// partly used node alone), and an idle job finds no room on held GPUs.
func TestL10HoldsWholeNodesAndNoIdleJobOnThem(t *testing.T) {
	start := t0.Add(30 * time.Minute)
	s := newSnap(referenceTree()).nodes(3, 8, h100).
		alloc("c1", "workspace-c", "small", "node-01", 4).
		booking("r-b", "workspace-b", "Quota1.1", 16, start, start.Add(time.Hour)).build()
	p := mustPlan(t, s)
	holds := actionsOf(p, ActionHold)
	if len(holds) != 2 || holds[0].Node != "node-02" || holds[1].Node != "node-03" || holds[0].GPUs != 8 || holds[1].GPUs != 8 {
		t.Fatalf("holds = %+v, want node-02 and node-03 whole", holds)
	}
	if len(actionsOf(p, ActionStop)) != 0 {
		t.Errorf("stops = %v, want none (free GPUs are held at once)", stops(p))
	}
	// The next plan sees the holds: nothing more is held, and an idle job
	// of 8 GPUs finds no free node (node-01 has 4).
	s.Holds = []Hold{
		{For: HoldOwner{Reservation: "r-b"}, Node: "node-02", GPUIDs: holds[0].GPUIDs, Until: holds[0].Until},
		{For: HoldOwner{Reservation: "r-b"}, Node: "node-03", GPUIDs: holds[1].GPUIDs, Until: holds[1].Until},
	}
	s.Pending = []Pending{{Namespace: "workspace-c", Job: "borrow", Group: "g", Type: JobBatch, Priority: 50, Count: 1,
		GPUs: 8, NodePool: "default", Idle: true, SubmittedAt: t0}}
	p = mustPlan(t, s)
	want := []brief{{Action: ActionWait, Job: "borrow", Count: 1, GPUs: 8, Rule: RuleAdmission}}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("with the holds (-want +got):\n%s", d)
	}
	// A job of the reservation at its start takes the held GPUs.
	s.Time = start
	s.Pending = []Pending{{Namespace: "workspace-b", Job: "res", Group: "g", Type: JobBatch, Priority: 50, Count: 2,
		GPUs: 8, NodePool: "default", Reservation: "r-b", SubmittedAt: t0}}
	p = mustPlan(t, s)
	a := actionsOf(p, ActionAdmit)
	if len(a) != 1 || !cmp.Equal(a[0].Nodes, []string{"node-02", "node-03"}) || a[0].Rule != RuleReservation {
		t.Fatalf("admits = %+v, want node-02 and node-03 by rule L10", a)
	}
}

// TestL10HeldGPUsTakenByAnotherJobAreReclaimed: an allocation that Nomad
// placed on GPUs held for the reservation is the reservation's victim at
// once (rule L10.drain).
func TestL10HeldGPUsTakenByAnotherJobAreReclaimed(t *testing.T) {
	start := t0.Add(30 * time.Minute)
	s := newSnap(referenceTree()).nodes(1, 8, h100).
		alloc("c1", "workspace-c", "intruder", "node-01", 8, started(time.Minute)).
		booking("r-b", "workspace-b", "Quota1.1", 8, start, start.Add(time.Hour)).build()
	ids := s.Allocations[0].GPUIDs
	s.Holds = []Hold{{For: HoldOwner{Reservation: "r-b"}, Node: "node-01", GPUIDs: ids, Until: start.Add(30 * time.Second)}}
	p := mustPlan(t, s)
	want := []brief{{Action: ActionStop, Alloc: "c1", Job: "intruder", GPUs: 8, Rule: RuleDrain, Reservation: "r-b"}}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

// TestL10EndStopsExactlyTheBookingsJobs: at end - kill_timeout the jobs of
// the reservation (and only they) are stopped by a job stop (rule
// L10.end); a moment before, nothing is, and wake_at names the instant.
// The window crosses a DST change in New York: the instants are kept.
func TestL10EndStopsExactlyTheBookingsJobs(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	start := time.Date(2026, 10, 31, 12, 0, 0, 0, ny) // EDT, -04:00
	end := start.Add(24 * time.Hour)                  // 2026-11-01 11:00 EST, -05:00
	stopAt := end.Add(-20 * time.Second)
	build := func(now time.Time) *Snapshot {
		s := newSnap(referenceTree()).nodes(2, 8, h100).
			alloc("r1", "workspace-b", "res", "node-01", 8, reservation("r-b"), killTimeout(20*time.Second)).
			alloc("r2", "workspace-b", "res", "node-02", 4, reservation("r-b"), killTimeout(5*time.Second)).
			alloc("o1", "workspace-b", "other", "node-02", 4).
			booking("r-b", "workspace-b", "Quota1.1", 16, start, end).build()
		s.Time = now
		for i := range s.Allocations {
			s.Allocations[i].StartedAt = start
		}
		return s
	}
	p := mustPlan(t, build(stopAt.Add(-time.Nanosecond)))
	if len(p.Actions) != 0 || !p.WakeAt.Equal(stopAt) {
		t.Fatalf("before: actions %+v, wake_at %s; want none and %s", p.Actions, p.WakeAt, stopAt)
	}
	if got := stopAt.UTC().Format(time.RFC3339); got != "2026-11-01T15:59:40Z" {
		t.Fatalf("end - kill_timeout = %s, want 24h after the start less 20s", got)
	}
	p = mustPlan(t, build(stopAt))
	want := []brief{{Action: ActionStopJob, Job: "res", GPUs: 12, Rule: RuleEnd, Reservation: "r-b"}}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("at end - kill_timeout (-want +got):\n%s", d)
	}
}

// TestL12WakeAt: wake_at is the earliest instant after now at which time
// alone changes the plan, among a debt grace end, a flex request's
// max_wait and a reservation's drain; none of them gives no wake_at.
func TestL12WakeAt(t *testing.T) {
	tree := referenceTree()
	tree.Children[0].GPUs, tree.Children[1].GPUs = quota.Plain(8), quota.Plain(120)
	tree.Children[0].ChangedAt = t0.Add(-4 * time.Minute) // debt grace 10m: ends at t0 + 6m
	build := func() *snapBuilder {
		return newSnap(tree).nodes(4, 8, h100).
			alloc("b1", "workspace-b", "t1", "node-01", 8, started(2*time.Hour)).
			alloc("b2", "workspace-b", "t2", "node-02", 8, started(time.Hour))
	}
	p := mustPlan(t, build().build())
	if u := usageOf(t, p, "Quota1.1"); u.Debt != 8 {
		t.Fatalf("Quota1.1 debt = %d, want 8", u.Debt)
	}
	if want := t0.Add(6 * time.Minute); !p.WakeAt.Equal(want) {
		t.Errorf("debt only: wake_at = %s, want the end of the grace %s", p.WakeAt, want)
	}
	s := build().
		pending("workspace-c", "flex", 1, 8, pFlex(2*time.Hour, time.Hour), pSubmitted(118*time.Minute)).
		booking("r-c", "workspace-c", "Quota1.2", 8, t0.Add(70*time.Minute), t0.Add(3*time.Hour)).build()
	s.Nodes = s.Nodes[:2] // no room: the flex request waits
	p = mustPlan(t, s)
	if want := t0.Add(2*time.Minute + time.Nanosecond); !p.WakeAt.Equal(want) {
		t.Errorf("wake_at = %s, want the flex request's expiry %s", p.WakeAt, want)
	}
	s = newSnap(referenceTree()).nodes(1, 8, h100).build()
	if p = mustPlan(t, s); !p.WakeAt.IsZero() {
		t.Errorf("nothing timed: wake_at = %s, want none", p.WakeAt)
	}
}

// TestL10HeldGPUsLentToIdleJobsOnlyAfterSettle: from start + settle until
// the end, GPUs still held for the reservation are lent to idle jobs,
// never to other non-idle work.
func TestL10HeldGPUsLentToIdleJobsOnlyAfterSettle(t *testing.T) {
	start := t0.Add(-time.Minute)
	build := func(idleJob bool) *Snapshot {
		s := newSnap(referenceTree()).nodes(1, 8, h100).
			booking("r-b", "workspace-b", "Quota1.1", 8, start, start.Add(time.Hour)).build()
		s.Holds = []Hold{{For: HoldOwner{Reservation: "r-b"}, Node: "node-01",
			GPUIDs: []string{"node-01-gpu0", "node-01-gpu1", "node-01-gpu2", "node-01-gpu3",
				"node-01-gpu4", "node-01-gpu5", "node-01-gpu6", "node-01-gpu7"}, Until: start.Add(30 * time.Second)}}
		s.Pending = []Pending{{Namespace: "workspace-c", Job: "j", Group: "g", Type: JobBatch, Priority: 50, Count: 1,
			GPUs: 8, NodePool: "default", Idle: idleJob, SubmittedAt: t0}}
		return s
	}
	p := mustPlan(t, build(true))
	if a := actionsOf(p, ActionAdmit); len(a) != 1 || a[0].Rule != RuleIdle {
		t.Fatalf("idle job: actions %+v, want admitted on the lent GPUs", p.Actions)
	}
	p = mustPlan(t, build(false))
	if w := actionsOf(p, ActionWait); len(w) != 1 || w[0].Reason != `no node has 8 free GPUs in any datacenter, node pool "default", even with preemption; 8 GPUs held for reservation r-b` {
		t.Fatalf("non-idle job: actions %+v, want a wait for room", p.Actions)
	}
	// Before start + settle the idle job waits too.
	s := build(true)
	s.Holds[0].Until = t0.Add(time.Minute)
	p = mustPlan(t, s)
	if w := actionsOf(p, ActionWait); len(w) != 1 {
		t.Fatalf("idle job before the hold's end: actions %+v, want a wait", p.Actions)
	}
}

// TestL10DrainVictimStillStoppingIsNotStoppedAgain: the plan after a drain
// sees its victim still live, stopping for the reservation, on GPUs held
// for it: nothing is stopped or held again, and the GPUs count as the
// reservation's (a job of the reservation at its start takes them).
func TestL10DrainVictimStillStoppingIsNotStoppedAgain(t *testing.T) {
	start := t0.Add(time.Minute)
	s := newSnap(referenceTree()).nodes(1, 8, h100).
		alloc("i1", "workspace-c", "borrow", "node-01", 8, idle).
		booking("r-b", "workspace-b", "Quota1.1", 8, start, start.Add(time.Hour)).build()
	s.Allocations[0].StoppingForReservation = "r-b"
	s.Holds = []Hold{{For: HoldOwner{Reservation: "r-b"}, Node: "node-01", GPUIDs: s.Allocations[0].GPUIDs, Until: start.Add(30 * time.Second)}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	p := mustPlan(t, s)
	if len(p.Actions) != 0 {
		t.Fatalf("actions %+v, want none", p.Actions)
	}
	s.Time = start
	s.Pending = []Pending{{Namespace: "workspace-b", Job: "res", Group: "g", Type: JobBatch, Priority: 50, Count: 1,
		GPUs: 8, NodePool: "default", Reservation: "r-b", SubmittedAt: t0}}
	p = mustPlan(t, s)
	if a := actionsOf(p, ActionAdmit); len(a) != 1 || len(stops(p)) != 0 {
		t.Fatalf("at the start: actions %+v, want the reservation's job admitted on the freed GPUs, nothing stopped", p.Actions)
	}
}

// TestL10LentGPUsAreNoRoomForOtherNonIdleJobs: an idle job on GPUs that a
// reservation lends after start + settle is no victim that makes room
// for another namespace's non-idle job (the GPUs stay held); a job of
// the reservation reclaims it (L5 step 1).
func TestL10LentGPUsAreNoRoomForOtherNonIdleJobs(t *testing.T) {
	start := t0.Add(-time.Hour)
	build := func(ns, res string) *Snapshot {
		s := newSnap(referenceTree()).nodes(1, 8, h100).
			alloc("i1", "workspace-c", "borrow", "node-01", 8, idle).
			booking("r-b", "workspace-b", "Quota1.1", 8, start, start.Add(2*time.Hour)).build()
		s.Holds = []Hold{{For: HoldOwner{Reservation: "r-b"}, Node: "node-01", GPUIDs: s.Allocations[0].GPUIDs,
			Until: start.Add(30 * time.Second)}}
		s.Pending = []Pending{{Namespace: ns, Job: "j", Group: "g", Type: JobBatch, Priority: 50, Count: 1,
			GPUs: 8, NodePool: "default", Reservation: res, SubmittedAt: t0}}
		return s
	}
	p := mustPlan(t, build("workspace-a", ""))
	if len(stops(p)) != 0 || len(actionsOf(p, ActionWait)) != 1 {
		t.Fatalf("other namespace: actions %+v, want a wait and nothing stopped", p.Actions)
	}
	p = mustPlan(t, build("workspace-b", "r-b"))
	want := []brief{
		{Action: ActionStop, Alloc: "i1", Job: "borrow", GPUs: 8, Rule: RuleIdleDebt},
		{Action: ActionAdmit, Job: "j", Count: 1, GPUs: 8, Rule: RuleReservation},
	}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("the reservation's job (-want +got):\n%s", d)
	}
}
