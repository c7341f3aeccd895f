package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/store"
	"github.com/hashicorp/nomad/api"
)

// countingStore counts the writes that reach the store under prefix
// (empty: "holds/").
type countingStore struct {
	store.Store
	prefix        string
	puts, deletes []store.Key
}

func (c *countingStore) WriteRecords(ctx context.Context, lock *store.Lock, writes []store.RecordWrite) error {
	prefix := c.prefix
	if prefix == "" {
		prefix = "holds/"
	}
	for _, w := range writes {
		if !strings.HasPrefix(string(w.Key()), prefix) {
			continue
		}
		if w.IsDelete() {
			c.deletes = append(c.deletes, w.Key())
		} else {
			c.puts = append(c.puts, w.Key())
		}
	}
	return c.Store.WriteRecords(ctx, lock, writes)
}

// recordHoldsOf records the holds of plan p at now into mem, as a leader's
// record step does, and returns the view it started from.
func recordHoldsOf(t *testing.T, mem *memory, lock *store.Lock, p *plan.Plan, res []plan.Reservation, now time.Time) (*view, error) {
	t.Helper()
	mem.guarded(&store.Guarded{}, nil)
	mem.mu.Lock()
	mem.res = res
	mem.mu.Unlock()
	v, err := mem.view(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b := &batch{}
	recordHolds(b, &cycleState{view: v, p: p, start: now})
	return v, mem.commit(context.Background(), lock, b)
}

// DESIGN L10, L12: the leader merges the plan's hold actions into the
// stored holds (GPUs added, the later end kept), writes only the owners
// that change, deletes an owner whose holds all ended or whose booking is
// gone, and its memory holds what it wrote; a deposed leader writes
// nothing.
func TestRecordHoldsMergesWritesChangesAndDeletesEnded(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	lock, err := st.Lock(ctx, "leader")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 7, 7, 59, 0, 0, time.UTC)
	r1 := plan.HoldOwner{Reservation: "r-1"}
	gone := plan.HoldOwner{Reservation: "r-gone"}
	ended := plan.HoldOwner{Group: plan.GroupKey{Namespace: "workspace-a", Job: "serve/v1", Group: "web"}}
	pre := plan.HoldOwner{Group: plan.GroupKey{Namespace: "workspace-a", Job: "serve/v2", Group: "web/x"}}
	for _, h := range []store.Hold{
		{For: r1, Nodes: []store.HeldGPUs{{Node: "n1", GPUIDs: []string{"GPU-1"}, Until: now.Add(30 * time.Second)}}},
		{For: gone, Nodes: []store.HeldGPUs{{Node: "n2", GPUIDs: []string{"GPU-5"}, Until: now.Add(time.Minute)}}},
		{For: ended, Nodes: []store.HeldGPUs{{Node: "n3", GPUIDs: []string{"GPU-7"}, Until: now}}},
	} {
		if err := st.PutHold(ctx, lock, h); err != nil {
			t.Fatal(err)
		}
	}
	cs := &countingStore{Store: st}
	mem := newMemory(cs, true)
	mem.lead()
	p := &plan.Plan{Actions: []plan.Action{
		{Action: plan.ActionHold, Reservation: "r-1", Node: "n1", GPUIDs: []string{"GPU-2"}, Until: now.Add(30 * time.Second), Rule: plan.RuleDrain},
		{Action: plan.ActionHold, Reservation: "r-1", Node: "n1", GPUIDs: []string{"GPU-1"}, Until: now.Add(20 * time.Second), Rule: plan.RuleReservation},
		{Action: plan.ActionHold, For: pre.Group, Namespace: "workspace-a", Job: "serve/v2", Group: "web/x", Node: "n4",
			GPUIDs: []string{"GPU-8"}, Until: now.Add(2 * time.Minute), Rule: plan.RulePrewarm},
		{Action: plan.ActionStop, Alloc: "x", Reservation: "r-1", Node: "n1", Rule: plan.RuleDrain},
	}}
	res := []plan.Reservation{{ID: "r-1", End: now.Add(time.Hour)}}
	if _, err := recordHoldsOf(t, mem, lock, p, res, now); err != nil {
		t.Fatal(err)
	}
	want := []store.Hold{ // r-1 merged, the pre-warm new
		{For: pre, Nodes: []store.HeldGPUs{{Node: "n4", GPUIDs: []string{"GPU-8"}, Until: now.Add(2 * time.Minute)}}},
		{For: r1, Nodes: []store.HeldGPUs{{Node: "n1", GPUIDs: []string{"GPU-1", "GPU-2"}, Until: now.Add(30 * time.Second)}}},
	}
	got, err := st.Holds(ctx) // key order: holds/group/... before holds/reservation/...
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("stored holds (-want +got):\n%s", diff)
	}
	view, err := mem.view(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[plan.HoldOwner]store.Hold{pre: want[0], r1: want[1]}, view.holds); diff != "" {
		t.Fatalf("memory holds (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]store.Key{store.HoldKey(pre), store.HoldKey(r1)}, cs.puts); diff != "" {
		t.Errorf("puts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]store.Key{store.HoldKey(ended), store.HoldKey(gone)}, cs.deletes); diff != "" {
		t.Errorf("deletes (-want +got):\n%s", diff)
	}
	// The snapshot's holds: one per owner and node (groups before
	// reservations, plan.Hold.Compare), ended ones left out.
	wantSnap := []plan.Hold{
		{For: pre, Node: "n4", GPUIDs: []string{"GPU-8"}, Until: now.Add(2 * time.Minute)},
		{For: r1, Node: "n1", GPUIDs: []string{"GPU-1", "GPU-2"}, Until: now.Add(30 * time.Second)},
	}
	view.res = res
	if diff := cmp.Diff(wantSnap, view.planHolds(now)); diff != "" {
		t.Errorf("snapshot holds (-want +got):\n%s", diff)
	}
	// Past its Until a reservation's hold stays until the booking ends: the
	// core lends its GPUs to idle jobs only (DESIGN L10); a pre-warm's ends.
	if diff := cmp.Diff(wantSnap, view.planHolds(now.Add(30*time.Second))); diff != "" {
		t.Errorf("snapshot holds at r-1's Until (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantSnap[1:], view.planHolds(now.Add(2*time.Minute))); diff != "" {
		t.Errorf("snapshot holds at the pre-warm's end (-want +got):\n%s", diff)
	}
	if got := view.planHolds(now.Add(time.Hour)); len(got) != 0 {
		t.Errorf("snapshot holds at r-1's end: %v, want none", got)
	}
	view.res = nil
	if got := view.planHolds(now); len(got) != 1 || got[0].For != pre {
		t.Errorf("snapshot holds with r-1 gone: %v, want only the pre-warm's", got)
	}
	// The same plan again changes nothing, so writes nothing.
	cs.puts, cs.deletes = nil, nil
	if _, err := recordHoldsOf(t, mem, lock, p, res, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if len(cs.puts)+len(cs.deletes) != 0 {
		t.Fatalf("unchanged holds rewritten: puts %v, deletes %v", cs.puts, cs.deletes)
	}
	// A deposed leader's write fails and leaves the store as it was.
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = recordHoldsOf(t, mem, lock, p, nil, now.Add(time.Second)) // r-1 unknown now: a delete
	if !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("deposed leader: %v, want ErrNotLeader", err)
	}
	if got, _ := st.Holds(ctx); len(got) != 2 {
		t.Fatalf("holds after a deposed write: %+v", got)
	}
}

// L12, L10.drain: an intent of a stop made for a reservation is read back
// as stopping for that reservation while its allocation is being stopped
// or the intent is recent; an old one whose stop was never made, or whose
// allocation is gone, is stale (the next drain decides again).
func TestIntentsOfDrainStopsReadBackAsStoppingForTheirReservation(t *testing.T) {
	f := newFakeNomad(t)
	cfg := api.DefaultConfig()
	cfg.Address = f.srv.URL
	client, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	state, err := watch.ListAll(context.Background(), client, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	v := &view{intents: map[string]store.Intent{}}
	for _, in := range []store.Intent{
		{Alloc: recAllocC1, Action: "stop", Namespace: "workspace-c", Job: "training", Reservation: "r-1", Rule: "L10.drain", At: now.Add(-time.Second)},
		{Alloc: recAllocC2, Action: "stop", Namespace: "workspace-c", Job: "training", Reservation: "r-1", Rule: "L10.drain", At: now.Add(-time.Hour)},
		{Alloc: "gone", Action: "stop", Namespace: "workspace-c", Job: "training", Reservation: "r-1", Rule: "L10.drain", At: now},
	} {
		v.intents[in.Alloc] = in
	}
	got := v.stopping(state, "gputide-queue", now, 5*time.Second)
	if len(got.forGroup) != 0 || len(got.resume) != 0 {
		t.Errorf("claimants %v, resume %v: want none", got.forGroup, got.resume)
	}
	if diff := cmp.Diff(map[string]string{recAllocC1: "r-1"}, got.forRes); diff != "" {
		t.Errorf("stopping for a reservation (-want +got):\n%s", diff)
	}
	want := []string{recAllocC2, "gone"}
	slices.Sort(want)
	if diff := cmp.Diff(want, got.stale); diff != "" {
		t.Errorf("stale (-want +got):\n%s", diff)
	}
}
