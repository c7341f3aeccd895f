package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/quota"
)

// budgetTree is Quota1 (a budget of 16 per 5m) with Quota1.1 (2 per 10m)
// and Quota1.2 (none).
func budgetTree() *quota.Node {
	return &quota.Node{Name: "Quota1", GPUs: quota.Plain(8), Namespaces: []string{"ns-root"},
		MaxEvict: &quota.EvictBudget{GPUs: 16, Per: 5 * time.Minute},
		Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: quota.Plain(4), Namespaces: []string{"ns-b"}, MaxEvict: &quota.EvictBudget{GPUs: 2, Per: 10 * time.Minute}},
			{Name: "Quota1.2", GPUs: quota.Plain(4), Namespaces: []string{"ns-c", "ns-c2"}},
		}}
}

// TestEvictions: the stops of the rules DESIGN L14 names count, summed by
// the victim's quota node in the order of first stop; the job's own terms,
// other kinds of action and unbound namespaces do not.
func TestEvictions(t *testing.T) {
	at := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	stop := func(ns string, gpus int, r Rule) Action {
		return Action{Action: ActionStop, Namespace: ns, Job: "j", Group: "g", Alloc: "a", GPUs: gpus, Rule: r}
	}
	acts := []Action{
		stop("ns-c", 1, RuleIdleDebt),
		stop("ns-b", 2, RuleChild),
		stop("ns-c2", 4, RulePriority),
		stop("ns-b", 8, RulePrewarm),
		stop("ns-root", 16, RuleStart),
		stop("ns-c", 32, RuleDrain),
		stop("ns-b", 64, RuleFair),
		// none of these count
		stop("ns-b", 100, RuleEnd),
		stop("ns-b", 100, RuleFlexMaxRun),
		stop("ns-b", 100, RuleFlexSettle),
		stop("ns-b", 100, RuleFlexExpire),
		stop("ns-b", 100, RuleIdle),
		stop("unbound", 100, RuleIdleDebt),
		{Action: ActionStopJob, Namespace: "ns-b", Job: "j", Rule: RuleEnd},
		{Action: ActionAdmit, Namespace: "ns-b", Job: "j", Group: "g", Count: 1, GPUs: 100, Rule: RuleIdleDebt},
	}
	want := []Eviction{{Quota: "Quota1.2", GPUs: 1 + 4 + 32, Time: at}, {Quota: "Quota1.1", GPUs: 2 + 8 + 64, Time: at},
		{Quota: "Quota1", GPUs: 16, Time: at}}
	if diff := cmp.Diff(want, Evictions(budgetTree(), acts, at)); diff != "" {
		t.Errorf("Evictions (-want +got):\n%s", diff)
	}
	if got := Evictions(budgetTree(), acts[7:], at); got != nil {
		t.Errorf("Evictions of stops that do not count = %+v, want nil", got)
	}
	if got := Evictions(nil, acts, at); got != nil {
		t.Errorf("Evictions without a tree = %+v, want nil", got)
	}
}

// TestRecentEvictions: evictions within (now - the largest per, now] of
// nodes of the tree are kept; none at all when no node has a budget.
func TestRecentEvictions(t *testing.T) {
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	ev := func(q string, ago time.Duration) Eviction { return Eviction{Quota: q, GPUs: 1, Time: now.Add(-ago)} }
	root := budgetTree() // window: 10m, Quota1.1's
	inOrder := []Eviction{ev("Quota1.2", 11*time.Minute), ev("Quota1.1", 10*time.Minute), ev("Quota1", 9*time.Minute),
		ev("Quota1.2", time.Minute), ev("Quota1.1", 0)}
	got := RecentEvictions(root, inOrder, now)
	if diff := cmp.Diff(inOrder[2:], got); diff != "" {
		t.Errorf("in time order (-want +got):\n%s", diff)
	}
	if len(got) > 0 && &got[0] != &inOrder[2] {
		t.Errorf("in time order: a copy, want a subslice")
	}
	mixed := []Eviction{ev("Quota1.1", time.Minute), ev("gone", time.Minute), ev("Quota1", -time.Second),
		ev("Quota1.2", 20*time.Minute), ev("Quota1.2", 2*time.Minute)}
	before := append([]Eviction(nil), mixed...)
	got = RecentEvictions(root, mixed, now)
	if diff := cmp.Diff([]Eviction{mixed[0], mixed[4]}, got); diff != "" {
		t.Errorf("a node no longer in the tree, a future time, out of order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, mixed); diff != "" {
		t.Errorf("evs was modified (-before +after):\n%s", diff)
	}
	if got := RecentEvictions(root, inOrder[:2], now); got != nil {
		t.Errorf("all too old = %+v, want nil", got)
	}
	root.MaxEvict, root.Children[0].MaxEvict = nil, nil
	if got := RecentEvictions(root, inOrder, now); got != nil {
		t.Errorf("no budget in the tree = %+v, want nil", got)
	}
}
