package plan

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"
)

// calendar is the planner's view of the reservations (DESIGN L10).
type calendar struct {
	// started are the reservations whose start has come (active or
	// ended), and active those active now, by ID.
	started, active map[string]*Reservation
	// activeBooked is, per quota node, the GPUs of active reservations in
	// its subtree.
	activeBooked []int
	// used is, per active reservation, the GPUs its live allocations and
	// the allocations admitted for it in this plan hold.
	used map[string]int
	// peaks caches booked(N) per window length (see bookedOver).
	peaks map[time.Duration][]int
}

// indexBookings indexes the reservations: the active ones with the GPUs
// they use, and each one's quota node.
func (p *planner) indexBookings() {
	c := &p.cal
	c.active = make(map[string]*Reservation, len(c.started))
	c.activeBooked = make([]int, len(p.quotas))
	c.used = make(map[string]int, len(c.started))
	c.peaks = map[time.Duration][]int{}
	for i := range p.snap.Reservations {
		r := &p.snap.Reservations[i]
		q := p.byName[r.Quota]
		if q == nil || !r.Active(p.now) {
			if q != nil && r.Start.After(p.now) {
				p.wake(r.Start) // L10: entitlement and displacement change at the start
			}
			continue
		}
		c.active[r.ID] = r
		p.wake(r.End)
		for n := q; n != nil; n = n.parent {
			c.activeBooked[n.index] += r.GPUs
		}
	}
	for _, ai := range p.reservedAllocs {
		a := p.allocs[ai]
		c.used[a.a.Reservation] += a.count
	}
}

// bookedOver returns booked(N) for every quota node N over the window
// [now, now + w) (DESIGN L10): the peak, over the window, of the GPUs
// booked by the reservations of N's subtree. It sweeps the start and end
// of every reservation that meets the window, ends before starts at the
// same instant (windows are [start, end)). Results are cached per w.
func (p *planner) bookedOver(w time.Duration) []int {
	if b, ok := p.cal.peaks[w]; ok {
		return b
	}
	type event struct {
		at    time.Time
		delta int
		q     *qnode
	}
	end := p.now.Add(w)
	meets := func(r *Reservation) bool { return r.Start.Before(end) && p.now.Before(r.End) }
	n := 0
	for i := range p.snap.Reservations {
		if meets(&p.snap.Reservations[i]) {
			n++
		}
	}
	events := make([]event, 0, 2*n)
	for i := range p.snap.Reservations {
		r := &p.snap.Reservations[i]
		q := p.byName[r.Quota]
		if q == nil || !meets(r) {
			continue
		}
		start := r.Start
		if start.Before(p.now) {
			start = p.now
		}
		events = append(events, event{start, r.GPUs, q}, event{r.End, -r.GPUs, q})
	}
	slices.SortFunc(events, func(a, b event) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.delta, b.delta))
	})
	load := make([]int, len(p.quotas))
	peak := make([]int, len(p.quotas))
	for _, e := range events {
		for n := e.q; n != nil; n = n.parent {
			load[n.index] += e.delta
			if load[n.index] > peak[n.index] {
				peak[n.index] = load[n.index]
			}
		}
	}
	p.cal.peaks[w] = peak
	return peak
}

// bookedFor returns booked(N) as job j counts it (DESIGN L10): over its
// max_run for a flex request, over drain_horizon for other jobs.
func (p *planner) bookedFor(j *job) []int {
	if j.flex != nil {
		return p.bookedOver(j.flex.MaxRun)
	}
	return p.bookedOver(p.settings.DrainHorizon)
}

// activeReservation returns the active reservation job j names, or nil.
// Only jobs of the reservation's namespace may name it (L10).
func (p *planner) activeReservation(j *job) *Reservation {
	if j.reservation == "" {
		return nil
	}
	r := p.cal.active[j.reservation]
	if r == nil || r.Namespace != j.namespace {
		return nil
	}
	return r
}

