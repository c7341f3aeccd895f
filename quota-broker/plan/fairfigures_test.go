package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/quota"
)

// TestFairFiguresBuild: Build sums each node's own figures over its
// subtree, reads the nominal and the explicit weight of the flavor (the
// default elsewhere) and computes L4's borrowed, and FairShares then gives
// the reference night of TestFairShareReferenceNight from the nodes' own
// figures.
func TestFairFiguresBuild(t *testing.T) {
	root := fairTree()
	root.GPUs = quota.Nominal{"h100": 128, "a100": 8}
	root.Children[0].GPUs = quota.Nominal{"h100": 48}
	root.Children[0].Weight = quota.Nominal{"h100": 1, "a100": 3}
	root.Children[1].GPUs = quota.Nominal{"h100": 80}
	// Quota1: 8 non-idle; Quota1.1 30 non-idle + 60 idle, 30 asked;
	// Quota1.2 10 non-idle, 30 asked.
	own := []OwnFigures{{NonIdle: 8, Held: 8}, {NonIdle: 30, Held: 90, Asked: 30}, {NonIdle: 10, Held: 10, Asked: 30}}
	var f FairFigures
	if err := f.Build(root, "h100", own); err != nil {
		t.Fatal(err)
	}
	want := FairFigures{
		Nominal:    []int{128, 48, 80},
		OwnNonIdle: []int{8, 30, 10},
		NonIdle:    []int{48, 30, 10},
		Demand:     []int{168, 120, 40},
		// used 108, 90, 10: Quota1 max(0, 108 - 128), Quota1.1 90 - 48.
		Borrowed: []int{0, 42, 0},
		Weight:   []int{DefaultWeight, 1, DefaultWeight},
	}
	if diff := cmp.Diff(want, f); diff != "" {
		t.Fatalf("figures (-want +got):\n%s", diff)
	}
	got := sharesOf(t, root, &f)
	wantShares := []shareOf{
		{Quota: "Quota1", Lent: 32},
		{Quota: "Quota1.1", Defined: true, Base: 48, Wants: 72, Part: 32, Share: 80},
		{Quota: "Quota1.2", Defined: true, Base: 40, Part: 0, Share: 40},
	}
	if diff := cmp.Diff(wantShares, got); diff != "" {
		t.Errorf("shares (-want +got):\n%s", diff)
	}
	// The same buffers, another flavor: a100 nominals 8, 0, 0.
	if err := f.Build(root, "a100", []OwnFigures{{}, {Held: 2}, {}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{0, 2, 0}, f.Borrowed); diff != "" {
		t.Errorf("a100 borrowed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{DefaultWeight, 3, DefaultWeight}, f.Weight); diff != "" {
		t.Errorf("a100 weights (-want +got):\n%s", diff)
	}
}

// TestFairFiguresBuildErrors: own figures of the wrong length or out of
// range are an error naming what is wrong, not a panic.
func TestFairFiguresBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		own  []OwnFigures
		want string
	}{
		{"short", []OwnFigures{{}, {}}, "own has 2 entries, fewer than the tree's nodes"},
		{"long", []OwnFigures{{}, {}, {}, {}}, "own has 4 entries for a tree of 3 nodes"},
		{"nonidle above held", []OwnFigures{{}, {NonIdle: 3, Held: 2}, {}}, `quota "Quota1.1" flavor "gpu"`},
		{"negative asked", []OwnFigures{{}, {}, {Asked: -1}}, `quota "Quota1.2" flavor "gpu"`},
	} {
		var f FairFigures
		err := f.Build(fairTree(), quota.ImplicitFlavor, tc.own)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	var f FairFigures
	if err := f.Build(nil, "gpu", nil); err == nil {
		t.Error("no tree: no error")
	}
}

// TestWeight: an explicit weight (0 included) wins; else the nominal, not
// capped at MaxWeight.
func TestWeight(t *testing.T) {
	n := &quota.Node{Name: "Q", GPUs: quota.Nominal{"h100": 20000, "a100": 8}, Weight: quota.Nominal{"a100": 0}}
	type wt struct {
		W        int
		Explicit bool
	}
	var got []wt
	for _, f := range []string{"h100", "a100", "l4"} {
		w, e := Weight(n, f)
		got = append(got, wt{w, e})
	}
	if diff := cmp.Diff([]wt{{20000, false}, {0, true}, {0, false}}, got); diff != "" {
		t.Errorf("weights (-want +got):\n%s", diff)
	}
}

// TestBudgetUse: a node's budget counts the evictions of its own and its
// descendants' quota nodes, of every flavor, within (now - per, now] of
// its own window: the stop exactly per ago is out, one at now is in; a
// node without a budget is absent, one with nothing in its window reads
// 0.
func TestBudgetUse(t *testing.T) {
	root := fairTree()
	root.MaxEvict = &quota.EvictBudget{GPUs: 16, Per: 5 * time.Minute}
	root.Children[0].MaxEvict = &quota.EvictBudget{GPUs: 4, Per: time.Minute}
	root.Children = append(root.Children, &quota.Node{Name: "Quota1.3", MaxEvict: &quota.EvictBudget{GPUs: 1, Per: time.Hour}})
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	ev := []Eviction{
		{Quota: "Quota1.1", GPUs: 2, Time: now},
		{Quota: "Quota1.1", GPUs: 1, Time: now.Add(-30 * time.Second)},
		{Quota: "Quota1.1", GPUs: 8, Time: now.Add(-90 * time.Second)}, // in Quota1's 5m, not in Quota1.1's 1m
		{Quota: "Quota1.2", GPUs: 4, Time: now.Add(-2 * time.Minute)},
		{Quota: "Quota1", GPUs: 8, Time: now.Add(-5 * time.Minute)}, // exactly per ago: out
		{Quota: "Quota1.2", GPUs: 16, Time: now.Add(time.Second)},   // after now: out
		{Quota: "Quota9", GPUs: 32, Time: now.Add(-time.Second)},    // not in the tree
		{Quota: "Quota1.2", GPUs: -3, Time: now.Add(-time.Second)},  // negative: counts as 0
	}
	want := map[string]int{"Quota1": 15, "Quota1.1": 3, "Quota1.3": 0}
	if diff := cmp.Diff(want, BudgetUse(root, ev, now)); diff != "" {
		t.Errorf("budget use (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{}, BudgetUse(nil, ev, now)); diff != "" {
		t.Errorf("no tree (-want +got):\n%s", diff)
	}
}
