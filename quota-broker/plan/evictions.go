package plan

import (
	"slices"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// Evictions returns what the stop actions of acts, made at at, count
// against eviction budgets (DESIGN L14, snapshot `evictions`): one
// Eviction per victim quota node (the node of the stopped allocation's
// namespace in the tree rooted at root), GPUs summed over its stops, in
// the order of each node's first stop. Only ActionStop actions count, and
// only under the rules DESIGN L14 names (L5.1-L5.3, L5.prewarm, L10.start,
// L10.drain, L14.fair; not the job's own terms, L10.end and L11.*); a stop in a namespace no node of the tree
// governs counts against no budget. Nil when nothing counts.
func Evictions(root *quota.Node, acts []Action, at time.Time) []Eviction {
	var out []Eviction
	var nodes map[string]string // namespace -> quota node, read at the first stop that counts
	for _, act := range acts {
		if act.Action != ActionStop || act.GPUs <= 0 || root == nil {
			continue
		}
		switch act.Rule {
		case RuleIdleDebt, RuleChild, RulePriority, RulePrewarm, RuleStart, RuleDrain, RuleFair:
		default:
			continue
		}
		if nodes == nil {
			nodes = quota.Namespaces(root)
		}
		q, ok := nodes[act.Namespace]
		if !ok {
			continue
		}
		if i := slices.IndexFunc(out, func(e Eviction) bool { return e.Quota == q }); i >= 0 {
			out[i].GPUs += act.GPUs
			continue
		}
		out = append(out, Eviction{Quota: q, GPUs: act.GPUs, Time: at})
	}
	return out
}

// RecentEvictions returns the evictions of evs that budgets of the tree
// rooted at root may still count at now (DESIGN L14): those at a time in
// (now - quota.EvictWindow(root), now] whose Quota is a node of the tree.
// Nil when no node has a budget, so that a broker or a simulator keeping
// its stops this way keeps none then. evs is not modified; the result is
// a subslice of it when the kept evictions are contiguous (as they are
// when evs is in time order and names nodes of the tree), else a new
// slice.
func RecentEvictions(root *quota.Node, evs []Eviction, now time.Time) []Eviction {
	w := quota.EvictWindow(root)
	if w <= 0 || len(evs) == 0 {
		return nil
	}
	from := now.Add(-w)
	known := map[string]bool{} // quota name -> a node of the tree
	keep := func(e Eviction) bool {
		if !e.Time.After(from) || e.Time.After(now) {
			return false
		}
		in, ok := known[e.Quota]
		if !ok {
			in = root.Find(e.Quota) != nil
			known[e.Quota] = in
		}
		return in
	}
	i := 0
	for i < len(evs) && !keep(evs[i]) {
		i++
	}
	j := i
	for j < len(evs) && keep(evs[j]) {
		j++
	}
	if !slices.ContainsFunc(evs[j:], keep) {
		if i == j {
			return nil
		}
		return evs[i:j]
	}
	out := slices.Clone(evs[i:j])
	for _, e := range evs[j:] {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}
