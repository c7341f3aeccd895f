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

// drains runs the drain of every reservation within drain_horizon of its
// start (DESIGN L10), in order of start, then ID.
func (p *planner) drains(cache map[feasibilityKey][]int) {
	var due []*Reservation
	for i := range p.snap.Reservations {
		r := &p.snap.Reservations[i]
		if p.byName[r.Quota] == nil || !p.now.Before(r.Start) {
			continue
		}
		if from := r.Start.Add(-p.settings.DrainHorizon); p.now.Before(from) {
			p.wake(from)
			continue
		}
		due = append(due, r)
	}
	slices.SortFunc(due, func(a, b *Reservation) int { return cmp.Or(a.Start.Compare(b.Start), cmp.Compare(a.ID, b.ID)) })
	for _, r := range due {
		p.drain(r, cache)
	}
}

// drainSlot is one allocation of a reservation's shape as a dry run
// placed it: on free GPUs, or on the GPUs of victim units.
type drainSlot struct {
	node  int
	units []int
	keys  []victimKey
}

// drain places reservation r's shape ahead of its start (DESIGN L10, rule
// L10.drain): AllocGPUs-GPU allocations, as many as its GPUs hold, less
// those already held, as a claimant of its quota node by L6 with victims
// of L5 step 1 and then the allocations the reservation will displace at
// its start. Allocations another job placed on GPUs held for it are
// stopped first. Those that fit on free GPUs are held at once; for the
// others, the victims are stopped, and their GPUs held, at the first plan
// at or after start - (their largest kill_timeout + drain_margin). Every
// hold lasts until start + settle.
func (p *planner) drain(r *Reservation, cache map[feasibilityKey][]int) {
	q := p.byName[r.Quota]
	owner := p.ownerID(HoldOwner{Reservation: r.ID})
	allocGPUs, count := r.Shape()
	until := r.Start.Add(p.settings.Settle)
	g := &Pending{Namespace: r.Namespace, Type: JobBatch, Priority: 100, Count: 1, GPUs: allocGPUs,
		Model: r.Model, NodePool: r.NodePool}
	c := &claim{j: &job{namespace: r.Namespace, q: q, priority: 100, asked: allocGPUs}, g: g, cid: owner, alt: noClaimant,
		nodes: p.feasibleNodes(g, cache), drain: r}
	p.stopOnHeld(c, owner)
	need := count - p.heldSlots(owner, allocGPUs)
	if need <= 0 {
		return
	}
	// No victim's stop can be due before start - (the largest
	// kill_timeout of any allocation + drain_margin): until then only free
	// GPUs are held, with no search for victims.
	if early := r.Start.Add(-(p.maxKill + p.settings.DrainMargin)); p.now.Before(early) {
		reason := fmt.Sprintf("free GPUs held for reservation %s until %s (start + settle)", r.ID, until.Format(time.RFC3339))
		for ; need > 0; need-- {
			ni := p.binPack(c.nodes, c)
			if ni < 0 {
				p.wake(early)
				return
			}
			p.emitHold(r, ni, p.take(p.nodes[ni], c, allocGPUs, owner), until, RuleReservation, reason)
		}
		return
	}
	c.disp = p.displacedAt(r.Start)

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
			p.warnings = append(p.warnings, fmt.Sprintf("reservation %s: %d of its %d allocations of %d GPUs%s cannot be placed before its start, even with preemption",
				r.ID, need, count, allocGPUs, modelText(r.Model)))
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
		reason := fmt.Sprintf("free GPUs held for reservation %s until %s (start + settle)", r.ID, until.Format(time.RFC3339))
		rule := RuleReservation
		if len(sl.units) > 0 {
			kill := time.Duration(0)
			for _, u := range sl.units {
				for _, ai := range p.units[u].allocs {
					kill = max(kill, p.allocs[ai].a.KillTimeout)
				}
			}
			due := r.Start.Add(-(kill + p.settings.DrainMargin))
			if p.now.Before(due) {
				p.wake(due)
				continue
			}
			for k, u := range sl.units {
				p.stopUnit(u, sl.keys[k], c)
			}
			rule = RuleDrain
			reason = fmt.Sprintf("GPUs freed for reservation %s held until %s (start + settle)", r.ID, until.Format(time.RFC3339))
		}
		if gpus := p.take(p.nodes[sl.node], c, allocGPUs, owner); len(gpus) > 0 {
			p.emitHold(r, sl.node, gpus, until, rule, reason)
		}
	}
}

// emitHold emits a hold action of GPUs of node ni for reservation r.
func (p *planner) emitHold(r *Reservation, ni int, gpus []int32, until time.Time, rule Rule, reason string) {
	ids := make([]string, 0, len(gpus))
	for _, g := range gpus {
		ids = append(ids, p.gpu(g).ID)
	}
	p.emit(Action{Action: ActionHold, Namespace: r.Namespace, Node: p.nodes[ni].n.ID, GPUs: len(ids), GPUIDs: ids,
		Rule: rule, Reservation: r.ID, Until: until, Reason: reason})
}

// heldSlots counts the allocations of allocGPUs GPUs that the GPUs held
// for owner make room for, node by node.
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
			if st.heldBy[g] == owner {
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
			a := p.allocs[ai]
			if !a.victimable || st.stopped[ai] {
				continue
			}
			k := victimKey{step: stepStart, priority: a.a.Priority, started: a.started, alloc: ai}
			from := len(st.actions)
			p.stopUnit(a.unit, k, c)
			for i := from; i < len(p.st.actions); i++ {
				p.st.actions[i].Reason = fmt.Sprintf("on GPUs held for reservation %s, which starts at %s",
					c.drain.ID, c.drain.Start.Format(time.RFC3339))
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
