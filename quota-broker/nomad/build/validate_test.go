package build

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/watch"

	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// A node that reports one GPU twice (a misconfigured device plugin) is
// left out of the snapshot with its allocations, each reported with what
// is wrong; the rest is planned (DESIGN L12).
func TestBuildLeavesOutItemsThatBreakASnapshotRule(t *testing.T) {
	_, s := listRecorded(t)
	var bad *watch.Node
	for _, n := range raw(s).Nodes {
		if len(n.GPUs) > 0 {
			bad = n
		}
	}
	if bad == nil {
		t.Fatal("the recording has no GPU node")
	}
	bad.GPUs = append(slices.Clone(bad.GPUs), bad.GPUs[0])
	held := 0
	for _, a := range raw(s).Allocs {
		if a.NodeID == bad.ID && a.Live() && len(a.GPUIDs) > 0 {
			held++
		}
	}
	if held == 0 {
		t.Fatal("no allocation holds GPUs of the node")
	}
	b := From(s, Input{Now: at(t), Quota: e2eTree(), Settings: quota.DefaultSettings(),
		Stopping: map[string]plan.GroupKey{}, Accepted: func(plan.JobKey) bool { return true }})
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
	tree.Children[0].GPUs = quota.Plain(tree.GPUs.Of(quota.ImplicitFlavor) + 1)
	b := From(s, Input{Now: at(t), Quota: tree, Settings: quota.DefaultSettings(),
		Stopping: map[string]plan.GroupKey{}, Accepted: func(plan.JobKey) bool { return true }})
	if b.Invalid == nil || !strings.Contains(b.Invalid.Error(), "children's nominal GPUs sum to") {
		t.Fatalf("Invalid = %v, want the L1 fault", b.Invalid)
	}
}

// The job meta reader applies the core's flex rule (plan.Flex.Check,
// DESIGN L11) and names the meta key and the value.
func TestParseJobOptionsAppliesTheCoresFlexRule(t *testing.T) {
	for _, tt := range []struct {
		meta map[string]string
		want string
	}{
		{map[string]string{jobmeta.MetaFlexMaxRun: "4h"}, ""},
		{map[string]string{jobmeta.MetaFlexMaxWait: "24h"},
			`job meta gputide_flex_max_run = "": missing or 0: a flex request needs max_run, more than 0 and at most 168h`},
		{map[string]string{jobmeta.MetaFlexMaxWait: "169h", jobmeta.MetaFlexMaxRun: "1h"},
			`job meta gputide_flex_max_wait = "169h": is above the maximum of 168h`},
		{map[string]string{jobmeta.MetaFlexMaxRun: "200h"}, `job meta gputide_flex_max_run = "200h": is above the maximum of 168h`},
		{map[string]string{jobmeta.MetaFlexMaxRun: "0s"}, `job meta gputide_flex_max_run = "0s": missing or 0: a flex request needs max_run, more than 0 and at most 168h`},
		{map[string]string{jobmeta.MetaFlexMaxRun: "1h", jobmeta.MetaReservation: "r-1"},
			`job meta gputide_reservation = "r-1": cannot be combined with gputide_flex_max_run = "1h": a flex request cannot name a reservation (L11)`},
	} {
		o, err := jobmeta.ParseJobOptions(tt.meta, DefaultHoldingPool)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("jobmeta.ParseJobOptions(%v) error = %q, want %q", tt.meta, got, tt.want)
		}
		if err == nil && (o.Flex == nil || o.Flex.MaxWait != plan.DefaultFlexWait || o.Flex.MaxRun != 4*time.Hour) {
			t.Errorf("jobmeta.ParseJobOptions(%v) flex = %v, want max_wait 168h (the default), max_run 4h", tt.meta, o.Flex)
		}
	}
}
