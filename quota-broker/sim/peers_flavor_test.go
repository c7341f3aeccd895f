package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

const (
	h100Model = "NVIDIA H100 80GB HBM3"
	a100Model = "NVIDIA A100-SXM4-80GB"
)

// twoFlavors is a snapshot of 2 nodes of 8 H100 (node-01, node-02) and 2
// of 8 A100 (node-03, node-04) under a tree of flavors h100 and a100:
// workspace-b (Quota1.1) has h100 = 8 and no a100, workspace-c (Quota1.2)
// h100 = 8 and a100 = 16. Each workspace runs 8 one-GPU training jobs on
// H100 (b on node-01, c on node-02); nothing runs on A100.
func twoFlavors() *plan.Snapshot {
	tree := &quota.Node{Name: "Quota1", GPUs: quota.Nominal{"h100": 16, "a100": 16},
		Flavors: []quota.Flavor{{Name: "h100", Models: []string{h100Model}}, {Name: "a100", Models: []string{a100Model}}},
		Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: quota.Nominal{"h100": 8}, Namespaces: []string{"workspace-b"}},
			{Name: "Quota1.2", GPUs: quota.Nominal{"h100": 8, "a100": 16}, Namespaces: []string{"workspace-c"}},
		}}
	s := &plan.Snapshot{Time: t0, Quota: tree, Settings: quota.DefaultSettings()}
	for n := 1; n <= 4; n++ {
		model := h100Model
		if n > 2 {
			model = a100Model
		}
		nd := plan.Node{ID: fmt.Sprintf("node-%02d", n), Datacenter: "dc1", NodePool: "default"}
		for g := 0; g < 8; g++ {
			nd.GPUs = append(nd.GPUs, plan.GPU{ID: fmt.Sprintf("GPU-%02d-%d", n, g), Model: model, Healthy: true})
		}
		s.Nodes = append(s.Nodes, nd)
	}
	for i, ns := range []string{"workspace-b", "workspace-c"} {
		for g := 0; g < 8; g++ {
			s.Allocations = append(s.Allocations, plan.Allocation{
				ID: fmt.Sprintf("%s-%d", ns[len(ns)-1:], g), Namespace: ns, Job: fmt.Sprintf("run-%d", g), Group: "worker",
				Type: plan.JobBatch, Priority: 50, Node: fmt.Sprintf("node-%02d", i+1), GPUIDs: []string{fmt.Sprintf("GPU-%02d-%d", i+1, g)},
				StartedAt: t0.Add(time.Duration(g-60) * time.Minute),
			})
		}
	}
	return s
}

// twoFlavorShares are the shares of twoFlavors' tree: each namespace's
// quota node's nominal per flavor.
func twoFlavorShares() *Shares {
	return &Shares{Namespaces: []string{"workspace-b", "workspace-c"}, GPUs: []int{8, 24}, Dedicated: []int{0, 0},
		Flavors: []string{"h100", "a100"}, ByFlavor: [][]int{{8, 0}, {8, 16}}}
}

// action is the part of a plan action the peers' flavor tests compare.
type action struct {
	Action, Job, Flavor string
	Nodes               []string
	Count               int
	Rule                plan.Rule
	Quota               string
}

func actionsOf(p *plan.Plan) []action {
	var out []action
	for _, a := range p.Actions {
		out = append(out, action{string(a.Action), a.Job, a.Flavor, a.Nodes, a.Count, a.Rule, a.Quota})
	}
	return out
}

