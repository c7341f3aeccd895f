package build

import (
	"context"
	"github.com/gputide/gputide/quota-broker/nomad/policies"
	"sync/atomic"
	"testing"
	"time"
)

// governedLater governs nothing until set, then the three workspaces: the
// agent's Governed before and after it reads its quota tree.
type governedLater struct{ on atomic.Bool }

func (g *governedLater) governed(ns string) bool { return g.on.Load() && governedABC(ns) }

// The policy watcher's Relist ends its wait (here the hour-long pause of a
// proxy that does not block) and reads the policies of the namespaces
// governed now.
func TestPolicyWatcherRelistReadsThePoliciesOfNamespacesGovernedSince(t *testing.T) {
	f := newFakeNomad(t)
	servePolicies(f, 20)
	log, _ := testLogger(t)
	g := &governedLater{}
	pols := policies.NewPolicies()
	w := &policies.PolicyWatcher{Client: f.Client(), Governed: g.governed, Policies: pols, Logger: log, Backoff: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !pols.Synced() || f.Count("GET", "/v1/scaling/policies") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the first lists")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(pols.IdlePolicies()); n != 0 {
		t.Fatalf("%d idle policies before the namespaces are governed", n)
	}
	g.on.Store(true)
	w.Relist("test")
	deadline = time.Now().Add(5 * time.Second)
	for len(pols.IdlePolicies()) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("idle policies after Relist: %+v, want workspace-c's", pols.IdlePolicies())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
