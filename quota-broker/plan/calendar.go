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
	// started indexes by ID the reservations whose start has come (active
	// or ended): the position of each in res.
	started map[string]int
	res     []startedRes
	// anyActive: some reservation of the tree is active now.
	anyActive bool
	// activeBooked is, per quota node, the GPUs of active reservations in
	// its subtree.
	activeBooked []int
	// due are the reservations of the tree whose drain runs in this plan:
	// their start is within drain_horizon (see planner.drains).
	due []*Reservation
	// soon are the reservations that start after now and before now +
	// window, the longest window booked(N) is asked for (bookedOver).
	soon   []*Reservation
	window time.Duration
	// peaks caches booked(N) per window length (see bookedOver).
	peaks map[time.Duration][]int
}

// startedRes is a reservation whose start has come.
type startedRes struct {
	r *Reservation
	q *qnode // its quota node, or nil when it is not in the tree
	// used is, while it is active, the GPUs its live allocations and the
	// allocations admitted for it in this plan hold.
	used int
	// ending says that this plan stops its jobs (rule L10.end: the plan
	// is at or past end - kill_timeout of one of them): its Cover holds
	// nothing more (DESIGN L10 *End*: its GPUs are to be free at the end).
	ending bool
}

// reservedAlloc is an allocation of an active reservation: alloc is its
// index, res its reservation's position in calendar.res.
type reservedAlloc struct{ alloc, res int }

// indexReservations reads the snapshot's reservations once: it indexes
// those that have started, sums the active ones of the tree per quota node
// (activeBooked), lists those whose drain runs now (due: start within
// drain_horizon), and records the instants at which time alone changes the
// plan (L12): an active one's end, a future one's start (L10: entitlement
// and displacement change then) and, earlier, the start of its drain
// (start - drain_horizon). A future reservation's quota node is looked up
// only when its instant could be the plan's next one or its drain is due.
func (p *planner) indexReservations() {
	c := &p.cal
	c.res = p.buf.res[:0]
	defer func() { p.buf.res = c.res }()
	c.activeBooked = make([]int, len(p.quotas))
	c.peaks = map[time.Duration][]int{}
	horizon := p.settings.DrainHorizon
	// booked(N) is asked for over drain_horizon or a pending flex
	// request's max_run (bookedFor, prewarmEntitled).
	c.window = horizon
	for i := range p.snap.Pending {
		if f := p.snap.Pending[i].Flex; f != nil {
			c.window = max(c.window, f.MaxRun)
		}
	}
	soonEnd := p.now.Add(c.window)
	c.soon = p.buf.soon[:0]
	defer func() { p.buf.soon = c.soon }()
	// A future reservation's drain starts at from = start - drain_horizon;
	// with start compared to now + drain_horizon and to WakeAt +
	// drain_horizon (wakeBy: from before WakeAt) rather than each from
	// computed, the 10,000s of bookings ahead cost two comparisons each.
	dueBy := p.now.Add(horizon)
	wakeAt, wakeBy := p.wakeAt, p.wakeAt.Add(horizon)
	for i := range p.snap.Reservations {
		r := &p.snap.Reservations[i]
		if p.now.Before(r.Start) {
			if r.Start.Before(soonEnd) {
				c.soon = append(c.soon, r)
			}
			if r.Start.After(dueBy) { // now < from: its drain is ahead
				if p.wakeAt != wakeAt {
					wakeAt, wakeBy = p.wakeAt, p.wakeAt.Add(horizon)
				}
				if (horizon < 0 || wakeAt.IsZero() || r.Start.Before(wakeBy)) && p.byName[r.Quota] != nil {
					p.wake(r.Start.Add(-horizon)) // its drain starts
					p.wake(r.Start)
				}
				continue
			}
			if p.byName[r.Quota] != nil {
				p.wake(r.Start)
				c.due = append(c.due, r)
			}
			continue
		}
		sr := startedRes{r: r}
		if p.now.Before(r.End) {
			if sr.q = p.byName[r.Quota]; sr.q != nil {
				c.anyActive = true
				p.wake(r.End)
				for n := sr.q; n != nil; n = n.parent {
					c.activeBooked[n.index] += r.GPUs
				}
			}
		}
		c.res = append(c.res, sr)
	}
	c.started = emptied(&p.buf.started, &p.buf.startedLen, len(c.res))
	for i := range c.res {
		c.started[c.res[i].r.ID] = i
	}
}

// indexBookings sums the GPUs each active reservation's live allocations
// use (L10).
func (p *planner) indexBookings() {
	for _, ra := range p.reservedAllocs {
		p.cal.res[ra.res].used += p.allocs[ra.alloc].count
	}
}

