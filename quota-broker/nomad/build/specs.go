package build

import (
	"sync"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/nomad/api"
)

// Specs keeps what a build reads of each job's spec: the job's fields it
// reads for every job and allocation (namespace, ID, node pool, type,
// priority, stop, status), its gputide meta options (or meta error) and,
// per task group, its count, the GPUs and model one allocation asks for
// and the largest kill_timeout of its tasks. It is
// keyed by the spec's pointer: the watcher's State puts a new *api.Job in
// place of a job whenever the job changes (an event, the broker's own
// register, a read) and never changes one in place, so a spec read by the
// last build is not read again. A build with Input.Specs forgets the specs
// it did not see, so the cache holds one entry per governed job. The zero
// value is ready; it is safe for concurrent use. At 10,000 jobs it saves a
// cycle reading every job's meta and every group's devices again (issue
// 18, docs/benchmarks.md).
type Specs struct {
	mu    sync.Mutex
	read  map[*api.Job]*specRead
	seen  map[*api.Job]bool // by the build under way (begin .. end)
	depth int               // builds under way
}

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
	options   JobOptions
	metaErr   error
	groups    []groupRead // the spec's task groups that have a name, in order
	gpuGroups int         // task groups that ask for nvidia/gpu devices
}

// groupRead is what a build reads of one task group.
type groupRead struct {
	name        string
	count       int    // the group's count (1 when unset)
	gpus        int    // per allocation (groupGPUs)
	model       string // "" = any
	killTimeout time.Duration
}

// readSpec reads job j's spec with holding as the holding pool.
func readSpec(j *api.Job, holding string) *specRead {
	r := &specRead{holding: holding, namespace: nsOrDefault(str(j.Namespace)), id: str(j.ID), pool: str(j.NodePool),
		typ: plan.JobType(str(j.Type)), priority: prio(j), stop: j.Stop != nil && *j.Stop, status: str(j.Status),
		parent: j.IsPeriodic() || j.IsParameterized()}
	r.options, r.metaErr = ParseJobOptions(j.Meta, holding)
	for _, tg := range j.TaskGroups {
		if tg == nil {
			continue
		}
		gpus, model := groupGPUs(tg)
		if gpus > 0 {
			r.gpuGroups++
		}
		if tg.Name != nil {
			count := 1
			if tg.Count != nil {
				count = *tg.Count
			}
			r.groups = append(r.groups, groupRead{name: *tg.Name, count: count, gpus: gpus, model: model,
				killTimeout: groupKillTimeout(j, *tg.Name)})
		}
	}
	return r
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

// of returns what is read of j's spec with holding as the holding pool:
// the cached read when c has one, else a new read (kept when c is not nil).
func (c *Specs) of(j *api.Job, holding string) *specRead {
	if c == nil {
		return readSpec(j, holding)
	}
	c.mu.Lock()
	r := c.read[j]
	if c.seen != nil {
		c.seen[j] = true
	}
	c.mu.Unlock()
	if r != nil && r.holding == holding {
		return r
	}
	r = readSpec(j, holding)
	c.mu.Lock()
	if c.read == nil {
		c.read = map[*api.Job]*specRead{}
	}
	c.read[j] = r
	c.mu.Unlock()
	return r
}

// begin starts a build's marking of the specs it sees.
func (c *Specs) begin() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.depth == 0 {
		c.seen = map[*api.Job]bool{}
	}
	c.depth++
}

// end ends a build: once no build is under way, the specs none saw are
// forgotten.
func (c *Specs) end() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.depth--
	if c.depth > 0 {
		return
	}
	for j := range c.read {
		if !c.seen[j] {
			delete(c.read, j)
		}
	}
	c.seen = nil
}

// Len is the number of specs kept.
func (c *Specs) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.read)
}
