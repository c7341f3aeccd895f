package command

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/cli"
)

// A planner that panics makes gputide plan exit 1 with the panic's message
// and its stack, not die with Go's panic output (issue 16, item 5).
func TestPlanReportsAPanickingPlanner(t *testing.T) {
	var out, errOut bytes.Buffer
	c := &PlanCommand{Meta: Meta{Ui: &cli.BasicUi{Writer: &out, ErrorWriter: &errOut}},
		Planner: func(*plan.Snapshot) (*plan.Plan, error) {
			var v *plan.Action
			_ = v.Job // a nil pointer, as in the stopReason panic
			return nil, nil
		}}
	code := c.Run([]string{referenceSnapshot})
	if code != 1 {
		t.Fatalf("exit %d, want 1; stdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	if out.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", out.String())
	}
	got := errOut.String()
	for _, want := range []string{
		`Error planning snapshot "` + referenceSnapshot + `": the planner panicked: runtime error: invalid memory address or nil pointer dereference`,
		"This is a bug in the planner",
		"goroutine ",                       // the stack
		"TestPlanReportsAPanickingPlanner", // its frames name the planner
	} {
		if !strings.Contains(got, want) {
			t.Errorf("stderr lacks %q:\n%s", want, got)
		}
	}
}
