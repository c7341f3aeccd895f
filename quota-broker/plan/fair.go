package plan

import (
	"fmt"
	"math"
)

// Fair give-back, rule L14.fair (DESIGN L14). Under IdleOrderFair an idle
// claimant that fits on no free GPUs may stop idle allocations of another
// quota node, in its own flavor (the planner's), so that the borrowed GPUs
// move toward the fair shares without ever moving back and forth:
//
//  1. candidates (fairCandidate): idle allocations, not of the claimant's
//     own job, of a node that is neither the claimant's node, nor one of
//     its ancestors or descendants, not younger than min_runtime (no
//     fallback to younger ones, unlike L6), and a victim at all (not of an
//     active reservation, not being stopped, not claimed by another owner);
//     a batch unit only if every allocation in it is one;
//  2. sides (fairSides): with P the lowest common ancestor of the
//     claimant's node and the victim's, C1 and C2 are P's children above
//     the claimant's node and the victim's;
//  3. order on a node (fairSetOn): repeatedly the candidate whose C2 has
//     the highest borrowed share, with the stops chosen before it applied,
//     ties by L5's key (victimKey);
//  4. condition (fairAllowed): a candidate is taken only while its own
//     node and every node up to C2 borrow, and while C2's borrowed share,
//     with the stops chosen before it and itself applied, stays at or
//     above C1's after the whole job's admission (Kueue's
//     LessThanOrEqualToFinalShare): no pair of nodes can take GPUs back
//     and forth (two infinite shares, of sides that borrow at weight 0,
//     compare by their borrowed GPUs instead);
//  5. a node's set is then made minimal as L6 does (drop, from the last
//     added backwards, each unit not needed), and L6 picks the node
//     (victimSet.better), eviction budgets applied (budget.go).

// stepFair is the class of every candidate of rule L14.fair. It only
// compares fair sets with one another.
const stepFair step = 5

// fairVictims returns the best victim set of rule L14.fair for claim c of
// an idle job, or nil when no node has one, with the keys of its units.
func (p *planner) fairVictims(c *claim) (*victimSet, []victimKey) {
	// A search that found nothing is not made again for the same shape
	// until the plan admits or stops something (fairNone).
	memo := fairMemo{q: c.j.q, gpus: c.g.GPUs, ask: p.fairAsk(c), model: c.g.Model}
	if len(c.nodes) > 0 {
		memo.nodes = &c.nodes[0]
	}
	if m, ok := p.fairNone[memo]; ok && m == (fairMark{p.fairEpoch, p.st}) {
		return nil, nil
	}
	set, keys := p.fairSearch(c)
	if set == nil && p.budgetWhy == "" {
		if p.fairNone == nil {
			p.fairNone = map[fairMemo]fairMark{}
		}
		p.fairNone[memo] = fairMark{p.fairEpoch, p.st}
	}
	return set, keys
}

// fairMemo is the shape of a claim whose fair search found nothing: its
// node, its allocation's GPUs and model, its feasible nodes (the list the
// feasibility cache shares between claims of one placement), and what its
// admission adds to its side (fairAsk). fairMark is when: the planner's
// fairEpoch, which admitOne and stopUnit advance, and the state.
type fairMemo struct {
	q     *qnode
	gpus  int
	ask   int
	model string
	nodes *int
}

type fairMark struct {
	epoch uint64
	st    *state
}

// fairSearch is fairVictims without the memo.
func (p *planner) fairSearch(c *claim) (*victimSet, []victimKey) {
	keys, ok := p.fairCandidates(c)
	var best *victimSet
	try := &victimSet{}
	for _, ni := range c.nodes {
		p.victimEvals++
		if p.fairSetOn(p.nodes[ni], c, keys, ok, try) && p.withinBudgets(try, c) && (best == nil || try.better(best)) {
			best, try = try, &victimSet{}
		}
	}
	if best == nil {
		return nil, nil
	}
	return best, keys
}

// fairCandidates returns every unit's key for claim c and whether it is a
// candidate (fairCandidate). They are kept for the claim's next
// allocations: within one claim only the plan's own stops change them,
// and fairSetOn skips the units stopped since.
func (p *planner) fairCandidates(c *claim) ([]victimKey, []bool) {
	fc := &p.fairCands
	if fc.c == c && fc.st == p.st && len(fc.keys) == len(p.units) {
		return fc.keys, fc.ok
	}
	keys, ok := grown(fc.keys, len(p.units)), grown(fc.ok, len(p.units)) // its own: other claims' searches use p.buf
	for u := range p.units {
		keys[u], ok[u] = p.fairCandidate(u, c)
	}
	*fc = fairCands{c: c, st: p.st, keys: keys, ok: ok}
	return keys, ok
}

