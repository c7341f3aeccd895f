package nomad

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

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

// BuildInput is what Build needs besides the Nomad state.
type BuildInput struct {
	Now         time.Time
	Quota       *quota.Node
	Settings    quota.Settings
	HoldingPool string
	// Governed says which namespaces the broker governs; nil means every
	// namespace bound in the quota tree.
	Governed func(namespace string) bool
	// Stopping maps allocations the broker stopped to their claimant.
	Stopping map[string]plan.GroupKey
	// Accepted says whether a job in a real pool was admitted by the broker
	// (or was there when it started). A job in a real pool that is not
	// accepted was registered straight into it and is checked as pending.
	Accepted func(jobKey string) bool
}

// JobView is a governed job as the broker sees it.
type JobView struct {
	Key       string // "namespace/job"
	Job       *api.Job
	Options   JobOptions
	MetaErr   error // a bad gputide meta value; the job is left unadmitted
	Pool      string
	Holding   bool // in the holding pool
	Direct    bool // registered straight into a real pool, not yet checked
	Live      int  // live allocations
	GPUGroups int  // task groups that ask for nvidia/gpu devices
	Pending   int  // allocations passed to the core as pending
}

// Build is a snapshot together with the job views it was made from.
type Build struct {
	Snapshot *plan.Snapshot
	Jobs     map[string]*JobView // governed jobs by "namespace/job"
	// UnknownStopping lists live allocations in governed namespaces that
	// are being stopped for a claimant the broker cannot name.
	UnknownStopping []string
	// NoGPU lists jobs waiting in the holding pool that ask for no GPU at
	// all: the quota does not concern them, so they are admitted at once.
	NoGPU []string
	// Left lists the nodes, allocations and pending jobs that break a rule
	// of plan.Snapshot.Check, each with what is wrong: they are left out
	// of Snapshot, and so of the plan; the caller reports them.
	Left []*plan.Fault
	// Invalid is a fault in the quota tree or the settings (or the time):
	// nothing can be planned and the broker must not act (DESIGN L12).
	// Snapshot is then the unchecked snapshot.
	Invalid error
}

// Build turns the state into a snapshot for the planning core:
//
//   - nodes with their nvidia/gpu instances; GPUs of nodes that are not
//     ready, ineligible or draining are passed as unhealthy (never free);
//   - live allocations that hold GPUs (L2), with the job's priority and
//     gputide meta; stopping ones carry their claimant (StoppingFor), or
//     UnknownClaimant;
//   - pending groups of governed jobs: in the holding pool, the allocations
//     Nomad has queued (job summary) up to the group count less its live
//     allocations; in a real pool, the queued allocations of admitted jobs,
//     and every allocation of a job registered straight into the pool
//     (whose live allocations are then left out, so that L3 decides on
//     it). Jobs with a bad meta value, stopped jobs and system jobs are
//     not pending;
//   - last, the snapshot is checked (plan.Snapshot.Usable): each node,
//     allocation or pending job that breaks a rule is left out and listed
//     in Left; a fault in the tree or the settings is Invalid.
func (s *State) Build(in BuildInput) *Build {
	s.mu.RLock()
	defer s.mu.RUnlock()
	holding := in.HoldingPool
	if holding == "" {
		holding = DefaultHoldingPool
	}
	bound := quota.Namespaces(in.Quota)
	governed := func(ns string) bool {
		if _, ok := bound[ns]; !ok {
			return false
		}
		return in.Governed == nil || in.Governed(ns)
	}
	snap := &plan.Snapshot{Time: in.Now, Quota: in.Quota, Settings: in.Settings}
	b := &Build{Snapshot: snap, Jobs: map[string]*JobView{}}

	nodeIDs := make([]string, 0, len(s.nodes))
	for id, n := range s.nodes {
		if len(n.GPUs) > 0 {
			nodeIDs = append(nodeIDs, id)
		}
	}
	sort.Strings(nodeIDs)
	for _, id := range nodeIDs {
		n := s.nodes[id]
		pn := plan.Node{ID: n.ID, Datacenter: n.Datacenter, NodePool: n.NodePool, GPUs: make([]plan.GPU, len(n.GPUs))}
		for i, g := range n.GPUs {
			g.Healthy = g.Healthy && n.Schedulable
			pn.GPUs[i] = g
		}
		snap.Nodes = append(snap.Nodes, pn)
	}

	live := map[string]map[string]int{} // job key -> group -> live allocations
	for _, a := range s.allocs {
		if !a.Live() {
			continue
		}
		if live[a.JobKey()] == nil {
			live[a.JobKey()] = map[string]int{}
		}
		live[a.JobKey()][a.Group]++
	}

	keys := slices.Sorted(maps.Keys(s.jobs))
	for _, k := range keys {
		j := s.jobs[k]
		ns := nsOrDefault(str(j.Namespace))
		if !governed(ns) {
			continue
		}
		v := &JobView{Key: k, Job: j, Pool: str(j.NodePool)}
		if v.Pool == "" {
			v.Pool = "default"
		}
		v.Holding = v.Pool == holding
		v.Options, v.MetaErr = ParseJobOptions(j.Meta, holding)
		for _, n := range live[k] {
			v.Live += n
		}
		v.Direct = !v.Holding && in.Accepted != nil && !in.Accepted(k)
		b.Jobs[k] = v
		for _, tg := range j.TaskGroups {
			if gpus, _ := groupGPUs(tg); gpus > 0 {
				v.GPUGroups++
			}
		}
		if v.MetaErr != nil || (j.Stop != nil && *j.Stop) || str(j.Status) == "dead" && v.Live == 0 {
			continue
		}
		if v.GPUGroups == 0 {
			if v.Holding {
				b.NoGPU = append(b.NoGPU, k)
			}
			continue
		}
		typ := plan.JobType(str(j.Type))
		if typ != plan.JobService && typ != plan.JobBatch {
			continue
		}
		if j.IsPeriodic() || j.IsParameterized() {
			continue
		}
		sum := s.summaries[k]
		for _, tg := range j.TaskGroups {
			gpus, model := groupGPUs(tg)
			if gpus == 0 || tg.Name == nil {
				continue
			}
			group := *tg.Name
			want := 1
			if tg.Count != nil {
				want = *tg.Count
			}
			queued, hasSum := queuedOf(sum, group)
			lv := live[k][group]
			count := 0
			switch {
			case v.Direct:
				count = min(want, lv+queued)
				if !hasSum {
					count = want
				}
			case v.Holding:
				count = want - lv
				if hasSum {
					count = min(count, queued)
				}
			default:
				count = min(queued, want-lv)
			}
			if count <= 0 {
				continue
			}
			v.Pending += count
			p := plan.Pending{Namespace: ns, Job: str(j.ID), Group: group, Type: typ, Priority: prio(j),
				Count: count, GPUs: gpus, Model: model, Datacenters: datacenters(j.Datacenters), NodePool: v.Options.Pool,
				Idle: v.Options.Idle, Elastic: v.Options.Elastic, Reservation: v.Options.Reservation,
				SubmittedAt: submitted(j), Flex: v.Options.Flex}
			snap.Pending = append(snap.Pending, p)
		}
	}

	ids := slices.Sorted(maps.Keys(s.allocs))
	for _, id := range ids {
		a := s.allocs[id]
		if !a.Live() || len(a.GPUIDs) == 0 {
			continue
		}
		v := b.Jobs[a.JobKey()]
		if v != nil && v.Direct && !a.Stopping() {
			continue // decided as pending above
		}
		pa := plan.Allocation{ID: a.ID, Namespace: a.Namespace, Job: a.JobID, Group: a.Group,
			Type: plan.JobType(a.JobType), Priority: 50, Node: a.NodeID, GPUIDs: append([]string(nil), a.GPUIDs...),
			StartedAt: a.StartedAt}
		if v != nil {
			pa.Type = plan.JobType(str(v.Job.Type))
			pa.Priority = prio(v.Job)
			pa.Idle, pa.Elastic, pa.Reservation = v.Options.Idle, v.Options.Elastic, v.Options.Reservation
		}
		if !pa.Type.Valid() {
			pa.Type = plan.JobService
		}
		if c, ok := in.Stopping[a.ID]; ok {
			pa.StoppingFor = c
		} else if a.Stopping() {
			pa.StoppingFor = UnknownClaimant
			if governed(a.Namespace) {
				b.UnknownStopping = append(b.UnknownStopping, a.ID)
			}
		}
		snap.Allocations = append(snap.Allocations, pa)
	}
	b.Snapshot, b.Left, b.Invalid = usable(snap)
	return b
}

