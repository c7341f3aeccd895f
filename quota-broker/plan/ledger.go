package plan

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// planner holds the indexed, read-only view of a snapshot and the mutable
// state of the plan being built.
type planner struct {
	// flavor is the flavor this planner plans (DESIGN L13): the snapshot
	// it sees holds only that flavor's devices (flavors.go).
	flavor string
	// label is the flavor named in actions and usage rows: flavor, or ""
	// in a tree without flavor blocks (the implicit one).
	label string
	// freeOnly makes decide admit on free GPUs only, stopping nothing and
	// leaving a job entitled on what yields to it undecided: the driver
	// of several flavors tries a job so (flavors.go, DESIGN L13 Choice).
	freeOnly bool
	// idleOrder is the order of the idle jobs, after the non-idle work
	// (options.go, DESIGN L14).
	idleOrder IdleOrder
	// nodeList and allocList, when not nil, are the nodes and
	// allocations planned instead of the snapshot's: a flavor's
	// projection points at the snapshot's own where they are wholly of
	// the flavor (projectAll).
	nodeList  []*Node
	allocList []*Allocation
	snap      *Snapshot
	now       time.Time
	settings  quota.Settings

	quotas []*qnode // pre-order
	byNS   map[string]*qnode
	nodes  []*cnode // sorted by ID, each once
	// nodeByID maps a node ID to its index in nodes, built on first use
	// (nodeOf): allocations usually come node by node, in ID order, and
	// are found next to the last one's node instead.
	nodeByID map[string]int
	gpus     []gpuInfo
	allocs   []alloc // by value: passes over all of them follow no pointer
	units    []unit

	// byQuota lists, per quota node, the non-idle allocations of its own
	// namespaces; built on first use (planner.ownNonIdle).
	byQuota [][]int
	// claimants maps a claimant to its ID.
	claimants map[HoldOwner]int32
	// lend marks, per GPU, a held GPU lent to idle jobs (a reservation's
	// hold from start + settle until its end, L10); nil when none is.
	lend []bool
	// scratch is a reusable buffer of a node's candidate units.
	scratch []unitGPUs
	// vc keeps the nodes' victim sets between the allocations of one
	// claim (victimcache.go); scanVictims turns it off (tests), and
	// victimEvals counts the node searches.
	vc          *victimCache
	scanVictims bool
	victimEvals int
	// gpuPool backs the GPU lists of allocations as nodes are resolved.
	gpuPool []int32
	// booked: the ledger and node counters are built, so resolving a node
	// corrects them (for snapshots the decoder would have refused).
	booked bool
	// buf holds the large working arrays, reused across plans.
	buf *buffers
	// resolvedOrder lists nodes in the order they were resolved, so that
	// a restored state (a flex request that did not fit) can book again
	// the nodes resolved since it was saved.
	resolvedOrder []int

	// resByID indexes all the snapshot's reservations by ID, built on
	// first use (reservationByID): only a pending job naming a reservation
	// that has not started needs it.
	resByID map[string]*Reservation
	// fairTaken is rule L14.fair's scratch of a node's set, fairCands its
	// candidates of the last claim (fair.go).
	fairTaken fairTaken
	fairCands fairCands
	// fairNone remembers the shapes whose fair search found nothing, at
	// fairEpoch, which every admission and stop advances (fair.go).
	fairNone  map[fairMemo]fairMark
	fairEpoch uint64
	// budgetWhy is the first eviction budget that refused a victim set
	// of the claim being placed, as a wait reason (budget.go); reset for
	// each allocation placed.
	budgetWhy string
	// wakeAt is the plan's WakeAt so far (see planner.wake).
	wakeAt time.Time
	// maxKill is the largest kill_timeout of the live allocations (L8).
	maxKill time.Duration
	// byName maps a quota node's name to it.
	byName map[string]*qnode
	// cal is the view of the reservations (L10).
	cal calendar
	// reservedAllocs lists the allocations of active reservations, and
	// timedAllocs, in index order, those a timed rule may act on: in the
	// tree, of a flex request or naming a reservation that has started.
	reservedAllocs []reservedAlloc
	timedAllocs    []int
	// shared lists the units of more than one allocation (the others'
	// allocations are alone, alloc.alone).
	shared []int

	st       *state
	warnings []string
	// notes are the warnings about one workspace's work (Warning, warn);
	// warnings are the others.
	notes []Warning
}

