package sim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/plan"
)

// evictionSpy is a policy that keeps the evictions of each snapshot it
// plans and the victim stops of each plan (DESIGN L14).
type evictionSpy struct {
	Policy
	seen  []seenEvictions
	stops []plan.Eviction // per plan and victim namespace's node, in plan order
	// planOf is the index in seen of the plan of each of stops.
	planOf []int
}

type seenEvictions struct {
	at  time.Time
	evs []plan.Eviction
}

// budgetRules are the rules whose stops budgets count (DESIGN L14).
var budgetRules = map[plan.Rule]bool{plan.RuleIdleDebt: true, plan.RuleChild: true, plan.RulePriority: true,
	plan.RulePrewarm: true, plan.RuleStart: true, plan.RuleDrain: true, plan.RuleFair: true}

// fairNodes are fairQuota's nodes by namespace.
var fairNodes = map[string]string{"workspace-a": "Quota1", "workspace-b": "Quota1.1", "workspace-c": "Quota1.2"}

func (p *evictionSpy) Plan(s *plan.Snapshot) (*plan.Plan, error) {
	p.seen = append(p.seen, seenEvictions{s.Time, slices.Clone(s.Evictions)})
	out, err := p.Policy.Plan(s)
	if out == nil {
		return out, err
	}
	first := len(p.stops)
	for _, act := range out.Actions {
		if act.Action != plan.ActionStop || !budgetRules[act.Rule] {
			continue
		}
		q := fairNodes[act.Namespace]
		if i := slices.IndexFunc(p.stops[first:], func(e plan.Eviction) bool { return e.Quota == q }); i >= 0 {
			p.stops[first+i].GPUs += act.GPUs
			continue
		}
		p.stops = append(p.stops, plan.Eviction{Quota: q, GPUs: act.GPUs, Time: s.Time})
		p.planOf = append(p.planOf, len(p.seen)-1)
	}
	return out, err
}

// The simulator gives the planner the victim stops its plans made, as
// the broker's history does (DESIGN L14, issue 19 item 3): in
// fairScenario (C's idle job at 01:00, A's job at 03:00 take B's GPUs),
// with a budget of per 30m on Quota1.1, every snapshot carries exactly
// the counted stops of the plans within the 30 minutes before it, by the
// victim's node; without a budget, none ever.
func TestSimulatorEvictions(t *testing.T) {
	budget := strings.Replace(fairQuota, "gpus       = 4\n", "gpus       = 4\n    max_evict  = { gpus = 16, per = \"30m\" }\n", 1)
	if budget == fairQuota {
		t.Fatal("no budget put into the tree")
	}
	run := func(quotaHCL string) *evictionSpy {
		t.Helper()
		sc, err := LoadFile(writeScenario(t, fairScenario, map[string]string{"quota.hcl": quotaHCL}))
		if err != nil {
			t.Fatal(err)
		}
		w, err := sc.Workload()
		if err != nil {
			t.Fatal(err)
		}
		spy := &evictionSpy{Policy: Gputide{}}
		r, err := Run(sc, w, Options{Policy: spy})
		if err != nil {
			t.Fatal(err)
		}
		noConflicts(t, r)
		return spy
	}
	spy := run(budget)
	if len(spy.stops) == 0 {
		t.Fatal("the plans stopped nothing a budget counts: the test shows nothing")
	}
	opt := cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })
	carried := 0
	for j, s := range spy.seen {
		var want []plan.Eviction // the earlier plans' stops within (at - 30m, at]
		for i, e := range spy.stops {
			if spy.planOf[i] < j && e.Time.After(s.at.Add(-30*time.Minute)) && !e.Time.After(s.at) {
				want = append(want, e)
			}
		}
		if len(want) > 0 {
			carried++
		}
		if diff := cmp.Diff(want, s.evs, opt); diff != "" {
			t.Errorf("snapshot at %s: evictions (-want +got):\n%s", s.at, diff)
		}
	}
	if carried == 0 {
		t.Errorf("no plan within 30m after the stops %+v: the test shows nothing", spy.stops)
	}
	for _, s := range run(fairQuota).seen {
		if s.evs != nil {
			t.Errorf("no budget: snapshot at %s has evictions %+v", s.at, s.evs)
		}
	}
}
