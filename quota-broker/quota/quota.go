// Package quota holds the GPU quota tree: its nodes, the global settings, the
// HCL loader and the structural checks of law L1 (DESIGN §3).
//
// A tree is plain data. The planning core (package plan) reads it; the HCL
// loader and the snapshot decoder build it; Validate checks it.
package quota

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxListedChildren is how many children an L1 sum message names.
const maxListedChildren = 8

// DefaultDebtGrace is the default for Settings.DebtGrace (DESIGN L9: 10 minutes).
const DefaultDebtGrace = 10 * time.Minute

// The defaults of the Calendar and Flex settings (DESIGN L5 pre-warm, L10,
// L11).
const (
	DefaultSettle                 = 30 * time.Second
	DefaultDrainMargin            = 60 * time.Second
	DefaultDrainHorizon           = time.Hour
	DefaultReservationMaxAhead    = 1344 * time.Hour // 8 weeks
	DefaultReservationMinDuration = time.Hour
	// DefaultAutoscalerEvaluationInterval is the Nomad Autoscaler v0.5.0
	// agent's own policy.default_evaluation_interval (10s).
	DefaultAutoscalerEvaluationInterval = 10 * time.Second
	// DefaultReservationMaxPerNamespace is the default of
	// Settings.ReservationMaxPerNamespace.
	DefaultReservationMaxPerNamespace = 100
	// MaxReservationMaxPerNamespace bounds reservation_max_per_namespace
	// (a setting is a whole number from 1 to it).
	MaxReservationMaxPerNamespace = 10000
)

// MaxWeight is the largest explicit weight of a quota node (DESIGN L14:
// 0..10,000).
const MaxWeight = 10000

// EvictBudget is a quota node's eviction budget, `max_evict = { gpus = 16,
// per = "5m" }` (DESIGN L14): every victim stop of the node's subtree
// counts (rules L5.1-L5.3, L5.prewarm, L10.start, L10.drain, L14.fair), and
// a victim set that would take the GPUs stopped within (now - Per, now]
// over GPUs is out.
type EvictBudget struct {
	// GPUs is the most devices, of every flavor, stopped within Per; >= 0.
	GPUs int
	// Per is the window; > 0.
	Per time.Duration
}

// MaxEvictPer is the longest window an eviction budget may have
// (max_evict's per, DESIGN L14): a day. Budgets are meant for minutes
// (they pace how fast a team loses GPUs to preemption); the bound keeps
// the recent stops the broker reads from its history, and a snapshot's
// `evictions`, to at most a day of them.
const MaxEvictPer = 24 * time.Hour

// CheckEvictBudget returns what is wrong with an eviction budget (DESIGN
// L14), as "max_evict.per = \"0s\" is not above 0", or "" when it is
// well formed: GPUs from 0 to MaxGPUs, Per above 0 and at most
// MaxEvictPer. nil (no budget) is well formed.
func CheckEvictBudget(b *EvictBudget) string {
	switch {
	case b == nil:
		return ""
	case b.GPUs < 0:
		return fmt.Sprintf("max_evict.gpus = %d is negative", b.GPUs)
	case b.GPUs > MaxGPUs:
		return fmt.Sprintf("max_evict.gpus = %d is more than %d", b.GPUs, MaxGPUs)
	case b.Per <= 0:
		return fmt.Sprintf("max_evict.per = %q is not above 0 (a Go duration such as \"5m\")", b.Per)
	case b.Per > MaxEvictPer:
		return fmt.Sprintf("max_evict.per = %q is more than %s (DESIGN L14)", b.Per, MaxEvictPer)
	}
	return ""
}

// EvictWindow is the largest MaxEvict.Per of the tree rooted at root
// (DESIGN L14): the stops older than it count against no budget. 0 when
// no node has a budget (or root is nil).
func EvictWindow(root *Node) time.Duration {
	var w time.Duration
	if root == nil {
		return 0
	}
	root.Walk(func(n *Node) {
		if n.MaxEvict != nil && n.MaxEvict.Per > w {
			w = n.MaxEvict.Per
		}
	})
	return w
}

