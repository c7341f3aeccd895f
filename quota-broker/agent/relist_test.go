package agent

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/store"
)

// slowTreeStore answers the tree (SeedTree, WatchGuarded) only once
// release is closed: a Consul store that answers after Nomad's first list.
type slowTreeStore struct {
	store.Store
	release chan struct{}
}

func (s *slowTreeStore) wait(ctx context.Context) error {
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slowTreeStore) SeedTree(ctx context.Context, rec store.TreeRecord) (*store.TreeRecord, bool, error) {
	if err := s.wait(ctx); err != nil {
		return nil, false, err
	}
	return s.Store.SeedTree(ctx, rec)
}

func (s *slowTreeStore) WatchGuarded(ctx context.Context, fn func(*store.Guarded, error)) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.Store.WatchGuarded(ctx, fn)
}

// Issue 16, attack list High #2: on the Consul store Nomad's first list
// can end before the quota tree is read; it keeps no job, as no namespace
// is governed yet. Once the tree is read the agent lists again, and the
// queue shows the waiting job within a few seconds (before: never, until a
// restart, as the fake's stream sends nothing).
func TestJobsListedBeforeTheTreeAppearOnceItIsRead(t *testing.T) {
	f := newFakeNomad(t)
	st := &slowTreeStore{Store: store.NewMemory(), release: make(chan struct{})}
	a := apiAgentWith(t, f, st, true, "")
	until(t, "the first list", 10*time.Second, func() bool { return a.Health().Relists >= 1 })
	time.Sleep(100 * time.Millisecond)
	if j := a.watcher.State().Job("workspace-c", "training"); j != nil {
		t.Fatal("a job was kept before the tree was read")
	}
	close(st.release)
	start := time.Now()
	until(t, "workspace-b's training waiting in the queue", 5*time.Second, func() bool {
		code, body := call(t, a, "GET", "/v1/queue", "")
		return code == http.StatusOK && strings.Contains(string(body), `"namespace": "workspace-b",
      "gpus": 3,
      "job": "training"`)
	})
	if a.watcher.State().Job("workspace-c", "training") == nil {
		t.Error("workspace-c's running training is not in the state")
	}
	t.Logf("queued jobs shown %s after the tree was read", time.Since(start).Round(time.Millisecond))
	if h := a.Health(); h.Relists != 2 {
		t.Errorf("relists = %d, want 2 (the first list, then one when the tree was read)", h.Relists)
	}
}
