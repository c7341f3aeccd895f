package plan

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/gputide/gputide/quota-broker/quota"
)

// Invariant (a) of the booking suite, DESIGN L10 *Cover*: during its
// window a booking's allocations not yet placed are placed, before any
// pending work, on GPUs it holds, held and free GPUs, or GPUs of idle
// allocations, and no other job then takes GPUs that the booking would
// lack. checkCover tests the consequence, independently of the planner:
// when, before the plan, the active bookings' unplaced allocations fit
// together on GPUs each holds, free GPUs and idle-occupied GPUs (held for
// no one else), they still fit together after the plan's stops, holds
// and admits (each booking's own admits taken off what it lacks).

// GPU labels for the Cover check.
const (
	coverBusy = "busy" // a non-idle allocation, unhealthy, or taken by an admit
	coverFree = "free"
	coverIdle = "idle"   // an idle allocation, held for no one
	resLabel  = "res:"   // + reservation ID: held or being freed for it
	ownLabel  = "owner:" // + group key: freed or held for a claimant group
)

// coverDemand is what an active booking lacks: full allocations of size
// GPUs and one of rem GPUs (rem may be 0).
type coverDemand struct {
	r          *Reservation
	size, full int
	rem        int
}

func (d coverDemand) String() string {
	s := fmt.Sprintf("%s: %d x %d GPUs", d.r.ID, d.full, d.size)
	if d.rem > 0 {
		s += fmt.Sprintf(" + 1 x %d", d.rem)
	}
	if d.r.Model != "" {
		s += " of " + d.r.Model
	}
	return s
}

