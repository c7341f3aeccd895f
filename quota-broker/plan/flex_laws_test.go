package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// brief is an action without its reason, for comparison.
type brief struct {
	Action      ActionKind
	Alloc       string
	Job         string
	Count, GPUs int
	Rule        Rule
	Reservation string
}

func briefs(p *Plan) []brief {
	out := []brief{}
	for _, a := range p.Actions {
		out = append(out, brief{Action: a.Action, Alloc: a.Alloc, Job: a.Job, Count: a.Count, GPUs: a.GPUs,
			Rule: a.Rule, Reservation: a.Reservation})
	}
	return out
}

func flexAlloc(maxRun time.Duration, admittedAgo time.Duration, kill time.Duration) allocOpt {
	return func(a *Allocation) {
		a.MaxRun, a.AdmittedAt, a.KillTimeout = maxRun, t0.Add(-admittedAgo), kill
	}
}

func pQueued(ago time.Duration) pendOpt { return func(p *Pending) { p.QueuedAt = t0.Add(-ago) } }

// TestL11GangWaitsWithTooFewFreeGPUs: a 4x8 flex request, 24 GPUs free and
// no idle or debt allocation to reclaim: it waits whole, never partial.
func TestL11GangWaitsWithTooFewFreeGPUs(t *testing.T) {
	s := newSnap(referenceTree()).nodes(4, 8, h100).
		alloc("c1", "workspace-c", "keep", "node-04", 8).
		pending("workspace-b", "gang", 4, 8, pType(JobBatch), pFlex(24*time.Hour, 2*time.Hour)).build()
	p := mustPlan(t, s)
	want := []brief{{Action: ActionWait, Job: "gang", Count: 4, GPUs: 8, Rule: RuleFlex}}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("actions (-want +got):\n%s", d)
	}
	if u := usageOf(t, p, "Quota1.1"); u.Used != 0 {
		t.Errorf("Quota1.1 used = %d, want 0 (nothing admitted in part)", u.Used)
	}
}

// TestL11GangReclaimsIdleAndIsAdmittedWhole: with an idle allocation on the
// fourth node the request reclaims it (L5 step 1) and is admitted whole.
func TestL11GangReclaimsIdleAndIsAdmittedWhole(t *testing.T) {
	s := newSnap(referenceTree()).nodes(4, 8, h100).
		alloc("i1", "workspace-c", "borrow", "node-04", 8, idle).
		pending("workspace-b", "gang", 4, 8, pType(JobBatch), pFlex(24*time.Hour, 2*time.Hour)).build()
	p := mustPlan(t, s)
	want := []brief{
		{Action: ActionStop, Alloc: "i1", Job: "borrow", GPUs: 8, Rule: RuleIdleDebt},
		{Action: ActionAdmit, Job: "gang", Count: 4, GPUs: 8, Rule: RuleAdmission},
	}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("actions (-want +got):\n%s", d)
	}
}

// TestL11GangAdmittedWhen32Fit: 32 free GPUs admit all four at once.
func TestL11GangAdmittedWhen32Fit(t *testing.T) {
	s := newSnap(referenceTree()).nodes(4, 8, h100).
		pending("workspace-b", "gang", 4, 8, pType(JobBatch), pFlex(24*time.Hour, 2*time.Hour)).build()
	p := mustPlan(t, s)
	admits := actionsOf(p, ActionAdmit)
	if len(admits) != 1 || admits[0].Count != 4 {
		t.Fatalf("admits = %+v, want the 4 allocations at once", admits)
	}
	if d := cmp.Diff([]string{"node-01", "node-02", "node-03", "node-04"}, admits[0].Nodes); d != "" {
		t.Errorf("nodes (-want +got):\n%s", d)
	}
}

// TestL11MaxRunStopsAtAdmittedPlusMaxRunLessKillTimeout: admitted 2h ago
// with max_run 2h and kill_timeout 30s, the request is stopped (a job
// stop) from admitted + 2h - 30s, not a moment before; before it, WakeAt
// names that instant.
func TestL11MaxRunStopsAtAdmittedPlusMaxRunLessKillTimeout(t *testing.T) {
	admitted := t0.Add(-2 * time.Hour)
	stopAt := admitted.Add(2*time.Hour - 30*time.Second)
	build := func(now time.Time) *Snapshot {
		s := newSnap(referenceTree()).nodes(2, 8, h100).
			alloc("f1", "workspace-b", "flex", "node-01", 8, flexAlloc(2*time.Hour, 2*time.Hour, 30*time.Second)).
			alloc("f2", "workspace-b", "flex", "node-02", 8, flexAlloc(2*time.Hour, 2*time.Hour, 10*time.Second)).build()
		s.Time = now
		return s
	}
	p := mustPlan(t, build(stopAt.Add(-time.Nanosecond)))
	if len(p.Actions) != 0 || !p.WakeAt.Equal(stopAt) {
		t.Fatalf("before: actions %+v, wake_at %s; want none and %s", p.Actions, p.WakeAt, stopAt)
	}
	p = mustPlan(t, build(stopAt))
	want := []brief{{Action: ActionStopJob, Job: "flex", GPUs: 16, Rule: RuleFlexMaxRun}}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("at admitted + max_run - kill_timeout (-want +got):\n%s", d)
	}
	if u := usageOf(t, p, "Quota1.1"); u.NonIdle != 0 {
		t.Errorf("Quota1.1 nonidle after the stop = %d, want 0", u.NonIdle)
	}
}

