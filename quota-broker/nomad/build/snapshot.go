package build

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/watch"

	"github.com/gputide/gputide/quota-broker/nomad/device"
	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/nomad/policies"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/hashicorp/nomad/api"
)

// UnknownClaimant is the StoppingFor of an allocation that is being stopped
// for a claimant the broker cannot name (it was stopped before a restart,
// or by someone else): the core never chooses it again and gives its GPUs
// to nobody until it is gone.
var UnknownClaimant = plan.GroupKey{Namespace: "unknown", Job: "unknown", Group: "unknown"}

// DefaultHoldingPool is the node pool with no nodes that governed jobs wait
// in (DESIGN §5).
const DefaultHoldingPool = "gputide-queue"

// Input is what Build needs besides the Nomad state.
type Input struct {
	Now         time.Time
	Quota       *quota.Node
	Settings    quota.Settings
	HoldingPool string
	// Governed says which namespaces the broker governs; nil means every
	// namespace bound in the quota tree.
	Governed func(namespace string) bool
	// Stopping maps allocations the broker stopped to their claimant (the
	// agent: its store's intents).
	Stopping map[string]plan.GroupKey
	// Record is what the broker recorded of a job (the agent: its store's
	// jobs/<ns>/<job>), read once per governed job and build; nil: no job
	// has a record.
	Record func(job plan.JobKey) JobRecord
	// Accepted, when set, says whether a job in a real pool was admitted
	// by the broker (or was there when it started), in place of its
	// record: a job in a real pool that is not accepted was registered
	// straight into it and is checked as pending. nil: with Record, the
	// jobs whose record has an admission time are accepted; without,
	// every job is.
	Accepted func(job plan.JobKey) bool
	// AdmitPools are the node pools a job may name in gputide_pool (the
	// agent's admit_pools); nil means ["default"]. A job naming another
	// pool, or one Nomad does not have, has a meta error (jobmeta.CheckAdmitPool).
	AdmitPools []string
	// StoppingForReservation maps allocations the broker stopped for a
	// reservation to its ID (the agent: its store's intents of rules
	// L10.drain and L10.start).
	StoppingForReservation map[string]string
	// Reservations are the store's bookings not yet moved to history
	// (ended ones included: the core's L10.end still stops their jobs),
	// passed on as plan.Snapshot.Reservations. A job that is not stopped
	// and names none of them, one of another namespace, or an ended one
	// has a meta error (jobmeta.CheckReservation).
	Reservations []plan.Reservation
	// Holds are the holds the broker keeps (the agent: its store's holds/),
	// passed on as plan.Snapshot.Holds.
	Holds []plan.Hold
	// Evictions are the recent victim stops eviction budgets count (the
	// agent: from its store's history of preemptions, DESIGN L14), passed
	// on as plan.Snapshot.Evictions.
	Evictions []plan.Eviction
	// Policies are the scaling policies of governed namespaces (nil:
	// none); groups with a gputide-idle policy become idle groups.
	Policies *policies.Policies
	// UnplacedSince says since when an idle group has had allocations
	// unplaced (the agent: its store's jobs/<ns>/<job>.unplaced_since);
	// nil or zero: not known to be. Passed on as policies.IdleView.UnplacedSince,
	// for the Actor's scale-down.
	UnplacedSince func(group plan.GroupKey) time.Time
	// Memo, when set, keeps what builds derive from the parts of the
	// state that did not change from one build to the next (the agent's,
	// across cycles); nil: every build derives everything.
	Memo *Memo
}

// JobRecord is what a build reads of the broker's record of a job (the
// agent's store: jobs/<ns>/<job>, store.JobRecord).
type JobRecord struct {
	// Recorded says that the broker has a record of the job; a job
	// without is listed in Build.Unrecorded.
	Recorded bool
	// FirstSeen is when the broker first saw the job (first_seen, DESIGN
	// L11: the order of L3); zero: the job's gputide_submitted meta, else
	// its SubmitTime (Submitted).
	FirstSeen time.Time
	// QueuedAt is when the broker last queued the job (queued_at, rule
	// L11.settle); zero or not after its first sight: never requeued.
	QueuedAt time.Time
	// AdmittedAt is when the broker admitted the job (admitted_at); zero:
	// unknown (see snapshotAllocations), and, unless Input.Accepted says
	// otherwise, a job in a real pool was registered straight into it.
	AdmittedAt time.Time
	// Stopped is the status still to write on a job the broker stopped
	// whole (stopped); zero: none. Passed on as JobView.Stopped, for the
	// Actor.
	Stopped StopStatus
}

