package metrics

import (
	"errors"
	"strings"
	"testing"

	"github.com/gputide/gputide/quota-broker/nomad/act"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// ObserveOutcome counts what the adapter reported, under the metric names
// the broker has always exported.
func TestObserveOutcomeCountsWhatTheAdapterDid(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.ObserveOutcome(act.Outcome{
		Preempted: []act.Stop{
			{Claimant: plan.GroupKey{Namespace: "workspace-b", Job: "training", Group: "worker"}, Namespace: "workspace-c", Job: "training", Alloc: "a1", GPUs: 2, Rule: plan.RuleChild},
			{Claimant: plan.GroupKey{Namespace: "workspace-b", Job: "training", Group: "worker"}, Namespace: "workspace-c", Job: "training", Alloc: "a2", GPUs: 2, Rule: plan.RuleChild},
			{Claimant: plan.GroupKey{Namespace: "workspace-a", Job: "inference", Group: "server"}, Namespace: "workspace-b", Job: "train", Alloc: "a3", GPUs: 8, Rule: plan.RuleIdleDebt},
		},
		Moves: []act.Move{
			{Namespace: "workspace-c", Job: "training", Pool: "gputide-queue"},
			{Namespace: "workspace-b", Job: "training", Pool: "default", Admission: true},
		},
		Failed: []string{"admit", "meta", "admit"},
		Errors: []error{errors.New("x"), errors.New("y"), errors.New("z")},
	})
	want := `
# HELP gputide_action_errors_total Nomad calls of a plan that failed.
# TYPE gputide_action_errors_total counter
gputide_action_errors_total{action="admit"} 2
gputide_action_errors_total{action="meta"} 1
# HELP gputide_admissions_total Jobs moved from the holding pool to their pool.
# TYPE gputide_admissions_total counter
gputide_admissions_total{namespace="workspace-b"} 1
# HELP gputide_preempted_gpus_total GPUs freed by preemption.
# TYPE gputide_preempted_gpus_total counter
gputide_preempted_gpus_total{rule="L5.1"} 8
gputide_preempted_gpus_total{rule="L5.2"} 4
# HELP gputide_preemptions_total Allocations the broker stopped for a claimant.
# TYPE gputide_preemptions_total counter
gputide_preemptions_total{claimant_namespace="workspace-a",namespace="workspace-b",rule="L5.1"} 1
gputide_preemptions_total{claimant_namespace="workspace-b",namespace="workspace-c",rule="L5.2"} 2
# HELP gputide_suspensions_total Jobs moved to the holding pool.
# TYPE gputide_suspensions_total counter
gputide_suspensions_total{namespace="workspace-c"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gputide_action_errors_total", "gputide_admissions_total",
		"gputide_preempted_gpus_total", "gputide_preemptions_total", "gputide_suspensions_total"); err != nil {
		t.Fatal(err)
	}
}

func TestObservePlanSetsTheQuotaGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.ObservePlan(&plan.Plan{
		Actions: []plan.Action{{Action: plan.ActionWait}, {Action: plan.ActionAdmit}, {Action: plan.ActionWait}},
		Usage:   []plan.Usage{{Quota: "Quota1", Nominal: 8, Used: 6, NonIdle: 4, Borrowed: 1, Debt: 2, Lendable: 3}},
	})
	want := `
# HELP gputide_quota_used_gpus GPUs in use in the quota node's subtree.
# TYPE gputide_quota_used_gpus gauge
gputide_quota_used_gpus{flavor="gpu",quota="Quota1"} 6
# HELP gputide_quota_debt_gpus Over-quota debt of the node's namespaces (L9).
# TYPE gputide_quota_debt_gpus gauge
gputide_quota_debt_gpus{flavor="gpu",quota="Quota1"} 2
# HELP gputide_waiting_groups Task groups the last plan left waiting.
# TYPE gputide_waiting_groups gauge
gputide_waiting_groups 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gputide_quota_used_gpus", "gputide_quota_debt_gpus", "gputide_waiting_groups"); err != nil {
		t.Fatal(err)
	}
}

// TestObservePlanLabelsEachFlavor: with flavors the plan has a row per
// quota node and flavor (DESIGN L13); each is its own series, labelled
// flavor, and a flavor's figure never leaks into another's.
func TestObservePlanLabelsEachFlavor(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.ObservePlan(&plan.Plan{Usage: []plan.Usage{
		{Quota: "Quota1", Flavor: "h100", Nominal: 16, Used: 12, Borrowed: 0},
		{Quota: "Quota1", Flavor: "a100", Nominal: 32, Used: 5},
		{Quota: "Quota1.1", Flavor: "h100", Nominal: 4, Used: 10, Borrowed: 6},
		{Quota: "Quota1.1", Flavor: "a100", Nominal: 8, Used: 0},
	}})
	want := `
# HELP gputide_quota_used_gpus GPUs in use in the quota node's subtree.
# TYPE gputide_quota_used_gpus gauge
gputide_quota_used_gpus{flavor="a100",quota="Quota1"} 5
gputide_quota_used_gpus{flavor="a100",quota="Quota1.1"} 0
gputide_quota_used_gpus{flavor="h100",quota="Quota1"} 12
gputide_quota_used_gpus{flavor="h100",quota="Quota1.1"} 10
# HELP gputide_quota_borrowed_gpus GPUs borrowed by the subtree (L4).
# TYPE gputide_quota_borrowed_gpus gauge
gputide_quota_borrowed_gpus{flavor="a100",quota="Quota1"} 0
gputide_quota_borrowed_gpus{flavor="a100",quota="Quota1.1"} 0
gputide_quota_borrowed_gpus{flavor="h100",quota="Quota1"} 0
gputide_quota_borrowed_gpus{flavor="h100",quota="Quota1.1"} 6
# HELP gputide_quota_nominal_gpus Nominal GPUs of the quota node.
# TYPE gputide_quota_nominal_gpus gauge
gputide_quota_nominal_gpus{flavor="a100",quota="Quota1"} 32
gputide_quota_nominal_gpus{flavor="a100",quota="Quota1.1"} 8
gputide_quota_nominal_gpus{flavor="h100",quota="Quota1"} 16
gputide_quota_nominal_gpus{flavor="h100",quota="Quota1.1"} 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gputide_quota_used_gpus", "gputide_quota_borrowed_gpus", "gputide_quota_nominal_gpus"); err != nil {
		t.Fatal(err)
	}
}