// Node is one node of the quota tree.
type Node struct {
	// Name is unique in the tree, e.g. "Quota1.1".
	Name string
	// GPUs is the node's nominal quota per flavor: the devices of each
	// flavor it is guaranteed (DESIGN L13; Plain(n) in a tree without
	// flavor blocks). Keys are flavors of the tree (Validate).
	GPUs Nominal
	// Weight is the node's explicit weight per flavor in the sharing of
	// the GPUs its parent lends (DESIGN L14), each 0..MaxWeight; a flavor
	// left out (or a nil Weight) takes the default, the node's nominal in
	// that flavor, not capped. Keys are flavors of the tree (Validate).
	Weight Nominal `json:",omitempty"`
	// MaxEvict is the node's eviction budget (DESIGN L14): at most
	// MaxEvict.GPUs devices, of every flavor, stopped as victims of the
	// node's subtree within any MaxEvict.Per; nil for none.
	MaxEvict *EvictBudget `json:",omitempty"`
	// ChildPreemption lets jobs bound to this node preempt the non-idle
	// allocations of its descendants (DESIGN L5 step 2).
	ChildPreemption bool
	// PriorityPreemption lets jobs bound to this node preempt this node's own
	// non-idle allocations of lower job priority (DESIGN L5 step 3).
	PriorityPreemption bool
	// Namespaces are the Nomad namespaces (workspaces) bound to this node.
	Namespaces []string
	// ChangedAt is the time of the last change of GPUs, used for the debt
	// grace period (DESIGN L9). The zero time means "no recorded change": the
	// node's debt has no grace left.
	ChangedAt time.Time
	// Children are the node's child quotas.
	Children []*Node
	// Flavors are the tree's declared flavors in file order (DESIGN L13),
	// on the root only; nil for a tree without flavor blocks, whose one
	// flavor is the implicit ImplicitFlavor (TreeFlavors).
	Flavors []Flavor
	// Pos is where the node was declared ("quota.hcl:3" or a JSON path), used
	// to prefix validation errors. Optional.
	Pos string
}

// Settings are the tree-wide settings of the broker.
type Settings struct {
	// MinRuntime protects allocations younger than it from preemption unless
	// no node has a victim set without them (DESIGN L5). Default 0.
	MinRuntime time.Duration
	// DebtGrace is how long debt created by a quota change is protected from
	// preemption (DESIGN L9). Default DefaultDebtGrace.
	DebtGrace time.Duration
	// Settle is how long an admitted flex request may have fewer live
	// allocations than it asked for before it is suspended and requeued
	// (DESIGN L11, rule L11.settle), and how long after a reservation's
	// start its held GPUs stay unlendable (L10). Default DefaultSettle.
	Settle time.Duration
	// DrainMargin is added to the victims' largest kill_timeout to time a
	// drain's stops before a reservation's start (rule L10.drain). Default
	// DefaultDrainMargin.
	DrainMargin time.Duration
	// DrainHorizon is how far ahead a reservation starts its drain and
	// holds, and the window of booked(N) for non-flex jobs (DESIGN L10).
	// Default DefaultDrainHorizon.
	DrainHorizon time.Duration
	// ReservationMaxAhead is the latest start of a booking after the time
	// it is made (L10). Default DefaultReservationMaxAhead.
	ReservationMaxAhead time.Duration
	// ReservationMinDuration is the shortest booking (L10). Default
	// DefaultReservationMinDuration.
	ReservationMinDuration time.Duration
	// AutoscalerEvaluationInterval is the evaluation_interval the Nomad
	// Autoscaler agent gives a scaling policy that sets none (its
	// `policy { default_evaluation_interval }`): a pre-warm's holds last
	// until the boundary + the policy's interval + Settle (DESIGN L5
	// pre-warm, §8), so it must be the agent's. Zero, as in a tree stored
	// before the setting existed, reads as the default,
	// DefaultAutoscalerEvaluationInterval.
	AutoscalerEvaluationInterval time.Duration
	// ReservationMaxPerNamespace is the most bookings of one namespace
	// that have not ended (L10; issue 16: a team cannot slow every
	// booking down with thousands of its own). A setting is from 1 to
	// MaxReservationMaxPerNamespace; zero, as in a tree stored before the
	// setting existed, reads as DefaultReservationMaxPerNamespace
	// (MaxPerNamespace).
	ReservationMaxPerNamespace int
}

// MaxPerNamespace returns reservation_max_per_namespace as it applies:
// ReservationMaxPerNamespace, or its default when zero.
func (s Settings) MaxPerNamespace() int {
	if s.ReservationMaxPerNamespace == 0 {
		return DefaultReservationMaxPerNamespace
	}
	return s.ReservationMaxPerNamespace
}

// CheckMaxPerNamespace says what is wrong with n as a
// reservation_max_per_namespace setting ("" when it is within bounds).
func CheckMaxPerNamespace(n int64) string {
	if n < 1 || n > MaxReservationMaxPerNamespace {
		return fmt.Sprintf("must be a whole number from 1 to %d", MaxReservationMaxPerNamespace)
	}
	return ""
}

