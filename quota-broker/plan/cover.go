package plan

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Cover tiers (DESIGN L10 Cover): where one allocation of a booking may be
// placed, each tier also counting the GPUs of the tiers before it.
const (
	tierHeld = iota // GPUs held for the reservation
	tierFree        // and free GPUs
	tierIdle        // and GPUs of idle allocations
	tiers
)

// cover applies DESIGN L10 *Cover* before any pending work: during each
// active reservation's window, its allocations not yet placed
// (ceil(unused GPUs / its shape), the last one smaller) are placed one by
// one, each on the node where it fits on GPUs held for it, else on held
// and free GPUs, else also on GPUs of idle allocations (bin-packing within
// each tier, then node ID). The free GPUs so placed are held for the
// reservation (rule L10; lent to idle jobs from start + settle, as its
// other holds); the idle allocations so placed on are not stopped but
// claimed for it (state.claimedBy): victims only of the reservation's own
// jobs (L5 step 1). So no other job takes GPUs that the booking would then
// lack. Reservations go in ID order. A reservation whose jobs this plan
// stops at end - kill_timeout (rule L10.end, startedRes.ending) is not
// covered: its GPUs are to be free at its end (DESIGN L10 *End*), and a
// hold for it would only keep them from the other bookings.
func (p *planner) cover(cache map[feasibilityKey][]int) {
	if !p.cal.anyActive {
		return
	}
	var active []*startedRes
	for i := range p.cal.res {
		if sr := &p.cal.res[i]; sr.q != nil && sr.r.Active(p.now) && !sr.ending && sr.used < sr.r.GPUs {
			active = append(active, sr)
		}
	}
	slices.SortFunc(active, func(a, b *startedRes) int { return cmp.Compare(a.r.ID, b.r.ID) })
	for _, sr := range active {
		p.coverOne(sr, cache)
	}
}

// coverOne covers active reservation sr (see cover).
func (p *planner) coverOne(sr *startedRes, cache map[feasibilityKey][]int) {
	r := sr.r
	owner := p.ownerID(HoldOwner{Reservation: r.ID})
	allocGPUs, _ := r.Shape()
	unused := r.GPUs - sr.used
	total := (unused + allocGPUs - 1) / allocGPUs
	settled := r.Start.Add(p.settings.Settle)
	lend := !p.now.Before(settled)
	used := map[int32]bool{} // GPUs an allocation of this cover is placed on
	placed := 0
	for ; unused > 0; placed++ {
		size := min(allocGPUs, unused)
		g := &Pending{Namespace: r.Namespace, Type: JobBatch, Priority: 100, Count: 1, GPUs: size,
			Model: r.Model, NodePool: r.NodePool}
		c := &claim{j: &job{namespace: r.Namespace, q: sr.q, priority: 100, asked: size, res: r}, g: g, cid: owner, alt: noClaimant}
		nodes := p.feasibleNodes(g, cache)
		best, bestTier, bestAvail := -1, tiers, 0
		for _, ni := range nodes {
			avail := p.coverAvail(p.nodes[ni], c, used)
			for t := tierHeld; t < tiers; t++ {
				if avail[t] < size {
					continue
				}
				if t < bestTier || (t == bestTier && avail[t] < bestAvail) {
					best, bestTier, bestAvail = ni, t, avail[t]
				}
				break
			}
		}
		if best < 0 {
			break
		}
		unused -= size
		newly := p.coverTake(p.nodes[best], c, size, used)
		if len(newly) == 0 {
			continue
		}
		if lend {
			if p.lend == nil {
				p.lend = make([]bool, len(p.gpus))
			}
			for _, gi := range newly {
				p.lend[gi] = true
			}
		}
		ids := make([]string, 0, len(newly))
		for _, gi := range newly {
			ids = append(ids, p.gpu(gi).ID)
		}
		p.emit(Action{Action: ActionHold, Namespace: r.Namespace, Reservation: r.ID, Node: p.nodes[best].n.ID,
			GPUs: len(ids), GPUIDs: ids, Rule: RuleReservation, Until: settled,
			Reason: fmt.Sprintf("free GPUs held for reservation %s, active until %s, for its allocations not yet placed (L10 Cover)",
				r.ID, r.End.Format(time.RFC3339))})
	}
	if left := total - placed; left > 0 {
		p.warn(Warning{Kind: WarnUnplaceable, Namespace: r.Namespace, Reservation: r.ID, GPUs: unused,
			Message: fmt.Sprintf("reservation %s: %d of its %d allocations not yet placed (%s%s) find no held, free or idle GPUs; its jobs may stop only what it displaces (L10.start)",
				r.ID, left, total, gpuCount(allocGPUs, "x"), modelText(r.Model))})
	}
}

