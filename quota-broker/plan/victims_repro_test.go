package plan_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/snapshot"
)

// reproRow is what a repro test compares of an action.
type reproRow struct {
	Action plan.ActionKind
	What   string // the allocation of a stop, else namespace/job/group
	Rule   plan.Rule
	For    string
}

func reproRows(p *plan.Plan) []reproRow {
	var out []reproRow
	for _, a := range p.Actions {
		r := reproRow{Action: a.Action, Rule: a.Rule, What: a.Namespace + "/" + a.Job + "/" + a.Group}
		if a.Action == plan.ActionStop {
			r.What, r.For = a.Alloc, a.For.String()
		}
		out = append(out, r)
	}
	return out
}

// planRepro plans testdata/repro/name (a copy of ../shared/repro of issue
// 16) and checks that Compute did not modify the snapshot.
func planRepro(t *testing.T, name string) *plan.Plan {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "repro", name))
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Unmarshal(data)
	if err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	before, err := snapshot.Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Compute(s)
	if err != nil {
		t.Fatalf("Compute: %v", err)
	}
	if !reflect.DeepEqual(before, s) {
		t.Errorf("Compute modified the snapshot %s", name)
	}
	return p
}

// TestReproBatchDebtDisplacedPlansWithoutPanic is issue 16 item 1's
// snapshot: b-booked names the active r-1; c-train's c-train-1 is debt of
// Quota1.2 past its grace (L5 step 1) and c-train-0 is displaced at
// Quota1 (L10.start). The planner panicked in stopReason; DESIGN says
// b-booked is admitted and c-train stopped whole by its largest-key rule,
// L10.start (L5).
func TestReproBatchDebtDisplacedPlansWithoutPanic(t *testing.T) {
	p := planRepro(t, "planner-panic-batch-debt-displaced.json")
	want := []reproRow{
		{Action: plan.ActionStop, What: "c-train-0", Rule: plan.RuleStart, For: "workspace-b/b-booked/g"},
		{Action: plan.ActionStop, What: "c-train-1", Rule: plan.RuleStart, For: "workspace-b/b-booked/g"},
		{Action: plan.ActionAdmit, What: "workspace-b/b-booked/g", Rule: plan.RuleReservation},
	}
	if diff := cmp.Diff(want, reproRows(p)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

// TestReproStaleDebtAfterInPlanStop is issue 16 item 3's snapshot: a-new
// stops b-old (L5.2), bringing Quota1.1 to 2 of 8, so b-new is debt no
// more (DESIGN L9: within a plan a stopped allocation leaves usage, debt
// and displaced at once). c-new is not entitled (Quota1: 16 of 16, debt
// excluded) and waits; b-new is not stopped.
func TestReproStaleDebtAfterInPlanStop(t *testing.T) {
	p := planRepro(t, "stale-debt-after-in-plan-stop.json")
	want := []reproRow{
		{Action: plan.ActionStop, What: "b-old-0", Rule: plan.RuleChild, For: "workspace-a/a-new/g"},
		{Action: plan.ActionAdmit, What: "workspace-a/a-new/g", Rule: plan.RuleAdmission},
		{Action: plan.ActionWait, What: "workspace-c/c-new/g", Rule: plan.RuleAdmission},
	}
	if diff := cmp.Diff(want, reproRows(p)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
	for _, u := range p.Usage {
		if u.Debt != 0 {
			t.Errorf("usage %+v: want no debt after the plan's stop", u)
		}
	}
}
