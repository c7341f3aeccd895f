package plan

import (
	"fmt"
	"slices"
	"time"
)

// step is the class of a victim candidate (DESIGN L5). Lower goes first.
type step int8

const (
	stepNone     step = 0 // not a candidate
	stepIdleDebt step = 1 // idle allocations anywhere, then debt past its grace
	// stepStart: allocations displaced (L10) at the node of a claimant of
	// an active reservation, or at an ancestor (rule L10.start).
	stepStart    step = 2
	stepChild    step = 3 // descendants of a node with child-level preemption
	stepPriority step = 4 // the node's own lower-priority allocations
)

func (s step) rule() Rule {
	switch s {
	case stepIdleDebt:
		return RuleIdleDebt
	case stepStart:
		return RuleStart
	case stepChild:
		return RuleChild
	case stepFair:
		return RuleFair
	default:
		return RulePriority
	}
}

// victimKey orders victim candidates (DESIGN L5). Smaller keys go first:
//  1. lower step;
//  2. within step 1, idle allocations before debt;
//  3. lower job priority;
//  4. the most recently started (least work lost);
//  5. allocation ID, for a deterministic order.
//
// Its fields are laid out to take 24 bytes: a claim keys every unit.
type victimKey struct {
	started  int64 // Unix nanoseconds
	priority int32 // job priority, 1-100 (Validate)
	alloc    int32 // the allocation, whose ID breaks ties
	step     step
	debt     bool
}

// keyLess reports whether k goes before o.
func (p *planner) keyLess(k, o victimKey) bool {
	if k.step != o.step {
		return k.step < o.step
	}
	if k.debt != o.debt {
		return !k.debt
	}
	if k.priority != o.priority {
		return k.priority < o.priority
	}
	if k.started != o.started {
		return k.started > o.started
	}
	return p.allocs[k.alloc].a.ID < p.allocs[o.alloc].a.ID
}

// class is the part of a key that compares victim sets across nodes
// (DESIGN L6): step, then idle before debt, then job priority. Recency and
// the allocation ID order candidates within a node only; between nodes,
// work lost and then GPUs stopped decide (victimSet.better).
func (k victimKey) classLess(o victimKey) bool {
	if k.step != o.step {
		return k.step < o.step
	}
	if k.debt != o.debt {
		return !k.debt
	}
	return k.priority < o.priority
}

func (k victimKey) classEqual(o victimKey) bool {
	return k.step == o.step && k.debt == o.debt && k.priority == o.priority
}

// claim is what a claimant allocation asks for.
type claim struct {
	j     *job
	g     *Pending
	cid   int32
	nodes []int // feasible nodes
	// alt is a second owner whose held GPUs and GPUs being freed the
	// claim may take: the reservation of a job of an active reservation
	// (L10), else noClaimant.
	alt int32
	// drain is what the claim places ahead of its instant: a
	// reservation's shape (rule L10.drain) or a pre-warm (rule
	// L5.prewarm), or nil; disp is then, for a reservation, per
	// allocation, the quota node at which it will displace it at its start.
	drain *drainTarget
	disp  []*qnode
}

// candidates classifies every allocation for claim c (DESIGN L5) and
// returns, per unit, its key and whether the unit may be a victim. Only
// these may be stopped:
//   - step 1: idle allocations anywhere in the tree, then debt allocations
//     (L9) whose grace has passed;
//   - step 2: if the claimant's node has child-level preemption, the
//     non-idle allocations of its descendants (debt included);
//   - step 3: if the claimant's node has priority preemption, its own
//     non-idle allocations of lower job priority.
//
// Never a victim: system and sysbatch jobs, allocations of an active
// reservation (L10), namespaces outside the tree, allocations already being
// stopped (by the broker, for anyone, or by this plan), and, unless
// allowYoung, units younger than min_runtime. A batch unit is a candidate
// only if every allocation in it is; its key is its largest key.
func (p *planner) candidates(c *claim, allowYoung bool) (keys []victimKey, ok []bool) {
	keys = grown(p.buf.keys, len(p.units))
	ok = grown(p.buf.ok, len(p.units))
	p.buf.keys, p.buf.ok = keys, ok
	q := c.j.q
	young := func(started int64) bool {
		return !allowYoung && p.settings.MinRuntime > 0 && p.now.UnixNano()-started < int64(p.settings.MinRuntime)
	}
	// A unit of one allocation, most of them, is keyed from the allocation
	// alone (its youngest start is the allocation's); the others below.
	for ai := range p.allocs {
		a := &p.allocs[ai]
		if !a.alone {
			continue
		}
		if young(a.started) {
			keys[a.unit], ok[a.unit] = victimKey{}, false
			continue
		}
		keys[a.unit], ok[a.unit] = p.classify(a, c, q)
	}
	for _, ui := range p.shared {
		u := &p.units[ui]
		if young(u.youngest) {
			keys[ui], ok[ui] = victimKey{}, false
			continue
		}
		good := true
		var worst victimKey
		for n, ai := range u.allocs {
			a := &p.allocs[ai]
			k, yes := p.classify(a, c, q)
			if !yes {
				good = false
				break
			}
			if n == 0 || p.keyLess(worst, k) {
				worst = k
			}
		}
		keys[ui], ok[ui] = worst, good
	}
	return keys, ok
}

