package agent

import (
	"context"
	"encoding/json"
	"github.com/gputide/gputide/quota-broker/nomad/policies"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/store"
	"github.com/hashicorp/go-hclog"
)

// The Actor keeps no facts between cycles (issue 18 item 1): what it left
// to do on a job it stopped whole and since when an idle group has had
// allocations unplaced are job records, so a successor carries on from
// its predecessor's, with the agent's fake Nomad, an injected clock and
// one memory store shared by both.

// jobC is the flex request of the recording, workspace-c/training.
var jobC = store.JobID{Namespace: "workspace-c", Job: "training"}

// abandonOn makes the fake's write that starts with prefix the last one
// lock acts for (a kill -9 right after that call).
func abandonOn(f *fakeNomad, lock *store.Lock, prefix string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onWrite = func(n int) {
		f.mu.Lock()
		w := f.writes[n-1]
		f.mu.Unlock()
		if strings.HasPrefix(w, prefix) {
			lock.Abandon()
		}
	}
}

// servedJob is the job ns/id as the fake serves it now.
func servedJob(t *testing.T, f *fakeNomad, ns, id string) map[string]any {
	t.Helper()
	f.mu.Lock()
	data, ok := f.override["job-"+ns+"-"+id+".json"]
	f.mu.Unlock()
	if !ok {
		t.Fatalf("job %s/%s not changed", ns, id)
	}
	var j map[string]any
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	return j
}

// testClock is an injected clock that the test moves while the agents'
// goroutines read it.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// relisted makes a's watcher list Nomad again and waits for it: the
// state is then fresh at the clock's time.
func relisted(t *testing.T, a *Agent) {
	t.Helper()
	n := a.Health().Relists
	a.watcher.Relist("the test changed Nomad")
	until(t, "a new list", 10*time.Second, func() bool { return a.Health().Relists > n })
}

