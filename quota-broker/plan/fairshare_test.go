package plan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gputide/gputide/quota-broker/quota"
)

// fairTree is the reference tree's shape: Quota1 over Quota1.1 and
// Quota1.2, pre-order indices 0, 1, 2. FairShares reads only the tree's
// shape and names: the nominals (128, 48, 80) are the figures'.
func fairTree() *quota.Node {
	return &quota.Node{Name: "Quota1", Namespaces: []string{"workspace-a"}, Children: []*quota.Node{
		{Name: "Quota1.1", Namespaces: []string{"workspace-b"}},
		{Name: "Quota1.2", Namespaces: []string{"workspace-c"}},
	}}
}

// shareOf is the part of a FairShare the worked examples check.
type shareOf struct {
	Quota       string
	Defined     bool
	Base, Wants int
	Part, Share float64
	Lent        int
}

func sharesOf(t *testing.T, root *quota.Node, f *FairFigures) []shareOf {
	t.Helper()
	got, err := FairShares(root, f)
	if err != nil {
		t.Fatal(err)
	}
	var out []shareOf
	for _, x := range got {
		out = append(out, shareOf{Quota: x.Quota, Defined: x.Defined, Base: x.Base, Wants: x.Wants, Part: x.Part, Share: x.Share, Lent: x.Lent})
	}
	return out
}

// The reference at night: team A's inference runs 8 GPUs (Quota1's own
// non-idle usage), team B holds 30 non-idle GPUs and asks for 90 more in
// all (demand 120), team C holds 10 non-idle GPUs and asks for 40 in all.
//
//	base(Quota1.1) = max(30, min(48, 120)) = 48, wants = 120 - 48 = 72
//	base(Quota1.2) = max(10, min(80, 40))  = 40, wants = 0
//	lent(Quota1)   = max(0, 128 - 8) - (48 + 40) = 32: all to Quota1.1
//	fair share: Quota1.1 48 + 32 = 80, Quota1.2 40 + 0 = 40 (sum 120 = 128 - 8)
func TestFairShareReferenceNight(t *testing.T) {
	f := &FairFigures{Nominal: []int{128, 48, 80}, OwnNonIdle: []int{8, 30, 10}, NonIdle: []int{48, 30, 10}, Demand: []int{168, 120, 40}}
	want := []shareOf{
		{Quota: "Quota1", Lent: 32},
		{Quota: "Quota1.1", Defined: true, Base: 48, Wants: 72, Part: 32, Share: 80},
		{Quota: "Quota1.2", Defined: true, Base: 40, Wants: 0, Part: 0, Share: 40},
	}
	if d := cmp.Diff(want, sharesOf(t, fairTree(), f)); d != "" {
		t.Errorf("fair shares (-want +got):\n%s", d)
	}
}

// By day team A's inference runs 24 GPUs while both teams want all of
// their nominals: bases 48 + 80 = 128 exceed the 128 - 24 = 104 GPUs
// Quota1's own usage leaves, so the children's shares are not defined
// (the parent takes their GPUs by L5), though bases and wants are given.
func TestFairShareUndefinedByDay(t *testing.T) {
	f := &FairFigures{Nominal: []int{128, 48, 80}, OwnNonIdle: []int{24, 40, 70}, NonIdle: []int{134, 40, 70}, Demand: []int{200, 60, 116}}
	want := []shareOf{
		{Quota: "Quota1"},
		{Quota: "Quota1.1", Base: 48, Wants: 12}, // max(40, min(48, 60)) = 48; 60 - 48
		{Quota: "Quota1.2", Base: 80, Wants: 36}, // max(70, min(80, 116)) = 80; 116 - 80
	}
	if d := cmp.Diff(want, sharesOf(t, fairTree(), f)); d != "" {
		t.Errorf("fair shares (-want +got):\n%s", d)
	}
	// With exactly what the bases need left (128 - 0 = 48 + 80) they are
	// defined, and nothing is lent: each child's share is its base.
	f.OwnNonIdle[0], f.NonIdle[0] = 0, 110
	want = []shareOf{
		{Quota: "Quota1"},
		{Quota: "Quota1.1", Defined: true, Base: 48, Wants: 12, Share: 48},
		{Quota: "Quota1.2", Defined: true, Base: 80, Wants: 36, Share: 80},
	}
	if d := cmp.Diff(want, sharesOf(t, fairTree(), f)); d != "" {
		t.Errorf("fair shares with nothing lent (-want +got):\n%s", d)
	}
}

