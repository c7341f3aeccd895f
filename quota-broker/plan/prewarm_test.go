package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// prewarmOf returns a pre-warm of workspace-b/infer/web: count
// allocations of gpus GPUs at boundary at, held until at + 1m (the
// policy's evaluation_interval) + 30s (settle).
func prewarmOf(count, gpus int, at time.Time) Prewarm {
	return Prewarm{Namespace: "workspace-b", Job: "infer", Group: "web", Type: JobService, Priority: 70,
		GPUs: gpus, Datacenters: []string{"dc1"}, NodePool: "default", At: at, Count: count,
		Until: at.Add(time.Minute + 30*time.Second)}
}

// holdsOf turns a plan's hold actions into the snapshot's holds, as the
// adapter writes them to the store.
func holdsOf(p *Plan) []Hold {
	var out []Hold
	for _, a := range actionsOf(p, ActionHold) {
		out = append(out, Hold{For: HoldOwner{Group: a.For}, Node: a.Node, GPUIDs: a.GPUIDs, Until: a.Until})
	}
	return out
}

// TestL5PrewarmStopsAtBoundaryLessKillTimeoutAndMargin: victims of a
// pre-warm (idle allocations, kill_timeout 30s) are stopped at the first
// plan at or after boundary - (30s + drain_margin 60s), not before, by
// rule L5.prewarm and for the group; their GPUs are held for the group
// until boundary + evaluation_interval + settle, and the plan wakes then.
func TestL5PrewarmStopsAtBoundaryLessKillTimeoutAndMargin(t *testing.T) {
	at := t0.Add(90 * time.Second)
	build := func(now time.Time) *Snapshot {
		b := newSnap(referenceTree()).nodes(3, 8, h100)
		for i := 1; i <= 3; i++ {
			b.alloc(fmt.Sprintf("i%d", i), "workspace-c", fmt.Sprintf("idle%d", i), nodeID(i), 8, idle,
				killTimeout(30*time.Second), started(time.Duration(i)*time.Hour))
		}
		s := b.build()
		s.Prewarm = []Prewarm{prewarmOf(2, 8, at)}
		s.Time = now
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	p := mustPlan(t, build(t0.Add(-time.Nanosecond)))
	if len(p.Actions) != 0 || !p.WakeAt.Equal(t0) {
		t.Fatalf("before boundary - 90s: actions %+v, wake_at %s; want none and %s", p.Actions, p.WakeAt, t0)
	}
	p = mustPlan(t, build(t0))
	want := []brief{
		{Action: ActionStop, Alloc: "i1", Job: "idle1", GPUs: 8, Rule: RulePrewarm},
		{Action: ActionHold, Job: "infer", GPUs: 8, Rule: RulePrewarm},
		{Action: ActionStop, Alloc: "i2", Job: "idle2", GPUs: 8, Rule: RulePrewarm},
		{Action: ActionHold, Job: "infer", GPUs: 8, Rule: RulePrewarm},
	}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("at boundary - 90s (-want +got):\n%s", d)
	}
	until := at.Add(90 * time.Second)
	for _, a := range p.Actions {
		if a.For != key("workspace-b/infer/web") {
			t.Errorf("%s %s: for %v, want the pre-warmed group", a.Action, a.Alloc, a.For)
		}
		if a.Action == ActionHold && !a.Until.Equal(until) {
			t.Errorf("hold on %s until %s, want %s", a.Node, a.Until, until)
		}
	}
	if !p.WakeAt.Equal(until) {
		t.Errorf("wake_at %s, want the holds' end %s", p.WakeAt, until)
	}
}

