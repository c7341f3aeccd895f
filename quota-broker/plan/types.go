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
func (k GroupKey) IsZero() bool { return k.Namespace == "" && k.Job == "" && k.Group == "" }

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
	Model   string // e.g. "NVIDIA H100 80GB HBM3"; a MIG instance's GPU's model
	Healthy bool   // unhealthy GPUs are never free

	// MIGProfile is a MIG instance's profile, e.g. "1g.5gb", Model being
	// then its GPU's model (the device group's name less " MIG <profile>");
	// "" for a whole GPU (DESIGN L13).
	MIGProfile string
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
	// StoppingForReservation is the reservation the broker already stopped
	// this allocation for (a drain, rule L10.drain), or ""; at most one of
	// StoppingFor and StoppingForReservation is set. In JSON both are
	// stopping_for: {"reservation": ID} for this one.
	StoppingForReservation string
	StartedAt              time.Time
	// KillTimeout is the job's kill_timeout (DESIGN L8): the time a stop
	// takes at most. Timed stops (L10.end, L11.max_run) and drains
	// (L10.drain) come that long before their instant. The snapshot format
	// defaults it to DefaultKillTimeout.
	KillTimeout time.Duration
	// MaxRun is the flex max_run of the allocation's job (DESIGN L11), 0
	// for a job that is not a flex request.
	MaxRun time.Duration
	// AdmittedAt is when the broker admitted the job (from the store;
	// L11 max_run and settle count from it). Zero: unknown, no timed rule
	// applies.
	AdmittedAt time.Time
}

// DefaultKillTimeout is Nomad's default kill_timeout, used when a snapshot
// gives none.
const DefaultKillTimeout = 5 * time.Second

// Flex reports whether the allocation belongs to a flex request (L11).
func (a *Allocation) Flex() bool { return a.MaxRun > 0 }

// GPUs is the number of GPUs the allocation holds (L2).
func (a *Allocation) GPUs() int { return len(a.GPUIDs) }

// JobKey returns the key of the allocation's job.
func (a *Allocation) JobKey() JobKey { return JobKey{Namespace: a.Namespace, Job: a.Job} }

// stoppingOwner returns whom the allocation is already being stopped for,
// or the zero owner.
func (a *Allocation) stoppingOwner() HoldOwner {
	return HoldOwner{Reservation: a.StoppingForReservation, Group: a.StoppingFor}
}

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
	// Flavors are the flavors the group may use, in the order it tries
	// them (DESIGN L13: meta gputide_flavors, else tree order; the Nomad
	// adapter writes the list its device request allows). Nil: every
	// flavor of the tree, in tree order. All GPU groups of one job take
	// one flavor, chosen on the job's total; a job takes the flavors its
	// groups all allow, in its first group's order.
	Flavors []string
	// SubmittedAt is the first time the broker saw the job (first_seen in
	// the store; its place in the order of L3).
	SubmittedAt time.Time
	// QueuedAt is when the job was last queued: SubmittedAt, or the last
	// time the broker suspended it again (rule L11.settle). A flex
	// request's max_wait counts from it (L11.expire). Zero means
	// SubmittedAt.
	QueuedAt time.Time
	Flex     *Flex // nil = not a flex request
}

// Queued returns QueuedAt, or SubmittedAt when QueuedAt is zero.
func (p *Pending) Queued() time.Time {
	if p.QueuedAt.IsZero() {
		return p.SubmittedAt
	}
	return p.QueuedAt
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
	// AllocGPUs is the GPUs per allocation of the booking's shape; it
	// divides GPUs. 0 means the default: the largest divisor of GPUs up
	// to 8 (see Shape).
	AllocGPUs int
	Model     string // "" = any model
	NodePool  string // "" = default
	// Flavor is the flavor the booking is of (DESIGN L13): required in a
	// tree that declares flavors, "" = the tree's only flavor otherwise.
	Flavor string
	Start  time.Time
	End    time.Time // exclusive
}

// Shape returns the booking's GPUs per allocation and the number of
// allocations (DESIGN L10): AllocGPUs, or the largest divisor of GPUs up
// to 8 when it is 0.
func (r *Reservation) Shape() (allocGPUs, count int) {
	allocGPUs = r.AllocGPUs
	if allocGPUs <= 0 {
		allocGPUs = 1
		for d := min(r.GPUs, 8); d > 1; d-- {
			if r.GPUs%d == 0 {
				allocGPUs = d
				break
			}
		}
	}
	if r.GPUs <= 0 {
		return allocGPUs, 0
	}
	return allocGPUs, r.GPUs / allocGPUs
}

// HoldOwner is whom a hold keeps GPUs for (DESIGN L10, L5 pre-warm): a
// reservation (Reservation set) or a claimant task group (Group set),
// never both. In JSON {"reservation": ID} or {"namespace", "job",
// "group"}.
type HoldOwner struct {
	Reservation string
	Group       GroupKey
}

// IsZero reports whether o names no owner.
func (o HoldOwner) IsZero() bool { return o.Reservation == "" && o.Group.IsZero() }

