package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// DESIGN L10, L5 pre-warm: the holds of hold actions are kept by owner and
// node (GPUs merged once and sorted, the later end kept), in owner then
// node order, and end at their Until, a reservation's at its end, a
// vanished reservation's at once.
func TestMergeHoldAndHoldEnds(t *testing.T) {
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	end := now.Add(time.Hour)
	owner := GroupKey{Namespace: "workspace-b", Job: "training", Group: "train"}
	acts := []Action{
		{Action: ActionHold, Node: "n1", For: owner, GPUIDs: []string{"GPU-2"}, Until: end.Add(-time.Minute)},
		{Action: ActionHold, Node: "n1", For: owner, GPUIDs: []string{"GPU-1", "GPU-2"}, Until: end},
		{Action: ActionHold, Node: "n1", Reservation: "r-1", GPUIDs: []string{"GPU-1"}, Until: end.Add(-time.Minute)},
		{Action: ActionHold, Node: "n0", Reservation: "r-gone", GPUIDs: []string{"GPU-9"}, Until: end},
		{Action: ActionHold, Node: "n1", GPUIDs: []string{"GPU-3"}, Until: end}, // no owner
		{Action: ActionStop, Node: "n1", Alloc: "x", Reservation: "r-1"},
	}
	var hs []Hold
	for _, act := range acts {
		if h, ok := HoldOfAction(act); ok {
			hs = MergeHold(hs, h)
		}
	}
	want := []Hold{
		{For: HoldOwner{Group: owner}, Node: "n1", GPUIDs: []string{"GPU-1", "GPU-2"}, Until: end},
		{For: HoldOwner{Reservation: "r-1"}, Node: "n1", GPUIDs: []string{"GPU-1"}, Until: end.Add(-time.Minute)},
		{For: HoldOwner{Reservation: "r-gone"}, Node: "n0", GPUIDs: []string{"GPU-9"}, Until: end},
	}
	if diff := cmp.Diff(want, hs); diff != "" {
		t.Fatalf("merged holds (-want +got):\n%s", diff)
	}
	if !hs[0].Equal(want[0]) || hs[0].Equal(want[1]) {
		t.Errorf("Equal: %v %v", hs[0].Equal(want[0]), hs[0].Equal(want[1]))
	}
	ends := HoldEnds([]Reservation{{ID: "r-1", End: end.Add(time.Hour)}})
	got := []time.Time{ends(hs[0]), ends(hs[1]), ends(hs[2])}
	if diff := cmp.Diff([]time.Time{end, end.Add(time.Hour), {}}, got); diff != "" {
		t.Fatalf("hold ends (-want +got):\n%s", diff)
	}
}
