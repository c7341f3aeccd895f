package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/reservation"
	"github.com/gputide/gputide/quota-broker/store"
)

func putBookings(t *testing.T, s store.Store, bs ...reservation.Booking) {
	t.Helper()
	if _, err := s.Guarded(context.Background(), func(*store.Guarded) ([]store.Change, error) {
		var out []store.Change
		for _, b := range bs {
			out = append(out, store.PutReservation(b))
		}
		return out, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// resOf is the bookings a cycle reads (its view of the memory).
func resOf(t *testing.T, s store.Store) []plan.Reservation {
	t.Helper()
	g, err := s.ReadGuarded(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return planReservations(g.Reservations)
}

func storeIDs(t *testing.T, s store.Store) (booked, history []string) {
	t.Helper()
	g, err := s.ReadGuarded(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range g.Reservations {
		booked = append(booked, b.ID)
	}
	hs, err := s.ReservationHistory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		history = append(history, h.Booking.ID+" "+h.Outcome+" "+h.EndedAt.UTC().Format(time.RFC3339))
	}
	return booked, history
}

// The leader moves every booking whose end has passed and that no live
// allocation names to history (DESIGN L10 "End"), in one transaction
// fenced by its lock; a booking still running or not ended stays; a lost
// lock moves nothing.
func TestEndBookingsMovesEndedBookingsToHistory(t *testing.T) {
	ctx := context.Background()
	kv := store.NewMemory()
	a := &Agent{store: kv}
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	bk := func(id string, end time.Time) reservation.Booking {
		return reservation.Booking{ID: id, Namespace: "workspace-b", Node: "Quota1.1", GPUs: 2, AllocGPUs: 1, Start: end.Add(-time.Hour), End: end}
	}
	forced := bk("r-forced", now.Add(-time.Second))
	forced.CancelledAt = forced.End
	putBookings(t, kv, bk("r-active", now.Add(time.Second)), bk("r-busy", now.Add(-time.Minute)),
		bk("r-ended", now), bk("r-stopped", now.Add(-time.Hour)), forced)
	b := &build.Build{Jobs: map[plan.JobKey]*build.JobView{
		{Namespace: "workspace-b", Job: "busy"}:    {Options: jobmeta.JobOptions{Reservation: "r-busy"}, Live: 1},
		{Namespace: "workspace-b", Job: "stopped"}: {Options: jobmeta.JobOptions{Reservation: "r-stopped"}, Live: 0},
		{Namespace: "workspace-b", Job: "active"}:  {Options: jobmeta.JobOptions{Reservation: "r-active"}, Live: 2},
	}}
	if _, err := a.endBookings(ctx, nil, resOf(t, kv), b, now); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("without the lock: %v, want ErrNotLeader", err)
	}
	lock, err := kv.Lock(ctx, "broker-1")
	if err != nil {
		t.Fatal(err)
	}
	moved, err := a.endBookings(ctx, lock, resOf(t, kv), b, now)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"r-ended", "r-forced", "r-stopped"}, moved); diff != "" {
		t.Errorf("moved (-want +got):\n%s", diff)
	}
	booked, history := storeIDs(t, kv)
	if diff := cmp.Diff([]string{"r-active", "r-busy"}, booked); diff != "" {
		t.Errorf("bookings left (-want +got):\n%s", diff)
	}
	want := []string{"r-ended ended 2026-12-07T08:00:00Z", "r-forced forced 2026-12-07T07:59:59Z", "r-stopped ended 2026-12-07T07:00:00Z"}
	if diff := cmp.Diff(want, history); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	// Nothing more to move: no write (the guard stays), and without a
	// due booking in the cycle's read, no store call at all (a nil lock
	// would fail it).
	g0, _ := kv.ReadGuarded(ctx)
	if moved, err := a.endBookings(ctx, lock, resOf(t, kv), b, now); err != nil || len(moved) != 0 {
		t.Fatalf("second call: moved %v, error %v", moved, err)
	}
	if moved, err := a.endBookings(ctx, nil, resOf(t, kv), b, now); err != nil || len(moved) != 0 {
		t.Fatalf("nothing due: moved %v, error %v", moved, err)
	}
	// A stale read naming a booking already moved: the guarded write
	// re-reads, finds nothing to move and writes nothing.
	stale := []plan.Reservation{{ID: "r-ended", End: now}}
	if moved, err := a.endBookings(ctx, lock, stale, b, now); err != nil || len(moved) != 0 {
		t.Fatalf("stale read: moved %v, error %v", moved, err)
	}
	if g1, _ := kv.ReadGuarded(ctx); g1.Counter != g0.Counter {
		t.Errorf("a call with nothing to move wrote: guard %d -> %d", g0.Counter, g1.Counter)
	}
	// The busy booking's job is gone: it moves next.
	delete(b.Jobs, plan.JobKey{Namespace: "workspace-b", Job: "busy"})
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.endBookings(ctx, lock, resOf(t, kv), b, now); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("after release: %v, want ErrNotLeader", err)
	}
	if booked, _ := storeIDs(t, kv); len(booked) != 2 {
		t.Fatalf("a lost lock moved bookings: %v left", booked)
	}
	lock, err = kv.Lock(ctx, "broker-1")
	if err != nil {
		t.Fatal(err)
	}
	if moved, err := a.endBookings(ctx, lock, resOf(t, kv), b, now); err != nil || !cmp.Equal(moved, []string{"r-busy"}) {
		t.Fatalf("after the job is gone: moved %v, error %v", moved, err)
	}
}