// classify returns the victim key of allocation a for claimant c in node q.
func (p *planner) classify(a *alloc, c *claim, q *qnode) (victimKey, bool) {
	if !a.victimable || p.st.stopped[a.index] || p.claimedByOther(a.index, c.cid, c.alt) {
		return victimKey{}, false
	}
	if a.q == c.j.q && a.a.Namespace == c.j.namespace && a.a.Job == c.j.name {
		return victimKey{}, false // never the claimant's own job
	}
	k := victimKey{priority: a.priority, started: a.started, alloc: int32(a.index)}
	switch {
	case a.idle:
		k.step = stepIdleDebt
	case p.st.debtOf(a.index) != nil && p.graceOver(p.st.debtOf(a.index)):
		k.step, k.debt = stepIdleDebt, true
	case c.drain != nil && c.drain.res != nil:
		// L10.drain: L5 step 1, then what the reservation will displace.
		if d := c.disp[a.index]; d == nil || (d != q && !q.isDescendantOf(d)) {
			return victimKey{}, false
		}
		k.step = stepStart
	case c.j.res != nil && p.displacedAtOrAbove(a, q):
		k.step = stepStart
	case q.node.ChildPreemption && a.q.isDescendantOf(q):
		k.step = stepChild
	case q.node.PriorityPreemption && a.q == q && int(a.priority) < c.j.priority:
		k.step = stepPriority
	default:
		return victimKey{}, false
	}
	return k, true
}

// displacedAtOrAbove reports whether allocation a is displaced (L10) at
// quota node q or at an ancestor of q.
func (p *planner) displacedAtOrAbove(a *alloc, q *qnode) bool {
	d := p.st.displacedOf(a.index)
	return d != nil && (d == q || q.isDescendantOf(d))
}

// victimSet is the units one node would stop for a claimant allocation.
type victimSet struct {
	node  int
	units []int
	worst victimKey // the largest key of its units
	// workLost is GPU-seconds: the sum, over every allocation the set
	// stops (all allocations of a batch unit, on any node), of its GPUs
	// times the seconds since it started (DESIGN L6).
	workLost float64
	gpus     int // GPUs stopped, all allocations of each unit
}

// better reports whether s is a better set than o (DESIGN L6): the set
// whose worst victim is in the lower class (step, idle before debt, job
// priority), then the set that loses less work, then the one that stops
// fewer GPUs, then the lower node ID: the lower node index, as
// planner.nodes is sorted by ID, each ID once (indexNodes).
func (s *victimSet) better(o *victimSet) bool {
	if !s.worst.classEqual(o.worst) {
		return s.worst.classLess(o.worst)
	}
	if s.workLost != o.workLost {
		return s.workLost < o.workLost
	}
	if s.gpus != o.gpus {
		return s.gpus < o.gpus
	}
	return s.node < o.node
}