// StopStatus is the status meta still to write on a job the broker
// stopped whole (stop_job: DESIGN L10.end, L11.max_run): gputide_reason
// (gputide_status is "stopped") once the job has no live allocation, and
// the job's modify index when it was stopped (a job seen running again at
// another index was started again by its user). The broker keeps it in
// its store, not in the Actor (issue 18).
type StopStatus struct {
	Reason         string
	JobModifyIndex uint64
}

// IsZero reports whether there is no status to write.
func (s StopStatus) IsZero() bool { return s == StopStatus{} }

// JobView is a governed job as the broker sees it.
type JobView struct {
	Key       plan.JobKey
	Job       *api.Job
	Options   jobmeta.JobOptions
	MetaErr   error // a bad gputide meta value; the job is left unadmitted
	Pool      string
	Holding   bool // in the holding pool
	Direct    bool // registered straight into a real pool, not yet checked
	Live      int  // live allocations
	GPUGroups int  // task groups that ask for nvidia/gpu devices
	Pending   int  // allocations passed to the core as pending
	// Flavors are the flavors the job's GPU requests allow, in the order
	// it tries them (jobmeta.JobFlavors, DESIGN L13), written on each of its
	// pending groups; nil for a job without GPU requests or with a meta
	// error, empty when its GPUs can only be ungoverned devices (see
	// Build.Ungoverned).
	Flavors []string
	// Stopped is the status still to write once the job, stopped whole by
	// the broker, has no live allocation (JobRecord.Stopped); zero: none.
	Stopped StopStatus

	spec *specRead // what the build read of Job
	rec  JobRecord // the broker's record of the job (Input.Record)
}

// Build is a snapshot together with the job views it was made from.
type Build struct {
	Snapshot *plan.Snapshot
	Jobs     map[plan.JobKey]*JobView // governed jobs
	// UnknownStopping lists live allocations in governed namespaces that
	// are being stopped for a claimant the broker cannot name.
	UnknownStopping []string
	// Unrecorded lists the governed jobs of which Input.Record gives no
	// record, in order (the agent records them); nil without Input.Record.
	Unrecorded []plan.JobKey
	// NoGPU lists jobs waiting in the holding pool that ask for no GPU at
	// all: the quota does not concern them, so they are admitted at once.
	NoGPU []plan.JobKey
	// Ungoverned lists jobs waiting in the holding pool whose device
	// requests can use only ungoverned devices (devices of no flavor,
	// DESIGN L13): the quota does not count them, so they are admitted
	// at once, uncounted, each with a warning in Warnings.
	Ungoverned []plan.JobKey
	// UngovernedGPUs lists, per node, the GPUs of no flavor of the tree
	// (DESIGN L13: MIG instances under the implicit flavor, models no
	// flavor names), by node ID then Nomad's order, each with the reason:
	// the broker leaves them to Nomad (never counted, free, admitted
	// through or stopped). The API and quota status show them.
	UngovernedGPUs []device.UngovernedGPU
	// Warnings are the build's warnings for the plan's (one per job of
	// Ungoverned); the agent adds them to the plan's Warnings.
	Warnings []plan.Warning
	// Left lists the nodes, allocations and pending jobs that break a rule
	// of plan.Snapshot.Check, each with what is wrong: they are left out
	// of Snapshot, and so of the plan; the caller reports them.
	Left []*plan.Fault
	// Invalid is a fault in the quota tree or the settings (or the time):
	// nothing can be planned and the broker must not act (DESIGN L12).
	// Snapshot is then the unchecked snapshot.
	Invalid error
	// Idle are the idle groups of the snapshot (before Validate) with what
	// the Actor's scale-down needs, by group; nil while the scaling
	// policies are not synced (the idle groups are unknown), else a map.
	Idle map[plan.GroupKey]*policies.IdleView
}

