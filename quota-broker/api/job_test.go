package api

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/plan"
)

// jobOf reads GET path with tok and decodes it.
func jobOf(t *testing.T, h *harness, tok, path string) (int, JobResponse) {
	t.Helper()
	code, body := h.do(t, "GET", path, tok, "")
	var got JobResponse
	if code == 200 {
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%s: %v in %s", path, err, body)
		}
	}
	return code, got
}

// TestJobStory (issue 20 item 3): GET /v1/job/<ns>/<job> tells a waiting
// job's place in the order, what binds it with the numbers, and what it
// waits for next and when, with others' names cut to their namespace; it
// needs read-job on the namespace.
func TestJobStory(t *testing.T) {
	h := newHarness(t, options{})
	if code, _ := jobOf(t, h, tokTeamC, "/v1/job/workspace-b/llama-ft-13b"); code != 403 {
		t.Errorf("team C reading workspace-b's job: %d, want 403", code)
	}
	code, got := jobOf(t, h, tokTeamB, "/v1/job/workspace-b/llama-ft-13b")
	if code != 200 {
		t.Fatalf("team B: %d", code)
	}
	sub := time.Date(2026, 12, 1, 7, 40, 0, 0, time.UTC)
	want := []JobWaiting{{Group: "worker", GPUs: 16, Count: 2, AllocGPUs: 8, Position: 1, Of: 2, AheadGPUs: 0, Action: "wait", Rule: "L3",
		Reason: "Quota1.1: 40 of 48 GPUs in use; 8 more needed for 16 asked", SubmittedAt: &sub, WaitedSeconds: 1205}}
	if d := cmp.Diff(want, got.Waiting); d != "" || !got.Found || got.Quota != "Quota1.1" || len(got.Running) != 0 {
		t.Errorf("waiting (-want +got):\n%s\n%+v", d, got)
	}

	// What it waits for next: a booking above it starting, a hold of
	// another team's ending, the plan's next wake; warnings by rights.
	h.backend.mu.Lock()
	snap := *h.backend.st.Snapshot
	p := *h.backend.st.Plan
	snap.Reservations = append(snap.Reservations, plan.Reservation{ID: "rc", Namespace: "workspace-c", Quota: "Quota1.2", GPUs: 8,
		Start: clock.Add(2 * time.Hour), End: clock.Add(4 * time.Hour)},
		plan.Reservation{ID: "ra", Namespace: "workspace-a", Quota: "Quota1", GPUs: 8, Start: clock.Add(time.Hour), End: clock.Add(3 * time.Hour)})
	snap.Holds = []plan.Hold{{For: plan.HoldOwner{Group: plan.GroupKey{Namespace: "workspace-c", Job: "nb", Group: "g"}}, Node: "node-01",
		GPUIDs: []string{"g1", "g2"}, Until: clock.Add(30 * time.Minute)}}
	p.WakeAt = clock.Add(10 * time.Minute)
	setWarnings(t, &p, "L1: the tree's nominal exceeds the healthy GPUs")
	h.backend.st.Snapshot, h.backend.st.Plan = &snap, &p
	h.backend.mu.Unlock()
	_, got = jobOf(t, h, tokTeamB, "/v1/job/workspace-b/llama-ft-13b")
	wantNext := []JobNextEvent{
		{At: clock.Add(10 * time.Minute), Kind: "plan_wake", What: "the broker plans again, as time alone changes the plan then (L12)"},
		{At: clock.Add(30 * time.Minute), Kind: "hold_end", What: "the hold of 2 GPUs on node-01 for workspace-c ends"},
		{At: clock.Add(time.Hour), Kind: "booking_start", What: "booking of workspace-a of 8 GPUs in Quota1 starts: Quota1 may use 8 fewer (L10)"},
		{At: clock.Add(3 * time.Hour), Kind: "booking_end", What: "booking of workspace-a of 8 GPUs in Quota1 ends: Quota1 gets them back (L10)"},
	}
	if d := cmp.Diff(wantNext, got.Next); d != "" {
		t.Errorf("team B's next (-want +got):\n%s", d)
	}
	if len(got.Warnings) != 0 {
		t.Errorf("team B sees the tree's warnings: %+v", got.Warnings)
	}
	_, got = jobOf(t, h, tokMgmt, "/v1/job/workspace-b/llama-ft-13b")
	if len(got.Next) != 4 || got.Next[1].What != "the hold of 2 GPUs on node-01 for workspace-c/nb/g ends" {
		t.Errorf("management's next: %+v", got.Next)
	}
	if want := []WarningEntry{{Kind: "general", Message: "L1: the tree's nominal exceeds the healthy GPUs"}}; !cmp.Equal(want, got.Warnings) {
		t.Errorf("management's warnings: %+v", got.Warnings)
	}

	// A running job: its allocations and the plan's stops of them.
	_, got = jobOf(t, h, tokTeamB, "/v1/job/workspace-b/hparam-sweep")
	if r := got.Running; len(r) != 8 || r[0] != (JobAlloc{ID: "df1c3d1f-4990-c437-b220-b7282da046f0", Group: "trial", Node: "node-09", GPUs: 1, Idle: true,
		StartedAt: time.Date(2026, 12, 1, 6, 10, 0, 0, time.UTC), StopRule: "L5.1", StopReason: "idle allocation of Quota1.1 reclaimed for Quota1"}) || len(got.Waiting) != 0 {
		t.Errorf("hparam-sweep: %+v", got)
	}
	_, got = jobOf(t, h, tokTeamB, "/v1/job/workspace-b/nope")
	if got.Found || len(got.Waiting)+len(got.Running)+len(got.Next) != 0 {
		t.Errorf("an unknown job: %+v", got)
	}
}