// findVictimsScan is findVictims without the cache (victimcache.go): for
// each allocation it searches every node where it can run (DESIGN L6: take
// that node's candidates in key order until it fits, then drop, from the
// last added backwards, each one not needed; choose the best node). Units
// younger than min_runtime are allowed only when no node has a set without
// them. It returns nil when nothing makes room, else the set and the
// candidates' keys. Tests compare the two.
func (p *planner) findVictimsScan(c *claim) (*victimSet, []victimKey) {
	for _, allowYoung := range []bool{false, true} {
		if allowYoung && p.settings.MinRuntime <= 0 {
			break
		}
		keys, ok := p.candidates(c, allowYoung)
		var best *victimSet
		try := &victimSet{}
		for _, ni := range c.nodes {
			p.victimEvals++
			if p.victimsOn(p.nodes[ni], c, keys, ok, try) && p.withinBudgets(try, c) && (best == nil || try.better(best)) {
				best, try = try, &victimSet{}
			}
		}
		if best != nil {
			return best, keys
		}
	}
	return nil, nil
}

// victimsOn builds node n's minimal victim set for claim c into set and
// reports whether there is one.
func (p *planner) victimsOn(n *cnode, c *claim, keys []victimKey, ok []bool, set *victimSet) bool {
	cands, have, enough := p.nodeCandidates(n, c, ok)
	if !enough {
		return false // even every candidate on the node is not enough
	}
	if len(cands) <= 12 {
		// A node has a few candidates: an insertion sort, as slices.SortFunc
		// does for 12 or fewer, without its calls.
		for i := 1; i < len(cands); i++ {
			for j := i; j > 0 && p.keyLess(keys[cands[j].unit], keys[cands[j-1].unit]); j-- {
				cands[j], cands[j-1] = cands[j-1], cands[j]
			}
		}
	} else {
		slices.SortFunc(cands, func(a, b unitGPUs) int {
			if p.keyLess(keys[a.unit], keys[b.unit]) {
				return -1
			}
			return 1
		})
	}
	k := 0
	for ; k < len(cands) && have < c.g.GPUs; k++ {
		have += cands[k].gpus
	}
	p.minimalSet(n, c, cands[:k], have, keys, set)
	return true
}

// nodeCandidates returns node n's candidate units for claim c (those ok,
// not stopped by this plan), each with the GPUs it frees there (gpusOn),
// in p.scratch; have, the GPUs free for c on n now; and whether free and
// candidates together hold one allocation of c.
func (p *planner) nodeCandidates(n *cnode, c *claim, ok []bool) (cands []unitGPUs, have int, enough bool) {
	cands = p.scratch[:0]
	have = p.freeOn(n, c)
	all := have
	for _, ai := range n.allocs {
		u := p.allocs[ai].unit
		if !ok[u] || p.st.stopped[ai] || slices.ContainsFunc(cands, func(x unitGPUs) bool { return x.unit == u }) {
			continue
		}
		g := p.gpusOn(u, ai, n, c)
		cands = append(cands, unitGPUs{unit: u, gpus: g})
		all += g
	}
	p.scratch = cands
	return cands, have, len(cands) > 0 && all >= c.g.GPUs
}

// minimalSet makes set node n's set of the units taken, in the order they
// were taken, with have the GPUs free for c once all are stopped (DESIGN
// L6): each one not needed is dropped, from the last taken backwards.
func (p *planner) minimalSet(n *cnode, c *claim, taken []unitGPUs, have int, keys []victimKey, set *victimSet) {
	units := set.units[:0]
	for i := len(taken) - 1; i >= 0; i-- {
		if have-taken[i].gpus >= c.g.GPUs {
			have -= taken[i].gpus
			taken[i].gpus = -1 // dropped
		}
	}
	for _, t := range taken {
		if t.gpus >= 0 {
			units = append(units, t.unit)
		}
	}
	*set = victimSet{node: n.index, units: units}
	p.fillSet(set, keys)
}

// unitGPUs is a candidate unit with the GPUs it would free on one node.
type unitGPUs struct {
	unit int
	gpus int
}

