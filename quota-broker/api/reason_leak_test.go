package api

import (
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
)

// TestReasonsNameNoHiddenWorkspace (attack on issue 16's redaction): the
// plan's reasons for a team's own groups and allocations may name another
// workspace's booking ("to be displaced by reservation rc-secret") or job
// ("held for the scale-up of workspace-c/nb/g"). StoppingFor, warnings
// and next events cut those to the namespace; the reasons must too, in
// GET /v1/job, GET /v1/queue and the status page.
func TestReasonsNameNoHiddenWorkspace(t *testing.T) {
	h := newHarness(t, options{})
	h.backend.mu.Lock()
	snap := *h.backend.st.Snapshot
	p := *h.backend.st.Plan
	snap.Reservations = append(snap.Reservations, plan.Reservation{ID: "rc-secret", Namespace: "workspace-c", Quota: "Quota1.2", GPUs: 8,
		Start: clock.Add(2 * time.Hour), End: clock.Add(4 * time.Hour)})
	var sweep string
	for _, a := range snap.Allocations {
		if a.Namespace == "workspace-b" && a.Job == "hparam-sweep" {
			sweep = a.ID
			break
		}
	}
	p.Actions = append([]plan.Action(nil), p.Actions...)
	for i, a := range p.Actions {
		switch {
		case a.Action == plan.ActionStop && a.Alloc == sweep:
			p.Actions[i].Reason = "to be displaced by reservation rc-secret, which starts at 2026-12-01T10:00:00Z"
		case a.Action == plan.ActionWait && a.Job == "llama-ft-13b":
			p.Actions[i].Reason = "no node has 16 free GPUs; 8 GPUs held for the scale-up of workspace-c/nb-secret/g at 2026-12-01T09:00:00Z"
		}
	}
	h.backend.st.Snapshot, h.backend.st.Plan = &snap, &p
	h.backend.mu.Unlock()
	for _, path := range []string{"/v1/job/workspace-b/hparam-sweep", "/v1/job/workspace-b/llama-ft-13b", "/v1/queue", "/v1/queue?namespace=workspace-b"} {
		code, body := h.do(t, "GET", path, tokTeamB, "")
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		for _, secret := range []string{"rc-secret", "nb-secret"} {
			if strings.Contains(string(body), secret) {
				t.Errorf("%s names workspace-c's %s to team B:\n%s", path, secret, body)
			}
		}
	}
	_, body := h.do(t, "GET", "/v1/job/workspace-b/hparam-sweep", tokMgmt, "")
	if !strings.Contains(string(body), "reservation rc-secret") {
		t.Errorf("management loses the booking's ID: %s", body)
	}
	_, body = h.do(t, "GET", "/v1/job/workspace-b/llama-ft-13b", tokTeamB, "")
	if !strings.Contains(string(body), "held for the scale-up of workspace-c at") {
		t.Errorf("team B's wait reason is not cut to the namespace: %s", body)
	}
}
