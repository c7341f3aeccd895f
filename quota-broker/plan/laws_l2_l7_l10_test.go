package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// Tests of laws L2 (accounting), L7 (no ping-pong) and L10 (reservations,
// the part the core has: allocations of an active reservation are never
// victims). See docs/design.md for where each law is built.

// ignoreFor leaves the claimant of a stop out of comparisons: its form is
// not what these laws are about.
var ignoreFor = cmpopts.IgnoreFields(Action{}, "For")

// L2: an allocation's GPUs are the device instances assigned to it, booked
// on its quota node and every ancestor; the GPUs it holds are not free.
func TestL2AnAllocationCountsTheGPUInstancesAssignedToIt(t *testing.T) {
	s := newSnap(referenceTree()).nodes(1, 8, h100).
		alloc("b1", "workspace-b", "train", "node-01", 3).
		alloc("c1", "workspace-c", "dev", "node-01", 1, idle).
		pending("workspace-c", "fits", 1, 4, pType(JobBatch)).
		pending("workspace-c", "toobig", 1, 5, pType(JobBatch), pSubmitted(time.Second)).build()
	p := mustPlan(t, s)
	want := []Usage{
		{Quota: "Quota1", Nominal: 128, Used: 8, NonIdle: 7, Lendable: 120},
		{Quota: "Quota1.1", Nominal: 48, Used: 3, NonIdle: 3, Lendable: 45},
		{Quota: "Quota1.2", Nominal: 80, Used: 5, NonIdle: 4, Lendable: 75},
	}
	if diff := cmp.Diff(want, p.Usage); diff != "" {
		t.Errorf("usage after admitting 4 GPUs beside 3 + 1 held (-want +got):\n%s", diff)
	}
	// 8 - 3 - 1 = 4 GPUs free: the 4-GPU job is admitted, the 5-GPU one waits
	// for room, and nothing is stopped (b1 is no victim for workspace-c).
	wantActions := []Action{
		{Action: ActionAdmit, Namespace: "workspace-c", Job: "fits", Group: "server", Nodes: []string{"node-01"}, Count: 1, GPUs: 4, Rule: RuleAdmission},
	}
	got := actionsOf(p, ActionAdmit)
	if diff := cmp.Diff(wantActions, got, ignoreFor, cmpopts.IgnoreFields(Action{}, "Reason")); diff != "" {
		t.Errorf("admits (-want +got):\n%s", diff)
	}
	if w := actionsOf(p, ActionWait); len(w) != 1 || w[0].Job != "toobig" || len(stops(p)) != 0 {
		t.Errorf("waits %+v, stops %v; want toobig waiting and no stop", w, stops(p))
	}
}

// L2: the ledger is derived from the snapshot's live allocations alone, on
// every plan: an allocation gone terminal (absent from the next snapshot)
// leaves it with exactly its GPUs, and planning a snapshot again gives the
// same figures (nothing carries over between plans, pooled buffers
// included).
func TestL2TheLedgerIsRederivedFromTheLiveAllocations(t *testing.T) {
	build := func(withC2 bool) *Snapshot {
		b := newSnap(referenceTree()).nodes(2, 8, h100).
			alloc("b1", "workspace-b", "train", "node-01", 8).
			alloc("c1", "workspace-c", "dev", "node-02", 2, idle)
		if withC2 {
			b.alloc("c2", "workspace-c", "infer", "node-02", 4, jobType(JobService))
		}
		return b.build()
	}
	first := mustPlan(t, build(true)).Usage
	without := mustPlan(t, build(false)).Usage
	again := mustPlan(t, build(true)).Usage
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("the same snapshot planned twice gives other usage (-first +again):\n%s", diff)
	}
	want := []Usage{
		{Quota: "Quota1", Nominal: 128, Used: 10, NonIdle: 8, Lendable: 118},
		{Quota: "Quota1.1", Nominal: 48, Used: 8, NonIdle: 8, Lendable: 40},
		{Quota: "Quota1.2", Nominal: 80, Used: 2, NonIdle: 0, Lendable: 78},
	}
	if diff := cmp.Diff(want, without); diff != "" {
		t.Errorf("usage once c2 (4 GPUs) is terminal (-want +got):\n%s", diff)
	}
	for i := range first {
		if d := first[i].Used - without[i].Used; first[i].Quota != "Quota1.1" && d != 4 {
			t.Errorf("%s: c2 counted %d GPUs, want its 4", first[i].Quota, d)
		}
	}
}

