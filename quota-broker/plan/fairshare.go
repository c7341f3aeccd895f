package plan

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/gputide/gputide/quota-broker/quota"
)

// Fair shares (DESIGN L14). This file computes, for one flavor, each quota
// node's fair share of its parent's GPUs and its borrowed share, from
// figures the caller gives. It is pure arithmetic: it reads the tree's
// shape and names and nothing else of a quota.Node, so that a caller with
// per-flavor nominals (DESIGN L13) calls it once per flavor with that
// flavor's figures. Plans do not cap admissions at the fair share (DESIGN
// L14): they approach it through the order and rule L14.fair (options.go,
// fair.go), which compare borrowed shares; the simulator's report and the
// tests measure against the fair shares.

// MaxWeight is the largest explicit weight a quota node may set (DESIGN
// L14: 0..10,000).
const MaxWeight = quota.MaxWeight

// DefaultWeight, in FairFigures.Weight, marks a node without an explicit
// weight: its weight is then its nominal in the flavor, not capped at
// MaxWeight (DESIGN L14's default).
const DefaultWeight = -1

// FairFigures are one flavor's figures of every node of a quota tree, the
// inputs of DESIGN L14. Each slice holds one entry per node, indexed in
// the tree's pre-order (quota.Node.Walk's order: a node, then each child's
// subtree in declaration order; the root is 0). All figures are devices
// of the one flavor (GPUs for the implicit flavor), never negative.
type FairFigures struct {
	// Nominal is each node's nominal in the flavor.
	Nominal []int
	// OwnNonIdle is the non-idle GPUs held by the node's own namespaces'
	// allocations (debt included), without its descendants': "P's own
	// non-idle usage".
	OwnNonIdle []int
	// NonIdle is the non-idle GPUs held in the node's subtree (L4's
	// nonidle).
	NonIdle []int
	// Demand is the GPUs the node's subtree holds or asks for: its
	// allocations' GPUs, idle or not, plus the GPUs of its pending
	// allocations. It is at least NonIdle when the caller counts as L2
	// does; a smaller one is taken as given.
	Demand []int
	// Borrowed is the node's borrowed GPUs (L4: max(0, used - max(nominal,
	// nonidle)) over its subtree), for its borrowed share. nil: no node
	// borrows.
	Borrowed []int
	// Weight is each node's explicit weight in the flavor, 0..MaxWeight,
	// or DefaultWeight. nil: every node has the default.
	Weight []int
}

// FairShare is one quota node's place in DESIGN L14 for one flavor. The
// whole figures are GPUs; Part and Share are GPUs too, fractional.
type FairShare struct {
	// Quota is the node's name, Parent its parent's index in the same
	// pre-order (-1 for the root).
	Quota  string
	Parent int
	// Weight is the node's weight: its explicit weight, or its nominal.
	Weight int
	// Defined reports whether L14 defines the node's fair share now:
	// false for the root (it has no parent) and for every child of a
	// parent whose children's bases exceed what the parent's own non-idle
	// usage leaves of its nominal (by day, the parent's inference takes
	// its children's GPUs by L5). Reports and tests leave those instants
	// out.
	Defined bool
	// Base is max(nonidle, min(nominal, demand)); Wants is max(0, demand -
	// Base). Both are set for every node but the root, defined or not.
	Base, Wants int
	// Part is the node's part of its parent's lent GPUs, 0 <= Part <=
	// Wants; Share = Base + Part is its fair share. Both are 0 when the
	// share is not defined.
	Part, Share float64
	// Lent is, for a node with children, the GPUs it lends them: max(0,
	// nominal - own non-idle usage) - the sum of its children's bases,
	// when that is not negative (their shares are defined); else 0.
	Lent int
	// BorrowedShare is Borrowed / Weight (BorrowedShare).
	BorrowedShare float64
}

// FairShares computes, for one flavor, the fair share and the borrowed
// share of every node of the tree rooted at root (DESIGN L14), in
// pre-order (see FairFigures). It is AppendFairShares with no slice to
// reuse.
func FairShares(root *quota.Node, f *FairFigures) ([]FairShare, error) {
	return AppendFairShares(nil, root, f)
}