// coverAvail counts, on node n, the GPUs of c's model that an allocation
// of the cover may be placed on, per tier (each tier counting those
// before it), leaving out those in used: held for the reservation (free
// or being freed for it); free; of idle allocations in the tree that are
// not stopped, not being stopped and not claimed by another owner. GPUs
// held for another owner count in no tier.
func (p *planner) coverAvail(n *cnode, c *claim, used map[int32]bool) [tiers]int {
	var avail [tiers]int
	if !n.resolved && n.allHealthy && n.model != "" && modelMatches(c.g.Model, n.model) {
		// Not resolved: no GPU of it is held, being freed or used by
		// this cover; count its idle allocations as wholes.
		avail[tierFree] = p.st.nodeFree[n.index]
		avail[tierIdle] = avail[tierFree]
		for _, ai := range n.allocs {
			a := &p.allocs[ai]
			if a.idle && a.victimable && !p.st.stopped[ai] && !p.claimedByOther(ai, c.cid, noClaimant) {
				avail[tierIdle] += a.count
			}
		}
		return avail
	}
	p.resolve(n.index)
	for _, gi := range n.gpus {
		switch p.coverTier(gi, c, used) {
		case tierHeld:
			avail[tierHeld]++
		case tierFree:
			avail[tierFree]++
		case tierIdle:
			avail[tierIdle]++
		}
	}
	avail[tierFree] += avail[tierHeld]
	avail[tierIdle] += avail[tierFree]
	return avail
}

// coverTier returns the tier of GPU gi for cover claim c, or tiers when an
// allocation of the cover may not be placed on it.
func (p *planner) coverTier(gi int32, c *claim, used map[int32]bool) int {
	st := p.st
	if used[gi] || !p.gpus[gi].healthy || !modelMatches(c.g.Model, p.gpu(gi).Model) {
		return tiers
	}
	heldOwn := false
	if st.heldBy != nil && st.heldBy[gi] != noClaimant {
		if st.heldBy[gi] != c.cid {
			return tiers
		}
		heldOwn = true
	}
	h := st.holder[gi]
	switch {
	case h == holderFree, h >= 0 && st.freeFor[gi] == c.cid:
		if heldOwn {
			return tierHeld
		}
		return tierFree
	case h >= 0 && st.freeFor[gi] == noClaimant:
		a := &p.allocs[h]
		if a.idle && a.victimable && !st.stopped[h] && !p.claimedByOther(int(h), c.cid, noClaimant) {
			return tierIdle
		}
	}
	return tiers
}

// coverTake places one allocation of size GPUs of cover claim c on node n:
// on its held GPUs first, then free ones, which it holds for the
// reservation, then GPUs of idle allocations, which it claims for it
// (coverIdle). It returns the GPUs it newly held.
func (p *planner) coverTake(n *cnode, c *claim, size int, used map[int32]bool) []int32 {
	p.resolve(n.index)
	var newly []int32
	for t := tierHeld; t < tierIdle && size > 0; t++ {
		for _, gi := range n.gpus {
			if size == 0 {
				break
			}
			if p.coverTier(gi, c, used) != t {
				continue
			}
			used[gi] = true
			size--
			if t == tierFree {
				p.holdGPU(gi, c.cid)
				newly = append(newly, gi)
			}
		}
	}
	if size > 0 {
		p.coverIdle(n, c, size, used)
	}
	if len(newly) > 0 {
		p.vc.touch(n.index)
	}
	return newly
}

// coverIdle places the last size GPUs of a cover allocation of claim c on
// GPUs of idle allocations of node n (tier idle), claiming each allocation
// it uses for c, so that a booking claims as few idle GPUs as it can and
// leaves the rest to the next booking (bin-packing, as the node choice):
// the allocations in this order, each taken whole or for what is left:
//
//  1. an allocation c already claims (its other GPUs cost nothing more);
//  2. the smallest allocation that covers what is left alone;
//  3. else the largest (the fewest allocations);
//  4. then the node's order of their first GPU (as the other tiers go;
//     not the allocations' order, which the snapshot's order of its
//     allocations would decide).
//
// Within an allocation its GPUs go in the node's order.
func (p *planner) coverIdle(n *cnode, c *claim, size int, used map[int32]bool) {
	type idleAlloc struct {
		ai    int32
		first int     // the node's position of its first GPU
		gpus  []int32 // its GPUs of tier idle, in the node's order
	}
	var cands []idleAlloc
	for pos, gi := range n.gpus {
		if p.coverTier(gi, c, used) != tierIdle {
			continue
		}
		ai := p.st.holder[gi]
		if i := slices.IndexFunc(cands, func(x idleAlloc) bool { return x.ai == ai }); i >= 0 {
			cands[i].gpus = append(cands[i].gpus, gi)
		} else {
			cands = append(cands, idleAlloc{ai: ai, first: pos, gpus: []int32{gi}})
		}
	}
	own := func(x idleAlloc) bool { return p.st.claimedBy != nil && p.st.claimedBy[x.ai] == c.cid }
	for size > 0 && len(cands) > 0 {
		best := 0
		for i := 1; i < len(cands); i++ {
			if coverIdleBefore(cands[i].first, cands[best].first, own(cands[i]), own(cands[best]), len(cands[i].gpus), len(cands[best].gpus), size) {
				best = i
			}
		}
		x := cands[best]
		cands = slices.Delete(cands, best, best+1)
		for _, gi := range x.gpus[:min(size, len(x.gpus))] {
			used[gi] = true
			size--
		}
		p.claimAlloc(int(x.ai), c.cid)
	}
}

// coverIdleBefore reports whether idle allocation a (its first GPU at
// the node's position af, own: already claimed by the cover's owner, n
// GPUs usable) goes before b for a need of size GPUs (coverIdle's order).
func coverIdleBefore(af, bf int, aOwn, bOwn bool, an, bn, size int) bool {
	if aOwn != bOwn {
		return aOwn
	}
	aFits, bFits := an >= size, bn >= size
	switch {
	case aFits != bFits:
		return aFits
	case aFits && an != bn:
		return an < bn
	case !aFits && an != bn:
		return an > bn
	}
	return af < bf
}
