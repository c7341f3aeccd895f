package watch

import (
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/hashicorp/nomad/api"
)

// Node is what the broker keeps of a Nomad client node.
type Node struct {
	ID         string
	Name       string
	Datacenter string
	NodePool   string
	// Schedulable: status "ready", eligible and not draining. The GPUs of
	// other nodes are never free (they are passed to the core as unhealthy).
	Schedulable bool
	GPUs        []plan.GPU // nvidia/gpu device instances, in Nomad's order
}

// Alloc is what the broker keeps of a Nomad allocation.
type Alloc struct {
	ID            string
	Namespace     string
	JobID         string
	Group         string
	JobType       string
	NodeID        string
	ClientStatus  string
	DesiredStatus string
	GPUIDs        []string // assigned nvidia/gpu device instances (L2)
	CreateTime    time.Time
	StartedAt     time.Time // earliest task start, or CreateTime before any task started
	ModifyIndex   uint64
}

// Live reports whether the allocation still holds its GPUs: it counts from
// placement until the client reports it terminal (DESIGN L2).
func (a *Alloc) Live() bool {
	switch a.ClientStatus {
	case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
		return false
	}
	return true
}

// Stopping reports whether Nomad has been asked to stop the allocation (by
// the broker or anyone else) while it still holds its GPUs.
func (a *Alloc) Stopping() bool {
	return a.Live() && (a.DesiredStatus == api.AllocDesiredStatusStop || a.DesiredStatus == api.AllocDesiredStatusEvict)
}

// JobKey returns the key of the allocation's job.
func (a *Alloc) JobKey() plan.JobKey { return plan.JobKey{Namespace: a.Namespace, Job: a.JobID} }

// State is the broker's copy of the Nomad state it plans on. Its methods
// are safe for concurrent use; the maps are only read and written under mu.
type State struct {
	mu        sync.RWMutex
	index     uint64
	nodes     map[string]*Node
	allocs    map[string]*Alloc
	jobs      map[plan.JobKey]*api.Job        // full jobs (governed namespaces only)
	summaries map[plan.JobKey]*api.JobSummary // job summaries
	// queued are the jobs whose summary has queued allocations (setSummary
	// keeps it with summaries).
	queued     map[plan.JobKey]struct{}
	blocked    map[string]*api.Evaluation // eval ID -> blocked evaluation
	namespaces map[string]bool
	// nsWatch says how namespace changes reach the state (set by the
	// watcher before the state is installed; zero in a state built
	// otherwise, which Refresh treats as streamed).
	nsWatch NamespaceWatch
	// pools are the node pool names Nomad listed (ListAll, and again by
	// Refresh when a job names a pool not among them); nil in a state
	// built from events alone, where the pool check is skipped.
	pools map[string]bool
	// dirty lists jobs whose summary (or existence) must be fetched again
	// before the next snapshot: evaluations change the summary but the
	// event stream carries no summary events.
	dirty map[plan.JobKey]bool
	// governed says which namespaces' jobs are kept (nil: all).
	governed func(namespace string) bool
	// gen says when each part of the state last changed (Generations).
	gen Generations
	// live counts the live allocations per job for LiveAllocs, made at
	// the allocations' generation liveGen; liveMu guards both (LiveAllocs
	// holds only the read lock of mu).
	liveMu  sync.Mutex
	live    map[plan.JobKey]int
	liveGen uint64
}

// Generations says when each part of a State last changed, as values of
// one process-wide counter: a part whose value is unchanged between two
// reads, of the same State or of any other, is unchanged, so a build may
// keep what it derived from it (build.Memo). A part's value changes at
// every write to it under the State's lock (events, refreshes, the
// broker's own notes, Edit); a new State starts with new values.
type Generations struct {
	Nodes  uint64 // the nodes
	Allocs uint64 // the allocations
	// Jobs covers the jobs, their summaries and the node pool names.
	Jobs uint64
	// Pools covers the node pool names alone.
	Pools uint64
}

// generation is the process-wide counter Generations take their values
// from.
var generation atomic.Uint64

func nextGen() uint64 { return generation.Add(1) }

// touchNodes, touchAllocs and touchJobs record a write to a part (callers
// hold s.mu for writing).
func (s *State) touchNodes()  { s.gen.Nodes = nextGen() }
func (s *State) touchAllocs() { s.gen.Allocs = nextGen() }
func (s *State) touchJobs()   { s.gen.Jobs = nextGen() }
func (s *State) touchPools()  { s.gen.Pools = nextGen() }

