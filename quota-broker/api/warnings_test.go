package api

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/plan"
)

// TestPlanWarningsReadRights (issue 16 item 7): /v1/queue and
// /v1/reservation/<id> return the last plan's warnings, in full for a
// namespace the caller may read, as namespace, kind and GPUs for another,
// and the tree's (no namespace) to admins only.
func TestPlanWarningsReadRights(t *testing.T) {
	h := newHarness(t, options{})
	if code, body := h.do(t, "POST", "/v1/reservations", tokTeamB, bookingB); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	booked := plan.Warning{Kind: plan.WarnUnplaceable, Namespace: "workspace-b", Reservation: "rb", GPUs: 8,
		Message: "reservation rb: 1 of its 2 allocations of 8 GPUs cannot be placed before 2026-12-07T08:00:00+09:00, even with preemption"}
	held := plan.Warning{Kind: plan.WarnHeld, Namespace: "workspace-c", Job: "chat", Group: "server", GPUs: 4,
		Message: "4 GPUs held for the scale-up of workspace-c/chat/server at 2026-12-01T08:00:00Z, until 2026-12-01T08:01:30Z"}
	tree := plan.Warning{Kind: plan.WarnGeneral, Message: "L1: the tree's nominal exceeds the healthy GPUs"}
	h.backend.mu.Lock()
	p := *h.backend.st.Plan
	p.Warnings = []plan.Warning{booked, held, tree}
	h.backend.st.Plan = &p
	h.backend.mu.Unlock()

	full := func(w plan.Warning) WarningEntry {
		return WarningEntry{Kind: string(w.Kind), Namespace: w.Namespace, GPUs: w.GPUs, Reservation: w.Reservation,
			Job: w.Job, Group: w.Group, Message: w.Message}
	}
	redacted := func(w plan.Warning) WarningEntry {
		return WarningEntry{Kind: string(w.Kind), Namespace: w.Namespace, GPUs: w.GPUs}
	}
	queue := func(tok, path string) []WarningEntry {
		t.Helper()
		code, body := h.do(t, "GET", path, tok, "")
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		var got QueueResponse
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		return got.Warnings
	}
	for _, c := range []struct {
		name, tok, path string
		want            []WarningEntry
	}{
		{"team B", tokTeamB, "/v1/queue", []WarningEntry{full(booked), redacted(held)}},
		{"team C", tokTeamC, "/v1/queue", []WarningEntry{redacted(booked), full(held)}},
		{"team C, its namespace", tokTeamC, "/v1/queue?namespace=workspace-c", []WarningEntry{full(held)}},
		{"management", tokMgmt, "/v1/queue", []WarningEntry{full(booked), full(held), full(tree)}},
	} {
		if d := cmp.Diff(c.want, queue(c.tok, c.path)); d != "" {
			t.Errorf("%s: warnings (-want +got):\n%s", c.name, d)
		}
	}
	code, body := h.do(t, "GET", "/v1/reservation/rb", tokTeamB, "")
	var got ReservationResponse
	if err := json.Unmarshal(body, &got); code != 200 || err != nil {
		t.Fatalf("reservation: %d %s", code, body)
	}
	if d := cmp.Diff([]WarningEntry{full(booked)}, got.Warnings); d != "" {
		t.Errorf("reservation rb: warnings (-want +got):\n%s", d)
	}
}
