package store

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/reservation"
)

// A booking's flavor (issue 17 item 4, DESIGN L13) is stored with it and
// read back, in reservations/ and in history; the tree of two flavors is
// checked per flavor in the guard: an a100 booking beside a full h100
// fits, a second a100 one over the nominal is refused naming a100.
func TestBookingFlavorStored(t *testing.T) {
	s := NewMemory()
	ctx := ctxT(t, 30*time.Second)
	rec := treeRec()
	rec.Root.Flavors = []quota.Flavor{{Name: "h100", Models: []string{"H100"}}, {Name: "a100", Models: []string{"A100"}}}
	rec.Root.GPUs = quota.Nominal{"h100": 48, "a100": 48}
	rec.Root.Children[0].GPUs = quota.Nominal{"h100": 16, "a100": 16}
	rec.Root.Children[1].GPUs = quota.Nominal{"h100": 32, "a100": 32}
	putTree(ctx, t, s, rec)
	h, a := booking("r-h", 16, 7), booking("r-a", 16, 7)
	h.Flavor, a.Flavor = "h100", "a100"
	for _, b := range []reservation.Booking{h, a} {
		if _, err := s.Guarded(ctx, bookFn(b)); err != nil {
			t.Fatalf("booking %s (%s): %v", b.ID, b.Flavor, err)
		}
	}
	over := booking("r-over", 1, 7)
	over.Flavor = "a100"
	if _, err := s.Guarded(ctx, bookFn(over)); err == nil || err.Error() != "Quota1.1 at 2026-12-07T09:00+09:00: 16 of 16 a100 GPUs booked, 1 asked; earliest start that fits: 2026-12-09T09:00+09:00" {
		t.Fatalf("a100 over its nominal: err %v", err)
	}
	st, err := s.ReadGuarded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eq := cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })
	if d := cmp.Diff([]reservation.Booking{a, h}, st.Reservations, eq); d != "" {
		t.Fatalf("reservations (-want +got):\n%s", d)
	}
	if _, err := s.Guarded(ctx, cancelFn("r-a", a.Start)); err != nil {
		t.Fatal(err)
	}
	hist, err := s.ReservationHistoryOf(ctx, "r-a")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(a, hist.Booking, eq); d != "" {
		t.Fatalf("history (-want +got):\n%s", d)
	}
}