// setSummary stores job k's summary (nil: drops it) and keeps s.queued
// with it (callers hold s.mu for writing).
func (s *State) setSummary(k plan.JobKey, sum *api.JobSummary) {
	if sum == nil {
		delete(s.summaries, k)
	} else {
		s.summaries[k] = sum
	}
	if hasQueued(sum) {
		s.queued[k] = struct{}{}
	} else {
		delete(s.queued, k)
	}
}

// hasQueued reports whether a task group of sum has queued allocations
// (Nomad's placements that found no room).
func hasQueued(sum *api.JobSummary) bool {
	if sum == nil {
		return false
	}
	for _, g := range sum.Summary {
		if g.Queued > 0 {
			return true
		}
	}
	return false
}

// NewState returns an empty state.
func NewState() *State {
	return &State{
		nodes:      map[string]*Node{},
		allocs:     map[string]*Alloc{},
		jobs:       map[plan.JobKey]*api.Job{},
		summaries:  map[plan.JobKey]*api.JobSummary{},
		queued:     map[plan.JobKey]struct{}{},
		blocked:    map[string]*api.Evaluation{},
		namespaces: map[string]bool{},
		dirty:      map[plan.JobKey]bool{},
		gen:        Generations{Nodes: nextGen(), Allocs: nextGen(), Jobs: nextGen(), Pools: nextGen()},
	}
}

// Index returns the Raft index the state is current to.
func (s *State) Index() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.index
}

// Alloc returns a copy of the allocation with the ID, or false.
func (s *State) Alloc(id string) (Alloc, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, ok := s.allocs[id]
	if !ok {
		return Alloc{}, false
	}
	return *a, true
}

// Job returns the job (not a copy: callers must not change it) or nil.
func (s *State) Job(namespace, id string) *api.Job {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.jobs[plan.JobKey{Namespace: namespace, Job: id}]
}

// Allocs returns copies of the allocations, sorted by ID.
func (s *State) Allocs() []Alloc {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Alloc, 0, len(s.allocs))
	for _, a := range s.allocs {
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// LiveAllocs counts the live allocations of the job with key (DESIGN L2),
// from a count per job made once per generation of the allocations (the
// Actor asks before each admission: at 20,000 allocations a walk over all
// of them per ask cost 2-3 ms).
func (s *State) LiveAllocs(key plan.JobKey) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if s.live == nil || s.liveGen != s.gen.Allocs {
		s.live = make(map[plan.JobKey]int, len(s.live))
		for _, a := range s.allocs {
			if a.Live() {
				s.live[a.JobKey()]++
			}
		}
		s.liveGen = s.gen.Allocs
	}
	return s.live[key]
}

// Namespaces returns the namespaces Nomad knows, sorted.
func (s *State) Namespaces() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.namespaces))
}

// Pools returns a copy of the node pool names Nomad listed, or nil when the
// state has no pool list (CheckAdmitPool then skips the existence check).
func (s *State) Pools() map[string]bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.pools)
}

// BlockedEvals returns how many blocked evaluations each job has.
func (s *State) BlockedEvals() map[plan.JobKey]int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[plan.JobKey]int{}
	for _, e := range s.blocked {
		out[plan.JobKey{Namespace: e.Namespace, Job: e.JobID}]++
	}
	return out
}

// GPUsByAlloc returns the GPUs of every live allocation: the ledger of L2
// in its rawest form, used to compare a re-list with the state before it.
func (s *State) GPUsByAlloc() map[string]int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]int{}
	for id, a := range s.allocs {
		if a.Live() && len(a.GPUIDs) > 0 {
			out[id] = len(a.GPUIDs)
		}
	}
	return out
}

// nodeFrom converts a Nomad node (or list stub fields) to a Node.
func nodeFrom(id, name, dc, pool, status, eligibility string, drain bool, res *api.NodeResources) *Node {
	n := &Node{ID: id, Name: name, Datacenter: dc, NodePool: pool,
		Schedulable: status == api.NodeStatusReady && eligibility == api.NodeSchedulingEligible && !drain}
	if n.NodePool == "" {
		n.NodePool = "default"
	}
	if res != nil {
		for _, d := range res.Devices {
			if d == nil || !isNvidiaGPU(d.Vendor, d.Type) {
				continue
			}
			model, profile := deviceModel(d)
			for _, inst := range d.Instances {
				if inst == nil {
					continue
				}
				n.GPUs = append(n.GPUs, plan.GPU{ID: inst.ID, Model: model, Healthy: inst.Healthy, MIGProfile: profile})
			}
		}
	}
	return n
}

