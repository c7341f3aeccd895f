package sim

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// The modelled cluster: nodes with GPUs, allocations that own GPUs (what the
// broker's ledger sees, DESIGN L2) and hold them (what the hardware sees).
// The two differ while a stopped allocation runs out its kill_timeout: its
// GPUs may already be given to the claimant it was stopped for, which starts
// once they are released.

type allocState uint8

const (
	placing  allocState = iota // admitted onto GPUs still held by a stopping allocation
	running                    // holds all its GPUs
	stopping                   // stopped, holds its GPUs until its kill_timeout ends
)

func (s allocState) String() string {
	return [...]string{"placing", "running", "stopping"}[s]
}

type gpuSlot struct {
	id     string
	node   int
	flavor string // the quota flavor it counts in (DESIGN L13), "" when ungoverned
	owner  *alloc // in the ledger: the allocation it is assigned to
	holder *alloc // physically: the allocation that still holds it
}

type node struct {
	id    string
	dc    string
	pool  string
	model string
	gpus  []int // slot indices
}

type alloc struct {
	flavor      string // the flavor of its GPUs (DESIGN L13)
	fi          int    // its index in the tree's declared flavors, -1 for none
	id          string
	seq         uint64
	j           *job
	node        int
	slots       []int // owned GPU slots
	ids         []string
	state       allocState
	waiting     int           // owned slots still held by another allocation
	stoppingFor plan.GroupKey // zero when not stopping for a claimant
	// stoppingForRes is the reservation it is stopping for (rules
	// L10.drain, L10.start), or "".
	stoppingForRes string
	placedAt       int64
	placedTime     time.Time // placedAt, for snapshots
	startedAt      int64     // when it started running
	stopRule       plan.Rule
	stopAt         int64
}

func (a *alloc) idle() bool { return a.j.spec.Idle }

// job is the simulation's state of one job (a training job, a dev instance,
// an inference service).
type job struct {
	spec    *JobSpec
	key     plan.GroupKey // the job's group, its claimant key
	ns      int           // namespace index
	desired int           // allocations wanted
	live    []*alloc
	running int // live allocations that run

	submitted, done, expired bool
	remaining                time.Duration // batch work left
	progressing              bool
	progStart                int64
	gen                      int // invalidates a scheduled finish
	firstStart               int64
	everStarted              bool
	// queuedAt is when the job was last queued (submission, or its last
	// suspension, L11.settle); admittedAt when it was last admitted with
	// no live allocation (0: not admitted). Both as the broker's store
	// keeps them (DESIGN L11).
	queuedAt, admittedAt int64
	stopped              bool // stopped whole by a timed rule (stop_job)
	// The rule and binding quota of the wait last recorded (waiting: one
	// was recorded since the job last was admitted).
	waiting     bool
	waitRule    plan.Rule
	waitQuota   string
	pendCounted int
	askCounted  int // GPUs counted in sim.asked for it
	infer       *inferState
	preempted   int
	// What binds the job's wait now, since when, and how long it waited
	// under each binding (waits.go).
	bound      string
	boundSince int64
	binds      []bindSpan
}

func (j *job) missing() int {
	if !j.submitted || j.done {
		return 0
	}
	return max(0, j.desired-len(j.live))
}

// newCluster lays out the nodes of the scenario: node IDs "node-01"..,
// GPU IDs "GPU-01-0".. and, for a GPU cut into MIG slices, one device
// instance per slice "MIG-01-6-0".. (node, GPU, slice).
func (s *sim) newCluster() {
	flavors := quota.TreeFlavors(s.sc.Quota)
	flavorOf := func(model, mig string) string {
		f, ok := quota.FlavorOf(flavors, model, mig)
		if !ok {
			return ""
		}
		return f
	}
	total := 0
	for _, g := range s.sc.Nodes {
		total += g.Count
	}
	width := max(2, len(fmt.Sprint(total)))
	n := 0
	for _, g := range s.sc.Nodes {
		for i := 0; i < g.Count; i++ {
			n++
			nd := &node{id: fmt.Sprintf("node-%0*d", width, n), dc: g.Datacenter, pool: g.NodePool, model: g.Model}
			pn := plan.Node{ID: nd.id, Datacenter: g.Datacenter, NodePool: g.NodePool}
			for k := 0; k < g.GPUs; k++ {
				if k < g.Whole() {
					slot := &gpuSlot{id: fmt.Sprintf("GPU-%0*d-%d", width, n, k), node: len(s.nodes), flavor: flavorOf(g.Model, "")}
					nd.gpus = append(nd.gpus, len(s.slots))
					s.slots = append(s.slots, slot)
					pn.GPUs = append(pn.GPUs, plan.GPU{ID: slot.id, Model: g.Model, Healthy: true})
					continue
				}
				// A GPU cut into MIG slices: one device instance per slice,
				// of the GPU's model and the layout's profile (DESIGN L13).
				for m := 0; m < g.MIG.Slices; m++ {
					slot := &gpuSlot{id: fmt.Sprintf("MIG-%0*d-%d-%d", width, n, k, m), node: len(s.nodes), flavor: flavorOf(g.Model, g.MIG.Profile)}
					nd.gpus = append(nd.gpus, len(s.slots))
					s.slots = append(s.slots, slot)
					pn.GPUs = append(pn.GPUs, plan.GPU{ID: slot.id, Model: g.Model, MIGProfile: g.MIG.Profile, Healthy: true})
				}
			}
			s.nodes = append(s.nodes, nd)
			s.planNodes = append(s.planNodes, pn)
			s.nodeIndex[nd.id] = len(s.nodes) - 1
		}
	}
	s.capacity = len(s.slots)
}