// From turns the state s into a snapshot for the planning core, in these
// steps (each a function below):
//
//  1. snapshotNodes: nodes with their nvidia/gpu instances; GPUs of nodes
//     that are not ready, ineligible or draining are passed as unhealthy
//     (never free);
//  2. liveByGroup: live allocations per job and task group (L2);
//  3. jobView: each job of a governed namespace, with its pool, meta
//     options (or meta error, also when its gputide_pool is not an
//     existing pool listed in AdmitPools, or, for a job not stopped, its
//     gputide_reservation is not an unended booking of its namespace),
//     live count and whether it was registered straight into a real pool;
//  4. pendingGroups: the pending groups of a job (pendingCount decides how
//     many allocations). Jobs with a bad meta value, stopped jobs, system
//     jobs, periodic and parameterized parents are not pending; jobs that
//     ask for no GPU and wait in the holding pool are listed in NoGPU. Each
//     pending group carries its job's Flavors (jobmeta.JobFlavors: a bad
//     gputide_flavors is a meta error); a job whose GPUs can only be
//     ungoverned devices is not pending and, in the holding pool, listed in
//     Ungoverned with a warning; GPUs of no flavor are listed in
//     UngovernedGPUs;
//  5. snapshotAllocations: live allocations that hold GPUs, with the job's
//     priority and gputide meta, read once per job (allocations.go);
//     stopping ones carry their claimant (StoppingFor), or, 5b, the
//     booking they stop for (StoppingForReservation), else
//     UnknownClaimant. The live allocations of a job registered straight
//     into a pool are left out (L3 decides on it as pending); 5a, in the
//     same pass: kill_timeout, max_run and admitted_at (AdmittedAt). A
//     Memo keeps the result while its inputs are the same;
//     5c and 5d recordedPending: a pending group's place in the order
//     (the record's FirstSeen) and queue time (QueuedAt);
//  6. idleGroups: groups with a gputide-idle scaling policy become the
//     snapshot's idle groups (issue 11 item 4);
//  7. prewarms: groups with a gputide-schedule scaling policy whose next
//     boundary within drain_horizon raises their count become the
//     snapshot's pre-warm entries (DESIGN L5 "Pre-warm", issue 11 item 5);
//  8. usable: the snapshot is checked (plan.Snapshot.Usable): each node,
//     allocation or pending job that breaks a rule is left out and listed
//     in Left; a fault in the tree or the settings is Invalid.
func From(s *watch.State, in Input) *Build {
	var b *Build
	s.Read(func(v watch.View) { b = build(v, in) })
	return b
}

func build(s watch.View, in Input) *Build {
	holding := in.HoldingPool
	if holding == "" {
		holding = DefaultHoldingPool
	}
	governed := governedOnce(quota.Namespaces(in.Quota), in.Governed)
	owner, epoch := in.Memo.begin(contextOf(s, in))
	defer in.Memo.end()
	snap := &plan.Snapshot{Time: in.Now, Quota: in.Quota, Settings: in.Settings}
	b := &Build{Snapshot: snap, Jobs: make(map[plan.JobKey]*JobView, len(s.Jobs))}

	snap.Nodes, b.UngovernedGPUs = in.Memo.nodesOf(s, in.Quota)
	live, held := in.Memo.allocsOf(s)
	bookings := jobmeta.IndexBookings(in.Reservations)
	keys := make([]jobAllocKey, len(held.jobs)) // step 5's, by job of held
	for k, j := range s.Jobs {                  // in no order: the lists made here are sorted below
		e := in.Memo.of(j, holding, in.Quota)
		if !governed(e.read.namespace) {
			continue
		}
		var rec JobRecord
		if in.Record != nil {
			if rec = in.Record(k); !rec.Recorded {
				b.Unrecorded = append(b.Unrecorded, k)
			}
		}
		key := viewKey{epoch: epoch, live: liveCount(e, live, s.Gen.Allocs, k, owner), rec: rec, accepted: accepted(in, k, rec)}
		_, queued := s.Queued[k]
		v := keptView(e, key, owner, queued)
		if v == nil {
			v = makeView(k, j, e.read, key, holding, in, s, bookings)
			pending, noGPU := pendingGroups(v, live, s)
			if noGPU {
				b.NoGPU = append(b.NoGPU, k)
			}
			if v.ungovernedOnly() && v.Holding && v.MetaErr == nil && !v.stopped() {
				b.Ungoverned = append(b.Ungoverned, k)
				b.Warnings = append(b.Warnings, ungovernedWarning(v))
			}
			snap.Pending = append(snap.Pending, pending...)
			keepView(e, v, key, owner)
		}
		b.Jobs[k] = v
		if hj := heldIndex(e, held, k, owner); hj >= 0 {
			keys[hj] = allocKeyOf(v)
		}
	}
	sortByJob(b, snap)
	var unclaimed []string
	snap.Allocations, unclaimed = in.Memo.allocationsOf(held, b.Jobs, keys,
		allocInputs{stopping: in.Stopping, forRes: in.StoppingForReservation})
	for _, id := range unclaimed {
		if i, ok := held.index(id); ok && governed(held.allocs[i].Namespace) {
			b.UnknownStopping = append(b.UnknownStopping, id)
		}
	}
	recordedPending(snap.Pending, b.Jobs)
	snap.Reservations, snap.Holds, snap.Evictions = in.Reservations, in.Holds, in.Evictions
	snap.IdleGroups, b.Idle = idleGroups(in.Policies, b.Jobs, s.Allocs)
	if in.UnplacedSince != nil {
		for k, iv := range b.Idle {
			iv.UnplacedSince = in.UnplacedSince(k)
		}
	}
	snap.Prewarm = prewarms(in.Policies, b.Jobs, in.Now, in.Settings)
	check, release := in.Memo.nodeCheck()
	defer release()
	b.Snapshot, b.Left, b.Invalid = usable(snap, check)
	return b
}

