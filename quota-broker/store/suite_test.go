package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/reservation"
)

// The shared suite: every test runs on memory and on a real Consul.

func TestSuiteMemory(t *testing.T) {
	runSuite(t, func(t *testing.T) *KV { return NewMemory() })
}

func TestSuiteConsul(t *testing.T) {
	addr := consulAddr(t)
	runSuite(t, func(t *testing.T) *KV { return newConsulStore(t, addr) })
}

func runSuite(t *testing.T, open func(t *testing.T) *KV) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s *KV)
	}{
		{"GuardedBookAndCancel", testGuardedBookAndCancel},
		{"GuardedValidationWritesNothing", testGuardedValidationWritesNothing},
		{"TreeWriteCheckedAgainstBookingsInTheGuard", testTreeWriteCheckedAgainstBookings},
		{"GuardedConflictRetriesThenErrConflict", testGuardedConflict},
		{"GuardedLimits", testGuardedLimits},
		{"SeedTree", testSeedTree},
		{"ConcurrentBookingsNeverOverNominal", testConcurrentBookings},
		{"Jobs", testJobs},
		{"IntentsAndHoldsFencedByLock", testFencedWrites},
		{"Holds", testHolds},
		{"GuardedFencedByLock", testGuardedFenced},
		{"HistoryPrune", testHistoryPrune},
		{"WatchGuarded", testWatchGuarded},
		{"RecordsBatchedFencedAndWatched", testRecords},
		{"LockGracefulHandover", testLockGraceful},
		{"LockSessionDestroyedHandover", testLockDestroyed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// treeRec is Quota1 (96) with Quota1.1 (48, workspace-b) and Quota1.2
// (48, workspace-a).
func treeRec() TreeRecord {
	return TreeRecord{
		Root: &quota.Node{Name: "Quota1", GPUs: 96, Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: 48, Namespaces: []string{"workspace-b"}},
			{Name: "Quota1.2", GPUs: 48, Namespaces: []string{"workspace-a"}},
		}},
		Settings:  quota.DefaultSettings(),
		ChangedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
	}
}

var jst = time.FixedZone("JST", 9*3600)

func booking(id string, gpus int, startDay int) reservation.Booking {
	s := time.Date(2026, 12, startDay, 9, 0, 0, 0, jst)
	return reservation.Booking{ID: id, Namespace: "workspace-b", Node: "Quota1.1", GPUs: gpus,
		AllocGPUs: reservation.DefaultAllocGPUs(gpus), Start: s, End: s.Add(48 * time.Hour)}
}

// bookFn is the broker's booking validation: L10 on the state read.
func bookFn(b reservation.Booking) ValidateFunc {
	return func(st *Guarded) ([]Change, error) {
		if st.Tree == nil {
			return nil, errors.New("no tree")
		}
		if _, dup := st.Reservation(b.ID); dup {
			return nil, fmt.Errorf("reservation %q exists", b.ID)
		}
		tr, err := reservation.NewTree(st.Tree.Root)
		if err != nil {
			return nil, err
		}
		if err := tr.Check(st.Reservations, b, b.Start.Add(reservation.DefaultMaxAhead)); err != nil {
			return nil, err
		}
		return []Change{PutReservation(b)}, nil
	}
}

// cancelFn removes a booking and records it in history.
func cancelFn(id string, at time.Time) ValidateFunc {
	return func(st *Guarded) ([]Change, error) {
		b, ok := st.Reservation(id)
		if !ok {
			return nil, newErr("cancel", ReservationKey(id), ErrNotFound, nil)
		}
		return []Change{DeleteReservation(id), PutReservationHistory(ReservationHistory{Booking: b, EndedAt: at, Outcome: "cancelled"})}, nil
	}
}

// moveFn moves gpus of nominal from one node to another (L9), validated
// by L1 and L10 (bookings never above a nominal).
func moveFn(from, to string, gpus int) ValidateFunc {
	return func(st *Guarded) ([]Change, error) {
		rec := *st.Tree
		rec.Root = st.Tree.Root.Clone()
		f, d := rec.Root.Find(from), rec.Root.Find(to)
		if f == nil || d == nil {
			return nil, fmt.Errorf("no node %q or %q", from, to)
		}
		f.GPUs -= gpus
		d.GPUs += gpus
		if err := quota.Validate(rec.Root); err != nil {
			return nil, err
		}
		tr, err := reservation.NewTree(rec.Root)
		if err != nil {
			return nil, err
		}
		if err := tr.Fits(st.Reservations); err != nil {
			return nil, err
		}
		return []Change{PutTree(rec)}, nil
	}
}

