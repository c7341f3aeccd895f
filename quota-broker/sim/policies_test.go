package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

var t0 = time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)

// fourNodes is a snapshot of 4 nodes x 8 GPUs where workspace-b runs 28
// one-GPU jobs, 7 a node (started one minute apart, the newest last), and
// workspace-a asks for one 8-GPU replica.
func fourNodes() *plan.Snapshot {
	tree := &quota.Node{Name: "Quota1", GPUs: quota.Plain(32), ChildPreemption: true, Namespaces: []string{"workspace-a"},
		Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: quota.Plain(8), Namespaces: []string{"workspace-b"}},
			{Name: "Quota1.2", GPUs: quota.Plain(16), Namespaces: []string{"workspace-c"}},
		}}
	s := &plan.Snapshot{Time: t0, Quota: tree, Settings: quota.DefaultSettings()}
	for n := 1; n <= 4; n++ {
		nd := plan.Node{ID: fmt.Sprintf("node-%02d", n), Datacenter: "dc1", NodePool: "default"}
		for g := 0; g < 8; g++ {
			nd.GPUs = append(nd.GPUs, plan.GPU{ID: fmt.Sprintf("GPU-%02d-%d", n, g), Model: "H100", Healthy: true})
		}
		s.Nodes = append(s.Nodes, nd)
	}
	for i := 0; i < 28; i++ {
		n, g := i%4+1, i/4
		s.Allocations = append(s.Allocations, plan.Allocation{
			ID: fmt.Sprintf("alloc-%02d", i), Namespace: "workspace-b", Job: fmt.Sprintf("train-%02d", i), Group: "worker",
			Type: plan.JobBatch, Priority: 50, Node: fmt.Sprintf("node-%02d", n), GPUIDs: []string{fmt.Sprintf("GPU-%02d-%d", n, g)},
			StartedAt: t0.Add(time.Duration(i-60) * time.Minute),
		})
	}
	s.Pending = []plan.Pending{{Namespace: "workspace-a", Job: "chat", Group: "server", Type: plan.JobService, Priority: 80,
		Count: 1, GPUs: 8, SubmittedAt: t0}}
	return s
}

func stopsOf(p *plan.Plan) (ids []string, nodes map[string]int) {
	nodes = map[string]int{}
	for _, a := range p.Actions {
		if a.Action == plan.ActionStop {
			ids = append(ids, a.Alloc)
			nodes[a.Node]++
		}
	}
	return ids, nodes
}

// The Kueue-like policy reclaims by quota alone: the newest borrowers, on
// any node; the replica's quota stays reserved while no node has room, and
// it does not reclaim again.
func TestKueueReclaimsByQuotaAlone(t *testing.T) {
	s := fourNodes()
	k := NewKueue(&Shares{Namespaces: []string{"workspace-a", "workspace-b", "workspace-c"}, GPUs: []int{8, 8, 16}})
	p, err := k.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	ids, nodes := stopsOf(p)
	// 28 + 8 asked > 32: the 4 newest borrowers go, one on each node.
	if fmt.Sprint(ids) != "[alloc-27 alloc-26 alloc-25 alloc-24]" || len(nodes) != 4 {
		t.Errorf("stops %v on nodes %v: want the 4 newest, on 4 nodes", ids, nodes)
	}
	for _, a := range p.Actions {
		if a.Action == plan.ActionAdmit {
			t.Errorf("admitted %+v with no node free", a)
		}
		if a.Action == plan.ActionStop && (a.Rule != RuleKueueReclaim || a.For != (plan.GroupKey{Namespace: "workspace-a", Job: "chat", Group: "server"})) {
			t.Errorf("stop %+v", a)
		}
	}
	// Victims marked stopping: the next plan reclaims nothing more.
	for i := range s.Allocations {
		for _, id := range ids {
			if s.Allocations[i].ID == id {
				s.Allocations[i].StoppingFor = plan.GroupKey{Namespace: "workspace-a", Job: "chat", Group: "server"}
			}
		}
	}
	p2, _ := k.Plan(s)
	if ids2, _ := stopsOf(p2); len(ids2) != 0 {
		t.Errorf("second plan stops %v again", ids2)
	}
	// A borrower may not take the reserved quota.
	s.Pending = append(s.Pending, plan.Pending{Namespace: "workspace-b", Job: "more", Group: "worker", Type: plan.JobBatch,
		Priority: 50, Count: 1, GPUs: 1, SubmittedAt: t0})
	p3, _ := k.Plan(s)
	for _, a := range p3.Actions {
		if a.Action == plan.ActionAdmit {
			t.Errorf("admitted %+v on the reserved quota", a)
		}
	}
}

// The real core, on the same snapshot, frees one whole node (L6).
func TestGputideIsNodeAware(t *testing.T) {
	p, err := plan.Compute(fourNodes())
	if err != nil {
		t.Fatal(err)
	}
	ids, nodes := stopsOf(p)
	if len(ids) != 7 || len(nodes) != 1 {
		t.Errorf("stops %v on nodes %v: want the 7 allocations of one node", ids, nodes)
	}
}

// Static quotas: inference on its own nodes, hard limits for the others,
// no preemption.
func TestStaticQuotas(t *testing.T) {
	s := fourNodes()
	s.Allocations = nil
	s.Pending = append(s.Pending,
		plan.Pending{Namespace: "workspace-b", Job: "b", Group: "worker", Type: plan.JobBatch, Priority: 50, Count: 3, GPUs: 4, SubmittedAt: t0},
		plan.Pending{Namespace: "workspace-c", Job: "c", Group: "worker", Type: plan.JobBatch, Priority: 50, Count: 4, GPUs: 8, SubmittedAt: t0.Add(time.Second)},
	)
	st := NewStatic(&Shares{Namespaces: []string{"workspace-a", "workspace-b", "workspace-c"}, GPUs: []int{8, 8, 16}, Dedicated: []int{1, 0, 0}})
	p, err := st.Plan(s)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range p.Actions {
		got[a.Job+" "+string(a.Action)] = fmt.Sprint(a.Nodes, a.Count)
		if a.Action == plan.ActionStop {
			t.Errorf("static stopped %+v", a)
		}
	}
	want := map[string]string{
		"chat admit": "[node-01] 1",         // its own node
		"b admit":    "[node-02 node-02] 2", // 8 of its 8 GPUs, on shared nodes
		"b wait":     "[] 1",                // hard limit
		"c admit":    "[node-03 node-04] 2", // 16 of 16
		"c wait":     "[] 2",                // hard limit of 16
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s (all: %v)", k, got[k], v, got)
		}
	}
}
