package plan

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// holdGPU marks GPU g held for owner (DESIGN L10), allocating the hold
// arrays on the first hold of a plan.
func (p *planner) holdGPU(g, owner int32) {
	st := p.st
	if st.heldBy == nil {
		st.heldBy = make([]int32, len(p.gpus))
		for i := range st.heldBy {
			st.heldBy[i] = noClaimant
		}
		st.nodeHeld = make([]int, len(p.nodes))
	}
	node := p.gpus[g].node
	if st.heldBy[g] == noClaimant {
		st.nodeHeld[node]++
	}
	st.heldBy[g] = owner
}

// indexHolds books the snapshot's holds (DESIGN L10, L5 pre-warm). A hold
// keeps its GPUs for its owner only until its end (Until). After that, a
// reservation's hold lends its GPUs to idle jobs (and its own jobs) until
// the reservation ends; other holds are over. GPUs that are not on the
// hold's node are ignored (Validate refuses them).
func (p *planner) indexHolds() {
	for i := range p.snap.Holds {
		h := &p.snap.Holds[i]
		ni, ok := p.nodeByID[h.Node]
		if !ok {
			continue
		}
		lend := false
		if !p.now.Before(h.Until) {
			r := p.reservationOf(h.For.Reservation)
			if r == nil || !p.now.Before(r.End) {
				continue // over
			}
			lend = true
		} else {
			p.wake(h.Until)
		}
		p.resolve(ni)
		owner := p.ownerID(h.For)
		hint := 0
		for _, id := range h.GPUIDs {
			g, next := p.gpuOnNode(ni, id, hint)
			if g < 0 {
				continue
			}
			hint = next
			p.holdGPU(g, owner)
			if lend {
				if p.lend == nil {
					p.lend = make([]bool, len(p.gpus))
				}
				p.lend[g] = true
			}
		}
	}
}

// drainTarget is what one drain places ahead of its instant: a
// reservation's shape before its start (DESIGN L10, rule L10.drain) or a
// pre-warm's added allocations before its boundary (DESIGN L5 "Pre-warm",
// rule L5.prewarm). Exactly one of res and pre is set.
type drainTarget struct {
	res   *Reservation
	pre   *Prewarm
	owner HoldOwner // the reservation, or the pre-warmed group
	at    time.Time // the reservation's start or the pre-warm's boundary
	until time.Time // when its holds end: start + settle, or the pre-warm's Until
}

// label names the target in messages: "reservation r-1" or "pre-warm of
// ns/job/group".
func (d *drainTarget) label() string {
	if d.res != nil {
		return "reservation " + d.res.ID
	}
	return "pre-warm of " + d.pre.Key().String()
}

// untilText says when the holds end and why.
func (d *drainTarget) untilText() string {
	if d.res != nil {
		return d.until.Format(time.RFC3339) + " (start + settle)"
	}
	return d.until.Format(time.RFC3339) + " (boundary + evaluation_interval + settle)"
}

// drains runs the drain of every reservation and every pre-warm within
// drain_horizon of its instant (DESIGN L10, L5 "Pre-warm"), in order of
// instant, then reservations before pre-warms, then ID or group key. A
// pre-warm whose namespace is not governed, or whose group is not entitled
// now (L3), gets no drain and a warning that says why.
func (p *planner) drains(cache map[feasibilityKey][]int) {
	var due []*drainTarget
	within := func(at time.Time) bool {
		if !p.now.Before(at) {
			return false
		}
		if from := at.Add(-p.settings.DrainHorizon); p.now.Before(from) {
			p.wake(from)
			return false
		}
		return true
	}
	for _, r := range p.cal.due { // the reservations' instants are recorded already (indexReservations)
		due = append(due, &drainTarget{res: r, owner: HoldOwner{Reservation: r.ID}, at: r.Start, until: r.Start.Add(p.settings.Settle)})
	}
	for i := range p.snap.Prewarm {
		w := &p.snap.Prewarm[i]
		if within(w.At) {
			due = append(due, &drainTarget{pre: w, owner: HoldOwner{Group: w.Key()}, at: w.At, until: w.Until})
		}
	}
	slices.SortFunc(due, func(a, b *drainTarget) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		switch {
		case a.res != nil && b.res != nil:
			return cmp.Compare(a.res.ID, b.res.ID)
		case a.res != nil:
			return -1
		case b.res != nil:
			return 1
		}
		return a.pre.Key().Compare(b.pre.Key())
	})
	for _, d := range due {
		if d.pre != nil {
			p.prewarm(d, cache)
			continue
		}
		p.drain(d, d.res.Namespace, p.byName[d.res.Quota], cache)
	}
}

