package nomad

import (
	"slices"
	"strings"
	"testing"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// A node that reports one GPU twice (a misconfigured device plugin) is
// left out of the snapshot with its allocations, each reported with what
// is wrong; the rest is planned (DESIGN L12).
func TestBuildLeavesOutItemsThatBreakASnapshotRule(t *testing.T) {
	_, s := listRecorded(t)
	var bad *Node
	for _, n := range s.nodes {
		if len(n.GPUs) > 0 {
			bad = n
		}
	}
	if bad == nil {
		t.Fatal("the recording has no GPU node")
	}
	bad.GPUs = append(slices.Clone(bad.GPUs), bad.GPUs[0])
	held := 0
	for _, a := range s.allocs {
		if a.NodeID == bad.ID && a.Live() && len(a.GPUIDs) > 0 {
			held++
		}
	}
	if held == 0 {
		t.Fatal("no allocation holds GPUs of the node")
	}
	b := s.Build(BuildInput{Now: at(t), Quota: e2eTree(), Settings: quota.DefaultSettings(),
		Stopping: map[string]plan.GroupKey{}, Accepted: func(string) bool { return true }})
	if b.Invalid != nil {
		t.Fatalf("Invalid = %v; a bad node is not a fault of the tree", b.Invalid)
	}
	if len(b.Left) != 1+held {
		t.Errorf("Left has %d faults, want the node and its %d allocations: %v", len(b.Left), held, b.Left)
	}
	if len(b.Left) == 0 || b.Left[0].Item != plan.ItemNode || b.Left[0].ID != bad.ID ||
		!strings.Contains(b.Left[0].Message, "is listed twice") {
		t.Fatalf("Left = %v; want node %s first, for its GPU listed twice", b.Left, bad.ID)
	}
	for _, n := range b.Snapshot.Nodes {
		if n.ID == bad.ID {
			t.Fatalf("node %s is still in the snapshot", bad.ID)
		}
	}
	for _, a := range b.Snapshot.Allocations {
		if a.Node == bad.ID {
			t.Fatalf("allocation %s on the bad node is still in the snapshot", a.ID)
		}
	}
	if err := b.Snapshot.Validate(); err != nil {
		t.Fatalf("the snapshot built fails Validate: %v", err)
	}
	if _, err := plan.Compute(b.Snapshot); err != nil {
		t.Fatal(err)
	}
}

// A quota tree that breaks L1 is Invalid: the broker does not act.
func TestBuildReportsAnInvalidTree(t *testing.T) {
	_, s := listRecorded(t)
	tree := e2eTree()
	tree.Children[0].GPUs = tree.GPUs + 1
	b := s.Build(BuildInput{Now: at(t), Quota: tree, Settings: quota.DefaultSettings(),
		Stopping: map[string]plan.GroupKey{}, Accepted: func(string) bool { return true }})
	if b.Invalid == nil || !strings.Contains(b.Invalid.Error(), "children's nominal GPUs sum to") {
		t.Fatalf("Invalid = %v, want the L1 fault", b.Invalid)
	}
}
