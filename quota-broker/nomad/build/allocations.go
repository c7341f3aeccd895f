package build

import (
	"slices"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
)

// heldAllocs is what step 5 makes of the live allocations that hold GPUs before
// it reads their jobs: it depends on the allocations alone, so a Memo
// keeps it while they do not change (issue 18: a build then reads each
// job once for its allocations, not each allocation's job).
type heldAllocs struct {
	allocs []*watch.Alloc          // by ID
	base   []plan.Allocation       // allocs[i] as an allocation of no known job: its own type (service when not valid), priority 50
	byJob  map[plan.JobKey][]int32 // the indices of each job's allocations, in order
	// stopping are the indices of the allocations Nomad was asked to stop
	// (watch.Alloc.Stopping), in order.
	stopping []int32
}

// heldOf makes the held part of the allocations.
func heldOf(allocs map[string]*watch.Alloc) *heldAllocs {
	h := &heldAllocs{allocs: make([]*watch.Alloc, 0, len(allocs)), byJob: map[plan.JobKey][]int32{}}
	for _, a := range allocs {
		if a.Live() && len(a.GPUIDs) > 0 {
			h.allocs = append(h.allocs, a)
		}
	}
	slices.SortFunc(h.allocs, func(p, q *watch.Alloc) int { return strings.Compare(p.ID, q.ID) })
	h.base = make([]plan.Allocation, len(h.allocs))
	for i, a := range h.allocs {
		pa := plan.Allocation{ID: a.ID, Namespace: a.Namespace, Job: a.JobID, Group: a.Group,
			Type: plan.JobType(a.JobType), Priority: 50, Node: a.NodeID, GPUIDs: slices.Clip(a.GPUIDs),
			StartedAt: a.StartedAt}
		if !pa.Type.Valid() {
			pa.Type = plan.JobService
		}
		h.base[i] = pa
		k := a.JobKey()
		h.byJob[k] = append(h.byJob[k], int32(i))
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

// snapshotAllocations is steps 5 and 5a: the live allocations that hold
// GPUs (h), by ID, each with its job's type, priority and gputide options
// and what the core's timed rules need (DESIGN L10.end, L11.max_run,
// L11.settle): KillTimeout, the largest kill_timeout of its group's tasks
// (default plan.DefaultKillTimeout); MaxRun, its job's flex max_run;
// AdmittedAt, when the broker admitted its job (admitted), or, for a flex
// request the broker did not admit in this process, the earliest start of
// its job's allocations here. An allocation of a job no view has keeps
// its own type (service when not valid), priority 50 and no time. The
// live allocations of a job registered straight into a pool are left out
// unless Nomad was asked to stop them (L3 decides on it as pending, step
// 4). Stopping ones carry their claimant (stopping: StoppingFor), or
// UnknownClaimant; unknown lists the governed ones of those, by ID. An
// allocation's GPU IDs are the state's own slice (never changed in place:
// read only, as the snapshot).
func snapshotAllocations(h *heldAllocs, jobs map[plan.JobKey]*JobView, stopping map[string]plan.GroupKey,
	governed func(string) bool, admitted func(plan.JobKey) time.Time) (out []plan.Allocation, unknown []string) {
	out = slices.Clone(h.base)
	var left []bool // by index: left out (a direct registration's)
	for k, idx := range h.byJob {
		if v := jobs[k]; v != nil {
			left = jobAllocations(out, idx, h.allocs, v, admitted, left)
		}
	}
	for id, c := range stopping {
		if i, ok := h.index(id); ok {
			out[i].StoppingFor = c
		}
	}
	for _, i := range h.stopping {
		if _, ok := stopping[out[i].ID]; ok || left != nil && left[i] {
			continue
		}
		out[i].StoppingFor = UnknownClaimant
		if governed(out[i].Namespace) {
			unknown = append(unknown, out[i].ID)
		}
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
	return out, unknown
}

// jobAllocations fills in, for the allocations of job view v (their
// indices idx into out and allocs), what they take from the job (see
// snapshotAllocations), and marks in left those of a direct registration
// that Nomad was not asked to stop; it returns left, made when first
// needed.
func jobAllocations(out []plan.Allocation, idx []int32, allocs []*watch.Alloc, v *JobView,
	admitted func(plan.JobKey) time.Time, left []bool) []bool {
	typ, priority := v.typeAndPriority()
	var admittedAt time.Time
	if admitted != nil {
		admittedAt = admitted(v.Key)
	}
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
		typ, priority = plan.JobType(str(v.Job.Type)), prio(v.Job)
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
	return groupKillTimeout(v.Job, group)
}