// String renders the owner for messages: "reservation r-1" or
// "namespace/job/group".
func (o HoldOwner) String() string {
	if o.Reservation != "" {
		return "reservation " + o.Reservation
	}
	return o.Group.String()
}

// Hold is a set of GPUs of one node kept free for an owner until an
// instant (DESIGN L10: for a reservation, start + settle). Held GPUs are
// free to their owner only and never lendable while the hold lasts.
type Hold struct {
	For    HoldOwner
	Node   string
	GPUIDs []string
	Until  time.Time
}

// End returns when hold h is over, given r, the reservation it names (nil
// for a claimant's hold, or a reservation the snapshot does not list): its
// Until, or, for a reservation's hold, the reservation's end when that is
// later, since from Until to the end the hold lends the booking's GPUs to
// idle jobs and the booking's own jobs only (DESIGN L10; indexHolds).
func (h Hold) End(r *Reservation) time.Time {
	if r != nil && r.End.After(h.Until) {
		return r.End
	}
	return h.Until
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
	// Holds are the holds the broker keeps (from the store, holds/<owner>).
	Holds []Hold
	// IdleGroups are the groups with a gputide-idle scaling policy, whose
	// idle fit the plan reports (IdleGroup, Plan.IdleFit).
	IdleGroups []IdleGroup
	// Prewarm are the scheduled scale-ups within drain_horizon that the
	// core places ahead of time (DESIGN L5 "Pre-warm", Prewarm).
	Prewarm []Prewarm
	// Evictions are the GPUs stopped as victims by the broker's recent
	// plans, by the victim's quota node (DESIGN L14), within the largest
	// MaxEvict.Per of the tree: what eviction budgets count. The broker
	// keeps them in the store's history.
	Evictions []Eviction
}

// Eviction is one stop of victim allocations (DESIGN L14, snapshot
// `evictions`): GPUs devices of quota node Quota's namespaces stopped at
// Time under a rule a budget counts.
type Eviction struct {
	Quota string
	GPUs  int
	Time  time.Time
}

// ActionKind is what an action does.
type ActionKind string

// The action kinds of a plan.
const (
	ActionStop   ActionKind = "stop"
	ActionAdmit  ActionKind = "admit"
	ActionWait   ActionKind = "wait"
	ActionExpire ActionKind = "expire"
	// ActionStopJob stops a whole job (Nomad job stop, no purge): rules
	// L10.end and L11.max_run. Group and Alloc are empty.
	ActionStopJob ActionKind = "stop_job"
	// ActionSuspend suspends a whole admitted job and queues it again (its
	// queued time becomes the plan's time): rule L11.settle. Group and
	// Alloc are empty.
	ActionSuspend ActionKind = "suspend"
	// ActionHold keeps the GPUs named in GPUIDs on Node free for For
	// until Until (DESIGN L10): the adapter writes the hold to the store.
	ActionHold ActionKind = "hold"
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
	RuleFlex      Rule = "L11"  // flex request waits whole
	// RuleFlexExpire: a flex request waited past max_wait from its queued
	// time and is stopped as expired (DESIGN L11).
	RuleFlexExpire Rule = "L11.expire"
	// RuleFlexSettle: an admitted flex request has fewer live allocations
	// than it asked for after settle; it is suspended whole and queued
	// again (L11).
	RuleFlexSettle Rule = "L11.settle"
	// RuleFlexMaxRun: an admitted flex request is stopped at admitted +
	// max_run - kill_timeout (L11); a job stop.
	RuleFlexMaxRun Rule = "L11.max_run"
	// RuleReservation: a job naming an active reservation is entitled by
	// its booking (L10); also holds of a reservation.
	RuleReservation Rule = "L10"
	// RuleDrain: a victim stopped so that a reservation's GPUs are free at
	// its start, or on its held GPUs (L10).
	RuleDrain Rule = "L10.drain"
	// RuleStart: an allocation displaced by an active reservation stopped
	// for a job of it (L10, between L5 steps 1 and 2).
	RuleStart Rule = "L10.start"
	// RuleEnd: a reservation's jobs stopped at end - kill_timeout (L10); a
	// job stop.
	RuleEnd Rule = "L10.end"
	// RulePrewarm: a victim stopped, or GPUs held, so that a scheduled
	// scale-up finds its GPUs free at its boundary (DESIGN L5 "Pre-warm").
	RulePrewarm Rule = "L5.prewarm"
	// RuleFair: an idle allocation of a borrowing node stopped for an
	// idle claimant whose side borrows less (DESIGN L14, fair give-back).
	RuleFair Rule = "L14.fair"
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
	// For is the claimant a stop is for, or the group a pre-warm hold
	// keeps GPUs for (rule L5.prewarm); zero for other actions; in JSON
	// an object {"namespace", "job", "group"}.
	For GroupKey `json:"for,omitzero"`
	// Quota is, for a wait by entitlement (L3), the quota node whose
	// nominal bound it: the job's own node or the ancestor that is full.
	// Empty for other waits (no room on the nodes, idle jobs, flex).
	Quota string `json:"quota,omitempty"`
	// Reservation is, for a hold or a stop made for a reservation (rules
	// L10.drain, L10.start), the reservation's ID (For is then zero); for
	// a stop of rule L10.end, the reservation that ends.
	Reservation string   `json:"reservation,omitempty"`
	GPUIDs      []string `json:"gpu_ids,omitempty"` // hold: the GPUs held
	// Until is, for a hold, when it ends.
	Until  time.Time `json:"until,omitzero"`
	Reason string    `json:"reason,omitempty"`
	// Flavor is the flavor of an admit, a hold, a stop (the victim's
	// devices freed), and of a wait when the job tried one flavor
	// (DESIGN L13); empty in a tree without flavor blocks.
	Flavor string `json:"flavor,omitempty"`
	// Reasons are, for a wait of a job that tried several flavors, the
	// reason of each, in the order tried (Reason then joins them).
	Reasons []FlavorReason `json:"reasons,omitempty"`
}

