package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/quota"
)

const a100 = "NVIDIA A100-SXM4-40GB"

// flavorTree is the e2e tree of issue 17: flavors h100, a100 (whole) and
// a100-1g (1g.5gb slices of A100s); Quota1 with child-level preemption
// (team A), Quota1.1 (team B) and Quota1.2 (team C, 7 slices).
func flavorTree() *quota.Node {
	return &quota.Node{Name: "Quota1", GPUs: quota.Nominal{"h100": 16, "a100": 8, "a100-1g": 14}, ChildPreemption: true,
		Namespaces: []string{"workspace-a"},
		Flavors: []quota.Flavor{
			{Name: "h100", Models: []string{h100}},
			{Name: "a100-1g", Models: []string{a100}, MIGProfile: "1g.5gb"},
			{Name: "a100", Models: []string{a100}},
		},
		Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: quota.Nominal{"h100": 8, "a100": 4}, Namespaces: []string{"workspace-b"}},
			{Name: "Quota1.2", GPUs: quota.Nominal{"h100": 8, "a100": 4, "a100-1g": 7}, Namespaces: []string{"workspace-c"}},
		}}
}

// migNode adds a node of n MIG instances of profile on model's GPUs.
func (b *snapBuilder) migNode(id string, n int, model, profile string) *snapBuilder {
	node := Node{ID: id, Datacenter: "dc1", NodePool: "default"}
	for g := 0; g < n; g++ {
		node.GPUs = append(node.GPUs, GPU{ID: fmt.Sprintf("%s-gpu%d", id, g), Model: model, MIGProfile: profile, Healthy: true})
	}
	b.s.Nodes = append(b.s.Nodes, node)
	return b
}

func pFlavors(f ...string) pendOpt { return func(p *Pending) { p.Flavors = f } }

// flavorCluster: node-01 and node-02 of 8 H100, node-03 of 8 A100,
// node-04 of 14 1g.5gb slices. H100s are full: team B's 8 on node-01
// (its nominal), team C's 8 on node-02.
func flavorCluster() *snapBuilder {
	return newSnap(flavorTree()).nodes(2, 8, h100).nodes(1, 8, a100).migNode("node-04", 14, a100, "1g.5gb").
		alloc("b1", "workspace-b", "b-train", "node-01", 8).
		alloc("c1", "workspace-c", "c-train", "node-02", 8)
}

type flavorRow struct {
	Action ActionKind
	Job    string
	Alloc  string
	Flavor string
	Nodes  []string
}

func flavorRows(p *Plan) []flavorRow {
	var out []flavorRow
	for _, a := range p.Actions {
		out = append(out, flavorRow{Action: a.Action, Job: a.Job, Alloc: a.Alloc, Flavor: a.Flavor, Nodes: a.Nodes})
	}
	return out
}