// L11.max_run, L12: a leader stops the flex request workspace-c/training
// whole (its max_run of 1h long past) and is killed (kill -9) right after
// the deregister, before its allocations finish and so before it writes
// gputide_status = stopped. Its successor, on the same store and the same
// Nomad, does not stop the job again, writes nothing while its allocations
// still run, then writes the status its predecessor would have written
// (the rule and reason recorded before the deregister), once.
func TestSuccessorWritesTheStatusOfAJobItsPredecessorStopped(t *testing.T) {
	f := newFakeNomad(t)
	f.setJobMeta(t, "workspace-c", "training", "gputide_flex_max_run", "1h")
	f.dynamic = true
	st := store.NewMemory()
	ctx := context.Background()
	start := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	clock := &testClock{t: start}
	log := hclog.NewNullLogger()

	first, kill := clockedAgent(t, f, st, e2eQuota, clock.Now, log)
	lock1, err := st.Lock(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	first.takeLock(lock1)
	abandonOn(f, lock1, "DELETE /v1/job/training")
	c1 := first.runCycle(ctx, &cycleRun{})
	kill()
	f.mu.Lock()
	f.onWrite = nil
	f.mu.Unlock()
	var stop *plan.Action
	for _, act := range c1.p.Actions {
		if act.Action == plan.ActionStopJob && act.Namespace == jobC.Namespace && act.Job == jobC.Job {
			stop = &act
		}
	}
	if stop == nil || c1.out.JobsStopped != 1 {
		t.Fatalf("the first leader's plan %+v stopped %d jobs: want the L11.max_run stop of %s", c1.p.Actions, c1.out.JobsStopped, jobC)
	}
	reason := string(stop.Rule) + ": " + stop.Reason
	if n := countOf(f.allWrites(), "DELETE /v1/job/training"); n != 1 {
		t.Fatalf("the first leader's writes %v: want one deregister", f.allWrites())
	}
	rec, err := st.Job(ctx, jobC)
	if err != nil || rec.Stopped.Reason != reason || rec.Stopped.JobModifyIndex != 22 {
		t.Fatalf("the stored record %+v, %v: want the status to write, %q at index 22", rec, err, reason)
	}
	if err := lock1.Release(ctx); err != nil {
		t.Fatal(err)
	}

	clock.Set(start.Add(10 * time.Second))
	second, _ := clockedAgent(t, f, st, e2eQuota, clock.Now, log)
	lock2, err := st.Lock(ctx, "second")
	if err != nil {
		t.Fatal(err)
	}
	second.takeLock(lock2)
	// Its allocations still stopping: nothing to write yet.
	writes := len(f.allWrites())
	c2 := second.runCycle(ctx, &cycleRun{})
	if c2.run.step != "account" || len(c2.out.Errors) != 0 || c2.out.JobsStopped != 0 {
		t.Fatalf("the successor's cycle stopped in step %q, errors %v, jobs stopped %d", c2.run.step, c2.out.Errors, c2.out.JobsStopped)
	}
	for _, w := range f.allWrites()[writes:] {
		if strings.Contains(w, "/v1/job/training") {
			t.Errorf("the successor wrote %s while the allocations still run", w)
		}
	}
	f.mu.Lock()
	registered := countOf(f.registered, "workspace-c/training")
	f.mu.Unlock()
	if registered != 0 {
		t.Fatalf("the job registered %d times before its allocations finished", registered)
	}

	// The allocations finish.
	for _, id := range []string{recAllocC1, recAllocC2} {
		f.setAlloc(t, id, func(al map[string]any) { al["ClientStatus"] = "complete" })
	}
	clock.Set(start.Add(20 * time.Second))
	relisted(t, second)
	for i := range 2 {
		clock.Set(start.Add(20*time.Second + time.Duration(i)*time.Second))
		if c := second.runCycle(ctx, &cycleRun{}); c.run.step != "account" || len(c.out.Errors) != 0 {
			t.Fatalf("the successor's cycle stopped in step %q, errors %v", c.run.step, c.out.Errors)
		}
	}
	f.mu.Lock()
	registered = countOf(f.registered, "workspace-c/training")
	f.mu.Unlock()
	if registered != 1 {
		t.Fatalf("the job registered %d times: want once, its status", registered)
	}
	if n := countOf(f.allWrites(), "DELETE /v1/job/training"); n != 1 {
		t.Errorf("the job stopped %d times, want once", n)
	}
	j := servedJob(t, f, jobC.Namespace, jobC.Job)
	meta, _ := j["Meta"].(map[string]any)
	if meta["gputide_status"] != "stopped" || meta["gputide_reason"] != reason || j["Stop"] != true {
		t.Fatalf("the job's meta %v, stop %v: want gputide_status stopped, reason %q, still stopped", meta, j["Stop"], reason)
	}
	if rec, err := st.Job(ctx, jobC); err != nil || !rec.Stopped.IsZero() {
		t.Fatalf("the stored record %+v, %v: want no status left to write", rec, err)
	}
}

// idlePolicy is the gputide-idle scaling policy of workspace-c/training's
// group worker (the same as quota-broker/nomad/internal/fakenomad's).
const idlePolicy = `{"ID": "pol-idle", "Namespace": "workspace-c", "Enabled": true, "Type": "horizontal",
  "Min": 1, "Max": 6, "ModifyIndex": 20,
  "Target": {"Namespace": "workspace-c", "Job": "training", "Group": "worker"},
  "Policy": {"evaluation_interval": "1m", "check": [{"fit": [{"source": "gputide-apm",
    "query": "idle_fit{namespace=\"workspace-c\",job=\"training\",group=\"worker\"}",
    "strategy": [{"gputide-idle": [{}]}]}]}]}}`

// idleQuota governs workspace-a and workspace-c only: nothing claims
// workspace-c's GPUs.
const idleQuota = `
quota "Root" {
  gpus       = 8
  namespaces = ["workspace-a"]
  quota "C" {
    gpus       = 5
    namespaces = ["workspace-c"]
  }
}
`

// idleAgent is clockedAgent on idleQuota with its scaling policies read
// once.
func idleAgent(t *testing.T, f *fakeNomad, st store.Store, clock *testClock) (*Agent, func()) {
	t.Helper()
	a, kill := clockedAgent(t, f, st, idleQuota, clock.Now, hclog.NewNullLogger())
	if _, err := a.policyWatcher.Sync(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	return a, kill
}

// Issue 11 item 4, L12: workspace-c/training is idle and elastic, its group
// worker at count 5 with 2 allocations running: 3 unplaced since the first
// leader's first cycle, at T. The leader is killed at T + 10 s; its
// successor, started at T + 20 s, scales the group down to 2 at T + settle
// (30 s), not at its own start + settle, and once.
func TestSuccessorScalesAnIdleGroupDownSettleAfterItsPredecessorSawItUnplaced(t *testing.T) {
	f := newFakeNomad(t)
	f.dynamic = true
	f.mu.Lock()
	f.changeJob(t, "workspace-c", "training", func(j map[string]any) {
		meta, _ := j["Meta"].(map[string]any)
		meta["gputide_idle"], meta["gputide_elastic"] = "true", "true"
		j["TaskGroups"].([]any)[0].(map[string]any)["Count"] = 5
	})
	f.bodies = map[string]string{
		"/v1/scaling/policies": `[{"ID": "pol-idle", "Enabled": true, "Type": "horizontal", "ModifyIndex": 20,
  "Target": {"Namespace": "workspace-c", "Job": "training", "Group": "worker"}}]`,
		"/v1/scaling/policy/pol-idle": idlePolicy,
	}
	f.mu.Unlock()
	st := store.NewMemory()
	ctx := context.Background()
	since := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	clock := &testClock{t: since}
	const scale = "PUT /v1/job/training/scale"

	first, kill := idleAgent(t, f, st, clock)
	lock1, err := st.Lock(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	first.takeLock(lock1)
	for _, at := range []time.Duration{0, 10 * time.Second} {
		clock.Set(since.Add(at))
		relisted(t, first)
		c := first.runCycle(ctx, &cycleRun{})
		if c.run.step != "account" || len(c.out.Errors) != 0 || c.b.Idle[plan.GroupKey{Namespace: "workspace-c", Job: "training", Group: "worker"}] == nil {
			t.Fatalf("the first leader's cycle stopped in step %q, errors %v, idle groups %v", c.run.step, c.out.Errors, c.b.Idle)
		}
	}
	kill()
	rec, err := st.Job(ctx, jobC)
	if err != nil || !rec.Unplaced["worker"].Equal(since) {
		t.Fatalf("the stored record %+v, %v: want worker unplaced since %v", rec, err, since)
	}
	if err := lock1.Release(ctx); err != nil {
		t.Fatal(err)
	}

	clock.Set(since.Add(20 * time.Second))
	second, _ := idleAgent(t, f, st, clock)
	lock2, err := st.Lock(ctx, "second")
	if err != nil {
		t.Fatal(err)
	}
	second.takeLock(lock2)
	for _, at := range []time.Duration{20 * time.Second, 29 * time.Second, 30 * time.Second, 31 * time.Second, time.Minute} {
		clock.Set(since.Add(at))
		relisted(t, second)
		c := second.runCycle(ctx, &cycleRun{})
		if c.run.step != "account" || len(c.out.Errors) != 0 {
			t.Fatalf("at T + %s: the successor's cycle stopped in step %q, errors %v", at, c.run.step, c.out.Errors)
		}
		want := 0
		if at >= 30*time.Second {
			want = 1
		}
		if n := countOf(f.allWrites(), scale); n != want {
			t.Fatalf("at T + %s: %d scale calls, want %d (writes %v)", at, n, want, f.allWrites())
		}
	}
}

// recordUnplaced keeps a recorded instant while the group stays unplaced,
// records the cycle's time for a group newly unplaced, drops the groups
// placed or no longer idle, and changes nothing while the idle groups are
// unknown (the scaling policies not synced: Build.Idle nil).
func TestRecordUnplaced(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	worker := plan.GroupKey{Namespace: "workspace-c", Job: "training", Group: "worker"}
	eval := plan.GroupKey{Namespace: "workspace-c", Job: "training", Group: "eval"}
	other := store.JobID{Namespace: "workspace-c", Job: "other"}
	recorded := map[store.JobID]store.JobRecord{
		jobC:  {FirstSeen: t0, QueuedAt: t0, Unplaced: map[string]time.Time{"worker": t0}},
		other: {FirstSeen: t0, QueuedAt: t0, Unplaced: map[string]time.Time{"gone": t0}},
	}
	run := func(idle map[plan.GroupKey]*policies.IdleView) map[store.JobID]store.JobRecord {
		c := &cycleState{start: now, view: &view{jobs: recorded}, b: &build.Build{Idle: idle}}
		b := &batch{}
		recordUnplaced(b, c)
		return b.jobs
	}
	if got := run(nil); len(got) != 0 {
		t.Fatalf("with the idle groups unknown: wrote %v", got)
	}
	got := run(map[plan.GroupKey]*policies.IdleView{
		worker: {Group: worker, Count: 5, Live: 2, UnplacedSince: t0},
		eval:   {Group: eval, Count: 3, Live: 1},
	})
	want := map[store.JobID]store.JobRecord{
		jobC:  {FirstSeen: t0, QueuedAt: t0, Unplaced: map[string]time.Time{"worker": t0, "eval": now}},
		other: {FirstSeen: t0, QueuedAt: t0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("writes (-want +got):\n%s", diff)
	}
	if !recorded[jobC].Unplaced["worker"].Equal(t0) || len(recorded[jobC].Unplaced) != 1 {
		t.Fatalf("the view's record changed in place: %+v", recorded[jobC])
	}
	// Placed: dropped; unchanged records are not written.
	got = run(map[plan.GroupKey]*policies.IdleView{worker: {Group: worker, Count: 2, Live: 2, UnplacedSince: t0}})
	want = map[store.JobID]store.JobRecord{jobC: {FirstSeen: t0, QueuedAt: t0}, other: {FirstSeen: t0, QueuedAt: t0}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("writes (-want +got):\n%s", diff)
	}
}
