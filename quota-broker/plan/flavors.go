package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// GPU flavors (DESIGN L13). Every law holds per flavor, independently: a
// flavor's devices, nominals, usage, bookings and holds never meet
// another's. So the core plans a tree of several flavors as one planner
// per flavor, each on the snapshot's projection onto its flavor
// (project): the nodes with only that flavor's GPUs, the allocations
// with only their devices of it (an allocation counts in each flavor it
// holds devices of, L2), the pending jobs that allow it, the bookings of
// it, the holds on its GPUs. Devices of no flavor (ungoverned: MIG
// instances under the implicit flavor, models no flavor names) are in no
// projection: never counted, free, admitted through or stopped.
//
// The timed rules, holds, covers and drains run in each flavor's planner,
// flavors in tree order; then the pending jobs are decided one at a time
// in L3 order, each job by the choice rule across its allowed flavors
// (decideAcross). A tree of one flavor has one planner on the snapshot
// itself (or on its projection when it has ungoverned devices): it plans
// exactly as before flavors.
//
// Known limits, left to the later items: a job that holds
// devices of several flavors (placed before flavors, or outside the
// broker) is a victim unit in each flavor apart, and a stop in one
// flavor leaves its devices of the others counted until the next plan;
// idle groups' idle fit and pre-warms are planned in the tree's first
// flavor (item 5).

// flavorOfSnapshot returns the flavor a planner of s plans: the tree's
// first flavor (its only one, or the implicit quota.ImplicitFlavor). A
// projection (project) keeps the whole tree, so its planner is told its
// flavor instead (newFlavorPlanner).
func flavorOfSnapshot(s *Snapshot) string {
	return quota.FlavorNames(s.Quota)[0]
}

// flavorLabel returns the flavor a planner of s names in its actions and
// usage rows: its flavor, or "" in a tree without flavor blocks.
func flavorLabel(s *Snapshot) string {
	if s.Quota == nil || len(s.Quota.Flavors) == 0 {
		return ""
	}
	return flavorOfSnapshot(s)
}

// flavorIndex maps each GPU ID of the snapshot to the index of its flavor
// in flavors, or -1 for an ungoverned device (quota.FlavorOf).
type flavorIndex struct {
	flavors []quota.Flavor
	byGPU   map[string]int
	// ungoverned counts the devices of no flavor.
	ungoverned int
}

func newFlavorIndex(s *Snapshot, flavors []quota.Flavor) *flavorIndex {
	n := 0
	for i := range s.Nodes {
		n += len(s.Nodes[i].GPUs)
	}
	fx := &flavorIndex{flavors: flavors, byGPU: make(map[string]int, n)}
	type kind struct{ model, mig string }
	memo := map[kind]int{}
	for i := range s.Nodes {
		for _, g := range s.Nodes[i].GPUs {
			k := kind{g.Model, g.MIGProfile}
			fi, ok := memo[k]
			if !ok {
				fi = -1
				for x := range flavors {
					if flavors[x].Matches(g.Model, g.MIGProfile) {
						fi = x
						break
					}
				}
				memo[k] = fi
			}
			if fi < 0 {
				fx.ungoverned++
			}
			fx.byGPU[g.ID] = fi
		}
	}
	return fx
}

// of returns the flavor index of GPU id: -1 for an ungoverned one, and
// 0 (the first flavor) for an ID on no node, which Validate reports and
// the first flavor's planner warns of, as a planner of the whole
// snapshot did.
func (fx *flavorIndex) of(id string) int {
	fi, ok := fx.byGPU[id]
	if !ok {
		return 0
	}
	return fi
}

// governed reports whether every device of s is of flavor f, the tree's
// only one: then the snapshot is its own projection.
func governed(s *Snapshot, f *quota.Flavor) bool {
	model, mig, ok := "", "", true
	for i := range s.Nodes {
		for k := range s.Nodes[i].GPUs {
			g := &s.Nodes[i].GPUs[k]
			if g.Model == model && g.MIGProfile == mig && k > 0 {
				continue
			}
			model, mig = g.Model, g.MIGProfile
			if ok = f.Matches(model, mig); !ok {
				return false
			}
		}
	}
	return true
}