// The static policy partitions each flavor apart. workspace-b (h100 = 8,
// a100 = 8) runs 8 H100 GPUs; workspace-c (h100 = 8, a100 = 8) runs 4 of
// its 8 H100 once its first 4 jobs are gone, so node-02 has 4 free H100.
// b's 4-GPU job allowed h100 only waits at its hard limit: its h100
// partition is full, though 4 H100 are free (c's partition) and its own
// a100 partition is empty (a limit over flavors, 16 with 8 used, would
// have put it on node-02). The same job allowed h100 then a100 takes its
// a100 partition. c's job of 2 x 4 allowed h100 then a100 does not fit
// in its h100 room of 4, so all of it takes a100 (one flavor per job),
// not one allocation on H100 and one on A100.
func TestStaticPartitionsPerFlavor(t *testing.T) {
	s := twoFlavors()
	s.Allocations = s.Allocations[:12] // b's 8, c's first 4 on node-02
	sh := &Shares{Namespaces: []string{"workspace-b", "workspace-c"}, GPUs: []int{16, 16}, Dedicated: []int{0, 0},
		Flavors: []string{"h100", "a100"}, ByFlavor: [][]int{{8, 8}, {8, 8}}}
	s.Pending = []plan.Pending{
		{Namespace: "workspace-b", Job: "b-h100", Group: "worker", Type: plan.JobBatch, Priority: 50, Count: 1, GPUs: 4, SubmittedAt: t0, Flavors: []string{"h100"}},
		{Namespace: "workspace-b", Job: "b-any", Group: "worker", Type: plan.JobBatch, Priority: 50, Count: 1, GPUs: 4, SubmittedAt: t0.Add(time.Second), Flavors: []string{"h100", "a100"}},
		{Namespace: "workspace-c", Job: "c", Group: "worker", Type: plan.JobBatch, Priority: 50, Count: 2, GPUs: 4, SubmittedAt: t0.Add(2 * time.Second), Flavors: []string{"h100", "a100"}},
	}
	p, err := NewStatic(sh).Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []action{
		{Action: "wait", Job: "b-h100", Count: 1, Rule: RuleStatic, Quota: StaticBound("workspace-b")},
		{Action: "admit", Job: "b-any", Flavor: "a100", Nodes: []string{"node-03"}, Count: 1, Rule: RuleStatic},
		{Action: "admit", Job: "c", Flavor: "a100", Nodes: []string{"node-03", "node-04"}, Count: 2, Rule: RuleStatic},
	}
	if d := cmp.Diff(want, actionsOf(p)); d != "" {
		t.Errorf("actions (-want +got):\n%s", d)
	}
	// A job that fits only in part takes its first flavor with room in
	// part (not a gang): c asks 3 x 4 with 4 h100 and 8 a100 left in its
	// partitions; all of it fits in neither, so 1 on H100 and 2 wait.
	s.Pending = []plan.Pending{{Namespace: "workspace-c", Job: "c", Group: "worker", Type: plan.JobBatch, Priority: 50, Count: 3, GPUs: 4, SubmittedAt: t0, Flavors: []string{"h100", "a100"}}}
	p, err = NewStatic(sh).Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	want = []action{
		{Action: "admit", Job: "c", Flavor: "h100", Nodes: []string{"node-02"}, Count: 1, Rule: RuleStatic},
		{Action: "wait", Job: "c", Count: 2, Rule: RuleStatic, Quota: StaticBound("workspace-c")},
	}
	if d := cmp.Diff(want, actionsOf(p)); d != "" {
		t.Errorf("part (-want +got):\n%s", d)
	}
}

