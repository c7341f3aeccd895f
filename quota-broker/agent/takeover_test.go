package agent

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/reservation"
	"github.com/gputide/gputide/quota-broker/store"
	"github.com/hashicorp/go-hclog"
)

// recAllocA is the live allocation of workspace-a/inference in the
// recorded state.
const recAllocA = "573417c7-7c93-1df1-3528-3c2427f1651a"

// lastOf returns the agent's last snapshot and plan.
func lastOf(a *Agent) (*plan.Snapshot, *plan.Plan) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastSnap, a.lastPlan
}

// timesOf is what the core's timed rules read of a snapshot (DESIGN L10,
// L11): each allocation's admission, max_run, kill_timeout and the
// reservation it is stopping for; each pending group's place in the order
// and queue time; the holds.
type timesOf struct {
	Allocations []plan.Allocation
	Pending     []plan.Pending
	Holds       []plan.Hold
}

func snapTimes(s *plan.Snapshot) timesOf {
	var out timesOf
	for _, al := range s.Allocations {
		out.Allocations = append(out.Allocations, plan.Allocation{ID: al.ID, AdmittedAt: al.AdmittedAt, MaxRun: al.MaxRun,
			KillTimeout: al.KillTimeout, StoppingForReservation: al.StoppingForReservation})
	}
	for _, pg := range s.Pending {
		out.Pending = append(out.Pending, plan.Pending{Namespace: pg.Namespace, Job: pg.Job, Group: pg.Group,
			SubmittedAt: pg.SubmittedAt, QueuedAt: pg.QueuedAt})
	}
	out.Holds = s.Holds
	return out
}

func allocStops(writes []string) []string {
	var out []string
	for _, w := range writes {
		if strings.HasPrefix(w, "PUT /v1/allocation/") {
			out = append(out, w)
		}
	}
	return out
}