// newPlanner indexes the snapshot and builds the ledger (L2: derived from
// the live allocations only) and the debt of lowered quotas (L9).
func newPlanner(s *Snapshot, buf *buffers) *planner {
	return newPlannerOf(s, buf, flavorOfSnapshot(s), flavorLabel(s))
}

// newPlannerOf is newPlanner for the planner of one flavor (DESIGN L13),
// named label in actions and usage rows ("" in a tree without flavor
// blocks); s is the snapshot's projection onto it (project).
func newPlannerOf(s *Snapshot, buf *buffers, flavor, label string) *planner {
	return newPlannerLists(s, nil, nil, buf, flavor, label)
}

// newPlannerLists is newPlannerOf on the nodes and allocations given
// (planner.nodeList, allocList) instead of s's.
func newPlannerLists(s *Snapshot, nodes []*Node, allocs []*Allocation, buf *buffers, flavor, label string) *planner {
	p := startPlanner(s, nodes, allocs, buf, flavor, label)
	p.indexNodes()
	p.startState()
	p.indexAllocations()
	p.finishPlanner()
	return p
}

// startPlanner is newPlannerLists up to the quota tree: the nodes,
// state and allocations are indexed next (indexNodes, startState,
// indexAllocations), then finishPlanner. newFlavorPlanners takes the
// steps for the planners of several flavors side by side.
func startPlanner(s *Snapshot, nodes []*Node, allocs []*Allocation, buf *buffers, flavor, label string) *planner {
	p := &planner{
		nodeList:  nodes,
		allocList: allocs,
		flavor:    flavor,
		label:     label,
		buf:       buf,
		snap:      s,
		now:       s.Time,
		settings:  s.Settings,
		byNS:      map[string]*qnode{},
		claimants: map[HoldOwner]int32{},
		byName:    map[string]*qnode{},
		vc:        &buf.victims,
	}
	p.vc.forget()
	buf.feasible = buf.feasible[:0]
	p.indexTree(s.Quota, nil)
	return p
}

// startState makes the plan's state for the indexed nodes, every GPU
// free.
func (p *planner) startState() {
	buf := p.buf
	p.st = &state{
		holder:      grown(buf.holder, len(p.gpus)),
		freeFor:     grown(buf.freeFor, len(p.gpus)),
		nodeFree:    sized(buf.nodeFree, len(p.nodes)),
		nodeFreeing: sized(buf.nodeFreeing, len(p.nodes)),
		ledger:      newLedger(len(p.quotas)),
	}
	for i := range p.st.holder {
		p.st.holder[i] = holderFree
		p.st.freeFor[i] = noClaimant
	}
}

// finishPlanner is newPlannerLists after the allocations are indexed:
// the units, ledger, debt (L9), bookings, holds and budgets.
func (p *planner) finishPlanner() {
	buf, s := p.buf, p.snap
	buf.holder, buf.freeFor, buf.nodeFree, buf.nodeFreeing = p.st.holder, p.st.freeFor, p.st.nodeFree, p.st.nodeFreeing
	p.st.stopped = sized(buf.stopped, len(p.allocs))
	buf.stopped = p.st.stopped
	own := make([]ownGPUs, len(p.quotas))
	p.buildUnits(own)
	p.st.ledger.addOwn(p.quotas, own)
	if debt := p.deriveDebt(); debt != nil {
		for _, q := range debt {
			if q != nil && !p.graceOver(q) {
				p.wake(q.node.ChangedAt.Add(p.settings.DebtGrace)) // L9: the debt becomes a victim
			}
		}
		p.setDebt(debt)
	}
	p.indexBookings()
	p.st.displaced = p.deriveDisplaced()
	p.indexHolds()
	p.indexBudgets()
	sort.Strings(p.warnings)
	p.booked = true
	for i, c := range p.nodes {
		if !c.resolved {
			// Its allocations' GPU counts are as indexAllocations summed them.
			p.st.nodeFree[i] = max(0, len(c.gpus)-p.buf.nodeHeldGPUs[i])
			continue
		}
		for _, g := range c.gpus {
			if p.gpus[g].healthy && p.st.holder[g] == holderFree {
				p.st.nodeFree[i]++
			}
			if p.gpus[g].healthy && p.st.freeFor[g] != noClaimant {
				p.st.nodeFreeing[i]++
			}
		}
	}
	if w := quota.FlavorCapacityWarning(s.Quota, p.flavor, p.healthyGPUs()); w != "" {
		p.warnings = append(p.warnings, "L1: "+w)
	}
}

