package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/quota"
)

// Law tests of issue 8 items 1 and 2: L6 compares victim sets of different
// nodes by class, then work lost, then GPUs, then node ID; and under
// priority preemption a node's lower-priority allocations yield to its
// claimant (L3), which the plan then stops to restore the quota (L6, rule
// L5.3).

// stopRow is what the tests compare of a stop action.
type stopRow struct {
	Alloc, Node string
	Rule        Rule
	For         string
}

func stopRows(p *Plan) []stopRow {
	var out []stopRow
	for _, a := range actionsOf(p, ActionStop) {
		out = append(out, stopRow{Alloc: a.Alloc, Node: a.Node, Rule: a.Rule, For: a.For.String()})
	}
	return out
}

// admitRow is what the tests compare of an admit action.
type admitRow struct {
	Job   string
	Nodes []string
}

func admitRows(p *Plan) []admitRow {
	var out []admitRow
	for _, a := range actionsOf(p, ActionAdmit) {
		out = append(out, admitRow{Job: a.Job, Nodes: a.Nodes})
	}
	return out
}

func TestL6NodesCompareClassThenWorkLostThenGPUs(t *testing.T) {
	// Two or three 8-GPU nodes, each filled by workspace-c's non-idle
	// training (never a victim for workspace-b) except for the idle
	// victims each case places; a 1-GPU claimant of workspace-b.
	type victim struct {
		id, job, node string
		gpus          int
		opts          []allocOpt
	}
	cases := map[string]struct {
		victims   []victim
		wantStops []string
		wantNode  string
	}{
		// The example: 1 GPU-hour lost on X, not 16 on Y.
		"less work lost before fewer GPUs": {
			victims: []victim{
				{"x", "x", "node-01", 2, []allocOpt{priority(20), started(30 * time.Minute)}},
				{"y", "y", "node-02", 1, []allocOpt{priority(20), started(16 * time.Hour)}},
			},
			wantStops: []string{"x"}, wantNode: "node-01",
		},
		"the lower class before less work lost": {
			victims: []victim{
				{"x", "x", "node-01", 1, []allocOpt{priority(30), started(time.Minute)}},
				{"y", "y", "node-02", 1, []allocOpt{priority(20), started(16 * time.Hour)}},
			},
			wantStops: []string{"y"}, wantNode: "node-02",
		},
		// Recency would pick x (started later); work lost picks y.
		"recency is not compared between nodes": {
			victims: []victim{
				{"x", "x", "node-01", 4, []allocOpt{priority(20), started(30 * time.Minute)}},
				{"y", "y", "node-02", 1, []allocOpt{priority(20), started(time.Hour)}},
			},
			wantStops: []string{"y"}, wantNode: "node-02",
		},
		// 2 GPUs x 1 h and 1 GPU x 2 h lose the same work.
		"equal work lost: fewer GPUs": {
			victims: []victim{
				{"x", "x", "node-01", 2, []allocOpt{priority(20), started(time.Hour)}},
				{"y", "y", "node-02", 1, []allocOpt{priority(20), started(2 * time.Hour)}},
			},
			wantStops: []string{"y"}, wantNode: "node-02",
		},
		"all equal: the lower node ID": {
			victims: []victim{
				{"y", "y", "node-02", 1, []allocOpt{priority(20), started(time.Hour)}},
				{"x", "x", "node-01", 1, []allocOpt{priority(20), started(time.Hour)}},
			},
			wantStops: []string{"x"}, wantNode: "node-01",
		},
		// A batch unit's work counts all its allocations, also those on
		// other nodes: x's job loses 2 x 30 min, more than y's 50 min.
		"a batch unit's work lost counts every allocation": {
			victims: []victim{
				{"x1", "x", "node-01", 1, []allocOpt{priority(20), started(30 * time.Minute)}},
				{"x3", "x", "node-03", 1, []allocOpt{priority(20), started(30 * time.Minute)}},
				{"y", "y", "node-02", 1, []allocOpt{priority(20), started(50 * time.Minute), jobType(JobService)}},
			},
			wantStops: []string{"y"}, wantNode: "node-02",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := newSnap(referenceTree()).nodes(3, 8, h100)
			held := map[string]int{}
			for _, v := range tc.victims {
				b.alloc(v.id, "workspace-c", v.job, v.node, v.gpus, append([]allocOpt{idle}, v.opts...)...)
				held[v.node] += v.gpus
			}
			for i := 1; i <= 3; i++ {
				n := nodeID(i)
				b.alloc("fill-"+n, "workspace-c", "fill-"+n, n, 8-held[n])
			}
			p := mustPlan(t, b.pending("workspace-b", "claim", 1, 1).build())
			if diff := cmp.Diff(tc.wantStops, stops(p)); diff != "" {
				t.Errorf("stops (-want +got):\n%s", diff)
			}
			want := []admitRow{{Job: "claim", Nodes: []string{tc.wantNode}}}
			if diff := cmp.Diff(want, admitRows(p)); diff != "" {
				t.Errorf("admits (-want +got):\n%s", diff)
			}
		})
	}
}