// deviceModel gives the GPU model and MIG profile of a device group's
// instances (DESIGN L13). The device plugin names a MIG group "<GPU name>
// MIG <profile>" and sets the attributes mig (bool) and mig_profile
// (string): the profile is mig_profile, else the name's suffix; the model
// is the name less " MIG <profile>" (the whole name when the suffix names
// another profile than mig_profile, or none, or is " MIG " with no profile
// after it). A group whose mig attribute is false
// is whole GPUs whatever its name, and so is a group of another plugin
// with neither attribute nor suffix: ("NVIDIA H100 80GB HBM3", "").
func deviceModel(d *api.NodeDeviceResource) (model, profile string) {
	if a := d.Attributes["mig"]; a != nil && a.BoolVal != nil && !*a.BoolVal {
		return d.Name, ""
	}
	model, profile = quota.SplitMIGName(d.Name)
	if a := d.Attributes["mig_profile"]; a != nil && a.StringVal != nil && *a.StringVal != "" && *a.StringVal != profile {
		// The attribute is the truth; a name whose suffix says otherwise
		// (or that has none) is kept whole as the model.
		return d.Name, *a.StringVal
	}
	if profile == "" {
		// A name ending in " MIG " with no profile after it is not a
		// whole GPU of the model before it: Nomad's ${device.model} of
		// such a group never equals that model, so a flavor's pin would
		// never place there. The name is kept whole.
		return d.Name, ""
	}
	return model, profile
}

func isNvidiaGPU(vendor, typ string) bool { return vendor == "nvidia" && typ == "gpu" }

// gpuIDs returns the nvidia/gpu device instances assigned to an allocation,
// over all its tasks, sorted (DESIGN L2).
func gpuIDs(res *api.AllocatedResources) []string {
	if res == nil {
		return nil
	}
	var ids []string
	for _, t := range res.Tasks {
		if t == nil {
			continue
		}
		for _, d := range t.Devices {
			if d != nil && isNvidiaGPU(d.Vendor, d.Type) {
				ids = append(ids, d.DeviceIDs...)
			}
		}
	}
	sort.Strings(ids)
	return ids
}

// startedAt is the earliest task start, or created when no task started.
func startedAt(states map[string]*api.TaskState, created time.Time) time.Time {
	var first time.Time
	for _, ts := range states {
		if ts == nil || ts.StartedAt.IsZero() {
			continue
		}
		if first.IsZero() || ts.StartedAt.Before(first) {
			first = ts.StartedAt
		}
	}
	if first.IsZero() {
		return created
	}
	return first
}

func allocFromStub(a *api.AllocationListStub) *Alloc {
	created := time.Unix(0, a.CreateTime).UTC()
	return &Alloc{ID: a.ID, Namespace: nsOrDefault(a.Namespace), JobID: a.JobID, Group: a.TaskGroup, JobType: a.JobType,
		NodeID: a.NodeID, ClientStatus: a.ClientStatus, DesiredStatus: a.DesiredStatus,
		GPUIDs: gpuIDs(a.AllocatedResources), CreateTime: created, StartedAt: startedAt(a.TaskStates, created).UTC(),
		ModifyIndex: a.ModifyIndex}
}

func allocFromFull(a *api.Allocation) *Alloc {
	created := time.Unix(0, a.CreateTime).UTC()
	typ := ""
	if a.Job != nil && a.Job.Type != nil {
		typ = *a.Job.Type
	}
	return &Alloc{ID: a.ID, Namespace: nsOrDefault(a.Namespace), JobID: a.JobID, Group: a.TaskGroup, JobType: typ,
		NodeID: a.NodeID, ClientStatus: a.ClientStatus, DesiredStatus: a.DesiredStatus,
		GPUIDs: gpuIDs(a.AllocatedResources), CreateTime: created, StartedAt: startedAt(a.TaskStates, created).UTC(),
		ModifyIndex: a.ModifyIndex}
}