// makeView is step 3 for governed job j (key k, spec read spec, made of
// key): its view with its meta error, if any (its meta, its
// gputide_pool against the admit pools and Nomad's, its
// gputide_reservation against the bookings, its gputide_flavors), its
// record and stop status.
func makeView(k plan.JobKey, j *api.Job, spec *specRead, key viewKey, holding string, in Input, s watch.View,
	bookings jobmeta.Bookings) *JobView {
	v := jobView(k, j, spec, key.live, holding, key.accepted)
	v.rec, v.Stopped = key.rec, key.rec.Stopped
	if v.MetaErr == nil {
		v.MetaErr = jobmeta.CheckAdmitPool(v.Options.Pool, in.AdmitPools, s.Pools)
	}
	if v.MetaErr == nil && !v.stopped() {
		v.MetaErr = jobmeta.CheckReservation(v.Options.Reservation, k.Namespace, bookings, in.Now)
	}
	if v.MetaErr == nil {
		// A stopped job's gputide_flavors is not checked (as its
		// reservation is not): its status is the stop's.
		if v.Flavors = spec.flavors; !v.stopped() {
			v.MetaErr = spec.flavorsErr
		}
	}
	return v
}

// sortByJob puts the lists of step 4, made in no order, in the order of
// their jobs (plan.JobKey.Compare): the pending groups (a job's own in its
// task groups' order), Unrecorded, NoGPU, and Ungoverned with its
// warnings. Reading
// the jobs in order instead would cost a build a lookup and a sorted list
// of 10,000 keys for the few jobs these lists hold.
func sortByJob(b *Build, snap *plan.Snapshot) {
	slices.SortStableFunc(snap.Pending, func(p, q plan.Pending) int { return p.JobKey().Compare(q.JobKey()) })
	slices.SortFunc(b.NoGPU, plan.JobKey.Compare)
	slices.SortFunc(b.Unrecorded, plan.JobKey.Compare)
	if len(b.Ungoverned) > 1 {
		slices.SortFunc(b.Ungoverned, plan.JobKey.Compare)
		b.Warnings = b.Warnings[:0]
		for _, k := range b.Ungoverned {
			b.Warnings = append(b.Warnings, ungovernedWarning(b.Jobs[k]))
		}
	}
}

// governedOnce says whether a namespace is governed: bound in the tree
// (bound) and, when given, governed by the caller's rule, asked once per
// namespace and build (the agent's rule reads its tree under a lock, and
// a build asks for every job and allocation: 30,000 times at 5,000 nodes).
func governedOnce(bound map[string]string, rule func(string) bool) func(string) bool {
	seen := map[string]bool{}
	return func(ns string) bool {
		if g, ok := seen[ns]; ok {
			return g
		}
		_, g := bound[ns]
		g = g && (rule == nil || rule(ns))
		seen[ns] = g
		return g
	}
}