// nine is 09:00 on t0's day, the instant of the priority preemption
// examples.
var nine = t0.Add(time.Hour)

// startedAt sets an allocation's start to hh:mm on t0's day.
func startedAt(hh, mm int) allocOpt {
	return func(a *Allocation) {
		a.StartedAt = time.Date(t0.Year(), t0.Month(), t0.Day(), hh, mm, 0, 0, time.UTC)
	}
}

// yieldTree is the reference tree with Quota1.1 = 24 and priority
// preemption.
func yieldTree() *quota.Node {
	tree := referenceTree()
	tree.Children[0].GPUs, tree.Children[0].PriorityPreemption = quota.Plain(24), true
	return tree
}

// yieldCluster is the example: Quota1.1 full with three 8-GPU jobs
// of priority 20 (07:00), 20 (08:00) and 30 (08:30) on node-01..03, and
// freeNodes more empty nodes; at 09:00 a priority-90 8-GPU job is pending.
func yieldCluster(freeNodes int) *snapBuilder {
	b := newSnap(yieldTree()).nodes(3+freeNodes, 8, h100).
		alloc("b-0700", "workspace-b", "t0700", "node-01", 8, priority(20), startedAt(7, 0)).
		alloc("b-0800", "workspace-b", "t0800", "node-02", 8, priority(20), startedAt(8, 0)).
		alloc("b-0830", "workspace-b", "t0830", "node-03", 8, priority(30), startedAt(8, 30))
	b.s.Time = nine
	return b
}

func TestL3PriorityPreemptionYieldsToTheClaimant(t *testing.T) {
	for _, tc := range []struct {
		name     string
		free     int
		wantNode string
	}{
		{"no free node: L6 stops it and takes its GPUs", 0, "node-02"},
		{"a free node elsewhere: placed there, then the quota is restored", 1, "node-04"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := yieldCluster(tc.free).pending("workspace-b", "urgent", 1, 8, pPriority(90)).build()
			p := mustPlan(t, s)
			wantStops := []stopRow{{Alloc: "b-0800", Node: "node-02", Rule: RulePriority, For: "workspace-b/urgent/server"}}
			if diff := cmp.Diff(wantStops, stopRows(p)); diff != "" {
				t.Errorf("stops (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]admitRow{{Job: "urgent", Nodes: []string{tc.wantNode}}}, admitRows(p)); diff != "" {
				t.Errorf("admits (-want +got):\n%s", diff)
			}
			wantUsage := Usage{Quota: "Quota1.1", Nominal: 24, Used: 24, NonIdle: 24, Lendable: 0}
			if diff := cmp.Diff(wantUsage, usageOf(t, p, "Quota1.1")); diff != "" {
				t.Errorf("Quota1.1 usage (-want +got):\n%s", diff)
			}
			want := "Quota1.1: 24 of 24 GPUs in use after admission; allocations of lower priority yield (L5.3)"
			if a := actionsOf(p, ActionAdmit); len(a) != 1 || a[0].Reason != want {
				t.Errorf("admits = %+v, want one with reason %q", a, want)
			}
		})
	}
}

func TestL3PriorityPreemptionWaitsWhenTooFewYield(t *testing.T) {
	// Only the two priority-20 jobs (16 GPUs) are below 25; the claimant
	// asks for 24 and would need 8 more: it waits and nothing is stopped.
	s := yieldCluster(1).pending("workspace-b", "urgent", 3, 8, pPriority(25)).build()
	p := mustPlan(t, s)
	if got := stops(p); len(got) != 0 {
		t.Fatalf("stops = %v, want none", got)
	}
	w := actionsOf(p, ActionWait)
	want := "Quota1.1: 8 of 24 GPUs in use, not counting 16 of lower priority that yield; 8 more needed for 24 asked"
	if len(w) != 1 || w[0].Rule != RuleAdmission || w[0].Reason != want {
		t.Fatalf("waits = %+v, want one L3 wait %q", w, want)
	}
}

