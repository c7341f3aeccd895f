package plan_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/snapshot"
)

// The repro snapshots of issue 16 about covers and holds (testdata/repro,
// copied from the shared repro folder): each plans as DESIGN L10 (Cover;
// Drain and holds) and L3, L5 pre-warm say.

// holdsRepro decodes testdata/repro/name and plans it.
func holdsRepro(t *testing.T, name string) (*plan.Snapshot, *plan.Plan) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "repro", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := snapshot.Decode(f)
	if err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	p, err := plan.Compute(s)
	if err != nil {
		t.Fatalf("Compute: %v", err)
	}
	return s, p
}

// reproAct is what the repro tests compare of an action.
type reproAct struct {
	Action      plan.ActionKind
	Rule        plan.Rule
	Alloc, Job  string
	Nodes       []string // admit: Nodes; stop and hold: Node
	GPUIDs      []string
	For         string
	Reservation string
}

func reproActs(p *plan.Plan) []reproAct {
	var out []reproAct
	for _, a := range p.Actions {
		r := reproAct{Action: a.Action, Rule: a.Rule, Alloc: a.Alloc, Job: a.Job, Nodes: a.Nodes, GPUIDs: a.GPUIDs, Reservation: a.Reservation}
		if a.Node != "" {
			r.Nodes = []string{a.Node}
		}
		if !a.For.IsZero() {
			r.For = a.For.String()
		}
		out = append(out, r)
	}
	return out
}

func wantActs(t *testing.T, p *plan.Plan, want []reproAct) {
	t.Helper()
	if d := cmp.Diff(want, reproActs(p)); d != "" {
		t.Errorf("actions (-want +got):\n%s\nplan: %+v", d, p.Actions)
	}
}

func gpuIDs(node string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, "GPU-"+strings.TrimPrefix(node, "node-")+"-"+string(rune('0'+i)))
	}
	return out
}

// TestL10CoverBookingKeepsItsGPUs: r-1 (4 x H100, active, nothing placed)
// has its 4 free H100s held by the Cover before any pending work, so c-new
// (any model, submitted first) goes to the A100s and b-booked runs on
// node-01 (DESIGN L10 Cover).
func TestL10CoverBookingKeepsItsGPUs(t *testing.T) {
	_, p := holdsRepro(t, "booking-cover-taken-by-other-team.json")
	wantActs(t, p, []reproAct{
		{Action: plan.ActionHold, Rule: plan.RuleReservation, Nodes: []string{"node-01"}, GPUIDs: gpuIDs("node-01", 4, 7), Reservation: "r-1"},
		{Action: plan.ActionAdmit, Rule: plan.RuleAdmission, Job: "c-new", Nodes: []string{"node-02"}},
		{Action: plan.ActionAdmit, Rule: plan.RuleReservation, Job: "b-booked", Nodes: []string{"node-01"}},
	})
}

// TestL10CoverClaimsIdleForItsJobsOnly: an idle allocation under r-1's
// Cover is not stopped for the Cover and is no victim of another claimant;
// the booking's own job reclaims it (L5 step 1). Without the Cover, c-new
// would stop c-idle (less work lost than a-idle).
func TestL10CoverClaimsIdleForItsJobsOnly(t *testing.T) {
	s, _ := holdsRepro(t, "booking-cover-taken-by-other-team.json")
	s.Allocations = append(s.Allocations,
		plan.Allocation{ID: "c-idle-0", Namespace: "workspace-c", Job: "c-idle", Group: "g",
			Type: plan.JobBatch, Priority: 50, Node: "node-01", GPUIDs: gpuIDs("node-01", 4, 7), Idle: true,
			StartedAt: s.Time.Add(-2 * time.Hour), KillTimeout: plan.DefaultKillTimeout},
		plan.Allocation{ID: "a-idle-0", Namespace: "workspace-a", Job: "a-idle", Group: "g",
			Type: plan.JobBatch, Priority: 50, Node: "node-02", GPUIDs: gpuIDs("node-02", 2, 7), Idle: true,
			StartedAt: s.Time.Add(-10 * time.Hour), KillTimeout: plan.DefaultKillTimeout})
	p, err := plan.Compute(s)
	if err != nil {
		t.Fatal(err)
	}
	wantActs(t, p, []reproAct{
		{Action: plan.ActionStop, Rule: plan.RuleIdleDebt, Alloc: "a-idle-0", Job: "a-idle", Nodes: []string{"node-02"}, For: "workspace-c/c-new/g"},
		{Action: plan.ActionAdmit, Rule: plan.RuleAdmission, Job: "c-new", Nodes: []string{"node-02"}},
		{Action: plan.ActionStop, Rule: plan.RuleIdleDebt, Alloc: "c-idle-0", Job: "c-idle", Nodes: []string{"node-01"}, For: "workspace-b/b-booked/g"},
		{Action: plan.ActionAdmit, Rule: plan.RuleReservation, Job: "b-booked", Nodes: []string{"node-01"}},
	})
}

