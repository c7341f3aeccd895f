package plan

import (
	"cmp"
	"fmt"
	"strconv"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// JobType is a Nomad job type.
type JobType string

// The Nomad job types. Only service and batch allocations are ever victims
// (DESIGN L5).
const (
	JobService  JobType = "service"
	JobBatch    JobType = "batch"
	JobSystem   JobType = "system"
	JobSysbatch JobType = "sysbatch"
)

// Valid reports whether t is one of the four Nomad job types.
func (t JobType) Valid() bool {
	switch t {
	case JobService, JobBatch, JobSystem, JobSysbatch:
		return true
	}
	return false
}

// JobKey names a Nomad job: its namespace and job ID. It is a value, never
// a joined string: the IDs of Nomad's periodic and dispatched child jobs
// ("batch/periodic-1700000000", "render/dispatch-1700000000-3f2a") contain
// "/", so "namespace/job" cannot be split back.
type JobKey struct {
	Namespace string `json:"namespace"`
	Job       string `json:"job"`
}

// String renders the key as "namespace/job" for messages and logs only;
// it is not parsed back.
func (k JobKey) String() string { return k.Namespace + "/" + k.Job }

// Compare orders keys by namespace, then job ID (DESIGN L3's last tie
// break); it returns -1, 0 or +1 as cmp.Compare does.
func (k JobKey) Compare(o JobKey) int {
	return cmp.Or(cmp.Compare(k.Namespace, o.Namespace), cmp.Compare(k.Job, o.Job))
}

// GroupKey names a task group of a Nomad job: the claimant of a stop
// (DESIGN L6). Group names, like job IDs, may contain "/". In JSON it is
// the object {"namespace": ..., "job": ..., "group": ...}.
type GroupKey struct {
	Namespace string `json:"namespace"`
	Job       string `json:"job"`
	Group     string `json:"group"`
}

// JobKey returns the key of the group's job.
func (k GroupKey) JobKey() JobKey { return JobKey{Namespace: k.Namespace, Job: k.Job} }

// IsZero reports whether k is the zero key (no claimant).
func (k GroupKey) IsZero() bool { return k == GroupKey{} }

// String renders the key as "namespace/job/group" for messages and logs
// only; it is not parsed back.
func (k GroupKey) String() string { return k.Namespace + "/" + k.Job + "/" + k.Group }

// Compare orders keys by namespace, job ID, then group name.
func (k GroupKey) Compare(o GroupKey) int {
	return cmp.Or(k.JobKey().Compare(o.JobKey()), cmp.Compare(k.Group, o.Group))
}

// GPU is one GPU device instance of a node.
type GPU struct {
	ID      string // device instance ID (UUID), unique in the cluster
	Model   string // e.g. "NVIDIA H100 80GB HBM3"
	Healthy bool   // unhealthy GPUs are never free
}

// Node is a Nomad client node with its GPUs.
type Node struct {
	ID         string
	Datacenter string
	NodePool   string
	GPUs       []GPU
}

// Allocation is a live (non-terminal) allocation that holds GPUs (DESIGN L2:
// it counts from placement until it is terminal).
type Allocation struct {
	ID        string
	Namespace string
	Job       string
	Group     string
	Type      JobType
	Priority  int // job priority, 1-100
	Node      string
	GPUIDs    []string // the GPU device instances assigned to it (L2)
	// Idle marks a job that opted into borrowing (meta gputide_idle).
	Idle bool
	// Elastic marks a batch job whose allocations are preempted one by one
	// (meta gputide_elastic).
	Elastic bool
	// Reservation is the reservation ID the job names, if any.
	Reservation string
	// StoppingFor is the claimant the broker already stopped this
	// allocation for, or the zero GroupKey (DESIGN L6).
	StoppingFor GroupKey
	StartedAt   time.Time
}

// GPUs is the number of GPUs the allocation holds (L2).
func (a *Allocation) GPUs() int { return len(a.GPUIDs) }

// JobKey returns the key of the allocation's job.
func (a *Allocation) JobKey() JobKey { return JobKey{Namespace: a.Namespace, Job: a.Job} }

// GroupKey returns the key of the allocation's task group.
func (a *Allocation) GroupKey() GroupKey {
	return GroupKey{Namespace: a.Namespace, Job: a.Job, Group: a.Group}
}

// Flex holds the flex-start settings of a pending group (DESIGN L11).
// Check holds their rule; a snapshot whose flex settings fail it does not
// pass Validate, and the planner trusts them.
type Flex struct {
	MaxWait time.Duration // 0 < MaxWait <= MaxFlexWait; DefaultFlexWait when the job sets none
	MaxRun  time.Duration // 0 < MaxRun <= MaxFlexRun; required
}

// The flex limits (DESIGN L11): max_wait defaults to and may not exceed
// 168h; max_run is required, more than 0 and at most 168h.
const (
	MaxFlexWait     = 168 * time.Hour
	DefaultFlexWait = MaxFlexWait
	MaxFlexRun      = 168 * time.Hour
)

// FlexError is a flex setting that breaks DESIGN L11. Key is "max_wait"
// or "max_run"; Problem says what is wrong with Value, without it (see
// Message).
type FlexError struct {
	Key     string
	Value   time.Duration
	Missing bool // the key is required and not given
	Problem string
}

func (e *FlexError) Error() string { return e.Key + ": " + e.Message(strconv.Quote(e.Value.String())) }

// Message is the problem with the value written as value (a reader quotes
// the text it read, such as "11520m").
func (e *FlexError) Message(value string) string {
	if e.Missing {
		return e.Problem
	}
	return value + " " + e.Problem
}

// Check returns a *FlexError when f breaks DESIGN L11, else nil. The
// readers of flex settings (the snapshot decoder, the Nomad adapter's job
// meta) fill MaxWait with DefaultFlexWait when the job gives none.
func (f *Flex) Check() error {
	switch {
	case f.MaxWait <= 0:
		return &FlexError{Key: "max_wait", Value: f.MaxWait, Problem: "must be more than 0 (leave max_wait out for the default 168h)"}
	case f.MaxWait > MaxFlexWait:
		return &FlexError{Key: "max_wait", Value: f.MaxWait, Problem: "is above the maximum of 168h"}
	case f.MaxRun == 0:
		return &FlexError{Key: "max_run", Missing: true, Problem: "missing or 0: a flex request needs max_run, more than 0 and at most 168h"}
	case f.MaxRun < 0:
		return &FlexError{Key: "max_run", Value: f.MaxRun, Problem: "must be more than 0"}
	case f.MaxRun > MaxFlexRun:
		return &FlexError{Key: "max_run", Value: f.MaxRun, Problem: "is above the maximum of 168h"}
	}
	return nil
}

// String renders the settings for messages and comparison: "flex
// {max_wait 24h0m0s, max_run 4h0m0s}", or "no flex" for nil.
func (f *Flex) String() string {
	if f == nil {
		return "no flex"
	}
	return fmt.Sprintf("flex {max_wait %s, max_run %s}", f.MaxWait, f.MaxRun)
}

// Pending is a task group with allocations still to place.
type Pending struct {
	Namespace   string
	Job         string
	Group       string
	Type        JobType
	Priority    int
	Count       int    // allocations still to place
	GPUs        int    // GPUs per allocation
	Model       string // "" = any model
	Datacenters []string
	NodePool    string // "" = default
	Idle        bool
	Elastic     bool
	Reservation string
	SubmittedAt time.Time
	Flex        *Flex // nil = not a flex request
}

// Key returns the key of the group, the claimant named in StoppingFor and
// in a stop's For.
func (p *Pending) Key() GroupKey { return GroupKey{Namespace: p.Namespace, Job: p.Job, Group: p.Group} }

// JobKey returns the key of the group's job.
func (p *Pending) JobKey() JobKey { return JobKey{Namespace: p.Namespace, Job: p.Job} }

// Reservation is a calendar booking of GPUs for a workspace (DESIGN L10).
type Reservation struct {
	ID        string
	Namespace string
	Quota     string
	GPUs      int
	Start     time.Time
	End       time.Time // exclusive
}

// Active reports whether t is inside the reservation's window.
func (r *Reservation) Active(t time.Time) bool {
	return !t.Before(r.Start) && t.Before(r.End)
}

// Snapshot is everything the planner sees: the state of the cluster and the
// quota tree at one instant. The planner never changes it.
type Snapshot struct {
	Time         time.Time
	Quota        *quota.Node
	Settings     quota.Settings
	Nodes        []Node
	Allocations  []Allocation
	Pending      []Pending
	Reservations []Reservation
	// IdleGroups are the groups with a gputide-idle scaling policy, whose
	// idle fit the plan reports (IdleGroup, Plan.IdleFit).
	IdleGroups []IdleGroup
}

// ActionKind is what an action does.
type ActionKind string

// The action kinds of a plan.
const (
	ActionStop   ActionKind = "stop"
	ActionAdmit  ActionKind = "admit"
	ActionWait   ActionKind = "wait"
	ActionExpire ActionKind = "expire"
)

// Rule names the law that justifies an action (DESIGN §3).
type Rule string

// The rules an action can carry.
const (
	RuleAdmission Rule = "L3"   // entitled admission, or wait for entitlement/room
	RuleIdle      Rule = "L4"   // idle job placed on free GPUs
	RuleIdleDebt  Rule = "L5.1" // victim: idle allocation, or debt past its grace
	RuleChild     Rule = "L5.2" // victim under child-level preemption
	RulePriority  Rule = "L5.3" // victim under priority preemption
	RuleFlex      Rule = "L11"  // flex request waits whole, or expires
)

// Action is one step of a plan.
type Action struct {
	Action    ActionKind `json:"action"`
	Alloc     string     `json:"alloc,omitempty"`
	Namespace string     `json:"namespace"`
	Job       string     `json:"job"`
	Group     string     `json:"group,omitempty"`
	Node      string     `json:"node,omitempty"`
	// Nodes lists, for admit, the node of each admitted allocation (one
	// entry per allocation, so a node may repeat).
	Nodes []string `json:"nodes,omitempty"`
	Count int      `json:"count,omitempty"` // allocations admitted or waiting
	GPUs  int      `json:"gpus,omitempty"`  // GPUs stopped (stop) or per allocation (admit, wait)
	Rule  Rule     `json:"rule"`
	// For is the claimant a stop is for (zero for other actions); in JSON
	// an object {"namespace", "job", "group"}.
	For GroupKey `json:"for,omitzero"`
	// Quota is, for a wait by entitlement (L3), the quota node whose
	// nominal bound it: the job's own node or the ancestor that is full.
	// Empty for other waits (no room on the nodes, idle jobs, flex).
	Quota  string `json:"quota,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Usage is a quota node's accounting after the plan (DESIGN L4, L9). All
// figures are GPUs over the node's subtree, except Debt, which is the node's
// own (its namespaces').
type Usage struct {
	Quota    string `json:"quota"`
	Nominal  int    `json:"nominal"`
	Used     int    `json:"used"`
	NonIdle  int    `json:"nonidle"`
	Borrowed int    `json:"borrowed"`
	Debt     int    `json:"debt"`
	Lendable int    `json:"lendable"`
}

// Plan is the planner's output.
type Plan struct {
	Actions  []Action `json:"actions"`
	Usage    []Usage  `json:"usage"`
	Warnings []string `json:"warnings,omitempty"`
	// IdleFit is the idle fit of each of the snapshot's idle groups after
	// the plan's actions, sorted by group key (see IdleGroup, idleFit).
	IdleFit []GroupFit `json:"idle_fit,omitempty"`
}