func (p *planner) indexTree(n *quota.Node, parent *qnode) {
	q := &qnode{node: n, index: len(p.quotas), parent: parent, nominal: n.GPUs.Of(p.flavor)}
	q.weight, _ = Weight(n, p.flavor) // DESIGN L14: explicit, else the nominal, not capped
	q.first = q.index
	if parent != nil {
		parent.children = append(parent.children, q)
		q.ancestors = append([]*qnode{parent}, parent.ancestors...)
	}
	p.quotas = append(p.quotas, q)
	p.byName[n.Name] = q
	for _, ns := range n.Namespaces {
		p.byNS[ns] = q
	}
	for _, c := range n.Children {
		p.indexTree(c, q)
	}
	q.last = len(p.quotas) - 1
}

// nodeCount and nodeAt give the snapshot's nodes, or the projection's
// (planner.nodeList, DESIGN L13).
func (p *planner) nodeCount() int {
	if p.nodeList != nil {
		return len(p.nodeList)
	}
	return len(p.snap.Nodes)
}

func (p *planner) nodeAt(i int) *Node {
	if p.nodeList != nil {
		return p.nodeList[i]
	}
	return &p.snap.Nodes[i]
}

// allocCount and allocAt give the snapshot's allocations, or the
// projection's (planner.allocList).
func (p *planner) allocCount() int {
	if p.allocList != nil {
		return len(p.allocList)
	}
	return len(p.snap.Allocations)
}

func (p *planner) allocAt(i int) *Allocation {
	if p.allocList != nil {
		return p.allocList[i]
	}
	return &p.snap.Allocations[i]
}

func (p *planner) indexNodes() {
	order := grown(p.buf.order, p.nodeCount())
	p.buf.order = order
	for i := range order {
		order[i] = i
	}
	// Nodes listed in ID order, each once (the usual case), need neither
	// sorting nor a check for nodes listed twice.
	dups := false
	for i := 1; i < p.nodeCount(); i++ {
		c := strings.Compare(p.nodeAt(i-1).ID, p.nodeAt(i).ID)
		if c > 0 {
			sort.SliceStable(order, func(a, b int) bool { return p.nodeAt(order[a]).ID < p.nodeAt(order[b]).ID })
			dups = true // not known
			break
		}
		dups = dups || c == 0
	}
	total := 0
	for i := 0; i < p.nodeCount(); i++ {
		total += len(p.nodeAt(i).GPUs)
	}
	ix := p.startNodes(len(order), total)
	for k, i := range order {
		n := p.nodeAt(i)
		if dups && k > 0 && n.ID == p.nodeAt(order[k-1]).ID { // sorted: a node listed twice is next to the first
			p.warnings = append(p.warnings, fmt.Sprintf("node %q is listed twice; the second is ignored", n.ID))
			continue
		}
		p.addNode(&ix, n)
	}
}