// AppendFairShares appends to dst one FairShare per node of the tree rooted
// at root, in pre-order, computed from f (one flavor's figures), and
// returns the extended slice. It fails, appending nothing, when a slice
// of f has not one entry per node or holds a figure out of range.
//
// For each parent P, with leaves(P) = max(0, nominal(P) - P's own non-idle
// usage), each child c gets
//
//	base(c)  = max(nonidle(c), min(nominal(c), demand(c)))
//	wants(c) = max(0, demand(c) - base(c))
//	lent(P)  = leaves(P) - sum of base(c)
//
// and, when lent(P) >= 0, the lent GPUs are shared among the children that
// want them by water-filling on their weights: each wanting child of
// positive weight w gets lent * w / (sum of the wanting children's
// weights), a child that wants less than that gets what it wants, and the
// rest is shared again among the others, until every child has its part or
// nothing is left. GPUs still left once every child of positive weight has
// all it wants go to the wanting children of weight 0, shared again by
// water-filling as if each weighed 1: a weight-0 child borrows only what no
// weighted sibling wants (its borrowed share is infinite, BorrowedShare),
// and no lent GPU is left unshared while a child wants it. fair share(c) =
// base(c) + part(c). When lent(P) < 0 the shares of P's children are not
// defined (FairShare.Defined).
//
// Fractions: parts are not rounded to whole GPUs. Every child that wants
// no more than its level gets its whole want (a whole number of GPUs, so
// what is left stays whole and those comparisons are exact integer
// arithmetic); the children left share the rest in proportion to their
// weights as float64, so that 7 GPUs lent to two children of equal weight
// give each 3.5. The parts of P's children sum to min(lent(P), sum of
// wants) within float64 rounding, and P's children's fair shares to
// min(sum of max(base, demand), leaves(P)). Time integrals (GPU-hours)
// take these shares as they are; a caller that needs whole GPUs rounds
// them itself.
func AppendFairShares(dst []FairShare, root *quota.Node, f *FairFigures) ([]FairShare, error) {
	if root == nil {
		return dst, fmt.Errorf("fair shares: no quota tree")
	}
	if f == nil {
		f = &FairFigures{}
	}
	start := len(dst)
	var walk func(n *quota.Node, parent int)
	walk = func(n *quota.Node, parent int) {
		i := len(dst) - start
		dst = append(dst, FairShare{Quota: n.Name, Parent: parent})
		for _, c := range n.Children {
			walk(c, i)
		}
	}
	walk(root, -1)
	out := dst[start:]
	if err := f.check(out); err != nil {
		return dst[:start], err
	}
	for i := range out {
		x := &out[i]
		x.Weight = fairWeight(f.Weight, f.Nominal, i)
		borrowed := 0
		if f.Borrowed != nil {
			borrowed = f.Borrowed[i]
		}
		x.BorrowedShare = BorrowedShare(borrowed, x.Weight)
		if x.Parent >= 0 {
			x.Base = max(f.NonIdle[i], min(f.Nominal[i], f.Demand[i]))
			x.Wants = max(0, f.Demand[i]-x.Base)
		}
	}
	// The children of each parent, grouped in pre-order (a counting sort
	// on the parent index): kids[first[p]:first[p+1]].
	first := make([]int, len(out)+1)
	for i := 1; i < len(out); i++ {
		first[out[i].Parent+1]++
	}
	for p := 1; p <= len(out); p++ {
		first[p] += first[p-1]
	}
	kids := make([]int, len(out))
	next := slices.Clone(first[:len(out)])
	for i := 1; i < len(out); i++ {
		p := out[i].Parent
		kids[next[p]] = i
		next[p]++
	}
	var scratch []int
	for p := range out {
		children := kids[first[p]:first[p+1]]
		if len(children) == 0 {
			continue
		}
		bases := 0
		for _, c := range children {
			bases += out[c].Base
		}
		lent := max(0, f.Nominal[p]-f.OwnNonIdle[p]) - bases
		if lent < 0 {
			continue // not defined (by day: the parent's own work takes its children's GPUs)
		}
		out[p].Lent = lent
		for _, c := range children {
			out[c].Defined = true
		}
		left := waterFill(out, children, int64(lent), func(c int) int64 { return int64(out[c].Weight) }, &scratch)
		if left > 0 {
			waterFill(out, children, left, func(c int) int64 {
				if out[c].Weight == 0 {
					return 1
				}
				return 0
			}, &scratch)
		}
		for _, c := range children {
			out[c].Share = float64(out[c].Base) + out[c].Part
		}
	}
	return dst, nil
}