func TestL3PriorityPreemptionWithoutTheSettingWaits(t *testing.T) {
	s := yieldCluster(1).pending("workspace-b", "urgent", 1, 8, pPriority(90)).build()
	s.Quota.Children[0].PriorityPreemption = false
	p := mustPlan(t, s)
	if got := stops(p); len(got) != 0 {
		t.Fatalf("stops = %v, want none", got)
	}
	if w := actionsOf(p, ActionWait); len(w) != 1 || w[0].Reason != "Quota1.1: 24 of 24 GPUs in use; 8 more needed" {
		t.Fatalf("waits = %+v", w)
	}
}

func TestL6PriorityPreemptionRestoresOnAnyNode(t *testing.T) {
	// No free GPUs: node-04 holds an idle job of workspace-c, which L6
	// stops first (step 1); the quota is then restored by stopping the
	// priority-20 job started last, on node-02.
	b := yieldCluster(1).alloc("idle-c", "workspace-c", "borrow", "node-04", 8, idle, startedAt(8, 50))
	p := mustPlan(t, b.pending("workspace-b", "urgent", 1, 8, pPriority(90)).build())
	want := []stopRow{
		{Alloc: "idle-c", Node: "node-04", Rule: RuleIdleDebt, For: "workspace-b/urgent/server"},
		{Alloc: "b-0800", Node: "node-02", Rule: RulePriority, For: "workspace-b/urgent/server"},
	}
	if diff := cmp.Diff(want, stopRows(p)); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]admitRow{{Job: "urgent", Nodes: []string{"node-04"}}}, admitRows(p)); diff != "" {
		t.Errorf("admits (-want +got):\n%s", diff)
	}
}

func TestL6PriorityPreemptionStopsOnlyWhatRestores(t *testing.T) {
	// Key order takes the 1-GPU priority-10 job, then the 8-GPU
	// priority-20 one, which alone restores the quota: the first is
	// dropped, as L6 drops victims not needed.
	b := newSnap(yieldTree()).nodes(4, 8, h100).
		alloc("s1", "workspace-b", "s1", "node-01", 1, priority(10)).
		alloc("keep7", "workspace-b", "keep7", "node-01", 7, priority(95)).
		alloc("b8", "workspace-b", "b8", "node-02", 8, priority(20)).
		alloc("keep8", "workspace-b", "keep8", "node-03", 8, priority(95))
	p := mustPlan(t, b.pending("workspace-b", "urgent", 1, 8, pPriority(90)).build())
	want := []stopRow{{Alloc: "b8", Node: "node-02", Rule: RulePriority, For: "workspace-b/urgent/server"}}
	if diff := cmp.Diff(want, stopRows(p)); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
}

func TestL6PriorityPreemptionSparesYoungAllocations(t *testing.T) {
	// min_runtime 10 min: the priority-20 job started 5 minutes ago goes
	// first in key order but is young; the older one restores the quota.
	b := newSnap(yieldTree()).nodes(4, 8, h100).settings(10*time.Minute, 10*time.Minute).
		alloc("old", "workspace-b", "old", "node-01", 8, priority(20), started(2*time.Hour)).
		alloc("young", "workspace-b", "young", "node-02", 8, priority(20), started(5*time.Minute)).
		alloc("p30", "workspace-b", "p30", "node-03", 8, priority(30), started(time.Hour))
	p := mustPlan(t, b.pending("workspace-b", "urgent", 1, 8, pPriority(90)).build())
	if diff := cmp.Diff([]string{"old"}, stops(p)); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	// With every yielding job young, the young ones are taken in key order.
	b = newSnap(yieldTree()).nodes(4, 8, h100).settings(10*time.Minute, 10*time.Minute).
		alloc("y1", "workspace-b", "y1", "node-01", 8, priority(20), started(8*time.Minute)).
		alloc("y2", "workspace-b", "y2", "node-02", 8, priority(20), started(5*time.Minute)).
		alloc("p95", "workspace-b", "p95", "node-03", 8, priority(95), started(time.Hour))
	p = mustPlan(t, b.pending("workspace-b", "urgent", 1, 8, pPriority(90)).build())
	if diff := cmp.Diff([]string{"y2"}, stops(p)); diff != "" {
		t.Errorf("all young: stops (-want +got):\n%s", diff)
	}
}