// nodeOf returns the index in p.nodes of node id: hint (a node index, or
// -1) or the node after it when it is either, else from nodeByID, built
// on first use.
func (p *planner) nodeOf(id string, hint int) (int, bool) {
	for ni := max(hint, 0); ni <= hint+1 && ni < len(p.nodes); ni++ {
		if p.nodes[ni].n.ID == id {
			return ni, true
		}
	}
	if p.nodeByID == nil {
		p.nodeByID = p.buf.nodeIndex(len(p.nodes))
		for ni, c := range p.nodes {
			p.nodeByID[c.n.ID] = ni
		}
	}
	ni, ok := p.nodeByID[id]
	return ni, ok
}

// nodeIndexer is what indexing the nodes one by one (addNode) carries
// from node to node: the rest of the arrays startNodes sized.
type nodeIndexer struct {
	store   []cnode // p.nodes point into it: never grown past its capacity
	gpuPool []int32 // the nodes' GPU lists
}

// startNodes sizes the planner's node and GPU arrays for n nodes of
// gpus GPUs in all, listed next in ID order, each once (addNode).
func (p *planner) startNodes(n, gpus int) nodeIndexer {
	p.gpus = grown(p.buf.gpus, gpus)[:0]
	gpuPool := grown(p.buf.nodeGPUs, gpus)
	nodeStore := grown(p.buf.nodeStore, n)[:0]
	p.nodes = grown(p.buf.nodes, n)[:0]
	p.buf.gpus, p.buf.nodeGPUs, p.buf.nodeStore, p.buf.nodes = p.gpus, gpuPool, nodeStore, p.nodes
	return nodeIndexer{store: nodeStore, gpuPool: gpuPool}
}

// addNode indexes node n, the next in ID order, and its GPUs.
func (p *planner) addNode(ix *nodeIndexer, n *Node) {
	ix.store = append(ix.store, cnode{n: n, index: len(p.nodes), allHealthy: true})
	c := &ix.store[len(ix.store)-1]
	c.gpus, ix.gpuPool = ix.gpuPool[:0:len(n.GPUs)], ix.gpuPool[len(n.GPUs):]
	for j := range n.GPUs {
		g := &n.GPUs[j]
		id := int32(len(p.gpus))
		p.gpus = append(p.gpus, gpuInfo{node: int32(c.index), pos: int32(j), healthy: g.Healthy})
		c.gpus = append(c.gpus, id)
		c.allHealthy = c.allHealthy && g.Healthy
		if g.Healthy {
			c.healthy++
		}
		switch {
		case j == 0:
			c.model = g.Model
		case c.model != g.Model:
			c.model = ""
		}
	}
	if len(n.GPUs) == 0 {
		c.model = ""
	}
	p.nodes = append(p.nodes, c)
}

func (p *planner) claimantID(key GroupKey) int32 { return p.ownerID(HoldOwner{Group: key}) }

// ownerID returns the ID of a claimant or hold owner (a task group or a
// reservation), the value of state.freeFor and state.heldBy.
func (p *planner) ownerID(o HoldOwner) int32 {
	if id, ok := p.claimants[o]; ok {
		return id
	}
	id := int32(len(p.claimants))
	p.claimants[o] = id
	return id
}

// gpu returns the snapshot's GPU of global index g.
func (p *planner) gpu(g int32) *GPU {
	info := p.gpus[g]
	return &p.nodes[info.node].n.GPUs[info.pos]
}

// indexAllocations books every allocation's GPUs on its node. Allocations
// are kept in input order: everything the plan outputs is ordered by keys
// that end in IDs, so the input order never shows. It reads the snapshot's
// allocations once, copying into each alloc what the later passes over all
// allocations need, so that they read only the planner's smaller array.
func (p *planner) indexAllocations() {
	ix := p.startAllocations()
	for i, n := 0, p.allocCount(); i < n; i++ {
		p.addAllocation(&ix, p.allocAt(i))
	}
	p.endAllocations(&ix)
}

// allocIndexer is what indexing the allocations one by one
// (addAllocation) carries from one to the next.
type allocIndexer struct {
	store                []alloc
	perNode, held, sizes []int
	nodeOf               []int32
	eager                []bool
	jobs                 map[JobKey]int
	total                int
	first                bool
	lastID, lastNS       string
	lastNode             int32
	lastQ                *qnode
}