// TestL5PrewarmHeldGPUsGoToTheGroup: the GPUs held for a pre-warm are no
// room for an idle job nor for the victims' replacements (L7), and the
// group's allocations take them once the Autoscaler raises its count.
func TestL5PrewarmHeldGPUsGoToTheGroup(t *testing.T) {
	at := t0.Add(30 * time.Second)
	s := newSnap(referenceTree()).nodes(2, 8, h100).
		alloc("i1", "workspace-c", "idle1", "node-01", 8, idle, killTimeout(30*time.Second)).
		alloc("i2", "workspace-c", "train", "node-02", 8, killTimeout(30*time.Second)).
		build()
	s.Settings.DebtGrace = 0
	s.Prewarm = []Prewarm{prewarmOf(1, 8, at)}
	p := mustPlan(t, s)
	want := []brief{
		{Action: ActionStop, Alloc: "i1", Job: "idle1", GPUs: 8, Rule: RulePrewarm},
		{Action: ActionHold, Job: "infer", GPUs: 8, Rule: RulePrewarm},
	}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("pre-warm (-want +got):\n%s", d)
	}
	// The next snapshot: i1 is gone, its GPUs held; its replacement (idle)
	// and an idle borrower find no room; the group's scale-up (pending at
	// the boundary) takes the held GPUs.
	s.Allocations = s.Allocations[1:]
	s.Holds = holdsOf(p)
	s.Pending = []Pending{
		{Namespace: "workspace-c", Job: "idle1", Group: "worker", Type: JobBatch, Priority: 50, Count: 1, GPUs: 8,
			NodePool: "default", Idle: true, SubmittedAt: t0},
		{Namespace: "workspace-c", Job: "borrow", Group: "g", Type: JobBatch, Priority: 50, Count: 1, GPUs: 8,
			NodePool: "default", Idle: true, SubmittedAt: t0},
	}
	p = mustPlan(t, s)
	want = []brief{
		{Action: ActionWait, Job: "borrow", Count: 1, GPUs: 8, Rule: RuleAdmission},
		{Action: ActionWait, Job: "idle1", Count: 1, GPUs: 8, Rule: RuleAdmission},
	}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("idle jobs and replacements on held GPUs (-want +got):\n%s", d)
	}
	s.Time = at
	s.Prewarm = nil // the boundary has passed: the adapter lists the next one
	s.Pending = append(s.Pending, Pending{Namespace: "workspace-b", Job: "infer", Group: "web", Type: JobService,
		Priority: 70, Count: 1, GPUs: 8, Datacenters: []string{"dc1"}, NodePool: "default", SubmittedAt: t0})
	p = mustPlan(t, s)
	a := actionsOf(p, ActionAdmit)
	if len(a) != 1 || a[0].Job != "infer" || !cmp.Equal(a[0].Nodes, []string{"node-01"}) || len(stops(p)) != 0 {
		t.Fatalf("at the boundary: actions %+v, want infer admitted on node-01, nothing stopped", p.Actions)
	}
}

// TestL5PrewarmReplacementOfNonIdleVictimWaits: a non-idle victim's
// replacement (here a batch job of workspace-c, stopped by L5 step 2 for
// the group) finds the freed GPUs held for the group (L7).
func TestL5PrewarmReplacementOfNonIdleVictimWaits(t *testing.T) {
	at := t0.Add(30 * time.Second)
	tree := referenceTree()
	s := newSnap(tree).nodes(1, 8, h100).
		alloc("c1", "workspace-c", "train", "node-01", 8, killTimeout(30*time.Second)).build()
	// A pre-warm of workspace-a (Quota1, child-level preemption).
	w := prewarmOf(1, 8, at)
	w.Namespace = "workspace-a"
	s.Prewarm = []Prewarm{w}
	p := mustPlan(t, s)
	want := []brief{
		{Action: ActionStop, Alloc: "c1", Job: "train", GPUs: 8, Rule: RulePrewarm},
		{Action: ActionHold, Job: "infer", GPUs: 8, Rule: RulePrewarm},
	}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("pre-warm by child-level preemption (-want +got):\n%s", d)
	}
	s.Allocations = nil
	s.Holds = holdsOf(p)
	s.Pending = []Pending{{Namespace: "workspace-c", Job: "train", Group: "worker", Type: JobBatch, Priority: 50,
		Count: 1, GPUs: 8, NodePool: "default", SubmittedAt: t0}}
	p = mustPlan(t, s)
	if len(actionsOf(p, ActionAdmit)) != 0 || len(actionsOf(p, ActionWait)) != 1 {
		t.Fatalf("replacement: actions %+v, want it waiting", p.Actions)
	}
}

// TestL5PrewarmNotEntitledNoPrewarm: a group whose added allocations its
// quota node cannot hold now (L3) gets no pre-warm, and a warning says why.
func TestL5PrewarmNotEntitledNoPrewarm(t *testing.T) {
	at := t0.Add(10 * time.Minute)
	b := newSnap(referenceTree()).nodes(8, 8, h100)
	for i := 1; i <= 5; i++ {
		b.alloc(fmt.Sprintf("b%d", i), "workspace-b", "serve", nodeID(i), 8)
	}
	b.alloc("i6", "workspace-c", "idle6", "node-06", 8, idle)
	s := b.build()
	s.Prewarm = []Prewarm{prewarmOf(2, 8, at)} // 40 + 16 > 48 of Quota1.1
	p := mustPlan(t, s)
	if len(p.Actions) != 0 {
		t.Fatalf("actions %+v, want none", p.Actions)
	}
	want := "pre-warm of workspace-b/infer/web: 2 allocations of 8 GPUs at 2026-12-01T08:10:00Z not entitled now (L3): " +
		"Quota1.1: 40 of 48 GPUs in use; 8 more needed for 16 asked; no pre-warm"
	if d := cmp.Diff([]string{want}, prewarmWarnings(p)); d != "" {
		t.Fatalf("warnings (-want +got):\n%s", d)
	}
	// One allocation (40 + 8 = 48) is entitled: held at once on a free node.
	s.Prewarm = []Prewarm{prewarmOf(1, 8, at)}
	p = mustPlan(t, s)
	if h := actionsOf(p, ActionHold); len(h) != 1 || h[0].Node != "node-07" || len(prewarmWarnings(p)) != 0 {
		t.Fatalf("actions %+v, warnings %q; want node-07 held", p.Actions, p.Warnings)
	}
}