// checkCover checks invariant (a). ok reports whether it applied: some
// active booking lacked allocations and they fitted before the plan.
func checkCover(s *Snapshot, p *Plan) (ok bool, err error) {
	res := map[string]*Reservation{}
	for i := range s.Reservations {
		res[s.Reservations[i].ID] = &s.Reservations[i]
	}
	pend := map[GroupKey]*Pending{}
	for i := range s.Pending {
		pend[s.Pending[i].Key()] = &s.Pending[i]
	}
	allocs := map[string]*Allocation{}
	byJob := map[JobKey][]*Allocation{}
	for i := range s.Allocations {
		a := &s.Allocations[i]
		allocs[a.ID] = a
		byJob[a.JobKey()] = append(byJob[a.JobKey()], a)
	}
	// Before the plan.
	label := map[string]string{}
	healthy := map[string]bool{}
	for _, n := range s.Nodes {
		for _, g := range n.GPUs {
			healthy[g.ID] = g.Healthy
			label[g.ID] = coverBusy
			if g.Healthy {
				label[g.ID] = coverFree
			}
		}
	}
	holdOwner := map[string]string{}
	for _, h := range s.Holds {
		if !s.Time.Before(h.End(res[h.For.Reservation])) {
			continue
		}
		for _, id := range h.GPUIDs {
			holdOwner[id] = ownerLabel(h.For)
		}
	}
	// Idle allocations that may never be a victim (DESIGN L5: system and
	// sysbatch jobs, namespaces outside the tree, allocations of active
	// reservations) are busy to a Cover.
	bound := quota.Namespaces(s.Quota)
	for _, a := range s.Allocations {
		l := coverBusy
		_, inTree := bound[a.Namespace]
		switch {
		case a.StoppingForReservation != "":
			l = resLabel + a.StoppingForReservation
		case !a.StoppingFor.IsZero():
			l = ownLabel + a.StoppingFor.String()
		case a.Idle && inTree && a.Type != JobSystem && a.Type != JobSysbatch &&
			(res[a.Reservation] == nil || !res[a.Reservation].Active(s.Time)):
			l = coverIdle
		}
		for _, id := range a.GPUIDs {
			if healthy[id] {
				label[id] = l
			}
		}
	}
	for id, o := range holdOwner {
		if l := label[id]; l == coverFree || l == coverIdle {
			label[id] = o
		}
	}
	// An idle allocation that sits on GPUs a stored hold keeps for another
	// owner is that owner's victim (DESIGN L10: holds bind every plan; what
	// Nomad placed on held GPUs for another job is stopped at once, a
	// batch unit whole), and the GPUs it frees are the owner's (L6, L7):
	// never idle-occupied GPUs a Cover may count on. A reservation's own
	// hold lends its GPUs to idle jobs during its window, so its idle
	// intruders stay idle.
	for _, a := range s.Allocations {
		if !a.Idle || a.Type == JobSystem || a.Type == JobSysbatch {
			continue
		}
		for _, id := range a.GPUIDs {
			o, held := holdOwner[id]
			if !held || o == resLabel+a.Reservation || o == ownLabel+a.GroupKey().String() {
				continue
			}
			if r := res[strings.TrimPrefix(o, resLabel)]; strings.HasPrefix(o, resLabel) && r != nil && r.Active(s.Time) {
				continue
			}
			unit := []Allocation{a}
			if a.Type == JobBatch && !a.Elastic {
				unit = nil
				for _, u := range byJob[a.JobKey()] {
					unit = append(unit, *u)
				}
			}
			for _, u := range unit {
				for _, g := range u.GPUIDs {
					if label[g] == coverIdle {
						label[g] = o
					}
				}
			}
			break
		}
	}
	lacks := map[string]int{}
	var active []*Reservation
	for i := range s.Reservations {
		r := &s.Reservations[i]
		if r.Active(s.Time) {
			active = append(active, r)
			lacks[r.ID] = r.GPUs
		}
	}
	for _, a := range s.Allocations {
		if _, ok := lacks[a.Reservation]; ok {
			lacks[a.Reservation] -= len(a.GPUIDs)
		}
	}
	// After: stops, holds, then admits.
	after := maps.Clone(label)
	changedBy := map[string]int{} // GPU -> the action that took it from a booking
	usable := func(l string) bool { return l == coverFree || l == coverIdle || strings.HasPrefix(l, resLabel) }
	set := func(id, l string, i int) {
		if usable(after[id]) && after[id] != l {
			changedBy[id] = i
		}
		after[id] = l
	}
	ending := map[string]bool{}
	for i, a := range p.Actions {
		switch a.Action {
		case ActionStop:
			v := allocs[a.Alloc]
			if v == nil {
				continue
			}
			l := ""
			switch {
			case a.Reservation != "" && a.For.IsZero():
				l = resLabel + a.Reservation
			case !a.For.IsZero():
				l = ownLabel + a.For.String()
			}
			for _, id := range v.GPUIDs {
				switch {
				case !healthy[id]:
				case l != "":
					set(id, l, i)
				case holdOwner[id] != "":
					set(id, holdOwner[id], i)
				default:
					set(id, coverFree, i)
				}
			}
		case ActionStopJob, ActionSuspend:
			if a.Reservation != "" {
				ending[a.Reservation] = true
			}
			for _, v := range byJob[JobKey{Namespace: a.Namespace, Job: a.Job}] {
				if v.Reservation != "" {
					ending[v.Reservation] = true
				}
				for _, id := range v.GPUIDs {
					if l := holdOwner[id]; l != "" && healthy[id] {
						set(id, l, i)
					} else if healthy[id] {
						set(id, coverFree, i)
					}
				}
			}
		case ActionHold:
			o := ownerLabel(HoldOwner{Reservation: a.Reservation, Group: a.For})
			for _, id := range a.GPUIDs {
				if after[id] != coverBusy {
					set(id, o, i)
				}
			}
		}
	}
	lacksAfter := maps.Clone(lacks)
	gpusOf := map[string][]GPU{}
	for _, n := range s.Nodes {
		gpusOf[n.ID] = n.GPUs
	}
	for i, a := range p.Actions {
		g := pend[GroupKey{Namespace: a.Namespace, Job: a.Job, Group: a.Group}]
		if a.Action != ActionAdmit || g == nil || g.Idle {
			continue
		}
		if _, ok := lacksAfter[g.Reservation]; ok {
			lacksAfter[g.Reservation] -= a.Count * g.GPUs
		}
		for _, node := range a.Nodes {
			need := g.GPUs
			for _, want := range []string{ownLabel + g.Key().String(), resLabel + g.Reservation, coverFree} {
				for _, gpu := range gpusOf[node] {
					if need > 0 && after[gpu.ID] == want && (want != coverFree || modelMatches(g.Model, gpu.Model)) &&
						(g.Reservation != "" || want != resLabel) {
						set(gpu.ID, coverBusy, i)
						need--
					}
				}
			}
		}
	}
	// GPUs freed or held for a job naming a booking are that booking's
	// (its own claim, L10.start and L5 step 1 for its jobs): they cover it.
	for id, l := range after {
		if !strings.HasPrefix(l, ownLabel) {
			continue
		}
		for k, g := range pend {
			if g.Reservation != "" && l == ownLabel+k.String() {
				after[id] = resLabel + g.Reservation
			}
		}
	}
	// A booking that lacks nothing after the plan keeps no GPUs from the
	// next plan on (DESIGN L10: a hold past its end keeps GPUs only for
	// allocations the booking has not placed), so what it holds or frees
	// beyond its need is free to the others.
	for id, l := range after {
		if r, ok := strings.CutPrefix(l, resLabel); ok && !ending[r] && lacksAfter[r] <= 0 {
			if _, active := lacks[r]; active {
				after[id] = coverFree
			}
		}
	}
	demands := func(lack map[string]int) []coverDemand {
		var out []coverDemand
		for _, r := range active {
			if ending[r.ID] || lack[r.ID] <= 0 {
				continue
			}
			size, _ := r.Shape()
			out = append(out, coverDemand{r: r, size: size, full: lack[r.ID] / size, rem: lack[r.ID] % size})
		}
		return out
	}
	before := demands(lacks)
	if len(before) == 0 {
		return false, nil
	}
	// The precondition: a Cover as DESIGN L10 describes it places every
	// booking's unplaced allocations whatever the order of the bookings
	// (DESIGN does not give one), so that any plan that covers them must
	// leave them placeable.
	if !coverGreedyFits(s, label, before) {
		return false, nil
	}
	now := demands(lacksAfter)
	fits, decided := coverFits(s, after, now)
	if fits || !decided {
		return true, nil
	}
	var taken []int
	for _, i := range changedBy {
		if !slices.Contains(taken, i) {
			taken = append(taken, i)
		}
	}
	sort.Ints(taken)
	var b strings.Builder
	fmt.Fprintf(&b, "L10 Cover: before the plan the active bookings' unplaced allocations (%v) fit on their held, free and "+
		"idle-occupied GPUs; after it they (%v) do not.\nGPUs before -> after, per node:\n", before, now)
	for _, n := range s.Nodes {
		var parts []string
		for _, g := range n.GPUs {
			if label[g.ID] != after[g.ID] {
				parts = append(parts, fmt.Sprintf("%s %s -> %s", g.ID, label[g.ID], after[g.ID]))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "  %s (%s): %s\n", n.ID, poolOf(n.NodePool), strings.Join(parts, ", "))
		}
	}
	b.WriteString("actions that took them:\n")
	for _, i := range taken {
		a := p.Actions[i]
		fmt.Fprintf(&b, "  %s %s %s %s/%s/%s on %s%v for %s: %s\n", a.Action, a.Rule, a.Alloc, a.Namespace, a.Job, a.Group,
			a.Node, a.Nodes, a.For, a.Reason)
	}
	return true, fmt.Errorf("%s", b.String())
}

