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
// plans (DESIGN L14).
type evictionSpy struct {
	Policy
	seen []seenEvictions
	// stopped sums the GPUs of workspace-b's allocations the plans
	// stopped, by the plan's time.
	stopped map[time.Time]int
}

type seenEvictions struct {
	at  time.Time
	evs []plan.Eviction
}

func (p *evictionSpy) Plan(s *plan.Snapshot) (*plan.Plan, error) {
	p.seen = append(p.seen, seenEvictions{s.Time, slices.Clone(s.Evictions)})
	out, err := p.Policy.Plan(s)
	if out != nil {
		for _, act := range out.Actions {
			if act.Action == plan.ActionStop && act.Namespace == "workspace-b" {
				if p.stopped == nil {
					p.stopped = map[time.Time]int{}
				}
				p.stopped[s.Time.UTC()] += act.GPUs
			}
		}
	}
	return out, err
}

// The simulator gives the planner the victim stops its plans made, as
// the broker's history does (DESIGN L14, issue 19 item 3): in
// fairScenario team A's job takes B's GPUs at 03:00 (L5.1: the plan stops
// all 16 of B's idle allocations of 1 GPU); with a budget of per 30m on
// Quota1.1 every snapshot from then to 03:30 carries Quota1.1's GPUs
// stopped at 03:00, none before or after; without a budget, none ever.
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
	zone, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 7, 3, 0, 0, 0, zone)
	if len(spy.stopped) != 1 || spy.stopped[at.UTC()] == 0 {
		t.Fatalf("workspace-b's GPUs stopped by plan time: %v, want some at %s only", spy.stopped, at)
	}
	want := []plan.Eviction{{Quota: "Quota1.1", GPUs: spy.stopped[at.UTC()], Time: at}}
	opt := cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })
	within := 0
	for _, s := range spy.seen {
		switch {
		case s.at.After(at) && s.at.Before(at.Add(30*time.Minute)):
			within++
			if diff := cmp.Diff(want, s.evs, opt); diff != "" {
				t.Errorf("snapshot at %s: evictions (-want +got):\n%s", s.at, diff)
			}
		case s.evs != nil:
			t.Errorf("snapshot at %s: evictions %+v, want none (before the stops or 30m after)", s.at, s.evs)
		}
	}
	if within == 0 {
		t.Errorf("no plan within 30m after the stops at %s: the test shows nothing (plans at %v)", at, spy.seen)
	}
	for _, s := range run(fairQuota).seen {
		if s.evs != nil {
			t.Errorf("no budget: snapshot at %s has evictions %+v", s.at, s.evs)
		}
	}
}
