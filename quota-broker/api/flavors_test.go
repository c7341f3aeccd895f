package api

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
