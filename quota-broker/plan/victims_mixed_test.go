package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/quota"
)

// twoChildTree is Quota1 (16, child-level preemption, workspace-a) over
// Quota1.1 (8, workspace-b) and Quota1.2 (8, workspace-c), as the repro
// snapshots of issue 16 have it.
func twoChildTree() *quota.Node {
	return &quota.Node{Name: "Quota1", GPUs: quota.Plain(16), ChildPreemption: true, Namespaces: []string{"workspace-a"},
		Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: quota.Plain(8), Namespaces: []string{"workspace-b"}},
			{Name: "Quota1.2", GPUs: quota.Plain(8), Namespaces: []string{"workspace-c"}},
		}}
}

// priorityTree is R (16, namespace r) over Q (8, priority preemption,
// namespace q) and S (8, namespace s).
func priorityTree() *quota.Node {
	return &quota.Node{Name: "R", GPUs: quota.Plain(16), Namespaces: []string{"r"}, Children: []*quota.Node{
		{Name: "Q", GPUs: quota.Plain(8), PriorityPreemption: true, Namespaces: []string{"q"}},
		{Name: "S", GPUs: quota.Plain(8), Namespaces: []string{"s"}},
	}}
}

// withinGrace gives quota node name a change a minute ago: its debt is not
// a victim yet (debt_grace 10 minutes, L9).
func withinGrace(b *snapBuilder, name string) *snapBuilder {
	var mark func(n *quota.Node)
	mark = func(n *quota.Node) {
		if n.Name == name {
			n.ChangedAt = t0.Add(-time.Minute)
		}
		for _, c := range n.Children {
			mark(c)
		}
	}
	mark(b.s.Quota)
	return b
}