// allowedFlavors returns, per job, the indices of the flavors it may take
// in the order it tries them (DESIGN L13): the flavors every group
// allows, in its first group's order (by group name, as the planner
// orders them); a group without a list allows every flavor, in tree
// order.
func allowedFlavors(s *Snapshot, flavors []quota.Flavor) map[JobKey][]int {
	names := make([]string, len(flavors))
	for i := range flavors {
		names[i] = flavors[i].Name
	}
	first := map[JobKey]*Pending{}
	for i := range s.Pending {
		g := &s.Pending[i]
		if f, ok := first[g.JobKey()]; !ok || g.Group < f.Group {
			first[g.JobKey()] = g
		}
	}
	out := make(map[JobKey][]int, len(first))
	for k, g := range first {
		order := g.Flavors
		if order == nil {
			order = names
		}
		var idx []int
		for _, f := range order {
			if i := slices.Index(names, f); i >= 0 {
				idx = append(idx, i)
			}
		}
		out[k] = idx
	}
	for i := range s.Pending {
		g := &s.Pending[i]
		if g.Flavors == nil {
			continue
		}
		k := g.JobKey()
		out[k] = slices.DeleteFunc(out[k], func(fi int) bool { return !slices.Contains(g.Flavors, names[fi]) })
	}
	return out
}

// project returns the snapshot's projection onto flavor fi (see above):
// the same tree, time and settings; nodes with only their GPUs of the
// flavor; allocations and holds with only their GPUs of it (left out
// when none is); the pending groups of the jobs that allow it; the
// bookings of it (a booking without a flavor is the first flavor's); the
// idle groups and pre-warms in the first flavor only.
func project(s *Snapshot, fx *flavorIndex, fi int, allowed map[JobKey][]int) *Snapshot {
	out := &Snapshot{Time: s.Time, Quota: s.Quota, Settings: s.Settings}
	name := fx.flavors[fi].Name
	total := 0
	for i := range s.Nodes {
		total += len(s.Nodes[i].GPUs)
	}
	gpus := make([]GPU, 0, total/len(fx.flavors)+1)
	out.Nodes = make([]Node, len(s.Nodes))
	for i := range s.Nodes {
		n := s.Nodes[i]
		at := len(gpus)
		for _, g := range n.GPUs {
			if fx.byGPU[g.ID] == fi {
				gpus = append(gpus, g)
			}
		}
		n.GPUs = gpus[at:len(gpus):len(gpus)]
		out.Nodes[i] = n
	}
	keep := func(ids []string) []string {
		var kept []string
		for k, id := range ids {
			if fx.of(id) != fi {
				if kept == nil {
					kept = append(make([]string, 0, len(ids)), ids[:k]...)
				}
				continue
			}
			if kept != nil {
				kept = append(kept, id)
			}
		}
		if kept == nil {
			return ids
		}
		return kept
	}
	for i := range s.Allocations {
		a := s.Allocations[i]
		if len(a.GPUIDs) == 0 {
			if fi == 0 {
				out.Allocations = append(out.Allocations, a)
			}
			continue
		}
		if a.GPUIDs = keep(a.GPUIDs); len(a.GPUIDs) > 0 {
			out.Allocations = append(out.Allocations, a)
		}
	}
	for i := range s.Pending {
		if slices.Contains(allowed[s.Pending[i].JobKey()], fi) {
			out.Pending = append(out.Pending, s.Pending[i])
		}
	}
	for _, r := range s.Reservations {
		if r.Flavor == name || r.Flavor == "" && fi == 0 {
			out.Reservations = append(out.Reservations, r)
		}
	}
	for _, h := range s.Holds {
		if h.GPUIDs = keep(h.GPUIDs); len(h.GPUIDs) > 0 {
			out.Holds = append(out.Holds, h)
		}
	}
	if fi == 0 {
		out.IdleGroups, out.Prewarm = s.IdleGroups, s.Prewarm
	}
	return out
}