// TestL10HoldIntruderStopped: a stored hold that has not ended binds every
// plan: what Nomad placed on its GPUs for another job is stopped at once,
// by the owner's rule, though its pre-warm or booking is beyond
// drain_horizon or the pre-warm is not entitled now (DESIGN L10).
func TestL10HoldIntruderStopped(t *testing.T) {
	for _, tc := range []struct {
		file string
		want reproAct
	}{
		{"hold-intruder-prewarm-beyond-horizon.json",
			reproAct{Action: plan.ActionStop, Rule: plan.RulePrewarm, Alloc: "c-nb-0", Job: "c-nb", Nodes: []string{"node-01"}, For: "workspace-a/a-chat/server"}},
		{"hold-intruder-prewarm-not-entitled.json",
			reproAct{Action: plan.ActionStop, Rule: plan.RulePrewarm, Alloc: "c-nb-0", Job: "c-nb", Nodes: []string{"node-01"}, For: "workspace-a/a-chat/server"}},
		{"hold-intruder-reservation-beyond-horizon.json",
			reproAct{Action: plan.ActionStop, Rule: plan.RuleDrain, Alloc: "c-nb-0", Job: "c-nb", Nodes: []string{"node-01"}, Reservation: "r-1"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, p := holdsRepro(t, tc.file)
			wantActs(t, p, []reproAct{tc.want})
		})
	}
}

// TestL10DrainHoldsFreePartAtOnce: r-1's 8-GPU slot on node-01 is 4 free
// GPUs and an idle job whose stop is due at 09:19; the 4 free GPUs are held
// now, GPU by GPU, and the plan wakes at 09:19 for the stop (DESIGN L10).
func TestL10DrainHoldsFreePartAtOnce(t *testing.T) {
	_, p := holdsRepro(t, "drain-free-part-not-held.json")
	wantActs(t, p, []reproAct{
		{Action: plan.ActionHold, Rule: plan.RuleReservation, Nodes: []string{"node-01"}, GPUIDs: gpuIDs("node-01", 4, 7), Reservation: "r-1"},
	})
	if want := time.Date(2026, 12, 1, 9, 19, 0, 0, time.UTC); !p.WakeAt.Equal(want) {
		t.Errorf("WakeAt = %s, want %s", p.WakeAt, want)
	}
}

// TestL10DrainPartHeldPlansOn: the plan after TestL10DrainHoldsFreePartAtOnce
// (its hold stored), at the idle job's due instant, stops it for r-1 and
// holds the rest of the slot; before it, nothing more happens.
func TestL10DrainPartHeldPlansOn(t *testing.T) {
	s, p := holdsRepro(t, "drain-free-part-not-held.json")
	for _, a := range p.Actions {
		if a.Action == plan.ActionHold {
			s.Holds = append(s.Holds, plan.Hold{For: plan.HoldOwner{Reservation: a.Reservation}, Node: a.Node, GPUIDs: a.GPUIDs, Until: a.Until})
		}
	}
	s.Time = s.Time.Add(5 * time.Minute)
	p2, err := plan.Compute(s)
	if err != nil {
		t.Fatal(err)
	}
	wantActs(t, p2, nil)
	s.Time = time.Date(2026, 12, 1, 9, 19, 0, 0, time.UTC)
	p3, err := plan.Compute(s)
	if err != nil {
		t.Fatal(err)
	}
	wantActs(t, p3, []reproAct{
		{Action: plan.ActionStop, Rule: plan.RuleDrain, Alloc: "c-idle-0", Job: "c-idle", Nodes: []string{"node-01"}, Reservation: "r-1"},
		{Action: plan.ActionHold, Rule: plan.RuleDrain, Nodes: []string{"node-01"}, GPUIDs: gpuIDs("node-01", 0, 3), Reservation: "r-1"},
	})
}

