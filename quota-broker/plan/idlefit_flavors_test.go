package plan

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/quota"
)

// twoFlavorTree: flavors h100 then a100 (whole GPUs); Quota1 (team A,
// workspace-a) with Quota1.1 (workspace-b) and Quota1.2 (workspace-c).
func twoFlavorTree(b, c int) *quota.Node {
	return &quota.Node{Name: "Quota1", GPUs: quota.Nominal{"h100": 16, "a100": 16}, Namespaces: []string{"workspace-a"},
		Flavors: []quota.Flavor{
			{Name: "h100", Models: []string{h100}},
			{Name: "a100", Models: []string{a100}},
		},
		Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: quota.Nominal{"h100": 4, "a100": b}, Namespaces: []string{"workspace-b"}},
			{Name: "Quota1.2", GPUs: quota.Nominal{"h100": 4, "a100": c}, Namespaces: []string{"workspace-c"}},
		}}
}

func igFlavors(f ...string) func(*IdleGroup) { return func(g *IdleGroup) { g.Flavors = f } }

func flavorFit(ns, job string, n int, flavor string) GroupFit {
	return GroupFit{Namespace: ns, Job: job, Group: "train", Fit: n, Flavor: flavor}
}

// TestIdleFitPerFlavor: node-01 of 8 H100 (4 free), node-02 of 8 A100 (all
// free). A group's fit lies in one flavor (DESIGN L13: all of a job's
// allocations take one), the first of its allowed flavors with room for
// one allocation, in its own order; GPUs of the other flavors are not
// added to it. A group whose job runs allocations in one of its flavors
// gets its fit there only. Plan.IdleFit and IdleFit agree.
func TestIdleFitPerFlavor(t *testing.T) {
	base := func() *snapBuilder {
		return newSnap(twoFlavorTree(8, 8)).nodes(1, 8, h100).nodes(1, 8, a100).
			alloc("a1", "workspace-a", "chat", "node-01", 4)
	}
	cases := []struct {
		name   string
		groups []IdleGroup
		want   []GroupFit
	}{
		{"restricted to a100: its fit from the A100 node",
			[]IdleGroup{idleGroup("workspace-b", "sweep", 2, 1, 20, igFlavors("a100"))},
			[]GroupFit{flavorFit("workspace-b", "sweep", 4, "a100")}},
		{"allowed both, tree order: the first flavor with room, h100, not the sum",
			[]IdleGroup{idleGroup("workspace-b", "sweep", 2, 1, 20)},
			[]GroupFit{flavorFit("workspace-b", "sweep", 2, "h100")}},
		{"allowed a100,h100: its own order",
			[]IdleGroup{idleGroup("workspace-b", "sweep", 2, 1, 20, igFlavors("a100", "h100"))},
			[]GroupFit{flavorFit("workspace-b", "sweep", 4, "a100")}},
		{"allowed both, 6 GPUs per allocation: only a100 has room for one",
			[]IdleGroup{idleGroup("workspace-b", "sweep", 6, 1, 20, igFlavors("h100", "a100"))},
			[]GroupFit{flavorFit("workspace-b", "sweep", 1, "a100")}},
		{"the first group fills h100, the second moves on to a100",
			[]IdleGroup{
				idleGroup("workspace-b", "first", 2, 1, 20, igPriority(60)),
				idleGroup("workspace-c", "second", 2, 1, 20, igFlavors("h100", "a100")),
			},
			[]GroupFit{flavorFit("workspace-b", "first", 2, "h100"), flavorFit("workspace-c", "second", 4, "a100")}},
		{"restricted to h100 after h100 is taken: fit 0, no flavor named",
			[]IdleGroup{
				idleGroup("workspace-b", "first", 4, 1, 20, igPriority(60), igFlavors("h100")),
				idleGroup("workspace-c", "second", 2, 1, 20, igFlavors("h100")),
			},
			[]GroupFit{flavorFit("workspace-b", "first", 1, "h100"), flavorFit("workspace-c", "second", 0, "")}},
		{"its job runs on A100: its fit stays there, though h100 comes first",
			[]IdleGroup{idleGroup("workspace-b", "sweep", 2, 1, 20, igFlavors("h100", "a100"))},
			[]GroupFit{flavorFit("workspace-b", "sweep", 3, "a100")}},
		{"its job runs on A100, which is full: fit 0, not h100's room",
			[]IdleGroup{idleGroup("workspace-b", "sweep", 4, 1, 20)},
			[]GroupFit{flavorFit("workspace-b", "sweep", 0, "")}},
		{"up to max - count in the one flavor",
			[]IdleGroup{idleGroup("workspace-b", "sweep", 1, 2, 5, igFlavors("a100"))},
			[]GroupFit{flavorFit("workspace-b", "sweep", 3, "a100")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := base()
			if strings.HasPrefix(tc.name, "its job runs on A100") {
				b.alloc("s1", "workspace-b", "sweep", "node-02", 2, idle, elastic)
			}
			if strings.HasSuffix(tc.name, "not h100's room") {
				b.alloc("c1", "workspace-c", "c-train", "node-02", 4)
			}
			b.s.IdleGroups = tc.groups
			if diff := cmp.Diff(tc.want, mustFit(t, b.build())); diff != "" {
				t.Errorf("IdleFit (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, mustPlan(t, b.build()).IdleFit); diff != "" {
				t.Errorf("Plan.IdleFit (-want +got):\n%s", diff)
			}
		})
	}
}

// TestIdleFitAfterThePlanPerFlavor: GPUs the plan admits in a flavor are
// not in that flavor's fit: a pending job allowed only a100 takes 4 of
// the A100s, and the idle group restricted to a100 gets the other 4.
func TestIdleFitAfterThePlanPerFlavor(t *testing.T) {
	b := newSnap(twoFlavorTree(8, 8)).nodes(1, 8, h100).nodes(1, 8, a100).
		pending("workspace-c", "train", 1, 4, pType(JobBatch), pFlavors("a100"))
	b.s.IdleGroups = []IdleGroup{idleGroup("workspace-b", "sweep", 1, 1, 20, igFlavors("a100"))}
	p := mustPlan(t, b.build())
	if a := actionsOf(p, ActionAdmit); len(a) != 1 || a[0].Flavor != "a100" {
		t.Fatalf("admits = %+v, want train in a100", a)
	}
	want := []GroupFit{flavorFit("workspace-b", "sweep", 4, "a100")}
	if diff := cmp.Diff(want, p.IdleFit); diff != "" {
		t.Errorf("Plan.IdleFit (-want +got):\n%s", diff)
	}
}

// TestGroupFitJSONOmitsNoFlavor: a fit in a tree without flavor blocks is
// written as before flavors; one in a flavor names it.
func TestGroupFitJSONOmitsNoFlavor(t *testing.T) {
	for _, tc := range []struct {
		f    GroupFit
		want string
	}{
		{fit("ns", "j", 2), `{"namespace":"ns","job":"j","group":"train","fit":2}`},
		{flavorFit("ns", "j", 2, "a100"), `{"namespace":"ns","job":"j","group":"train","fit":2,"flavor":"a100"}`},
	} {
		got, err := json.Marshal(tc.f)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("json = %s, want %s", got, tc.want)
		}
	}
}

