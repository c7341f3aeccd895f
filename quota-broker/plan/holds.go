package plan

import (
	"cmp"
	"fmt"
	"maps"
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

// indexHolds books the snapshot's holds as KeptHolds keeps them (DESIGN
// L10, L5 pre-warm). A hold keeps its GPUs for its owner only until its
// end (Until). After that, a reservation's hold lends its GPUs to idle
// jobs (and its own jobs) until the reservation ends, only as many as the
// allocations it has not placed need; other holds are over. GPUs that are
// not on the hold's node are ignored (Validate refuses them).
func (p *planner) indexHolds() {
	last := -1
	for _, h := range KeptHolds(p.snap) {
		ni, ok := p.nodeOf(h.Node, last)
		if !ok {
			continue
		}
		last = ni
		lend := !p.now.Before(h.Until)
		if !lend {
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

// KeptHolds returns the holds of snapshot s that bind a plan at s.Time
// (DESIGN L10), as Compute reads them: a hold before its Until whole; a
// reservation's hold past its Until, while the reservation is active, only
// for the allocations the booking has not placed: of its GPUs, by node ID
// then GPU ID, those that an allocation of the booking does not hold, up
// to the booking's GPUs less those its live allocations hold; every other
// hold is over. The simulator keeps the same holds as the core with it.
// The result shares s.Holds when nothing is trimmed; otherwise it lists
// the holds by owner, then node.
func KeptHolds(s *Snapshot) []Hold {
	now := s.Time
	trim := false
	for i := range s.Holds {
		if !now.Before(s.Holds[i].Until) {
			trim = true
			break
		}
	}
	if !trim {
		return s.Holds
	}
	res := map[string]*Reservation{}
	for i := range s.Reservations {
		if r := &s.Reservations[i]; r.Active(now) {
			res[r.ID] = r
		}
	}
	used := map[string]int{}
	own := map[string]string{} // GPU ID -> the active reservation whose allocation holds it
	for i := range s.Allocations {
		a := &s.Allocations[i]
		if res[a.Reservation] == nil {
			continue
		}
		used[a.Reservation] += len(a.GPUIDs)
		for _, id := range a.GPUIDs {
			own[id] = a.Reservation
		}
	}
	// The past holds of a booking keep GPUs in node order, then GPU ID
	// order, whatever the snapshot's order (the same state, the same plan).
	order := make([]int, 0, len(s.Holds))
	for i := range s.Holds {
		order = append(order, i)
	}
	slices.SortStableFunc(order, func(a, b int) int {
		x, y := &s.Holds[a], &s.Holds[b]
		return cmp.Or(cmp.Compare(x.For.Reservation, y.For.Reservation), x.For.Group.Compare(y.For.Group), cmp.Compare(x.Node, y.Node))
	})
	left := map[string]int{}
	out := make([]Hold, 0, len(s.Holds))
	for _, i := range order {
		h := s.Holds[i]
		if now.Before(h.Until) {
			out = append(out, h)
			continue
		}
		r := res[h.For.Reservation]
		if r == nil {
			continue // over
		}
		n, seen := left[r.ID]
		if !seen {
			n = max(0, r.GPUs-used[r.ID])
		}
		var ids []string
		sorted := slices.Clone(h.GPUIDs)
		slices.Sort(sorted)
		for _, id := range sorted {
			if n == 0 {
				break
			}
			if own[id] == r.ID {
				continue // placed: the booking's own allocation holds it
			}
			ids = append(ids, id)
			n--
		}
		left[r.ID] = n
		if len(ids) > 0 {
			h.GPUIDs = ids
			out = append(out, h)
		}
	}
	return out
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
	// slotted are the GPUs held for the owner that heldSlots counted as
	// whole allocations placed, and those the drain placed an allocation
	// on in this plan; the drain places the rest on its other held GPUs,
	// free ones and victims' (see usable).
	slotted map[int32]bool
}

// label names the target in messages: "reservation r-1" or "pre-warm of
// ns/job/group".
func (d *drainTarget) label() string {
	if d.res != nil {
		return "reservation " + d.res.ID
	}
	return "pre-warm of " + d.pre.Key().String()
}

// slot marks gpus as placed for d in this plan (see slotted).
func (d *drainTarget) slot(gpus []int32) {
	if d.slotted == nil {
		d.slotted = map[int32]bool{}
	}
	for _, g := range gpus {
		d.slotted[g] = true
	}
}

// warning is a warning about d's owner (Warning).
func (d *drainTarget) warning(kind WarningKind, gpus int, msg string) Warning {
	w := Warning{Kind: kind, GPUs: gpus, Message: msg}
	if d.res != nil {
		w.Namespace, w.Reservation = d.res.Namespace, d.res.ID
	} else {
		w.Namespace, w.Job, w.Group = d.pre.Namespace, d.pre.Job, d.pre.Group
	}
	return w
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
	defer p.warnHeld(d)
	w := d.pre
	q := p.byNS[w.Namespace]
	if q == nil {
		p.warn(d.warning(WarnGeneral, 0, fmt.Sprintf("%s: namespace %q is not bound to any quota; no pre-warm", d.label(), w.Namespace)))
		return
	}
	if why := p.prewarmEntitled(w, q); why != "" {
		p.warn(d.warning(WarnNotEntitled, w.Count*w.GPUs, fmt.Sprintf("%s: %d allocations of %d GPUs at %s not entitled now (L3): %s; no pre-warm",
			d.label(), w.Count, w.GPUs, w.At.Format(time.RFC3339), why)))
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
// held for its owner count as placed by whole allocations (heldSlots).
// Allocations another job placed on GPUs held for the owner were stopped
// before (bindHolds). Those that fit on free GPUs are held at once; for
// the others, the free part of the set is held at once, GPU by GPU, and
// the victims are claimed for the owner, then stopped, and their GPUs
// held, at the first plan at or after at - (their largest kill_timeout +
// drain_margin). Every hold lasts until d.until; the plan wakes at each
// stop instant and, for a pre-warm, at the holds' end.
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
	need := count - p.heldSlots(owner, allocGPUs, d)
	if need <= 0 {
		return
	}
	if d.res != nil {
		c.disp = p.displacedAt(d.at)
	}

	// Dry run: place every slot, then restore the state and replay the
	// slots: those on free GPUs are held at once; of the others, the
	// victims whose time has come are stopped and their GPUs held, and
	// the victims not due yet are claimed for the owner (no other claimant
	// may count on them, DESIGN L3) while the free part of their set is
	// held at once, GPU by GPU (L10).
	saved, resolved := p.st.clone(), len(p.resolvedOrder)
	slotted := maps.Clone(d.slotted)
	var slots []drainSlot
	for ; need > 0; need-- {
		if ni := p.binPack(c.nodes, c); ni >= 0 {
			slots = append(slots, drainSlot{node: ni})
			d.slot(p.take(p.nodes[ni], c, allocGPUs, owner))
			continue
		}
		set, keys := p.findVictims(c)
		if set == nil {
			p.warn(d.warning(WarnUnplaceable, need*allocGPUs, fmt.Sprintf("%s: %d of its %d allocations of %d GPUs%s cannot be placed before %s, even with preemption",
				d.label(), need, count, allocGPUs, modelText(g.Model), d.at.Format(time.RFC3339))))
			break
		}
		sl := drainSlot{node: set.node, units: slices.Clone(set.units)}
		for _, u := range set.units {
			sl.keys = append(sl.keys, keys[u])
		}
		slots = append(slots, sl)
		p.stopUnits(set, c, keys)
		d.slot(p.take(p.nodes[set.node], c, allocGPUs, owner))
	}
	p.st = saved
	p.rebook(resolved)
	d.slotted = slotted
	for _, sl := range slots {
		reason := fmt.Sprintf("free GPUs held for %s until %s", d.label(), d.untilText())
		rule := d.holdRule(false)
		want := allocGPUs
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
				n := p.nodes[sl.node]
				for _, u := range sl.units {
					on := -1
					for _, ai := range p.units[u].allocs {
						p.claimAlloc(ai, owner)
						if on < 0 && p.allocs[ai].node == sl.node {
							on = ai
						}
					}
					if on >= 0 {
						want -= p.gpusOn(u, on, n, c)
					}
				}
				if want <= 0 {
					continue
				}
				reason = fmt.Sprintf("free GPUs held for %s until %s; the rest of the set is freed at %s",
					d.label(), d.untilText(), due.Format(time.RFC3339))
			} else {
				for k, u := range sl.units {
					p.stopUnit(u, sl.keys[k], c)
				}
				rule = d.holdRule(true)
				reason = fmt.Sprintf("GPUs freed for %s held until %s", d.label(), d.untilText())
			}
		}
		if gpus := p.holdNew(p.nodes[sl.node], c, want, owner); len(gpus) > 0 {
			p.emitHold(d, sl.node, gpus, rule, reason)
		}
	}
}

// holdNew holds up to gpus GPUs of node n for owner that claim cl may take
// (see take) and returns those that were not held for owner before.
func (p *planner) holdNew(n *cnode, cl *claim, gpus int, owner int32) []int32 {
	p.resolve(n.index)
	st := p.st
	var before map[int32]bool
	if st.heldBy != nil && st.nodeHeld[n.index] > 0 {
		for _, g := range n.gpus {
			if st.heldBy[g] == owner {
				if before == nil {
					before = map[int32]bool{}
				}
				before[g] = true
			}
		}
	}
	out := p.take(n, cl, gpus, owner)
	if cl.drain != nil {
		cl.drain.slot(out)
	}
	if before != nil {
		out = slices.DeleteFunc(out, func(g int32) bool { return before[g] })
	}
	return out
}

// claimAlloc marks allocation ai as counted on by owner in this plan
// (state.claimedBy): a victim planned for owner whose stop is not due yet,
// or an idle allocation under a reservation's Cover.
func (p *planner) claimAlloc(ai int, owner int32) {
	st := p.st
	if st.claimedBy == nil {
		st.claimedBy = make([]int32, len(p.allocs))
		for i := range st.claimedBy {
			st.claimedBy[i] = noClaimant
		}
	}
	if st.claimedBy[ai] != owner {
		st.claimedBy[ai] = owner
		p.vc.forget() // cached victim sets may have counted it
	}
}

// claimedByOther reports whether allocation ai is claimed (state.claimedBy)
// by an owner other than cid and alt: it is then no victim of theirs.
func (p *planner) claimedByOther(ai int, cid, alt int32) bool {
	cb := p.st.claimedBy
	if cb == nil {
		return false
	}
	o := cb[ai]
	return o != noClaimant && o != cid && o != alt
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
// metric-driven one) makes no room: it is used. The GPUs of the slots
// counted are marked in d.slotted; the rest of the owner's held GPUs (the
// free part of a set held GPU by GPU in an earlier plan) are the drain's to
// place on (see usable).
func (p *planner) heldSlots(owner int32, allocGPUs int, d *drainTarget) int {
	st := p.st
	if st.heldBy == nil || allocGPUs <= 0 {
		return 0
	}
	slots := 0
	var held []int32
	for ni, n := range p.nodes {
		if st.nodeHeld[ni] == 0 {
			continue
		}
		held = held[:0]
		for _, g := range n.gpus {
			if st.heldBy[g] == owner && (st.holder[g] == holderFree || st.freeFor[g] == owner) {
				held = append(held, g)
			}
		}
		k := len(held) / allocGPUs
		slots += k
		d.slot(held[:k*allocGPUs])
	}
	return slots
}

// stopOnHeld stops, for drain claim c, the allocations that Nomad placed
// for other jobs on GPUs held for owner while the hold lasts (DESIGN L10,
// rule L10.drain, or L5.prewarm for a pre-warm's): service and batch
// allocations in the tree, not of an active reservation and not already
// being stopped. During a reservation's window (and on its lent GPUs) only
// non-idle ones: idle work there is reclaimed by L5 step 1 when a job of
// the booking claims it.
func (p *planner) stopOnHeld(c *claim, owner int32) {
	st := p.st
	if st.heldBy == nil {
		return
	}
	active := c.drain.res != nil && c.drain.res.Active(p.now)
	for ni, n := range p.nodes {
		if st.nodeHeld[ni] == 0 {
			continue
		}
		for _, g := range n.gpus {
			if st.heldBy[g] != owner {
				continue
			}
			ai := st.holder[g]
			if ai < 0 || st.freeFor[g] != noClaimant {
				continue
			}
			a := &p.allocs[ai]
			if !a.victimable || st.stopped[ai] || !p.unitStoppable(a.unit) {
				continue
			}
			if a.idle && (active || (p.lend != nil && p.lend[g])) {
				continue // during the window the owner stops only non-idle work this way; L5 step 1 reclaims idle work
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

// unitStoppable reports whether every allocation of unit u may be a
// victim and none is stopped yet (DESIGN L5: a batch job is a candidate
// only if every one of its allocations is; an allocation of an active
// reservation never is, even beside an intruder on held GPUs).
func (p *planner) unitStoppable(u int) bool {
	for _, ai := range p.units[u].allocs {
		if !p.allocs[ai].victimable || p.st.stopped[ai] {
			return false
		}
	}
	return true
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

// bindHolds applies DESIGN L10 "a stored hold that has not ended binds
// every plan whether or not its owner is placed in that plan": for every
// owner of a snapshot hold still in force (indexHolds), what Nomad placed
// on its held GPUs for another job is stopped at once (stopOnHeld), by the
// owner's rule, even when its drain or pre-warm is beyond drain_horizon or
// the pre-warm is not entitled now. Owners go in order of reservation ID,
// then group key.
func (p *planner) bindHolds() {
	if p.st.heldBy == nil {
		return
	}
	var owners []HoldOwner
	for i := range p.snap.Holds {
		o := p.snap.Holds[i].For
		if _, ok := p.claimants[o]; ok && !slices.Contains(owners, o) {
			owners = append(owners, o)
		}
	}
	slices.SortFunc(owners, func(a, b HoldOwner) int {
		return cmp.Or(cmp.Compare(a.Reservation, b.Reservation), a.Group.Compare(b.Group))
	})
	for _, o := range owners {
		d, ns := p.holdTarget(o)
		q := p.byNS[ns]
		if q == nil {
			q = p.quotas[0] // only names the claimant in reasons
		}
		owner := p.ownerID(o)
		g := &Pending{Namespace: ns, Job: o.Group.Job, Group: o.Group.Group, Type: JobBatch, Priority: 100, Count: 1}
		if d.pre != nil {
			g = d.pre.pending()
		}
		c := &claim{j: &job{namespace: ns, name: g.Job, q: q, priority: g.Priority}, g: g, cid: owner, alt: noClaimant, drain: d}
		p.stopOnHeld(c, owner)
	}
}

// holdTarget returns the drain target of hold owner o as the snapshot
// knows it (its reservation, or its pre-warm entry, or, for an owner the
// snapshot lists no more, one made from its holds), and its namespace.
func (p *planner) holdTarget(o HoldOwner) (*drainTarget, string) {
	until := time.Time{}
	for i := range p.snap.Holds {
		if h := &p.snap.Holds[i]; h.For == o && h.Until.After(until) {
			until = h.Until
		}
	}
	d := &drainTarget{owner: o, at: until, until: until}
	if o.Reservation != "" {
		r := p.reservationByID(o.Reservation)
		if r == nil {
			r = &Reservation{ID: o.Reservation, Start: until}
		}
		d.res, d.at = r, r.Start
		return d, r.Namespace
	}
	for i := range p.snap.Prewarm {
		if w := &p.snap.Prewarm[i]; w.Key() == o.Group {
			d.pre, d.at = w, w.At
			return d, w.Namespace
		}
	}
	d.pre = &Prewarm{Namespace: o.Group.Namespace, Job: o.Group.Job, Group: o.Group.Group, Type: JobService,
		Priority: 50, Count: 1, At: until, Until: until}
	return d, o.Group.Namespace
}

// heldNote says, for a wait of claim c, which hold keeps it from GPUs that
// would otherwise fit it (DESIGN L10, L5 pre-warm; issue 16 item 6): ";
// 4 GPUs held for the scale-up of ns/job/group at T" when on some
// feasible node the free GPUs and those held for other owners make room,
// naming the owner that holds the most of them there; "" otherwise.
func (p *planner) heldNote(c *claim) string {
	st := p.st
	if st.heldBy == nil {
		return ""
	}
	held := map[int32]int{} // owner -> GPUs held on nodes where they would fit c
	for _, ni := range c.nodes {
		if st.nodeHeld[ni] == 0 {
			continue
		}
		n := p.nodes[ni]
		free := p.freeOn(n, c)
		here := map[int32]int{}
		total := 0
		for _, g := range n.gpus {
			h := st.heldBy[g]
			if h == noClaimant || h == c.cid || h == c.alt || !p.gpus[g].healthy || !modelMatches(c.g.Model, p.gpu(g).Model) {
				continue
			}
			if st.holder[g] == holderFree || (st.holder[g] >= 0 && st.freeFor[g] == h) {
				here[h]++
				total++
			}
		}
		if free+total < c.g.GPUs {
			continue
		}
		for h, k := range here {
			held[h] += k
		}
	}
	best, most := "", 0
	for h, k := range held {
		if text := p.ownerText(h); k > most || (k == most && text < best) {
			best, most = text, k
		}
	}
	if most == 0 {
		return ""
	}
	return "; " + gpuCount(most) + " held for " + best
}

// ownerText describes hold owner id for a reason: "the scale-up of
// ns/job/group at T" or "reservation r-1 (starts at T)".
func (p *planner) ownerText(id int32) string {
	for o, i := range p.claimants {
		if i != id {
			continue
		}
		if o.Reservation != "" {
			if r := p.reservationByID(o.Reservation); r != nil && p.now.Before(r.Start) {
				return fmt.Sprintf("reservation %s (starts at %s)", r.ID, r.Start.Format(time.RFC3339))
			}
			return "reservation " + o.Reservation
		}
		for k := range p.snap.Prewarm {
			if w := &p.snap.Prewarm[k]; w.Key() == o.Group {
				return fmt.Sprintf("the scale-up of %s at %s", o.Group, w.At.Format(time.RFC3339))
			}
		}
		return "the scale-up of " + o.Group.String()
	}
	return "another owner"
}

// warnHeld warns of the GPUs held for pre-warm d after its drain (issue
// 16 item 7): other work may wait for them until the holds end.
func (p *planner) warnHeld(d *drainTarget) {
	st := p.st
	if st.heldBy == nil {
		return
	}
	owner := p.ownerID(d.owner)
	n := 0
	for ni, c := range p.nodes {
		if st.nodeHeld[ni] == 0 {
			continue
		}
		for _, g := range c.gpus {
			if st.heldBy[g] == owner {
				n++
			}
		}
	}
	if n > 0 {
		p.warn(d.warning(WarnHeld, n, fmt.Sprintf("%s held for the scale-up of %s at %s, until %s",
			gpuCount(n), d.pre.Key(), d.at.Format(time.RFC3339), d.until.Format(time.RFC3339))))
	}
}
