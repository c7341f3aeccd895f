package build

import (
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
//   - the job keys in order (step 3): while the jobs are the same, kept;
//     when they changed, the jobs added are merged in and the jobs gone
//     dropped, without sorting them all again;
//   - the check of the nodes (step 8, plan.NodeCheck), while the nodes are
//     the ones kept.
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
	depth int    // builds under way
	specs map[*api.Job]*specEntry

	nodes  nodesPart
	allocs allocsPart
	keys   keysPart
	// check is the check of nodes.nodes; used by one build at a time
	// (checkBusy), a build that finds it in use checks its nodes itself.
	check     plan.NodeCheck
	checkBusy bool
}

// specEntry is a kept spec read and the last build that saw it.
type specEntry struct {
	read *specRead
	seen uint64
}

// nodesPart is step 1's result for one generation of the nodes and one
// quota tree.
type nodesPart struct {
	gen        uint64
	tree       *quota.Node
	nodes      []plan.Node
	ungoverned []UngovernedGPU
}

// allocsPart is what steps 2 and 5 derive from one generation of the
// allocations alone.
type allocsPart struct {
	gen  uint64
	live liveCounts
	held *heldAllocs
}

// keysPart is the jobs' keys in order for one generation of the jobs,
// and the same keys as a set.
type keysPart struct {
	gen  uint64
	keys []plan.JobKey
	set  map[plan.JobKey]struct{}
}

// begin starts a build: the specs it sees are marked with the build's
// number (builds under way at once share one).
func (m *Memo) begin() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.depth == 0 {
		m.build++
	}
	m.depth++
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
func (m *Memo) nodesOf(s watch.View, tree *quota.Node) ([]plan.Node, []UngovernedGPU) {
	derive := func() ([]plan.Node, []UngovernedGPU) {
		var flavors []quota.Flavor
		if tree != nil {
			flavors = tree.Flavors
		}
		nodes := snapshotNodes(s.Nodes)
		return nodes, ungovernedGPUs(nodes, flavors)
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

// jobKeysOf is the jobs' keys in order (plan.JobKey.Compare). When the
// jobs changed since m last saw them, the keys m kept are brought up to
// date: the jobs gone are dropped and the jobs added (few, in a cycle)
// sorted and merged in, instead of sorting every key again.
func (m *Memo) jobKeysOf(s watch.View) []plan.JobKey {
	if m == nil {
		return slices.SortedFunc(maps.Keys(s.Jobs), plan.JobKey.Compare)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := &m.keys; p.keys == nil || p.gen != s.Gen.Jobs {
		p.update(s.Jobs)
		p.gen = s.Gen.Jobs
	}
	return m.keys.keys
}

// update brings p's keys and set to the keys of jobs: the keys gone are
// dropped, those added sorted and merged in. The slice p had is not
// changed (a build may still read it).
func (p *keysPart) update(jobs map[plan.JobKey]*api.Job) {
	if p.set == nil {
		p.set = make(map[plan.JobKey]struct{}, len(jobs))
	}
	var added []plan.JobKey
	for k := range jobs {
		if _, ok := p.set[k]; !ok {
			added = append(added, k)
			p.set[k] = struct{}{}
		}
	}
	slices.SortFunc(added, plan.JobKey.Compare)
	gone := len(p.keys)+len(added) > len(jobs) // else every kept key is still a job
	out := make([]plan.JobKey, 0, len(jobs))
	i := 0
	for _, k := range p.keys {
		if gone {
			if _, ok := jobs[k]; !ok {
				delete(p.set, k)
				continue
			}
		}
		for i < len(added) && plan.JobKey.Compare(added[i], k) < 0 {
			out = append(out, added[i])
			i++
		}
		out = append(out, k)
	}
	p.keys = append(out, added[i:]...)
}