func putTree(ctx context.Context, t *testing.T, s *KV, rec TreeRecord) {
	t.Helper()
	if _, err := s.Guarded(ctx, func(*Guarded) ([]Change, error) { return []Change{PutTree(rec)}, nil }); err != nil {
		t.Fatal(err)
	}
}

func ids(bs []reservation.Booking) []string {
	out := []string{}
	for _, b := range bs {
		out = append(out, b.ID)
	}
	return out
}

func testGuardedBookAndCancel(t *testing.T, s *KV) {
	ctx := ctxT(t, 30*time.Second)
	st, err := s.ReadGuarded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&Guarded{}, st); d != "" {
		t.Fatalf("empty store (-want +got):\n%s", d)
	}
	putTree(ctx, t, s, treeRec())
	for _, b := range []reservation.Booking{booking("r-a", 16, 7), booking("r-b", 16, 8)} {
		if _, err := s.Guarded(ctx, bookFn(b)); err != nil {
			t.Fatal(err)
		}
	}
	written, err := s.Guarded(ctx, bookFn(booking("r-c", 16, 8)))
	if err != nil {
		t.Fatal(err)
	}
	st, err = s.ReadGuarded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Counter != 4 || st.Index == 0 || st.Index != written.Index {
		t.Fatalf("guard: counter %d index %d, written index %d", st.Counter, st.Index, written.Index)
	}
	// Times come back as the same instants (zone offsets kept).
	want := []reservation.Booking{booking("r-a", 16, 7), booking("r-b", 16, 8), booking("r-c", 16, 8)}
	if d := cmp.Diff(want, st.Reservations, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); d != "" {
		t.Fatalf("reservations (-want +got):\n%s", d)
	}
	if got := st.Reservations[0].Start.Format(time.RFC3339); got != "2026-12-07T09:00:00+09:00" {
		t.Fatalf("start read back as %s", got)
	}
	if d := cmp.Diff(treeRec(), *st.Tree); d != "" {
		t.Fatalf("tree (-want +got):\n%s", d)
	}
	if d := cmp.Diff(written, st); d != "" {
		t.Fatalf("Guarded's returned state differs from a read (-written +read):\n%s", d)
	}

	// 48 of 48 booked on the 8th: a fourth is refused with the reason.
	_, err = s.Guarded(ctx, bookFn(booking("r-d", 16, 8)))
	if !errors.Is(err, reservation.ErrRefused) || err.Error() != "Quota1.1 at 2026-12-08T09:00+09:00: 48 of 48 GPUs booked, 16 asked; earliest start that fits: 2026-12-09T09:00+09:00" {
		t.Fatalf("fourth booking: %v", err)
	}

	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	if _, err := s.Guarded(ctx, cancelFn("r-b", at)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Guarded(ctx, cancelFn("r-b", at)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second cancel: %v", err)
	}
	st, _ = s.ReadGuarded(ctx)
	if d := cmp.Diff([]string{"r-a", "r-c"}, ids(st.Reservations)); d != "" {
		t.Fatalf("after cancel (-want +got):\n%s", d)
	}
	hist, err := s.ReservationHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].Booking.ID != "r-b" || hist[0].Outcome != "cancelled" || !hist[0].EndedAt.Equal(at) {
		t.Fatalf("history: %+v", hist)
	}
	if _, err := s.Guarded(ctx, bookFn(booking("r-d", 16, 8))); err != nil {
		t.Fatalf("booking after the cancel: %v", err)
	}
}

func testGuardedValidationWritesNothing(t *testing.T, s *KV) {
	ctx := ctxT(t, 30*time.Second)
	putTree(ctx, t, s, treeRec())
	before, _ := s.ReadGuarded(ctx)
	mine := errors.New("refused by the caller")
	calls := 0
	_, err := s.Guarded(ctx, func(*Guarded) ([]Change, error) {
		calls++
		return nil, mine
	})
	if err != mine || calls != 1 {
		t.Fatalf("validation error: %v after %d calls", err, calls)
	}
	// A move that L1 refuses (Quota1.1 above its parent) writes nothing.
	_, err = s.Guarded(ctx, moveFn("Quota1.2", "Quota1.1", -60))
	var ve *quota.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("L1 refusal: %v", err)
	}
	after, _ := s.ReadGuarded(ctx)
	if d := cmp.Diff(before, after); d != "" {
		t.Fatalf("state changed (-before +after):\n%s", d)
	}
}