// fourChildren is P (100 GPUs, no own namespace work) over A (20), B (30),
// C (10) and D (0).
func fourChildren() *quota.Node {
	return &quota.Node{Name: "P", Children: []*quota.Node{
		{Name: "A"}, {Name: "B"}, {Name: "C"}, {Name: "D"},
	}}
}

// Water-filling by the default weights (the nominals 20, 30, 10, 0):
//
//	A: demand 10           base max(0, min(20, 10)) = 10, wants 0
//	B: demand 60, nonidle 5 base max(5, min(30, 60)) = 30, wants 30
//	C: demand 100          base min(10, 100) = 10, wants 90
//	D: demand 5            base min(0, 5) = 0, wants 5 (weight 0)
//	lent(P) = 100 - (10 + 30 + 10 + 0) = 50, shared by B and C at 30:10.
//	B's level 50 * 30/40 = 37.5 >= its wants 30: B takes 30, 20 are left;
//	C's level 20 * 10/10 = 20 < 90: C takes 20. Nothing is left for D.
//	fair shares: A 10, B 60, C 30, D 0 (sum 100 = min(175, 100)).
func TestFairShareWaterFilling(t *testing.T) {
	f := &FairFigures{Nominal: []int{100, 20, 30, 10, 0}, OwnNonIdle: []int{0, 0, 5, 0, 0}, NonIdle: []int{5, 0, 5, 0, 0},
		Demand: []int{175, 10, 60, 100, 5}}
	want := []shareOf{
		{Quota: "P", Lent: 50},
		{Quota: "A", Defined: true, Base: 10, Share: 10},
		{Quota: "B", Defined: true, Base: 30, Wants: 30, Part: 30, Share: 60},
		{Quota: "C", Defined: true, Base: 10, Wants: 90, Part: 20, Share: 30},
		{Quota: "D", Defined: true, Base: 0, Wants: 5, Part: 0, Share: 0},
	}
	if d := cmp.Diff(want, sharesOf(t, fourChildren(), f)); d != "" {
		t.Errorf("default weights (-want +got):\n%s", d)
	}
	// Explicit weight 30 for C: B and C share 50 at 30:30, a level of 25
	// each, below both wants (B 30, C 90): B 30 + 25 = 55, C 10 + 25 = 35.
	f.Weight = []int{DefaultWeight, DefaultWeight, DefaultWeight, 30, DefaultWeight}
	want[2].Part, want[2].Share = 25, 55
	want[3].Part, want[3].Share = 25, 35
	if d := cmp.Diff(want, sharesOf(t, fourChildren(), f)); d != "" {
		t.Errorf("C weighs 30 (-want +got):\n%s", d)
	}
	// Fractions stay: 7 GPUs lent to B and C at equal weights (P 57 =
	// bases 50 + 7) give each 3.5.
	f.Nominal[0] = 57
	want[0].Lent = 7
	want[2].Part, want[2].Share = 3.5, 33.5
	want[3].Part, want[3].Share = 3.5, 13.5
	if d := cmp.Diff(want, sharesOf(t, fourChildren(), f)); d != "" {
		t.Errorf("7 GPUs lent at 1:1 (-want +got):\n%s", d)
	}
}