// prewarmWarnings returns the plan's warnings about pre-warms (the small
// test clusters also get L1 warnings about the tree).
func prewarmWarnings(p *Plan) []string {
	out := []string{}
	for _, w := range p.Warnings {
		if strings.Contains(w.Message, "pre-warm") {
			out = append(out, w.Message)
		}
	}
	return out
}

// TestL5PrewarmFreeGPUsHeldAtOnce: well before boundary - (kill_timeout +
// drain_margin), free GPUs are held at once (bin-packing: whole free
// nodes, and the free part of the set whose victim is not due yet, GPU by
// GPU, DESIGN L10), nothing is stopped, and the plan wakes at the first
// instant a victim may be stopped for the rest.
func TestL5PrewarmFreeGPUsHeldAtOnce(t *testing.T) {
	at := t0.Add(30 * time.Minute)
	s := newSnap(referenceTree()).nodes(3, 8, h100).
		alloc("c1", "workspace-c", "small", "node-01", 4, idle, killTimeout(2*time.Minute)).build()
	s.Prewarm = []Prewarm{prewarmOf(3, 8, at)}
	p := mustPlan(t, s)
	holds := actionsOf(p, ActionHold)
	if len(holds) != 3 || holds[0].Node != "node-02" || holds[1].Node != "node-03" ||
		holds[2].Node != "node-01" || holds[2].GPUs != 4 || len(stops(p)) != 0 {
		t.Fatalf("actions %+v, want node-02, node-03 and node-01's 4 free GPUs held, nothing stopped", p.Actions)
	}
	early := at.Add(-3 * time.Minute) // 2m kill_timeout + 60s drain_margin
	if !p.WakeAt.Equal(early) {
		t.Errorf("wake_at %s, want %s", p.WakeAt, early)
	}
	// The next plan keeps the holds and holds nothing more before then.
	s.Holds = holdsOf(p)
	s.Time = early.Add(-time.Second)
	p = mustPlan(t, s)
	if len(p.Actions) != 0 || !p.WakeAt.Equal(early) {
		t.Fatalf("with the holds: actions %+v, wake_at %s; want none and %s", p.Actions, p.WakeAt, early)
	}
	// At the instant, the idle allocation on node-01 is stopped and node-01 held.
	s.Time = early
	p = mustPlan(t, s)
	want := []brief{
		{Action: ActionStop, Alloc: "c1", Job: "small", GPUs: 4, Rule: RulePrewarm},
		{Action: ActionHold, Job: "infer", GPUs: 4, Rule: RulePrewarm},
	}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("at boundary - 3m (-want +got):\n%s", d)
	}
	if until := at.Add(90 * time.Second); !p.WakeAt.Equal(until) {
		t.Errorf("wake_at %s, want the holds' end %s", p.WakeAt, until)
	}
}

// TestL5PrewarmWakeAtHorizon: a boundary beyond drain_horizon is not
// pre-warmed yet; the plan wakes when it comes within it.
func TestL5PrewarmWakeAtHorizon(t *testing.T) {
	at := t0.Add(2 * time.Hour)
	s := newSnap(referenceTree()).nodes(1, 8, h100).build()
	s.Prewarm = []Prewarm{prewarmOf(1, 8, at)}
	p := mustPlan(t, s)
	if len(p.Actions) != 0 || !p.WakeAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("actions %+v, wake_at %s; want none and %s", p.Actions, p.WakeAt, t0.Add(time.Hour))
	}
}

