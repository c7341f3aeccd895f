package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/reservation"
	"github.com/gputide/gputide/quota-broker/store"
	"github.com/hashicorp/go-hclog"
)

// Every booking still in the store is passed to the core, the ended one
// too (until the leader moves it to history), so that L10.end stops its
// jobs and a job naming it learns that it ended.
func TestPlanReservationsConvertsTheStoresBookings(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*3600)
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	bs := []reservation.Booking{
		{ID: "r-ended", Namespace: "workspace-b", Node: "Quota1.1", GPUs: 2, AllocGPUs: 2, Start: now.Add(-2 * time.Hour), End: now},
		{ID: "r-1", Namespace: "workspace-b", Node: "Quota1.1", GPUs: 16, AllocGPUs: 8, Model: "H100", NodePool: "gpu",
			Start: time.Date(2026, 12, 7, 8, 0, 0, 0, tokyo), End: time.Date(2026, 12, 14, 8, 0, 0, 0, tokyo)},
		{ID: "r-a100", Namespace: "workspace-b", Node: "Quota1.1", GPUs: 4, AllocGPUs: 4, Flavor: "a100", Start: now, End: now.Add(time.Hour)},
	}
	want := []plan.Reservation{{ID: "r-ended", Namespace: "workspace-b", Quota: "Quota1.1", GPUs: 2, AllocGPUs: 2,
		Start: now.Add(-2 * time.Hour), End: now}, {ID: "r-1", Namespace: "workspace-b", Quota: "Quota1.1", GPUs: 16, AllocGPUs: 8, Model: "H100",
		NodePool: "gpu", Start: time.Date(2026, 12, 6, 23, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 13, 23, 0, 0, 0, time.UTC)},
		{ID: "r-a100", Namespace: "workspace-b", Quota: "Quota1.1", GPUs: 4, AllocGPUs: 4, Flavor: "a100", Start: now, End: now.Add(time.Hour)}}
	if diff := cmp.Diff(want, planReservations(bs)); diff != "" {
		t.Fatalf("reservations (-want +got):\n%s", diff)
	}
}

// forFlavors (issue 17 item 4, DESIGN L13): in a tree of one declared
// flavor a booking stored without one (before flavors) takes it, so that
// the core does not refuse it for a missing flavor; a booking with a
// flavor, or in a tree without flavor blocks or of several, is passed as
// it is.
func TestForFlavorsNamesTheOnlyFlavor(t *testing.T) {
	res := []plan.Reservation{{ID: "r-old", GPUs: 2}, {ID: "r-a", GPUs: 2, Flavor: "a100"}}
	one := &quota.Node{Name: "Quota1", Flavors: []quota.Flavor{{Name: "h100", Models: []string{"H100"}}}}
	want := []plan.Reservation{{ID: "r-old", GPUs: 2, Flavor: "h100"}, {ID: "r-a", GPUs: 2, Flavor: "a100"}}
	if diff := cmp.Diff(want, forFlavors(res, one)); diff != "" {
		t.Errorf("one flavor (-want +got):\n%s", diff)
	}
	if res[0].Flavor != "" {
		t.Errorf("forFlavors changed its input: %+v", res[0])
	}
	two := &quota.Node{Name: "Quota1", Flavors: []quota.Flavor{{Name: "h100", Models: []string{"H100"}}, {Name: "a100", Models: []string{"A100"}}}}
	for name, root := range map[string]*quota.Node{"implicit": {Name: "Quota1"}, "two flavors": two} {
		if diff := cmp.Diff(res, forFlavors(res, root)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func TestWakeTimerFiresAtWakeAtOnly(t *testing.T) {
	w := newWakeTimer()
	now := time.Now()
	w.reset(now.Add(-time.Second), now) // past: left to the interval
	w.reset(time.Time{}, now)           // none
	select {
	case <-w.C():
		t.Fatal("fired without a future WakeAt")
	case <-time.After(30 * time.Millisecond):
	}
	w.reset(now.Add(20*time.Millisecond), now)
	select {
	case <-w.C():
		w.fired()
	case <-time.After(5 * time.Second):
		t.Fatal("did not fire at WakeAt")
	}
	// Re-armed for a later WakeAt, then disarmed: it does not fire.
	now = time.Now()
	w.reset(now.Add(20*time.Millisecond), now)
	w.reset(time.Time{}, now)
	select {
	case <-w.C():
		t.Fatal("fired after being disarmed")
	case <-time.After(60 * time.Millisecond):
	}
}

// A booking made through the API's store reaches the snapshot the agent
// plans on.
func TestAgentPlansWithTheStoreBookings(t *testing.T) {
	f := newFakeNomad(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "quota.hcl"), []byte(e2eQuota), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(fmt.Sprintf("nomad { address = %q }\nquota_file = \"quota.hcl\"\nhttp_bind = \"127.0.0.1:0\"\n", f.srv.URL)),
		filepath.Join(dir, "broker.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Interval, cfg.Staleness = 50*time.Millisecond, 2*time.Second
	a, err := New(cfg, Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	b := reservation.Booking{ID: "r-1", Namespace: "workspace-b", Node: "Quota1.1", GPUs: 2, AllocGPUs: 1, Start: start, End: start.Add(time.Hour)}
	if _, err := a.store.Guarded(context.Background(), func(*store.Guarded) ([]store.Change, error) {
		return []store.Change{store.PutReservation(b)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	var got []plan.Reservation
	until(t, "a snapshot with the booking", 10*time.Second, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.lastSnap == nil {
			return false
		}
		got = a.lastSnap.Reservations
		return len(got) > 0
	})
	want := []plan.Reservation{{ID: "r-1", Namespace: "workspace-b", Quota: "Quota1.1", GPUs: 2, AllocGPUs: 1, Start: start, End: start.Add(time.Hour)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("snapshot reservations (-want +got):\n%s", diff)
	}
}

// With an interval far away, the agent still plans again at the plan's
// WakeAt: here the start of a booking's drain horizon (start - 1h).
func TestAgentPlansAgainAtWakeAt(t *testing.T) {
	f := newFakeNomad(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "quota.hcl"), []byte(e2eQuota), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(fmt.Sprintf("nomad { address = %q }\nquota_file = \"quota.hcl\"\nhttp_bind = \"127.0.0.1:0\"\n", f.srv.URL)),
		filepath.Join(dir, "broker.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Interval, cfg.Staleness = time.Hour, time.Minute // the probe pokes every 20s
	a, err := New(cfg, Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(time.Hour + 1500*time.Millisecond)
	b := reservation.Booking{ID: "r-1", Namespace: "workspace-b", Node: "Quota1.1", GPUs: 2, AllocGPUs: 1, Start: start, End: start.Add(time.Hour)}
	if _, err := a.store.Guarded(context.Background(), func(*store.Guarded) ([]store.Change, error) {
		return []store.Change{store.PutReservation(b)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	wake := start.Add(-time.Hour)
	until(t, "a plan naming the drain horizon as wake_at", 5*time.Second, func() bool { return a.wakeAt().Equal(wake) })
	until(t, "a plan at wake_at", 10*time.Second, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return !a.lastPlanAt.Before(wake)
	})
}