// prewarm runs the drain of pre-warm d if its group is governed and
// entitled now (DESIGN L5 "Pre-warm": L3 entitlement now), else warns.
func (p *planner) prewarm(d *drainTarget, cache map[feasibilityKey][]int) {
	w := d.pre
	q := p.byNS[w.Namespace]
	if q == nil {
		p.warnings = append(p.warnings, fmt.Sprintf("%s: namespace %q is not bound to any quota; no pre-warm", d.label(), w.Namespace))
		return
	}
	if why := p.prewarmEntitled(w, q); why != "" {
		p.warnings = append(p.warnings, fmt.Sprintf("%s: %d allocations of %d GPUs at %s not entitled now (L3): %s; no pre-warm",
			d.label(), w.Count, w.GPUs, w.At.Format(time.RFC3339), why))
		return
	}
	p.drain(d, w.Namespace, q, cache)
}

// drainSlot is one allocation of a drain's shape as a dry run placed it:
// on free GPUs, or on the GPUs of victim units.
type drainSlot struct {
	node  int
	units []int
	keys  []victimKey
}

// drain places target d's allocations ahead of its instant, as a claimant
// of quota node q in namespace ns by L6: a reservation's shape (DESIGN
// L10, rule L10.drain), AllocGPUs-GPU allocations, as many as its GPUs
// hold, with victims of L5 step 1 and then the allocations the
// reservation will displace at its start; or a pre-warm's Count
// allocations (DESIGN L5 "Pre-warm", rule L5.prewarm) with victims of all
// L5 steps, as the group would have them now. Either way those already
// held for its owner count as placed. Allocations another job placed on
// GPUs held for the owner are stopped first. Those that fit on free GPUs
// are held at once; for the others, the victims are stopped, and their
// GPUs held, at the first plan at or after at - (their largest
// kill_timeout + drain_margin). Every hold lasts until d.until; the plan
// wakes at each stop instant and, for a pre-warm, at the holds' end.
func (p *planner) drain(d *drainTarget, ns string, q *qnode, cache map[feasibilityKey][]int) {
	owner := p.ownerID(d.owner)
	var g *Pending
	var c *claim
	var allocGPUs, count int
	if r := d.res; r != nil {
		allocGPUs, count = r.Shape()
		g = &Pending{Namespace: ns, Type: JobBatch, Priority: 100, Count: 1, GPUs: allocGPUs,
			Model: r.Model, NodePool: r.NodePool}
		c = &claim{j: &job{namespace: ns, q: q, priority: 100, asked: allocGPUs}, g: g, cid: owner, alt: noClaimant}
	} else {
		w := d.pre
		allocGPUs, count = w.GPUs, w.Count
		g = w.pending()
		c = &claim{j: &job{namespace: ns, name: w.Job, q: q, priority: w.Priority, asked: allocGPUs}, g: g, cid: owner, alt: noClaimant}
	}
	c.nodes, c.drain = p.feasibleNodes(g, cache), d
	p.stopOnHeld(c, owner)
	need := count - p.heldSlots(owner, allocGPUs)
	if need <= 0 {
		return
	}
	// No victim's stop can be due before at - (the largest kill_timeout
	// of any allocation + drain_margin): until then only free GPUs are
	// held, with no search for victims.
	if early := d.at.Add(-(p.maxKill + p.settings.DrainMargin)); p.now.Before(early) {
		reason := fmt.Sprintf("free GPUs held for %s until %s", d.label(), d.untilText())
		for ; need > 0; need-- {
			ni := p.binPack(c.nodes, c)
			if ni < 0 {
				p.wake(early)
				return
			}
			p.emitHold(d, ni, p.take(p.nodes[ni], c, allocGPUs, owner), d.holdRule(false), reason)
		}
		return
	}
	if d.res != nil {
		c.disp = p.displacedAt(d.at)
	}

	// Dry run: place every slot, then restore the state and replay only
	// the slots whose time has come.
	saved, resolved := p.st.clone(), len(p.resolvedOrder)
	var slots []drainSlot
	for ; need > 0; need-- {
		if ni := p.binPack(c.nodes, c); ni >= 0 {
			slots = append(slots, drainSlot{node: ni})
			p.take(p.nodes[ni], c, allocGPUs, owner)
			continue
		}
		set, keys := p.findVictims(c)
		if set == nil {
			p.warnings = append(p.warnings, fmt.Sprintf("%s: %d of its %d allocations of %d GPUs%s cannot be placed before %s, even with preemption",
				d.label(), need, count, allocGPUs, modelText(g.Model), d.at.Format(time.RFC3339)))
			break
		}
		sl := drainSlot{node: set.node, units: slices.Clone(set.units)}
		for _, u := range set.units {
			sl.keys = append(sl.keys, keys[u])
		}
		slots = append(slots, sl)
		p.stopUnits(set, c, keys)
		p.take(p.nodes[set.node], c, allocGPUs, owner)
	}
	p.st = saved
	p.rebook(resolved)
	for _, sl := range slots {
		reason := fmt.Sprintf("free GPUs held for %s until %s", d.label(), d.untilText())
		rule := d.holdRule(false)
		if len(sl.units) > 0 {
			kill := time.Duration(0)
			for _, u := range sl.units {
				for _, ai := range p.units[u].allocs {
					kill = max(kill, p.allocs[ai].killTimeout)
				}
			}
			due := d.at.Add(-(kill + p.settings.DrainMargin))
			if p.now.Before(due) {
				p.wake(due)
				continue
			}
			for k, u := range sl.units {
				p.stopUnit(u, sl.keys[k], c)
			}
			rule = d.holdRule(true)
			reason = fmt.Sprintf("GPUs freed for %s held until %s", d.label(), d.untilText())
		}
		if gpus := p.take(p.nodes[sl.node], c, allocGPUs, owner); len(gpus) > 0 {
			p.emitHold(d, sl.node, gpus, rule, reason)
		}
	}
}

