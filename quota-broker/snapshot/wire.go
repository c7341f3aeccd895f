// Package snapshot reads and writes gputide's JSON snapshot format (the
// input of `gputide plan` and of the simulator's traces) and writes plans
// as JSON. It turns the format into the planning core's types
// (plan.Snapshot) and back; docs/snapshot-format.md documents every field.
//
// Decoding is strict: unknown keys, keys given twice, wrong JSON types,
// missing required keys, bad times and durations, values out of range,
// dangling references (an allocation on an unknown node, a GPU that is not
// on its node) and duplicates (node, GPU, allocation and reservation IDs, a
// GPU held twice, a namespace bound to two quota nodes) are errors that name
// the field by its JSON path and quote the value, such as
//
//	allocations[3].gpu_ids[1]: GPU "GPU-01-0" is used twice (also by allocations[0])
//
// Decoding never panics and never returns a snapshot together with an error.
package snapshot

import (
	"encoding/json"
	"strconv"
)

// The wire types mirror the JSON document. Tags: `json` names the key;
// `snap` options (comma-separated) are read by the strict walker:
// "required" makes the key mandatory; "intern" makes equal strings of the
// key (or of its list) one string, for names that repeat over thousands of
// entries (a model, a namespace, a node ID referenced by its allocations);
// "unique=noun" refuses a list entry given twice as soon as it is read. Times are RFC 3339 strings and durations Go
// duration strings, kept as strings here so that errors can quote them.

type wireSnapshot struct {
	Time         string            `json:"time" snap:"required"`
	Flavors      []wireFlavor      `json:"flavors,omitempty"`
	Quota        *wireQuota        `json:"quota" snap:"required"`
	Settings     *wireSettings     `json:"settings,omitempty"`
	Nodes        []wireNode        `json:"nodes"`
	Allocations  []wireAllocation  `json:"allocations"`
	Pending      []wirePending     `json:"pending"`
	Reservations []wireReservation `json:"reservations"`
	Holds        []wireHold        `json:"holds,omitempty"`
	IdleGroups   []wireIdleGroup   `json:"idle_groups,omitempty"`
	Prewarm      []wirePrewarm     `json:"prewarm,omitempty"`
	// Evictions are the recent victim stops eviction budgets count
	// (DESIGN L14).
	Evictions []wireEviction `json:"evictions,omitempty"`
}

type wireQuota struct {
	Name string      `json:"name" snap:"required"`
	GPUs wireNominal `json:"gpus" snap:"required"`
	// Weight is the node's explicit weight (DESIGN L14), written like
	// gpus; absent, or a flavor left out, is the default (the nominal).
	Weight *wireNominal `json:"weight,omitempty"`
	// MaxEvict is the node's eviction budget (DESIGN L14), none when
	// absent.
	MaxEvict           *wireEvictBudget `json:"max_evict,omitempty"`
	ChildPreemption    bool             `json:"child_preemption,omitempty"`
	PriorityPreemption bool             `json:"priority_preemption,omitempty"`
	Namespaces         []string         `json:"namespaces,omitempty"`
	ChangedAt          string           `json:"changed_at,omitempty"`
	Children           []wireQuota      `json:"children,omitempty"`
	// Flavors are the tree's flavors where the quota object stands alone
	// (MarshalQuota); on the root only. A snapshot or a tree document
	// gives them at its top level ("flavors").
	Flavors []wireFlavor `json:"flavors,omitempty"`
}

// wireFlavor is a declared flavor (DESIGN L13): {"name", "models",
// "mig_profile"}.
type wireFlavor struct {
	Name       string   `json:"name" snap:"required"`
	Models     []string `json:"models" snap:"required"`
	MIGProfile string   `json:"mig_profile,omitempty"`
}

// wireNominal is a quota node's gpus (DESIGN L13): a whole number (the
// nominal of the tree's only flavor) or an object by flavor, {"h100": 16,
// "a100": 32}, keys in document order. The strict reader decodes it by
// hand (decoder.nominal).
type wireNominal struct {
	Plain    *int64
	ByFlavor []wireFlavorGPUs
}

type wireFlavorGPUs struct {
	Flavor string
	GPUs   int64
}

// MarshalJSON writes the number, or the object in the order given.
func (n wireNominal) MarshalJSON() ([]byte, error) {
	if n.Plain != nil {
		return json.Marshal(*n.Plain)
	}
	b := []byte{'{'}
	for i, f := range n.ByFlavor {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(f.Flavor)
		if err != nil {
			return nil, err
		}
		b = append(append(b, k...), ':')
		b = strconv.AppendInt(b, f.GPUs, 10)
	}
	return append(b, '}'), nil
}

type wireSettings struct {
	MinRuntime *string `json:"min_runtime,omitempty"`
	DebtGrace  *string `json:"debt_grace,omitempty"`
	// The Calendar and Flex settings (DESIGN L10, L11).
	Settle                 *string `json:"settle,omitempty"`
	DrainMargin            *string `json:"drain_margin,omitempty"`
	DrainHorizon           *string `json:"drain_horizon,omitempty"`
	ReservationMaxAhead    *string `json:"reservation_max_ahead,omitempty"`
	ReservationMinDuration *string `json:"reservation_min_duration,omitempty"`
	// The Autoscaler agent's default_evaluation_interval (pre-warm, §8).
	AutoscalerEvaluationInterval *string `json:"autoscaler_evaluation_interval,omitempty"`
	// The most bookings of one namespace not yet ended (L10), 1..10000.
	ReservationMaxPerNamespace *int64 `json:"reservation_max_per_namespace,omitempty"`
}