// MaxSetting bounds every duration setting (10 years): far above any real
// value, it keeps the sums the core makes of a few of them (start -
// (kill_timeout + drain_margin), now + drain_horizon) far from int64
// overflow.
const MaxSetting = 87600 * time.Hour

// settingNames are the settings block's names of the duration settings,
// in the order of Settings' fields.
var settingNames = [...]string{"min_runtime", "debt_grace", "settle", "drain_margin", "drain_horizon",
	"reservation_max_ahead", "reservation_min_duration", "autoscaler_evaluation_interval"}

// OutOfBounds returns the first duration setting that is negative or above
// MaxSetting, by its settings block name (drain_margin), with its value and
// what is wrong; name is "" when every setting is within bounds. The HCL
// file is checked as it is read; a tree given as JSON is checked here.
func (s Settings) OutOfBounds() (name string, value time.Duration, problem string) {
	values := [...]time.Duration{s.MinRuntime, s.DebtGrace, s.Settle, s.DrainMargin, s.DrainHorizon,
		s.ReservationMaxAhead, s.ReservationMinDuration, s.AutoscalerEvaluationInterval}
	for i, v := range values {
		switch {
		case v < 0:
			return settingNames[i], v, "is negative"
		case v > MaxSetting:
			return settingNames[i], v, fmt.Sprintf("is more than %s", MaxSetting)
		}
	}
	return "", 0, ""
}

// DefaultSettings returns the settings used when none are given.
func DefaultSettings() Settings {
	return Settings{DebtGrace: DefaultDebtGrace, Settle: DefaultSettle, DrainMargin: DefaultDrainMargin,
		DrainHorizon: DefaultDrainHorizon, ReservationMaxAhead: DefaultReservationMaxAhead,
		ReservationMinDuration: DefaultReservationMinDuration, AutoscalerEvaluationInterval: DefaultAutoscalerEvaluationInterval,
		ReservationMaxPerNamespace: DefaultReservationMaxPerNamespace}
}

// Walk calls fn for n and each of its descendants, parents first, children
// in declaration order.
func (n *Node) Walk(fn func(node *Node)) {
	if n == nil {
		return
	}
	fn(n)
	for _, c := range n.Children {
		c.Walk(fn)
	}
}

// Find returns the node called name in the subtree of n, or nil.
func (n *Node) Find(name string) *Node {
	var found *Node
	n.Walk(func(x *Node) {
		if found == nil && x.Name == name {
			found = x
		}
	})
	return found
}

// Clone returns a deep copy of the subtree rooted at n.
func (n *Node) Clone() *Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Namespaces = append([]string(nil), n.Namespaces...)
	c.GPUs = n.GPUs.Clone()
	c.Weight = n.Weight.Clone()
	if n.MaxEvict != nil {
		b := *n.MaxEvict
		c.MaxEvict = &b
	}
	if n.Flavors != nil {
		c.Flavors = make([]Flavor, len(n.Flavors))
		for i, f := range n.Flavors {
			f.Models = slices.Clone(f.Models)
			c.Flavors[i] = f
		}
	}
	c.Children = make([]*Node, len(n.Children))
	for i, ch := range n.Children {
		c.Children[i] = ch.Clone()
	}
	if len(n.Children) == 0 {
		c.Children = nil
	}
	return &c
}

// MaxNameLen is the longest quota node name, in bytes.
const MaxNameLen = 128

// ValidName reports whether name is a quota node name: 1 to MaxNameLen
// ASCII letters, digits, '.', '_' or '-' (Nomad's names are of this kind;
// "Quota1.1"). No space, control character, bidirectional override or
// other non-ASCII character can hide in a name shown to people.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > MaxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// MaxNamespaceLen is the longest namespace name Nomad takes.
const MaxNamespaceLen = 128