// A weight-0 child borrows only what its weighted siblings leave: P (10)
// over A (5, demand 6) and D (0, demand 4). lent = 10 - 5 = 5; A wants 1
// and takes it; the 4 left go to D. Shares A 6, D 4 (sum 10).
func TestFairShareWeightZeroTakesWhatIsLeft(t *testing.T) {
	root := &quota.Node{Name: "P", Children: []*quota.Node{{Name: "A"}, {Name: "D"}}}
	f := &FairFigures{Nominal: []int{10, 5, 0}, OwnNonIdle: []int{0, 0, 0}, NonIdle: []int{0, 0, 0}, Demand: []int{10, 6, 4}}
	want := []shareOf{
		{Quota: "P", Lent: 5},
		{Quota: "A", Defined: true, Base: 5, Wants: 1, Part: 1, Share: 6},
		{Quota: "D", Defined: true, Base: 0, Wants: 4, Part: 4, Share: 4},
	}
	if d := cmp.Diff(want, sharesOf(t, root, f)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// A deeper tree: each parent shares its own nominal among its children,
// whatever its own share of its parent. R (16) over X (12, own work 2) and
// Y (4); X over X1 (6) and X2 (4).
//
//	under X: X1 demand 9 -> base 6, wants 3; X2 demand 1 -> base 1;
//	  lent(X) = (12 - 2) - 7 = 3, all to X1: X1 9, X2 1.
//	under R: X demand 12 (own 2 + 10), nonidle 2 -> base 12, wants 0;
//	  Y demand 8 -> base 4, wants 4; lent(R) = 16 - 16 = 0: X 12, Y 4.
func TestFairShareNested(t *testing.T) {
	root := &quota.Node{Name: "R", Children: []*quota.Node{
		{Name: "X", Children: []*quota.Node{{Name: "X1"}, {Name: "X2"}}},
		{Name: "Y"},
	}}
	f := &FairFigures{Nominal: []int{16, 12, 6, 4, 4}, OwnNonIdle: []int{0, 2, 0, 0, 0}, NonIdle: []int{2, 2, 0, 0, 0},
		Demand: []int{20, 12, 9, 1, 8}}
	want := []shareOf{
		{Quota: "R"},
		{Quota: "X", Defined: true, Base: 12, Share: 12, Lent: 3},
		{Quota: "X1", Defined: true, Base: 6, Wants: 3, Part: 3, Share: 9},
		{Quota: "X2", Defined: true, Base: 1, Share: 1},
		{Quota: "Y", Defined: true, Base: 4, Wants: 4, Share: 4},
	}
	if d := cmp.Diff(want, sharesOf(t, root, f)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestBorrowedShare(t *testing.T) {
	for _, c := range []struct {
		borrowed, weight int
		want             float64
	}{{8, 16, 0.5}, {0, 16, 0}, {3, 1, 3}, {0, 0, 0}, {1, 0, math.Inf(1)}} {
		if got := BorrowedShare(c.borrowed, c.weight); got != c.want {
			t.Errorf("BorrowedShare(%d, %d) = %v, want %v", c.borrowed, c.weight, got, c.want)
		}
	}
	// In FairShares: the weight is the nominal unless given, and the share
	// borrowed / weight.
	f := &FairFigures{Nominal: []int{128, 48, 80}, OwnNonIdle: []int{0, 0, 0}, NonIdle: []int{0, 0, 0}, Demand: []int{0, 0, 0},
		Borrowed: []int{0, 12, 0}, Weight: []int{DefaultWeight, 4, 0}}
	got, err := FairShares(fairTree(), f)
	if err != nil {
		t.Fatal(err)
	}
	type ws struct {
		Weight int
		Share  float64
	}
	var gotWS []ws
	for _, x := range got {
		gotWS = append(gotWS, ws{x.Weight, x.BorrowedShare})
	}
	if d := cmp.Diff([]ws{{128, 0}, {4, 3}, {0, 0}}, gotWS); d != "" {
		t.Errorf("weights and borrowed shares (-want +got):\n%s", d)
	}
}

func TestFairSharesRefusesBadFigures(t *testing.T) {
	ok := func() *FairFigures {
		return &FairFigures{Nominal: []int{128, 48, 80}, OwnNonIdle: []int{0, 0, 0}, NonIdle: []int{0, 0, 0}, Demand: []int{0, 0, 0}}
	}
	for name, c := range map[string]struct {
		edit func(f *FairFigures)
		want string
	}{
		"short":      {func(f *FairFigures) { f.Demand = f.Demand[:2] }, "fair shares: Demand has 2 entries for a tree of 3 nodes"},
		"negative":   {func(f *FairFigures) { f.NonIdle[2] = -1 }, `fair shares: NonIdle of quota "Quota1.2" is -1, out of 0..2147483647`},
		"weight":     {func(f *FairFigures) { f.Weight = []int{1, 10001, 1} }, `fair shares: Weight of quota "Quota1.1" is 10001, out of -1..10000`},
		"no weights": {func(f *FairFigures) { f.Borrowed = []int{1} }, "fair shares: Borrowed has 1 entries for a tree of 3 nodes"},
	} {
		f := ok()
		c.edit(f)
		dst := []FairShare{{Quota: "kept"}}
		got, err := AppendFairShares(dst, fairTree(), f)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v, want %q", name, err, c.want)
		}
		if len(got) != 1 || got[0].Quota != "kept" {
			t.Errorf("%s: returned %v, want dst unchanged", name, got)
		}
	}
}

// randomFair makes a random tree of up to about 12 nodes (L1: children's
// nominals sum to at most their parent's) and figures an L2 ledger could
// give: each node's own namespaces hold non-idle and idle GPUs and ask for
// more, and subtree figures are sums. About one weight in three is
// explicit.
func randomFair(r *rand.Rand) (*quota.Node, *FairFigures) {
	f := &FairFigures{}
	names := 0
	var mk func(depth, budget int) *quota.Node
	mk = func(depth, budget int) *quota.Node {
		names++
		n := &quota.Node{Name: fmt.Sprintf("q%d", names)}
		i := len(f.Nominal)
		own := r.IntN(budget/2 + 3)
		idle, asked := r.IntN(8), r.IntN(3)*r.IntN(20)
		f.Nominal = append(f.Nominal, budget)
		f.OwnNonIdle = append(f.OwnNonIdle, own)
		f.NonIdle = append(f.NonIdle, own)
		f.Demand = append(f.Demand, own+idle+asked)
		w := DefaultWeight
		if r.IntN(3) == 0 {
			w = r.IntN(5) * r.IntN(MaxWeight/4+1) / 100
		}
		f.Weight = append(f.Weight, w)
		if depth < 3 {
			left := budget
			for k := r.IntN(4); k > 0; k-- {
				share := r.IntN(left + 1)
				left -= share
				j := len(f.Nominal)
				n.Children = append(n.Children, mk(depth+1, share))
				f.NonIdle[i] += f.NonIdle[j]
				f.Demand[i] += f.Demand[j]
			}
		}
		return n
	}
	root := mk(0, 8+r.IntN(120))
	return root, f
}

// Property: over random trees, for every parent P whose children's shares
// are defined, their fair shares sum to min(sum of demands, what P has to
// share: bases + lent = max(0, nominal(P) - own(P))); no child gets more
// than its demand or less than its base; the children still wanting more
// than their part (unsaturated, positive weight) all have the same part
// per weight, at least that of every saturated one; the same figures give
// the same shares; and listing the children in another order changes no
// node's share.
func TestFairShareProperties(t *testing.T) {
	seeds := 2000
	if testing.Short() {
		seeds = 300
	}
	const eps = 1e-9
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 19))
		root, f := randomFair(r)
		got, err := FairShares(root, f)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		fail := func(format string, a ...any) {
			t.Helper()
			t.Errorf("seed %d: "+format, append([]any{seed}, a...)...)
		}
		for p := range got {
			var kids []int
			for c := range got {
				if got[c].Parent == p {
					kids = append(kids, c)
				}
			}
			if len(kids) == 0 || !got[kids[0]].Defined {
				continue
			}
			sum, demand := 0.0, 0
			level := -1.0 // the unsaturated children's part per weight
			for _, c := range kids {
				x := got[c]
				sum += x.Share
				demand += f.Demand[c]
				if x.Share > float64(f.Demand[c])+eps || x.Share < float64(x.Base)-eps || x.Part < -eps || x.Part > float64(x.Wants)+eps {
					fail("%s: share %v, part %v, base %d, wants %d, demand %d", x.Quota, x.Share, x.Part, x.Base, x.Wants, f.Demand[c])
				}
				if x.Weight > 0 && x.Part < float64(x.Wants)-eps {
					l := x.Part / float64(x.Weight)
					if level >= 0 && math.Abs(l-level) > eps*max(1, level) {
						fail("%s: part per weight %v, another unsaturated child has %v", x.Quota, l, level)
					}
					level = l
				}
			}
			room := max(0, f.Nominal[p]-f.OwnNonIdle[p])
			if want := float64(min(demand, room)); math.Abs(sum-want) > eps*max(1, want) {
				fail("children of %s: shares sum to %v, want min(demands %d, room %d)", got[p].Quota, sum, demand, room)
			}
			for _, c := range kids {
				x := got[c]
				if level >= 0 && x.Weight > 0 && x.Wants > 0 && x.Part >= float64(x.Wants)-eps && float64(x.Wants)/float64(x.Weight) > level+eps*max(1, level) {
					fail("%s: saturated at %v per weight, above the unsaturated level %v", x.Quota, float64(x.Wants)/float64(x.Weight), level)
				}
			}
		}
		again, _ := FairShares(root, f)
		if d := cmp.Diff(got, again); d != "" {
			fail("not deterministic:\n%s", d)
		}
		// Reverse every node's children (and the figures' pre-order with
		// them): each node keeps its share.
		rev, rf := reversed(root, f)
		other, err := FairShares(rev, rf)
		if err != nil {
			t.Fatalf("seed %d: reversed: %v", seed, err)
		}
		byName := func(xs []FairShare) map[string]FairShare {
			m := map[string]FairShare{}
			for _, x := range xs {
				x.Parent = 0 // indices differ
				m[x.Quota] = x
			}
			return m
		}
		if d := cmp.Diff(byName(got), byName(other), cmpopts.EquateApprox(0, 1e-9)); d != "" {
			fail("children's order changes shares (-declared +reversed):\n%s", d)
		}
	}
}