// flavorPlan is the planner of one flavor and how far the driver has
// taken its actions.
type flavorPlan struct {
	p *planner
	// taken is how many of p.st.actions the driver has moved to the plan.
	taken int
	cache map[feasibilityKey][]int
	jobs  map[JobKey]*job
}

// computeFlavors plans a snapshot whose tree has several flavors, or one
// flavor and ungoverned devices (see above).
func computeFlavors(s *Snapshot, flavors []quota.Flavor, fx *flavorIndex) *Plan {
	allowed := allowedFlavors(s, flavors)
	named := len(s.Quota.Flavors) > 0
	fps := make([]*flavorPlan, len(flavors))
	for fi := range flavors {
		buf := bufferPool.Get().(*buffers)
		defer bufferPool.Put(buf)
		p := newFlavorPlanner(project(s, fx, fi, allowed), buf, flavors[fi].Name, named)
		defer p.vc.forget()
		fps[fi] = &flavorPlan{p: p, cache: map[feasibilityKey][]int{}}
	}
	pl := &Plan{}
	// take moves the actions a flavor's planner made since the last call
	// to the plan, naming the flavor; a stop of an allocation (or a job
	// stop or suspend of a job) already in the plan is left out: a job
	// holding devices of several flavors is stopped once.
	stopped := map[string]bool{}
	take := func(fp *flavorPlan) {
		for _, a := range fp.p.st.actions[fp.taken:] {
			if a.Reasons == nil { // a wait across flavors names none
				a.Flavor = fp.p.label
			}
			switch a.Action {
			case ActionStop:
				if stopped[a.Alloc] {
					continue
				}
				stopped[a.Alloc] = true
			case ActionStopJob, ActionSuspend:
				k := string(a.Action) + "\x00" + a.Namespace + "\x00" + a.Job
				if stopped[k] {
					continue
				}
				stopped[k] = true
			}
			pl.Actions = append(pl.Actions, a)
		}
		fp.taken = len(fp.p.st.actions)
	}
	suspended := map[JobKey]bool{}
	for _, fp := range fps {
		for k := range fp.p.timedStops() {
			suspended[k] = true
		}
		fp.p.bindHolds()
		fp.p.cover(fp.cache)
		fp.p.drains(fp.cache)
		take(fp)
		fp.jobs = map[JobKey]*job{}
		for _, j := range fp.p.pendingJobs() {
			fp.jobs[JobKey{Namespace: j.namespace, Job: j.name}] = j
		}
	}
	order := (&planner{snap: s, byNS: map[string]*qnode{}}).pendingJobs()
	for _, idlePass := range []bool{false, true} {
		for _, o := range order {
			key := JobKey{Namespace: o.namespace, Job: o.name}
			if o.idle != idlePass || suspended[key] {
				continue
			}
			fis := allowed[key]
			if len(fis) == 0 {
				// No flavor is allowed by every group: it waits; the
				// first planner says so (decided nowhere else).
				names := make([]string, 0, len(o.groups))
				for _, g := range o.groups {
					names = append(names, fmt.Sprintf("%s [%s]", g.Group, strings.Join(g.Flavors, ",")))
				}
				for _, g := range o.groups {
					pl.Actions = append(pl.Actions, Action{Action: ActionWait, Namespace: g.Namespace, Job: g.Job, Group: g.Group,
						Count: g.Count, GPUs: g.GPUs, Rule: RuleAdmission,
						Reason: "no flavor is allowed by every GPU group of the job (" + strings.Join(names, "; ") + ")"})
				}
				continue
			}
			decideAcross(fps, fis, key)
			for _, fi := range fis {
				take(fps[fi])
			}
		}
	}
	// Usage: one row per quota node and flavor, node by node.
	rows := make([][]Usage, len(fps))
	for fi, fp := range fps {
		rows[fi] = fp.p.usage()
	}
	for qi := range rows[0] {
		for fi := range rows {
			pl.Usage = append(pl.Usage, rows[fi][qi])
		}
	}
	seen := map[string]bool{}
	for _, fp := range fps {
		for _, w := range fp.p.planWarnings() {
			k := string(w.Kind) + "\x00" + w.Namespace + "\x00" + w.Message
			if !seen[k] {
				seen[k] = true
				pl.Warnings = append(pl.Warnings, w)
			}
		}
		if t := fp.p.wakeAt; !t.IsZero() && (pl.WakeAt.IsZero() || t.Before(pl.WakeAt)) {
			pl.WakeAt = t
		}
	}
	pl.IdleFit = fps[0].p.idleFit()
	return pl
}