// startAllocations indexes the reservations and sizes the planner's
// allocation arrays for the allocations listed next (addAllocation).
func (p *planner) startAllocations() allocIndexer {
	p.indexReservations()
	n := p.allocCount()
	ix := allocIndexer{
		store:    grown(p.buf.allocStore, n),
		perNode:  sized(p.buf.perNode, len(p.nodes)),
		held:     sized(p.buf.nodeHeldGPUs, len(p.nodes)),
		nodeOf:   grown(p.buf.nodeOf, n),
		eager:    sized(p.buf.eager, len(p.nodes)),
		sizes:    grown(p.buf.sizes, n)[:0], // per unit, its allocations (buildUnits)
		first:    true,
		lastNode: -1,
	}
	p.allocs = ix.store[:0]
	p.buf.allocStore, p.buf.perNode, p.buf.nodeHeldGPUs, p.buf.nodeOf, p.buf.eager = ix.store, ix.perNode, ix.held, ix.nodeOf, ix.eager
	p.reservedAllocs = p.buf.reservedAllocs[:0]
	p.timedAllocs = p.buf.timedAllocs[:0]
	if q, ok := p.byNS[""]; ok {
		ix.lastQ = q // so that the cache is right from the first allocation
	}
	return ix
}

// addAllocation indexes allocation a, the next of the planner's.
func (p *planner) addAllocation(ix *allocIndexer, a *Allocation) {
	if a.Node != ix.lastID || ix.first {
		ix.first = false
		ix.lastID = a.Node
		if ni, ok := p.nodeOf(a.Node, int(ix.lastNode)); ok {
			ix.lastNode = int32(ni)
		} else {
			ix.lastNode = -1
		}
	}
	node := ix.lastNode
	if node < 0 {
		p.warnings = append(p.warnings, fmt.Sprintf("allocation %q is on unknown node %q; ignored", a.ID, a.Node))
		return
	}
	if a.Namespace != ix.lastNS {
		ix.lastNS, ix.lastQ = a.Namespace, p.byNS[a.Namespace]
	}
	var res *Reservation
	ri := -1
	if a.Reservation != "" {
		if i, ok := p.cal.started[a.Reservation]; ok {
			res, ri = p.cal.res[i].r, i
		}
	}
	stopping := a.StoppingForReservation != "" || !a.StoppingFor.IsZero()
	k := len(p.allocs)
	x := &ix.store[k]
	*x = alloc{a: a, index: k, q: ix.lastQ, node: int(node), started: a.StartedAt.UnixNano(),
		count: len(a.GPUIDs), healthy: int32(len(a.GPUIDs)), priority: int32(a.Priority), killTimeout: a.KillTimeout,
		reserved: res != nil && p.now.Before(res.End), idle: a.Idle,
		wholeJob: (a.Type == JobBatch && !a.Elastic) || a.Flex()} // L5: flex requests stop whole
	x.victimable = x.q != nil && !x.reserved && !stopping && (a.Type == JobService || a.Type == JobBatch)
	if x.wholeJob && ix.jobs == nil {
		ix.jobs = emptied(&p.buf.unitOf, &p.buf.unitOfLen, len(ix.store))
	}
	x.unit, ix.sizes = numberUnit(x.wholeJob, a, &ix.jobs, ix.sizes)
	if stopping {
		ix.eager[node] = true
	}
	if x.reserved {
		p.reservedAllocs = append(p.reservedAllocs, reservedAlloc{alloc: k, res: ri})
	}
	if ix.lastQ != nil && (a.MaxRun > 0 || res != nil) {
		// A flex request's, or naming a reservation that has started:
		// a timed rule may act on its job (liveJobs).
		p.timedAllocs = append(p.timedAllocs, k)
	}
	p.maxKill = max(p.maxKill, a.KillTimeout)
	ix.nodeOf[k] = node
	ix.perNode[node]++
	ix.held[node] += x.count
	ix.total += x.count
	p.allocs = ix.store[:k+1]
}