// TestIdleFitFlavorsValidated: an idle group's flavors name flavors of
// the tree, each once.
func TestIdleFitFlavorsValidated(t *testing.T) {
	for _, tc := range []struct {
		flavors []string
		want    string
	}{
		{[]string{"a100", "v100"}, `idle_groups[0].flavors[1]: "v100" is not a flavor of the tree (h100, a100)`},
		{[]string{"a100", "a100"}, `idle_groups[0].flavors[1]: flavor "a100" is listed twice`},
	} {
		b := newSnap(twoFlavorTree(8, 8)).nodes(1, 8, h100)
		b.s.IdleGroups = []IdleGroup{idleGroup("workspace-b", "sweep", 1, 1, 2, igFlavors(tc.flavors...))}
		err := b.build().Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate = %v, want it to say %s", err, tc.want)
		}
	}
}

// TestIdleFitFairOrder (issue 19 item 1, DESIGN §8 idle_fit, L14): two
// idle groups want 4 GPUs each and 4 are free. Team B (nominal 4) borrows
// 4 already: 4 more would put its borrowed share at 8/4 = 2; team C
// (nominal 4, 4 idle GPUs in use) would reach 4/4 = 1. Under
// IdleOrderFair the lower share, team C, gets the GPUs although team B's
// group comes first in L3 order (priority 60); under IdleOrderL3 team B
// keeps them. The same in a tree of two flavors, in a100, where both
// groups would go.
func TestIdleFitFairOrder(t *testing.T) {
	oneFlavor := func() *snapBuilder {
		tree := &quota.Node{Name: "Quota1", GPUs: quota.Plain(16), Namespaces: []string{"workspace-a"},
			Children: []*quota.Node{
				{Name: "Quota1.1", GPUs: quota.Plain(4), Namespaces: []string{"workspace-b"}},
				{Name: "Quota1.2", GPUs: quota.Plain(4), Namespaces: []string{"workspace-c"}},
			}}
		return newSnap(tree).nodes(4, 4, h100).
			alloc("b1", "workspace-b", "bold", "node-01", 4, idle, elastic).
			alloc("b2", "workspace-b", "bold", "node-02", 4, idle, elastic).
			alloc("c1", "workspace-c", "cold", "node-03", 4, idle, elastic)
	}
	twoFlavors := func() *snapBuilder {
		return newSnap(twoFlavorTree(4, 4)).nodes(1, 8, h100).nodes(4, 4, a100).
			alloc("a1", "workspace-a", "chat", "node-01", 8).
			alloc("b1", "workspace-b", "bold", "node-02", 4, idle, elastic).
			alloc("b2", "workspace-b", "bold", "node-03", 4, idle, elastic).
			alloc("c1", "workspace-c", "cold", "node-04", 4, idle, elastic)
	}
	for _, tc := range []struct {
		name   string
		snap   func() *snapBuilder
		flavor string
	}{{"one flavor", oneFlavor, ""}, {"two flavors", twoFlavors, "a100"}} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.snap()
			b.s.IdleGroups = []IdleGroup{
				idleGroup("workspace-b", "sweep", 4, 1, 2, igPriority(60)),
				idleGroup("workspace-c", "sweep", 4, 1, 2),
			}
			for _, o := range []struct {
				order IdleOrder
				want  []GroupFit
			}{
				{IdleOrderL3, []GroupFit{flavorFit("workspace-b", "sweep", 1, tc.flavor), flavorFit("workspace-c", "sweep", 0, "")}},
				{IdleOrderFair, []GroupFit{flavorFit("workspace-b", "sweep", 0, ""), flavorFit("workspace-c", "sweep", 1, tc.flavor)}},
			} {
				s := b.build()
				if err := s.Validate(); err != nil {
					t.Fatalf("Validate: %v", err)
				}
				p := mustPlanWith(t, s, Options{IdleOrder: o.order})
				if diff := cmp.Diff(o.want, p.IdleFit); diff != "" {
					t.Errorf("%v: Plan.IdleFit (-want +got):\n%s", o.order, diff)
				}
			}
		})
	}
}