// snapshotNodes is step 1: the nodes that have GPUs, by ID.
func snapshotNodes(nodes map[string]*watch.Node) []plan.Node {
	var out []plan.Node
	for _, id := range slices.Sorted(maps.Keys(nodes)) {
		n := nodes[id]
		if len(n.GPUs) == 0 {
			continue
		}
		pn := plan.Node{ID: n.ID, Datacenter: n.Datacenter, NodePool: n.NodePool, GPUs: make([]plan.GPU, len(n.GPUs))}
		for i, g := range n.GPUs {
			g.Healthy = g.Healthy && n.Schedulable
			pn.GPUs[i] = g
		}
		out = append(out, pn)
	}
	return out
}

// liveCounts are the live allocations of each task group and each job.
type liveCounts struct {
	groups map[plan.GroupKey]int
	jobs   map[plan.JobKey]int
}

// group is the live allocations of task group g of job k.
func (l liveCounts) group(k plan.JobKey, g string) int {
	return l.groups[plan.GroupKey{Namespace: k.Namespace, Job: k.Job, Group: g}]
}

// liveByGroup is step 2: live allocations by job and task group, in two
// flat maps (not a map per job: 10,000 jobs made 10,000 small maps every
// build).
func liveByGroup(allocs map[string]*watch.Alloc) liveCounts {
	live := liveCounts{groups: make(map[plan.GroupKey]int, len(allocs)), jobs: make(map[plan.JobKey]int, len(allocs))}
	for _, a := range allocs {
		if !a.Live() {
			continue
		}
		live.groups[plan.GroupKey{Namespace: a.Namespace, Job: a.JobID, Group: a.Group}]++
		live.jobs[a.JobKey()]++
	}
	return live
}

// accepted says whether job k, with record rec, was admitted by the
// broker (Input.Accepted).
func accepted(in Input, k plan.JobKey, rec JobRecord) bool {
	switch {
	case in.Accepted != nil:
		return in.Accepted(k)
	case in.Record != nil:
		return !rec.AdmittedAt.IsZero()
	}
	return true
}

// jobView is step 3: the broker's view of governed job j (key k) with its
// live allocations (live). A job outside the holding pool that accepted
// does not know is Direct (registered straight into its pool).
func jobView(k plan.JobKey, j *api.Job, spec *specRead, live int, holding string, accepted bool) *JobView {
	v := &JobView{Key: k, Job: j, Pool: spec.pool, Live: live, spec: spec}
	if v.Pool == "" {
		v.Pool = "default"
	}
	v.Holding = v.Pool == holding
	v.Options, v.MetaErr, v.GPUGroups = spec.options, spec.metaErr, spec.gpuGroups
	v.Direct = !v.Holding && !accepted
	return v
}

// stopped reports whether the job is stopped (job stop, as the L10.end and
// L11.max_run stops leave it), or dead with no live allocation: it is not
// pending, and its gputide_reservation is not checked (its booking may
// have ended and gone to history, as it should).
func (v *JobView) stopped() bool {
	if v.spec != nil {
		return v.spec.stop || v.spec.status == "dead" && v.Live == 0
	}
	j := v.Job
	return (j.Stop != nil && *j.Stop) || str(j.Status) == "dead" && v.Live == 0
}