func nsOrDefault(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

// share makes al's node ID and job ID the very strings of its node and
// job in s, when s has them (callers hold s.mu for writing). Equal strings
// that share their bytes compare without reading them, and each cycle
// looks up the nodes and jobs of 20,000 allocations (the build's live
// counts and held allocations, the planner's node index): the bytes read
// are then those of 5,000 node IDs and the jobs' own keys, not 20,000
// copies scattered over the heap (issue 18).
func (s *State) share(al *Alloc) {
	if n := s.nodes[al.NodeID]; n != nil && n.ID == al.NodeID {
		al.NodeID = n.ID
	}
	if j := s.jobs[al.JobKey()]; j != nil && j.ID != nil && *j.ID == al.JobID {
		al.JobID = *j.ID
	}
}

func jobKey(j *api.Job) plan.JobKey {
	return plan.JobKey{Namespace: nsOrDefault(str(j.Namespace)), Job: str(j.ID)}
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// MarkStopping records at once that the broker asked Nomad to stop the
// allocation, before the event says so, so that the next plan never picks
// it again.
func (s *State) MarkStopping(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.allocs[id]; a != nil {
		c := *a
		c.DesiredStatus = api.AllocDesiredStatusStop
		s.allocs[id] = &c
		s.touchAllocs()
	}
}

// NoteJob records at once a job the broker registered, before the event
// brings it, so that the next plan sees the new pool.
func (s *State) NoteJob(key plan.JobKey, j *api.Job, modifyIndex uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := *j
	c.JobModifyIndex = &modifyIndex
	c.ModifyIndex = &modifyIndex
	if old := s.jobs[key]; old != nil && old.ModifyIndex != nil && *old.ModifyIndex > modifyIndex {
		return
	}
	s.jobs[key] = &c
	s.dirty[key] = true
	s.touchJobs()
}

// KeepJob stores a job the broker read itself (a spec the state lacked, or
// one read again after an index conflict) unless a newer copy is there. It
// marks nothing for refresh: the read is no change.
func (s *State) KeepJob(key plan.JobKey, j *api.Job) {
	if j == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.governed != nil && !s.governed(key.Namespace) {
		return
	}
	if old := s.jobs[key]; old == nil || old.ModifyIndex == nil || j.ModifyIndex == nil || *old.ModifyIndex <= *j.ModifyIndex {
		s.jobs[key] = j
		s.touchJobs()
	}
}

// View is the state as a snapshot is built from it (build.From): its maps,
// read only, and valid only during the function given to State.Read.
type View struct {
	Nodes     map[string]*Node
	Allocs    map[string]*Alloc
	Jobs      map[plan.JobKey]*api.Job        // full jobs (governed namespaces only)
	Summaries map[plan.JobKey]*api.JobSummary // job summaries
	// Queued are the jobs of Summaries with queued allocations in a task
	// group: a build reads the summary of a job placed in its pool only
	// when it is here (10,000 jobs, a handful queued: issue 18).
	Queued map[plan.JobKey]struct{}
	// Pools are the node pool names Nomad listed; nil in a state built
	// from events alone, where the pool check is skipped.
	Pools map[string]bool
	// Dirty lists the jobs whose summary (or existence) the next Refresh
	// fetches again.
	Dirty map[plan.JobKey]bool
	// Gen says when each part last changed.
	Gen Generations
}

// Read calls fn with a view of the state, under the state's read lock: fn
// must neither keep nor change the maps, nor call the state's methods.
func (s *State) Read(fn func(View)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn(s.view())
}

// Edit calls fn with a view of the state under its write lock, for tests
// and tools that shape a state by hand; fn may change the maps (every
// part counts as changed). Maps kept past fn and changed later must not be
// built with a build.Memo.
func (s *State) Edit(fn func(View)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touchNodes()
	s.touchAllocs()
	s.touchJobs()
	s.touchPools()
	fn(s.view())
	// fn may have changed the summaries: index the queued jobs again.
	clear(s.queued)
	for k, sum := range s.summaries {
		if hasQueued(sum) {
			s.queued[k] = struct{}{}
		}
	}
}

// view is the view of s (callers hold s.mu).
func (s *State) view() View {
	return View{Nodes: s.nodes, Allocs: s.allocs, Jobs: s.jobs, Summaries: s.summaries, Queued: s.queued,
		Pools: s.pools, Dirty: s.dirty, Gen: s.gen}
}
