package sim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/plan"
)

// oneNode is a simulator of one 8-GPU node with one namespace, enough to
// place, stop and release allocations.
func oneNode() *sim {
	s := &sim{sc: &Scenario{Zone: time.UTC, Nodes: []NodeGroup{{Count: 1, GPUs: 8}}},
		nodeIndex: map[string]int{}, allocs: map[string]*alloc{}, nsIndex: map[string]int{"ns": 0},
		own: make([][3][2]int, 1), asked: make([]int, 1), jobByKey: map[plan.GroupKey]*job{}}
	s.res = &Result{}
	s.newCluster()
	return s
}

func (s *sim) testJob(name string, gpus int, idle bool) *job {
	spec := &JobSpec{Namespace: "ns", Name: name, Group: "g", Type: plan.JobService, GPUs: gpus, Count: 1, Idle: idle,
		KillTimeout: 30 * time.Second}
	j := s.newJob(spec)
	j.submitted, j.desired = true, 1
	return j
}

// A claimant placed on a node where a victim is stopping for it takes the
// victim's GPUs before free ones (DESIGN L7, as the planner's take does),
// so that a free GPU the planner counts for a later admission of the same
// plan is still free. Seed 2 of the reference week met this: an idle admit
// on node-07 at 2026-12-11 08:03:04 found no free GPU.
func TestPlaceTakesTheGPUsFreedForTheClaimantFirst(t *testing.T) {
	s := oneNode()
	other, victim := s.testJob("other", 3, false), s.testJob("victim", 4, true)
	claimant, idle := s.testJob("claimant", 4, false), s.testJob("idle", 1, true)
	if _, err := s.place(other, 0); err != nil {
		t.Fatal(err)
	}
	v, err := s.place(victim, 0)
	if err != nil {
		t.Fatal(err)
	}
	// GPUs 0-2 other, 3-6 the victim, 7 free; the victim stops for the claimant.
	s.stop(v, plan.RuleIdleDebt, claimant.key)
	c, err := s.place(claimant, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"GPU-01-3", "GPU-01-4", "GPU-01-5", "GPU-01-6"}, c.ids); diff != "" {
		t.Errorf("claimant's GPUs (-want +got):\n%s", diff)
	}
	if c.state != placing || c.waiting != 4 {
		t.Errorf("claimant: %s waiting for %d GPUs; want placing, waiting for 4", c.state, c.waiting)
	}
	a, err := s.place(idle, 0)
	if err != nil {
		t.Fatalf("the idle job on the free GPU: %v", err)
	}
	if diff := cmp.Diff([]string{"GPU-01-7"}, a.ids); diff != "" {
		t.Errorf("idle job's GPUs (-want +got):\n%s", diff)
	}
	s.gone(v)
	if c.state != running {
		t.Errorf("claimant %s after the victim is gone; want running", c.state)
	}
}
