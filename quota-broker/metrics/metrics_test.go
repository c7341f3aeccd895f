package metrics

import (
	"errors"
	"strings"
	"testing"

	"github.com/gputide/gputide/quota-broker/nomad/act"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
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
	}, nil)
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
	}, nil)
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
	}}, nil)
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

// TestObservePlanBorrowedShare: gputide_borrowed_share{quota,flavor} is
// each row's borrowed GPUs over the node's weight in the tree (DESIGN
// L14): the explicit weight of the flavor, else the nominal; a weight-0
// node that borrows has +Inf, one that does not 0. A second plan sets the
// gauges anew.
func TestObservePlanBorrowedShare(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	tree := &quota.Node{Name: "Quota1", GPUs: quota.Nominal{"h100": 16, "a100": 8}, Children: []*quota.Node{
		{Name: "Quota1.1", GPUs: quota.Nominal{"h100": 4, "a100": 4}, Weight: quota.Nominal{"h100": 2}},
		{Name: "Quota1.2", GPUs: quota.Nominal{"h100": 4, "a100": 4}, Weight: quota.Nominal{"h100": 0, "a100": 0}},
	}}
	m.ObservePlan(&plan.Plan{Usage: []plan.Usage{
		{Quota: "Quota1", Flavor: "h100", Nominal: 16, Used: 16},
		{Quota: "Quota1", Flavor: "a100", Nominal: 8, Used: 4},
		{Quota: "Quota1.1", Flavor: "h100", Nominal: 4, Used: 7, Borrowed: 3},
		{Quota: "Quota1.1", Flavor: "a100", Nominal: 4, Used: 6, Borrowed: 2},
		{Quota: "Quota1.2", Flavor: "h100", Nominal: 4, Used: 5, Borrowed: 1},
		{Quota: "Quota1.2", Flavor: "a100", Nominal: 4, Used: 0},
		{Quota: "Gone", Flavor: "h100", Nominal: 4, Used: 8, Borrowed: 4},
	}}, tree)
	want := `
# HELP gputide_borrowed_share Borrowed GPUs of the quota node's subtree divided by its weight (L14); +Inf for a weight-0 node that borrows.
# TYPE gputide_borrowed_share gauge
gputide_borrowed_share{flavor="a100",quota="Quota1"} 0
gputide_borrowed_share{flavor="a100",quota="Quota1.1"} 0.5
gputide_borrowed_share{flavor="a100",quota="Quota1.2"} 0
gputide_borrowed_share{flavor="h100",quota="Quota1"} 0
gputide_borrowed_share{flavor="h100",quota="Quota1.1"} 1.5
gputide_borrowed_share{flavor="h100",quota="Quota1.2"} +Inf
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gputide_borrowed_share"); err != nil {
		t.Fatal(err)
	}
	m.ObservePlan(&plan.Plan{Usage: []plan.Usage{{Quota: "Quota1.2", Flavor: "h100", Nominal: 4, Used: 4}}}, tree)
	if got := testutil.ToFloat64(m.BorrowedShare.WithLabelValues("Quota1.2", "h100")); got != 0 {
		t.Errorf("Quota1.2 h100 after it gave back: %v, want 0", got)
	}
}

// TestObserveOutcomeEvictedGPUs: gputide_evicted_gpus_total{quota,rule}
// adds the GPUs of each stop under a rule budgets count (DESIGN L14), by
// the quota node of the victim's namespace; a job's own terms (L10.end,
// L11.max_run) and a namespace of no node are not counted there.
func TestObserveOutcomeEvictedGPUs(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	tree := &quota.Node{Name: "Quota1", Namespaces: []string{"workspace-a"}, Children: []*quota.Node{
		{Name: "Quota1.1", Namespaces: []string{"workspace-b"}},
		{Name: "Quota1.2", Namespaces: []string{"workspace-c", "workspace-d"}},
	}}
	stop := func(ns string, gpus int, r plan.Rule) act.Stop {
		return act.Stop{Namespace: ns, Job: "j", Alloc: "a", GPUs: gpus, Rule: r}
	}
	m.ObserveOutcome(act.Outcome{Preempted: []act.Stop{
		stop("workspace-b", 2, plan.RuleFair), stop("workspace-b", 1, plan.RuleFair),
		stop("workspace-c", 4, plan.RuleIdleDebt), stop("workspace-d", 8, plan.RuleIdleDebt),
		stop("workspace-c", 1, plan.RuleChild), stop("workspace-a", 2, plan.RulePriority),
		stop("workspace-b", 3, plan.RulePrewarm), stop("workspace-c", 5, plan.RuleStart), stop("workspace-c", 6, plan.RuleDrain),
		stop("workspace-b", 7, plan.RuleEnd), stop("workspace-b", 9, plan.RuleFlexMaxRun),
		stop("workspace-z", 16, plan.RuleFair),
	}}, tree)
	want := `
# HELP gputide_evicted_gpus_total GPUs stopped as victims under a rule eviction budgets count (L14), by the victim's quota node.
# TYPE gputide_evicted_gpus_total counter
gputide_evicted_gpus_total{quota="Quota1",rule="L5.3"} 2
gputide_evicted_gpus_total{quota="Quota1.1",rule="L14.fair"} 3
gputide_evicted_gpus_total{quota="Quota1.1",rule="L5.prewarm"} 3
gputide_evicted_gpus_total{quota="Quota1.2",rule="L10.drain"} 6
gputide_evicted_gpus_total{quota="Quota1.2",rule="L10.start"} 5
gputide_evicted_gpus_total{quota="Quota1.2",rule="L5.1"} 12
gputide_evicted_gpus_total{quota="Quota1.2",rule="L5.2"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gputide_evicted_gpus_total"); err != nil {
		t.Fatal(err)
	}
}