// check reports a slice of f that has not one entry per node of out, or a
// figure out of range, naming the slice, the node and the value.
func (f *FairFigures) check(out []FairShare) error {
	n := len(out)
	for _, s := range []struct {
		name     string
		v        []int
		optional bool
	}{{"Nominal", f.Nominal, false}, {"OwnNonIdle", f.OwnNonIdle, false}, {"NonIdle", f.NonIdle, false},
		{"Demand", f.Demand, false}, {"Borrowed", f.Borrowed, true}, {"Weight", f.Weight, true}} {
		if s.optional && s.v == nil {
			continue
		}
		if len(s.v) != n {
			return fmt.Errorf("fair shares: %s has %d entries for a tree of %d nodes", s.name, len(s.v), n)
		}
		for i, v := range s.v {
			low, high := 0, quota.MaxGPUs
			if s.name == "Weight" {
				low, high = DefaultWeight, MaxWeight
			}
			if v < low || v > high {
				return fmt.Errorf("fair shares: %s of quota %q is %d, out of %d..%d", s.name, out[i].Quota, v, low, high)
			}
		}
	}
	return nil
}

// fairWeight is node i's weight (DESIGN L14): its explicit weight, or,
// without one, its nominal.
func fairWeight(weights, nominal []int, i int) int {
	if weights != nil && weights[i] != DefaultWeight {
		return weights[i]
	}
	return nominal[i]
}

// waterFill shares lent GPUs among the children of out listed in children
// that want some (FairShare.Wants > 0) and weigh more than 0 by weight, by
// water-filling (see AppendFairShares), adding each one's part to its
// Part; it returns the whole GPUs left once every such child has all it
// wants (0 when they are all shared). scratch is a reusable buffer.
//
// The children are taken in order of wants / weight, lowest first (then
// pre-order): while a child's wants are at most its level (the GPUs still
// left times its weight over the weights still sharing) it takes them
// all; the first one that wants more, and every one after it, shares the
// rest by weight.
func waterFill(out []FairShare, children []int, lent int64, weight func(c int) int64, scratch *[]int) int64 {
	cand := (*scratch)[:0]
	var sum int64
	for _, c := range children {
		if out[c].Wants > 0 && weight(c) > 0 {
			cand = append(cand, c)
			sum += weight(c)
		}
	}
	*scratch = cand
	if len(cand) == 0 {
		return lent
	}
	slices.SortFunc(cand, func(a, b int) int {
		// wants(a)/w(a) against wants(b)/w(b), exactly: wants(a)*w(b)
		// against wants(b)*w(a).
		if c := cmp128(int64(out[a].Wants), weight(b), int64(out[b].Wants), weight(a)); c != 0 {
			return c
		}
		return a - b
	})
	left := lent
	for k, c := range cand {
		w := weight(c)
		// wants(c) <= left * w / sum, in whole numbers.
		if cmp128(int64(out[c].Wants), sum, left, w) <= 0 {
			out[c].Part += float64(out[c].Wants)
			left -= int64(out[c].Wants)
			sum -= w
			continue
		}
		for _, d := range cand[k:] {
			out[d].Part += float64(left) * float64(weight(d)) / float64(sum)
		}
		return 0
	}
	return left
}

// cmp128 compares a*b with c*d, all not negative, without overflow.
func cmp128(a, b, c, d int64) int {
	h1, l1 := bits.Mul64(uint64(a), uint64(b))
	h2, l2 := bits.Mul64(uint64(c), uint64(d))
	switch {
	case h1 != h2:
		if h1 < h2 {
			return -1
		}
		return 1
	case l1 < l2:
		return -1
	case l1 > l2:
		return 1
	}
	return 0
}

// BorrowedShare is a node's borrowed share (DESIGN L14): its borrowed GPUs
// (L4) divided by its weight; with weight 0, 0 while it borrows nothing
// and +Inf once it borrows any.
func BorrowedShare(borrowed, weight int) float64 {
	if weight <= 0 {
		if borrowed <= 0 {
			return 0
		}
		return math.Inf(1)
	}
	return float64(borrowed) / float64(weight)
}
