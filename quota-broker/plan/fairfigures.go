package plan

import (
	"fmt"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// The figures of DESIGN L14 that every reader of fair shares builds the
// same way: the simulator's report, the API, `quota status`, the page and
// the metrics. FairFigures.Build is the one place that turns a node's own
// GPUs into its subtree's figures (non-idle, demand, borrowed) and reads
// its nominal and weight; BudgetUse counts the nodes' eviction budget use
// for the readers (the planner counts its own, with its wake-ups, in
// budget.go's indexBudgets, by the same rule).

// OwnFigures are one quota node's own figures in one flavor, in devices
// of that flavor: those of the allocations and pending groups of the
// namespaces bound to the node itself, not of its descendants.
type OwnFigures struct {
	// NonIdle is the non-idle devices held (debt included).
	NonIdle int
	// Held is the devices held, idle or not (NonIdle included).
	Held int
	// Asked is the devices the node's pending allocations ask for.
	Asked int
}

// Weight is node n's weight in flavor (DESIGN L14): its explicit weight
// (explicit true), else its nominal in the flavor, not capped at
// MaxWeight (explicit false).
func Weight(n *quota.Node, flavor string) (weight int, explicit bool) {
	if w, ok := n.Weight[flavor]; ok {
		return w, true
	}
	return n.GPUs.Of(flavor), false
}

// Build sets f to one flavor's figures of the tree rooted at root, from
// own: one entry per node, in pre-order (quota.Node.Walk's order, as
// FairFigures). For each node n, with sub(n) its subtree:
//
//	Nominal(n)    = n's nominal in flavor
//	Weight(n)     = n's explicit weight in flavor, else DefaultWeight
//	OwnNonIdle(n) = own[n].NonIdle
//	NonIdle(n)    = sum over sub(n) of own.NonIdle   (L4's nonidle)
//	Demand(n)     = sum over sub(n) of own.Held + own.Asked
//	Borrowed(n)   = max(0, used(n) - max(Nominal(n), NonIdle(n)))   (L4)
//
// with used(n) the sum over sub(n) of own.Held. It reuses f's slices. It
// fails, leaving f unusable, when own has not one entry per node or holds
// a negative figure or a NonIdle above its Held.
func (f *FairFigures) Build(root *quota.Node, flavor string, own []OwnFigures) error {
	if root == nil {
		return fmt.Errorf("fair figures: no quota tree")
	}
	f.Nominal, f.OwnNonIdle, f.NonIdle, f.Demand = f.Nominal[:0], f.OwnNonIdle[:0], f.NonIdle[:0], f.Demand[:0]
	f.Borrowed, f.Weight = f.Borrowed[:0], f.Weight[:0]
	// f.Borrowed holds each subtree's used devices (sums of own.Held)
	// until the end.
	var walk func(n *quota.Node) error
	walk = func(n *quota.Node) error {
		i := len(f.Nominal)
		if i >= len(own) {
			return fmt.Errorf("fair figures: own has %d entries, fewer than the tree's nodes", len(own))
		}
		o := own[i]
		if o.NonIdle < 0 || o.Held < o.NonIdle || o.Asked < 0 {
			return fmt.Errorf("fair figures: quota %q flavor %q: own figures %+v (want 0 <= NonIdle <= Held, Asked >= 0)", n.Name, flavor, o)
		}
		w, explicit := Weight(n, flavor)
		if !explicit {
			w = DefaultWeight
		}
		f.Nominal = append(f.Nominal, n.GPUs.Of(flavor))
		f.Weight = append(f.Weight, w)
		f.OwnNonIdle = append(f.OwnNonIdle, o.NonIdle)
		f.NonIdle = append(f.NonIdle, o.NonIdle)
		f.Demand = append(f.Demand, o.Held+o.Asked)
		f.Borrowed = append(f.Borrowed, o.Held)
		for _, c := range n.Children {
			j := len(f.Nominal)
			if err := walk(c); err != nil {
				return err
			}
			f.NonIdle[i] += f.NonIdle[j]
			f.Demand[i] += f.Demand[j]
			f.Borrowed[i] += f.Borrowed[j]
		}
		return nil
	}
	if err := walk(root); err != nil {
		return err
	}
	if len(own) != len(f.Nominal) {
		return fmt.Errorf("fair figures: own has %d entries for a tree of %d nodes", len(own), len(f.Nominal))
	}
	for i := range f.Borrowed {
		f.Borrowed[i] = max(0, f.Borrowed[i]-max(f.Nominal[i], f.NonIdle[i]))
	}
	return nil
}

// BudgetUse is the eviction budget use at now of every node of the tree
// rooted at root that sets a budget (DESIGN L14), by node name: the
// devices, of every flavor, of the evictions whose quota node is the node
// or one of its descendants (a victim's stop counts against its node and
// every ancestor) with a time in (now - per, now], per being that node's
// budget window. A node with a budget and no eviction in its window maps
// to 0; a node without a budget is absent; an eviction of a node not in
// the tree counts nowhere. O(evictions x depth).
func BudgetUse(root *quota.Node, evictions []Eviction, now time.Time) map[string]int {
	parent := map[string]*quota.Node{}
	byName := map[string]*quota.Node{}
	use := map[string]int{}
	var walk func(n, up *quota.Node)
	walk = func(n, up *quota.Node) {
		byName[n.Name], parent[n.Name] = n, up
		if n.MaxEvict != nil {
			use[n.Name] = 0
		}
		for _, c := range n.Children {
			walk(c, n)
		}
	}
	if root != nil {
		walk(root, nil)
	}
	for _, e := range evictions {
		for n := byName[e.Quota]; n != nil; n = parent[n.Name] {
			if b := n.MaxEvict; b != nil && e.Time.After(now.Add(-b.Per)) && !e.Time.After(now) {
				use[n.Name] += max(0, e.GPUs) // as the planner counts them (indexBudgets)
			}
		}
	}
	return use
}

// EvictionRule reports whether a victim stop under rule r counts against
// eviction budgets (DESIGN L14): L5.1-L5.3, L5.prewarm, L10.start,
// L10.drain and L14.fair; not a job's own terms (L10.end, L11).
func EvictionRule(r Rule) bool {
	switch r {
	case RuleIdleDebt, RuleChild, RulePriority, RulePrewarm, RuleStart, RuleDrain, RuleFair:
		return true
	}
	return false
}
