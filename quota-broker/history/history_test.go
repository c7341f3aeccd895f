package history

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/nomad/act"
	"github.com/gputide/gputide/quota-broker/plan"
)

func TestAddOutcomeRecordsEveryStopInOrder(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var r Recorder
	r.AddOutcome(act.Outcome{Preempted: []act.Stop{
		{Time: t0, Claimant: plan.GroupKey{Namespace: "workspace-b", Job: "training", Group: "worker"}, Namespace: "workspace-c", Job: "training", Alloc: "a1", Node: "n1",
			GPUs: 2, Rule: plan.RuleChild, Reason: "r1"},
		{Time: t0, Claimant: plan.GroupKey{Namespace: "workspace-b", Job: "training", Group: "worker"}, Namespace: "workspace-c", Job: "training", Alloc: "a2", Node: "n1",
			GPUs: 2, Rule: plan.RuleChild, Reason: "r2"},
	}, Moves: []act.Move{{Namespace: "workspace-c", Job: "training", Pool: "gputide-queue"}}})
	want := []Preemption{
		{Time: t0, Claimant: plan.GroupKey{Namespace: "workspace-b", Job: "training", Group: "worker"}, Namespace: "workspace-c", Job: "training", Alloc: "a1", Node: "n1",
			GPUs: 2, Rule: plan.RuleChild, Reason: "r1"},
		{Time: t0, Claimant: plan.GroupKey{Namespace: "workspace-b", Job: "training", Group: "worker"}, Namespace: "workspace-c", Job: "training", Alloc: "a2", Node: "n1",
			GPUs: 2, Rule: plan.RuleChild, Reason: "r2"},
	}
	if diff := cmp.Diff(want, r.List()); diff != "" {
		t.Fatalf("record (-want +got):\n%s", diff)
	}
}

func TestRecorderKeepsTheNewestMax(t *testing.T) {
	r := Recorder{Max: 3}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		r.Add(Preemption{Alloc: id})
	}
	var got []string
	for _, p := range r.List() {
		got = append(got, p.Alloc)
	}
	if diff := cmp.Diff([]string{"c", "d", "e"}, got); diff != "" {
		t.Fatalf("kept (-want +got):\n%s", diff)
	}
}