// TestL5BatchUnitOfMixedStepsNamesItsLargestKeyRule is issue 16 item 1 and
// its family: every path that stops a batch unit whose allocations come
// from different L5 steps or rules. The unit's stops all carry the rule of
// its largest-key allocation (DESIGN L5) and a reason that names what it is
// (never a panic on a fact only another allocation of the unit has).
func TestL5BatchUnitOfMixedStepsNamesItsLargestKeyRule(t *testing.T) {
	for _, tc := range []struct {
		name  string
		snap  *Snapshot
		stops []stopRow
		admit []admitRow
		// reasons holds, per allocation stopped, a text its reason contains.
		reasons map[string]string
	}{{
		// The repro planner-panic-batch-debt-displaced.json in builder form:
		// c-train-1 is debt of Quota1.2 (grace passed, step 1), c-train-0
		// displaced at Quota1 by r-1 (L10.start): the unit is L10.start.
		name: "debt + displaced",
		snap: newSnap(twoChildTree()).nodes(3, 8, h100).
			alloc("c-train-0", "workspace-c", "c-train", "node-01", 8, started(30*time.Minute), priority(20)).
			alloc("c-train-1", "workspace-c", "c-train", "node-02", 8, started(30*time.Minute), priority(20)).
			alloc("a-infer-0", "workspace-a", "a-infer", "node-03", 1, jobType(JobService), started(5*time.Hour), priority(80)).
			booking("r-1", "workspace-b", "Quota1.1", 8, t0.Add(-time.Hour), t0.Add(24*time.Hour)).
			pending("workspace-b", "b-booked", 1, 8, pType(JobBatch), pReservation("r-1")).build(),
		stops: []stopRow{
			{Alloc: "c-train-0", Node: "node-01", Rule: RuleStart, For: "workspace-b/b-booked/server"},
			{Alloc: "c-train-1", Node: "node-02", Rule: RuleStart, For: "workspace-b/b-booked/server"},
		},
		admit: []admitRow{{Job: "b-booked", Nodes: []string{"node-01"}}},
		reasons: map[string]string{
			"c-train-0": "displaced at Quota1 by its active reservations; reclaimed for reservation r-1",
			"c-train-1": "stopped with its batch job for Quota1.1; its allocation c-train-0: displaced at Quota1",
		},
	}, {
		// c-train-1 is debt (step 1), c-train-0 a descendant's allocation
		// (step 2) for a Quota1 claimant: the unit is L5.2.
		name: "debt + step 2",
		snap: newSnap(twoChildTree()).nodes(2, 8, h100).
			alloc("c-train-0", "workspace-c", "c-train", "node-01", 8).
			alloc("c-train-1", "workspace-c", "c-train", "node-02", 8).
			pending("workspace-a", "a-new", 1, 8).build(),
		stops: []stopRow{
			{Alloc: "c-train-0", Node: "node-01", Rule: RuleChild, For: "workspace-a/a-new/server"},
			{Alloc: "c-train-1", Node: "node-02", Rule: RuleChild, For: "workspace-a/a-new/server"},
		},
		admit:   []admitRow{{Job: "a-new", Nodes: []string{"node-01"}}},
		reasons: map[string]string{"c-train-0": "child-level preemption for Quota1", "c-train-1": "child-level preemption for Quota1"},
	}, {
		// Q runs q-old (priority 95, oldest) and the priority-20 batch job
		// q-train, whose q-train-1 is Q's debt (step 1) and q-train-0 of
		// lower priority (step 3) for a priority-90 claimant: L5.3.
		name: "debt + step 3",
		snap: newSnap(priorityTree()).nodes(2, 8, h100).
			alloc("q-old", "q", "q-old", "node-01", 4, priority(95), started(5*time.Hour)).
			alloc("q-train-0", "q", "q-train", "node-01", 4, priority(20)).
			alloc("q-train-1", "q", "q-train", "node-02", 4, priority(20)).
			alloc("s-1", "s", "s-1", "node-02", 4).
			pending("q", "q-urgent", 1, 4, pPriority(90)).build(),
		stops: []stopRow{
			{Alloc: "q-train-0", Node: "node-01", Rule: RulePriority, For: "q/q-urgent/server"},
			{Alloc: "q-train-1", Node: "node-02", Rule: RulePriority, For: "q/q-urgent/server"},
		},
		admit:   []admitRow{{Job: "q-urgent", Nodes: []string{"node-01"}}},
		reasons: map[string]string{"q-train-0": "priority preemption in Q: priority 20 below 90", "q-train-1": "priority preemption in Q"},
	}, {
		// r-a books 8 GPUs of Quota1: c-train-0 is displaced at Quota1, and
		// c-train-1, Quota1.2's debt within its grace, is a descendant's
		// allocation (step 2) for a Quota1 claimant: L5.2.
		name: "displaced + step 2",
		snap: withinGrace(newSnap(twoChildTree()).nodes(3, 8, h100).
			alloc("c-train-0", "workspace-c", "c-train", "node-01", 8, started(30*time.Minute)).
			alloc("c-train-1", "workspace-c", "c-train", "node-02", 8, started(30*time.Minute)).
			alloc("a-infer-0", "workspace-a", "a-infer", "node-03", 1, jobType(JobService), started(5*time.Hour)).
			booking("r-a", "workspace-a", "Quota1", 8, t0.Add(-time.Hour), t0.Add(24*time.Hour)).
			pending("workspace-a", "a-booked", 1, 8, pType(JobBatch), pReservation("r-a")), "Quota1.2").build(),
		stops: []stopRow{
			{Alloc: "c-train-0", Node: "node-01", Rule: RuleChild, For: "workspace-a/a-booked/server"},
			{Alloc: "c-train-1", Node: "node-02", Rule: RuleChild, For: "workspace-a/a-booked/server"},
		},
		admit:   []admitRow{{Job: "a-booked", Nodes: []string{"node-01"}}},
		reasons: map[string]string{"c-train-0": "child-level preemption for Quota1", "c-train-1": "child-level preemption for Quota1"},
	}, {
		// r-q books 4 GPUs of Q: q-train-0 is displaced at Q, and q-train-1,
		// Q's debt within its grace, is of lower priority (step 3) for the
		// booking's priority-50 job: L5.3.
		name: "displaced + step 3",
		snap: withinGrace(newSnap(priorityTree()).nodes(2, 8, h100).
			alloc("q-old", "q", "q-old", "node-01", 4, priority(95), started(5*time.Hour)).
			alloc("q-train-0", "q", "q-train", "node-01", 4, priority(20)).
			alloc("q-train-1", "q", "q-train", "node-02", 4, priority(20)).
			alloc("s-1", "s", "s-1", "node-02", 4).
			booking("r-q", "q", "Q", 4, t0.Add(-time.Hour), t0.Add(24*time.Hour)).
			pending("q", "q-booked", 1, 4, pType(JobBatch), pReservation("r-q")), "Q").build(),
		stops: []stopRow{
			{Alloc: "q-train-0", Node: "node-01", Rule: RulePriority, For: "q/q-booked/server"},
			{Alloc: "q-train-1", Node: "node-02", Rule: RulePriority, For: "q/q-booked/server"},
		},
		admit:   []admitRow{{Job: "q-booked", Nodes: []string{"node-01"}}},
		reasons: map[string]string{"q-train-0": "priority preemption in Q: priority 20 below 50", "q-train-1": "priority preemption in Q"},
	}, {
		// An idle and a debt allocation of one batch job (both step 1): the
		// unit is L5.1, each reason naming what its allocation is.
		name: "idle + debt",
		snap: newSnap(twoChildTree()).nodes(2, 8, h100).
			alloc("c-run", "workspace-c", "c-run", "node-01", 8, started(5*time.Hour)).
			alloc("c-mix-0", "workspace-c", "c-mix", "node-02", 4, idle).
			alloc("c-mix-1", "workspace-c", "c-mix", "node-02", 4).
			pending("workspace-b", "b-new", 1, 8).build(),
		stops: []stopRow{
			{Alloc: "c-mix-0", Node: "node-02", Rule: RuleIdleDebt, For: "workspace-b/b-new/server"},
			{Alloc: "c-mix-1", Node: "node-02", Rule: RuleIdleDebt, For: "workspace-b/b-new/server"},
		},
		admit: []admitRow{{Job: "b-new", Nodes: []string{"node-02"}}},
		reasons: map[string]string{
			"c-mix-0": "idle allocation of Quota1.2 reclaimed for Quota1.1",
			"c-mix-1": "debt of Quota1.2 (nominal lowered, grace 10m0s passed) reclaimed for Quota1.1",
		},
	}, {
		// r-x starts in 30 minutes and holds node-01's GPUs; Nomad placed
		// one allocation of c-int there, the other on node-02. Its stop on
		// held GPUs stops the unit whole, both by the hold's rule.
		name: "on held GPUs + another node",
		snap: func() *Snapshot {
			s := newSnap(twoChildTree()).nodes(2, 8, h100).
				alloc("c-int-0", "workspace-c", "c-int", "node-01", 4, started(time.Minute)).
				alloc("c-int-1", "workspace-c", "c-int", "node-02", 4, started(time.Minute)).
				booking("r-x", "workspace-b", "Quota1.1", 8, t0.Add(30*time.Minute), t0.Add(24*time.Hour)).build()
			var ids []string
			for g := 0; g < 8; g++ {
				ids = append(ids, "node-01-gpu"+string(rune('0'+g)))
			}
			s.Holds = []Hold{{For: HoldOwner{Reservation: "r-x"}, Node: "node-01", GPUIDs: ids, Until: t0.Add(time.Hour)}}
			return s
		}(),
		stops: []stopRow{
			{Alloc: "c-int-0", Node: "node-01", Rule: RuleDrain, For: "//"},
			{Alloc: "c-int-1", Node: "node-02", Rule: RuleDrain, For: "//"},
		},
		reasons: map[string]string{"c-int-0": "on GPUs held for reservation r-x", "c-int-1": "on GPUs held for reservation r-x"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPlan(t, tc.snap)
			if diff := cmp.Diff(tc.stops, stopRows(p)); diff != "" {
				t.Errorf("stops (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.admit, admitRows(p)); diff != "" {
				t.Errorf("admits (-want +got):\n%s", diff)
			}
			for _, a := range actionsOf(p, ActionStop) {
				if want := tc.reasons[a.Alloc]; !strings.Contains(a.Reason, want) || strings.Contains(a.Reason, "<nil>") {
					t.Errorf("stop of %s: reason %q, want it to contain %q", a.Alloc, a.Reason, want)
				}
			}
		})
	}
}

// TestL9StopLeavesDebtInsideOnePlacement is issue 16 item 3 inside one
// claimant's placement (DESIGN L9: within a plan, a stopped allocation
// leaves usage, debt and displaced at once). Quota1.2 (8) runs c-old (8,
// started 10 minutes ago) and c-d (4, 5 minutes ago), its debt. A Quota1 job places two
// 8-GPU allocations: the first stops c-old, which loses the least work
// (L6), and c-d is debt no more; the second stops c-d and b-y on node-02
// as what they now are, descendants' allocations (L5.2), not c-d as debt
// (L5.1). Quota1.2's debt after the plan is 0.
func TestL9StopLeavesDebtInsideOnePlacement(t *testing.T) {
	s := newSnap(twoChildTree()).nodes(2, 8, h100).
		alloc("c-old", "workspace-c", "c-old", "node-01", 8, started(10*time.Minute)).
		alloc("c-d", "workspace-c", "c-d", "node-02", 4, started(5*time.Minute)).
		alloc("b-y", "workspace-b", "b-y", "node-02", 4, started(3*time.Hour)).
		pending("workspace-a", "a-two", 2, 8).build()
	want := []stopRow{
		{Alloc: "c-old", Node: "node-01", Rule: RuleChild, For: "workspace-a/a-two/server"},
		{Alloc: "c-d", Node: "node-02", Rule: RuleChild, For: "workspace-a/a-two/server"},
		{Alloc: "b-y", Node: "node-02", Rule: RuleChild, For: "workspace-a/a-two/server"},
	}
	for _, scan := range []bool{false, true} {
		p, _ := computeWith(t, s, scan)
		if diff := cmp.Diff(want, stopRows(p)); diff != "" {
			t.Errorf("scan %v: stops (-want +got):\n%s", scan, diff)
		}
		if u := usageOf(t, p, "Quota1.2"); u.Debt != 0 {
			t.Errorf("scan %v: Quota1.2 = %+v, want no debt after its allocations stopped", scan, u)
		}
	}
}

// TestL9StopLeavesDebtBetweenClaimants is the repro
// stale-debt-after-in-plan-stop.json in builder form (issue 16 item 3):
// a-new's stop of b-old (L5.2) brings Quota1.1 to 2 of 8, so b-new is debt
// no more and counts in Quota1's figure: c-new is not entitled and waits,
// and b-new is not stopped as debt.
func TestL9StopLeavesDebtBetweenClaimants(t *testing.T) {
	s := newSnap(twoChildTree()).nodes(2, 8, h100).
		alloc("b-old-0", "workspace-b", "b-old", "node-01", 8, started(24*time.Hour)).
		alloc("b-new-0", "workspace-b", "b-new", "node-02", 2, jobType(JobService)).
		alloc("a-svc-0", "workspace-a", "a-svc", "node-02", 6, jobType(JobService), priority(80)).
		pending("workspace-a", "a-new", 1, 8, pPriority(80), pSubmitted(2*time.Minute)).
		pending("workspace-c", "c-new", 1, 2, pType(JobBatch)).build()
	p := mustPlan(t, s)
	want := []stopRow{{Alloc: "b-old-0", Node: "node-01", Rule: RuleChild, For: "workspace-a/a-new/server"}}
	if diff := cmp.Diff(want, stopRows(p)); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]admitRow{{Job: "a-new", Nodes: []string{"node-01"}}}, admitRows(p)); diff != "" {
		t.Errorf("admits (-want +got):\n%s", diff)
	}
	w := actionsOf(p, ActionWait)
	wantWait := "Quota1 (above Quota1.2): 16 of 16 GPUs in use, debt excluded; 2 more needed"
	if len(w) != 1 || w[0].Job != "c-new" || w[0].Reason != wantWait {
		t.Errorf("waits = %+v, want c-new waiting with %q", w, wantWait)
	}
	if u := usageOf(t, p, "Quota1.1"); u.Debt != 0 || u.NonIdle != 2 {
		t.Errorf("Quota1.1 = %+v, want 2 non-idle and no debt", u)
	}
}