// L7: GPUs freed for a claimant go to that claimant. The victim's own job,
// pending again in the same plan (an idle job of higher priority, and a
// non-idle one stopped under child-level preemption), is not placed back
// onto them: it waits.
func TestL7FreedGPUsGoToTheClaimantNotBackToTheVictim(t *testing.T) {
	for _, tc := range []struct {
		name   string
		victim allocOpt
		again  []pendOpt
		rule   Rule
	}{
		{"idle victim", idle, []pendOpt{pIdle, pPriority(100), pType(JobBatch)}, RuleIdleDebt},
		{"victim under child-level preemption", priority(50), []pendOpt{pPriority(50), pType(JobBatch)}, RuleChild},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSnap(referenceTree()).nodes(1, 8, h100).
				alloc("v", "workspace-c", "victim", "node-01", 8, tc.victim).
				pending("workspace-a", "chat", 1, 8, pPriority(80)).
				pending("workspace-c", "victim", 1, 8, append(tc.again, pGroup("worker"))...).build()
			p := mustPlan(t, s)
			want := []Action{
				{Action: ActionStop, Alloc: "v", Namespace: "workspace-c", Job: "victim", Group: "worker", Node: "node-01", GPUs: 8, Rule: tc.rule},
				{Action: ActionAdmit, Namespace: "workspace-a", Job: "chat", Group: "server", Nodes: []string{"node-01"}, Count: 1, GPUs: 8, Rule: RuleAdmission},
				{Action: ActionWait, Namespace: "workspace-c", Job: "victim", Group: "worker", Count: 1, GPUs: 8},
			}
			got := p.Actions
			if diff := cmp.Diff(want, got, ignoreFor, cmpopts.IgnoreFields(Action{}, "Reason", "Rule")); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if len(got) == 3 && got[0].Rule != tc.rule {
				t.Errorf("stop rule %s, want %s", got[0].Rule, tc.rule)
			}
		})
	}
}

// L7: an allocation admitted in a plan is never a victim in that plan, so
// a second claimant does not take the GPUs freed for the first: of two
// inference jobs that both need the one node held by an idle job, the
// higher-priority one gets it and the other waits; the idle job is stopped
// once.
func TestL7ASecondClaimantDoesNotTakeTheFirstsFreedGPUs(t *testing.T) {
	s := newSnap(referenceTree()).nodes(1, 8, h100).
		alloc("v", "workspace-b", "borrow", "node-01", 8, idle).
		pending("workspace-a", "chat", 1, 8, pPriority(90)).
		pending("workspace-a", "search", 1, 8, pPriority(80)).build()
	p := mustPlan(t, s)
	if got := stops(p); !cmp.Equal(got, []string{"v"}) {
		t.Errorf("stops %v, want [v]", got)
	}
	a, w := actionsOf(p, ActionAdmit), actionsOf(p, ActionWait)
	if len(a) != 1 || a[0].Job != "chat" || len(w) != 1 || w[0].Job != "search" {
		t.Errorf("admits %+v, waits %+v; want chat admitted and search waiting", a, w)
	}
}

// L10: allocations of a reservation whose window [start, end) holds the
// snapshot's time are never victims; before the window they are ordinary
// candidates; from its end on the booking's job is stopped whole (rule
// L10.end, a job stop) instead.
func TestL10AllocationsOfAnActiveReservationAreNeverVictims(t *testing.T) {
	for _, tc := range []struct {
		name       string
		start, end time.Time
		stopped    bool
		jobStopped bool // by L10.end
	}{
		{"active", t0.Add(-time.Hour), t0.Add(time.Hour), false, false},
		{"starts now", t0, t0.Add(time.Hour), false, false},
		{"ended now (end is exclusive)", t0.Add(-time.Hour), t0, false, true},
		{"starts later", t0.Add(time.Minute), t0.Add(time.Hour), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newSnap(referenceTree()).nodes(1, 8, h100).
				alloc("r", "workspace-b", "booked", "node-01", 8, idle, reservation("res-1")).
				pending("workspace-a", "chat", 1, 8, pPriority(80))
			b.s.Reservations = []Reservation{{ID: "res-1", Namespace: "workspace-b", Quota: "Quota1.1", GPUs: 8, Start: tc.start, End: tc.end}}
			p := mustPlan(t, b.build())
			want := []string(nil)
			if tc.stopped {
				want = []string{"r"}
			}
			if got := stops(p); !cmp.Equal(got, want) {
				t.Errorf("stops %v, want %v", got, want)
			}
			var jobStops []string
			for _, a := range actionsOf(p, ActionStopJob) {
				if a.Rule == RuleEnd && a.Reservation == "res-1" {
					jobStops = append(jobStops, a.Job)
				}
			}
			if wantJobs := tc.jobStopped; wantJobs != cmp.Equal(jobStops, []string{"booked"}) {
				t.Errorf("L10.end job stops %v, want booked stopped: %v", jobStops, wantJobs)
			}
		})
	}
}