// endAllocations lays out the indexed allocations node by node and
// books now the nodes that cannot wait (see below).
func (p *planner) endAllocations(ix *allocIndexer) {
	p.buf.reservedAllocs, p.buf.timedAllocs = p.reservedAllocs, p.timedAllocs
	perNode, nodeOf, eager := ix.perNode, ix.nodeOf, ix.eager
	p.gpuPool = grown(p.buf.gpuPool, ix.total)
	allocPool := grown(p.buf.allocPool, len(p.allocs))
	p.buf.gpuPool, p.buf.allocPool, p.buf.sizes = p.gpuPool, allocPool, ix.sizes
	for ni, c := range p.nodes {
		c.allocs, allocPool = allocPool[:0:perNode[ni]], allocPool[perNode[ni]:]
	}
	for k, ni := range nodeOf[:len(p.allocs)] {
		c := p.nodes[ni]
		c.allocs = append(c.allocs, k)
	}
	// A node whose GPUs are all healthy and of one model needs no GPU-level
	// booking until the plan touches it: its free GPUs are its GPUs less
	// those its allocations hold. The others are booked now.
	for ni, c := range p.nodes {
		if eager[ni] || !c.allHealthy || c.model == "" {
			p.resolve(ni)
		}
	}
}

// resolve books, GPU by GPU, the allocations of node ni (once). Every read
// or change of state.holder or state.freeFor on a node resolves it first.
// An allocation's GPU count is corrected, ledger included, when some of its
// GPU IDs are not on its node or already held (a snapshot that the decoder
// would have refused).
func (p *planner) resolve(ni int) {
	c := p.nodes[ni]
	if c.resolved {
		return
	}
	c.resolved = true
	p.resolvedOrder = append(p.resolvedOrder, ni)
	for _, ai := range c.allocs {
		x := &p.allocs[ai]
		a := x.a
		claimant := noClaimant
		if o := a.stoppingOwner(); !o.IsZero() {
			claimant = p.ownerID(o)
		}
		x.gpus, p.gpuPool = p.gpuPool[:0:len(a.GPUIDs)], p.gpuPool[len(a.GPUIDs):]
		x.healthy = 0
		hint := 0
		for _, id := range a.GPUIDs {
			g, next := p.gpuOnNode(ni, id, hint)
			hint = next
			if g < 0 || p.st.holder[g] != holderFree {
				p.warnings = append(p.warnings, fmt.Sprintf("allocation %q: GPU %q is not on node %q or already held; ignored", a.ID, id, a.Node))
				continue
			}
			p.st.holder[g] = int32(x.index)
			p.st.freeFor[g] = claimant
			x.gpus = append(x.gpus, g)
			if p.gpus[g].healthy {
				x.healthy++
			}
		}
		if d := len(x.gpus) - x.count; d != 0 && p.booked {
			if x.q != nil && !p.st.stopped[x.index] {
				p.st.ledger.add(x.q, d, a.Idle, p.st.debtOf(x.index) != nil, x.reserved)
			}
			p.st.nodeFree[ni] -= d
			p.vc.forget() // cached victim sets counted the old GPU count
		}
		x.count = len(x.gpus)
	}
}

// rebook writes again, GPU by GPU, the allocations of nodes resolved after
// a state was saved, into that state once restored.
func (p *planner) rebook(since int) {
	for _, ni := range p.resolvedOrder[since:] {
		for _, ai := range p.nodes[ni].allocs {
			x := &p.allocs[ai]
			claimant := noClaimant
			if o := x.a.stoppingOwner(); !o.IsZero() {
				claimant = p.ownerID(o)
			}
			for _, g := range x.gpus {
				p.st.holder[g] = int32(x.index)
				p.st.freeFor[g] = claimant
			}
		}
	}
}

// gpuOnNode finds GPU id on node ni, starting at position hint (an
// allocation's GPUs are usually listed in the node's order), and returns
// it with the position after it, or -1.
func (p *planner) gpuOnNode(ni int, id string, hint int) (int32, int) {
	gpus := p.nodes[ni].gpus
	for k := range gpus {
		i := (hint + k) % len(gpus)
		if p.gpu(gpus[i]).ID == id {
			return gpus[i], i + 1
		}
	}
	return -1, hint
}

