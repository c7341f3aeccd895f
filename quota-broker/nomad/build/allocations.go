package build

import (
	"slices"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/nomad/api"
)

// heldAllocs is what step 5 makes of the live allocations that hold GPUs before
// it reads their jobs: it depends on the allocations alone, so a Memo
// keeps it while they do not change (issue 18: a build then reads each
// job once for its allocations, not each allocation's job).
type heldAllocs struct {
	allocs []*watch.Alloc    // by ID
	base   []plan.Allocation // allocs[i] as an allocation of no known job: its own type (service when not valid), priority 50
	// jobs are the jobs of the allocations, in the order of their first
	// allocation, idx[j] the indices of the allocations of jobs[j], in
	// order, and jobIndex the index of each job in jobs.
	jobs     []plan.JobKey
	idx      [][]int32
	jobIndex map[plan.JobKey]int32
	// stopping are the indices of the allocations Nomad was asked to stop
	// (watch.Alloc.Stopping), in order.
	stopping []int32
}

// heldOf makes the held part of the allocations.
func heldOf(allocs map[string]*watch.Alloc) *heldAllocs {
	h := &heldAllocs{allocs: make([]*watch.Alloc, 0, len(allocs))}
	for _, a := range allocs {
		if a.Live() && len(a.GPUIDs) > 0 {
			h.allocs = append(h.allocs, a)
		}
	}
	slices.SortFunc(h.allocs, func(p, q *watch.Alloc) int { return strings.Compare(p.ID, q.ID) })
	h.base = make([]plan.Allocation, len(h.allocs))
	h.jobIndex = map[plan.JobKey]int32{}
	for i, a := range h.allocs {
		pa := plan.Allocation{ID: a.ID, Namespace: a.Namespace, Job: a.JobID, Group: a.Group,
			Type: plan.JobType(a.JobType), Priority: 50, Node: a.NodeID, GPUIDs: slices.Clip(a.GPUIDs),
			StartedAt: a.StartedAt}
		if !pa.Type.Valid() {
			pa.Type = plan.JobService
		}
		h.base[i] = pa
		k := a.JobKey()
		j, ok := h.jobIndex[k]
		if !ok {
			j = int32(len(h.jobs))
			h.jobIndex[k] = j
			h.jobs = append(h.jobs, k)
			h.idx = append(h.idx, nil)
		}
		h.idx[j] = append(h.idx[j], int32(i))
		if a.Stopping() {
			h.stopping = append(h.stopping, int32(i))
		}
	}
	return h
}

// index returns the index of the allocation with the ID, or false.
func (h *heldAllocs) index(id string) (int, bool) {
	return slices.BinarySearchFunc(h.allocs, id, func(a *watch.Alloc, id string) int { return strings.Compare(a.ID, id) })
}

// allocInputs is what steps 5-5b read besides the held allocations and
// the job views: the claimants of the allocations the broker stops
// (Input.Stopping), the bookings of those it stops for a reservation
// (Input.StoppingForReservation).
type allocInputs struct {
	stopping map[string]plan.GroupKey
	forRes   map[string]string
}

// jobAllocKey is all that the allocations of one job take from it in
// steps 5 and 5a: two builds that see the same held allocations, the
// same keys and the same stops make the same allocations (Memo keeps
// them). The spec read gives the job's type, priority, options and
// kill_timeouts.
type jobAllocKey struct {
	view       bool // the job has a view
	job        *api.Job
	spec       *specRead
	direct     bool
	admittedAt time.Time
}

// allocKeyOf is the key of the allocations of the job of view v.
func allocKeyOf(v *JobView) jobAllocKey {
	return jobAllocKey{view: true, job: v.Job, spec: v.spec, direct: v.Direct, admittedAt: v.rec.AdmittedAt}
}

