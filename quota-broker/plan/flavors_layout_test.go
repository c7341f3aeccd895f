package plan

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// planBothWays plans s (a tree of several flavors, nodes in ID order)
// with the flavors' planners built side by side (newFlavorPlanners) and
// one by one (as for nodes out of order), and returns both plans as JSON.
func planBothWays(t *testing.T, s *Snapshot) (sideBySide, oneByOne string) {
	t.Helper()
	flavors := quota.TreeFlavors(s.Quota)
	var out [2]string
	for i, sorted := range []bool{true, false} {
		fx := newFlavorIndex(s, flavors)
		if !fx.sorted {
			t.Fatalf("the snapshot's nodes are not in ID order")
		}
		fx.sorted = sorted
		b, err := json.Marshal(computeFlavors(s, flavors, fx, IdleOrderFair))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out[0], out[1]
}

// TestFlavorPlannersSideBySideAsOneByOne: the planners of a tree's
// flavors built side by side, in one pass over the snapshot's nodes and
// one over its allocations (newFlavorPlanners), plan exactly as when
// built one by one: on issue 17's benchmark snapshots at 100 nodes
// (flavors in blocks and interleaved node by node), on a node of two
// flavors with an allocation and a pending job across them, and on the
// flavor property corpus.
func TestFlavorPlannersSideBySideAsOneByOne(t *testing.T) {
	cases := map[string]*Snapshot{
		"preemption/blocks":      threeFlavors(preemptionSnapshot(100)),
		"preemption/interleaved": interleavedFlavors(preemptionSnapshot(100)),
		"admission/blocks":       threeFlavors(admissionSnapshot(100)),
		"admission/interleaved":  interleavedFlavors(admissionSnapshot(100)),
		"mixed node":             mixedNodeSnapshot(),
	}
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		s := randomSnapshot(r)
		flavorize(s, r)
		if newFlavorIndex(s, quota.TreeFlavors(s.Quota)).sorted {
			cases[fmt.Sprintf("corpus seed %d", seed)] = s
		}
	}
	if len(cases) < 100 {
		t.Fatalf("only %d snapshots with nodes in ID order", len(cases))
	}
	for name, s := range cases {
		a, b := planBothWays(t, s)
		if a != b {
			t.Errorf("%s: the plans differ:\nside by side: %s\none by one:   %s", name, a, b)
		}
	}
}

// mixedNodeSnapshot: flavorCluster with node-05 of 4 H100 and 4 A100,
// team B's allocation m1 on 2 of each, and a pending job of team C
// allowing both flavors.
func mixedNodeSnapshot() *Snapshot {
	b := flavorCluster()
	node := Node{ID: "node-05", Datacenter: "dc1", NodePool: "default"}
	for g := 0; g < 8; g++ {
		model := h100
		if g >= 4 {
			model = a100
		}
		node.GPUs = append(node.GPUs, GPU{ID: fmt.Sprintf("node-05-gpu%d", g), Model: model, Healthy: true})
	}
	b.s.Nodes = append(b.s.Nodes, node)
	b.s.Allocations = append(b.s.Allocations, Allocation{ID: "m1", Namespace: "workspace-b", Job: "m-train", Group: "worker",
		Type: JobBatch, Priority: 50, Node: "node-05", StartedAt: t0.Add(-time.Hour),
		GPUIDs: []string{"node-05-gpu2", "node-05-gpu3", "node-05-gpu4", "node-05-gpu5"}})
	return b.pending("workspace-c", "c-serve", 2, 2, pFlavors("h100", "a100")).build()
}