// ValidNamespace reports whether ns is a Nomad namespace name: 1 to
// MaxNamespaceLen ASCII letters, digits, '-' or '_' (Nomad's rule), so
// that no newline, NUL, bidi control or kilobyte name is bound in a tree
// and then printed in logs, pages and answers.
func ValidNamespace(ns string) bool {
	if len(ns) == 0 || len(ns) > MaxNamespaceLen {
		return false
	}
	for i := 0; i < len(ns); i++ {
		switch c := ns[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// nameText quotes name for a message (%q, cut to 64 bytes with its length
// when longer).
func nameText(name string) string {
	if len(name) <= 64 {
		return fmt.Sprintf("%q", name)
	}
	return fmt.Sprintf("%q... (%d bytes)", name[:64], len(name))
}

// ValidationError is a violation of law L1. It names the node and carries
// the numbers in its message. With BadName it is a name outside ValidName
// instead: bad input (HTTP 400), not a law's refusal.
type ValidationError struct {
	Pos     string // where the node was declared, may be empty
	Node    string // the node's name
	Message string
	BadName bool
	// BadNamespace: a namespace name outside ValidNamespace, bad input
	// (HTTP 400 on field "namespaces") like BadName.
	BadNamespace bool
	// Flavor: Node names a flavor block, not a quota node (DESIGN L13).
	Flavor bool
}

func (e *ValidationError) Error() string {
	if e.BadName {
		msg := "name " + nameText(e.Node) + " " + e.Message
		if e.Pos != "" {
			return e.Pos + ": " + msg
		}
		return msg
	}
	kind := "quota"
	if e.Flavor {
		kind = "flavor"
	}
	if e.Pos != "" {
		return fmt.Sprintf("%s: %s %q: %s", e.Pos, kind, e.Node, e.Message)
	}
	return fmt.Sprintf("%s %q: %s", kind, e.Node, e.Message)
}

// Validate checks law L1 on the tree rooted at root, per flavor (DESIGN
// L13): the declared flavors are well formed (checkFlavors), names are
// valid (ValidName; BadName otherwise) and unique, every nominal names a
// flavor of the tree and is from 0 to MaxGPUs, for each flavor the
// children's nominals sum to at most their parent's, and a namespace is
// bound to at most one node. The first violation found (flavors, then
// parents before children, flavors in tree order) is returned as a
// *ValidationError naming the node, the flavor (in a tree of several)
// and the numbers.
//
// L1's other half, "root nominal <= healthy GPUs in the cluster", is a
// warning, not an error: see CapacityWarning.
func Validate(root *Node) error {
	if root == nil {
		return &ValidationError{Message: "the quota tree has no root"}
	}
	if err := checkFlavors(root.Flavors); err != nil {
		return err
	}
	flavors := FlavorNames(root)
	many := len(root.Flavors) > 0
	// of names a flavor in a message: "" in a tree without flavor blocks,
	// so that its messages read as they did before flavors.
	of := func(f string) string {
		if !many {
			return ""
		}
		return " of flavor " + strconv.Quote(f)
	}
	names := map[string]*Node{}
	namespaces := map[string]string{}
	var check func(n *Node, depth int) error
	check = func(n *Node, depth int) error {
		if depth > MaxDepth {
			return &ValidationError{Pos: n.Pos, Node: n.Name, Message: fmt.Sprintf("the tree is deeper than %d levels", MaxDepth)}
		}
		if !ValidName(n.Name) {
			return &ValidationError{Pos: n.Pos, Node: n.Name, BadName: true,
				Message: fmt.Sprintf("is not a quota node name: want 1 to %d letters, digits, '.', '_' or '-'", MaxNameLen)}
		}
		if prev, dup := names[n.Name]; dup {
			msg := "name used twice"
			if prev.Pos != "" {
				msg += " (first at " + prev.Pos + ")"
			}
			return &ValidationError{Pos: n.Pos, Node: n.Name, Message: msg}
		}
		names[n.Name] = n
		if n != root && n.Flavors != nil {
			return &ValidationError{Pos: n.Pos, Node: n.Name, Message: "declares flavors; only the tree (its root) does"}
		}
		for _, f := range slices.Sorted(maps.Keys(n.GPUs)) {
			if !slices.Contains(flavors, f) {
				return &ValidationError{Pos: n.Pos, Node: n.Name, Message: fmt.Sprintf(
					"gpus names flavor %s, which the tree does not declare (flavors: %s)", nameText(f), strings.Join(flavors, ", "))}
			}
		}
		for _, f := range flavors {
			v := n.GPUs.Of(f)
			if v < 0 {
				return &ValidationError{Pos: n.Pos, Node: n.Name, Message: fmt.Sprintf("gpus%s = %d is negative", of(f), v)}
			}
			if v > MaxGPUs {
				return &ValidationError{Pos: n.Pos, Node: n.Name, Message: fmt.Sprintf("gpus%s = %d is more than %d", of(f), v, MaxGPUs)}
			}
		}
		for _, f := range slices.Sorted(maps.Keys(n.Weight)) {
			if !slices.Contains(flavors, f) {
				return &ValidationError{Pos: n.Pos, Node: n.Name, Message: fmt.Sprintf(
					"weight names flavor %s, which the tree does not declare (flavors: %s)", nameText(f), strings.Join(flavors, ", "))}
			}
			if v := n.Weight[f]; v < 0 || v > MaxWeight {
				return &ValidationError{Pos: n.Pos, Node: n.Name, Message: fmt.Sprintf(
					"weight%s = %d is out of range (0..%d; DESIGN L14)", of(f), v, MaxWeight)}
			}
		}
		if problem := CheckEvictBudget(n.MaxEvict); problem != "" {
			return &ValidationError{Pos: n.Pos, Node: n.Name, Message: problem}
		}
		for i, ns := range n.Namespaces {
			if ns == "" || strings.TrimSpace(ns) != ns {
				return &ValidationError{Pos: n.Pos, Node: n.Name, BadNamespace: true,
					Message: fmt.Sprintf("namespaces[%d] = %q is not a namespace name (empty, or with leading or trailing space)", i, ns)}
			}
			if !ValidNamespace(ns) {
				return &ValidationError{Pos: n.Pos, Node: n.Name, BadNamespace: true,
					Message: fmt.Sprintf("namespaces[%d] = %s is not a Nomad namespace name (1 to %d letters, digits, '-' or '_')", i, nameText(ns), MaxNamespaceLen)}
			}
			if owner, dup := namespaces[ns]; dup {
				return &ValidationError{Pos: n.Pos, Node: n.Name,
					Message: fmt.Sprintf("namespace %q is already bound to quota %q", ns, owner)}
			}
			namespaces[ns] = n.Name
		}
		for _, c := range n.Children {
			if c == nil {
				return &ValidationError{Pos: n.Pos, Node: n.Name, Message: "nil child"}
			}
		}
		for _, f := range flavors {
			sum := 0
			parts := make([]string, 0, min(len(n.Children), maxListedChildren+1))
			for i, c := range n.Children {
				sum += min(max(c.GPUs.Of(f), 0), MaxGPUs)
				switch {
				case i < maxListedChildren:
					parts = append(parts, fmt.Sprintf("%s %d", c.Name, c.GPUs.Of(f)))
				case i == maxListedChildren:
					parts = append(parts, fmt.Sprintf("%d more", len(n.Children)-maxListedChildren))
				}
			}
			if sum > n.GPUs.Of(f) {
				return &ValidationError{Pos: n.Pos, Node: n.Name, Message: fmt.Sprintf(
					"children's nominal GPUs%s sum to %d (%s), more than its nominal %d",
					of(f), sum, strings.Join(parts, " + "), n.GPUs.Of(f))}
			}
		}
		for _, c := range n.Children {
			if err := check(c, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return check(root, 1)
}

// CapacityWarning returns a warning text when the root's nominal exceeds the
// healthy GPUs in the cluster (L1: warn, never fail), or "" when it fits.
// It is the check of a one-flavor tree, on its only flavor; see
// FlavorCapacityWarning for one flavor of several.
func CapacityWarning(root *Node, healthyGPUs int) string {
	if root == nil {
		return ""
	}
	f, _ := OnlyFlavor(root)
	if len(root.Flavors) > 1 {
		f = ""
	}
	return FlavorCapacityWarning(root, f, healthyGPUs)
}

// FlavorCapacityWarning is CapacityWarning for one flavor (DESIGN L13: the
// root against the healthy devices of that flavor). The flavor is named
// in the text in a tree that declares flavors; flavor "" compares the
// root's total.
func FlavorCapacityWarning(root *Node, flavor string, healthy int) string {
	if root == nil {
		return ""
	}
	nominal := root.GPUs.Total()
	if flavor != "" {
		nominal = root.GPUs.Of(flavor)
	}
	if nominal <= healthy {
		return ""
	}
	if len(root.Flavors) == 0 {
		return fmt.Sprintf("quota %q: nominal %d GPUs exceeds the %d healthy GPUs in the cluster", root.Name, nominal, healthy)
	}
	return fmt.Sprintf("quota %q: nominal %d GPUs of flavor %q exceeds the %d healthy GPUs of that flavor in the cluster",
		root.Name, nominal, flavor, healthy)
}

// Namespaces returns the namespace -> node name binding of the tree, sorted
// by namespace when listed with SortedNamespaces.
func Namespaces(root *Node) map[string]string {
	m := map[string]string{}
	root.Walk(func(n *Node) {
		for _, ns := range n.Namespaces {
			m[ns] = n.Name
		}
	})
	return m
}

// SortedNamespaces returns the tree's bound namespaces in lexical order.
func SortedNamespaces(root *Node) []string {
	m := Namespaces(root)
	return slices.Sorted(maps.Keys(m))
}
