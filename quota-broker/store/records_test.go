package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/plan"
)

// testRecords: WriteRecords writes job records, intents and holds in
// fenced transactions of at most MaxOps operations (150 writes: three),
// ReadRecords reads them back with the leader's name, WatchRecords
// delivers them to a standby after each batch, and a lost lock writes
// nothing (DESIGN §6, L12).
func testRecords(t *testing.T, s *KV) {
	ctx := ctxT(t, 30*time.Second)
	lock, err := s.Lock(ctx, "leader-1")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	want := &Records{Jobs: map[JobID]JobRecord{}, Intents: map[string]Intent{}, Holds: map[plan.HoldOwner]Hold{}, Leader: "leader-1"}
	var writes []RecordWrite
	for i := range 148 {
		id := JobID{Namespace: "workspace-a", Job: fmt.Sprintf("job/%03d", i)}
		rec := JobRecord{FirstSeen: t0, QueuedAt: t0.Add(time.Duration(i) * time.Second)}
		want.Jobs[id] = rec
		writes = append(writes, PutJobRecord(id, rec))
	}
	in := Intent{Alloc: "a-1", Action: "stop", Namespace: "workspace-c", Job: "train", Rule: "L5.2", At: t0,
		For: plan.GroupKey{Namespace: "workspace-a", Job: "serve", Group: "web"}}
	h := Hold{For: plan.HoldOwner{Reservation: "r-1"}, Nodes: []HeldGPUs{{Node: "n1", GPUIDs: []string{"GPU-1"}, Until: t0}}}
	want.Intents[in.Alloc], want.Holds[h.For] = in, h
	writes = append(writes, PutIntentRecord(in), PutHoldRecord(h))

	seen := make(chan *Records, 16)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- s.WatchRecords(wctx, func(r *Records, err error) {
			if err == nil {
				seen <- r
			}
		})
	}()
	first := <-seen // the current records, before the batch
	if len(first.Jobs) != 0 || first.Leader != "leader-1" {
		t.Fatalf("first delivery = %d jobs, leader %q; want none, leader-1", len(first.Jobs), first.Leader)
	}
	if err := s.WriteRecords(ctx, lock, writes); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("records (-want +got):\n%s", diff)
	}
	deadline := time.After(10 * time.Second)
	for watched := first; len(watched.Jobs) != len(want.Jobs); {
		select {
		case watched = <-seen:
		case <-deadline:
			t.Fatalf("the watch delivered %d jobs, want %d", len(watched.Jobs), len(want.Jobs))
		}
	}
	stop()
	<-done

	// Deletes, and a lost lock writes nothing.
	if err := s.WriteRecords(ctx, lock, []RecordWrite{DeleteIntentRecord("a-1"), DeleteHoldRecord(h.For)}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReadRecords(ctx); err != nil || len(got.Intents)+len(got.Holds) != 0 {
		t.Fatalf("after the deletes: %+v, %v", got, err)
	}
	if err := s.WriteRecords(ctx, lock, []RecordWrite{PutHoldRecord(Hold{For: h.For})}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a hold without a node: %v, want ErrInvalid", err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteRecords(ctx, lock, []RecordWrite{PutIntentRecord(in)}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a write after the release: %v, want ErrNotLeader", err)
	}
	if got, err := s.ReadRecords(ctx); err != nil || len(got.Intents) != 0 || got.Leader != "" {
		t.Fatalf("after the release: %d intents, leader %q, %v; want none", len(got.Intents), got.Leader, err)
	}
}