// More ended bookings than one transaction holds are moved endBatch at a
// time, by ID.
func TestEndBookingsMovesAtMostABatchATransaction(t *testing.T) {
	ctx := context.Background()
	kv := store.NewMemory()
	a := &Agent{store: kv}
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	var bs []reservation.Booking
	for i := range endBatch + 9 {
		bs = append(bs, reservation.Booking{ID: fmt.Sprintf("r-%03d", i), Namespace: "workspace-b", Node: "Quota1.1", GPUs: 1, AllocGPUs: 1,
			Start: now.Add(-2 * time.Hour), End: now.Add(-time.Hour)})
	}
	putBookings(t, kv, bs[:30]...)
	putBookings(t, kv, bs[30:]...)
	lock, err := kv.Lock(ctx, "broker-1")
	if err != nil {
		t.Fatal(err)
	}
	b := &build.Build{}
	for _, want := range []int{endBatch, 9, 0} {
		moved, err := a.endBookings(ctx, lock, resOf(t, kv), b, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(moved) != want {
			t.Fatalf("moved %d, want %d", len(moved), want)
		}
	}
	booked, history := storeIDs(t, kv)
	if len(booked) != 0 || len(history) != endBatch+9 {
		t.Fatalf("%d bookings left, %d in history; want 0 and %d", len(booked), len(history), endBatch+9)
	}
}

// A running agent, leader on its memory store, moves a booking that ended
// with no job naming it to history; reservation reads then find it there.
func TestAgentMovesAnEndedBookingToHistory(t *testing.T) {
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
	end := time.Now().Add(300 * time.Millisecond).UTC().Truncate(time.Millisecond)
	putBookings(t, a.store, reservation.Booking{ID: "r-1", Namespace: "workspace-b", Node: "Quota1.1", GPUs: 2, AllocGPUs: 1,
		Start: end.Add(-time.Hour), End: end})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	until(t, "the ended booking in history", 10*time.Second, func() bool {
		booked, history := storeIDs(t, a.store)
		return len(booked) == 0 && len(history) == 1
	})
	if _, history := storeIDs(t, a.store); history[0] != "r-1 ended "+end.Format(time.RFC3339) {
		t.Errorf("history = %v", history)
	}
}