// usedOf returns the GPUs active reservation r uses (see startedRes.used).
func (p *planner) usedOf(r *Reservation) *int {
	return &p.cal.res[p.cal.started[r.ID]].used
}

// bookedOver returns booked(N) for every quota node N over the window
// [now, now + w) (DESIGN L10): the peak, over the window, of the GPUs
// booked by the reservations of N's subtree. It sweeps the start and end
// of every reservation of the tree that meets the window, ends before
// starts at the same instant (windows are [start, end)). The active ones
// start the sweep at now together; an end at or after the window's end
// comes after every start, so it cannot change a peak and is left out.
// Results are cached per w.
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
	load := make([]int, len(p.quotas))
	var events []event
	for _, sr := range p.cal.res {
		if r := sr.r; sr.q != nil && p.now.Before(r.End) && r.Start.Before(end) {
			for n := sr.q; n != nil; n = n.parent {
				load[n.index] += r.GPUs
			}
			if r.End.Before(end) {
				events = append(events, event{r.End, -r.GPUs, sr.q})
			}
		}
	}
	future := p.cal.soon
	if w > p.cal.window {
		future = nil // not listed: read them all
		for i := range p.snap.Reservations {
			future = append(future, &p.snap.Reservations[i])
		}
	}
	for _, r := range future {
		if !p.now.Before(r.Start) || !r.Start.Before(end) || !p.now.Before(r.End) {
			continue
		}
		q := p.byName[r.Quota]
		if q == nil {
			continue
		}
		events = append(events, event{r.Start, r.GPUs, q})
		if r.End.Before(end) {
			events = append(events, event{r.End, -r.GPUs, q})
		}
	}
	slices.SortFunc(events, func(a, b event) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.delta, b.delta))
	})
	peak := slices.Clone(load)
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
	i, ok := p.cal.started[j.reservation]
	if !ok {
		return nil
	}
	sr := p.cal.res[i]
	if sr.q == nil || !p.now.Before(sr.r.End) || sr.r.Namespace != j.namespace {
		return nil
	}
	return sr.r
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
	used := *p.usedOf(r)
	if used+j.asked > r.GPUs {
		return fmt.Sprintf("reservation %s: %d of %d GPUs in use; %s", r.ID, used, r.GPUs, shortfall(j.asked, r.GPUs-used))
	}
	return ""
}

// deriveDisplaced derives the allocations displaced by the active
// reservations now (see displace) and returns, per allocation, the quota
// node it is displaced at, or nil when none is displaced. It changes
// nothing.
func (p *planner) deriveDisplaced() []*qnode {
	if !p.cal.anyActive {
		return nil
	}
	out := p.displace(p.cal.activeBooked)
	if !slices.ContainsFunc(out, func(q *qnode) bool { return q != nil }) {
		return nil
	}
	return out
}

// displace decides DESIGN L10's displaced allocations for booked, the
// GPUs booked in each quota node's subtree, and returns, per allocation,
// the node it is displaced at, or nil when none is displaced. Bottom-up,
// for every quota node with booked GPUs, the non-reserved non-idle
// allocations of its subtree that are not debt, not stopped by this plan
// (L9: a stopped allocation leaves displaced at once) and not already
// displaced at a descendant fill the node's nominal less its booked GPUs,
// oldest first (first fit, then allocation ID); the rest are displaced at
// that node. Displaced works on L5's units: after the fill, every other
// allocation of a batch job or flex request with an allocation displaced
// there that took part in the fill is displaced there too (its debt
// allocations stay debt; the fill is not run again), so that the unit can
// be stopped whole for the reservation (rule L10.start).
func (p *planner) displace(booked []int) []*qnode {
	var byQuota [][]*alloc
	var out []*qnode
	for i := len(p.quotas) - 1; i >= 0; i-- { // reverse pre-order: children first
		q := p.quotas[i]
		if booked[q.index] == 0 {
			continue
		}
		room := q.nominal - booked[q.index]
		l := p.st.ledger
		if l.nonIdle[q.index]-l.reserved[q.index]-l.debt[q.index] <= room {
			continue // every candidate fits, and so does every subset of them
		}
		if byQuota == nil {
			out = make([]*qnode, len(p.allocs))
			byQuota = make([][]*alloc, len(p.quotas))
			for ai := range p.allocs {
				a := &p.allocs[ai]
				if a.q != nil && !a.idle && !a.reserved && p.st.debtOf(ai) == nil && !p.st.stopped[ai] {
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
		// Whole units: the members of a batch job or flex request with an
		// allocation displaced here.
		for _, a := range members {
			if out[a.index] == q || !a.wholeJob || a.alone {
				continue
			}
			for _, bi := range p.units[a.unit].allocs {
				if out[bi] == q {
					out[a.index] = q
					break
				}
			}
		}
	}
	return out
}
