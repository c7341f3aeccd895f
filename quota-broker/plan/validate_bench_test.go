package plan

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkValidate: Snapshot.Validate, which the simulator runs on every
// snapshot it plans (issue 12's Philly replay) and the JSON decoder on
// every document. preemptionSnapshot's nodes and allocations (100 nodes,
// 400 allocations, as the 768-GPU Philly scenario has) with 1,000 pending
// 1-GPU batch jobs (a backlog), and the same at 1,000 nodes.
func BenchmarkValidate(b *testing.B) {
	for _, n := range []int{100, 1000} {
		s := preemptionSnapshot(n)
		for j := 0; j < 1000; j++ {
			s.Pending = append(s.Pending, Pending{Namespace: []string{"workspace-b", "workspace-c"}[j%2],
				Job: fmt.Sprintf("job-%04d", j), Group: "g", Type: JobBatch, Priority: 50, Count: 1, GPUs: 1,
				NodePool: "default", SubmittedAt: t0.Add(-time.Duration(j) * time.Second)})
		}
		b.Run(fmt.Sprintf("nodes=%d/allocs=%d/pending=%d", n, len(s.Allocations), len(s.Pending)), func(b *testing.B) {
			b.ReportAllocs()
			c0, k := cpuTime(), 0
			for b.Loop() {
				if err := s.Validate(); err != nil {
					b.Fatal(err)
				}
				k++
			}
			b.ReportMetric(float64((cpuTime()-c0).Nanoseconds())/float64(k), "cpu-ns/op")
		})
	}
}
