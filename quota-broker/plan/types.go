package plan

import (
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
	// StoppingFor is the claimant ("namespace/job/group") the broker already
	// stopped this allocation for, or "" (DESIGN L6).
	StoppingFor string
	StartedAt   time.Time
}

// GPUs is the number of GPUs the allocation holds (L2).
func (a *Allocation) GPUs() int { return len(a.GPUIDs) }

// JobKey returns "namespace/job".
func (a *Allocation) JobKey() string { return a.Namespace + "/" + a.Job }

// Flex holds the flex-start settings of a pending group (DESIGN L11).
type Flex struct {
	MaxWait time.Duration // at most MaxFlexWait
	MaxRun  time.Duration // 0 = unbounded
}

// MaxFlexWait is the largest (and default) flex max_wait (DESIGN L11: 168h).
const MaxFlexWait = 168 * time.Hour

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

// Key returns "namespace/job/group", the claimant name used in StoppingFor.
func (p *Pending) Key() string { return p.Namespace + "/" + p.Job + "/" + p.Group }

// JobKey returns "namespace/job".
func (p *Pending) JobKey() string { return p.Namespace + "/" + p.Job }

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
	// For is the claimant ("namespace/job/group") a stop is for.
	For string `json:"for,omitempty"`
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
}