func ownerLabel(o HoldOwner) string {
	if o.Reservation != "" {
		return resLabel + o.Reservation
	}
	return ownLabel + o.Group.String()
}

// coverFits reports whether demands fit together on the GPUs labelled
// usable for them: a booking's own (held or being freed for it), free
// and idle-occupied ones, each allocation on one node of the booking's
// pool with GPUs of its model. An exhaustive search with a budget;
// decided is false when the budget ran out.
func coverFits(s *Snapshot, label map[string]string, demands []coverDemand) (fits, decided bool) {
	type item struct{ d, size int }
	var items []item
	for di, d := range demands {
		for k := 0; k < d.full; k++ {
			items = append(items, item{di, d.size})
		}
		if d.rem > 0 {
			items = append(items, item{di, d.rem})
		}
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].size > items[j].size })
	// own[d][n], common[d][n]: GPUs of node n usable by demand d alone,
	// and free or idle ones (shared: commonKey names the node and model).
	nodes := len(s.Nodes)
	own := make([][]int, len(demands))
	type pool struct{ node, model string }
	common := map[pool]int{}
	eligible := make([][]bool, len(demands))
	for di, d := range demands {
		own[di] = make([]int, nodes)
		eligible[di] = make([]bool, nodes)
		for ni, n := range s.Nodes {
			eligible[di][ni] = poolOf(n.NodePool) == poolOf(d.r.NodePool)
			for _, g := range n.GPUs {
				if label[g.ID] == resLabel+d.r.ID && modelMatches(d.r.Model, g.Model) {
					own[di][ni]++
				}
			}
		}
	}
	for _, n := range s.Nodes {
		for _, g := range n.GPUs {
			if l := label[g.ID]; l == coverFree || l == coverIdle {
				common[pool{n.ID, g.Model}]++
			}
		}
	}
	// take takes k common GPUs of node ni for demand d (any model when the
	// booking names none), or reports that there are not enough; undo
	// gives them back.
	take := func(di, ni, k int) ([]pool, bool) {
		var took []pool
		models := []string{demands[di].r.Model}
		if models[0] == "" {
			models = models[:0]
			for _, g := range s.Nodes[ni].GPUs {
				if !slices.Contains(models, g.Model) {
					models = append(models, g.Model)
				}
			}
		}
		for _, m := range models {
			key := pool{s.Nodes[ni].ID, m}
			for k > 0 && common[key] > 0 {
				common[key]--
				k--
				took = append(took, key)
			}
		}
		if k > 0 {
			for _, key := range took {
				common[key]++
			}
			return nil, false
		}
		return took, true
	}
	budget := 200000
	var place func(i, from int) bool
	place = func(i, from int) bool {
		if i == len(items) {
			return true
		}
		if budget--; budget < 0 {
			return false
		}
		it := items[i]
		start := 0
		if i > 0 && items[i-1] == it {
			start = from // identical items in node order: no permutations
		}
		for ni := start; ni < nodes; ni++ {
			if !eligible[it.d][ni] {
				continue
			}
			fromOwn := min(own[it.d][ni], it.size)
			took, ok := take(it.d, ni, it.size-fromOwn)
			if !ok {
				continue
			}
			own[it.d][ni] -= fromOwn
			if place(i+1, ni) {
				return true
			}
			own[it.d][ni] += fromOwn
			for _, key := range took {
				common[key]++
			}
		}
		return false
	}
	fits = place(0, 0)
	return fits, fits || budget >= 0
}

