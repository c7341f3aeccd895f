package agent

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gputide/gputide/quota-broker/reservation"
	"github.com/gputide/gputide/quota-broker/store"
)

// rebindC is e2eQuota with Quota1.2 bound to workspace-x instead of
// workspace-c.
var rebindC = strings.Replace(e2eQuota, `namespaces = ["workspace-c"]`, `namespaces = ["workspace-x"]`, 1)

// Issue 16, attack list High #1: a tree write that the running broker
// would refuse is refused by the API, in its guarded transaction, with the
// agent's own check (Agent.CheckTree): the namespaces the configuration
// governs and the bookings not yet ended. Nothing is stored, so the stored
// and the running trees stay the same, and a broker started afterwards on
// the store has its tree.
func TestAPITreeWriteThatBreaksTheRunningTreeIsRefused(t *testing.T) {
	f := newFakeNomad(t)
	st := store.NewMemory()
	governs := `namespaces = ["workspace-a", "workspace-b", "workspace-c"]`
	a := apiAgentWith(t, f, st, true, governs)
	until(t, "the seeded tree", 10*time.Second, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.tree != nil
	})
	ctx := context.Background()
	start := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	b := reservation.Booking{ID: "c-run", Namespace: "workspace-c", Node: "Quota1.2", GPUs: 4, AllocGPUs: 4, Start: start, End: start.Add(time.Hour)}
	g, err := st.Guarded(ctx, func(*store.Guarded) ([]store.Change, error) { return []store.Change{store.PutReservation(b)}, nil })
	if err != nil {
		t.Fatal(err)
	}
	stored := func() []string {
		g, err := st.ReadGuarded(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return g.Tree.Root.Find("Quota1.2").Namespaces
	}

	// With the booking: refused for it (L10).
	code, body := call(t, a, "PUT", "/v1/quotas", rebindC)
	if code != http.StatusConflict || !strings.Contains(string(body), `L10: namespace \"workspace-c\": its booking \"c-run\" is in quota \"Quota1.2\"`) {
		t.Errorf("PUT /v1/quotas with a booking of workspace-c: %d %s, want 409 naming workspace-c", code, body)
	}
	// Without it: refused for the agent's namespaces.
	if _, err := st.Guarded(ctx, func(*store.Guarded) ([]store.Change, error) {
		return []store.Change{store.DeleteReservation(b.ID)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	code, body = call(t, a, "PUT", "/v1/quotas", rebindC)
	if code != http.StatusConflict || !strings.Contains(string(body), `namespaces = \"workspace-c\": listed in the agent configuration's namespaces but bound to no quota in this tree`) {
		t.Errorf("PUT /v1/quotas unbinding a governed namespace: %d %s, want 409 naming workspace-c", code, body)
	}
	if ns := stored(); !slices.Equal(ns, []string{"workspace-c"}) {
		t.Fatalf("stored Quota1.2 namespaces = %v, want [workspace-c]: a refused write was stored", ns)
	}
	if g2, err := st.ReadGuarded(ctx); err != nil || g2.Counter != g.Counter+1 { // +1: the booking's delete
		t.Errorf("guard %d, want %d (%v)", g2.Counter, g.Counter+1, err)
	}
	// A restart on the store: the new broker has a tree (the one stored).
	b2 := apiAgentWith(t, f, st, true, governs)
	until(t, "the restarted broker's tree", 10*time.Second, func() bool {
		b2.mu.Lock()
		defer b2.mu.Unlock()
		return b2.tree != nil && slices.Equal(b2.tree.Find("Quota1.2").Namespaces, []string{"workspace-c"})
	})
}

// Without Consul the quota file is the tree: a reloaded file that would
// unbind a booking's namespace is refused like a tree write, and the
// running tree stays (CheckTree; before, it was taken and the booking
// left out of every plan).
func TestQuotaFileThatUnbindsABookingIsRefused(t *testing.T) {
	dir := t.TempDir()
	qf := filepath.Join(dir, "quota.hcl")
	if err := os.WriteFile(qf, []byte(e2eQuota), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte("quota_file = \"quota.hcl\"\nhttp_bind = \"127.0.0.1:0\"\n"), filepath.Join(dir, "broker.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg, Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	b := reservation.Booking{ID: "c-run", Namespace: "workspace-c", Node: "Quota1.2", GPUs: 4, AllocGPUs: 4, Start: start, End: start.Add(time.Hour)}
	if _, err := a.store.Guarded(context.Background(), func(*store.Guarded) ([]store.Change, error) {
		return []store.Change{store.PutReservation(b)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(qf, []byte(rebindC), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(qf, later, later); err != nil {
		t.Fatal(err)
	}
	err = a.loadQuota()
	if err == nil || !strings.Contains(err.Error(), qf+`: namespace "workspace-c": its booking "c-run" is in quota "Quota1.2" and this tree binds it to no quota node`) {
		t.Fatalf("reload: %v, want the booking named", err)
	}
	if ns := a.tree.Find("Quota1.2").Namespaces; !slices.Equal(ns, []string{"workspace-c"}) {
		t.Errorf("running Quota1.2 namespaces = %v, want [workspace-c]", ns)
	}
}