// buildUnits groups allocations into units of preemption (DESIGN L5): a
// batch job that is not elastic is one unit with all its allocations; every
// other allocation is a unit of its own.
//
// indexAllocations numbered the units (numberUnit) and counted their
// allocations (buffers.sizes); buildUnits lays them out. In the same pass
// over the allocations it sums, per quota node, the GPUs of its own
// namespaces' allocations into own (for ledger.addOwn, L2), so that the
// allocations are read once for both.
func (p *planner) buildUnits(own []ownGPUs) {
	sizes := p.buf.sizes
	pool := grown(p.buf.unitPool, len(p.allocs))
	p.units = grown(p.buf.unitStore, len(sizes))
	p.buf.unitStore, p.buf.unitPool = p.units, pool
	for u, n := range sizes {
		p.units[u], pool = unit{allocs: pool[:0:n]}, pool[n:]
	}
	var shared []int // units of more than one allocation
	for ai := range p.allocs {
		a := &p.allocs[ai]
		if a.q != nil {
			own[a.q.index].count(a)
		}
		u := &p.units[a.unit]
		a.alone = sizes[a.unit] == 1
		if !a.alone && len(u.allocs) == 0 {
			shared = append(shared, a.unit)
		}
		u.allocs = append(u.allocs, a.index)
		u.gpus += a.count
		if a.started > u.youngest {
			u.youngest = a.started
		}
	}
	for _, u := range shared {
		slices.SortFunc(p.units[u].allocs, func(i, j int) int { return strings.Compare(p.allocs[i].a.ID, p.allocs[j].a.ID) })
	}
	p.shared = shared
}

// numberUnit returns the unit of preemption (DESIGN L5) of allocation a,
// numbered in order of first allocation, and sizes, the allocation count of
// each unit, with a counted: the unit of its job when wholeJob (a batch job
// that is not elastic, or a flex request), else a unit of its own. jobs
// maps a job to its unit; it is made on first use.
func numberUnit(wholeJob bool, a *Allocation, jobs *map[JobKey]int, sizes []int) (int, []int) {
	if wholeJob {
		key := a.JobKey()
		if u, ok := (*jobs)[key]; ok {
			sizes[u]++
			return u, sizes
		}
		if *jobs == nil {
			*jobs = map[JobKey]int{}
		}
		(*jobs)[key] = len(sizes)
	}
	return len(sizes), append(sizes, 1)
}

// deriveDebt derives over-quota debt (DESIGN L9) from the live
// allocations the plan has not stopped (L9: within a plan, a stopped
// allocation leaves debt at once) and returns, per allocation, the quota
// node whose lowered nominal makes it debt, or nil when no allocation is
// debt. Bottom-up, for every quota node, the non-idle allocations of its
// subtree that are not already debt of a descendant fill the node's
// nominal in order of start time (oldest first, then allocation ID), each
// one if it still fits; the rest are the node's debt. Debt is never
// borrowing: it is in-quota usage above a nominal that was lowered. The
// ledger's non-idle figures bound the allocations' (they count this plan's
// admits too), so nodes within them are skipped. It changes nothing.
func (p *planner) deriveDebt() []*qnode {
	over := false
	for _, q := range p.quotas {
		over = over || p.st.ledger.nonIdle[q.index] > q.nominal
	}
	if !over {
		return nil
	}
	var debt []*qnode
	byQuota := make([][]*alloc, len(p.quotas))
	for ai := range p.allocs {
		a := &p.allocs[ai]
		if a.q != nil && !a.idle && !p.st.stopped[ai] {
			byQuota[a.q.index] = append(byQuota[a.q.index], a)
		}
	}
	for i := len(p.quotas) - 1; i >= 0; i-- { // reverse pre-order: children first
		q := p.quotas[i]
		if p.st.ledger.nonIdle[q.index] <= q.nominal {
			continue // within its nominal, so is every subset of it
		}
		var members []*alloc
		for j := q.first; j <= q.last; j++ {
			for _, a := range byQuota[j] {
				if debt == nil || debt[a.index] == nil {
					members = append(members, a)
				}
			}
		}
		total := 0
		for _, a := range members {
			total += a.count
		}
		if total <= q.nominal {
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
			if filled+a.count <= q.nominal {
				filled += a.count
				continue
			}
			if debt == nil {
				debt = make([]*qnode, len(p.allocs))
			}
			debt[a.index] = q
		}
	}
	return debt
}