// snapshotAllocations is steps 5, 5a and 5b: the live allocations that
// hold GPUs (h), by ID, each with its job's type, priority and gputide
// options and what the core's timed rules need (DESIGN L10.end,
// L11.max_run, L11.settle): KillTimeout, the largest kill_timeout of its
// group's tasks (default plan.DefaultKillTimeout); MaxRun, its job's flex
// max_run; AdmittedAt, when the broker admitted its job, or, for a flex
// request the broker did not admit in this process, the earliest start of
// its job's allocations here. An allocation of a job no view has keeps
// its own type (service when not valid), priority 50 and no time. The
// live allocations of a job registered straight into a pool are left out
// unless Nomad was asked to stop them (L3 decides on it as pending, step
// 4). Stopping ones carry their claimant (in.stopping: StoppingFor) or
// their booking (in.forRes: StoppingForReservation, step 5b), else
// UnknownClaimant; unclaimed lists those, by ID. keys[j] is the key of
// h.jobs[j] (allocKeyOf its view; zero: the job has none). An allocation's GPU IDs are the
// state's own slice (never changed in place: read only, as the snapshot).
func snapshotAllocations(h *heldAllocs, jobs map[plan.JobKey]*JobView, keys []jobAllocKey, in allocInputs) (out []plan.Allocation, unclaimed []string) {
	out = slices.Clone(h.base)
	var left []bool // by index: left out (a direct registration's)
	for j, k := range h.jobs {
		if keys[j].view {
			left = jobAllocations(out, h.idx[j], h.allocs, jobs[k], keys[j].admittedAt, left)
		}
	}
	for id, c := range in.stopping {
		if i, ok := h.index(id); ok {
			out[i].StoppingFor = c
		}
	}
	for id, r := range in.forRes {
		if i, ok := h.index(id); ok {
			out[i].StoppingFor, out[i].StoppingForReservation = plan.GroupKey{}, r
		}
	}
	for _, i := range h.stopping {
		id := out[i].ID
		_, claimed := in.stopping[id]
		_, booked := in.forRes[id]
		if claimed || booked || left != nil && left[i] {
			continue
		}
		out[i].StoppingFor = UnknownClaimant
		unclaimed = append(unclaimed, id)
	}
	if left != nil {
		n := 0
		for i := range out {
			if !left[i] {
				out[n] = out[i]
				n++
			}
		}
		out = out[:n]
	}
	if len(out) == 0 {
		out = nil // a snapshot without allocations has none
	}
	return out, unclaimed
}

// jobAllocations fills in, for the allocations of job view v (their
// indices idx into out and allocs), what they take from the job (see
// snapshotAllocations), and marks in left those of a direct registration
// that Nomad was not asked to stop; it returns left, made when first
// needed.
func jobAllocations(out []plan.Allocation, idx []int32, allocs []*watch.Alloc, v *JobView,
	admittedAt time.Time, left []bool) []bool {
	typ, priority := v.typeAndPriority()
	var maxRun time.Duration
	if v.Options.Flex != nil {
		maxRun = v.Options.Flex.MaxRun
	}
	var first time.Time // the earliest start of the job's allocations kept
	group, kill := "", time.Duration(0)
	for _, i := range idx {
		if v.Direct && !allocs[i].Stopping() {
			if left == nil {
				left = make([]bool, len(out))
			}
			left[i] = true
			continue
		}
		al := &out[i]
		al.Type, al.Priority = typ, priority
		al.Idle, al.Elastic, al.Reservation = v.Options.Idle, v.Options.Elastic, v.Options.Reservation
		if al.Group != group || kill == 0 {
			group, kill = al.Group, v.killTimeout(al.Group)
		}
		al.KillTimeout, al.MaxRun, al.AdmittedAt = kill, maxRun, admittedAt
		if first.IsZero() || al.StartedAt.Before(first) {
			first = al.StartedAt
		}
	}
	if admittedAt.IsZero() && maxRun > 0 {
		for _, i := range idx {
			if left == nil || !left[i] {
				out[i].AdmittedAt = first
			}
		}
	}
	return left
}

// typeAndPriority is the job's type (service when not valid) and
// priority.
func (v *JobView) typeAndPriority() (plan.JobType, int) {
	var typ plan.JobType
	var priority int
	if v.spec != nil {
		typ, priority = v.spec.typ, v.spec.priority
	} else { // a view not made by a build
		typ, priority = plan.JobType(str(v.Job.Type)), jobmeta.Priority(v.Job)
	}
	if !typ.Valid() {
		typ = plan.JobService
	}
	return typ, priority
}

// killTimeout is the largest kill_timeout of the tasks of the job's group
// (groupKillTimeout).
func (v *JobView) killTimeout(group string) time.Duration {
	if g, ok := v.spec.group(group); ok {
		return g.killTimeout
	}
	return jobmeta.GroupKillTimeout(v.Job, group)
}