// reservationByID returns the snapshot's reservation id, or nil, building
// the index of all reservations on first use.
func (p *planner) reservationByID(id string) *Reservation {
	if p.resByID == nil {
		p.resByID = make(map[string]*Reservation, len(p.snap.Reservations))
		for i := range p.snap.Reservations {
			p.resByID[p.snap.Reservations[i].ID] = &p.snap.Reservations[i]
		}
	}
	return p.resByID[id]
}

// reservationWait says why job j, which names a reservation that is not
// active, waits (rule L10), or "" when the reservation is active.
func (p *planner) reservationWait(j *job) string {
	r := p.reservationByID(j.reservation)
	switch {
	case r == nil:
		return fmt.Sprintf("reservation %s does not exist", j.reservation)
	case r.Namespace != j.namespace:
		return fmt.Sprintf("reservation %s is for namespace %s, not %s", r.ID, r.Namespace, j.namespace)
	case p.now.Before(r.Start):
		return fmt.Sprintf("reservation %s starts at %s", r.ID, r.Start.Format(time.RFC3339))
	case !p.now.Before(r.End):
		return fmt.Sprintf("reservation %s ended at %s", r.ID, r.End.Format(time.RFC3339))
	}
	return ""
}

// reservationEntitlement checks DESIGN L10 for job j of active
// reservation r: entitled while the reservation's used GPUs plus the ask
// fit the booking, whatever L3 says. It returns "" or the reason.
func (p *planner) reservationEntitlement(j *job, r *Reservation) string {
	used := p.cal.used[r.ID]
	if used+j.asked > r.GPUs {
		return fmt.Sprintf("reservation %s: %d of %d GPUs in use; %s", r.ID, used, r.GPUs, shortfall(j.asked, r.GPUs-used))
	}
	return ""
}

// classifyDisplaced marks the allocations displaced by the active
// reservations now (see displace).
func (p *planner) classifyDisplaced() {
	if len(p.cal.active) == 0 {
		return
	}
	for i, q := range p.displace(p.cal.activeBooked) {
		p.allocs[i].displaced = q
	}
}

// displace decides DESIGN L10's displaced allocations for booked, the
// GPUs booked in each quota node's subtree, and returns, per allocation,
// the node it is displaced at, or nil when none is displaced. Bottom-up, for every quota node with
// booked GPUs, the non-reserved non-idle allocations of its subtree that
// are not debt and not already displaced at a descendant fill the node's
// nominal less its booked GPUs, oldest first (first fit, then allocation
// ID); the rest are displaced at that node.
func (p *planner) displace(booked []int) []*qnode {
	var byQuota [][]*alloc
	var out []*qnode
	for i := len(p.quotas) - 1; i >= 0; i-- { // reverse pre-order: children first
		q := p.quotas[i]
		if booked[q.index] == 0 {
			continue
		}
		room := q.node.GPUs - booked[q.index]
		l := p.st.ledger
		if l.nonIdle[q.index]-l.reserved[q.index]-l.debt[q.index] <= room {
			continue // every candidate fits, and so does every subset of them
		}
		if byQuota == nil {
			out = make([]*qnode, len(p.allocs))
			byQuota = make([][]*alloc, len(p.quotas))
			for _, a := range p.allocs {
				if a.q != nil && !a.idle && !a.reserved && a.debt == nil {
					byQuota[a.q.index] = append(byQuota[a.q.index], a)
				}
			}
		}
		var members []*alloc
		total := 0
		for j := q.first; j <= q.last; j++ {
			for _, a := range byQuota[j] {
				if out[a.index] == nil {
					members = append(members, a)
					total += a.count
				}
			}
		}
		if total <= room {
			continue
		}
		sort.Slice(members, func(x, y int) bool {
			if members[x].started != members[y].started {
				return members[x].started < members[y].started
			}
			return members[x].a.ID < members[y].a.ID
		})
		filled := 0
		for _, a := range members {
			if filled+a.count <= room {
				filled += a.count
				continue
			}
			out[a.index] = q
		}
	}
	return out
}
