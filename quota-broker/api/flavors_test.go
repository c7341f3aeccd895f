package api

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// flavorTree is the harness's tree with two flavors (DESIGN L13).
const flavorTree = `
flavor "h100" {
  models = ["NVIDIA H100 80GB HBM3"]
}
flavor "a100" {
  models = ["NVIDIA A100-SXM4-40GB"]
}
quota "Quota1" {
  gpus = { h100 = 64, a100 = 64 }
  child_preemption = true
  namespaces = ["workspace-a"]
  quota "Quota1.1" {
    gpus = { h100 = 24, a100 = 24 }
    namespaces = ["workspace-b"]
  }
  quota "Quota1.2" {
    gpus = { h100 = 40, a100 = 40 }
    namespaces = ["workspace-c"]
  }
}
`

// TestQuotaMoveAndScalePerFlavor: a move or scale acts on one flavor's
// nominal; in a tree of several, the flavor is required and a missing or
// unknown one is bad input naming the choices (issue 17 item 1).
func TestQuotaMoveAndScalePerFlavor(t *testing.T) {
	h := newHarness(t, options{})
	if code, body := h.do(t, "PUT", "/v1/quotas", tokMgmt, flavorTree); code != 200 {
		t.Fatalf("apply: %d %s", code, body)
	}
	for _, tc := range []struct{ method, path, body, want string }{
		{"POST", "/v1/quota/move", `{"from":"Quota1.2","to":"Quota1.1","gpus":8}`, "the tree has 2 flavors (h100, a100): name one (flavor)"},
		{"POST", "/v1/quota/move", `{"from":"Quota1.2","to":"Quota1.1","gpus":8,"flavor":"b200"}`, `is not a flavor of the tree (h100, a100)`},
		{"PUT", "/v1/quota/Quota1.1", `{"gpus":8}`, "the tree has 2 flavors (h100, a100): name one (flavor)"},
	} {
		code, body := h.do(t, tc.method, tc.path, tokMgmt, tc.body)
		if code != 400 || !strings.Contains(string(body), tc.want) || !strings.Contains(string(body), "flavor") {
			t.Errorf("%s %s %s: %d %s, want 400 with %q", tc.method, tc.path, tc.body, code, body, tc.want)
		}
	}
	code, body := h.do(t, "POST", "/v1/quota/move", tokMgmt, `{"from":"Quota1.2","to":"Quota1.1","gpus":8,"flavor":"h100"}`)
	if code != 200 {
		t.Fatalf("move: %d %s", code, body)
	}
	if code, body := h.do(t, "POST", "/v1/quota/move", tokMgmt, `{"from":"Quota1.2","to":"Quota1.1","gpus":41,"flavor":"a100"}`); code != 409 ||
		!strings.Contains(string(body), `Quota1.2 has 40 GPUs of flavor \"a100\" nominal, 41 asked to move`) {
		t.Errorf("move beyond the nominal: %d %s", code, body)
	}
	if code, body := h.do(t, "PUT", "/v1/quota/Quota1.1", tokMgmt, `{"gpus":30,"flavor":"a100"}`); code != 409 ||
		!strings.Contains(string(body), `Quota1 of flavor \"a100\": children 30 + 40 = 70 \u003e 64`) {
		t.Errorf("scale beyond L1: %d %s", code, body)
	}
	if code, body := h.do(t, "PUT", "/v1/quota/Quota1.1", tokMgmt, `{"gpus":20,"flavor":"a100"}`); code != 200 {
		t.Fatalf("scale: %d %s", code, body)
	}
	root := h.tree(t)
	got := map[string]quota.Nominal{}
	root.Walk(func(n *quota.Node) { got[n.Name] = n.GPUs })
	want := map[string]quota.Nominal{
		"Quota1":   {"h100": 64, "a100": 64},
		"Quota1.1": {"h100": 32, "a100": 20},
		"Quota1.2": {"h100": 32, "a100": 40},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nominals after the move and the scale (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"h100", "a100"}, quota.FlavorNames(root)); diff != "" {
		t.Errorf("the stored tree's flavors (-want +got):\n%s", diff)
	}
}