// newFlavorPlanner is newPlanner for the projection s of flavor; named
// says whether the tree declares flavors (actions and usage rows then
// name it).
func newFlavorPlanner(s *Snapshot, buf *buffers, flavor string, named bool) *planner {
	label := ""
	if named {
		label = flavor
	}
	return newPlannerOf(s, buf, flavor, label)
}

// outcome is what deciding a job in one flavor did (DESIGN L13 Choice).
type outcome int

const (
	outWait  outcome = iota // nothing admitted
	outPart                 // some allocations admitted (a non-flex job)
	outStops                // all admitted, with stops (L5/L6, L5.3)
	outFree                 // all admitted on free GPUs, no stop at all
)

// trial is a planner's state before a job was tried in it, to roll back.
type trial struct {
	saved    *state
	resolved int
	notes    int
	wakeAt   time.Time
}

func (p *planner) begin() trial {
	return trial{saved: p.st.clone(), resolved: len(p.resolvedOrder), notes: len(p.notes), wakeAt: p.wakeAt}
}

func (p *planner) rollback(t trial) {
	p.st = t.saved
	p.rebook(t.resolved)
	p.notes = p.notes[:t.notes]
	p.wakeAt = t.wakeAt
	p.vc.forget()
}

// classify reads the actions a decision made from start on: admitted
// allocations against the job's, and whether anything was stopped.
func classify(acts []Action, j *job) (outcome, Action) {
	want, admitted, stops := 0, 0, false
	for _, g := range j.groups {
		want += g.Count
	}
	var wait Action
	for _, a := range acts {
		switch a.Action {
		case ActionAdmit:
			admitted += a.Count
		case ActionStop, ActionStopJob:
			stops = true
		case ActionWait:
			if wait.Action == "" {
				wait = a
			}
		}
	}
	switch {
	case admitted == 0:
		return outWait, wait
	case admitted < want:
		return outPart, wait
	case stops:
		return outStops, wait
	}
	return outFree, wait
}

