package plan

import (
	"fmt"
	"math"
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
// flavor leaves its devices of the others counted until the next plan.
//
// A pre-warm drains in one of its allowed flavors (prewarmFlavor),
// chosen once every flavor's timed stops, holds and covers are planned.
// The idle fit (idleFitAcross) serves the idle groups after the plan,
// across every flavor's planner: each group's fit lies in the first of
// its allowed flavors with room for one allocation.

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

// flavorIndex gives each GPU of the snapshot the index of its flavor in
// flavors, or -1 for an ungoverned device (quota.FlavorOf): gpuFlavors(ni)[k]
// for GPU k of s.Nodes[ni].
type flavorIndex struct {
	flavors []quota.Flavor
	// flavor holds the GPUs' flavors node by node, node ni's from
	// start[ni] to start[ni+1] (gpuFlavors).
	flavor []int8
	start  []int32
	// lastID and lastNode cache the last node found by split:
	// allocations come node by node.
	lastID   string
	lastNode int
	lastOK   bool
	// one is, per node, the flavor all its GPUs share (-1: all
	// ungoverned), or -2 when they differ or it has none.
	one []int8
	// nodeIdx maps a node ID to its index in s.Nodes, built on first
	// use (nodeOf): allocations usually come node by node, in the nodes'
	// order, and are found by the cursor lastNode instead.
	nodeIdx map[string]int
	nodes   []Node
	// sorted says the nodes are listed in ID order, each once, as the
	// planner needs them (planner.indexNodes sorts them otherwise): then
	// so are every projection's, and newFlavorPlanners indexes them side
	// by side.
	sorted bool
}

// nodeOf returns the index in s.Nodes of node id.
func (fx *flavorIndex) nodeOf(id string) (int, bool) {
	for _, ni := range [...]int{fx.lastNode, fx.lastNode + 1} {
		if ni >= 0 && ni < len(fx.nodes) && fx.nodes[ni].ID == id {
			return ni, true
		}
	}
	if fx.nodeIdx == nil {
		fx.nodeIdx = make(map[string]int, len(fx.nodes))
		for i := range fx.nodes {
			fx.nodeIdx[fx.nodes[i].ID] = i
		}
	}
	ni, ok := fx.nodeIdx[id]
	return ni, ok
}

// gpuFlavors returns the flavors of the GPUs of s.Nodes[ni], in order.
func (fx *flavorIndex) gpuFlavors(ni int) []int8 {
	return fx.flavor[fx.start[ni]:fx.start[ni+1]]
}

// newFlavorIndex indexes the flavors of s's GPUs, in one pass over the
// nodes.
func newFlavorIndex(s *Snapshot, flavors []quota.Flavor) *flavorIndex {
	fx := &flavorIndex{flavors: flavors, flavor: make([]int8, 0, 8*len(s.Nodes)), start: make([]int32, len(s.Nodes)+1),
		one: make([]int8, len(s.Nodes)), nodes: s.Nodes, sorted: true}
	model, mig, fi := "", "", int8(-1)
	for i := range s.Nodes {
		gpus := s.Nodes[i].GPUs
		if i > 0 && s.Nodes[i-1].ID >= s.Nodes[i].ID {
			fx.sorted = false
		}
		one := int8(-2)
		for k := range gpus {
			g := &gpus[k]
			if i == 0 && k == 0 || g.Model != model || g.MIGProfile != mig {
				model, mig, fi = g.Model, g.MIGProfile, -1
				for x := range flavors {
					if flavors[x].Matches(model, mig) {
						fi = int8(x)
						break
					}
				}
			}
			fx.flavor = append(fx.flavor, fi)
			switch {
			case k == 0:
				one = fi
			case one != fi:
				one = -2
			}
		}
		fx.one[i] = one
		fx.start[i+1] = int32(len(fx.flavor))
	}
	return fx
}

// split returns the flavor of each of ids, GPUs of node (an ID of
// s.Nodes) in fs (reused): -1 for an ungoverned device, and 0 (the first
// flavor) for an ID on no node or not on that node, which Validate
// reports and the first flavor's planner warns of, as a planner of the
// whole snapshot does. one is the flavor all of them share, or -2.
func (fx *flavorIndex) split(s *Snapshot, node string, ids []string, fs []int8) (out []int8, one int) {
	out = fs[:0]
	if node != fx.lastID || fx.lastID == "" {
		fx.lastID = node
		var ni int
		if ni, fx.lastOK = fx.nodeOf(node); fx.lastOK {
			fx.lastNode = ni
		}
	}
	ni, ok := fx.lastNode, fx.lastOK
	if ok && fx.one[ni] != -2 {
		// Every GPU of the node is of one flavor (or none): so are the
		// allocation's (an ID not on the node is Validate's to refuse).
		return out, int(fx.one[ni])
	}
	one = -3
	pos := 0
	for _, id := range ids {
		fi := int8(0)
		if ok {
			gpus := s.Nodes[ni].GPUs
			for k := range gpus {
				x := (pos + k) % len(gpus)
				if gpus[x].ID == id {
					fi, pos = fx.gpuFlavors(ni)[x], x+1
					break
				}
			}
		}
		out = append(out, fi)
		switch {
		case one == -3:
			one = int(fi)
		case one != int(fi):
			one = -2
		}
	}
	return out, one
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

// allowedFlavors returns the indices of the flavors job j may take, in
// the order it tries them (DESIGN L13): the flavors every group allows,
// in its first group's order (by group name, as the planner orders
// them); a group without a list allows every flavor, in tree order
// (all, shared by such jobs).
func allowedFlavors(j *job, names []string, all []int) []int {
	if !slices.ContainsFunc(j.groups, func(g *Pending) bool { return g.Flavors != nil }) {
		return all
	}
	var idx []int
	order := names
	if f := j.groups[0].Flavors; f != nil {
		order = f
	}
	for _, f := range order {
		i := slices.Index(names, f)
		if i < 0 || slices.Contains(idx, i) {
			continue
		}
		if !slices.ContainsFunc(j.groups, func(g *Pending) bool { return g.Flavors != nil && !slices.Contains(g.Flavors, f) }) {
			idx = append(idx, i)
		}
	}
	return idx
}

// projection is the snapshot's projection onto one flavor (see above):
// snap holds the same tree, time and settings, the pending groups of
// the jobs that allow the flavor, its bookings, its holds (with only
// their GPUs of the flavor), the pre-warms that allow the flavor (each
// drains in one, prewarmFlavor; the idle groups are idleFitAcross's,
// across flavors);
// nodes and allocs are the nodes with GPUs of the flavor and the
// allocations with devices of it (pointers to the
// snapshot's own where they are wholly of the flavor, else copies with
// only those GPUs; the first flavor's also the allocations on no known
// GPU, for the planner's warnings).
type projection struct {
	snap   *Snapshot
	nodes  []*Node
	allocs []*Allocation
}

// layout is how projectAll laid the snapshot out over the projections,
// for newFlavorPlanners: nodes and allocs give the flavor of each node
// and allocation put in a projection, in the order put (the snapshot's:
// each projection's lists are in that order too), gpus the GPUs of each
// flavor's nodes, and freeing says that some allocation of the snapshot
// is being stopped for someone (Allocation.StoppingFor,
// StoppingForReservation), read on the way.
type layout struct {
	nodes, allocs []int8
	gpus          []int
	freeing       bool
}

// projectAll returns the snapshot's projection onto each flavor, backed
// by the flavors' buffers, and their layout (its lists backed by the
// first flavor's buffers).
func projectAll(s *Snapshot, fx *flavorIndex, order []*job, fis [][]int, bufs []*buffers) ([]projection, layout) {
	nf := len(fx.flavors)
	out := make([]projection, nf)
	lay := layout{nodes: bufs[0].layNodes[:0], allocs: bufs[0].layAllocs[:0], gpus: make([]int, nf)}
	for fi := range out {
		out[fi].snap = &Snapshot{Time: s.Time, Quota: s.Quota, Settings: s.Settings, Evictions: s.Evictions}
		out[fi].nodes = bufs[fi].projNodes[:0]
		out[fi].allocs = bufs[fi].projAllocs[:0]
	}
	for fi := range out {
		f := fx.flavors[fi].Name
		for _, w := range s.Prewarm {
			if w.Flavors == nil || slices.Contains(w.Flavors, f) {
				out[fi].snap.Prewarm = append(out[fi].snap.Prewarm, w)
			}
		}
	}
	var fs []int8
	// keep returns the IDs of flavor fi among ids, whose flavors are fs.
	keep := func(ids []string, fs []int8, fi int) []string {
		var kept []string
		for k, id := range ids {
			if int(fs[k]) == fi {
				kept = append(kept, id)
			}
		}
		return kept
	}
	// needed marks, per flavor, the nodes of mixed flavors its
	// allocations and holds are on.
	needed := make([][]bool, nf)
	need := func(fi int, node string) {
		if ni, ok := fx.nodeOf(node); ok && int(fx.one[ni]) != fi {
			if needed[fi] == nil {
				needed[fi] = make([]bool, len(s.Nodes))
			}
			needed[fi][ni] = true
		}
	}
	for i := range s.Allocations {
		a := &s.Allocations[i]
		lay.freeing = lay.freeing || !a.stoppingOwner().IsZero()
		var one int
		fs, one = fx.split(s, a.Node, a.GPUIDs, fs)
		switch {
		case len(a.GPUIDs) == 0:
			out[0].allocs = append(out[0].allocs, a)
			lay.allocs = append(lay.allocs, 0)
			need(0, a.Node)
		case one >= 0:
			out[one].allocs = append(out[one].allocs, a)
			lay.allocs = append(lay.allocs, int8(one))
		case one == -2: // devices of several flavors: counted in each (L2)
			for fi := range out {
				if ids := keep(a.GPUIDs, fs, fi); len(ids) > 0 {
					c := *a
					c.GPUIDs = ids
					out[fi].allocs = append(out[fi].allocs, &c)
					lay.allocs = append(lay.allocs, int8(fi))
					need(fi, a.Node)
				}
			}
		}
	}
	for _, h := range s.Holds {
		var one int
		fs, one = fx.split(s, h.Node, h.GPUIDs, fs)
		switch {
		case len(h.GPUIDs) == 0:
		case one >= 0:
			out[one].snap.Holds = append(out[one].snap.Holds, h)
		case one == -2:
			for fi := range out {
				if ids := keep(h.GPUIDs, fs, fi); len(ids) > 0 {
					c := h
					c.GPUIDs = ids
					out[fi].snap.Holds = append(out[fi].snap.Holds, c)
					need(fi, h.Node)
				}
			}
		}
	}
	for ni := range s.Nodes {
		n := &s.Nodes[ni]
		if one := int(fx.one[ni]); one >= 0 {
			out[one].nodes = append(out[one].nodes, n)
			lay.nodes = append(lay.nodes, int8(one))
			lay.gpus[one] += len(n.GPUs)
			for fi := range out {
				if fi != one && needed[fi] != nil && needed[fi][ni] {
					c := *n
					c.GPUs = nil
					out[fi].nodes = append(out[fi].nodes, &c)
					lay.nodes = append(lay.nodes, int8(fi))
				}
			}
			continue
		}
		for fi := range out {
			var gpus []GPU
			for k, f := range fx.gpuFlavors(ni) {
				if int(f) == fi {
					gpus = append(gpus, n.GPUs[k])
				}
			}
			if len(gpus) > 0 || needed[fi] != nil && needed[fi][ni] {
				c := *n
				c.GPUs = gpus
				out[fi].nodes = append(out[fi].nodes, &c)
				lay.nodes = append(lay.nodes, int8(fi))
				lay.gpus[fi] += len(gpus)
			}
		}
	}
	for fi, b := range bufs {
		b.projNodes, b.projAllocs = out[fi].nodes, out[fi].allocs
	}
	bufs[0].layNodes, bufs[0].layAllocs = lay.nodes, lay.allocs
	perFlavor := make([]int, nf)
	for x, j := range order {
		for _, fi := range fis[x] {
			perFlavor[fi] += len(j.groups)
		}
	}
	// A flavor every pending job allows (the usual case) gets the
	// snapshot's own list, in its order rather than L3's: a flavor's
	// planner reads its pending groups only as a set (the flex window,
	// indexReservations; timedStops' pending jobs), computeFlavors hands
	// it its jobs in L3 order.
	for fi := range out {
		if perFlavor[fi] == len(s.Pending) {
			out[fi].snap.Pending = s.Pending
			continue
		}
		out[fi].snap.Pending = make([]Pending, 0, perFlavor[fi])
		for x, j := range order {
			if slices.Contains(fis[x], fi) {
				for _, g := range j.groups {
					out[fi].snap.Pending = append(out[fi].snap.Pending, *g)
				}
			}
		}
	}
	for _, r := range s.Reservations {
		for fi := range out {
			if r.Flavor == fx.flavors[fi].Name || r.Flavor == "" && fi == 0 {
				out[fi].snap.Reservations = append(out[fi].snap.Reservations, r)
			}
		}
	}
	return out, lay
}

// flavorPlan is the planner of one flavor and how far the driver has
// taken its actions.
type flavorPlan struct {
	p *planner
	// taken is how many of p.st.actions the driver has moved to the plan.
	taken int
	cache map[feasibilityKey][]int
	// jobs are the pending jobs by their place in the L3 order of the
	// whole snapshot, nil where the job does not allow the flavor.
	jobs []*job
	// noRoom remembers the claims found not to fit on free GPUs
	// (fitsFree): the smallest count that did not. Free GPUs only
	// shrink while the planner stops nothing and nothing is held or
	// being freed, so the answer holds until then (take clears it);
	// noRoom is nil when it cannot be kept.
	noRoom map[noRoomKey]int
}

// noRoomKey is a claim's shape for flavorPlan.noRoom.
type noRoomKey struct {
	feasibilityKey
	idle bool
}

// shape is the noRoom key of a job of one group.
func (fp *flavorPlan) shape(j *job) noRoomKey {
	g := j.groups[0]
	return noRoomKey{feasibilityKey{datacenters: strings.Join(g.Datacenters, "\x00"), pool: poolOf(g.NodePool), gpus: g.GPUs, model: g.Model}, j.idle}
}

// fitsFree is planner.fitsFree with fp.noRoom.
func (fp *flavorPlan) fitsFree(j *job) bool {
	if fp.noRoom == nil || len(j.groups) != 1 {
		fits, _ := fp.p.fitsFree(j, fp.cache)
		return fits
	}
	g := j.groups[0]
	k := fp.shape(j)
	if n, ok := fp.noRoom[k]; ok && g.Count >= n {
		return false
	}
	fits, noRoom := fp.p.fitsFree(j, fp.cache)
	if noRoom {
		if n, ok := fp.noRoom[k]; !ok || g.Count < n {
			fp.noRoom[k] = g.Count
		}
	}
	return fits
}

// computeFlavors plans a snapshot whose tree has several flavors, or one
// flavor and ungoverned devices (see above).
func computeFlavors(s *Snapshot, flavors []quota.Flavor, fx *flavorIndex, idleOrder IdleOrder) *Plan {
	// The jobs in L3 order, once for all flavors, with the flavors each
	// allows; each flavor's planner gets its own copy of those that allow
	// it (their groups are the snapshot's, which no planner changes).
	order := (&planner{snap: s, byNS: map[string]*qnode{}}).pendingJobs()
	names := quota.FlavorNames(s.Quota)
	all := make([]int, len(flavors))
	for i := range all {
		all[i] = i
	}
	// A job naming a reservation takes the booking's flavor only (DESIGN
	// L13); noFlavor says why a job has none left.
	resFlavor := map[string]int{}
	for _, r := range s.Reservations {
		resFlavor[r.ID] = max(0, slices.Index(names, r.Flavor))
	}
	fis := make([][]int, len(order))
	noFlavor := make([]string, len(order))
	for x, j := range order {
		fis[x] = allowedFlavors(j, names, all)
		if len(fis[x]) == 0 {
			var lists []string
			for _, g := range j.groups {
				lists = append(lists, fmt.Sprintf("%s [%s]", g.Group, strings.Join(g.Flavors, ",")))
			}
			noFlavor[x] = "no flavor is allowed by every GPU group of the job (" + strings.Join(lists, "; ") + ")"
		}
		if rf, ok := resFlavor[j.reservation]; ok && j.reservation != "" {
			if slices.Contains(fis[x], rf) {
				fis[x] = []int{rf}
			} else if len(fis[x]) > 0 {
				fis[x] = nil
				noFlavor[x] = fmt.Sprintf("reservation %s is of flavor %s, which the job's device requests do not allow (%s)",
					j.reservation, names[rf], strings.Join(j.groups[0].Flavors, ","))
			}
		}
	}
	named := len(s.Quota.Flavors) > 0
	bufs := make([]*buffers, len(flavors))
	for fi := range bufs {
		bufs[fi] = bufferPool.Get().(*buffers)
		defer bufferPool.Put(bufs[fi])
	}
	projected, lay := projectAll(s, fx, order, fis, bufs)
	fps := make([]*flavorPlan, len(flavors))
	for fi, p := range newFlavorPlanners(projected, lay, fx, bufs, named) {
		p.idleOrder = idleOrder // rule L14.fair in each flavor (DESIGN L13 Choice)
		defer p.vc.forget()
		fps[fi] = &flavorPlan{p: p, cache: map[feasibilityKey][]int{}}
	}
	// Room for an action per pending group (an admission or a wait, the
	// most of a plan's actions), so that take seldom grows pl.Actions.
	groups := 0
	for _, j := range order {
		groups += len(j.groups)
	}
	pl := &Plan{Actions: make([]Action, 0, groups)}
	// take moves the actions a flavor's planner made since the last call
	// to the plan, naming the flavor; a stop of an allocation (or a job
	// stop or suspend of a job) already in the plan is left out: a job
	// holding devices of several flavors is stopped once.
	stopped := map[string]bool{}
	take := func(fp *flavorPlan) {
		for _, a := range fp.p.st.actions[fp.taken:] {
			if a.Action == ActionStop || a.Action == ActionStopJob || a.Action == ActionSuspend {
				fp.noRoom = nil
			}
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
	freeing := lay.freeing
	for _, fp := range fps {
		for k := range fp.p.timedStops() {
			suspended[k] = true
		}
		fp.p.bindHolds()
		fp.p.cover(fp.cache)
	}
	// Each pre-warm drains in one of its flavors (prewarmFlavor, DESIGN
	// L5 "Pre-warm", L13); the others keep its entry to name its holds.
	ps := make([]*planner, len(fps))
	caches := make([]map[feasibilityKey][]int, len(fps))
	allocs := make([][]*Allocation, len(fps))
	for fi, fp := range fps {
		ps[fi], caches[fi], allocs[fi] = fp.p, fp.cache, projected[fi].allocs
	}
	drained := make([][]Prewarm, len(fps))
	for i := range s.Prewarm {
		if fi := prewarmFlavor(&s.Prewarm[i], names, ps, allocs, caches); fi >= 0 {
			drained[fi] = append(drained[fi], s.Prewarm[i])
		}
	}
	for fi, fp := range fps {
		listed := fp.p.snap.Prewarm
		fp.p.snap.Prewarm = drained[fi]
		fp.p.drains(fp.cache)
		fp.p.snap.Prewarm = listed
		take(fp)
		if fp.p.st.heldBy == nil && !freeing {
			fp.noRoom = map[noRoomKey]int{}
		}
	}
	// Each flavor's copies of its jobs lie in one array (jobsOf), made
	// to size: the jobs point into it.
	jobsOf := make([][]job, len(fps))
	count := make([]int, len(fps))
	for x := range order {
		for _, fi := range fis[x] {
			count[fi]++
		}
	}
	for fi, fp := range fps {
		fp.jobs = make([]*job, len(order))
		jobsOf[fi] = make([]job, 0, count[fi])
	}
	for x, o := range order {
		for _, fi := range fis[x] {
			jobsOf[fi] = append(jobsOf[fi], *o)
			j := &jobsOf[fi][len(jobsOf[fi])-1]
			j.q = fps[fi].p.byNS[o.namespace]
			fps[fi].jobs[x] = j
		}
	}
	decideOne := func(x int) {
		o := order[x]
		fis := fis[x]
		if len(fis) == 0 {
			// No flavor left to it: it waits, decided nowhere.
			rule := RuleAdmission
			if o.reservation != "" {
				rule = RuleReservation
			}
			for _, g := range o.groups {
				pl.Actions = append(pl.Actions, Action{Action: ActionWait, Namespace: g.Namespace, Job: g.Job, Group: g.Group,
					Count: g.Count, GPUs: g.GPUs, Rule: rule, Reason: noFlavor[x]})
			}
			return
		}
		decideAcross(fps, fis, x)
		for _, fi := range fis {
			take(fps[fi])
		}
	}
	for _, idlePass := range []bool{false, true} {
		var xs []int
		for x, o := range order {
			if o.idle == idlePass && !suspended[JobKey{Namespace: o.namespace, Job: o.name}] {
				xs = append(xs, x)
			}
		}
		if idlePass && idleOrder.fair() {
			decideIdleFairAcross(fps, fis, xs, decideOne, idleOrder == IdleOrderFair)
			continue
		}
		for _, x := range xs {
			decideOne(x)
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
	pl.IdleFit = idleFitAcross(ps, s.IdleGroups, idleOrder)
	if len(pl.Actions) == 0 {
		pl.Actions = nil // as with no room made
	}
	return pl
}

// newFlavorPlanner is newPlanner for the projection pr of flavor; named
// says whether the tree declares flavors (actions and usage rows then
// name it).
func newFlavorPlanner(pr projection, buf *buffers, flavor string, named bool) *planner {
	return newPlannerLists(pr.snap, pr.nodes, pr.allocs, buf, flavor, flavorName(flavor, named))
}

// flavorName is the label of flavor's planner: flavor when the tree
// declares flavors (named), else "".
func flavorName(flavor string, named bool) string {
	if named {
		return flavor
	}
	return ""
}

// newFlavorPlanners returns newFlavorPlanner of each flavor's projection
// (projected, laid out as lay, on the flavors' buffers bufs), built side
// by side when the snapshot's nodes are in ID order (fx.sorted): the
// nodes of all the projections are indexed in one pass in the
// snapshot's order, each by its flavor's planner, then the allocations
// likewise, instead of one pass per flavor. Each planner takes the same
// steps on the same lists as newFlavorPlanner's, so it comes out the
// same; the passes read the snapshot's arrays in order, where a pass per
// flavor strides through them when the flavors are interleaved node by
// node (issue 17's benchmark, docs/benchmarks.md).
func newFlavorPlanners(projected []projection, lay layout, fx *flavorIndex, bufs []*buffers, named bool) []*planner {
	ps := make([]*planner, len(projected))
	if !fx.sorted {
		for fi, pr := range projected {
			ps[fi] = newFlavorPlanner(pr, bufs[fi], fx.flavors[fi].Name, named)
		}
		return ps
	}
	nodes := make([]nodeIndexer, len(ps))
	for fi, pr := range projected {
		f := fx.flavors[fi].Name
		ps[fi] = startPlanner(pr.snap, pr.nodes, pr.allocs, bufs[fi], f, flavorName(f, named))
		nodes[fi] = ps[fi].startNodes(len(pr.nodes), lay.gpus[fi])
	}
	next := make([]int, len(ps))
	for _, fi := range lay.nodes {
		ps[fi].addNode(&nodes[fi], projected[fi].nodes[next[fi]])
		next[fi]++
	}
	allocs := make([]allocIndexer, len(ps))
	for fi, p := range ps {
		p.startState()
		allocs[fi] = p.startAllocations()
	}
	clear(next)
	for _, fi := range lay.allocs {
		ps[fi].addAllocation(&allocs[fi], projected[fi].allocs[next[fi]])
		next[fi]++
	}
	for fi, p := range ps {
		p.endAllocations(&allocs[fi])
		p.finishPlanner()
	}
	return ps
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
func decideAcross(fps []*flavorPlan, fis []int, x int) {
	first := fps[fis[0]]
	j0 := first.jobs[x]
	if len(fis) == 1 || j0.q == nil || j0.groups[0].Type == JobSystem || j0.groups[0].Type == JobSysbatch ||
		j0.flex != nil && first.p.now.Sub(j0.queued) > j0.flex.MaxWait {
		first.p.decide(j0, first.cache)
		return
	}
	// Fast path: the first flavor where it fits on free GPUs is decided
	// in place, with no copy of the state. A job of one allocation is
	// decided there on free GPUs only (freeOnly), and its wait undone; a
	// larger one where fitsFree says it fits (exact for a job of one
	// group, conservative otherwise).
	one := len(j0.groups) == 1 && j0.groups[0].Count == 1 && j0.reservation == ""
	for _, fi := range fis {
		fp := fps[fi]
		j := fp.jobs[x]
		if !one {
			if fp.fitsFree(j) {
				fp.p.decide(j, fp.cache)
				return
			}
			continue
		}
		k := fp.shape(j)
		if _, ok := fp.noRoom[k]; ok {
			continue
		}
		start, notes, wakeAt := len(fp.p.st.actions), len(fp.p.notes), fp.p.wakeAt
		fp.p.freeOnly = true
		fp.p.decide(j, fp.cache)
		fp.p.freeOnly = false
		out, wait := classify(fp.p.st.actions[start:], j)
		if out == outFree {
			return
		}
		// Nothing was taken or stopped: dropping the actions undoes it.
		fp.p.st.actions, fp.p.notes, fp.p.wakeAt = fp.p.st.actions[:start], fp.p.notes[:notes], wakeAt
		if fp.noRoom != nil && wait.Action == ActionWait && wait.Quota == "" && wait.Rule != RuleReservation {
			fp.noRoom[k] = 1
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
		j := fp.jobs[x]
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
// reservation gets false: the driver tries it on a copy instead. noRoom
// says it was entitled and the free GPUs were too few.
func (p *planner) fitsFree(j *job, cache map[feasibilityKey][]int) (fits, noRoom bool) {
	if len(j.groups) != 1 || j.reservation != "" || j.q == nil {
		return false, false
	}
	if !j.idle {
		j.booked = p.bookedFor(j)
		if _, reason, y := p.entitled(j); reason != "" || y.gpus > 0 {
			return false, false
		}
	}
	g := j.groups[0]
	c := p.newClaim(j, g, cache)
	room := 0
	for _, ni := range c.nodes {
		if room += p.freeOn(p.nodes[ni], c) / g.GPUs; room >= g.Count {
			return true, false
		}
	}
	return false, true
}

// idlePick is where an idle job would go in DESIGN L14's order across
// flavors: fi, the first of its flavors in which it fits on free GPUs (the
// flavor an idle job takes, L13 Choice; -1 for none: it will wait, and
// sorts last), and share, its node's borrowed share there after its
// admission (planner.idleShareAfter).
type idlePick struct {
	fi    int
	share float64
	known bool // false: to be computed again
}

// decideIdleFairAcross decides the idle jobs xs (indexes in the L3 order,
// in that order) of a tree of several flavors in DESIGN L14's order: each
// time the job whose node would have the lowest borrowed share after its
// admission in the flavor it would take, ties in L3 order; decide decides
// one. A decision changes only the flavors the job allows, so only the
// picks in those flavors are computed again. With heads
// (IdleOrderFair) only each quota node's first idle job left
// competes (the node as the job's first flavor binds it).
func decideIdleFairAcross(fps []*flavorPlan, fis [][]int, xs []int, decide func(x int), heads bool) {
	picks := make([]idlePick, len(xs))
	var seen map[*quota.Node]bool
	if heads {
		seen = map[*quota.Node]bool{}
	}
	for len(xs) > 0 {
		clear(seen)
		best := -1
		for i, x := range xs {
			if heads && len(fis[x]) > 0 {
				if q := fps[fis[x][0]].jobs[x].q; q != nil {
					if seen[q.node] {
						continue // not its node's first
					}
					seen[q.node] = true
				}
			}
			if !picks[i].known {
				picks[i] = pickIdle(fps, fis[x], x)
			}
			if best < 0 || picks[i].share < picks[best].share {
				best = i
			}
		}
		x := xs[best]
		xs = slices.Delete(xs, best, best+1)
		picks = slices.Delete(picks, best, best+1)
		decide(x)
		for i := range picks {
			if picks[i].fi >= 0 && slices.Contains(fis[x], picks[i].fi) {
				picks[i].known = false
			}
		}
	}
}

// pickIdle is idle job x's idlePick over its flavors fis.
func pickIdle(fps []*flavorPlan, fis []int, x int) idlePick {
	for _, fi := range fis {
		fp := fps[fi]
		j := fp.jobs[x]
		if j.q == nil {
			break
		}
		if fp.fitsFree(j) {
			return idlePick{fi: fi, share: fp.p.idleShareAfter(j, j.asked), known: true}
		}
	}
	return idlePick{fi: -1, share: math.Inf(1), known: true}
}