// fairCands are the candidates of the last claim that searched for a
// fair set (fairCandidates).
type fairCands struct {
	c    *claim
	st   *state
	keys []victimKey
	ok   []bool
}

// fairCandidate returns unit u's key for idle claim c and whether it is a
// candidate of rule L14.fair (step 1 above).
func (p *planner) fairCandidate(u int, c *claim) (victimKey, bool) {
	q := c.j.q
	un := &p.units[u]
	var worst victimKey
	for n, ai := range un.allocs {
		a := &p.allocs[ai]
		if !a.idle || a.q == nil || !a.victimable || p.st.stopped[ai] || p.claimedByOther(ai, c.cid, c.alt) ||
			a.q == q || a.q.isDescendantOf(q) || q.isDescendantOf(a.q) ||
			p.settings.MinRuntime > 0 && p.now.UnixNano()-a.started < int64(p.settings.MinRuntime) {
			return victimKey{}, false
		}
		if n > 0 && a.q != p.allocs[un.allocs[0]].q {
			return victimKey{}, false // one job, one namespace: cannot happen
		}
		k := victimKey{priority: a.priority, started: a.started, alloc: int32(ai), step: stepFair}
		if n == 0 || p.keyLess(worst, k) {
			worst = k
		}
	}
	return worst, len(un.allocs) > 0
}

// fairSides returns C1 and C2: the children of the lowest common ancestor
// of nodes a (the claimant's) and b (the victim's) above a and above b.
// Neither node is an ancestor of the other (fairCandidate).
func fairSides(a, b *qnode) (c1, c2 *qnode) {
	c1 = a
	for c1.parent != nil && !(c1.parent.first <= b.index && b.index <= c1.parent.last) {
		c1 = c1.parent
	}
	c2 = b
	for c2.parent != c1.parent {
		c2 = c2.parent
	}
	return c1, c2
}

// fairShare is node q's borrowed share (BorrowedShare: L4's borrowed GPUs
// over its weight) with its subtree's used GPUs changed by delta.
func (p *planner) fairShare(q *qnode, delta int) float64 {
	return BorrowedShare(p.borrowedWith(q, delta), q.weight)
}

// borrowedWith is node q's borrowed GPUs (DESIGN L4: max(0, used -
// max(nominal, nonidle)) on its subtree) with its used GPUs changed by
// delta.
func (p *planner) borrowedWith(q *qnode, delta int) int {
	l := p.st.ledger
	return max(0, l.used[q.index]+delta-max(q.nominal, l.nonIdle[q.index]))
}

// fairSetOn builds node n's set of rule L14.fair for claim c into set
// (steps 3-5 above) and reports whether there is one. keys and ok are the
// units' candidacy (fairCandidate).
func (p *planner) fairSetOn(n *cnode, c *claim, keys []victimKey, ok []bool, set *victimSet) bool {
	cands, have, enough := p.nodeCandidates(n, c, ok)
	if !enough {
		return false
	}
	// taken GPUs per quota node index, of the units chosen so far
	// (subtree figures: a unit's GPUs count at its node and ancestors).
	taken := &p.fairTaken
	taken.reset(len(p.quotas))
	var chosen []unitGPUs
	for have < c.g.GPUs {
		bi, bestShare := -1, math.Inf(-1)
		for i, cu := range cands {
			if cu.gpus < 0 {
				continue // tried, not allowed
			}
			_, c2 := fairSides(c.j.q, p.allocs[p.units[cu.unit].allocs[0]].q)
			sh := p.fairShare(c2, -taken.of(c2.index))
			if bi < 0 || sh > bestShare || sh == bestShare && p.keyLess(keys[cu.unit], keys[cands[bi].unit]) {
				bi, bestShare = i, sh
			}
		}
		if bi < 0 {
			return false
		}
		cu := cands[bi]
		if !p.fairAllowed(c, cu.unit, taken) {
			cands[bi].gpus = -1
			continue
		}
		chosen = append(chosen, cu)
		p.takeFair(cu.unit, taken, +1)
		cands[bi].gpus = -1
		have += cu.gpus
	}
	p.minimalSet(n, c, chosen, have, keys, set)
	return true
}

