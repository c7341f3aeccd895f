package e2e

// Jobs invisible after a restart (issue 16, attack list High #2): on the
// Consul store Nomad's first list could finish before the quota tree was
// read; it kept no job (no namespace governed yet), nothing listed again,
// and /v1/queue stayed [] for minutes while Nomad showed the jobs queued.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/agent"
	brokerapi "github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/gputide/gputide/quota-broker/store"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

// lateTreeStore answers the tree (SeedTree, WatchGuarded) only once
// release is closed, so that the broker's Nomad list ends first.
type lateTreeStore struct {
	store.Store
	release chan struct{}
}

func (s *lateTreeStore) wait(ctx context.Context) error {
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *lateTreeStore) SeedTree(ctx context.Context, rec store.TreeRecord) (*store.TreeRecord, bool, error) {
	if err := s.wait(ctx); err != nil {
		return nil, false, err
	}
	return s.Store.SeedTree(ctx, rec)
}

func (s *lateTreeStore) WatchGuarded(ctx context.Context, fn func(*store.Guarded, error)) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.Store.WatchGuarded(ctx, fn)
}

// A broker on Consul seeds the tree and queues team B's job (no GPU in the
// cluster: it waits); it stops, and a new broker starts on the same store
// whose tree read is held back until its Nomad list is done. Once the tree
// is read the queue shows the job within seconds.
func TestBrokerRestartShowsJobsListedBeforeItsTree(t *testing.T) {
	consulAddr := startConsul(t)
	a := newNomadAgent(t, nomadOptions{})
	for _, ns := range workspaces {
		if _, err := a.Client.Namespaces().Register(&api.Namespace{Name: ns}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Client.NodePools().Register(&api.NodePool{Name: build.DefaultHoldingPool}, nil); err != nil {
		t.Fatal(err)
	}
	submit(t, a.Client, jobSpec{Namespace: "workspace-b", ID: "waits", Type: "batch", Priority: 50, Count: 1, GPUs: 2})
	cfgPath, _ := brokerConfig(t, a.Addr, 3, 5)
	appendConfig(t, cfgPath, fmt.Sprintf("consul {\n  address = %q\n  prefix  = %q\n}", consulAddr, "gputide-restart-e2e/"))
	cfg, err := agent.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	queued := func(b *broker) bool {
		var q brokerapi.QueueResponse
		if err := getJSON("http://"+b.Addr+"/v1/queue", &q); err != nil {
			return false
		}
		for _, e := range q.Queue {
			if e.Namespace == "workspace-b" && e.Job == "waits" {
				return true
			}
		}
		return false
	}

	// The first broker seeds the store's tree and sees the job.
	first := startStoreBroker(t, cfg, nil)
	if err := waitFor(30*time.Second, 50*time.Millisecond, func() error {
		if !queued(first) {
			return fmt.Errorf("not queued")
		}
		return nil
	}); err != nil {
		t.Fatalf("first broker: the job is not in the queue: %v", err)
	}
	first.stop()

	// The restart: Nomad listed before the tree is read.
	late := make(chan struct{})
	second := startStoreBroker(t, cfg, func(kv store.Store) store.Store { return &lateTreeStore{Store: kv, release: late} })
	if err := waitFor(30*time.Second, 50*time.Millisecond, func() error {
		h, err := second.health()
		if err != nil || h.Relists < 1 {
			return fmt.Errorf("not listed yet: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatalf("second broker: %v", err)
	}
	time.Sleep(500 * time.Millisecond) // the list is done, its stream open
	close(late)
	start := time.Now()
	if err := waitFor(10*time.Second, 20*time.Millisecond, func() error {
		if !queued(second) {
			return fmt.Errorf("the queue does not show workspace-b/waits")
		}
		return nil
	}); err != nil {
		h, _ := second.health()
		t.Fatalf("after the restart: %v (health %+v)", err, h)
	}
	t.Logf("the queue showed the job %s after the tree was read", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(second.Log.String(), "listing Nomad again") {
		t.Errorf("no relist in the broker's log")
	}
}

// startStoreBroker runs the broker of cfg in-process on the store its
// consul block names, wrapped by wrap when set, until the test ends or
// stop is called. It does not wait for it to act.
func startStoreBroker(t *testing.T, cfg *agent.Config, wrap func(store.Store) store.Store) *broker {
	t.Helper()
	kv, _, err := store.Open(cfg.Consul)
	if err != nil {
		t.Fatal(err)
	}
	var st store.Store = kv
	if wrap != nil {
		st = wrap(kv)
	}
	buf := &lockedBuffer{}
	log := hclog.New(&hclog.LoggerOptions{Name: "gputide", Level: hclog.Debug, Output: buf})
	ag, err := agent.New(cfg, agent.Options{Logger: log, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ag.Run(ctx) }()
	var once sync.Once
	b := &broker{Addr: cfg.HTTPBind, Log: buf, stop: func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("broker: %v", err)
			}
		})
	}}
	t.Cleanup(func() {
		b.stop()
		if t.Failed() {
			t.Logf("broker log:\n%s", tail(buf.String(), 12000))
		}
	})
	return b
}
