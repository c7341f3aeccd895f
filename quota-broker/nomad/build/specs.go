package build

import (
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/hashicorp/nomad/api"
)

// specRead is what a build reads of one spec: every field of the job a
// build uses (the spec is a large tree of pointers, which a build over
// 10,000 jobs would otherwise follow again every cycle).
type specRead struct {
	holding   string // the holding pool the options were read with
	namespace string // "default" when unset
	id        string
	pool      string // the node pool, "" when unset
	typ       plan.JobType
	priority  int  // prio
	stop      bool // the job is stopped (job stop)
	status    string
	parent    bool // a periodic or parameterized parent
	options   jobmeta.JobOptions
	metaErr   error
	groups    []groupRead // the spec's task groups that have a name, in order
	gpuGroups int         // task groups that ask for nvidia/gpu devices
	// tree is the quota tree the flavors were read against (its
	// pointer: a tree changed is a new tree); flavors and flavorsErr are
	// jobFlavors' answer for it.
	tree       *quota.Node
	flavors    []string
	flavorsErr error
}

// groupRead is what a build reads of one task group.
type groupRead struct {
	name        string
	count       int    // the group's count (1 when unset)
	gpus        int    // per allocation (groupGPUs)
	model       string // "" = any
	killTimeout time.Duration
}

// readSpec reads job j's spec with holding as the holding pool and tree
// as the quota tree.
func readSpec(j *api.Job, holding string, tree *quota.Node) *specRead {
	r := &specRead{holding: holding, tree: tree, namespace: nsOrDefault(str(j.Namespace)), id: str(j.ID), pool: str(j.NodePool),
		typ: plan.JobType(str(j.Type)), priority: jobmeta.Priority(j), stop: j.Stop != nil && *j.Stop, status: str(j.Status),
		parent: j.IsPeriodic() || j.IsParameterized()}
	r.options, r.metaErr = jobmeta.ParseJobOptions(j.Meta, holding)
	for _, tg := range j.TaskGroups {
		if tg == nil {
			continue
		}
		gpus, model := jobmeta.GroupGPUs(tg)
		if gpus > 0 {
			r.gpuGroups++
		}
		if tg.Name != nil {
			count := 1
			if tg.Count != nil {
				count = *tg.Count
			}
			r.groups = append(r.groups, groupRead{name: *tg.Name, count: count, gpus: gpus, model: model,
				killTimeout: jobmeta.GroupKillTimeout(j, *tg.Name)})
		}
	}
	var flavors []quota.Flavor
	if tree != nil {
		flavors = tree.Flavors
	}
	r.flavors, r.flavorsErr = jobFlavors(flavors, j)
	return r
}

// jobFlavors is what build step 3 reads of job j's flavors with the
// tree's flavors: jobmeta.JobFlavors, except that a job admission pinned to f
// (jobmeta.PinnedFlavor), one of the flavors its gputide_flavors lists, gets f
// alone, the others the pin excludes being no meta error.
func jobFlavors(flavors []quota.Flavor, j *api.Job) ([]string, error) {
	fl, err := jobmeta.JobFlavors(flavors, j)
	if err == nil {
		return fl, nil
	}
	if f, ok := jobmeta.PinnedFlavor(flavors, j); ok && jobmeta.ListsFlavor(j.Meta, f) {
		return []string{f}, nil
	}
	return fl, err
}

// group returns what was read of the task group named name (the first of
// that name, as the job's own lookups by name find), or false.
func (r *specRead) group(name string) (groupRead, bool) {
	if r == nil { // a view not made by a build
		return groupRead{}, false
	}
	for _, g := range r.groups {
		if g.name == name {
			return g, true
		}
	}
	return groupRead{}, false
}

// of returns the entry of j's spec with holding as the holding pool and
// tree as the quota tree: the kept one when m has one made with both,
// else a new one (kept when m is not nil), marked as seen by the build
// under way.
func (m *Memo) of(j *api.Job, holding string, tree *quota.Node) *specEntry {
	if m == nil {
		return &specEntry{read: readSpec(j, holding, tree), held: -1}
	}
	m.mu.Lock()
	e := m.specs[j]
	if e != nil && e.seen != m.build {
		e.seen = m.build
		m.seen++
	}
	m.mu.Unlock()
	if e != nil && e.read.holding == holding && e.read.tree == tree {
		return e
	}
	e = &specEntry{read: readSpec(j, holding, tree), seen: m.build, held: -1}
	m.mu.Lock()
	if m.specs == nil {
		m.specs = map[*api.Job]*specEntry{}
	}
	if old := m.specs[j]; old == nil || old.seen != m.build {
		m.seen++
	}
	m.specs[j] = e
	m.mu.Unlock()
	return e
}

// Len is the number of specs kept.
func (m *Memo) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.specs)
}