// A quota node removed from the tree, or a flavor dropped, loses its
// series at the next plan instead of keeping its last value; the others
// keep theirs.
func TestObservePlanDropsTheSeriesOfNodesGone(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	tree, _, err := quota.Parse([]byte(`quota "Quota1" {
  gpus = 16
  quota "Quota1.1" {
    gpus = 8
    namespaces = ["a"]
  }
  quota "Quota1.2" {
    gpus = 8
    namespaces = ["b"]
  }
}`), "quota.hcl")
	if err != nil {
		t.Fatal(err)
	}
	m.ObservePlan(&plan.Plan{Usage: []plan.Usage{
		{Quota: "Quota1", Nominal: 16, Used: 10}, {Quota: "Quota1.1", Nominal: 8, Used: 6, Borrowed: 1},
		{Quota: "Quota1.2", Nominal: 8, Used: 4}}}, tree)
	m.ObservePlan(&plan.Plan{Usage: []plan.Usage{
		{Quota: "Quota1", Nominal: 16, Used: 7}, {Quota: "Quota1.1", Nominal: 8, Used: 7, Borrowed: 1}}}, tree)
	want := `
# HELP gputide_quota_used_gpus GPUs in use in the quota node's subtree.
# TYPE gputide_quota_used_gpus gauge
gputide_quota_used_gpus{flavor="gpu",quota="Quota1"} 7
gputide_quota_used_gpus{flavor="gpu",quota="Quota1.1"} 7
# HELP gputide_borrowed_share Borrowed GPUs of the quota node's subtree divided by its weight (L14); +Inf for a weight-0 node that borrows.
# TYPE gputide_borrowed_share gauge
gputide_borrowed_share{flavor="gpu",quota="Quota1"} 0
gputide_borrowed_share{flavor="gpu",quota="Quota1.1"} 0.125
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gputide_quota_used_gpus", "gputide_borrowed_share"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.QuotaNominal); n != 2 {
		t.Fatalf("%d nominal series after Quota1.2 is gone, want 2", n)
	}
}