// setWarnings sets p's warnings to general ones with these messages,
// whichever shape plan.Plan.Warnings has (messages, or plan.Warning).
func setWarnings(t *testing.T, p *plan.Plan, msgs ...string) {
	t.Helper()
	asStrings, _ := json.Marshal(msgs)
	if json.Unmarshal(asStrings, &p.Warnings) == nil {
		return
	}
	var ws []map[string]string
	for _, m := range msgs {
		ws = append(ws, map[string]string{"kind": "general", "message": m})
	}
	asObjects, _ := json.Marshal(ws)
	if err := json.Unmarshal(asObjects, &p.Warnings); err != nil {
		t.Fatal(err)
	}
}

// TestQuotaFiguresStoppingAndDisplaced (issue 20 items 3, 4): GPUs of
// allocations already being stopped are counted apart per subtree, and
// displaced is the core's figure.
func TestQuotaFiguresStoppingAndDisplaced(t *testing.T) {
	st := referenceState(t)
	snap := *st.Snapshot
	snap.Allocations = append([]plan.Allocation(nil), snap.Allocations...)
	stopped := 0
	for i := range snap.Allocations {
		if a := &snap.Allocations[i]; a.Job == "hparam-sweep" && stopped < 4 {
			a.StoppingFor = plan.GroupKey{Namespace: "workspace-a", Job: "chat", Group: "server"}
			stopped++
		}
	}
	p := *st.Plan
	p.Usage = append([]plan.Usage(nil), p.Usage...)
	for i := range p.Usage {
		if p.Usage[i].Quota == "Quota1.1" {
			p.Usage[i].Displaced = 3
		}
	}
	got := map[string][2]int{}
	for _, q := range QuotaFigures(&snap, &p, clock) {
		got[q.Name] = [2]int{q.StoppingGPUs, q.DisplacedGPUs}
	}
	want := map[string][2]int{"Quota1": {4, 0}, "Quota1.1": {4, 3}, "Quota1.2": {0, 0}}
	if !cmp.Equal(want, got) {
		t.Errorf("stopping, displaced per node: got %v, want %v", got, want)
	}
}