// gpusOn counts the healthy GPUs of c's model that unit u, of allocation
// ai on node n, holds on n and that c could take once u is stopped: not
// those held (L10) for another owner.
func (p *planner) gpusOn(u, ai int, n *cnode, c *claim) int {
	model := c.g.Model
	held := p.st.nodeHeld != nil && p.st.nodeHeld[n.index] > 0
	if a := &p.allocs[ai]; a.alone && !held && n.model != "" && modelMatches(model, n.model) && int(a.healthy) == a.count {
		return a.count // u is a alone, all of its GPUs healthy and of the model
	}
	p.resolve(n.index)
	count := 0
	for _, ai := range p.units[u].allocs {
		a := &p.allocs[ai]
		if a.node != n.index {
			continue
		}
		for _, g := range a.gpus {
			if !p.gpus[g].healthy || !modelMatches(model, p.gpu(g).Model) {
				continue
			}
			if held {
				if h := p.st.heldBy[g]; h != noClaimant && (c.drain != nil || (h != c.cid && h != c.alt)) {
					continue
				}
			}
			count++
		}
	}
	return count
}

// stopUnits stops every allocation of the set's units for claim c.
func (p *planner) stopUnits(set *victimSet, c *claim, keys []victimKey) {
	for _, u := range set.units {
		p.stopUnit(u, keys[u], c)
	}
}

// stopUnit stops every allocation of unit u, of key k, for claim c: their
// GPUs are freed for c only (L7), they leave the ledger, and debt and
// displaced are derived again without them (L9). Every stop of the unit
// has the unit's rule (unitRule).
func (p *planner) stopUnit(u int, k victimKey, c *claim) {
	st := p.st
	rule := unitRule(k, c)
	worst := &p.allocs[k.alloc]
	for _, ai := range p.units[u].allocs {
		a := &p.allocs[ai]
		p.resolve(a.node)
		st.stopped[ai] = true
		p.vc.touch(a.node)
		for _, g := range a.gpus {
			if p.gpus[g].healthy && st.freeFor[g] == noClaimant {
				st.nodeFreeing[a.node]++
			}
			st.freeFor[g] = c.cid
		}
		st.ledger.add(a.q, -a.count, a.idle, st.debtOf(ai) != nil, a.reserved)
		p.countEviction(a.q, a.count)
		act := Action{
			Action:    ActionStop,
			Alloc:     a.a.ID,
			Namespace: a.a.Namespace,
			Job:       a.a.Job,
			Group:     a.a.Group,
			Node:      p.nodes[a.node].n.ID,
			GPUs:      a.count,
			Rule:      rule,
			For:       c.g.Key(),
			Reason:    p.stopReason(a, worst, k, c),
		}
		switch {
		case c.drain != nil && c.drain.res != nil:
			act.For, act.Reservation = GroupKey{}, c.drain.res.ID
		case c.drain != nil:
			act.Reason += fmt.Sprintf("; %s, which scales up at %s", c.drain.label(), c.drain.at.Format(time.RFC3339))
		}
		st.actions = append(st.actions, act)
	}
	p.vc.unitStopped(u)
	p.fairEpoch++
	p.rederive()
}

// unitRule is the rule of every stop of a unit of key k for claim c, the
// one place that derives it. DESIGN L5: a batch unit's stop names the rule
// of its largest-key allocation, and k is the unit's key, that of its
// largest-key allocation (candidates, yieldUnits), so the rule follows from
// k's step alone: L5.1, L10.start, L5.2 or L5.3. A drain's stops are L10.drain
// and a pre-warm's L5.prewarm, whatever the step (DESIGN L5 Pre-warm,
// L10 Drain).
func unitRule(k victimKey, c *claim) Rule {
	switch {
	case c.drain != nil && c.drain.res != nil:
		return RuleDrain
	case c.drain != nil:
		return RulePrewarm
	}
	return k.step.rule()
}