// The Kueue-like policy keeps nominal quota and borrowing per flavor and
// tries a job's flavors in order (TryNextFlavor): with the cohort's h100
// full, workspace-b's job borrows a100 (its nominal there is 0); then
// workspace-c's job, within its a100 nominal of 16 but with the cohort's
// a100 short, reclaims from the a100 borrower only: its h100 workloads
// (not borrowing h100) are left alone.
func TestKueueTriesFlavorsInOrder(t *testing.T) {
	s := twoFlavors()
	k := NewKueue(twoFlavorShares())
	s.Pending = []plan.Pending{{Namespace: "workspace-b", Job: "b", Group: "worker", Type: plan.JobBatch, Priority: 50, Count: 2, GPUs: 4, SubmittedAt: t0, Flavors: []string{"h100", "a100"}}}
	p, err := k.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []action{{Action: "admit", Job: "b", Flavor: "a100", Nodes: []string{"node-03", "node-03"}, Count: 2, Rule: RuleKueueBorrow}}
	if d := cmp.Diff(want, actionsOf(p)); d != "" {
		t.Errorf("b (-want +got):\n%s", d)
	}
	// b's job runs on node-03 (GPUs 0-7, two allocations of 4).
	for a := 0; a < 2; a++ {
		var ids []string
		for g := 0; g < 4; g++ {
			ids = append(ids, fmt.Sprintf("GPU-03-%d", 4*a+g))
		}
		s.Allocations = append(s.Allocations, plan.Allocation{ID: fmt.Sprintf("b-a100-%d", a), Namespace: "workspace-b", Job: "b", Group: "worker",
			Type: plan.JobBatch, Priority: 50, Node: "node-03", GPUIDs: ids, StartedAt: t0})
	}
	s.Time = t0.Add(time.Minute)
	s.Pending = []plan.Pending{{Namespace: "workspace-c", Job: "c", Group: "worker", Type: plan.JobBatch, Priority: 50, Count: 4, GPUs: 4, SubmittedAt: s.Time, Flavors: []string{"h100", "a100"}}}
	p, err = k.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	var stops []string
	var rest []action
	for _, a := range p.Actions {
		if a.Action == plan.ActionStop {
			stops = append(stops, a.Alloc+" "+a.Reason)
		}
	}
	for _, a := range actionsOf(p) {
		if a.Action != "stop" {
			rest = append(rest, a)
		}
	}
	wantStops := []string{
		"b-a100-0 workspace-c reclaims its nominal 16 a100 from borrowing queue workspace-b",
		"b-a100-1 workspace-c reclaims its nominal 16 a100 from borrowing queue workspace-b",
	}
	if d := cmp.Diff(wantStops, stops); d != "" {
		t.Errorf("stops (-want +got):\n%s", d)
	}
	// Quota reserved in a100: 2 allocations on node-04 now, 2 once b's
	// pods are gone.
	want = []action{
		{Action: "admit", Job: "c", Flavor: "a100", Nodes: []string{"node-04", "node-04"}, Count: 2, Rule: RuleKueueNominal},
		{Action: "wait", Job: "c", Count: 2, Rule: RuleKueueNominal},
	}
	if d := cmp.Diff(want, rest); d != "" {
		t.Errorf("c (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[plan.JobKey]int{{Namespace: "workspace-c", Job: "c"}: 1}, k.reserved); d != "" {
		t.Errorf("reserved (-want +got):\n%s", d)
	}
}

// The shares of the mixed example per flavor: team A's chat gets its peak
// (6 replicas of 8) on 6 dedicated H100 nodes; teams B and C split the
// other 16 H100 by their h100 nominals 24:16 and the 48 A100 by 24:24;
// the 112 slices are team C's alone (B has no a100-1g nominal).
func TestPolicySharesPerFlavor(t *testing.T) {
	sc, err := LoadFile("../../examples/mixed/scenario.hcl")
	if err != nil {
		t.Fatal(err)
	}
	sc.Length = time.Hour
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	sh := PolicyShares(sc, w)
	want := &Shares{
		Namespaces:      []string{"workspace-a", "workspace-b", "workspace-c"},
		GPUs:            []int{48, 33, 143},
		Dedicated:       []int{6, 0, 0},
		Flavors:         []string{"h100", "a100", "a100-1g"},
		ByFlavor:        [][]int{{48, 0, 0}, {9, 24, 0}, {7, 24, 112}},
		DedicatedFlavor: []string{"h100", "", ""},
	}
	if d := cmp.Diff(want, sh); d != "" {
		t.Errorf("shares (-want +got):\n%s", d)
	}
}
