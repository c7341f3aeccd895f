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
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/store"
	"github.com/hashicorp/go-hclog"
)

// The live allocations of workspace-c/training in the recorded state.
const (
	recAllocC1 = "1bdfc0b1-95aa-947a-4125-104f338209f0"
	recAllocC2 = "2b70b577-7405-16fd-d6c5-6b9f12d1bf62"
)

// leaderAgent starts an agent on the fake Nomad and the shared store st.
func leaderAgent(t *testing.T, f *fakeNomad, st store.Store, staleness time.Duration, log hclog.Logger) *Agent {
	t.Helper()
	a, _ := stoppableAgent(t, f, st, staleness, log)
	return a
}

// stoppableAgent is leaderAgent with a stop function (a graceful stop:
// the last cycle ends, then the lock is released); the test's cleanup
// calls it too.
func stoppableAgent(t *testing.T, f *fakeNomad, st store.Store, staleness time.Duration, log hclog.Logger) (*Agent, func()) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "quota.hcl"), []byte(e2eQuota), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(fmt.Sprintf(`
nomad { address = %q }
quota_file = "quota.hcl"
http_bind  = "127.0.0.1:0"
`, f.srv.URL)), filepath.Join(dir, "broker.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Interval, cfg.Staleness = 50*time.Millisecond, staleness
	if log == nil {
		log = hclog.NewNullLogger()
	}
	a, err := New(cfg, Options{Logger: log, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return a, stop
}

func (f *fakeNomad) allWrites() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.writes...)
}

// L12: while another broker holds the leader lock the agent plans but
// writes nothing to Nomad, and says who leads; once the lock is released
// it takes it and acts, recording every governed job in the store.
func TestStandbyDoesNotActUntilItHoldsTheLock(t *testing.T) {
	f := newFakeNomad(t)
	st := store.NewMemory()
	other, err := st.Lock(context.Background(), "other-broker")
	if err != nil {
		t.Fatal(err)
	}
	a := leaderAgent(t, f, st, 300*time.Millisecond, nil)
	until(t, "standby", 10*time.Second, func() bool {
		h := a.Health()
		return h.Leader == "other-broker" && strings.HasPrefix(h.Why, "standby")
	})
	until(t, "a plan", 10*time.Second, func() bool { return a.Health().LastPlanAt.After(time.Time{}) })
	time.Sleep(300 * time.Millisecond)
	if w := f.allWrites(); len(w) != 0 {
		t.Fatalf("the standby wrote to Nomad: %v", w)
	}
	if h := a.Health(); h.Acting || h.IsLeader {
		t.Fatalf("standby health = %+v", h)
	}
	if err := other.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	until(t, "leading", 10*time.Second, func() bool { h := a.Health(); return h.IsLeader && h.Acting })
	// The two jobs with bad meta get their error written: it acts.
	until(t, "the meta writes", 10*time.Second, func() bool { return f.writeCount() >= 2 })
	if h := a.Health(); h.Leader == "" || h.Leader == "other-broker" || h.Store != "memory" {
		t.Fatalf("leader health = %+v", h)
	}
	jobs, err := st.Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for id, rec := range jobs {
		if rec.FirstSeen.IsZero() || rec.QueuedAt.IsZero() {
			t.Errorf("job %s record %+v lacks first_seen or queued_at", id, rec)
		}
		keys = append(keys, id.String())
	}
	slices.Sort(keys)
	want := []string{"workspace-a/inference", "workspace-b/training", "workspace-c/bad-idle", "workspace-c/bad-maxrun", "workspace-c/training"}
	if !slices.Equal(keys, want) {
		t.Fatalf("job records = %q, want %q", keys, want)
	}
	// What ran before the store's first start is admitted as it is.
	if rec := jobs[store.JobID{Namespace: "workspace-c", Job: "training"}]; rec.AdmittedAt.IsZero() {
		t.Errorf("workspace-c/training record %+v, want admitted_at (running at the first start)", rec)
	}
}