// stopReason says why allocation a, of a unit of key k whose largest-key
// allocation is worst, is stopped for claim c. The text describes a
// itself where a's own class is the one it names (a batch unit may hold
// an idle or debt allocation while its worst is displaced or of step 2 or
// 3); every case reads only the facts it has checked, so no mix of classes
// in one unit can leave one of them unset. An allocation with no text of
// its own is stopped with its batch job, and says why worst is.
func (p *planner) stopReason(a, worst *alloc, k victimKey, c *claim) string {
	debt, displaced := p.st.debtOf(a.index), p.st.displacedOf(a.index)
	switch {
	case k.step == stepFair:
		return p.fairReason(a, c)
	case a.idle:
		return fmt.Sprintf("idle allocation of %s reclaimed for %s", a.q.node.Name, c.j.q.node.Name)
	case debt != nil && k.step == stepIdleDebt:
		return fmt.Sprintf("debt of %s (nominal lowered, grace %s passed) reclaimed for %s",
			debt.node.Name, p.settings.DebtGrace, c.j.q.node.Name)
	case c.drain != nil && c.drain.res != nil && k.step == stepStart:
		return fmt.Sprintf("to be displaced by reservation %s, which starts at %s", c.drain.res.ID, c.drain.at.Format(time.RFC3339))
	case c.drain != nil && c.drain.res != nil:
		return fmt.Sprintf("idle or debt allocation reclaimed for reservation %s, which starts at %s", c.drain.res.ID, c.drain.at.Format(time.RFC3339))
	case c.drain != nil && k.step == stepStart:
		// A pre-warm's stop of an allocation on GPUs held for the group.
		return fmt.Sprintf("on GPUs held for %s, at %s", c.drain.label(), c.drain.at.Format(time.RFC3339))
	case displaced != nil && c.j.res != nil && k.step == stepStart:
		return fmt.Sprintf("displaced at %s by its active reservations; reclaimed for reservation %s", displaced.node.Name, c.j.res.ID)
	case k.step == stepChild:
		return fmt.Sprintf("child-level preemption for %s", c.j.q.node.Name)
	case k.step == stepPriority:
		return fmt.Sprintf("priority preemption in %s: priority %d below %d", c.j.q.node.Name, a.priority, c.j.priority)
	case a != worst:
		return fmt.Sprintf("stopped with its batch job for %s; its allocation %s: %s",
			c.j.q.node.Name, worst.a.ID, p.stopReason(worst, worst, k, c))
	default:
		return fmt.Sprintf("stopped for %s (rule %s)", c.j.q.node.Name, unitRule(k, c))
	}
}

// yieldUnit is a unit that yields to a claimant under priority preemption
// (DESIGN L3, L5 step 3).
type yieldUnit struct {
	unit int
	key  victimKey // its step-3 key: priority, recency, allocation ID
	// gpus are the non-idle GPUs it gives back to the claimant's node
	// (debt included); nonDebt the part of them that is not debt, given
	// back to each ancestor.
	gpus, nonDebt int
}

// yieldsTo reports whether allocation a may be stopped for job j under
// priority preemption (DESIGN L5 step 3): it is in j's node's own
// namespaces, of lower job priority, not of j, and may be a victim at all
// (a service or batch allocation, not in an active reservation, not being
// stopped, not stopped by this plan).
func (p *planner) yieldsTo(a *alloc, j *job) bool {
	return a.q == j.q && int(a.priority) < j.priority && a.victimable && !p.st.stopped[a.index] &&
		(a.a.Namespace != j.namespace || a.a.Job != j.name) && !p.claimedByOther(a.index, noClaimant, noClaimant)
}

// ownNonIdle returns the indices of the non-idle allocations of quota node
// q's own namespaces, indexed once per plan on first use.
func (p *planner) ownNonIdle(q *qnode) []int {
	if p.byQuota == nil {
		p.byQuota = make([][]int, len(p.quotas))
		for ai := range p.allocs {
			a := &p.allocs[ai]
			if a.q != nil && !a.idle {
				p.byQuota[a.q.index] = append(p.byQuota[a.q.index], a.index)
			}
		}
	}
	return p.byQuota[q.index]
}