type wireNode struct {
	ID         string    `json:"id" snap:"required,intern"`
	Datacenter string    `json:"datacenter" snap:"intern"`
	NodePool   string    `json:"node_pool" snap:"intern"`
	GPUs       []wireGPU `json:"gpus"`
}

type wireGPU struct {
	ID      string `json:"id" snap:"required"`
	Model   string `json:"model" snap:"intern"`
	Healthy *bool  `json:"healthy"`
	// MIGProfile is a MIG instance's profile ("1g.10gb"); none for a whole
	// GPU (DESIGN L13).
	MIGProfile string `json:"mig_profile,omitempty" snap:"intern"`
}

type wireAllocation struct {
	ID          string       `json:"id" snap:"required"`
	Namespace   string       `json:"namespace" snap:"required,intern"`
	Job         string       `json:"job" snap:"required"`
	Group       string       `json:"group" snap:"required,intern"`
	Type        string       `json:"type" snap:"required,intern"`
	Priority    int64        `json:"priority" snap:"required"`
	Node        string       `json:"node" snap:"required,intern"`
	GPUIDs      []string     `json:"gpu_ids" snap:"required"`
	Idle        bool         `json:"idle"`
	Elastic     bool         `json:"elastic"`
	Reservation string       `json:"reservation" snap:"intern"`
	StoppingFor wireClaimant `json:"stopping_for,omitzero"`
	StartedAt   string       `json:"started_at" snap:"required"`
	KillTimeout *string      `json:"kill_timeout,omitempty"` // default "5s"
	MaxRun      *string      `json:"max_run,omitempty"`      // flex max_run; none: not flex
	AdmittedAt  string       `json:"admitted_at,omitempty"`
}

type wirePending struct {
	Namespace string `json:"namespace" snap:"required,intern"`
	Job       string `json:"job" snap:"required"`
	Group     string `json:"group" snap:"required,intern"`
	Type      string `json:"type" snap:"required,intern"`
	Priority  int64  `json:"priority" snap:"required"`
	Count     int64  `json:"count" snap:"required"`
	GPUs      int64  `json:"gpus" snap:"required"`
	Model     string `json:"model" snap:"intern"`
	// Flavors are the group's allowed flavors in order (DESIGN L13);
	// none: every flavor of the tree in tree order.
	Flavors     []string  `json:"flavors,omitempty" snap:"intern,unique=flavor"`
	Datacenters []string  `json:"datacenters" snap:"intern,unique=datacenter"`
	NodePool    string    `json:"node_pool" snap:"intern"`
	Idle        bool      `json:"idle"`
	Elastic     bool      `json:"elastic"`
	Reservation string    `json:"reservation" snap:"intern"`
	SubmittedAt string    `json:"submitted_at" snap:"required"`
	QueuedAt    string    `json:"queued_at,omitempty"` // default submitted_at
	Flex        *wireFlex `json:"flex,omitempty"`
}

type wireFlex struct {
	MaxWait *string `json:"max_wait,omitempty"`
	MaxRun  *string `json:"max_run,omitempty"`
}

type wireReservation struct {
	ID        string `json:"id" snap:"required"`
	Namespace string `json:"namespace" snap:"required"`
	Quota     string `json:"quota" snap:"required"`
	GPUs      int64  `json:"gpus" snap:"required"`
	AllocGPUs *int64 `json:"alloc_gpus,omitempty"` // default: largest divisor of gpus up to 8
	Model     string `json:"model,omitempty"`
	// Flavor is the booking's flavor (DESIGN L13): required when the tree
	// declares flavors; not with model.
	Flavor   string `json:"flavor,omitempty"`
	NodePool string `json:"node_pool,omitempty"`
	Start    string `json:"start" snap:"required"`
	End      string `json:"end" snap:"required"`
}

// wireHold is a hold (DESIGN L10): GPUs of one node kept for an owner.
type wireHold struct {
	For    wireHoldOwner `json:"for" snap:"required"`
	Node   string        `json:"node" snap:"required"`
	GPUIDs []string      `json:"gpu_ids" snap:"required"`
	Until  string        `json:"until" snap:"required"`
}

// wireHoldOwner is a hold's owner: {"reservation": ID} or a claimant
// object {"namespace", "job", "group"}; exactly one of the two forms.
type wireHoldOwner struct {
	Reservation string `json:"reservation,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Job         string `json:"job,omitempty"`
	Group       string `json:"group,omitempty"`
}

// wireClaimant is a claimant reference (stopping_for): the object
// {"namespace", "job", "group"} that the encoder writes, or
// {"reservation": ID} for a stop made for a reservation (L10.drain), or,
// as older snapshots wrote it, the string "namespace/job/group" with
// exactly three non-empty parts. "" (or no key) is no claimant. The strict
// reader decodes it by hand (decoder.claimant): one key, two JSON types;
// the converter checks that an object has one form (claimant).
type wireClaimant struct {
	Text string        // the string form as given, or ""
	Key  *wireGroupKey // the object form, or nil
}

type wireGroupKey struct {
	Reservation string `json:"reservation,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Job         string `json:"job,omitempty"`
	Group       string `json:"group,omitempty"`
}

// IsZero reports whether c names no claimant (the key is then left out).
func (c wireClaimant) IsZero() bool { return c.Text == "" && c.Key == nil }

// MarshalJSON writes the object form (the string form is read only).
func (c wireClaimant) MarshalJSON() ([]byte, error) {
	if c.Key == nil {
		return json.Marshal(c.Text)
	}
	return json.Marshal(c.Key)
}