// acct adds (sign +1) or removes (-1) a's owned GPUs in the ledger counters.
func (s *sim) acct(a *alloc, sign int) {
	idle := 0
	if a.idle() {
		idle = 1
	}
	s.own[a.j.ns][a.state][idle] += sign * len(a.slots)
	if a.fi >= 0 && a.fi < len(s.flOwn) {
		s.flOwn[a.fi] += sign * len(a.slots)
	}
}

// flavorIndex is the index of flavor f among the tree's declared flavors,
// -1 when the tree declares none or f is not one of them.
func (s *sim) flavorIndex(f string) int {
	if s.tree == nil {
		return -1
	}
	for i := range s.tree.Flavors {
		if s.tree.Flavors[i].Name == f {
			return i
		}
	}
	return -1
}

func (s *sim) setIDs(a *alloc) {
	a.ids = a.ids[:0]
	for _, si := range a.slots {
		a.ids = append(a.ids, s.slots[si].id)
	}
}

// place puts one allocation of j on node ni, taking GPUs held for it,
// owned by allocations stopping for it (DESIGN L6, L7: GPUs freed for a
// claimant go to that claimant only; a reservation's job takes what was
// stopped for its reservation) or GPUs the ledger shows free, all of
// one flavor (placeIn). GPUs held
// for another owner are not taken (DESIGN L10), except those a
// reservation's hold lends to idle jobs. It fails when the node has not
// enough such GPUs.
//
// The order is the planner's (plan's take): held GPUs first, then the
// GPUs freed for j, then free and not held, then free but still held by a
// stopping allocation. Taking free GPUs first would leave a GPU freed for
// j unused and the planner's free GPU gone: a later admission in the same
// plan, which counts that free GPU, could not be applied.
func (s *sim) place(j *job, ni int) (*alloc, error) {
	return s.placeIn(j, ni, "")
}

// placeIn is place on the GPUs of one flavor only (DESIGN L13: a job
// admitted in flavor F runs on F's devices): flavor is the admit's
// plan.Action.Flavor, "" for the tree's first flavor (the plan leaves it
// empty for a tree of the implicit flavor). Ungoverned devices are never
// taken.
func (s *sim) placeIn(j *job, ni int, flavor string) (*alloc, error) {
	nd := s.nodes[ni]
	if flavor == "" {
		flavor = quota.FlavorNames(s.tree)[0]
	}
	if j.spec.Model != "" && j.spec.Model != nd.model {
		return nil, fmt.Errorf("node %s has GPUs of model %q, the job asks for %q", nd.id, nd.model, j.spec.Model)
	}
	if pool := cmp.Or(j.spec.NodePool, "default"); pool != cmp.Or(nd.pool, "default") {
		return nil, fmt.Errorf("node %s is in node pool %q, the job asks for %q", nd.id, nd.pool, pool)
	}
	if dcs := j.spec.Datacenters; len(dcs) > 0 && !slices.Contains(dcs, nd.dc) && !slices.Contains(dcs, "*") {
		return nil, fmt.Errorf("node %s is in datacenter %q, the job asks for %q", nd.id, nd.dc, dcs)
	}
	need := j.spec.GPUs
	res := j.spec.Reservation
	var take []int
	for pass := 0; pass < 4 && len(take) < need; pass++ {
		for _, si := range nd.gpus {
			if len(take) == need {
				break
			}
			g := s.slots[si]
			if g.flavor != flavor {
				continue
			}
			freeing := g.owner != nil && g.owner.state == stopping &&
				(g.owner.stoppingFor == j.key || (res != "" && g.owner.stoppingForRes == res))
			h, lent := s.heldFor(si)
			if h != nil && !mayUseHeld(j, h, lent) {
				continue
			}
			held := h != nil
			ok := false
			switch pass {
			case 0:
				ok = held && (g.owner == nil || freeing)
			case 1:
				ok = !held && freeing
			case 2:
				ok = !held && g.owner == nil && g.holder == nil
			case 3:
				ok = !held && g.owner == nil && g.holder != nil
			}
			if ok {
				take = append(take, si)
			}
		}
	}
	if len(take) < need {
		return nil, fmt.Errorf("node %s has %d GPUs of flavor %s free for %s, %d needed", nd.id, len(take), flavor, j.key, need)
	}
	s.seq++
	a := &alloc{flavor: flavor, fi: s.flavorIndex(flavor), id: fmt.Sprintf("alloc-%07d", s.seq), seq: s.seq, j: j, node: ni, placedAt: s.now, placedTime: time.Unix(0, s.now).UTC(), state: placing}
	for _, si := range take {
		g := s.slots[si]
		if prev := g.owner; prev != nil {
			s.acct(prev, -1)
			prev.slots = remove(prev.slots, si)
			s.setIDs(prev)
			s.acct(prev, +1)
			s.took(a, g, prev)
		} else if g.holder != nil {
			s.took(a, g, g.holder)
		} else {
			s.took(a, g, nil)
		}
		g.owner = a
		if g.holder != nil {
			a.waiting++
		}
		a.slots = append(a.slots, si)
	}
	s.setIDs(a)
	s.acct(a, +1)
	j.live = append(j.live, a)
	if a.waiting == 0 {
		s.run(a)
	}
	return a, nil
}