// TestL10BatchJobDisplacedWhole is issue 16 item 7 (DESIGN L10 Displaced
// works on L5's units). Team B booked 2 GPUs of Quota1.1 (8) while its own
// batch job b-train (two allocations of 4) runs there: the fill leaves
// b-train-1 displaced, and so the whole job is displaced at Quota1.1; the
// booking's job is admitted and b-train stopped whole (rule L10.start). An
// elastic b-train is displaced and stopped one allocation at a time. The
// debt allocations of a unit stay debt (the unit of "debt + displaced").
func TestL10BatchJobDisplacedWhole(t *testing.T) {
	build := func(opts ...allocOpt) *snapBuilder {
		return newSnap(twoChildTree()).nodes(1, 8, h100).
			alloc("b-train-0", "workspace-b", "b-train", "node-01", 4, opts...).
			alloc("b-train-1", "workspace-b", "b-train", "node-01", 4, opts...).
			booking("r-b", "workspace-b", "Quota1.1", 2, t0.Add(-time.Hour), t0.Add(24*time.Hour))
	}
	for _, tc := range []struct {
		name      string
		opts      []allocOpt
		displaced int
		stops     []stopRow
	}{
		{"batch job", nil, 8, []stopRow{
			{Alloc: "b-train-0", Node: "node-01", Rule: RuleStart, For: "workspace-b/b-run/server"},
			{Alloc: "b-train-1", Node: "node-01", Rule: RuleStart, For: "workspace-b/b-run/server"},
		}},
		{"elastic batch job", []allocOpt{elastic}, 4, []stopRow{
			{Alloc: "b-train-1", Node: "node-01", Rule: RuleStart, For: "workspace-b/b-run/server"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPlan(t, build(tc.opts...).build())
			if u := usageOf(t, p, "Quota1.1"); u.Displaced != tc.displaced {
				t.Errorf("with nothing pending, Quota1.1 = %+v, want %d displaced", u, tc.displaced)
			}
			p = mustPlan(t, build(tc.opts...).pending("workspace-b", "b-run", 1, 2, pType(JobBatch), pReservation("r-b")).build())
			if diff := cmp.Diff(tc.stops, stopRows(p)); diff != "" {
				t.Errorf("stops (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]admitRow{{Job: "b-run", Nodes: []string{"node-01"}}}, admitRows(p)); diff != "" {
				t.Errorf("admits (-want +got):\n%s", diff)
			}
			if u := usageOf(t, p, "Quota1.1"); u.Displaced != 0 {
				t.Errorf("after the plan, Quota1.1 = %+v, want nothing displaced: stopped allocations leave displaced (L9)", u)
			}
		})
	}
	t.Run("its debt allocations stay debt", func(t *testing.T) {
		s := newSnap(twoChildTree()).nodes(3, 8, h100).
			alloc("c-train-0", "workspace-c", "c-train", "node-01", 8, started(30*time.Minute)).
			alloc("c-train-1", "workspace-c", "c-train", "node-02", 8, started(30*time.Minute)).
			alloc("a-infer-0", "workspace-a", "a-infer", "node-03", 1, jobType(JobService), started(5*time.Hour)).
			booking("r-1", "workspace-b", "Quota1.1", 8, t0.Add(-time.Hour), t0.Add(24*time.Hour)).build()
		p := mustPlan(t, s)
		if u := usageOf(t, p, "Quota1"); u.Displaced != 8 || u.Debt != 8 {
			t.Errorf("Quota1 = %+v, want 8 displaced (c-train-0) and 8 debt (c-train-1)", u)
		}
	})
}

// TestL3RestoresEveryAncestor is issue 16 item 4 (DESIGN L3: a claimant
// entitled by yielding lower-priority allocations restores its node and
// every ancestor). G (40, namespace g running 32 GPUs) holds P (24), which
// holds Q (16, priority preemption) running two 4-GPU priority-20 jobs. Q
// and P stay within their nominal after a priority-90 4-GPU job is placed
// (12 of 16, 12 of 24), only G is over (44 of 40): the most recently
// started yielding job, q2, is stopped (L5.3) and G is at 40 again.
func TestL3RestoresEveryAncestor(t *testing.T) {
	tree := &quota.Node{Name: "G", GPUs: quota.Plain(40), Namespaces: []string{"g"}, Children: []*quota.Node{
		{Name: "P", GPUs: quota.Plain(24), Children: []*quota.Node{
			{Name: "Q", GPUs: quota.Plain(16), PriorityPreemption: true, Namespaces: []string{"q"}},
		}},
	}}
	b := newSnap(tree).nodes(6, 8, h100).
		alloc("g1", "g", "g1", "node-01", 8).
		alloc("g2", "g", "g2", "node-02", 8).
		alloc("g3", "g", "g3", "node-03", 8).
		alloc("g4", "g", "g4", "node-04", 8).
		alloc("q1", "q", "q1", "node-05", 4, priority(20), started(2*time.Hour)).
		alloc("q2", "q", "q2", "node-05", 4, priority(20), started(time.Hour))
	p := mustPlan(t, b.pending("q", "urgent", 1, 4, pPriority(90)).build())
	want := []stopRow{{Alloc: "q2", Node: "node-05", Rule: RulePriority, For: "q/urgent/server"}}
	if diff := cmp.Diff(want, stopRows(p)); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]admitRow{{Job: "urgent", Nodes: []string{"node-06"}}}, admitRows(p)); diff != "" {
		t.Errorf("admits (-want +got):\n%s", diff)
	}
	for q, nonIdle := range map[string]int{"G": 40, "P": 8, "Q": 8} {
		if u := usageOf(t, p, q); u.NonIdle != nonIdle {
			t.Errorf("%s after the plan = %+v, want %d non-idle", q, u, nonIdle)
		}
	}
}