// A tree write validated as the API does (reservation.CheckTree on the
// bookings of the state read in the guarded transaction, issue 16): a
// booking that another client makes while the write validates makes the
// write's CAS fail; the retry sees the booking and refuses the tree that
// unbinds its namespace, and nothing of the tree is written.
func testTreeWriteCheckedAgainstBookings(t *testing.T, s *KV) {
	ctx := ctxT(t, 30*time.Second)
	putTree(ctx, t, s, treeRec())
	other, err := s.Peer()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	rebound := treeRec()
	rebound.Root.Children[0].Namespaces = []string{"workspace-x"} // workspace-b unbound
	calls := 0
	_, err = s.Guarded(ctx, func(st *Guarded) ([]Change, error) {
		calls++
		if calls == 1 { // the booking lands between this read and the CAS
			if _, err := other.Guarded(ctx, bookFn(booking("r-b", 8, 3))); err != nil {
				return nil, err
			}
		}
		if err := reservation.CheckTree(rebound.Root, st.Reservations, now); err != nil {
			return nil, err
		}
		return []Change{PutTree(rebound)}, nil
	})
	var be *reservation.BindingError
	if !errors.As(err, &be) || be.Namespace != "workspace-b" || be.ID != "r-b" || calls != 2 {
		t.Fatalf("got %v after %d calls, want the booking r-b of workspace-b named after 2", err, calls)
	}
	after, err := s.ReadGuarded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ns := after.Tree.Root.Find("Quota1.1").Namespaces; len(ns) != 1 || ns[0] != "workspace-b" {
		t.Fatalf("stored Quota1.1 namespaces = %v, want [workspace-b]", ns)
	}
	if got := ids(after.Reservations); len(got) != 1 || got[0] != "r-b" {
		t.Fatalf("reservations = %v, want [r-b]", got)
	}
}

func testGuardedConflict(t *testing.T, s *KV) {
	ctx := ctxT(t, 30*time.Second)
	putTree(ctx, t, s, treeRec())
	other, err := s.Peer()
	if err != nil {
		t.Fatal(err)
	}
	// Each attempt's validation lets another client write first, so every
	// CAS of the guard fails: 1 + Retries attempts, then ErrConflict.
	calls := 0
	_, err = s.Guarded(ctx, func(st *Guarded) ([]Change, error) {
		calls++
		if _, err := other.Guarded(ctx, bookFn(booking(fmt.Sprint("r-other-", calls), 1, 7))); err != nil {
			return nil, err
		}
		return []Change{PutReservation(booking("r-mine", 1, 7))}, nil
	})
	if !errors.Is(err, ErrConflict) || calls != Retries+1 {
		t.Fatalf("got %v after %d calls, want ErrConflict after %d", err, calls, Retries+1)
	}
	var se *Error
	if !errors.As(err, &se) || se.Key != KeyGuard {
		t.Fatalf("error shape: %#v", err)
	}
	st, _ := s.ReadGuarded(ctx)
	if _, ok := st.Reservation("r-mine"); ok || len(st.Reservations) != Retries+1 {
		t.Fatalf("after the conflict: %v", ids(st.Reservations))
	}
	// One lost race, then success: the retry re-validates on fresh state.
	calls = 0
	if _, err := s.Guarded(ctx, func(st *Guarded) ([]Change, error) {
		calls++
		if calls == 1 {
			if _, err := other.Guarded(ctx, bookFn(booking("r-late", 1, 7))); err != nil {
				return nil, err
			}
		} else if _, ok := st.Reservation("r-late"); !ok {
			return nil, errors.New("the retry did not see the other write")
		}
		return []Change{PutReservation(booking("r-mine", 1, 7))}, nil
	}); err != nil || calls != 2 {
		t.Fatalf("retry: %v after %d calls", err, calls)
	}
}