// takeFair adds (sign +1) unit u's GPUs to taken at its node and every
// ancestor.
func (p *planner) takeFair(u int, taken *fairTaken, sign int) {
	for _, ai := range p.units[u].allocs {
		a := &p.allocs[ai]
		taken.add(a.q.index, sign*a.count)
		for _, an := range a.q.ancestors {
			taken.add(an.index, sign*a.count)
		}
	}
}

// fairTaken is the GPUs a node's fair set takes so far, per quota node
// index (fairSetOn), reused from node to node: reset clears only the
// entries touched.
type fairTaken struct {
	gpus    []int
	touched []int
}

func (t *fairTaken) reset(n int) {
	if len(t.gpus) < n {
		t.gpus = make([]int, n)
		t.touched = t.touched[:0]
		return
	}
	for _, i := range t.touched {
		t.gpus[i] = 0
	}
	t.touched = t.touched[:0]
}

func (t *fairTaken) add(i, n int) {
	if t.gpus[i] == 0 {
		t.touched = append(t.touched, i)
	}
	t.gpus[i] += n
}

func (t *fairTaken) of(i int) int { return t.gpus[i] }

// fairAllowed is step 4 above for unit u of claim c, with the GPUs of the
// units chosen before it in taken.
func (p *planner) fairAllowed(c *claim, u int, taken *fairTaken) bool {
	vq := p.allocs[p.units[u].allocs[0]].q
	c1, c2 := fairSides(c.j.q, vq)
	for q := vq; ; q = q.parent {
		if p.borrowedWith(q, -taken.of(q.index)) <= 0 {
			return false // it no longer borrows
		}
		if q == c2 {
			break
		}
	}
	gpus := 0
	for _, ai := range p.units[u].allocs {
		gpus += p.allocs[ai].count
	}
	d1, d2 := p.fairAsk(c)-taken.of(c1.index), -taken.of(c2.index)-gpus
	s1, s2 := p.fairShare(c1, d1), p.fairShare(c2, d2)
	if math.IsInf(s1, 1) && math.IsInf(s2, 1) {
		// Both sides borrow at weight 0: infinite shares do not compare,
		// so their borrowed GPUs do, or two such sides would take the
		// same GPUs back and forth.
		return p.borrowedWith(c2, d2) >= p.borrowedWith(c1, d1)
	}
	return s2 >= s1
}

// fillSet sets a victim set's worst key, work lost and GPUs from its units
// (DESIGN L6's comparison).
func (p *planner) fillSet(set *victimSet, keys []victimKey) {
	for i, u := range set.units {
		if i == 0 || p.keyLess(set.worst, keys[u]) {
			set.worst = keys[u]
		}
		for _, ai := range p.units[u].allocs {
			a := &p.allocs[ai]
			set.gpus += a.count
			set.workLost += float64(a.count) * max(0, float64(p.now.UnixNano()-a.started)/1e9)
		}
	}
}

// fairReason says why idle allocation a is stopped for claim c under rule
// L14.fair: the two sides and their borrowed shares now (after the stop).
func (p *planner) fairReason(a *alloc, c *claim) string {
	c1, c2 := fairSides(c.j.q, a.q)
	return fmt.Sprintf("fair give-back (L14): idle allocation of %s, whose side %s borrows %s GPUs per weight, reclaimed for %s, whose side %s borrows %s after admission",
		a.q.node.Name, c2.node.Name, shareText(p.fairShare(c2, 0)), c.j.q.node.Name, c1.node.Name, shareText(p.fairShare(c1, p.fairAsk(c))))
}

// fairAsk is the GPUs that "the whole job's admission" adds to the
// claimant's side (DESIGN L14, Kueue's share after the preemptor's
// admission): for a job whose allocations are admitted and stopped one by
// one (a service or elastic batch job: each allocation is a unit of L5),
// the allocation being placed, so that each allocation is its own
// admission and the sides meet within one allocation; for a job stopped
// whole (a batch job that is not elastic, a flex request), all it asks for
// that the plan has not admitted yet (job.fairLeft).
func (p *planner) fairAsk(c *claim) int {
	if c.j.fairLeft > 0 {
		return c.j.fairLeft
	}
	return c.g.GPUs
}

// shareText writes a borrowed share for a reason: "1.50", or "inf".
func shareText(s float64) string {
	if math.IsInf(s, 1) {
		return "inf"
	}
	return fmt.Sprintf("%.2f", s)
}
