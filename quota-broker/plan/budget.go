package plan

import (
	"fmt"
	"time"
)

// Eviction budgets (DESIGN L14). A quota node may set max_evict = { gpus =
// N, per = "5m" }: the GPUs stopped as victims of its subtree (rules
// L5.1-L5.3, L5.prewarm, L10.start, L10.drain, L14.fair: every stop of a
// victim set, planner.stopUnit) within (now - per, now] may not exceed N.
// What counts is the snapshot's Evictions (the broker's recent stops, by
// the victim's quota node) plus this plan's own stops; a node's L6 set
// that would take a budget of the victims' node or an ancestor over is out
// (withinBudgets), and a claimant left with none waits with the budget's
// numbers (planner.budgetWhy). The stops of an active reservation's jobs
// and of a drain are never refused, though they count.
//
// In a tree of several flavors each flavor's planner counts the
// snapshot's evictions, of every flavor, and its own plan's stops; stops
// of the same plan in another flavor are counted from the next plan on.

// indexBudgets fills the state's eviction counts: per quota node with a
// budget, the GPUs of the snapshot's Evictions in its subtree within its
// window; nil when no node has a budget. A budget turns off the victim
// cache (victimcache.go): a set's fate then depends on stops on other
// nodes.
func (p *planner) indexBudgets() {
	use := BudgetUse(p.snap.Quota, p.snap.Evictions, p.now) // the count the API shows, the one rule
	if len(use) == 0 {
		return
	}
	evicted := make([]int, len(p.quotas))
	for _, q := range p.quotas {
		if q.node.MaxEvict == nil {
			continue
		}
		evicted[q.index] = use[q.node.Name]
		// The budget frees up as each counted stop leaves its window.
		for _, e := range p.snap.Evictions {
			if v := p.byName[e.Quota]; v != nil && (v == q || v.isDescendantOf(q)) &&
				e.Time.After(p.now.Add(-q.node.MaxEvict.Per)) && !e.Time.After(p.now) {
				p.wake(e.Time.Add(q.node.MaxEvict.Per))
			}
		}
	}
	p.st.evicted = evicted
	p.scanVictims = true
}

// countEviction adds a victim's stop of gpus GPUs of quota node q to the
// budgets of q and its ancestors.
func (p *planner) countEviction(q *qnode, gpus int) {
	if p.st.evicted == nil || q == nil {
		return
	}
	p.st.evicted[q.index] += gpus
	for _, a := range q.ancestors {
		p.st.evicted[a.index] += gpus
	}
}

// budgetExempt reports whether claim c's stops are never refused by a
// budget: those of an active reservation's jobs and of a drain.
func budgetExempt(c *claim) bool {
	return c.j.res != nil || c.drain != nil && c.drain.res != nil
}

// withinBudgets reports whether set, a node's L6 set for claim c, keeps
// every budget of its victims' nodes and their ancestors within its
// limit; when it does not, the first budget it would take over is
// remembered for the claimant's wait (budgetWhy).
func (p *planner) withinBudgets(set *victimSet, c *claim) bool {
	if p.st.evicted == nil || budgetExempt(c) {
		return true
	}
	add := map[*qnode]int{}
	for _, u := range set.units {
		for _, ai := range p.units[u].allocs {
			a := &p.allocs[ai]
			for q := a.q; q != nil; q = q.parent {
				if q.node.MaxEvict != nil {
					add[q] += a.count
				}
			}
		}
	}
	for _, q := range p.quotas { // pre-order: the highest node first
		b := q.node.MaxEvict
		if n, ok := add[q]; ok && p.st.evicted[q.index]+n > b.GPUs {
			if p.budgetWhy == "" {
				p.budgetWhy = fmt.Sprintf("%s: %d of %d GPUs evicted in the last %s", q.node.Name, p.st.evicted[q.index], b.GPUs, DurationText(b.Per))
			}
			return false
		}
	}
	return true
}

// DurationText writes a budget's window as the quota file does: "5m",
// "1h", "90s", "1h30m".
func DurationText(d time.Duration) string {
	s := d.String()
	for _, suf := range []string{"m0s", "h0m"} {
		if len(s) > len(suf) && s[len(s)-len(suf):] == suf {
			s = s[:len(s)-2]
		}
	}
	return s
}

// budgetBroken returns the first budget (in pre-order) that the plan's
// stops since before (the state's evicted counts then) took over its
// limit, as a wait reason, or "".
func (p *planner) budgetBroken(before []int) string {
	if p.st.evicted == nil || before == nil {
		return ""
	}
	for _, q := range p.quotas {
		b := q.node.MaxEvict
		if b != nil && p.st.evicted[q.index] > before[q.index] && p.st.evicted[q.index] > b.GPUs {
			return fmt.Sprintf("%s: %d of %d GPUs evicted in the last %s", q.node.Name, before[q.index], b.GPUs, DurationText(b.Per))
		}
	}
	return ""
}