// reversed returns a copy of the tree with every node's children in
// reverse order, and f re-indexed to its pre-order.
func reversed(root *quota.Node, f *FairFigures) (*quota.Node, *FairFigures) {
	index := map[string]int{}
	i := 0
	root.Walk(func(n *quota.Node) { index[n.Name] = i; i++ })
	var rev func(n *quota.Node) *quota.Node
	rev = func(n *quota.Node) *quota.Node {
		c := &quota.Node{Name: n.Name}
		for k := len(n.Children) - 1; k >= 0; k-- {
			c.Children = append(c.Children, rev(n.Children[k]))
		}
		return c
	}
	out := rev(root)
	g := &FairFigures{}
	out.Walk(func(n *quota.Node) {
		j := index[n.Name]
		g.Nominal = append(g.Nominal, f.Nominal[j])
		g.OwnNonIdle = append(g.OwnNonIdle, f.OwnNonIdle[j])
		g.NonIdle = append(g.NonIdle, f.NonIdle[j])
		g.Demand = append(g.Demand, f.Demand[j])
		g.Weight = append(g.Weight, f.Weight[j])
	})
	return out, g
}

// Property: multiplying every explicit weight by the same factor, with
// no default weight among the wanting children, leaves every share as it
// was (only the ratios of weights count).
func TestFairShareWeightsScale(t *testing.T) {
	for seed := range 300 {
		r := rand.New(rand.NewPCG(uint64(seed), 1419))
		root, f := randomFair(r)
		for i := range f.Weight {
			f.Weight[i] = 1 + r.IntN(100)
		}
		got, err := FairShares(root, f)
		if err != nil {
			t.Fatal(err)
		}
		k := 1 + r.IntN(99)
		g := *f
		g.Weight = nil
		for _, w := range f.Weight {
			g.Weight = append(g.Weight, w*k)
		}
		scaled, err := FairShares(root, &g)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if math.Abs(got[i].Share-scaled[i].Share) > 1e-9*max(1, got[i].Share) {
				t.Errorf("seed %d: %s: share %v, %v with weights x%d", seed, got[i].Quota, got[i].Share, scaled[i].Share, k)
			}
		}
	}
}

// BenchmarkFairShares is one instant of the simulator's fair-lending
// figures on the reference tree (three nodes), the slice reused.
func BenchmarkFairShares(b *testing.B) {
	root := fairTree()
	f := &FairFigures{Nominal: []int{128, 48, 80}, OwnNonIdle: []int{8, 30, 10}, NonIdle: []int{48, 30, 10}, Demand: []int{168, 120, 40}}
	var out []FairShare
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if out, err = AppendFairShares(out[:0], root, f); err != nil {
			b.Fatal(err)
		}
	}
}