// decideAcross decides job key in the first of its flavors fis (tree
// planners fps) by DESIGN L13's choice rule, Kueue's TryNextFlavor: the
// first flavor in which it is entitled and fits on free GPUs; else the
// first in which L5/L6 make room for all of it; else (a non-flex job)
// the first in which some allocation is admitted; else it waits with a
// reason per flavor. An idle job takes the first flavor with free GPUs
// for all of it, else the first with some. A job with one flavor, a
// job outside the tree or of a system type, and a flex request past its
// max_wait are decided in their first flavor alone.
func decideAcross(fps []*flavorPlan, fis []int, key JobKey) {
	first := fps[fis[0]]
	j0 := first.jobs[key]
	if len(fis) == 1 || j0.q == nil || j0.groups[0].Type == JobSystem || j0.groups[0].Type == JobSysbatch ||
		j0.flex != nil && first.p.now.Sub(j0.queued) > j0.flex.MaxWait {
		first.p.decide(j0, first.cache)
		return
	}
	// Fast path: the first flavor where it surely fits on free GPUs is
	// decided in place, with no copy of the state (fitsFree is exact for
	// a job of one group, conservative otherwise).
	for _, fi := range fis {
		fp := fps[fi]
		if fp.p.fitsFree(fp.jobs[key], fp.cache) {
			fp.p.decide(fp.jobs[key], fp.cache)
			return
		}
	}
	exact := len(j0.groups) == 1
	type tried struct {
		fi   int
		t    trial
		out  outcome
		wait Action
	}
	var best *tried
	var waits []tried
	for _, fi := range fis {
		fp := fps[fi]
		j := fp.jobs[key]
		t := tried{fi: fi, t: fp.p.begin()}
		start := len(fp.p.st.actions)
		fp.p.decide(j, fp.cache)
		t.out, t.wait = classify(fp.p.st.actions[start:], j)
		switch {
		case t.out == outFree:
			if best != nil {
				fps[best.fi].p.rollback(best.t)
			}
			for _, w := range waits {
				fps[w.fi].p.rollback(w.t)
			}
			return
		case t.out > outWait && (best == nil || t.out > best.out):
			if best != nil {
				fps[best.fi].p.rollback(best.t)
			}
			best = &t
			if exact && t.out == outStops {
				// No later flavor can fit on free GPUs (fitsFree said so
				// for each): the first with room for all of it wins.
				for _, w := range waits {
					fps[w.fi].p.rollback(w.t)
				}
				return
			}
		default:
			waits = append(waits, t)
		}
	}
	for _, w := range waits {
		fps[w.fi].p.rollback(w.t)
	}
	if best != nil {
		return
	}
	// It waits in every flavor: one wait per group, with each flavor's
	// reason (Reasons) and the reasons joined (Reason).
	var reasons []FlavorReason
	var text []string
	for _, w := range waits {
		r := FlavorReason{Flavor: fps[w.fi].p.flavor, Rule: w.wait.Rule, Quota: w.wait.Quota, Reason: w.wait.Reason}
		reasons = append(reasons, r)
		text = append(text, r.Flavor+": "+r.Reason)
	}
	rule, quotaName := reasons[0].Rule, reasons[0].Quota
	for _, r := range reasons[1:] {
		if r.Rule != rule {
			rule = RuleAdmission
		}
		if r.Quota != quotaName {
			quotaName = ""
		}
	}
	fp := first
	for _, g := range j0.groups {
		fp.p.emit(Action{Action: ActionWait, Namespace: g.Namespace, Job: g.Job, Group: g.Group, Count: g.Count, GPUs: g.GPUs,
			Rule: rule, Quota: quotaName, Reason: strings.Join(text, "; "), Reasons: reasons})
	}
}

// fitsFree reports whether job j, decided now, would be admitted whole
// on free GPUs with no stop (DESIGN L13 "fits on free GPUs"), without
// changing the plan: entitled with nothing yielding to it (L3), and, for
// its one group, room on the feasible nodes for all its allocations
// (bin-packing allocations of one size places as many as the nodes'
// free GPUs hold, in any order). A job of several groups or naming a
// reservation gets false: the driver tries it on a copy instead.
func (p *planner) fitsFree(j *job, cache map[feasibilityKey][]int) bool {
	if len(j.groups) != 1 || j.reservation != "" || j.q == nil {
		return false
	}
	if !j.idle {
		j.booked = p.bookedFor(j)
		if _, reason, y := p.entitled(j); reason != "" || y.gpus > 0 {
			return false
		}
	}
	g := j.groups[0]
	c := p.newClaim(j, g, cache)
	room := 0
	for _, ni := range c.nodes {
		if room += p.freeOn(p.nodes[ni], c) / g.GPUs; room >= g.Count {
			return true
		}
	}
	return false
}