// TestL3DrainsDoNotShareAVictim: r-1 and the pre-warm of a-chat would both
// take idle b-idle, whose stop is due at 09:28:25; b-idle is r-1's, and
// the pre-warm stops its own victim c-train at its due instant, 08:58:50,
// that is now (DESIGN L3: victims planned for one owner are not free for
// the next; L5 pre-warm).
func TestL3DrainsDoNotShareAVictim(t *testing.T) {
	_, p := holdsRepro(t, "drains-share-a-victim-not-due.json")
	wantActs(t, p, []reproAct{
		{Action: plan.ActionStop, Rule: plan.RulePrewarm, Alloc: "c-train-0", Job: "c-train", Nodes: []string{"node-02"}, For: "workspace-a/a-chat/server"},
		{Action: plan.ActionHold, Rule: plan.RulePrewarm, Job: "a-chat", Nodes: []string{"node-02"}, GPUIDs: gpuIDs("node-02", 0, 1), For: "workspace-a/a-chat/server"},
	})
	if want := time.Date(2026, 12, 1, 9, 28, 25, 0, time.UTC); !p.WakeAt.Equal(want) {
		t.Errorf("WakeAt = %s, want %s (b-idle's stop for r-1)", p.WakeAt, want)
	}
}

// TestL10EndedHoldOfFilledBookingFreesGPUs: r-1's jobs use all its GPUs and
// its hold ended at start + settle; the hold keeps nothing (only GPUs for
// allocations the booking has not placed), so the pre-warm stops the idle
// job and holds the GPUs (DESIGN L10).
func TestL10EndedHoldOfFilledBookingFreesGPUs(t *testing.T) {
	_, p := holdsRepro(t, "expired-hold-blocks-prewarm.json")
	wantActs(t, p, []reproAct{
		{Action: plan.ActionStop, Rule: plan.RulePrewarm, Alloc: "c-idle-0", Job: "c-idle", Nodes: []string{"node-01"}, For: "workspace-a/a-chat/server"},
		{Action: plan.ActionHold, Rule: plan.RulePrewarm, Job: "a-chat", Nodes: []string{"node-01"}, GPUIDs: gpuIDs("node-01", 4, 7), For: "workspace-a/a-chat/server"},
	})
	for _, w := range p.Warnings {
		if w.Kind == plan.WarnUnplaceable {
			t.Errorf("warning %+v", w)
		}
	}
}