func testGuardedLimits(t *testing.T, s *KV) {
	ctx := ctxT(t, 30*time.Second)
	many := make([]Change, MaxOps)
	for i := range many {
		many[i] = PutReservation(booking(fmt.Sprint("r-", i), 1, 7))
	}
	_, err := s.Guarded(ctx, func(*Guarded) ([]Change, error) { return many, nil })
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "64 changes, more than 63") {
		t.Fatalf("64 changes: %v", err)
	}
	big := treeRec()
	for i := range 20000 {
		big.Root.Children = append(big.Root.Children, &quota.Node{Name: fmt.Sprintf("node-with-a-long-name-%08d", i)})
	}
	_, err = s.Guarded(ctx, func(*Guarded) ([]Change, error) { return []Change{PutTree(big)}, nil })
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "store: encode tree: invalid: value is") {
		t.Fatalf("large tree: %v", err)
	}
	st, _ := s.ReadGuarded(ctx)
	if st.Counter != 0 || st.Tree != nil || len(st.Reservations) != 0 {
		t.Fatalf("something was written: %+v", st)
	}
	// 63 changes fit in one transaction.
	if _, err := s.Guarded(ctx, func(*Guarded) ([]Change, error) { return many[:MaxOps-1], nil }); err != nil {
		t.Fatal(err)
	}
}

