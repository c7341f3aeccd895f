package plan

import (
	"fmt"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// benchTree scales the reference tree to a cluster of gpus GPUs: Quota1 =
// all of them with child-level preemption, Quota1.1 = 3/8, Quota1.2 = 5/8.
func benchTree(gpus int) *quota.Node {
	return &quota.Node{Name: "Quota1", GPUs: gpus, ChildPreemption: true, Namespaces: []string{"workspace-a"},
		Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: gpus * 3 / 8, Namespaces: []string{"workspace-b"}},
			{Name: "Quota1.2", GPUs: gpus * 5 / 8, Namespaces: []string{"workspace-c"}},
		}}
}

func benchNodes(n int) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		id := fmt.Sprintf("node-%05d", i)
		nodes[i] = Node{ID: id, Datacenter: "dc1", NodePool: "default", GPUs: make([]GPU, 8)}
		for g := range nodes[i].GPUs {
			nodes[i].GPUs[g] = GPU{ID: fmt.Sprintf("%s-%d", id, g), Model: h100, Healthy: true}
		}
	}
	return nodes
}

// preemptionSnapshot: every GPU held by 1-, 2- and 4-GPU allocations of
// training in Quota1.1 and Quota1.2, 10% of GPUs by idle jobs, and one
// pending 8-GPU entitled inference allocation of team A (Quota1).
func preemptionSnapshot(n int, sizes ...int) *Snapshot {
	s := &Snapshot{Time: t0, Quota: benchTree(8 * n), Settings: quota.DefaultSettings(), Nodes: benchNodes(n)}
	if len(sizes) == 0 {
		sizes = []int{4, 2, 1, 1}
	}
	k := 0
	for i, node := range s.Nodes {
		g := 0
		for j := 0; g < 8; j++ {
			size := sizes[(i+j)%len(sizes)]
			k++
			a := Allocation{ID: fmt.Sprintf("a%07d", k), Namespace: []string{"workspace-b", "workspace-c"}[min(1, k%8/3)],
				Job: fmt.Sprintf("train-%d", k), Group: "worker", Type: JobService, Priority: 50, Node: node.ID,
				StartedAt: t0.Add(-time.Duration(k%500) * time.Minute), Idle: (i*8+g)%10 == 0}
			for x := 0; x < size && g < 8; x++ {
				a.GPUIDs = append(a.GPUIDs, node.GPUs[g].ID)
				g++
			}
			s.Allocations = append(s.Allocations, a)
		}
	}
	s.Pending = []Pending{{Namespace: "workspace-a", Job: "chat", Group: "server", Type: JobService, Priority: 80,
		Count: 1, GPUs: 8, Datacenters: []string{"dc1"}, NodePool: "default", SubmittedAt: t0}}
	return s
}

// admissionSnapshot: 2,000 free GPUs spread over the nodes (the rest held
// by team A's services) and 1,000 pending 1-GPU entitled training jobs; on
// 100 nodes (800 GPUs) 500 free GPUs and 250 jobs.
func admissionSnapshot(n int) *Snapshot {
	s := &Snapshot{Time: t0, Quota: benchTree(8 * n), Settings: quota.DefaultSettings(), Nodes: benchNodes(n)}
	free := min(2000, 8*n*5/8) // 2,000 (only 500 fit on 100 nodes)
	jobs := free / 2           // 1,000 (250 on 100 nodes)
	k := 0
	// Hold GPUs node by node, leaving free GPUs spread evenly.
	perNodeFree := make([]int, n)
	for f := 0; f < free; f++ {
		perNodeFree[f%n]++
	}
	for i, node := range s.Nodes {
		hold := max(0, 8-perNodeFree[i])
		if hold == 0 {
			continue
		}
		k++
		a := Allocation{ID: fmt.Sprintf("a%07d", k), Namespace: "workspace-a", Job: fmt.Sprintf("svc-%d", k),
			Group: "g", Type: JobService, Priority: 50, Node: node.ID, StartedAt: t0.Add(-time.Hour)}
		for g := 0; g < hold; g++ {
			a.GPUIDs = append(a.GPUIDs, node.GPUs[g].ID)
		}
		s.Allocations = append(s.Allocations, a)
	}
	for j := 0; j < jobs; j++ {
		s.Pending = append(s.Pending, Pending{Namespace: []string{"workspace-b", "workspace-c"}[j%2],
			Job: fmt.Sprintf("job-%04d", j), Group: "g", Type: JobBatch, Priority: 50, Count: 1, GPUs: 1,
			NodePool: "default", SubmittedAt: t0.Add(-time.Duration(j) * time.Second)})
	}
	// Make the quotas large enough that every job is entitled.
	s.Quota.Children[0].GPUs, s.Quota.Children[1].GPUs = jobs, 8*n-jobs
	return s
}

// BenchmarkPreemptionPlan: DESIGN's benchmark (a). Allocations of 4, 2, 1
// and 1 GPUs (4 per node, 20,000 at 5,000 nodes), and, as "alloc=8", whole-
// node allocations (one per node).
func BenchmarkPreemptionPlan(b *testing.B) {
	for _, tc := range []struct {
		n     int
		sizes []int
	}{{100, nil}, {1000, nil}, {5000, nil}, {5000, []int{8}}} {
		n := tc.n
		s := preemptionSnapshot(n, tc.sizes...)
		name := fmt.Sprintf("nodes=%d", n)
		if tc.sizes != nil {
			name += "/alloc=8"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := Compute(s)
				if err != nil || len(actionsOf(p, ActionAdmit)) != 1 || len(stops(p)) == 0 {
					b.Fatalf("unexpected plan: %v %+v", err, p.Actions)
				}
			}
		})
	}
}

func BenchmarkAdmissionPlan(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		s := admissionSnapshot(n)
		want := len(s.Pending)
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := Compute(s)
				if err != nil {
					b.Fatal(err)
				}
				if a := actionsOf(p, ActionAdmit); len(a) != want {
					b.Fatalf("admitted %d, want %d", len(a), want)
				}
			}
			b.ReportMetric(float64(b.N)*float64(want)/b.Elapsed().Seconds(), "admissions/s")
		})
	}
}

// BenchmarkManyAllocationAdmit: issue 8's preemptive admit of many
// allocations (heldSnapshot): every GPU held by one-GPU allocations, one
// entitled job of count one-GPU allocations, each placed by preemption.
// nodes=6250/count=6000 is the 50,000-allocation snapshot.
func BenchmarkManyAllocationAdmit(b *testing.B) {
	for _, tc := range []struct{ nodes, count int }{{625, 600}, {1250, 1200}, {6250, 6000}} {
		s := heldSnapshot(tc.nodes, tc.count)
		b.Run(fmt.Sprintf("nodes=%d/count=%d", tc.nodes, tc.count), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := Compute(s)
				if err != nil || len(stops(p)) != tc.count {
					b.Fatalf("unexpected plan: %v, %d stops", err, len(stops(p)))
				}
			}
		})
	}
}