func remove(xs []int, x int) []int {
	for i, v := range xs {
		if v == x {
			return append(xs[:i], xs[i+1:]...)
		}
	}
	return xs
}

// run makes a placing allocation run: it now holds its GPUs.
func (s *sim) run(a *alloc) {
	s.acct(a, -1)
	a.state = running
	a.startedAt = s.now
	s.acct(a, +1)
	for _, si := range a.slots {
		s.slots[si].holder = a
	}
	j := a.j
	j.running++
	if !j.everStarted {
		s.closeBind(j, s.now)
		j.everStarted, j.firstStart = true, s.now
		if a.fi >= 0 && a.fi < len(s.res.Flavors) {
			f := s.res.Flavors[a.fi]
			f.Started++
			f.Wait += float64(s.now-max(j.spec.Submit.UnixNano(), s.start)) / 1e9
		}
	}
	s.record(Event{Event: "start", Alloc: a.id, Namespace: j.spec.Namespace, Job: j.spec.Name, Group: j.spec.Group,
		Node: s.nodes[a.node].id, GPUs: len(a.slots), Flavor: s.eventFlavor(a.flavor)})
	s.progress(j)
	if j.infer != nil {
		s.inferCheck(j.infer)
	}
}

// stop stops a live allocation: a placing one ends at once, a running one
// holds its GPUs for its job's kill_timeout (DESIGN L8).
func (s *sim) stop(a *alloc, rule plan.Rule, claimant plan.GroupKey) {
	j := a.j
	s.halt(j, rule)
	for i, x := range j.live {
		if x == a {
			j.live = append(j.live[:i], j.live[i+1:]...)
			break
		}
	}
	if a.state == placing {
		s.acct(a, -1)
		for _, si := range a.slots {
			s.slots[si].owner = nil
		}
		a.slots = nil
		delete(s.allocs, a.id)
		s.record(Event{Event: "gone", Alloc: a.id, Namespace: j.spec.Namespace, Job: j.spec.Name, Group: j.spec.Group, Node: s.nodes[a.node].id})
		s.pend(j)
		return
	}
	j.running--
	s.acct(a, -1)
	a.state, a.stoppingFor, a.stopRule, a.stopAt = stopping, claimant, rule, s.now
	s.acct(a, +1)
	s.stopping = append(s.stopping, a)
	s.push(event{t: s.now + int64(j.spec.KillTimeout), kind: evGone, a: a})
	s.pend(j)
}

// gone ends a stopping allocation: its GPUs are released; allocations placed
// on them start once all their GPUs are released.
func (s *sim) gone(a *alloc) {
	s.acct(a, -1)
	for _, si := range a.slots {
		s.slots[si].owner = nil
	}
	a.slots = nil
	nd := s.nodes[a.node]
	var starting []*alloc
	for _, si := range nd.gpus {
		g := s.slots[si]
		if g.holder != a {
			continue
		}
		g.holder = nil
		if o := g.owner; o != nil && o.state == placing {
			o.waiting--
			if o.waiting == 0 {
				starting = append(starting, o)
			}
		}
	}
	s.record(Event{Event: "gone", Alloc: a.id, Namespace: a.j.spec.Namespace, Job: a.j.spec.Name, Group: a.j.spec.Group, Node: nd.id})
	for _, o := range starting {
		s.run(o)
	}
}

// finish ends a running allocation normally: its GPUs are free at once.
func (s *sim) release(a *alloc) {
	s.acct(a, -1)
	for _, si := range a.slots {
		g := s.slots[si]
		g.owner = nil
		if g.holder == a {
			g.holder = nil
		}
	}
	a.slots = nil
	if a.state == running {
		a.j.running--
	}
}
