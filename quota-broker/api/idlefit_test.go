package api

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
)

// GET /v1/idle-fit answers the last plan's idle fit of an idle group to a
// token with read-job on its namespace (issue 11 item 4): 404 for another
// namespace's group and for a group with no gputide-idle policy, 400
// naming a missing parameter. The Go client reads the same figure.
func TestIdleFitEndpoint(t *testing.T) {
	h := newHarness(t, options{})
	st := h.backend.State()
	snap := *st.Snapshot
	snap.IdleGroups = []plan.IdleGroup{{Namespace: "workspace-b", Job: "sweep", Group: "worker", Priority: 20, GPUs: 1, Max: 64, Count: 1}}
	p, err := plan.Compute(&snap)
	if err != nil {
		t.Fatal(err)
	}
	want, ok := p.IdleFitOf(plan.GroupKey{Namespace: "workspace-b", Job: "sweep", Group: "worker"})
	if !ok {
		t.Fatal("the plan has no idle fit for the group")
	}
	c := servePlan(t, h, &snap, p, st.SyncedAt)
	got, err := c.IdleFit(context.Background(), "workspace-b", "sweep", "worker")
	if err != nil {
		t.Fatal(err)
	}
	if got.IdleFit != want || got.Namespace != "workspace-b" || got.Job != "sweep" || got.Group != "worker" {
		t.Errorf("idle fit %+v, want %d for workspace-b/sweep/worker", got, want)
	}
	for _, tc := range []struct {
		name, path, token string
		status            int
		field             string
	}{
		{"another namespace", "/v1/idle-fit?namespace=workspace-b&job=sweep&group=worker", tokTeamC, 404, ""},
		{"not an idle group", "/v1/idle-fit?namespace=workspace-b&job=other&group=worker", tokTeamB, 404, ""},
		{"no group", "/v1/idle-fit?namespace=workspace-b&job=sweep", tokTeamB, 400, "group"},
		{"no token", "/v1/idle-fit?namespace=workspace-b&job=sweep&group=worker", "", 403, ""},
	} {
		code, body := h.do(t, "GET", tc.path, tc.token, "")
		if code != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.status)
			continue
		}
		if tc.field != "" {
			if e := errOf(t, body); e.Field != tc.field {
				t.Errorf("%s: field %q, want %q", tc.name, e.Field, tc.field)
			}
		}
	}
}

// GET /v1/idle-fit names the flavor the fit lies in when the plan names
// one (a tree with flavor blocks, DESIGN L13), and omits it otherwise.
func TestIdleFitEndpointNamesTheFlavor(t *testing.T) {
	h := newHarness(t, options{})
	st := h.backend.State()
	snap := *st.Snapshot
	k := plan.GroupKey{Namespace: "workspace-b", Job: "sweep", Group: "worker"}
	p := &plan.Plan{IdleFit: []plan.GroupFit{{Namespace: k.Namespace, Job: k.Job, Group: k.Group, Fit: 3, Flavor: "h100"}}}
	c := servePlan(t, h, &snap, p, st.SyncedAt)
	got, err := c.IdleFit(context.Background(), k.Namespace, k.Job, k.Group)
	if err != nil {
		t.Fatal(err)
	}
	if got.IdleFit != 3 || got.Flavor != "h100" {
		t.Errorf("idle fit %d in flavor %q, want 3 in h100", got.IdleFit, got.Flavor)
	}
	_, body := h.do(t, "GET", "/v1/idle-fit?namespace=workspace-b&job=sweep&group=worker", tokTeamB, "")
	if !strings.Contains(string(body), `"flavor": "h100"`) {
		t.Errorf("body %s does not name the flavor", body)
	}
	p.IdleFit[0].Flavor = ""
	if _, body := h.do(t, "GET", "/v1/idle-fit?namespace=workspace-b&job=sweep&group=worker", tokTeamB, ""); strings.Contains(string(body), "flavor") {
		t.Errorf("body %s names a flavor, want none without one", body)
	}
}

// servePlan makes the harness's broker serve snap and p, synced at
// synced, and returns a client of workspace-b's token.
func servePlan(t *testing.T, h *harness, snap *plan.Snapshot, p *plan.Plan, synced time.Time) *Client {
	t.Helper()
	h.backend.mu.Lock()
	h.backend.st = BrokerState{Snapshot: snap, Plan: p, SyncedAt: synced}
	h.backend.mu.Unlock()
	c, err := NewClient(h.url, tokTeamB, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
