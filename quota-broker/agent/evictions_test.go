package agent

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/store"
	"github.com/hashicorp/go-hclog"
)

// budgetQuota is claimQuota with an eviction budget on C, the victims'
// node (DESIGN L14), wide enough to refuse none of the claim's stops.
var budgetQuota = strings.Replace(claimQuota, "quota \"C\" {\n", "quota \"C\" {\n    max_evict  = { gpus = 16, per = \"10m\" }\n", 1)

// stoppedGPUs sums the GPUs of workspace-c's allocations the cycle c
// stopped under L5.2.
func stoppedGPUs(c *cycleState) int {
	n := 0
	for _, s := range c.out.Preempted {
		if s.Namespace == "workspace-c" && s.Rule == plan.RuleChild {
			n += s.GPUs
		}
	}
	return n
}

// DESIGN L14, issue 19 item 3: the leader counts the victim stops it
// made in the snapshots of its next cycles (snapshot `evictions`, by the
// victim's quota node), a successor counts its predecessor's from the
// store's history, and both drop them once they are older than the
// tree's largest max_evict per.
func TestSuccessorCountsItsPredecessorsEvictions(t *testing.T) {
	if !strings.Contains(budgetQuota, "max_evict") {
		t.Fatal("no budget in the test's tree")
	}
	f := newFakeNomad(t)
	f.dynamic = true
	st := store.NewMemory()
	ctx := context.Background()
	clock := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	log := hclog.NewNullLogger()

	first, kill := cycleAgent(t, f, st, budgetQuota, &clock, log)
	lock1, err := st.Lock(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	first.takeLock(lock1)
	c1 := first.runCycle(ctx, &cycleRun{})
	if c1.run.step != "account" || len(c1.out.Errors) != 0 {
		t.Fatalf("the first broker's cycle stopped in step %q, errors %v", c1.run.step, c1.out.Errors)
	}
	if c1.run.snap.Evictions != nil {
		t.Errorf("the first cycle's evictions = %+v, want none (nothing stopped yet)", c1.run.snap.Evictions)
	}
	gpus := stoppedGPUs(c1)
	if gpus == 0 {
		t.Fatalf("the first cycle stopped nothing of workspace-c under L5.2: %+v", c1.out.Preempted)
	}
	want := []plan.Eviction{{Quota: "C", GPUs: gpus, Time: clock}}
	for _, s := range c1.out.Preempted[1:] {
		if !s.Time.Equal(clock) {
			t.Fatalf("a stop at %s, want all at the test's clock %s", s.Time, clock)
		}
	}
	// One eviction per stop: the GPUs of each stopped allocation.
	var perStop []plan.Eviction
	for _, s := range c1.out.Preempted {
		perStop = append(perStop, plan.Eviction{Quota: "C", GPUs: s.GPUs, Time: clock})
	}
	c1b := first.runCycle(ctx, &cycleRun{})
	if c1b.run.snap == nil {
		first.mu.Lock()
		why := first.why
		first.mu.Unlock()
		t.Fatalf("the leader's next cycle stopped in step %q: %s", c1b.run.step, why)
	}
	if diff := cmp.Diff(perStop, c1b.run.snap.Evictions); diff != "" {
		t.Errorf("the leader's next snapshot's evictions (-want +got):\n%s", diff)
	}
	if got := sumGPUs(c1b.run.snap.Evictions); got != want[0].GPUs {
		t.Errorf("evicted GPUs = %d, want %d", got, want[0].GPUs)
	}
	kill()
	if err := lock1.Release(ctx); err != nil {
		t.Fatal(err)
	}

	clock = clock.Add(10 * time.Second)
	second, kill2 := cycleAgent(t, f, st, budgetQuota, &clock, log)
	if second.evicted != nil {
		t.Fatalf("a new agent keeps evictions before its first cycle: %+v", second.evicted)
	}
	lock2, err := st.Lock(ctx, "second")
	if err != nil {
		t.Fatal(err)
	}
	second.takeLock(lock2)
	c2 := second.runCycle(ctx, &cycleRun{})
	if c2.run.step != "account" {
		t.Fatalf("the successor's cycle stopped in step %q", c2.run.step)
	}
	if diff := cmp.Diff(perStop, c2.run.snap.Evictions); diff != "" {
		t.Errorf("the successor's snapshot's evictions, its predecessor's stops (-want +got):\n%s", diff)
	}
	// Past the window (10m from the stops), a third broker counts none.
	kill2()
	if err := lock2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	clock = want[0].Time.Add(10 * time.Minute)
	third, _ := cycleAgent(t, f, st, budgetQuota, &clock, log)
	lock3, err := st.Lock(ctx, "third")
	if err != nil {
		t.Fatal(err)
	}
	third.takeLock(lock3)
	c3 := third.runCycle(ctx, &cycleRun{})
	if c3.run.snap == nil || c3.run.snap.Evictions != nil || third.evicted != nil {
		t.Errorf("10m after the stops: snapshot %+v, kept %+v, want no evictions", c3.run.snap, third.evicted)
	}
}

func sumGPUs(es []plan.Eviction) int {
	n := 0
	for _, e := range es {
		n += e.GPUs
	}
	return n
}

// Without a budget in the tree the broker keeps no evictions (its history
// still records the stops): nothing grows without bound.
func TestNoBudgetKeepsNoEvictions(t *testing.T) {
	f := newFakeNomad(t)
	f.dynamic = true
	st := store.NewMemory()
	ctx := context.Background()
	clock := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	a, _ := cycleAgent(t, f, st, claimQuota, &clock, hclog.NewNullLogger())
	lock, err := st.Lock(ctx, "only")
	if err != nil {
		t.Fatal(err)
	}
	a.takeLock(lock)
	c1 := a.runCycle(ctx, &cycleRun{})
	if stoppedGPUs(c1) == 0 {
		t.Fatalf("the cycle stopped nothing: %+v", c1.out.Preempted)
	}
	c2 := a.runCycle(ctx, &cycleRun{})
	if a.evicted != nil || c2.run.snap.Evictions != nil {
		t.Errorf("kept %+v, snapshot %+v, want none", a.evicted, c2.run.snap.Evictions)
	}
	ps, err := st.Preemptions(ctx)
	if err != nil || len(ps) != len(c1.out.Preempted) {
		t.Errorf("history: %d preemptions (%v), want %d", len(ps), err, len(c1.out.Preempted))
	}
}

// A budget given while the broker leads counts the stops within its whole
// window, those made before it too: the tree change that widens the
// window reads the history again.
func TestNewBudgetCountsEarlierStops(t *testing.T) {
	f := newFakeNomad(t)
	f.dynamic = true
	st := store.NewMemory()
	ctx := context.Background()
	clock := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	a, _ := cycleAgent(t, f, st, claimQuota, &clock, hclog.NewNullLogger())
	lock, err := st.Lock(ctx, "only")
	if err != nil {
		t.Fatal(err)
	}
	a.takeLock(lock)
	c1 := a.runCycle(ctx, &cycleRun{})
	if stoppedGPUs(c1) == 0 {
		t.Fatalf("the cycle stopped nothing: %+v", c1.out.Preempted)
	}
	var want []plan.Eviction
	for _, s := range c1.out.Preempted {
		want = append(want, plan.Eviction{Quota: "C", GPUs: s.GPUs, Time: clock})
	}
	// The quota file gains the budget (a new modification time: the
	// agent reloads it).
	if err := os.WriteFile(a.cfg.QuotaFile, []byte(budgetQuota), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(a.cfg.QuotaFile, later, later); err != nil {
		t.Fatal(err)
	}
	c2 := a.runCycle(ctx, &cycleRun{})
	if c2.run.snap == nil || c2.tree.Find("C").MaxEvict == nil {
		t.Fatalf("the next cycle (step %q) does not plan on the tree with the budget", c2.run.step)
	}
	if diff := cmp.Diff(want, c2.run.snap.Evictions); diff != "" {
		t.Errorf("evictions after the budget was given (-want +got):\n%s", diff)
	}
}

// evictionsOf counts the history's stops of the rules DESIGN L14 names by
// the victim's node of the tree of now; one recorded after now (a
// predecessor's clock ahead) counts as made now.
func TestEvictionsOfHistory(t *testing.T) {
	root := &quota.Node{Name: "R", GPUs: quota.Plain(8), Namespaces: []string{"ns-r"},
		MaxEvict: &quota.EvictBudget{GPUs: 4, Per: time.Hour},
		Children: []*quota.Node{{Name: "C", GPUs: quota.Plain(4), Namespaces: []string{"ns-c"}}}}
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	ps := []store.Preemption{
		{At: now.Add(-2 * time.Hour), Alloc: "a0", Namespace: "ns-c", GPUs: 1, Rule: "L5.1"},
		{At: now.Add(-time.Minute), Alloc: "a1", Namespace: "ns-c", GPUs: 2, Rule: "L14.fair"},
		{At: now.Add(-time.Minute), Alloc: "a2", Namespace: "ns-c", GPUs: 8, Rule: "L10.end"},
		{At: now.Add(-time.Minute), Alloc: "a3", Namespace: "gone", GPUs: 8, Rule: "L5.1"},
		{At: now.Add(2 * time.Second), Alloc: "a4", Namespace: "ns-r", GPUs: 4, Rule: "L10.drain"},
	}
	want := []plan.Eviction{{Quota: "C", GPUs: 1, Time: now.Add(-2 * time.Hour)}, {Quota: "C", GPUs: 2, Time: now.Add(-time.Minute)},
		{Quota: "R", GPUs: 4, Time: now}}
	got := evictionsOf(root, ps, now)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("evictionsOf (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[1:], plan.RecentEvictions(root, got, now)); diff != "" {
		t.Errorf("within the hour (-want +got):\n%s", diff)
	}
}