// testConcurrentBookings: 8 clients book 8 GPUs each into Quota1.1's last
// 16 at once, 5 rounds: exactly two win each round, the others get the L10
// reason or ErrConflict, and the calendar never exceeds the nominal.
func testConcurrentBookings(t *testing.T, s *KV) {
	ctx := ctxT(t, 60*time.Second)
	putTree(ctx, t, s, treeRec())
	if _, err := s.Guarded(ctx, bookFn(booking("base", 32, 7))); err != nil {
		t.Fatal(err)
	}
	clients := []*KV{s}
	for range 7 {
		p, err := s.Peer()
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, p)
	}
	for round := range 5 {
		var wins, refused, conflicts atomic.Int32
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := c.Guarded(ctx, bookFn(booking(fmt.Sprintf("r%d-%d", round, i), 8, 7)))
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, reservation.ErrRefused):
					refused.Add(1)
				case errors.Is(err, ErrConflict):
					conflicts.Add(1)
				default:
					t.Errorf("round %d client %d: %v", round, i, err)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 2 || refused.Load()+conflicts.Load() != 6 {
			t.Fatalf("round %d: %d wins, %d refused, %d conflicts", round, wins.Load(), refused.Load(), conflicts.Load())
		}
		st, err := s.ReadGuarded(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tr, _ := reservation.NewTree(st.Tree.Root)
		if err := tr.Fits(st.Reservations); err != nil {
			t.Fatalf("round %d: over nominal: %v", round, err)
		}
		// Free the 16 for the next round.
		for _, b := range st.Reservations {
			if b.ID != "base" {
				if _, err := s.Guarded(ctx, cancelFn(b.ID, time.Now())); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func testJobs(t *testing.T, s *KV) {
	ctx := ctxT(t, 30*time.Second)
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	recs := map[JobID]JobRecord{
		{"workspace-a", "train"}:                {FirstSeen: t0, QueuedAt: t0},
		{"workspace-a", "sweep/run-1"}:          {FirstSeen: t0, QueuedAt: t0.Add(time.Minute), AdmittedAt: t0.Add(2 * time.Minute), JobModifyIndex: 42},
		{"workspace-a", "sweep/run-1/dispatch"}: {FirstSeen: t0.Add(time.Second), QueuedAt: t0},
		{"workspace-b", "100%/x y"}:             {FirstSeen: t0, QueuedAt: t0},
		{"workspace-b", ".."}:                   {FirstSeen: t0, QueuedAt: t0}, // not a directory to HTTP
		{"workspace-b", "."}:                    {FirstSeen: t0, QueuedAt: t0},
	}
	for id, r := range recs {
		if err := s.PutJob(ctx, nil, id, r); err != nil {
			t.Fatal(err)
		}
	}
	if k := JobKey(JobID{"workspace-a", "sweep/run-1"}); k != "jobs/workspace-a/sweep%2Frun-1" {
		t.Fatalf("job key %q", k)
	}
	got, err := s.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(recs, got); d != "" {
		t.Fatalf("jobs (-want +got):\n%s", d)
	}
	one, err := s.Job(ctx, JobID{"workspace-a", "sweep/run-1"})
	if err != nil || one.JobModifyIndex != 42 || !one.AdmittedAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("job: %+v %v", one, err)
	}
	// One by one too: Consul's HTTP server cleans a key path ending in
	// "/." or "/.." (a redirect to its parent), so these keys are escaped.
	for _, id := range []JobID{{"workspace-b", ".."}, {"workspace-b", "."}} {
		if one, err := s.Job(ctx, id); err != nil || !one.FirstSeen.Equal(t0) {
			t.Fatalf("job %+v: %+v %v", id, one, err)
		}
	}
	if err := s.DeleteJob(ctx, nil, JobID{"workspace-a", "sweep/run-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Job(ctx, JobID{"workspace-a", "sweep/run-1"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted job: %v", err)
	}
	// "sweep/run-1" gone; "sweep/run-1/dispatch" (a different key) kept.
	if _, err := s.Job(ctx, JobID{"workspace-a", "sweep/run-1/dispatch"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutJob(ctx, nil, JobID{"", "x"}, JobRecord{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty namespace: %v", err)
	}
}

func testFencedWrites(t *testing.T, s *KV) {
	ctx := ctxT(t, 60*time.Second)
	lock, err := s.Lock(ctx, "broker-1")
	if err != nil {
		t.Fatal(err)
	}
	in := Intent{Alloc: "a1", Action: "stop", Namespace: "workspace-a", Job: "j", For: plan.GroupKey{Namespace: "workspace-b", Job: "train/periodic-1", Group: "g"}, Rule: "L5.1", At: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	if err := s.PutIntent(ctx, lock, in); err != nil {
		t.Fatal(err)
	}
	h := Hold{For: plan.HoldOwner{Group: plan.GroupKey{Namespace: "workspace-b", Job: "train", Group: "g"}},
		Nodes: []HeldGPUs{{Node: "n1", GPUIDs: []string{"GPU-1", "GPU-2"}, Until: in.At.Add(time.Hour)}}}
	if err := s.PutHold(ctx, lock, h); err != nil {
		t.Fatal(err)
	}
	if err := lock.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	ins, _ := s.Intents(ctx)
	hs, _ := s.Holds(ctx)
	if d := cmp.Diff([]Intent{in}, ins); d != "" {
		t.Fatalf("intents (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]Hold{h}, hs); d != "" {
		t.Fatalf("holds (-want +got):\n%s", d)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// After losing the lock nothing fenced is written.
	in2 := in
	in2.Alloc = "a2"
	if err := s.PutIntent(ctx, lock, in2); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("write after release: %v", err)
	}
	// The backend's check, not only the client's: a stale lock object whose
	// session no longer holds the key.
	stale := &Lock{kv: s, session: lock.session, lost: make(chan struct{}), stop: make(chan struct{})}
	if err := s.PutIntent(ctx, stale, in2); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("write with a stale session: %v", err)
	}
	if err := stale.Verify(ctx); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("verify of a stale session: %v", err)
	}
	ins, _ = s.Intents(ctx)
	if len(ins) != 1 {
		t.Fatalf("intents after fenced failures: %+v", ins)
	}
	if err := s.DeleteIntent(ctx, nil, "a1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteHold(ctx, nil, h.For); err != nil {
		t.Fatal(err)
	}
	ins, _ = s.Intents(ctx)
	hs, _ = s.Holds(ctx)
	if len(ins) != 0 || len(hs) != 0 {
		t.Fatalf("after delete: %v %v", ins, hs)
	}
}

// Holds (DESIGN L10, §6): one key per owner, a reservation or a claimant
// group whose job ID and group name contain "/"; several nodes each with
// its end; written fenced, listed in key order, replaced, deleted; bad
// owners and empty holds refused with nothing written; a value whose owner
// is not its key's is refused on reading.
func testHolds(t *testing.T, s *KV) {
	ctx := ctxT(t, 60*time.Second)
	lock, err := s.Lock(ctx, "broker-1")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Release(ctx) }()
	t0 := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	res := Hold{For: plan.HoldOwner{Reservation: "r-1"}, Nodes: []HeldGPUs{
		{Node: "n1", GPUIDs: []string{"GPU-1", "GPU-2"}, Until: t0.Add(30 * time.Second)},
		{Node: "n2", GPUIDs: []string{"GPU-9"}, Until: t0.Add(time.Minute)},
	}}
	pre := Hold{For: plan.HoldOwner{Group: plan.GroupKey{Namespace: "workspace-a", Job: "serve/v2", Group: "web/x"}},
		Nodes: []HeldGPUs{{Node: "n3", GPUIDs: []string{"GPU-5"}, Until: t0.Add(2 * time.Minute)}}}
	for _, h := range []Hold{pre, res} {
		if err := s.PutHold(ctx, lock, h); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Holds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]Hold{pre, res}, got); d != "" { // holds/group/... sorts before holds/reservation/...
		t.Fatalf("holds (-want +got):\n%s", d)
	}
	// A later plan replaces the owner's record whole.
	res2 := Hold{For: res.For, Nodes: res.Nodes[:1]}
	if err := s.PutHold(ctx, lock, res2); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Hold{
		{Nodes: res.Nodes},
		{For: plan.HoldOwner{Reservation: "r-2", Group: pre.For.Group}, Nodes: res.Nodes},
		{For: plan.HoldOwner{Group: plan.GroupKey{Namespace: "ns", Job: "j"}}, Nodes: res.Nodes},
		{For: plan.HoldOwner{Reservation: "r-3"}},
		{For: plan.HoldOwner{Reservation: "r-3"}, Nodes: []HeldGPUs{{Node: "n1", Until: t0}}},
		{For: plan.HoldOwner{Reservation: "r-3"}, Nodes: []HeldGPUs{{Node: "n1", GPUIDs: []string{"GPU-1"}}}},
	} {
		if err := s.PutHold(ctx, lock, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("PutHold(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	got, err = s.Holds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]Hold{pre, res2}, got); d != "" {
		t.Fatalf("holds after the replacement and the refusals (-want +got):\n%s", d)
	}
	if err := s.DeleteHold(ctx, lock, pre.For); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteHold(ctx, lock, plan.HoldOwner{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("DeleteHold of no owner: %v", err)
	}
	got, _ = s.Holds(ctx)
	if d := cmp.Diff([]Hold{res2}, got); d != "" {
		t.Fatalf("holds after the delete (-want +got):\n%s", d)
	}
	// A value under another owner's key is not taken for that owner.
	if err := s.put(ctx, "put", lock, HoldKey(plan.HoldOwner{Reservation: "r-9"}), res2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Holds(ctx); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "holds/reservation/r-9") {
		t.Fatalf("a misplaced hold read as %v, want ErrInvalid naming the key", err)
	}
	if err := s.DeleteHold(ctx, lock, plan.HoldOwner{Reservation: "r-9"}); err != nil {
		t.Fatal(err)
	}
	// Fenced: once the lock is released nothing is written.
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.PutHold(ctx, lock, pre); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("PutHold after the release: %v", err)
	}
	if err := s.DeleteHold(ctx, lock, res2.For); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("DeleteHold after the release: %v", err)
	}
	got, _ = s.Holds(ctx)
	if d := cmp.Diff([]Hold{res2}, got); d != "" {
		t.Fatalf("holds after fenced failures (-want +got):\n%s", d)
	}
}

func testHistoryPrune(t *testing.T, s *KV) {
	ctx := ctxT(t, 60*time.Second)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	// 70 preemptions, one per day back from now: 0..69 days old.
	for i := range 70 {
		p := Preemption{At: now.Add(-time.Duration(i) * 24 * time.Hour), Alloc: fmt.Sprint("alloc-", i), Namespace: "ns", Job: "j", GPUs: 8, Rule: "L5.1"}
		if err := s.AddPreemption(ctx, nil, p); err != nil {
			t.Fatal(err)
		}
	}
	putTree(ctx, t, s, treeRec())
	for i := range 5 {
		b := booking(fmt.Sprint("h", i), 1, 7)
		if _, err := s.Guarded(ctx, func(*Guarded) ([]Change, error) {
			return []Change{PutReservationHistory(ReservationHistory{Booking: b, EndedAt: now.Add(-time.Duration(i) * 40 * 24 * time.Hour), Outcome: "ended"})}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Retention 30 days: preemptions 31..69 days old go (39) and reservation
	// histories 40, 80, 120, 160 days old (4); then at most 20 entries a
	// folder: the 31 left preemptions lose their 11 oldest.
	n, err := s.PruneHistory(ctx, nil, now, 30*24*time.Hour, 20)
	if err != nil {
		t.Fatal(err)
	}
	if n != 39+4+11 {
		t.Fatalf("pruned %d, want %d", n, 39+4+11)
	}
	ps, _ := s.Preemptions(ctx)
	var got []string
	for _, p := range ps {
		got = append(got, p.Alloc)
	}
	var want []string
	for i := 19; i >= 0; i-- { // oldest first
		want = append(want, fmt.Sprint("alloc-", i))
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("preemptions kept (-want +got):\n%s", d)
	}
	hs, _ := s.ReservationHistory(ctx)
	if len(hs) != 1 || hs[0].Booking.ID != "h0" {
		t.Fatalf("reservation history kept: %+v", hs)
	}
}

func testWatchGuarded(t *testing.T, s *KV) {
	ctx := ctxT(t, 60*time.Second)
	wctx, stop := context.WithCancel(ctx)
	seen := make(chan uint64, 16)
	done := make(chan error, 1)
	go func() {
		done <- s.WatchGuarded(wctx, func(st *Guarded, err error) {
			if err == nil {
				seen <- st.Counter
			}
		})
	}()
	next := func() uint64 {
		select {
		case c := <-seen:
			return c
		case <-time.After(20 * time.Second):
			t.Fatal("no watch callback within 20 s")
			return 0
		}
	}
	if c := next(); c != 0 { // the first call: the current state
		t.Fatalf("first callback counter %d", c)
	}
	putTree(ctx, t, s, treeRec())
	if c := next(); c != 1 {
		t.Fatalf("after the tree: counter %d", c)
	}
	if _, err := s.Guarded(ctx, bookFn(booking("w", 8, 7))); err != nil {
		t.Fatal(err)
	}
	if c := next(); c != 2 {
		t.Fatalf("after a booking: counter %d", c)
	}
	// Unguarded writes elsewhere do not wake it.
	_ = s.PutJob(ctx, nil, JobID{"a", "b"}, JobRecord{})
	select {
	case c := <-seen:
		t.Fatalf("woken by a job write: counter %d", c)
	case <-time.After(300 * time.Millisecond):
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("watch ended with %v", err)
	}
}

// testLockGraceful: a second holder waits; the first releases; the second
// holds within 3 s (DESIGN L12).
func testLockGraceful(t *testing.T, s *KV) {
	ctx := ctxT(t, 60*time.Second)
	other, _ := s.Peer()
	first, err := s.Lock(ctx, "broker-1")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Lock, 1)
	go func() {
		l, err := other.Lock(ctx, "broker-2")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	select {
	case <-got:
		t.Fatal("two holders at once")
	case <-time.After(500 * time.Millisecond):
	}
	if !first.IsLeader() {
		t.Fatal("first holder lost the lock")
	}
	start := time.Now()
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if first.IsLeader() {
		t.Fatal("released lock still leads")
	}
	second := <-got
	took := time.Since(start)
	t.Logf("graceful handover in %s", took)
	if took > 3*time.Second {
		t.Fatalf("handover took %s, more than 3 s", took)
	}
	if second == nil || !second.IsLeader() || second.Verify(ctx) != nil {
		t.Fatal("second holder does not lead")
	}
	if name, err := other.Leader(ctx); name != "broker-2" || err != nil {
		t.Fatalf("leader %q %v", name, err)
	}
	_ = second.Release(ctx)
	if name, err := s.Leader(ctx); name != "" || err != nil {
		t.Fatalf("leader after release %q %v", name, err)
	}
}

// testLockDestroyed: the holder's session is destroyed (what the backend
// does when a killed holder's TTL runs out): its Lost channel closes and
// the waiter holds after the lock-delay.
func testLockDestroyed(t *testing.T, s *KV) {
	ctx := ctxT(t, 60*time.Second)
	other, _ := s.Peer()
	first, err := s.Lock(ctx, "broker-1")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Lock, 1)
	go func() {
		l, _ := other.Lock(ctx, "broker-2")
		got <- l
	}()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	if err := s.b.destroySession(ctx, first.session); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost not closed within 5 s of the session's end")
	}
	second := <-got
	took := time.Since(start)
	t.Logf("handover after the session ended: %s", took)
	if second == nil || took < LockDelay-100*time.Millisecond || took > LockDelay+2*time.Second {
		t.Fatalf("handover after %s (lock-delay %s)", took, LockDelay)
	}
	first.Abandon()
	_ = second.Release(ctx)
}

func testSeedTree(t *testing.T, s *KV) {
	ctx := ctxT(t, 30*time.Second)
	first := treeRec()
	got, seeded, err := s.SeedTree(ctx, first)
	if err != nil || !seeded {
		t.Fatalf("first seed: %v %v", seeded, err)
	}
	if d := cmp.Diff(first, *got); d != "" {
		t.Fatalf("seeded tree (-want +got):\n%s", d)
	}
	second := treeRec()
	second.Root.GPUs = 200
	got, seeded, err = s.SeedTree(ctx, second)
	if err != nil || seeded || got.Root.GPUs != 96 {
		t.Fatalf("second seed overwrote or failed: seeded %v, root %d, %v", seeded, got.Root.GPUs, err)
	}
	st, _ := s.ReadGuarded(ctx)
	if st.Counter != 1 {
		t.Fatalf("guard counter %d after one seed", st.Counter)
	}
}

// The leader's guarded write (moving an ended booking to history, DESIGN
// L10 "End") checks the guard and the lock in one transaction: with the
// lock it writes; after a release, or with a stale session the backend no
// longer knows as holder, it writes nothing and says ErrNotLeader.
func testGuardedFenced(t *testing.T, s *KV) {
	ctx := ctxT(t, 60*time.Second)
	putTree(ctx, t, s, treeRec())
	for _, b := range []reservation.Booking{booking("r-a", 16, 7), booking("r-b", 16, 8)} {
		if _, err := s.Guarded(ctx, bookFn(b)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.GuardedFenced(ctx, nil, cancelFn("r-a", time.Now())); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("without a lock: %v, want ErrNotLeader", err)
	}
	lock, err := s.Lock(ctx, "broker-1")
	if err != nil {
		t.Fatal(err)
	}
	ended := booking("r-a", 16, 7).End
	endFn := func(id string) ValidateFunc {
		return func(st *Guarded) ([]Change, error) {
			b, ok := st.Reservation(id)
			if !ok {
				return nil, newErr("end", ReservationKey(id), ErrNotFound, nil)
			}
			return []Change{DeleteReservation(id), PutReservationHistory(ReservationHistory{Booking: b, EndedAt: b.End, Outcome: "ended"})}, nil
		}
	}
	before, err := s.ReadGuarded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	written, err := s.GuardedFenced(ctx, lock, endFn("r-a"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.ReadGuarded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Counter != before.Counter+1 || st.Index != written.Index {
		t.Fatalf("guard: counter %d (was %d), index %d, written index %d", st.Counter, before.Counter, st.Index, written.Index)
	}
	if d := cmp.Diff([]string{"r-b"}, ids(st.Reservations)); d != "" {
		t.Fatalf("reservations (-want +got):\n%s", d)
	}
	hist, err := s.ReservationHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []ReservationHistory{{Booking: booking("r-a", 16, 7), EndedAt: ended, Outcome: "ended"}}
	if d := cmp.Diff(want, hist, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); d != "" {
		t.Fatalf("history (-want +got):\n%s", d)
	}
	one, err := s.ReservationHistoryOf(ctx, "r-a")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want[0], one, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); d != "" {
		t.Fatalf("ReservationHistoryOf(r-a) (-want +got):\n%s", d)
	}
	if _, err := s.ReservationHistoryOf(ctx, "r-b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReservationHistoryOf of a booking still booked: %v, want ErrNotFound", err)
	}

	// A stale lock object whose session no longer holds the key: the
	// backend's check refuses the whole transaction.
	stale := &Lock{kv: s, session: lock.session, lost: make(chan struct{}), stop: make(chan struct{})}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GuardedFenced(ctx, lock, endFn("r-b")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("after release: %v, want ErrNotLeader", err)
	}
	if _, err := s.GuardedFenced(ctx, stale, endFn("r-b")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("with a stale session: %v, want ErrNotLeader", err)
	}
	after, err := s.ReadGuarded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Counter != st.Counter || len(after.Reservations) != 1 {
		t.Fatalf("a refused fenced write changed the state: counter %d (was %d), reservations %v", after.Counter, st.Counter, ids(after.Reservations))
	}
	if hist, _ := s.ReservationHistory(ctx); len(hist) != 1 {
		t.Fatalf("a refused fenced write wrote history: %d entries", len(hist))
	}
}