// coverGreedyFits reports whether the Cover of DESIGN L10 places every
// unplaced allocation of demands, in every order of the bookings: each
// allocation (the full ones, then the smaller last one) on the node where
// it fits on GPUs its booking holds, else on those and free GPUs, else
// also on idle-occupied GPUs, bin-packing within each tier (the fewest
// such GPUs that still fit, then node ID), taking its own GPUs first,
// then free, then idle ones.
func coverGreedyFits(s *Snapshot, label map[string]string, demands []coverDemand) bool {
	if len(demands) > 5 {
		return false // 120 orders at most
	}
	order := make([]int, len(demands))
	for i := range order {
		order[i] = i
	}
	var perms func(k int) bool
	perms = func(k int) bool {
		if k == len(order) {
			return coverGreedyOrder(s, label, demands, order)
		}
		for i := k; i < len(order); i++ {
			order[k], order[i] = order[i], order[k]
			ok := perms(k + 1)
			order[k], order[i] = order[i], order[k]
			if !ok {
				return false
			}
		}
		return true
	}
	return perms(0)
}

func coverGreedyOrder(s *Snapshot, label map[string]string, demands []coverDemand, order []int) bool {
	l := maps.Clone(label)
	nodes := slices.Clone(s.Nodes)
	slices.SortFunc(nodes, func(a, b Node) int { return strings.Compare(a.ID, b.ID) })
	for _, di := range order {
		d := demands[di]
		sizes := slices.Repeat([]int{d.size}, d.full)
		if d.rem > 0 {
			sizes = append(sizes, d.rem)
		}
		own := resLabel + d.r.ID
		for _, size := range sizes {
			placed := false
			for tier := 0; tier < 3 && !placed; tier++ {
				ok := func(lb string) bool {
					return lb == own || tier >= 1 && lb == coverFree || tier == 2 && lb == coverIdle
				}
				best, bestN := -1, 0
				for ni, n := range nodes {
					if poolOf(n.NodePool) != poolOf(d.r.NodePool) {
						continue
					}
					k := 0
					for _, g := range n.GPUs {
						if ok(l[g.ID]) && modelMatches(d.r.Model, g.Model) {
							k++
						}
					}
					if k >= size && (best < 0 || k < bestN) {
						best, bestN = ni, k
					}
				}
				if best < 0 {
					continue
				}
				need := size
				for _, want := range []string{own, coverFree, coverIdle} {
					for _, g := range nodes[best].GPUs {
						if need > 0 && l[g.ID] == want && ok(want) && modelMatches(d.r.Model, g.Model) {
							l[g.ID] = coverBusy
							need--
						}
					}
				}
				placed = true
			}
			if !placed {
				return false
			}
		}
	}
	return true
}
