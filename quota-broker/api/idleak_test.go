package api

import (
	"bytes"
	"net/http"
	"testing"
)

// A booking ID of another namespace answers like a free one (issue 16): the
// request is checked (rights, validation, L10) before its ID, so team B
// learns nothing of workspace-c's IDs from a refused booking; only a
// booking that would be accepted hears that its ID is taken, with no detail
// of the namespace it cannot read.
func TestBookingIDOfAnotherNamespaceAnswersAsAFreeOne(t *testing.T) {
	h := newHarness(t, options{})
	if code, body := h.do(t, "POST", "/v1/reservations", tokTeamC,
		`{"id":"rc","namespace":"workspace-c","gpus":8,"start":"2026-12-07T08:00:00Z","duration":"1h"}`); code != http.StatusCreated {
		t.Fatalf("C books rc: %d %s", code, body)
	}
	base := h.guard(t)
	for _, tc := range []struct {
		name, rest string
		status     int
	}{
		{"L10 refusal", `"namespace":"workspace-b","gpus":49,"start":"2026-12-07T08:00:00Z","duration":"1h"`, http.StatusConflict},
		{"Prepare refusal", `"namespace":"workspace-b","gpus":16,"alloc_gpus":5,"start":"2026-12-07T08:00:00Z","duration":"1h"`, http.StatusBadRequest},
		{"rights", `"namespace":"workspace-c","gpus":1,"start":"2026-12-07T08:00:00Z","duration":"1h"`, http.StatusForbidden},
	} {
		takenCode, taken := h.do(t, "POST", "/v1/reservations", tokTeamB, `{"id":"rc",`+tc.rest+`}`)
		freeCode, free := h.do(t, "POST", "/v1/reservations", tokTeamB, `{"id":"rfree",`+tc.rest+`}`)
		if takenCode != tc.status || freeCode != tc.status || !bytes.Equal(taken, free) {
			t.Errorf("%s: taken ID %d %s; free ID %d %s; want both %d, the same body", tc.name, takenCode, taken, freeCode, free, tc.status)
		}
	}
	if g := h.guard(t); g != base {
		t.Errorf("guard moved %d -> %d on refused bookings", base, g)
	}
	// A booking that fits hears that the ID is taken, without details.
	code, body := h.do(t, "POST", "/v1/reservations", tokTeamB, `{"id":"rc","namespace":"workspace-b","gpus":8,"start":"2026-12-07T08:00:00Z","duration":"1h"}`)
	if e := errOf(t, body); code != http.StatusConflict || e.Error != `reservation ID "rc" is taken` || e.Refusal != nil || e.Field != "" {
		t.Errorf("fitting booking with C's ID: %d %s", code, body)
	}
}

// A booking that reuses another namespace's ID must be checked against
// L10 with that booking counted: the check skipped a booking of the same
// ID (as for an update of one's own), so team B, bound above workspace-c,
// heard "taken" where a free ID heard the L10 refusal, and learnt rc's
// GPUs and window by varying its request.
func TestBookingIDOfAnotherNamespaceCountsInL10(t *testing.T) {
	h := newHarness(t, options{})
	tree := `{"root":{"name":"Quota1","gpus":128,"namespaces":["workspace-b"],"children":[` +
		`{"name":"Quota1.1","gpus":48,"namespaces":["workspace-a"]},{"name":"Quota1.2","gpus":80,"namespaces":["workspace-c"]}]}}`
	if code, body := h.do(t, "PUT", "/v1/quotas", tokMgmt, tree); code != 200 {
		t.Fatalf("tree: %d %s", code, body)
	}
	if code, body := h.do(t, "POST", "/v1/reservations", tokTeamC,
		`{"id":"rc","namespace":"workspace-c","gpus":80,"start":"2026-12-07T08:00:00Z","duration":"1h"}`); code != http.StatusCreated {
		t.Fatalf("C books rc: %d %s", code, body)
	}
	rest := `"namespace":"workspace-b","gpus":49,"start":"2026-12-07T08:00:00Z","duration":"1h"}`
	takenCode, taken := h.do(t, "POST", "/v1/reservations", tokTeamB, `{"id":"rc",`+rest)
	freeCode, free := h.do(t, "POST", "/v1/reservations", tokTeamB, `{"id":"rfree",`+rest)
	if takenCode != http.StatusConflict || freeCode != http.StatusConflict || !bytes.Equal(taken, free) {
		t.Errorf("taken ID %d %s; free ID %d %s; want both the same L10 409", takenCode, taken, freeCode, free)
	}
}