// FlavorReason is why a job waits in one flavor (DESIGN L13), with the
// quota node whose nominal bound it there (Action.Quota's meaning), if
// any.
type FlavorReason struct {
	Flavor string `json:"flavor"`
	Rule   Rule   `json:"rule"`
	Quota  string `json:"quota,omitempty"`
	Reason string `json:"reason"`
}

// Usage is a quota node's accounting after the plan (DESIGN L4, L9). All
// figures are GPUs over the node's subtree, except Debt, which is the node's
// own (its namespaces').
type Usage struct {
	Quota string `json:"quota"`
	// Flavor is the flavor the row counts (DESIGN L13): one row per quota
	// node and flavor; "" in a tree without flavor blocks, which the
	// snapshot format writes "gpu" (the implicit flavor).
	Flavor   string `json:"flavor,omitempty"`
	Nominal  int    `json:"nominal"`
	Used     int    `json:"used"`
	NonIdle  int    `json:"nonidle"`
	Borrowed int    `json:"borrowed"`
	Debt     int    `json:"debt"`
	Lendable int    `json:"lendable"`
	// Booked is the GPUs of active reservations in the subtree (L10).
	Booked int `json:"booked"`
	// Displaced is the GPUs of allocations displaced at this node by its
	// active reservations (L10): reported apart, never as borrowing or debt.
	Displaced int `json:"displaced"`
}

// WarningKind says what a plan's warning is about.
type WarningKind string

// The kinds of warnings.
const (
	// WarnGeneral: the tree, the snapshot or a job outside the laws
	// (L1 capacity, an ungoverned job, a GPU not on its node).
	WarnGeneral WarningKind = "general"
	// WarnUnplaceable: a reservation's or a pre-warm's allocations cannot
	// be placed before its instant (or, in its window, on held, free or
	// idle GPUs), even with preemption (L10, L5 pre-warm).
	WarnUnplaceable WarningKind = "unplaceable"
	// WarnNotEntitled: a pre-warm is not entitled now (L3) and gets no
	// drain.
	WarnNotEntitled WarningKind = "not_entitled"
	// WarnHeld: GPUs are held for a reservation or a scheduled scale-up
	// (L10, L5 pre-warm), so that other work waits for others' GPUs.
	WarnHeld WarningKind = "held"
)

// Warning is something a plan could not do as asked, or keeps from
// others, that people must hear of (the CLI, /v1/queue and
// /v1/reservation/<id> show them). Namespace names the workspace it is
// about ("" for the cluster's), so that readers see only the warnings of
// workspaces they may read (docs/api.md); Reservation, Job and Group name
// the owner when there is one, GPUs the GPUs concerned.
type Warning struct {
	Kind        WarningKind `json:"kind"`
	Namespace   string      `json:"namespace,omitempty"`
	Reservation string      `json:"reservation,omitempty"`
	Job         string      `json:"job,omitempty"`
	Group       string      `json:"group,omitempty"`
	GPUs        int         `json:"gpus,omitempty"`
	Message     string      `json:"message"`
}

// String is the warning's message.
func (w Warning) String() string { return w.Message }

// Plan is the planner's output.
type Plan struct {
	Actions []Action `json:"actions"`
	Usage   []Usage  `json:"usage"`
	// Warnings are the plan's warnings: the workspaces' (in the order
	// made), then the general ones.
	Warnings []Warning `json:"warnings,omitempty"`
	// WakeAt is the next instant after the snapshot's time at which time
	// alone changes the plan (DESIGN L12): a reservation's start or end, a
	// drain, a max_run, a max_wait, a settle time, the end of a debt
	// grace, the end of a hold. Zero: none.
	WakeAt time.Time `json:"wake_at,omitzero"`
	// IdleFit is the idle fit of each of the snapshot's idle groups after
	// the plan's actions, sorted by group key (see IdleGroup, idleFit).
	IdleFit []GroupFit `json:"idle_fit,omitempty"`
}
