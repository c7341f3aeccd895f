package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/reservation"
	"github.com/gputide/gputide/quota-broker/store"
)

// rebindC is the reference tree with Quota1.2 bound to workspace-x instead
// of workspace-c (issue 16, attack list High #1).
const rebindC = `quota "Quota1" {
  gpus = 128
  namespaces = ["workspace-a"]
  quota "Quota1.1" {
    gpus = 48
    namespaces = ["workspace-b"]
  }
  quota "Quota1.2" {
    gpus = 80
    namespaces = ["workspace-x"]
  }
}
`

// A tree write that would unbind the namespace of a booking not yet ended
// is refused with 409 naming the namespace, in the guarded transaction:
// nothing is stored (tree, guard, change record). After the booking is
// cancelled the same write is taken.
func TestTreeWriteThatUnbindsABookingIsRefused(t *testing.T) {
	h := newHarness(t, options{})
	ctx := context.Background()
	b := reservation.Booking{ID: "c-run", Namespace: "workspace-c", Node: "Quota1.2", GPUs: 8, AllocGPUs: 8,
		Start: clock.Add(time.Hour), End: clock.Add(3 * time.Hour)}
	g, err := h.kv.Guarded(ctx, func(*store.Guarded) ([]store.Change, error) {
		return []store.Change{store.PutReservation(b)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	base := g.Counter
	code, body := h.do(t, "PUT", "/v1/quotas", tokMgmt, rebindC)
	e := errOf(t, body)
	want := `L10: namespace "workspace-c": its booking "c-run" is in quota "Quota1.2" and this tree binds it to no quota node`
	if code != http.StatusConflict || !strings.HasPrefix(e.Error, want) {
		t.Fatalf("PUT /v1/quotas: %d %q, want 409 %q", code, e.Error, want)
	}
	if g := h.guard(t); g != base {
		t.Errorf("guard %d, want %d: the refused write wrote", g, base)
	}
	if ns := h.tree(t).Find("Quota1.2").Namespaces; !slices.Equal(ns, []string{"workspace-c"}) {
		t.Errorf("stored Quota1.2 namespaces = %v, want [workspace-c]", ns)
	}
	if recs, _ := h.kv.ChangeRecords(ctx); len(recs) != 0 {
		t.Errorf("change records = %+v, want none", recs)
	}
	// Moving the namespace into a new child of its node keeps the booking
	// within its node: taken.
	child := strings.Replace(rebindC, `    namespaces = ["workspace-x"]
  }`, `    quota "Quota1.2.1" {
      gpus = 80
      namespaces = ["workspace-c"]
    }
  }`, 1)
	if code, body := h.do(t, "PUT", "/v1/quotas", tokMgmt, child); code != http.StatusOK {
		t.Fatalf("PUT /v1/quotas with workspace-c below Quota1.2: %d %s", code, body)
	}
	// Without the booking the rebinding is taken.
	if _, err := h.kv.Guarded(ctx, func(*store.Guarded) ([]store.Change, error) {
		return []store.Change{store.DeleteReservation(b.ID)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if code, body := h.do(t, "PUT", "/v1/quotas", tokMgmt, rebindC); code != http.StatusOK {
		t.Fatalf("PUT /v1/quotas without the booking: %d %s", code, body)
	}
	if ns := h.tree(t).Find("Quota1.2").Namespaces; !slices.Equal(ns, []string{"workspace-x"}) {
		t.Errorf("stored Quota1.2 namespaces = %v, want [workspace-x]", ns)
	}
}

// Config.CheckTree (the agent's validation) is called inside the guarded
// write with the tree, settings and bookings it would store; its refusal
// is a 409 with its message and nothing is written, for every tree write
// (apply, scale, move).
func TestTreeWritesUseTheConfiguredCheck(t *testing.T) {
	var seen []string
	refuse := errors.New(`the new tree: namespaces = "workspace-c": listed in the agent configuration's namespaces but bound to no quota in this tree`)
	h := newHarness(t, options{checkTree: func(root *quota.Node, s quota.Settings, bookings []reservation.Booking, now time.Time) error {
		seen = append(seen, root.Name)
		if !now.Equal(clock) {
			t.Errorf("now = %v, want %v", now, clock)
		}
		if _, ok := quota.Namespaces(root)["workspace-c"]; !ok {
			return refuse
		}
		return nil
	}})
	code, body := h.do(t, "PUT", "/v1/quotas", tokMgmt, rebindC)
	if e := errOf(t, body); code != http.StatusConflict || e.Error != refuse.Error() {
		t.Errorf("PUT /v1/quotas: %d %q, want 409 %q", code, e.Error, refuse)
	}
	if g := h.guard(t); g != h.base {
		t.Errorf("guard %d, want %d: the refused write wrote", g, h.base)
	}
	if code, body := h.do(t, "PUT", "/v1/quota/Quota1.2", tokMgmt, `{"gpus":72}`); code != http.StatusOK {
		t.Errorf("scale: %d %s", code, body)
	}
	if code, body := h.do(t, "POST", "/v1/quota/move", tokMgmt, `{"from":"Quota1.2","to":"Quota1.1","gpus":8}`); code != http.StatusOK {
		t.Errorf("move: %d %s", code, body)
	}
	if len(seen) != 3 {
		t.Errorf("CheckTree called %d times, want 3 (apply, scale, move)", len(seen))
	}
}