// pendingGroups is step 4: the pending groups of job view v (its live
// allocations per group, its summary in s), adding their count to
// v.Pending. noGPU reports a job that waits in the holding pool and asks
// for no GPU. The summary of a job placed in its pool is read only when
// s.Queued lists it: its pending allocations are its queued ones.
func pendingGroups(v *JobView, live liveCounts, s watch.View) (pending []plan.Pending, noGPU bool) {
	j := v.Job
	if v.MetaErr != nil || v.stopped() {
		return nil, false
	}
	if v.GPUGroups == 0 {
		return nil, v.Holding
	}
	if v.ungovernedOnly() {
		return nil, false // Build.Ungoverned
	}
	typ := v.spec.typ
	if typ != plan.JobService && typ != plan.JobBatch {
		return nil, false
	}
	if v.spec.parent {
		return nil, false
	}
	place := placeAdmitted
	switch {
	case v.Direct:
		place = placeDirect
	case v.Holding:
		place = placeHolding
	}
	if _, queued := s.Queued[v.Key]; place == placeAdmitted && !queued {
		return nil, false
	}
	sum := s.Summaries[v.Key]
	ns := v.spec.namespace
	for _, g := range v.spec.groups {
		gpus, model, group, want := g.gpus, g.model, g.name, g.count
		if gpus == 0 {
			continue
		}
		queued, hasSum := queuedOf(sum, group)
		if place == placeAdmitted && queued <= 0 {
			continue // pendingCount is at most queued: nothing to look up (most jobs, every build)
		}
		count := pendingCount(place, want, live.group(v.Key, group), queued, hasSum)
		if count <= 0 {
			continue
		}
		v.Pending += count
		pending = append(pending, plan.Pending{Namespace: ns, Job: v.spec.id, Group: group, Type: typ, Priority: v.spec.priority,
			Count: count, GPUs: gpus, Model: model, Datacenters: jobmeta.Datacenters(j.Datacenters), NodePool: v.Options.Pool,
			Idle: v.Options.Idle, Elastic: v.Options.Elastic, Reservation: v.Options.Reservation,
			SubmittedAt: jobmeta.Submitted(j), Flex: v.Options.Flex, Flavors: slices.Clone(v.Flavors)})
	}
	return pending, false
}

// ungovernedOnly reports whether the job asks for GPUs that can only be
// ungoverned devices (jobmeta.JobFlavors gave an empty, non-nil list).
func (v *JobView) ungovernedOnly() bool { return v.Flavors != nil && len(v.Flavors) == 0 }

// ungovernedWarning is the warning of a job that moves to its pool
// uncounted because its device requests can use only ungoverned devices.
func ungovernedWarning(v *JobView) plan.Warning {
	return plan.Warning{Kind: plan.WarnGeneral, Namespace: v.Key.Namespace, Job: v.Key.Job,
		Message: fmt.Sprintf("job %s asks only for GPUs of no flavor (ungoverned devices, DESIGN L13): "+
			"it is admitted to node pool %q uncounted by the quota", v.Key, v.Options.Pool)}
}

// jobPlace is where a governed job is, for pendingCount.
type jobPlace int

const (
	placeHolding  jobPlace = iota // in the holding pool, waiting for admission
	placeAdmitted                 // in a real pool, admitted by the broker (or there when it started)
	placeDirect                   // in a real pool, registered straight into it: not yet checked (L3)
)

// pendingCount is how many allocations of a task group are passed to the
// core as pending (DESIGN §5), from the group's count (want), its live
// allocations, and the allocations Nomad has queued for it in the job
// summary (queued; hasSummary false when the summary lacks the group):
//
//   - holding pool: want - live, at most queued when there is a summary
//     (Nomad queues nothing for a group it has not evaluated yet);
//   - admitted: the queued allocations Nomad could not place (a service
//     scaled up, a victim's replacement), at most want - live;
//   - direct: every allocation, live or queued (L3 decides on the whole
//     group), at most want; want itself when there is no summary yet.
//
// A result of zero or less means the group is not pending.
func pendingCount(place jobPlace, want, live, queued int, hasSummary bool) int {
	switch place {
	case placeDirect:
		if !hasSummary {
			return want
		}
		return min(want, live+queued)
	case placeHolding:
		if !hasSummary {
			return want - live
		}
		return min(want-live, queued)
	default:
		return min(queued, want-live)
	}
}

// usable checks snap (plan.Snapshot.UsableWith, with the node check a
// Memo keeps, or nil): it returns snap without the items that fail, their
// faults, or snap and the fatal fault.
func usable(snap *plan.Snapshot, nodes *plan.NodeCheck) (*plan.Snapshot, []*plan.Fault, error) {
	ok, left, err := snap.UsableWith(nodes)
	if err != nil {
		return snap, nil, err
	}
	return ok, left, nil
}

func queuedOf(sum *api.JobSummary, group string) (int, bool) {
	if sum == nil || sum.Summary == nil {
		return 0, false
	}
	tg, ok := sum.Summary[group]
	if !ok {
		return 0, false
	}
	return tg.Queued, true
}

func nsOrDefault(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