// TestQuotaFiguresPerFlavor: /v1/quotas has one entry per quota node and
// flavor (DESIGN L13, issue 17 item 5), nodes parents first and flavors in
// tree order; each figure counts its flavor only: usage from the plan's
// row, a booking in its flavor, a queued group in the flavor the plan
// answered (else its first allowed), a stopping allocation's devices by
// their flavor, an ungoverned MIG slice nowhere.
func TestQuotaFiguresPerFlavor(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	h100, a100 := "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"
	root := &quota.Node{Name: "Quota1", GPUs: quota.Nominal{"h100": 8, "a100": 8}, Namespaces: []string{"workspace-a"},
		Flavors:  []quota.Flavor{{Name: "h100", Models: []string{h100}}, {Name: "a100", Models: []string{a100}}},
		Children: []*quota.Node{{Name: "Quota1.1", GPUs: quota.Nominal{"h100": 4, "a100": 2}, Namespaces: []string{"workspace-b"}}}}
	snap := &plan.Snapshot{
		Time:  now,
		Quota: root,
		Nodes: []plan.Node{{ID: "n1", GPUs: []plan.GPU{
			{ID: "h1", Model: h100, Healthy: true}, {ID: "h2", Model: h100, Healthy: true},
			{ID: "a1", Model: a100, Healthy: true}, {ID: "a2", Model: a100, Healthy: true},
			{ID: "m1", Model: a100, MIGProfile: "1g.5gb", Healthy: true},
		}}},
		Allocations: []plan.Allocation{
			{ID: "x1", Namespace: "workspace-b", Job: "train", Group: "w", Node: "n1", GPUIDs: []string{"h1", "a1", "m1"},
				StoppingFor: plan.GroupKey{Namespace: "workspace-a", Job: "infer", Group: "s"}},
			{ID: "x2", Namespace: "workspace-a", Job: "infer", Group: "s", Node: "n1", GPUIDs: []string{"h2"}},
		},
		Pending: []plan.Pending{
			{Namespace: "workspace-b", Job: "sweep", Group: "g", Count: 1, GPUs: 2, Flavors: []string{"a100", "h100"}},
			{Namespace: "workspace-a", Job: "infer", Group: "s", Count: 2, GPUs: 1, Flavors: []string{"a100", "h100"}},
		},
		Reservations: []plan.Reservation{
			{ID: "r1", Namespace: "workspace-b", Quota: "Quota1.1", GPUs: 2, Flavor: "a100", Start: now.Add(-time.Hour), End: now.Add(time.Hour)},
			{ID: "r2", Namespace: "workspace-b", Quota: "Quota1.1", GPUs: 1, Flavor: "h100", Start: now.Add(time.Hour), End: now.Add(2 * time.Hour)},
		},
	}
	p := &plan.Plan{
		Actions: []plan.Action{
			{Action: plan.ActionAdmit, Namespace: "workspace-a", Job: "infer", Group: "s", Flavor: "h100"},
			{Action: plan.ActionWait, Namespace: "workspace-b", Job: "sweep", Group: "g"},
		},
		Usage: []plan.Usage{
			{Quota: "Quota1", Flavor: "h100", Nominal: 8, Used: 2, NonIdle: 2, Lendable: 6},
			{Quota: "Quota1", Flavor: "a100", Nominal: 8, Used: 1, NonIdle: 0, Lendable: 7},
			{Quota: "Quota1.1", Flavor: "h100", Nominal: 4, Used: 1, NonIdle: 1, Lendable: 3},
			{Quota: "Quota1.1", Flavor: "a100", Nominal: 2, Used: 1, Borrowed: 0, Debt: 0, Displaced: 1, Lendable: 1},
		},
	}
	ws := func(ns string) []string { return []string{ns} }
	// DESIGN L14, weights the nominals: h100, Quota1.1 base max(1,
	// min(4, 1)) = 1, nothing more wanted: share 1; a100, base max(0,
	// min(2, 1 used + 2 queued)) = 2, wants 1 of the 8 - 2 Quota1 lends:
	// share 3. The root has none.
	fair := func(x float64) *float64 { return &x }
	want := []Quota{
		{Name: "Quota1", Flavor: "h100", NominalGPUs: 8, UsedGPUs: 2, NonidleGPUs: 2, LendableGPUs: 6, QueuedGPUs: 2, StoppingGPUs: 1, Workspaces: ws("workspace-a"), Weight: 8},
		{Name: "Quota1", Flavor: "a100", NominalGPUs: 8, UsedGPUs: 1, LendableGPUs: 7, BookedGPUs: 2, QueuedGPUs: 2, StoppingGPUs: 1, Workspaces: ws("workspace-a"), Weight: 8},
		{Name: "Quota1.1", Parent: "Quota1", Flavor: "h100", NominalGPUs: 4, UsedGPUs: 1, NonidleGPUs: 1, LendableGPUs: 3, StoppingGPUs: 1, Workspaces: ws("workspace-b"), Weight: 4, FairShare: fair(1)},
		{Name: "Quota1.1", Parent: "Quota1", Flavor: "a100", NominalGPUs: 2, UsedGPUs: 1, DisplacedGPUs: 1, LendableGPUs: 1, BookedGPUs: 2, QueuedGPUs: 2, StoppingGPUs: 1, Workspaces: ws("workspace-b"), Weight: 2, FairShare: fair(3)},
	}
	if diff := cmp.Diff(want, QuotaFigures(snap, p, now)); diff != "" {
		t.Errorf("figures per flavor (-want +got):\n%s", diff)
	}
	// Without a plan: the nominals, bookings, queue (first allowed
	// flavor) and stops still show, per flavor.
	got := QuotaFigures(snap, nil, now)
	queued := map[string]int{}
	for _, q := range got {
		queued[q.Name+"/"+q.Flavor] = q.QueuedGPUs
	}
	if diff := cmp.Diff(map[string]int{"Quota1/h100": 0, "Quota1/a100": 4, "Quota1.1/h100": 0, "Quota1.1/a100": 2}, queued); diff != "" {
		t.Errorf("queued without a plan (-want +got):\n%s", diff)
	}
}