// TestL5PrewarmHoldsBeforeAdmitting (issue 16 item 6): a pre-warm 4.5
// minutes ahead whose victim (an idle job) is not due yet holds the free
// part of its set in the same plan, before any admission; team B's 2-GPU
// job is not admitted onto GPUs that the pre-warm takes (it would be its
// victim moments later), may not stop the idle job claimed for the
// pre-warm, and its wait says the GPUs are held and for whom; the plan
// warns of the hold.
func TestL5PrewarmHoldsBeforeAdmitting(t *testing.T) {
	s, _ := holdsRepro(t, "drain-free-part-not-held.json")
	s.Reservations = nil
	s.Allocations[0].KillTimeout = plan.DefaultKillTimeout // c-idle on node-01 GPUs 0-3
	at := s.Time.Add(270 * time.Second)
	s.Prewarm = []plan.Prewarm{{Namespace: "workspace-a", Job: "a-chat", Group: "server", Type: plan.JobService, Priority: 80,
		GPUs: 8, Count: 1, At: at, Until: at.Add(90 * time.Second)}}
	s.Pending = []plan.Pending{{Namespace: "workspace-b", Job: "b-new", Group: "g", Type: plan.JobBatch, Priority: 50,
		Count: 1, GPUs: 2, SubmittedAt: s.Time.Add(-time.Minute)}}
	p, err := plan.Compute(s)
	if err != nil {
		t.Fatal(err)
	}
	wantActs(t, p, []reproAct{
		{Action: plan.ActionHold, Rule: plan.RulePrewarm, Job: "a-chat", Nodes: []string{"node-01"}, GPUIDs: gpuIDs("node-01", 4, 7), For: "workspace-a/a-chat/server"},
		{Action: plan.ActionWait, Rule: plan.RuleAdmission, Job: "b-new"},
	})
	want := `no node has 2 free GPUs in any datacenter, node pool "default", even with preemption; 4 GPUs held for the scale-up of workspace-a/a-chat/server at 2026-12-01T09:04:30Z`
	if got := p.Actions[1].Reason; got != want {
		t.Errorf("wait reason %q, want %q", got, want)
	}
	wantWarn := plan.Warning{Kind: plan.WarnHeld, Namespace: "workspace-a", Job: "a-chat", Group: "server", GPUs: 4,
		Message: "4 GPUs held for the scale-up of workspace-a/a-chat/server at 2026-12-01T09:04:30Z, until 2026-12-01T09:06:00Z"}
	if d := cmp.Diff([]plan.Warning{wantWarn}, p.Warnings); d != "" {
		t.Errorf("warnings (-want +got):\n%s", d)
	}
}

// TestKeptHoldsOnlyForUnplacedAllocations: a booking's holds past their
// Until keep only as many GPUs as its unplaced allocations need, skipping
// GPUs its own allocations hold, by node then GPU ID whatever the
// snapshot's order; a claimant's hold before its Until is kept whole, an
// ended one dropped (DESIGN L10).
func TestKeptHoldsOnlyForUnplacedAllocations(t *testing.T) {
	s, _ := holdsRepro(t, "expired-hold-blocks-prewarm.json")
	// r-1 books 4 GPUs; b-res-0 holds GPU-01-0..3. Book 8 instead: 4 unused.
	s.Reservations[0].GPUs, s.Reservations[0].AllocGPUs = 8, 4
	past := s.Holds[0].Until
	pw := plan.HoldOwner{Group: plan.GroupKey{Namespace: "workspace-a", Job: "a-chat", Group: "server"}}
	s.Holds = []plan.Hold{
		{For: plan.HoldOwner{Reservation: "r-1"}, Node: "node-02", GPUIDs: []string{"GPU-02-1", "GPU-02-0"}, Until: past},
		{For: pw, Node: "node-03", GPUIDs: []string{"GPU-03-0"}, Until: s.Time.Add(time.Minute)},
		{For: pw, Node: "node-04", GPUIDs: []string{"GPU-04-0"}, Until: s.Time},
		{For: plan.HoldOwner{Reservation: "r-1"}, Node: "node-01", GPUIDs: []string{"GPU-01-7", "GPU-01-0", "GPU-01-6", "GPU-01-5"}, Until: past},
	}
	want := []plan.Hold{
		{For: pw, Node: "node-03", GPUIDs: []string{"GPU-03-0"}, Until: s.Time.Add(time.Minute)},
		{For: plan.HoldOwner{Reservation: "r-1"}, Node: "node-01", GPUIDs: []string{"GPU-01-5", "GPU-01-6", "GPU-01-7"}, Until: past},
		{For: plan.HoldOwner{Reservation: "r-1"}, Node: "node-02", GPUIDs: []string{"GPU-02-0"}, Until: past},
	}
	if d := cmp.Diff(want, plan.KeptHolds(s)); d != "" {
		t.Errorf("kept holds (-want +got):\n%s", d)
	}
}
