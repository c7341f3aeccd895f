package build

import (
	"github.com/gputide/gputide/quota-broker/nomad/device"
	"maps"
	"slices"
	"sync"

	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/hashicorp/nomad/api"
)

// Memo keeps, from one build to the next, what a build derived from the
// parts of the state that did not change since (issue 18: a cycle with one
// change costs the change, not the cluster; docs/benchmarks.md, "One broker
// cycle at scale"):
//
//   - per job spec: what a build reads of it (the job's fields, its gputide
//     meta options or meta error, per task group its count, GPUs, model and
//     kill_timeout, and the flavors it allows), keyed by the spec's
//     pointer: the watcher's State puts a new *api.Job in place of a job
//     whenever the job changes (an event, the broker's own register, a
//     read) and never changes one in place. A build forgets the specs it
//     did not see, so the memo holds one entry per governed job;
//   - the nodes (step 1) and their ungoverned GPUs, while the State's
//     nodes and the quota tree are the same (watch.Generations.Nodes, the
//     tree's pointer);
//   - the live allocations per job and group (step 2) and the allocations
//     that hold GPUs sorted by ID (step 5), while the State's allocations
//     are the same (watch.Generations.Allocs);
//   - the snapshot's allocations (steps 5-5b), while the allocations that
//     hold GPUs, what each of their jobs gives them (jobAllocKey) and the
//     stops are the same: the snapshot then has the very slice the last
//     build made;
//   - the check of the nodes (step 8, plan.NodeCheck), while the nodes are
//     the ones kept, and with it the check of the allocations while they
//     are the slice kept.
//
// What a build keeps from the memo it shares with the snapshot (a node's
// GPUs, an allocation's GPU IDs): the snapshot is read only (the planning
// core never changes it, plan's "snapshot was not modified" tests). The
// zero value is ready; it is safe for concurrent use. At 5,000 nodes and
// 10,000 jobs it saves a cycle re-reading every job's meta and devices,
// copying and sorting 20,000 allocations and 5,000 nodes, and counting the
// live allocations again.
type Memo struct {
	mu    sync.Mutex
	build uint64 // builds begun: the mark of the specs the build under way saw
	seen  int    // specs marked with it
	depth int    // builds under way
	specs map[*api.Job]*specEntry
	// views is what every kept view depends on besides its own key
	// (viewContext), and the epoch the views made under it carry.
	views struct {
		ctx   viewContext
		epoch uint64
	}

	nodes       nodesPart
	allocs      allocsPart
	allocations allocationsPart
	// check is the check of nodes.nodes; used by one build at a time
	// (checkBusy), a build that finds it in use checks its nodes itself.
	check     plan.NodeCheck
	checkBusy bool
}

// specEntry is a kept spec read, the last build that saw it, and what
// the builds that own the memo (Memo.begin) made of the job.
type specEntry struct {
	read *specRead
	seen uint64
	// view is the view the last owning build made of the job, with what
	// it was made of (made): a build that makes the same key reuses it
	// (views.go). nil: none kept.
	view *JobView
	made viewKey
	// held is the job's index in heldOf.jobs, -1 when no allocation of
	// the job holds GPUs; heldOf nil: not looked up yet.
	heldOf *heldAllocs
	held   int32
	// live is the job's live allocations in liveOf (liveCounts.jobs);
	// liveOf zero: not looked up yet.
	liveOf uint64
	live   int
}

// nodesPart is step 1's result for one generation of the nodes and one
// quota tree.
type nodesPart struct {
	gen        uint64
	tree       *quota.Node
	nodes      []plan.Node
	ungoverned []device.UngovernedGPU
}

// allocsPart is what steps 2 and 5 derive from one generation of the
// allocations alone.
type allocsPart struct {
	gen  uint64
	live liveCounts
	held *heldAllocs
}

// allocationsPart is what steps 5-5b made of one heldAllocs, the keys of
// its jobs and the stops (snapshotAllocations' inputs; the maps are
// copies).
type allocationsPart struct {
	held      *heldAllocs
	keys      []jobAllocKey
	stopping  map[string]plan.GroupKey
	forRes    map[string]string
	out       []plan.Allocation
	unclaimed []string
}