// L12, L10, L11 (issue 9 items 2 and 5): a leader accepts the running flex
// request workspace-c/training (max_run 168h, admitted_at = its first
// start) and drains for booking r-1 (2 GPUs of Quota1.1 starting in 90 s):
// it holds the two free GPUs and stops workspace-a/inference (L10.drain),
// writing the job times, the hold and the intent to the store first. A
// second broker (a new Actor, the same store) takes over after a graceful
// stop: it plans with the same admitted_at (so L11.max_run stops at the
// same instant), the same first_seen and queued_at, the same holds and the
// drained allocation stopping for r-1, and repeats nothing: no stop, no
// hold or intent rewritten.
func TestSuccessorKeepsTheJobTimesAndHoldsAndRepeatsNothing(t *testing.T) {
	f := newFakeNomad(t)
	f.setJobMeta(t, "workspace-c", "training", "gputide_flex_max_run", "168h")
	f.dynamic = true
	st := store.NewMemory()
	ctx := context.Background()
	start := time.Now().Add(90 * time.Second).UTC().Truncate(time.Second)
	b := reservation.Booking{ID: "r-1", Namespace: "workspace-b", Node: "Quota1.1", GPUs: 2, AllocGPUs: 2, Start: start, End: start.Add(time.Hour)}
	if _, err := st.Guarded(ctx, func(*store.Guarded) ([]store.Change, error) {
		return []store.Change{store.PutReservation(b)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	const drained = "PUT /v1/allocation/" + recAllocA + "/stop"

	a1, stop1 := stoppableAgent(t, f, st, 5*time.Second, log.Named("first"))
	until(t, "the drain stop made", 10*time.Second, func() bool { return slices.Contains(f.allWrites(), drained) })
	// A cycle that read the hold and the requeue back from the store.
	mark := a1.Health().LastPlanAt
	until(t, "two more cycles", 10*time.Second, func() bool { return a1.Health().LastPlanAt.After(mark.Add(100 * time.Millisecond)) })
	stop1()
	snap1, _ := lastOf(a1)
	holds1, err := st.Holds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	intents1, err := st.Intents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	jobs1, err := st.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(holds1) != 1 || holds1[0].For != (plan.HoldOwner{Reservation: "r-1"}) || len(holds1[0].Nodes) != 1 ||
		len(holds1[0].Nodes[0].GPUIDs) != 2 || !holds1[0].Nodes[0].Until.Equal(start.Add(30*time.Second)) {
		t.Fatalf("stored holds = %+v, want 2 GPUs for r-1 until start + settle", holds1)
	}
	if len(intents1) != 1 || intents1[0].Alloc != recAllocA || intents1[0].Reservation != "r-1" || intents1[0].Rule != string(plan.RuleDrain) {
		t.Fatalf("stored intents = %+v, want the drain stop of %s for r-1", intents1, recAllocA)
	}
	flex := jobs1[store.JobID{Namespace: "workspace-c", Job: "training"}]
	// Accepted at the store's first start: admitted when it began to run,
	// the earliest start of its allocations in the recording.
	if first := time.Date(2026, 11, 29, 21, 11, 39, 898882578, time.UTC); !flex.AdmittedAt.Equal(first) {
		t.Fatalf("flex record %+v, want admitted_at %v (its first start)", flex, first)
	}
	writes1 := f.allWrites()
	// The drain stop's history names its booking, not an empty claimant.
	if list, err := st.Preemptions(ctx); err != nil || len(list) != 1 || list[0].Reservation != "r-1" || list[0].For != "" ||
		list[0].Alloc != recAllocA || list[0].Rule != string(plan.RuleDrain) {
		t.Fatalf("preemptions = %+v, %v: want the drain stop of %s for r-1", list, err, recAllocA)
	}

	a2, _ := stoppableAgent(t, f, st, 5*time.Second, log.Named("second"))
	until(t, "the successor leads", 10*time.Second, func() bool { h := a2.Health(); return h.IsLeader && h.Acting })
	mark = a2.Health().LastPlanAt
	until(t, "more cycles of the successor", 10*time.Second, func() bool { return a2.Health().LastPlanAt.After(mark.Add(200 * time.Millisecond)) })
	snap2, plan2 := lastOf(a2)

	if diff := cmp.Diff(snapTimes(snap1), snapTimes(snap2)); diff != "" {
		t.Fatalf("the successor's job times and holds (-first +second):\n%s", diff)
	}
	// Not vacuous: the flex request carries the stored admitted_at and
	// max_run; the drained allocation stops for r-1; the hold is there.
	maxRunStop := map[string]time.Time{}
	for _, al := range snap2.Allocations {
		if al.MaxRun > 0 {
			maxRunStop[al.ID] = al.AdmittedAt.Add(al.MaxRun - al.KillTimeout)
		}
		if al.ID == recAllocA && al.StoppingForReservation != "r-1" {
			t.Errorf("drained allocation %s stopping for %q, want r-1", al.ID, al.StoppingForReservation)
		}
	}
	want := flex.AdmittedAt.Add(168*time.Hour - 2*time.Minute)
	if diff := cmp.Diff(map[string]time.Time{recAllocC1: want, recAllocC2: want}, maxRunStop); diff != "" {
		t.Fatalf("L11.max_run stop instants (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(holds1[0].PlanHolds(), snap2.Holds); diff != "" {
		t.Fatalf("snapshot holds (-stored +got):\n%s", diff)
	}
	for _, act := range plan2.Actions {
		if act.Action == plan.ActionStop || act.Action == plan.ActionStopJob {
			t.Errorf("the successor plans a stop: %+v", act)
		}
	}
	// The successor's Executes did nothing at all (a hold re-emitted from
	// the plan, without the stored one, shows here as held=1).
	if strings.Contains(logs.String(), "second: plan carried out") {
		t.Errorf("the successor carried a plan out")
	}
	if got := allocStops(f.allWrites()); !slices.Equal(got, allocStops(writes1)) {
		t.Fatalf("allocation stops after the takeover = %v, want only the first leader's %v", got, allocStops(writes1))
	}
	holds2, _ := st.Holds(ctx)
	intents2, _ := st.Intents(ctx)
	jobs2, _ := st.Jobs(ctx)
	if diff := cmp.Diff(holds1, holds2); diff != "" {
		t.Errorf("holds rewritten (-first +second):\n%s", diff)
	}
	if diff := cmp.Diff(intents1, intents2); diff != "" {
		t.Errorf("intents rewritten (-first +second):\n%s", diff)
	}
	for id, rec := range jobs1 {
		r2 := jobs2[id]
		if !r2.FirstSeen.Equal(rec.FirstSeen) || !r2.QueuedAt.Equal(rec.QueuedAt) || !r2.AdmittedAt.Equal(rec.AdmittedAt) {
			t.Errorf("job %s times changed: %+v -> %+v", id, rec, r2)
		}
	}
}

// L11 (issue 9 item 5): the times come from the store's jobs/ records, not
// from Nomad: a successor plans the flex request workspace-c/training with
// the admitted_at its predecessor wrote (not its allocations' first start),
// and the waiting workspace-b/training in the order of its first_seen
// (not its SubmitTime), queued since its queued_at.
func TestSuccessorPlansWithTheStoredJobTimes(t *testing.T) {
	f := newFakeNomad(t)
	f.setJobMeta(t, "workspace-c", "training", "gputide_flex_max_run", "168h")
	st := store.NewMemory()
	ctx := context.Background()
	old, err := st.Lock(ctx, "old-leader")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	admitted, seen, queued := now.Add(-time.Hour), now.Add(-72*time.Hour), now.Add(-10*time.Minute)
	for id, rec := range map[store.JobID]store.JobRecord{
		{Namespace: "workspace-c", Job: "training"}:  {FirstSeen: admitted, QueuedAt: admitted, AdmittedAt: admitted},
		{Namespace: "workspace-a", Job: "inference"}: {FirstSeen: seen, QueuedAt: seen, AdmittedAt: seen},
		{Namespace: "workspace-b", Job: "training"}:  {FirstSeen: seen, QueuedAt: queued},
	} {
		if err := st.PutJob(ctx, old, id, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a := leaderAgent(t, f, st, 5*time.Second, nil)
	until(t, "leading", 10*time.Second, func() bool { h := a.Health(); return h.IsLeader && h.Acting })
	mark := a.Health().LastPlanAt
	until(t, "a cycle as leader", 10*time.Second, func() bool { return a.Health().LastPlanAt.After(mark) })
	snap, _ := lastOf(a)
	got := snapTimes(snap)
	got.Allocations = slices.DeleteFunc(got.Allocations, func(al plan.Allocation) bool { return al.MaxRun == 0 })
	want := timesOf{
		Allocations: []plan.Allocation{
			{ID: recAllocC1, AdmittedAt: admitted, MaxRun: 168 * time.Hour, KillTimeout: 2 * time.Minute},
			{ID: recAllocC2, AdmittedAt: admitted, MaxRun: 168 * time.Hour, KillTimeout: 2 * time.Minute},
		},
		Pending: []plan.Pending{{Namespace: "workspace-b", Job: "training", Group: "worker", SubmittedAt: seen, QueuedAt: queued}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the successor's job times (-want +got):\n%s", diff)
	}
}

// The recorded (complete) allocation of workspace-b/training: 3 GPUs.
const recAllocB = "1b43c480-eb67-e215-31e7-cc0ac6da9d1f"

// L11, L12 (issue 9 item 5): a leader admits the flex request
// workspace-b/training (max_run 1h) into 4 free GPUs, writing admitted_at
// before the move; Nomad starts its allocation a few seconds later. A
// successor (a new Actor, the same store) counts max_run from the stored
// admitted_at, not from the allocation's start, so L11.max_run stops it at
// the instant its predecessor would have, and it repeats nothing.
func TestSuccessorCountsMaxRunFromTheAdmissionItsPredecessorMade(t *testing.T) {
	f := newFakeNomad(t)
	f.setJobMeta(t, "workspace-b", "training", "gputide_flex_max_run", "1h")
	f.dynamic = true
	f.setAlloc(t, recAllocA, func(al map[string]any) { al["ClientStatus"], al["DesiredStatus"] = "complete", "stop" })
	st := store.NewMemory()
	ctx := context.Background()
	var logs syncBuffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	jobB := store.JobID{Namespace: "workspace-b", Job: "training"}
	_, stop1 := stoppableAgent(t, f, st, 5*time.Second, log.Named("first"))
	var admitted time.Time
	until(t, "the flex request admitted (and the meta errors written)", 10*time.Second, func() bool {
		rec, err := st.Job(ctx, jobB)
		admitted = rec.AdmittedAt
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, j := range []string{"workspace-b/training", "workspace-c/bad-idle", "workspace-c/bad-maxrun"} {
			if !slices.Contains(f.registered, j) {
				return false
			}
		}
		return err == nil && !admitted.IsZero()
	})
	stop1()
	// Nomad places the admitted job 3 s after the admission.
	started := admitted.Add(3 * time.Second)
	f.setAlloc(t, recAllocB, func(al map[string]any) {
		al["ClientStatus"], al["DesiredStatus"] = "running", "run"
		states := al["TaskStates"].(map[string]any)
		train := states["train"].(map[string]any)
		train["StartedAt"], train["FinishedAt"], train["State"] = started.Format(time.RFC3339Nano), nil, "running"
	})
	writes1 := f.allWrites()

	a2, _ := stoppableAgent(t, f, st, 5*time.Second, log.Named("second"))
	until(t, "the successor leads", 10*time.Second, func() bool { h := a2.Health(); return h.IsLeader && h.Acting })
	mark := a2.Health().LastPlanAt
	until(t, "more cycles of the successor", 10*time.Second, func() bool { return a2.Health().LastPlanAt.After(mark.Add(200 * time.Millisecond)) })
	snap, p := lastOf(a2)
	var got []plan.Allocation
	for _, al := range snap.Allocations {
		if al.MaxRun > 0 {
			got = append(got, plan.Allocation{ID: al.ID, AdmittedAt: al.AdmittedAt, MaxRun: al.MaxRun, StartedAt: al.StartedAt})
		}
	}
	want := []plan.Allocation{{ID: recAllocB, AdmittedAt: admitted, MaxRun: time.Hour, StartedAt: started}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the successor's flex allocation (-want +got):\n%s", diff)
	}
	stopAt := admitted.Add(time.Hour - plan.DefaultKillTimeout)
	if p.WakeAt.IsZero() || p.WakeAt.After(stopAt) {
		t.Errorf("the successor plans again at %v, after the L11.max_run stop at %v", p.WakeAt, stopAt)
	}
	if strings.Contains(logs.String(), "second: plan carried out") || !slices.Equal(f.allWrites(), writes1) {
		t.Errorf("the successor wrote to Nomad: %v after %v", f.allWrites()[len(writes1):], writes1)
	}
}