// TestIdleFitFairOrderCountsTheFitsServed: under IdleOrderFair the GPUs
// a group's fit took count in its node's share at the next pick. 8 GPUs
// are free; team B's groups sweep and tune and team C's (priority 60,
// first in L3 order, 4 idle GPUs in use) want 4 each, nominals 4. B's
// first group would reach share 0 and goes first; then B's second would
// reach (4 + 4 - 4)/4 = 1 with the first's fit counted, as C would: the
// tie goes to C, first in L3 order. (Without the first fit counted, B's
// second group would win at 0.)
func TestIdleFitFairOrderCountsTheFitsServed(t *testing.T) {
	tree := &quota.Node{Name: "Quota1", GPUs: quota.Plain(16), Namespaces: []string{"workspace-a"},
		Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: quota.Plain(4), Namespaces: []string{"workspace-b"}},
			{Name: "Quota1.2", GPUs: quota.Plain(4), Namespaces: []string{"workspace-c"}},
		}}
	b := newSnap(tree).nodes(3, 4, h100).
		alloc("c1", "workspace-c", "cold", "node-01", 4, idle, elastic)
	b.s.IdleGroups = []IdleGroup{
		idleGroup("workspace-b", "sweep", 4, 1, 2),
		idleGroup("workspace-b", "tune", 4, 1, 2),
		idleGroup("workspace-c", "sweep", 4, 1, 2, igPriority(60)),
	}
	want := []GroupFit{fit("workspace-b", "sweep", 1), fit("workspace-b", "tune", 0), fit("workspace-c", "sweep", 1)}
	if diff := cmp.Diff(want, mustPlanWith(t, b.build(), Options{IdleOrder: IdleOrderFair}).IdleFit); diff != "" {
		t.Errorf("IdleOrderFair: Plan.IdleFit (-want +got):\n%s", diff)
	}
	// In L3 order too: C (priority 60), then B's sweep; tune gets nothing.
	if diff := cmp.Diff(want, mustPlan(t, b.build()).IdleFit); diff != "" {
		t.Errorf("IdleOrderL3: Plan.IdleFit (-want +got):\n%s", diff)
	}
}
