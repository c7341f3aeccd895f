package command

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/snapshot"
)

// clusterJSON writes a snapshot document of nodes nodes of 8 H100s, the
// first held GPUs each held by a one-GPU allocation of team B or C
// training (idle every tenth), and pending: one job of team A, count
// allocations of one GPU
// (entitled: Quota1 has every GPU, with child-level preemption). It is
// written directly as JSON (not through the package's encoder) so that it
// reads the same in any version of the decoder.
func clusterJSON(nodes, held, count int) []byte {
	var b strings.Builder
	gpus := 8 * nodes
	fmt.Fprintf(&b, `{"time": "2026-12-01T08:00:00Z",
 "quota": {"name": "Quota1", "gpus": %d, "child_preemption": true, "namespaces": ["workspace-a"],
  "children": [{"name": "Quota1.1", "gpus": %d, "namespaces": ["workspace-b"]},
               {"name": "Quota1.2", "gpus": %d, "namespaces": ["workspace-c"]}]},
 "settings": {"min_runtime": "0s", "debt_grace": "10m"},
 "nodes": [`, gpus, gpus*3/8, gpus-gpus*3/8)
	for n := 0; n < nodes; n++ {
		if n > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n  {\"id\": \"node-%05d\", \"datacenter\": \"dc1\", \"node_pool\": \"default\", \"gpus\": [", n)
		for g := 0; g < 8; g++ {
			if g > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `{"id": "GPU-%05d-%d", "model": "NVIDIA H100 80GB HBM3", "healthy": true}`, n, g)
		}
		b.WriteString("]}")
	}
	b.WriteString("],\n \"allocations\": [")
	for k := 0; k < held; k++ {
		if k > 0 {
			b.WriteString(",")
		}
		n, g := k/8, k%8
		ns := []string{"workspace-b", "workspace-c"}[k%2]
		fmt.Fprintf(&b, "\n  {\"id\": \"alloc-%07d\", \"namespace\": %q, \"job\": \"train-%d\", \"group\": \"worker\", "+
			"\"type\": \"batch\", \"priority\": 50, \"node\": \"node-%05d\", \"gpu_ids\": [\"GPU-%05d-%d\"], "+
			"\"idle\": %v, \"elastic\": false, \"reservation\": \"\", \"started_at\": \"2026-12-01T07:%02d:00Z\"}",
			k, ns, k, n, n, g, k%10 == 0, k%60)
	}
	fmt.Fprintf(&b, `],
 "pending": [{"namespace": "workspace-a", "job": "chat", "group": "server", "type": "service", "priority": 80,
   "count": %d, "gpus": 1, "model": "", "datacenters": ["dc1"], "node_pool": "default", "idle": false,
   "elastic": false, "reservation": "", "submitted_at": "2026-12-01T07:59:00Z"}],
 "reservations": []}
`, count)
	return []byte(b.String())
}

// The speed point of issue 8: 5,000 nodes x 8 GPUs, 40,000 one-GPU
// allocations. Reading and planning are measured apart. Reading reports
// the heap its snapshot keeps (after a GC) per GPU (from the same cluster
// with no allocations) and per allocation (the rest, divided by 40,000),
// and heap/file, the kept heap over the file size; B/op, all it
// allocates, garbage included, bounds its peak above what was there.
const benchNodes = 5000

func BenchmarkPlanRead(b *testing.B) {
	doc := clusterJSON(benchNodes, 8*benchNodes, 8)
	bare, _ := retainedSnapshot(b, clusterJSON(benchNodes, 0, 8))
	kept, s := retainedSnapshot(b, doc)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := snapshot.Unmarshal(doc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(bare)/float64(8*len(s.Nodes)), "bytes/GPU")
	b.ReportMetric(float64(kept-bare)/float64(len(s.Allocations)), "bytes/alloc")
	b.ReportMetric(float64(kept)/float64(len(doc)), "heap/file")
}

func BenchmarkPlanCompute(b *testing.B) {
	s, err := snapshot.Unmarshal(clusterJSON(benchNodes, 8*benchNodes, 8))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		p, err := plan.Compute(s)
		if err != nil || len(p.Actions) == 0 {
			b.Fatalf("unexpected plan: %v", err)
		}
	}
}

// retainedSnapshot decodes doc and returns the heap bytes the snapshot
// keeps alive (measured after a GC) with the snapshot.
func retainedSnapshot(b *testing.B, doc []byte) (uint64, *plan.Snapshot) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, err := snapshot.Unmarshal(doc)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(doc) // counted in before: it must be in after too
	if after.HeapAlloc < before.HeapAlloc {
		return 0, s
	}
	return after.HeapAlloc - before.HeapAlloc, s
}
