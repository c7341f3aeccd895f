package api

import (
	"strings"
	"testing"

	"github.com/gputide/gputide/quota-broker/plan"
)

// TestPreviewSurvivesAPanickingPlanner: a planner panic on POST /v1/plan
// is answered 500 naming the panic (issue 16 item 5), the connection is
// not dropped, and the server keeps answering.
func TestPreviewSurvivesAPanickingPlanner(t *testing.T) {
	calls := 0
	h := newHarness(t, options{planner: func(*plan.Snapshot) (*plan.Plan, error) {
		calls++
		panic("boom in the planner")
	}})
	job := `{"Job":{"ID":"probe","Namespace":"workspace-b","Type":"batch","Priority":50,"Datacenters":["dc1"],"TaskGroups":[{"Name":"g","Count":1,"Tasks":[{"Name":"t","Resources":{"Devices":[{"Name":"nvidia/gpu","Count":8}]}}]}]}}`
	for i := 0; i < 2; i++ {
		code, body := h.do(t, "POST", "/v1/plan", tokTeamB, job)
		e := errOf(t, body)
		if code != 500 || !strings.Contains(e.Error, "the planner panicked on this preview: boom in the planner") {
			t.Fatalf("try %d: %d %+v, want 500 naming the panic", i, code, e)
		}
	}
	if calls != 2 {
		t.Errorf("planner called %d times, want 2", calls)
	}
	if code, body := h.do(t, "GET", "/v1/queue", tokTeamB, ""); code != 200 {
		t.Errorf("GET /v1/queue after the panics: %d %s", code, body)
	}
}