// usable checks snap (plan.Snapshot.Usable): it returns snap without the
// items that fail, their faults, or snap and the fatal fault.
func usable(snap *plan.Snapshot) (*plan.Snapshot, []*plan.Fault, error) {
	ok, left, err := snap.Usable()
	if err != nil {
		return snap, nil, err
	}
	return ok, left, nil
}

// groupGPUs returns the nvidia/gpu devices one allocation of tg asks for,
// over its tasks, and the model when a device names one ("nvidia/gpu/<model>").
// Requests named "gpu" and "nvidia/gpu" count; other vendors do not.
func groupGPUs(tg *api.TaskGroup) (int, string) {
	n, model := 0, ""
	for _, t := range tg.Tasks {
		if t == nil || t.Resources == nil {
			continue
		}
		for _, d := range t.Resources.Devices {
			if d == nil {
				continue
			}
			parts := strings.Split(d.Name, "/")
			ok := false
			switch len(parts) {
			case 1:
				ok = parts[0] == "gpu"
			case 2:
				ok = parts[0] == "nvidia" && parts[1] == "gpu"
			case 3:
				ok = parts[0] == "nvidia" && parts[1] == "gpu"
				if ok {
					model = parts[2]
				}
			}
			if !ok {
				continue
			}
			c := 1
			if d.Count != nil {
				c = int(*d.Count)
			}
			n += c
		}
	}
	return n, model
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

func prio(j *api.Job) int {
	if j.Priority == nil || *j.Priority < 1 {
		return 50
	}
	return *j.Priority
}

func datacenters(dcs []string) []string {
	var out []string
	for _, d := range dcs {
		if d == "*" {
			return nil
		}
		out = append(out, d)
	}
	return out
}

// submitted is when the job was first submitted as far as Nomad remembers:
// the broker's own meta writes keep it in gputide_submitted.
func submitted(j *api.Job) time.Time {
	if v, ok := j.Meta[MetaSubmitted]; ok {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t
		}
	}
	if j.SubmitTime != nil {
		return time.Unix(0, *j.SubmitTime).UTC()
	}
	return time.Time{}
}