// yieldUnits returns, in key order, the units that yield to job j: its
// node's own non-idle allocations of lower priority that L5 step 3 may
// stop, a batch unit only when every allocation of it may be. Units younger
// than min_runtime are left out unless allowYoung. Keys are step-3 keys
// (lower priority, then most recently started, then allocation ID), also
// for debt that L5 step 1 could take.
func (p *planner) yieldUnits(j *job, allowYoung bool) []yieldUnit {
	var out []yieldUnit
	seen := map[int]bool{}
	for _, ai := range p.ownNonIdle(j.q) {
		u := p.allocs[ai].unit
		if seen[u] {
			continue
		}
		seen[u] = true
		un := &p.units[u]
		if !allowYoung && p.settings.MinRuntime > 0 && p.now.UnixNano()-un.youngest < int64(p.settings.MinRuntime) {
			continue
		}
		y := yieldUnit{unit: u}
		ok := true
		for n, ai := range un.allocs {
			a := &p.allocs[ai]
			if !p.yieldsTo(a, j) {
				ok = false
				break
			}
			k := victimKey{step: stepPriority, priority: a.priority, started: a.started, alloc: int32(a.index)}
			if n == 0 || p.keyLess(y.key, k) {
				y.key = k
			}
			if !a.idle {
				y.gpus += a.count
				if p.st.debtOf(ai) == nil {
					y.nonDebt += a.count
				}
			}
		}
		if ok && y.gpus > 0 {
			out = append(out, y)
		}
	}
	slices.SortFunc(out, func(a, b yieldUnit) int {
		if p.keyLess(a.key, b.key) {
			return -1
		}
		return 1
	})
	return out
}

// restoreQuota runs the end of DESIGN L6 for job j, placed on the yield of
// its node's lower-priority allocations (L3): it stops, for claim c, the
// units that yield to j in key order, on any node, until j's node's
// non-idle figure (own namespaces only under child-level preemption) is
// within its nominal again, and so is every ancestor's (debt excluded), as
// entitlement counts them; then, as L6 does, it drops from the last added
// backwards each one not needed. Each stop has rule L5.3. As a stop may
// turn debt into usage (L9: debt is derived again without the stopped
// allocations), the figures are read again after the stops and more are
// taken while a node is still over. Units younger than min_runtime are
// taken only when the others are not enough. It reports false when even
// all of them are not enough (placeWhole then restores the state: nothing
// is stopped for j).
func (p *planner) restoreQuota(j *job, c *claim) bool {
	for _, allowYoung := range []bool{false, true} {
		if allowYoung && p.settings.MinRuntime <= 0 {
			break
		}
		for {
			over := p.overNominal(j.q, j.booked)
			if !slices.ContainsFunc(over, func(x int) bool { return x > 0 }) {
				return true
			}
			taken, ok := pickToRestore(p.yieldUnits(j, allowYoung), over)
			if !ok || len(taken) == 0 {
				break
			}
			for _, y := range taken {
				p.stopUnit(y.unit, y.key, c)
			}
		}
	}
	return false
}

// overNominal returns how many GPUs q's figure exceeds its nominal by
// (index 0; negative when within it), and then each ancestor's, nearest
// first, as entitlement counts them (L3).
func (p *planner) overNominal(q *qnode, booked []int) []int {
	l := p.st.ledger
	over := make([]int, 1+len(q.ancestors))
	nominal := lowered(q, booked)
	over[0] = l.nonIdle[q.index] - l.reserved[q.index] - nominal
	if q.node.ChildPreemption {
		over[0] = l.ownNonIdle[q.index] - l.ownReserved[q.index] - nominal
	}
	for i, a := range q.ancestors {
		nominal := lowered(a, booked)
		over[1+i] = l.nonIdle[a.index] - l.debt[a.index] - l.reservedNonDebt[a.index] - nominal
	}
	return over
}

// pickToRestore takes units in order until over (see overNominal) is
// nowhere positive, then drops, from the last added backwards, each one
// not needed. It reports false when all of them are not enough. over is
// not changed.
func pickToRestore(units []yieldUnit, over []int) ([]yieldUnit, bool) {
	left := slices.Clone(over)
	within := func() bool { return !slices.ContainsFunc(left, func(x int) bool { return x > 0 }) }
	give := func(y yieldUnit, sign int) {
		left[0] -= sign * y.gpus
		for i := 1; i < len(left); i++ {
			left[i] -= sign * y.nonDebt
		}
	}
	k := 0
	for ; k < len(units) && !within(); k++ {
		give(units[k], 1)
	}
	if !within() {
		return nil, false
	}
	keep := make([]bool, k)
	for i := k - 1; i >= 0; i-- {
		give(units[i], -1)
		if keep[i] = !within(); keep[i] {
			give(units[i], 1)
		}
	}
	var taken []yieldUnit
	for i, y := range units[:k] {
		if keep[i] {
			taken = append(taken, y)
		}
	}
	return taken, true
}