// begin starts a build: the specs it sees are marked with the build's
// number (builds under way at once share one). The build begun while none
// is under way owns the kept views (owner); it passes the context its
// views depend on, and gets the epoch of the views it may reuse.
func (m *Memo) begin(ctx viewContext) (owner bool, epoch uint64) {
	if m == nil {
		return false, 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.depth == 0 {
		m.build++
		m.seen = 0
		if m.views.ctx != ctx || m.views.epoch == 0 {
			m.views.ctx = ctx
			m.views.epoch++
		}
		owner, epoch = true, m.views.epoch
	}
	m.depth++
	return owner, epoch
}

// end ends a build: once no build is under way, the specs none saw are
// forgotten.
func (m *Memo) end() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.depth--
	if m.depth > 0 {
		return
	}
	if m.seen == len(m.specs) {
		return // every spec kept was seen: none to forget (most builds)
	}
	maps.DeleteFunc(m.specs, func(_ *api.Job, e *specEntry) bool { return e.seen != m.build })
}

// nodeCheck returns the node check the build under way may use, or nil
// when m is nil or another build uses it (builds at once are rare: the
// agent's cycles are one at a time); release gives it back.
func (m *Memo) nodeCheck() (check *plan.NodeCheck, release func()) {
	if m == nil {
		return nil, func() {}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.checkBusy {
		return nil, func() {}
	}
	m.checkBusy = true
	return &m.check, func() {
		m.mu.Lock()
		m.checkBusy = false
		m.mu.Unlock()
	}
}

// nodesOf is step 1 with the ungoverned GPUs of the tree's flavors: kept
// while the nodes' generation and the tree are the ones m last saw.
func (m *Memo) nodesOf(s watch.View, tree *quota.Node) ([]plan.Node, []device.UngovernedGPU) {
	derive := func() ([]plan.Node, []device.UngovernedGPU) {
		var flavors []quota.Flavor
		if tree != nil {
			flavors = tree.Flavors
		}
		nodes := snapshotNodes(s.Nodes)
		return nodes, device.Ungoverned(nodes, flavors)
	}
	if m == nil {
		return derive()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.nodes; p.nodes == nil || p.gen != s.Gen.Nodes || p.tree != tree {
		nodes, ungoverned := derive()
		m.nodes = nodesPart{gen: s.Gen.Nodes, tree: tree, nodes: nodes, ungoverned: ungoverned}
		if nodes == nil {
			m.nodes.nodes = []plan.Node{} // kept: none
		}
	}
	if len(m.nodes.nodes) == 0 {
		return nil, m.nodes.ungoverned
	}
	return m.nodes.nodes, m.nodes.ungoverned
}

// allocsOf is step 2 and the first half of step 5: the live allocations
// per job and group, and the allocations that hold GPUs (heldOf); kept
// while the allocations' generation is the one m last saw.
func (m *Memo) allocsOf(s watch.View) (liveCounts, *heldAllocs) {
	if m == nil {
		return liveByGroup(s.Allocs), heldOf(s.Allocs)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.allocs; p.live.jobs == nil || p.gen != s.Gen.Allocs {
		m.allocs = allocsPart{gen: s.Gen.Allocs, live: liveByGroup(s.Allocs), held: heldOf(s.Allocs)}
	}
	return m.allocs.live, m.allocs.held
}

// allocationsOf is steps 5-5b (snapshotAllocations): the allocations m
// kept when the held allocations, the keys of their jobs (keys, in
// h.jobs' order) and the stops are
// the ones it made them of, else made and kept. The slice returned may be
// the one a build before returned: read only.
func (m *Memo) allocationsOf(h *heldAllocs, jobs map[plan.JobKey]*JobView, keys []jobAllocKey, in allocInputs) ([]plan.Allocation, []string) {
	if m == nil {
		return snapshotAllocations(h, jobs, keys, in)
	}
	m.mu.Lock()
	p := m.allocations
	m.mu.Unlock()
	if p.held == h && slices.Equal(p.keys, keys) && maps.Equal(p.stopping, in.stopping) && maps.Equal(p.forRes, in.forRes) {
		return p.out, p.unclaimed
	}
	out, unclaimed := snapshotAllocations(h, jobs, keys, in)
	m.mu.Lock()
	m.allocations = allocationsPart{held: h, keys: keys, stopping: maps.Clone(in.stopping), forRes: maps.Clone(in.forRes),
		out: out, unclaimed: unclaimed}
	m.mu.Unlock()
	return out, unclaimed
}