// setDebt makes debt (see deriveDebt) the plan's debt and moves the GPUs of
// every live allocation the plan has not stopped whose debt changed between
// the ledger's debt and non-debt figures.
func (p *planner) setDebt(debt []*qnode) {
	st := p.st
	for ai := range p.allocs {
		was, is := st.debtOf(ai) != nil, debt != nil && debt[ai] != nil
		if was == is || st.stopped[ai] {
			continue
		}
		a := &p.allocs[ai]
		st.ledger.add(a.q, -a.count, a.idle, was, a.reserved)
		st.ledger.add(a.q, a.count, a.idle, is, a.reserved)
	}
	st.debt = debt
}

// rederive derives debt (DESIGN L9) and displaced allocations (L10) again
// after the plan stopped some: L9 says that within a plan a stopped
// allocation leaves usage, debt and displaced at once, inside one
// claimant's placement too. The ledger's debt figures follow. The victim
// cache is dropped when an allocation's class changed, as the candidates'
// keys read it. While no allocation is debt or displaced, a stop makes
// none (the fills only lose members), so nothing is derived.
func (p *planner) rederive() {
	st := p.st
	if st.debt == nil && st.displaced == nil {
		return
	}
	debt := p.deriveDebt()
	changed := !p.sameLive(st.debt, debt)
	p.setDebt(debt)
	if displaced := p.deriveDisplaced(); !p.sameLive(st.displaced, displaced) {
		changed = true
		st.displaced = displaced
	} else {
		st.displaced = displaced
	}
	if changed {
		p.vc.forget()
	}
}

// sameLive reports whether x and y, per allocation quota nodes or nil
// (nil slices: none), agree on every allocation the plan has not stopped.
func (p *planner) sameLive(x, y []*qnode) bool {
	at := func(s []*qnode, i int) *qnode {
		if s == nil {
			return nil
		}
		return s[i]
	}
	for ai := range p.allocs {
		if !p.st.stopped[ai] && at(x, ai) != at(y, ai) {
			return false
		}
	}
	return true
}

// graceOver reports whether debt of quota node q may be reclaimed (L9):
// debt_grace has passed since q's last change, or q has no recorded change.
func (p *planner) graceOver(q *qnode) bool {
	if q.node.ChangedAt.IsZero() {
		return true
	}
	return !p.now.Before(q.node.ChangedAt.Add(p.settings.DebtGrace))
}

func (p *planner) healthyGPUs() int {
	n := 0
	for _, g := range p.gpus {
		if g.healthy {
			n++
		}
	}
	return n
}

// usage reports the ledger of every quota node in pre-order (DESIGN L4).
func (p *planner) usage() []Usage {
	l := p.st.ledger
	displaced := make([]int, len(p.quotas))
	for ai, q := range p.st.displaced {
		if q != nil && !p.st.stopped[ai] {
			displaced[q.index] += p.allocs[ai].count
		}
	}
	out := make([]Usage, 0, len(p.quotas))
	for _, q := range p.quotas {
		i := q.index
		out = append(out, Usage{
			Quota:     q.node.Name,
			Flavor:    p.label,
			Nominal:   q.nominal,
			Used:      l.used[i],
			NonIdle:   l.nonIdle[i],
			Borrowed:  max(0, l.used[i]-max(q.nominal, l.nonIdle[i])),
			Debt:      l.debt[i],
			Lendable:  max(0, q.nominal-l.used[i]),
			Booked:    p.cal.activeBooked[i],
			Displaced: displaced[i],
		})
	}
	return out
}