// TestUngovernedDevices: /v1/quotas lists the devices of no flavor per
// node, model and profile, with the reason (DESIGN L13).
func TestUngovernedDevices(t *testing.T) {
	h100, a100 := "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"
	nodes := []plan.Node{
		{ID: "n1", GPUs: []plan.GPU{{ID: "h1", Model: h100}, {ID: "m1", Model: a100, MIGProfile: "1g.5gb"}, {ID: "m2", Model: a100, MIGProfile: "1g.5gb"}}},
		{ID: "n2", GPUs: []plan.GPU{{ID: "a1", Model: a100}, {ID: "l1", Model: "NVIDIA L4"}}},
	}
	flavored := &plan.Snapshot{Nodes: nodes, Quota: &quota.Node{Name: "Quota1",
		Flavors: []quota.Flavor{{Name: "h100", Models: []string{h100}}, {Name: "a100", Models: []string{a100}}}}}
	want := []Ungoverned{
		{Node: "n1", Model: a100, MIGProfile: "1g.5gb", Devices: 2, Reason: `model "NVIDIA A100-SXM4-40GB" with mig_profile "1g.5gb" is in no flavor of the tree (h100, a100)`},
		{Node: "n2", Model: "NVIDIA L4", Devices: 1, Reason: `model "NVIDIA L4" is in no flavor of the tree (h100, a100)`},
	}
	if diff := cmp.Diff(want, UngovernedDevices(flavored)); diff != "" {
		t.Errorf("flavored tree (-want +got):\n%s", diff)
	}
	implicit := &plan.Snapshot{Nodes: nodes, Quota: &quota.Node{Name: "Quota1"}}
	want = []Ungoverned{{Node: "n1", Model: a100, MIGProfile: "1g.5gb", Devices: 2, Reason: `MIG 1g.5gb instance: the implicit flavor "gpu" takes whole GPUs only`}}
	if diff := cmp.Diff(want, UngovernedDevices(implicit)); diff != "" {
		t.Errorf("implicit flavor (-want +got):\n%s", diff)
	}
	if got := UngovernedDevices(&plan.Snapshot{Nodes: nodes[1:2], Quota: flavored.Quota}); len(got) != 1 {
		t.Errorf("n2 alone: %v, want its L4 only", got)
	}
}