// TestPrewarmCheck: each bad field of a pre-warm entry is named with its
// value, and only that entry is left out.
func TestPrewarmCheck(t *testing.T) {
	at := t0.Add(time.Minute)
	cases := []struct {
		change func(*Prewarm)
		want   string
	}{
		{func(w *Prewarm) { w.Job = "" }, "prewarm[1].job: "},
		{func(w *Prewarm) { w.Type = JobSystem }, `prewarm[1].type: "system": only service and batch groups are pre-warmed`},
		{func(w *Prewarm) { w.Priority = 0 }, "prewarm[1].priority: 0 is outside 1-100"},
		{func(w *Prewarm) { w.GPUs = 0 }, "prewarm[1].gpus: must be at least 1, not 0"},
		{func(w *Prewarm) { w.Count = 0 }, "prewarm[1].count: must be in 1-"},
		{func(w *Prewarm) { w.At = time.Time{} }, "prewarm[1].at: missing"},
		{func(w *Prewarm) { w.Until = w.At }, "prewarm[1].until: 2026-12-01T08:01:00Z is not after at 2026-12-01T08:01:00Z"},
		{func(w *Prewarm) { w.Group = "web" }, `prewarm[1]: group "workspace-b/infer/web" is listed twice (also prewarm[0])`},
	}
	for _, tc := range cases {
		s := newSnap(referenceTree()).nodes(1, 8, h100).build()
		w := prewarmOf(1, 8, at)
		w.Group = "other"
		tc.change(&w)
		s.Prewarm = []Prewarm{prewarmOf(1, 8, at), w}
		fatal, items := s.Check()
		if fatal != nil || len(items) != 1 || !strings.HasPrefix(items[0].Error(), tc.want) {
			t.Errorf("Check = %v, %v; want one fault starting %q", fatal, items, tc.want)
			continue
		}
		if u := s.Without(items); len(u.Prewarm) != 1 || u.Prewarm[0].Group != "web" {
			t.Errorf("Without: %+v, want prewarm[0] only", u.Prewarm)
		}
	}
}

// TestL5PrewarmStopsOtherJobsOnHeldGPUsNotItsOwn: an allocation another
// job placed on GPUs held for the group is stopped at once (rule
// L5.prewarm, for the group); the group's own allocation on them is not.
func TestL5PrewarmStopsOtherJobsOnHeldGPUsNotItsOwn(t *testing.T) {
	at := t0.Add(30 * time.Minute)
	s := newSnap(referenceTree()).nodes(2, 8, h100).
		alloc("x1", "workspace-c", "intruder", "node-01", 8, started(time.Minute)).
		alloc("w1", "workspace-b", "infer", "node-02", 8, jobType(JobService)).build()
	s.Holds = []Hold{
		{For: HoldOwner{Group: key("workspace-b/infer/web")}, Node: "node-01", GPUIDs: s.Allocations[0].GPUIDs, Until: at.Add(time.Minute)},
		{For: HoldOwner{Group: key("workspace-b/infer/web")}, Node: "node-02", GPUIDs: s.Allocations[1].GPUIDs, Until: at.Add(time.Minute)},
	}
	s.Prewarm = []Prewarm{prewarmOf(2, 8, at)}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	p := mustPlan(t, s)
	want := []brief{{Action: ActionStop, Alloc: "x1", Job: "intruder", GPUs: 8, Rule: RulePrewarm}}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	if a := p.Actions[0]; a.For != key("workspace-b/infer/web") ||
		a.Reason != "on GPUs held for pre-warm of workspace-b/infer/web, at 2026-12-01T08:30:00Z" {
		t.Errorf("stop for %v, reason %q", a.For, a.Reason)
	}
}

// TestL5PrewarmHeldGPUsUsedByTheGroupMakeNoRoom: when the group takes the
// GPUs held for it before the boundary (a scale-up that came early, e.g.
// a metric-driven one) and the boundary still adds an allocation, the
// used held GPUs do not count as held room: the pre-warm places the
// allocation again (here on the idle allocation's node, stopped at
// boundary - (30s + drain_margin)).
func TestL5PrewarmHeldGPUsUsedByTheGroupMakeNoRoom(t *testing.T) {
	at := t0.Add(90 * time.Second)
	s := newSnap(referenceTree()).nodes(2, 8, h100).
		alloc("w1", "workspace-b", "infer", "node-01", 8, killTimeout(5*time.Second)).
		alloc("i2", "workspace-c", "idle2", "node-02", 8, idle, killTimeout(30*time.Second)).
		build()
	s.Allocations[0].Group = "web"
	ids := slices.Clone(s.Allocations[0].GPUIDs)
	s.Holds = []Hold{{For: HoldOwner{Group: key("workspace-b/infer/web")}, Node: "node-01", GPUIDs: ids, Until: at.Add(90 * time.Second)}}
	s.Prewarm = []Prewarm{prewarmOf(1, 8, at)}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	p := mustPlan(t, s)
	want := []brief{
		{Action: ActionStop, Alloc: "i2", Job: "idle2", GPUs: 8, Rule: RulePrewarm},
		{Action: ActionHold, Job: "infer", GPUs: 8, Rule: RulePrewarm},
	}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("pre-warm with its held GPUs in use (-want +got):\n%s", d)
	}
	if h := actionsOf(p, ActionHold); h[0].Node != "node-02" {
		t.Errorf("held %s, want node-02", h[0].Node)
	}
}