// L12: a successor reads its predecessor's intents back as StoppingFor and
// does not stop those allocations again; an intent whose allocation is
// gone is deleted.
func TestSuccessorReadsIntentsBackAndRepeatsNothing(t *testing.T) {
	f := newFakeNomad(t)
	st := store.NewMemory()
	ctx := context.Background()
	old, err := st.Lock(ctx, "old-leader")
	if err != nil {
		t.Fatal(err)
	}
	claimant := plan.GroupKey{Namespace: "workspace-a", Job: "inference", Group: "main"}
	for _, alloc := range []string{recAllocC1, recAllocC2, "gone-alloc"} {
		in := store.Intent{Alloc: alloc, Action: "stop", Namespace: "workspace-c", Job: "training", For: claimant,
			Rule: "L5.2", At: time.Now()}
		if err := st.PutIntent(ctx, old, in); err != nil {
			t.Fatal(err)
		}
	}
	// The predecessor had admitted workspace-c/training (not a first start).
	if err := st.PutJob(ctx, old, store.JobID{Namespace: "workspace-c", Job: "training"},
		store.JobRecord{FirstSeen: time.Now(), QueuedAt: time.Now(), AdmittedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := old.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a := leaderAgent(t, f, st, 5*time.Second, nil)
	until(t, "leading", 10*time.Second, func() bool { h := a.Health(); return h.IsLeader && h.Acting })
	until(t, "the stale intent deleted", 10*time.Second, func() bool {
		ins, err := st.Intents(ctx)
		return err == nil && len(ins) == 2
	})
	// The two jobs with bad meta get their error written: one Execute is done.
	until(t, "the meta writes", 10*time.Second, func() bool { return f.writeCount() >= 2 })
	a.mu.Lock()
	snap := a.lastSnap
	a.mu.Unlock()
	got := map[string]plan.GroupKey{}
	for _, al := range snap.Allocations {
		if !al.StoppingFor.IsZero() {
			got[al.ID] = al.StoppingFor
		}
	}
	want := map[string]plan.GroupKey{recAllocC1: claimant, recAllocC2: claimant}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("stopping_for (-want +got):\n%s", diff)
	}
	for _, w := range f.allWrites() {
		if strings.Contains(w, recAllocC1) || strings.Contains(w, recAllocC2) {
			t.Fatalf("the successor stopped an allocation its predecessor had: %s", w)
		}
	}
}

// Past the store's first start, a job running in a real pool without
// admitted_at was registered straight into it: it is checked by L3 (and
// here accepted), not taken as it is.
func TestPastTheFirstStartAJobWithoutAdmittedAtIsADirectRegistration(t *testing.T) {
	f := newFakeNomad(t)
	st := store.NewMemory()
	ctx := context.Background()
	old, err := st.Lock(ctx, "old-leader")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutJob(ctx, old, store.JobID{Namespace: "workspace-a", Job: "inference"},
		store.JobRecord{FirstSeen: time.Now(), QueuedAt: time.Now(), AdmittedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := old.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	a := leaderAgent(t, f, st, 300*time.Millisecond, hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info}))
	until(t, "leading", 10*time.Second, func() bool { return a.Health().IsLeader })
	until(t, "the direct registration accepted", 10*time.Second, func() bool {
		return strings.Contains(logs.String(), "accepted a job registered straight into its pool: job=workspace-c/training")
	})
	if strings.Contains(logs.String(), "job=workspace-a/inference") {
		t.Fatalf("the admitted job was checked again:\n%s", logs.String())
	}
	until(t, "admitted_at recorded", 10*time.Second, func() bool {
		rec, err := st.Job(ctx, store.JobID{Namespace: "workspace-c", Job: "training"})
		return err == nil && !rec.AdmittedAt.IsZero()
	})
}

// With a consul block, quota_file only seeds an absent tree: the store's
// tree wins, and a tree written to the store later applies live (DESIGN §6).
func TestWithConsulTheStoreTreeWinsAndAppliesLive(t *testing.T) {
	f := newFakeNomad(t)
	st := store.NewMemory()
	ctx := context.Background()
	tree, settings, err := quota.Parse([]byte(strings.Replace(e2eQuota, "gpus       = 3", "gpus       = 2", 1)), "stored.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if _, seeded, err := st.SeedTree(ctx, store.TreeRecord{Root: tree, Settings: settings, ChangedAt: time.Now()}); err != nil || !seeded {
		t.Fatalf("seed: %v %v", seeded, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "quota.hcl"), []byte(e2eQuota), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(fmt.Sprintf(`
nomad { address = %q }
consul { address = "127.0.0.1:1" }
quota_file = "quota.hcl"
http_bind  = "127.0.0.1:0"
`, f.srv.URL)), filepath.Join(dir, "broker.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Interval, cfg.Staleness = 50*time.Millisecond, 300*time.Millisecond
	a, err := New(cfg, Options{Logger: hclog.NewNullLogger(), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	gpus := func(name string) int {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.tree == nil {
			return -1
		}
		return a.tree.Find(name).GPUs.Of(quota.ImplicitFlavor)
	}
	until(t, "the store's tree", 10*time.Second, func() bool { return gpus("Quota1.1") == 2 })
	if h := a.Health(); h.Store != "consul" {
		t.Fatalf("health store = %q", h.Store)
	}
	// A quota move written by another instance: 1.1 = 3, 1.2 = 5.
	moved, _, err := quota.Parse([]byte(e2eQuota), "moved.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Guarded(ctx, func(*store.Guarded) ([]store.Change, error) {
		return []store.Change{store.PutTree(store.TreeRecord{Root: moved, Settings: settings, ChangedAt: time.Now()})}, nil
	}); err != nil {
		t.Fatal(err)
	}
	until(t, "the moved tree", 10*time.Second, func() bool { return gpus("Quota1.1") == 3 })
	a.mu.Lock()
	changed := a.tree.Find("Quota1.1").ChangedAt
	a.mu.Unlock()
	if changed.IsZero() {
		t.Fatal("the moved node has no change time (L9 debt grace)")
	}
}

// The leader prunes the preemption history past history_retention when
// it takes the lock (DESIGN §6).
func TestLeaderPrunesOldHistory(t *testing.T) {
	f := newFakeNomad(t)
	st := store.NewMemory()
	ctx := context.Background()
	old, err := st.Lock(ctx, "old-leader")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for i, age := range []time.Duration{3000 * time.Hour, time.Hour} {
		p := store.Preemption{At: now.Add(-age), Alloc: fmt.Sprint("alloc-", i), Namespace: "workspace-c", Job: "training",
			GPUs: 2, For: "workspace-a/inference/main", Rule: "L5.2"}
		if err := st.AddPreemption(ctx, old, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a := leaderAgent(t, f, st, 300*time.Millisecond, nil)
	until(t, "the old entry pruned", 10*time.Second, func() bool {
		list, err := a.preemptions(ctx)
		return err == nil && len(list) == 1 && list[0].Alloc == "alloc-1"
	})
}

// L12: a predecessor that died between the stops of one preemption left
// an announced stop it did not make; its claimant still waits in the
// holding pool. The successor makes that stop, once, instead of choosing
// other victims.
func TestSuccessorFinishesAPreemptionItsPredecessorBegan(t *testing.T) {
	f := newFakeNomad(t)
	st := store.NewMemory()
	ctx := context.Background()
	old, err := st.Lock(ctx, "old-leader")
	if err != nil {
		t.Fatal(err)
	}
	claimant := plan.GroupKey{Namespace: "workspace-b", Job: "training", Group: "worker"} // in the holding pool in the recording
	in := store.Intent{Alloc: recAllocC1, Action: "stop", Namespace: "workspace-c", Job: "training", For: claimant,
		Rule: "L5.2", At: time.Now().Add(-time.Minute)}
	if err := st.PutIntent(ctx, old, in); err != nil {
		t.Fatal(err)
	}
	if err := st.PutJob(ctx, old, store.JobID{Namespace: "workspace-c", Job: "training"},
		store.JobRecord{FirstSeen: time.Now(), QueuedAt: time.Now(), AdmittedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := old.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	a := leaderAgent(t, f, st, 300*time.Millisecond, hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info}))
	defer func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	}()
	stop := "PUT /v1/allocation/" + recAllocC1 + "/stop"
	count := func() int {
		n := 0
		for _, w := range f.allWrites() {
			if w == stop {
				n++
			}
		}
		return n
	}
	until(t, "the announced stop made", 10*time.Second, func() bool { return count() == 1 })
	cycles := a.Health().LastPlanAt
	until(t, "more cycles", 10*time.Second, func() bool { return a.Health().LastPlanAt.After(cycles.Add(200 * time.Millisecond)) })
	if n := count(); n != 1 {
		t.Fatalf("%s made %d times, want once", stop, n)
	}
	list, err := a.preemptions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Alloc != recAllocC1 || list[0].For != claimant.String() {
		t.Fatalf("preemptions = %+v, want the finished stop for %s", list, claimant)
	}
}