func TestL3PriorityPreemptionYieldsInAncestorsToo(t *testing.T) {
	// R (32) holds Q (24, priority preemption) and S (8), both full. The
	// lower-priority jobs of Q are left out of R's figure as well: the
	// priority-90 job is entitled, and one of them is stopped.
	tree := &quota.Node{Name: "R", GPUs: quota.Plain(32), Children: []*quota.Node{
		{Name: "Q", GPUs: quota.Plain(24), PriorityPreemption: true, Namespaces: []string{"q"}},
		{Name: "S", GPUs: quota.Plain(8), Namespaces: []string{"s"}},
	}}
	b := newSnap(tree).nodes(5, 8, h100).
		alloc("q1", "q", "q1", "node-01", 8, priority(20), started(3*time.Hour)).
		alloc("q2", "q", "q2", "node-02", 8, priority(20), started(2*time.Hour)).
		alloc("q3", "q", "q3", "node-03", 8, priority(20), started(time.Hour)).
		alloc("s1", "s", "s1", "node-04", 8)
	p := mustPlan(t, b.pending("q", "urgent", 1, 8, pPriority(90)).build())
	if diff := cmp.Diff([]string{"q3"}, stops(p)); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	for _, want := range []Usage{
		{Quota: "R", Nominal: 32, Used: 32, NonIdle: 32},
		{Quota: "Q", Nominal: 24, Used: 24, NonIdle: 24},
	} {
		if diff := cmp.Diff(want, usageOf(t, p, want.Quota)); diff != "" {
			t.Errorf("%s usage (-want +got):\n%s", want.Quota, diff)
		}
	}
}

func TestL6PriorityPreemptionRestoresAncestorsToo(t *testing.T) {
	// R (32) has its own namespace r, which runs 24 GPUs; Q (16, priority
	// preemption) runs two 4-GPU priority-20 jobs. R is full, Q is not: a
	// priority-90 4-GPU job of Q is entitled only on what yields (R: 32 -
	// 8 + 4 = 28), and after it is placed Q is within its nominal (12 of
	// 16) but R is not (36 of 32): one 4-GPU job is stopped so that R is
	// restored too. The claimant goes to the free node-05.
	tree := &quota.Node{Name: "R", GPUs: quota.Plain(32), Namespaces: []string{"r"}, Children: []*quota.Node{
		{Name: "Q", GPUs: quota.Plain(16), PriorityPreemption: true, Namespaces: []string{"q"}},
	}}
	b := newSnap(tree).nodes(5, 8, h100).
		alloc("r1", "r", "r1", "node-01", 8).
		alloc("r2", "r", "r2", "node-02", 8).
		alloc("r3", "r", "r3", "node-03", 8).
		alloc("q1", "q", "q1", "node-04", 4, priority(20), started(2*time.Hour)).
		alloc("q2", "q", "q2", "node-04", 4, priority(20), started(time.Hour))
	p := mustPlan(t, b.pending("q", "urgent", 1, 4, pPriority(90)).build())
	if diff := cmp.Diff([]string{"q2"}, stops(p)); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]admitRow{{Job: "urgent", Nodes: []string{"node-05"}}}, admitRows(p)); diff != "" {
		t.Errorf("admits (-want +got):\n%s", diff)
	}
	if got := usageOf(t, p, "R"); got.NonIdle != 32 {
		t.Errorf("R non-idle after the plan = %d, want 32", got.NonIdle)
	}
}

func TestL6PriorityPreemptionRollsBackWhenTheQuotaCannotBeRestored(t *testing.T) {
	// Entitlement counted 8 GPUs that yield, but none do (all three jobs
	// have a higher priority): as a ledger that disagrees with the
	// allocations would make it. placeWhole places the job on the free
	// node, cannot restore Quota1.1, and undoes everything: the job waits
	// and nothing is stopped or booked for it.
	s := newSnap(yieldTree()).nodes(4, 8, h100).
		alloc("b1", "workspace-b", "b1", "node-01", 8, priority(95)).
		alloc("b2", "workspace-b", "b2", "node-02", 8, priority(95)).
		alloc("b3", "workspace-b", "b3", "node-03", 8, priority(95)).
		pending("workspace-b", "urgent", 1, 8, pPriority(90)).build()
	p := newPlanner(s, new(buffers))
	jobs := p.pendingJobs()
	p.placeWhole(jobs[0], yielded{gpus: 8, nonDebt: 8}, map[feasibilityKey][]int{})
	want := []Action{{Action: ActionWait, Namespace: "workspace-b", Job: "urgent", Group: "server", Count: 1, GPUs: 8,
		Rule: RuleAdmission, Reason: "Quota1.1: too few allocations of lower priority to stop to restore its nominal of 24 GPUs"}}
	if diff := cmp.Diff(want, p.st.actions); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	if got := usageOf(t, &Plan{Usage: p.usage()}, "Quota1.1"); got.NonIdle != 24 || got.Used != 24 {
		t.Errorf("Quota1.1 after the rollback = %+v, want 24 used, as before", got)
	}
	anyone := &claim{j: jobs[0], g: &Pending{Model: h100}, cid: noClaimant, alt: noClaimant}
	if free := p.freeOn(p.nodes[3], anyone); free != 8 {
		t.Errorf("node-04 has %d free GPUs after the rollback, want 8", free)
	}
}