// TestL13ChoiceTakesTheNextFlavorOnFreeGPUs: e2e (a) of issue 17. Team
// B's job allowed h100,a100 is not entitled in h100 (8 of 8) and lands on
// the A100 node, with no preemption.
func TestL13ChoiceTakesTheNextFlavorOnFreeGPUs(t *testing.T) {
	s := flavorCluster().pending("workspace-b", "b-more", 1, 4, pType(JobBatch), pFlavors("h100", "a100")).build()
	p := mustPlan(t, s)
	want := []flavorRow{{Action: ActionAdmit, Job: "b-more", Flavor: "a100", Nodes: []string{"node-03"}}}
	if diff := cmp.Diff(want, flavorRows(p)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

// TestL13ChoicePrefersFreeGPUsOverPreemption: team A may preempt its
// children's H100s (L5.2), but a flavor where it fits on free GPUs comes
// first (DESIGN L13 Choice: free, then L5/L6, then in part).
func TestL13ChoicePrefersFreeGPUsOverPreemption(t *testing.T) {
	s := flavorCluster().pending("workspace-a", "chat", 1, 8, pFlavors("h100", "a100")).build()
	p := mustPlan(t, s)
	want := []flavorRow{{Action: ActionAdmit, Job: "chat", Flavor: "a100", Nodes: []string{"node-03"}}}
	if diff := cmp.Diff(want, flavorRows(p)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

// TestL13VictimsFreeOnlyTheirOwnFlavor: e2e (b). Team A's H100 inference
// preempts only H100 allocations, though an idle A100 job (L5 step 1,
// a smaller key than any L5.2 victim) is there.
func TestL13VictimsFreeOnlyTheirOwnFlavor(t *testing.T) {
	s := flavorCluster().alloc("c-idle", "workspace-c", "c-idle", "node-03", 8, idle).
		pending("workspace-a", "chat", 1, 8, pFlavors("h100")).build()
	p := mustPlan(t, s)
	stopped := stops(p)
	if len(stopped) != 1 || stopped[0] != "b1" && stopped[0] != "c1" {
		t.Fatalf("stops = %v, want one H100 allocation (b1 or c1)", stopped)
	}
	for _, a := range p.Actions {
		if a.Flavor != "h100" {
			t.Errorf("%s %s%s has flavor %q, want h100", a.Action, a.Job, a.Alloc, a.Flavor)
		}
	}
	if a := actionsOf(p, ActionAdmit); len(a) != 1 || a[0].Job != "chat" {
		t.Errorf("admits = %+v", a)
	}
}

// TestL13ChoiceTakesTheFirstFlavorWithRoomByPreemption: with no flavor
// free for all of it, the first flavor where L5/L6 make room wins.
func TestL13ChoiceTakesTheFirstFlavorWithRoomByPreemption(t *testing.T) {
	s := flavorCluster().alloc("b2", "workspace-b", "b-a100", "node-03", 4).alloc("c2", "workspace-c", "c-a100", "node-03", 4).
		pending("workspace-a", "chat", 1, 8, pFlavors("a100", "h100")).build()
	p := mustPlan(t, s)
	want := []flavorRow{
		{Action: ActionStop, Job: "c-a100", Alloc: "c2", Flavor: "a100"},
		{Action: ActionStop, Job: "b-a100", Alloc: "b2", Flavor: "a100"},
		{Action: ActionAdmit, Job: "chat", Flavor: "a100", Nodes: []string{"node-03"}},
	}
	if diff := cmp.Diff(want, flavorRows(p), sortStops()); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

func sortStops() cmp.Option {
	return cmp.Transformer("stopsSorted", func(rows []flavorRow) []flavorRow {
		out := append([]flavorRow(nil), rows...)
		for i := 1; i < len(out); i++ {
			for k := i; k > 0 && out[k].Action == ActionStop && out[k-1].Action == ActionStop && out[k].Alloc < out[k-1].Alloc; k-- {
				out[k], out[k-1] = out[k-1], out[k]
			}
		}
		return out
	})
}

// TestL13WaitGivesAReasonPerFlavor: not entitled in either flavor, the
// job waits with each flavor's reason.
func TestL13WaitGivesAReasonPerFlavor(t *testing.T) {
	s := flavorCluster().alloc("b2", "workspace-b", "b-a100", "node-03", 4).
		pending("workspace-b", "b-more", 1, 2, pType(JobBatch), pFlavors("h100", "a100")).build()
	p := mustPlan(t, s)
	waits := actionsOf(p, ActionWait)
	if len(waits) != 1 || len(p.Actions) != 1 {
		t.Fatalf("actions = %+v, want one wait", p.Actions)
	}
	w := waits[0]
	want := []FlavorReason{
		{Flavor: "h100", Rule: RuleAdmission, Quota: "Quota1.1", Reason: "Quota1.1: 8 of 8 GPUs in use; 2 more needed"},
		{Flavor: "a100", Rule: RuleAdmission, Quota: "Quota1.1", Reason: "Quota1.1: 4 of 4 GPUs in use; 2 more needed"},
	}
	if diff := cmp.Diff(want, w.Reasons); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
	if w.Flavor != "" || w.Quota != "Quota1.1" || w.Reason != "h100: "+want[0].Reason+"; a100: "+want[1].Reason {
		t.Errorf("wait = %+v", w)
	}
}

// TestL13MIGSlicesAreAFlavorOfTheirOwn: e2e (c). Team C's 8th 1g
// notebook on a 7-slice quota waits with the reason naming a100-1g and 7
// of 7; the whole A100s are not counted against it.
func TestL13MIGSlicesAreAFlavorOfTheirOwn(t *testing.T) {
	b := flavorCluster()
	for i := 0; i < 7; i++ {
		b.alloc(fmt.Sprintf("nb%d", i), "workspace-c", fmt.Sprintf("nb%d", i), "node-04", 1, jobType(JobService))
	}
	s := b.pending("workspace-c", "nb7", 1, 1, pFlavors("a100-1g")).build()
	p := mustPlan(t, s)
	w := actionsOf(p, ActionWait)
	if len(w) != 1 || w[0].Flavor != "a100-1g" || !strings.Contains(w[0].Reason, "7 of 7") || w[0].Quota != "Quota1.2" {
		t.Fatalf("actions = %+v, want a wait in a100-1g at 7 of 7", p.Actions)
	}
	want := Usage{Quota: "Quota1.2", Flavor: "a100-1g", Nominal: 7, Used: 7, NonIdle: 7}
	if got := usageRow(t, p, "Quota1.2", "a100-1g"); got != want {
		t.Errorf("usage = %+v, want %+v", got, want)
	}
}

func usageRow(t *testing.T, p *Plan, q, flavor string) Usage {
	t.Helper()
	for _, u := range p.Usage {
		if u.Quota == q && u.Flavor == flavor {
			return u
		}
	}
	t.Fatalf("no usage row for %s, flavor %s", q, flavor)
	return Usage{}
}

// TestL13UsageRowsPerNodeAndFlavor: one row per quota node and flavor,
// node by node, flavors in tree order (L2, L4 per flavor).
func TestL13UsageRowsPerNodeAndFlavor(t *testing.T) {
	p := mustPlan(t, flavorCluster().alloc("b2", "workspace-b", "b-a100", "node-03", 2, idle).build())
	var got []string
	for _, u := range p.Usage {
		got = append(got, fmt.Sprintf("%s/%s %d/%d nonidle %d borrowed %d", u.Quota, u.Flavor, u.Used, u.Nominal, u.NonIdle, u.Borrowed))
	}
	want := []string{
		"Quota1/h100 16/16 nonidle 16 borrowed 0", "Quota1/a100-1g 0/14 nonidle 0 borrowed 0", "Quota1/a100 2/8 nonidle 0 borrowed 0",
		"Quota1.1/h100 8/8 nonidle 8 borrowed 0", "Quota1.1/a100-1g 0/0 nonidle 0 borrowed 0", "Quota1.1/a100 2/4 nonidle 0 borrowed 0",
		"Quota1.2/h100 8/8 nonidle 8 borrowed 0", "Quota1.2/a100-1g 0/7 nonidle 0 borrowed 0", "Quota1.2/a100 0/4 nonidle 0 borrowed 0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

// TestL13ImplicitFlavorLeavesMIGUngoverned: a tree without flavor blocks
// counts whole GPUs only; MIG instances are never free to it, and an
// allocation on them is not counted (DESIGN L13).
func TestL13ImplicitFlavorLeavesMIGUngoverned(t *testing.T) {
	s := newSnap(referenceTree()).migNode("node-01", 7, a100, "1g.5gb").nodes(1, 8, h100).
		alloc("m1", "workspace-b", "nb", "node-01", 3).
		pending("workspace-b", "big", 1, 4, pType(JobBatch)).
		pending("workspace-b", "two", 2, 4, pType(JobBatch)).build()
	p := mustPlan(t, s)
	// After the plan: 4 + 4 admitted on node-02; the 3 slices of m1 are
	// not counted.
	if got := usageOf(t, p, "Quota1.1"); got.Used != 8 || got.Flavor != "" {
		t.Errorf("Quota1.1 usage = %+v, want 8 used (the MIG allocation not counted)", got)
	}
	var nodes []string
	for _, a := range actionsOf(p, ActionAdmit) {
		nodes = append(nodes, a.Nodes...)
	}
	if diff := cmp.Diff([]string{"node-02", "node-02"}, nodes); diff != "" {
		t.Errorf("admitted on (-want +got):\n%s", diff)
	}
	if w := actionsOf(p, ActionWait); len(w) != 1 || w[0].Job != "two" || w[0].Count != 1 {
		t.Errorf("waits = %+v, want one allocation of two", w)
	}
}

// TestL13PartialAdmissionInTheFirstFlavorWithRoom: a non-flex job that
// fits whole nowhere is admitted in part in the first flavor where some
// allocation can be placed.
func TestL13PartialAdmissionInTheFirstFlavorWithRoom(t *testing.T) {
	// 6 of node-03's A100s run a job outside the tree (never a victim).
	s := flavorCluster().alloc("x", "outside", "x", "node-03", 6).
		pending("workspace-c", "c-more", 3, 1, pType(JobBatch), pFlavors("h100", "a100")).build()
	p := mustPlan(t, s)
	// h100: 8 of 8 in use, not entitled; a100: entitled (3 of 4), two
	// allocations fit, one waits.
	want := []flavorRow{
		{Action: ActionAdmit, Job: "c-more", Flavor: "a100", Nodes: []string{"node-03", "node-03"}},
		{Action: ActionWait, Job: "c-more", Flavor: "a100"},
	}
	if diff := cmp.Diff(want, flavorRows(p)); diff != "" {
		t.Errorf("actions (-want +got):\n%s", diff)
	}
}

// TestL13OneDeclaredFlavorPlansAsBefore: a tree of one declared flavor
// plans as the implicit one does, its actions naming the flavor.
func TestL13OneDeclaredFlavorPlansAsBefore(t *testing.T) {
	build := func(tree *quota.Node) *Snapshot {
		return newSnap(tree).nodes(2, 8, h100).alloc("c1", "workspace-c", "c", "node-01", 8).
			pending("workspace-a", "chat", 2, 8).build()
	}
	plain := mustPlan(t, build(referenceTree()))
	tree := referenceTree()
	tree.Flavors = []quota.Flavor{{Name: "h100", Models: []string{h100}}}
	tree.Walk(func(n *quota.Node) { n.GPUs = quota.Nominal{"h100": n.GPUs.Of(quota.ImplicitFlavor)} })
	named := mustPlan(t, build(tree))
	for i := range named.Actions {
		if named.Actions[i].Flavor != "h100" {
			t.Errorf("action %d has flavor %q", i, named.Actions[i].Flavor)
		}
		named.Actions[i].Flavor = ""
	}
	for i := range named.Usage {
		named.Usage[i].Flavor = ""
	}
	// L1's capacity warning names the flavor in a tree that declares one.
	if len(named.Warnings) != 1 || !strings.Contains(named.Warnings[0].Message, `nominal 128 GPUs of flavor "h100" exceeds the 16 healthy GPUs of that flavor`) {
		t.Errorf("warnings = %+v", named.Warnings)
	}
	named.Warnings, plain.Warnings = nil, nil
	if diff := cmp.Diff(plain, named); diff != "" {
		t.Errorf("one declared flavor vs the implicit one (-implicit +declared):\n%s", diff)
	}
}

// TestL13ReservationJobTakesTheBookingsFlavor: a job naming an active
// booking takes the booking's flavor only; if its device requests
// exclude it, it waits saying so.
func TestL13ReservationJobTakesTheBookingsFlavor(t *testing.T) {
	build := func(flavors ...string) *Snapshot {
		s := flavorCluster().pending("workspace-c", "booked", 1, 4, pType(JobBatch), pFlavors(flavors...),
			func(p *Pending) { p.Reservation = "r-1" }).build()
		s.Reservations = []Reservation{{ID: "r-1", Namespace: "workspace-c", Quota: "Quota1.2", GPUs: 4, AllocGPUs: 4,
			Flavor: "a100", Start: t0.Add(-time.Hour), End: t0.Add(time.Hour)}}
		return s
	}
	p := mustPlan(t, build("h100", "a100"))
	if a := actionsOf(p, ActionAdmit); len(a) != 1 || a[0].Flavor != "a100" || a[0].Rule != RuleReservation {
		t.Errorf("actions = %+v, want an admit in a100 by L10", p.Actions)
	}
	p = mustPlan(t, build("h100"))
	want := "reservation r-1 is of flavor a100, which the job's device requests do not allow (h100)"
	if w := actionsOf(p, ActionWait); len(w) != 1 || w[0].Reason != want || w[0].Rule != RuleReservation {
		t.Errorf("actions = %+v, want a wait: %s", p.Actions, want)
	}
}
