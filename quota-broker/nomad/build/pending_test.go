package build

import "testing"

// pendingCount's table: where the job is, the group's count, its live
// allocations and what Nomad queued (with or without a summary).
func TestPendingCount(t *testing.T) {
	cases := []struct {
		name        string
		place       jobPlace
		want, live  int
		queued      int
		hasSummary  bool
		wantPending int
	}{
		{"holding, fresh: all queued", placeHolding, 4, 0, 4, true, 4},
		{"holding, summary not yet updated: what Nomad queued", placeHolding, 4, 0, 0, true, 0},
		{"holding, no summary for the group: the whole count", placeHolding, 4, 0, 0, false, 4},
		{"holding, some live (a victim's survivors): the rest", placeHolding, 4, 3, 4, true, 1},
		{"holding, no summary, some live", placeHolding, 4, 1, 0, false, 3},
		{"holding, all live: none", placeHolding, 2, 2, 2, true, 0},
		{"holding, more live than the count (scaled down): none", placeHolding, 2, 3, 1, true, -1},
		{"admitted, all placed: none", placeAdmitted, 4, 4, 0, true, 0},
		{"admitted, scaled up by two: the queued", placeAdmitted, 6, 4, 2, true, 2},
		{"admitted, queued past the count: capped", placeAdmitted, 4, 3, 5, true, 1},
		{"admitted, no summary: none", placeAdmitted, 4, 0, 0, false, 0},
		{"direct, all running: every allocation", placeDirect, 4, 4, 0, true, 4},
		{"direct, half placed: live and queued", placeDirect, 4, 2, 2, true, 4},
		{"direct, partly queued: live and queued", placeDirect, 4, 1, 1, true, 2},
		{"direct, queued past the count: capped", placeDirect, 4, 3, 3, true, 4},
		{"direct, no summary: the whole count", placeDirect, 4, 0, 0, false, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := pendingCount(tc.place, tc.want, tc.live, tc.queued, tc.hasSummary); got != tc.wantPending {
				t.Fatalf("pendingCount(%d, want %d, live %d, queued %d, summary %v) = %d, want %d",
					tc.place, tc.want, tc.live, tc.queued, tc.hasSummary, got, tc.wantPending)
			}
		})
	}
}
