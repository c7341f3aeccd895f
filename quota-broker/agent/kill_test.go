package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/store"
	"github.com/hashicorp/go-hclog"
)

// claimQuota makes workspace-b/training (waiting in the holding pool of the
// recording) a claimant of workspace-c/training's GPUs: Root's own
// namespace, with child-level preemption (L5.2).
const claimQuota = `
quota "Root" {
  gpus             = 8
  child_preemption = true
  namespaces       = ["workspace-b"]
  quota "C" {
    gpus       = 4
    namespaces = ["workspace-c"]
  }
  quota "A" {
    gpus       = 4
    namespaces = ["workspace-a"]
  }
}
`

// cycleAgent is an agent on the fake Nomad and the store st whose clock is
// *clock, with its watchers running but no cycle loop and no lock: the
// test drives its cycles (runCycle) and gives it the lock (takeLock). Its
// goroutines end with kill, or the test.
func cycleAgent(t *testing.T, f *fakeNomad, st store.Store, quotaHCL string, clock *time.Time, log hclog.Logger) (a *Agent, kill func()) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "quota.hcl"), []byte(quotaHCL), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(fmt.Sprintf("nomad { address = %q }\nquota_file = \"quota.hcl\"\nhttp_bind = \"127.0.0.1:0\"\n",
		f.srv.URL)), filepath.Join(dir, "broker.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Staleness = 5 * time.Second
	now := func() time.Time { return *clock }
	if a, err = New(cfg, Options{Logger: log, Store: st, Now: now}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = a.watcher.Run(ctx) }()
	go func() { defer wg.Done(); a.watchStore(ctx, nil) }()
	var once sync.Once
	kill = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(kill)
	until(t, "the first list and the bookings", 10*time.Second, func() bool {
		_, err := a.mem.view(ctx)
		return a.watcher.State() != nil && err == nil
	})
	return a, kill
}

// carriedOut are the actions a cycle carried out: the stops it resumed,
// then its plan's, waits left out.
func carriedOut(c *cycleState) []plan.Action {
	var out []plan.Action
	for _, act := range append(slices.Clone(c.stops.resume), c.p.Actions...) {
		if act.Action != plan.ActionWait {
			out = append(out, act)
		}
	}
	return out
}

func countOf(writes []string, w string) int {
	n := 0
	for _, x := range writes {
		if x == w {
			n++
		}
	}
	return n
}

// L12 (issue 18): a leader is killed (kill -9) in the middle of its act:
// it has recorded its intents and made two of its Nomad calls (the move of
// the victim's job to the holding pool and the first stop), then nothing
// more runs, and its lock is not released gracefully. A successor on the
// same store and the same Nomad state, with the same injected clock past
// the intents' grace, plans what its predecessor planned less what was
// carried out (the first stop, the move with it), finishes the preemption
// (the second stop, resumed from its intent) and admits the claimant, and
// makes none of the predecessor's calls again.
func TestSuccessorAfterAKillMidActRepeatsNothing(t *testing.T) {
	f := newFakeNomad(t)
	f.dynamic = true
	st := store.NewMemory()
	ctx := context.Background()
	clock := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	log := hclog.NewNullLogger()

	first, kill := cycleAgent(t, f, st, claimQuota, &clock, log)
	lock1, err := st.Lock(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	first.takeLock(lock1)
	// The kill: after the second Nomad write nothing of the first broker
	// acts or writes again (its lock is dead to it: every act and every
	// store write is fenced by it).
	f.mu.Lock()
	f.onWrite = func(n int) {
		if n == 2 {
			lock1.Abandon()
		}
	}
	f.mu.Unlock()
	c1 := first.runCycle(ctx, &cycleRun{})
	kill()
	f.mu.Lock()
	f.onWrite = nil
	f.mu.Unlock()
	if c1.p == nil || c1.run.step != "account" {
		t.Fatalf("the first broker's cycle stopped in step %q", c1.run.step)
	}
	planned := carriedOut(c1)
	writes1 := f.allWrites()
	if len(writes1) != 2 || !strings.HasPrefix(writes1[1], "PUT /v1/allocation/") {
		t.Fatalf("the first broker's Nomad writes = %v, want a job move and one stop", writes1)
	}
	// Carried out: the stops whose calls were made.
	done := map[string]bool{}
	for _, act := range planned {
		if act.Action == plan.ActionStop && countOf(writes1, "PUT /v1/allocation/"+act.Alloc+"/stop") == 1 {
			done[act.Alloc] = true
		}
	}
	if len(done) != 1 {
		t.Fatalf("stops made = %v of the plan %+v, want one", done, planned)
	}
	want := slices.DeleteFunc(slices.Clone(planned), func(act plan.Action) bool { return act.Action == plan.ActionStop && done[act.Alloc] })
	if len(want) < 2 {
		t.Fatalf("the plan %+v leaves nothing to finish: the test needs a stop and an admission", planned)
	}
	// The session expires, as a crashed holder's does (SessionTTL): here
	// at once.
	if err := lock1.Release(ctx); err != nil {
		t.Fatal(err)
	}

	clock = clock.Add(10 * time.Second) // past the intents' grace (staleness 5s)
	second, _ := cycleAgent(t, f, st, claimQuota, &clock, log)
	lock2, err := st.Lock(ctx, "second")
	if err != nil {
		t.Fatal(err)
	}
	second.takeLock(lock2)
	c2 := second.runCycle(ctx, &cycleRun{})
	if c2.run.step != "account" || len(c2.out.Errors) != 0 {
		t.Fatalf("the successor's cycle stopped in step %q, errors %v", c2.run.step, c2.out.Errors)
	}
	ignore := cmpopts.IgnoreFields(plan.Action{}, "Reason") // a resumed stop says it finishes the preemption
	if diff := cmp.Diff(want, carriedOut(c2), ignore); diff != "" {
		t.Fatalf("the successor's actions (-predecessor's plan less what was carried out +successor's):\n%s", diff)
	}
	// None of the predecessor's calls made twice (the victim's job moved
	// once, its first allocation stopped once); its unmade stop made once.
	all := f.allWrites()
	f.mu.Lock()
	registered := slices.Clone(f.registered)
	f.mu.Unlock()
	if n := countOf(registered, "workspace-c/training"); n != 1 {
		t.Errorf("the victim's job registered %d times (%v), want once", n, registered)
	}
	if n := countOf(registered, "workspace-b/training"); n != 1 {
		t.Errorf("the claimant registered %d times (%v), want once: its admission", n, registered)
	}
	for _, w := range writes1[1:] {
		if n := countOf(all, w); n != 1 {
			t.Errorf("%s made %d times, want once", w, n)
		}
	}
	for _, act := range want {
		if act.Action == plan.ActionStop {
			if n := countOf(all, "PUT /v1/allocation/"+act.Alloc+"/stop"); n != 1 {
				t.Errorf("the resumed stop of %s made %d times, want once", act.Alloc, n)
			}
		}
	}
	// The successor's next cycle stops nothing and calls Nomad for nothing
	// (the admitted claimant is Nomad's to place now).
	c3 := second.runCycle(ctx, &cycleRun{})
	for _, act := range carriedOut(c3) {
		if act.Action == plan.ActionStop {
			t.Errorf("the successor's next cycle stops again: %+v", act)
		}
	}
	if got := f.allWrites(); len(got) != len(all) {
		t.Errorf("the successor's next cycle wrote to Nomad: %v", got[len(all):])
	}
}