// TestL11ExpiresAtQueuedPlusMaxWait: max_wait counts from queued_at (the
// last requeue), not from the first submission.
func TestL11ExpiresAtQueuedPlusMaxWait(t *testing.T) {
	build := func(queuedAgo time.Duration) *Snapshot {
		return newSnap(referenceTree()).nodes(1, 8, h100).
			alloc("c1", "workspace-c", "keep", "node-01", 8).
			pending("workspace-b", "flex", 1, 8, pFlex(time.Hour, time.Hour), pSubmitted(48*time.Hour), pQueued(queuedAgo)).build()
	}
	p := mustPlan(t, build(time.Hour))
	if d := cmp.Diff([]brief{{Action: ActionWait, Job: "flex", Count: 1, GPUs: 8, Rule: RuleFlex}}, briefs(p)); d != "" {
		t.Fatalf("at queued + max_wait exactly (-want +got):\n%s", d)
	}
	if want := t0.Add(time.Nanosecond); !p.WakeAt.Equal(want) {
		t.Errorf("wake_at = %s, want %s", p.WakeAt, want)
	}
	p = mustPlan(t, build(time.Hour+time.Second))
	if d := cmp.Diff([]brief{{Action: ActionExpire, Job: "flex", Count: 1, GPUs: 8, Rule: RuleFlexExpire}}, briefs(p)); d != "" {
		t.Fatalf("past queued + max_wait (-want +got):\n%s", d)
	}
}

// TestL11SettleRequeuesABrokenGang: an admitted 2x8 request with one
// allocation live and one pending is left to Nomad until admitted +
// settle, then suspended whole and queued again; its pending group is not
// decided in that plan.
func TestL11SettleRequeuesABrokenGang(t *testing.T) {
	build := func(admittedAgo time.Duration) *Snapshot {
		return newSnap(referenceTree()).nodes(2, 8, h100).
			alloc("f1", "workspace-b", "gang", "node-01", 8, flexAlloc(2*time.Hour, admittedAgo, 5*time.Second)).
			pending("workspace-b", "gang", 1, 8, pType(JobBatch), pGroup("worker"), pFlex(24*time.Hour, 2*time.Hour)).build()
	}
	p := mustPlan(t, build(29*time.Second))
	if len(p.Actions) != 0 {
		t.Fatalf("before settle: actions %+v, want none", p.Actions)
	}
	if want := t0.Add(time.Second); !p.WakeAt.Equal(want) {
		t.Errorf("before settle: wake_at = %s, want %s (admitted + 30s)", p.WakeAt, want)
	}
	p = mustPlan(t, build(30*time.Second))
	want := []brief{{Action: ActionSuspend, Job: "gang", GPUs: 8, Rule: RuleFlexSettle}}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("at settle (-want +got):\n%s", d)
	}
}

// TestL11FlexServicePreemptedWhole: a flex service request is one unit of
// preemption (L5): child-level preemption for workspace-a (L5 step 2)
// needs 8 GPUs of one node and stops all three of its allocations.
func TestL11FlexServicePreemptedWhole(t *testing.T) {
	s := newSnap(referenceTree()).nodes(3, 8, h100).
		alloc("s1", "workspace-c", "svc", "node-01", 8, jobType(JobService), flexAlloc(4*time.Hour, time.Hour, 5*time.Second)).
		alloc("s2", "workspace-c", "svc", "node-02", 8, jobType(JobService), flexAlloc(4*time.Hour, time.Hour, 5*time.Second)).
		alloc("s3", "workspace-c", "svc", "node-03", 8, jobType(JobService), flexAlloc(4*time.Hour, time.Hour, 5*time.Second)).
		pending("workspace-a", "one", 1, 8, pPriority(80)).build()
	p := mustPlan(t, s)
	if d := cmp.Diff([]string{"s1", "s2", "s3"}, stops(p), cmpopts.SortSlices(func(a, b string) bool { return a < b })); d != "" {
		t.Fatalf("stops (-want +got):\n%s", d)
	}
}