// holdRule is the rule of a hold for d: a reservation's hold of free GPUs
// is L10, of freed GPUs L10.drain; a pre-warm's is L5.prewarm.
func (d *drainTarget) holdRule(freed bool) Rule {
	switch {
	case d.pre != nil:
		return RulePrewarm
	case freed:
		return RuleDrain
	}
	return RuleReservation
}

// emitHold emits a hold action of GPUs of node ni for d: for a
// reservation, Reservation names it; for a pre-warm, Job, Group and For
// name the group, and the plan wakes at the hold's end.
func (p *planner) emitHold(d *drainTarget, ni int, gpus []int32, rule Rule, reason string) {
	ids := make([]string, 0, len(gpus))
	for _, g := range gpus {
		ids = append(ids, p.gpu(g).ID)
	}
	a := Action{Action: ActionHold, Node: p.nodes[ni].n.ID, GPUs: len(ids), GPUIDs: ids,
		Rule: rule, Until: d.until, Reason: reason}
	if r := d.res; r != nil {
		a.Namespace, a.Reservation = r.Namespace, r.ID
	} else {
		k := d.pre.Key()
		a.Namespace, a.Job, a.Group, a.For = k.Namespace, k.Job, k.Group, k
		p.wake(d.until)
	}
	p.emit(a)
}

// heldSlots counts the allocations of allocGPUs GPUs that the GPUs held
// for owner make room for, node by node: held GPUs that are free or being
// freed for the owner. A held GPU that an allocation holds (the owner's
// own, placed before the boundary by a scale-up that came early, e.g. a
// metric-driven one) makes no room: it is used.
func (p *planner) heldSlots(owner int32, allocGPUs int) int {
	st := p.st
	if st.heldBy == nil || allocGPUs <= 0 {
		return 0
	}
	slots := 0
	for ni, n := range p.nodes {
		if st.nodeHeld[ni] == 0 {
			continue
		}
		held := 0
		for _, g := range n.gpus {
			if st.heldBy[g] == owner && (st.holder[g] == holderFree || st.freeFor[g] == owner) {
				held++
			}
		}
		slots += held / allocGPUs
	}
	return slots
}

// stopOnHeld stops, for drain claim c, the allocations that Nomad placed
// for other jobs on GPUs held for owner while the hold lasts (DESIGN L10,
// rule L10.drain): service and batch allocations in the tree, not of an
// active reservation and not already being stopped.
func (p *planner) stopOnHeld(c *claim, owner int32) {
	st := p.st
	if st.heldBy == nil {
		return
	}
	for ni, n := range p.nodes {
		if st.nodeHeld[ni] == 0 {
			continue
		}
		for _, g := range n.gpus {
			if st.heldBy[g] != owner || (p.lend != nil && p.lend[g]) {
				continue
			}
			ai := st.holder[g]
			if ai < 0 || st.freeFor[g] != noClaimant {
				continue
			}
			a := &p.allocs[ai]
			if !a.victimable || st.stopped[ai] {
				continue
			}
			if w := c.drain.pre; w != nil && a.a.Namespace == w.Namespace && a.a.Job == w.Job {
				continue // the pre-warmed group's own job, scaled up
			}
			k := victimKey{step: stepStart, priority: a.priority, started: a.started, alloc: ai}
			from := len(st.actions)
			p.stopUnit(a.unit, k, c)
			for i := from; i < len(p.st.actions); i++ {
				p.st.actions[i].Reason = fmt.Sprintf("on GPUs held for %s, at %s", c.drain.label(), c.drain.at.Format(time.RFC3339))
			}
		}
	}
}

// displacedAt returns, per allocation, the quota node at which the
// reservations active at instant t would displace it (L10), as
// classifyDisplaced decides it now.
func (p *planner) displacedAt(t time.Time) []*qnode {
	booked := make([]int, len(p.quotas))
	any := false
	for i := range p.snap.Reservations {
		r := &p.snap.Reservations[i]
		q := p.byName[r.Quota]
		if q == nil || !r.Active(t) {
			continue
		}
		any = true
		for n := q; n != nil; n = n.parent {
			booked[n.index] += r.GPUs
		}
	}
	var out []*qnode
	if any {
		out = p.displace(booked)
	}
	if out == nil {
		out = make([]*qnode, len(p.allocs))
	}
	return out
}
