// Package metrics holds the quota broker's Prometheus metrics. The agent
// feeds them from each plan (ObservePlan) and from what the Nomad adapter
// reports it did (ObserveOutcome); the adapter counts nothing itself.
package metrics

import (
	"sync"

	"github.com/gputide/gputide/quota-broker/nomad/act"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the broker's Prometheus metrics.
type Metrics struct {
	Preemptions    *prometheus.CounterVec // by rule, victim namespace, claimant namespace
	PreemptedGPUs  *prometheus.CounterVec // by rule
	Admissions     *prometheus.CounterVec // by namespace
	Suspensions    *prometheus.CounterVec // by namespace
	ActionErrors   *prometheus.CounterVec // by action
	Plans          prometheus.Counter
	PlanSeconds    prometheus.Histogram
	Connected      prometheus.Gauge
	StateAge       prometheus.Gauge // seconds
	MetaErrors     prometheus.Gauge
	QuotaNominal   *prometheus.GaugeVec // GPUs by quota and flavor (DESIGN L13)
	QuotaUsed      *prometheus.GaugeVec
	QuotaNonIdle   *prometheus.GaugeVec
	QuotaBorrowed  *prometheus.GaugeVec
	QuotaDebt      *prometheus.GaugeVec
	QuotaLendable  *prometheus.GaugeVec
	PendingJobs    prometheus.Gauge
	WaitingActions prometheus.Gauge
	CyclePanics    prometheus.Counter // cycles that panicked and were recovered
	// BorrowedShare is each quota node's borrowed share by flavor (DESIGN
	// L14: borrowed GPUs / weight; +Inf for a weight-0 node that borrows).
	BorrowedShare *prometheus.GaugeVec
	// EvictedGPUs counts the GPUs of the victim stops a budget counts
	// (plan.EvictionRule), by the victim's quota node and rule.
	EvictedGPUs *prometheus.CounterVec

	mu sync.Mutex
	// quotaSeries are the {quota, flavor} label pairs the last
	// ObservePlan set, so that the next drops those its plan no longer has
	// (a quota node removed from the tree, a flavor dropped).
	quotaSeries map[[2]string]bool
}

// New creates the metrics and registers them with reg (when not nil).
func New(reg prometheus.Registerer) *Metrics {
	q := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gputide_quota_" + name, Help: help}, []string{"quota", "flavor"})
	}
	m := &Metrics{
		Preemptions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gputide_preemptions_total",
			Help: "Allocations the broker stopped for a claimant."}, []string{"rule", "namespace", "claimant_namespace"}),
		PreemptedGPUs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gputide_preempted_gpus_total",
			Help: "GPUs freed by preemption."}, []string{"rule"}),
		Admissions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gputide_admissions_total",
			Help: "Jobs moved from the holding pool to their pool."}, []string{"namespace"}),
		Suspensions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gputide_suspensions_total",
			Help: "Jobs moved to the holding pool."}, []string{"namespace"}),
		ActionErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gputide_action_errors_total",
			Help: "Nomad calls of a plan that failed."}, []string{"action"}),
		Plans: prometheus.NewCounter(prometheus.CounterOpts{Name: "gputide_plans_total", Help: "Plans computed."}),
		PlanSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gputide_plan_seconds",
			Help: "Time to build a snapshot and compute its plan, in seconds.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		Connected: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gputide_nomad_connected",
			Help: "1 while the broker's view of Nomad is current, else 0."}),
		StateAge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gputide_state_age_seconds",
			Help: "Seconds since the state was last known to match Nomad."}),
		MetaErrors: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gputide_job_meta_errors",
			Help: "Governed jobs left unadmitted because of a bad gputide meta value."}),
		QuotaNominal:  q("nominal_gpus", "Nominal GPUs of the quota node."),
		QuotaUsed:     q("used_gpus", "GPUs in use in the quota node's subtree."),
		QuotaNonIdle:  q("nonidle_gpus", "Non-idle GPUs in use in the subtree."),
		QuotaBorrowed: q("borrowed_gpus", "GPUs borrowed by the subtree (L4)."),
		QuotaDebt:     q("debt_gpus", "Over-quota debt of the node's namespaces (L9)."),
		QuotaLendable: q("lendable_gpus", "GPUs the node can lend (L4)."),
		PendingJobs: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gputide_pending_allocations",
			Help: "Allocations of governed jobs waiting to be placed."}),
		WaitingActions: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gputide_waiting_groups",
			Help: "Task groups the last plan left waiting."}),
		CyclePanics: prometheus.NewCounter(prometheus.CounterOpts{Name: "gputide_cycle_panics_total",
			Help: "Broker cycles (planning or any other step) that panicked; the broker recovered and stopped acting until a plan succeeded."}),
		BorrowedShare: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gputide_borrowed_share",
			Help: "Borrowed GPUs of the quota node's subtree divided by its weight (L14); +Inf for a weight-0 node that borrows."}, []string{"quota", "flavor"}),
		EvictedGPUs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gputide_evicted_gpus_total",
			Help: "GPUs stopped as victims under a rule eviction budgets count (L14), by the victim's quota node."}, []string{"quota", "rule"}),
	}
	if reg != nil {
		reg.MustRegister(m.Preemptions, m.PreemptedGPUs, m.Admissions, m.Suspensions, m.ActionErrors, m.Plans,
			m.PlanSeconds, m.Connected, m.StateAge, m.MetaErrors, m.QuotaNominal, m.QuotaUsed, m.QuotaNonIdle,
			m.QuotaBorrowed, m.QuotaDebt, m.QuotaLendable, m.PendingJobs, m.WaitingActions, m.CyclePanics,
			m.BorrowedShare, m.EvictedGPUs)
	}
	return m
}

// ObservePlan sets the per-quota gauges from a plan's usage: one series
// per quota node and flavor, {quota="Q",flavor="F"}, in GPUs, and each
// node's borrowed share (DESIGN L14: the row's borrowed GPUs over the
// node's weight in tree, plan.Weight; a row of a node not in tree, or a
// nil tree, sets none). The series of a quota node and flavor the plan
// no longer has (a node removed from the tree, a flavor dropped) are
// deleted, not left at their last value.
func (m *Metrics) ObservePlan(p *plan.Plan, tree *quota.Node) {
	if m == nil || p == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	nodes := map[string]*quota.Node{}
	tree.Walk(func(n *quota.Node) { nodes[n.Name] = n })
	waiting := 0
	for _, a := range p.Actions {
		if a.Action == plan.ActionWait {
			waiting++
		}
	}
	m.WaitingActions.Set(float64(waiting))
	// One row per quota node and flavor (DESIGN L13), each its own series
	// labelled flavor; a tree without flavor blocks has rows of flavor "",
	// labelled "gpu" (the implicit flavor) as the snapshot writes them.
	series := make(map[[2]string]bool, len(p.Usage))
	for _, u := range p.Usage {
		fl := u.Flavor
		if fl == "" {
			fl = quota.ImplicitFlavor
		}
		series[[2]string{u.Quota, fl}] = true
		m.QuotaNominal.WithLabelValues(u.Quota, fl).Set(float64(u.Nominal))
		m.QuotaUsed.WithLabelValues(u.Quota, fl).Set(float64(u.Used))
		m.QuotaNonIdle.WithLabelValues(u.Quota, fl).Set(float64(u.NonIdle))
		m.QuotaBorrowed.WithLabelValues(u.Quota, fl).Set(float64(u.Borrowed))
		m.QuotaDebt.WithLabelValues(u.Quota, fl).Set(float64(u.Debt))
		m.QuotaLendable.WithLabelValues(u.Quota, fl).Set(float64(u.Lendable))
		if n := nodes[u.Quota]; n != nil {
			w, _ := plan.Weight(n, fl)
			m.BorrowedShare.WithLabelValues(u.Quota, fl).Set(plan.BorrowedShare(u.Borrowed, w))
		} else {
			m.BorrowedShare.DeleteLabelValues(u.Quota, fl)
		}
	}
	for k := range m.quotaSeries {
		if !series[k] {
			m.deleteQuotaSeries(k[0], k[1])
		}
	}
	m.quotaSeries = series
}

// deleteQuotaSeries deletes the per-quota series of quota node q and
// flavor fl.
func (m *Metrics) deleteQuotaSeries(q, fl string) {
	for _, g := range []*prometheus.GaugeVec{m.QuotaNominal, m.QuotaUsed, m.QuotaNonIdle, m.QuotaBorrowed, m.QuotaDebt,
		m.QuotaLendable, m.BorrowedShare} {
		g.DeleteLabelValues(q, fl)
	}
}

// ObserveOutcome counts what one act.Actor.Execute did: each preemption
// (by rule, victim namespace and claimant namespace) and its GPUs, the GPUs
// of each stop a budget counts (plan.EvictionRule) by the quota node tree
// binds the victim's namespace to (quota.Namespaces; a namespace of no
// node is not counted there), each job moved to its pool (admission) or to
// the holding pool (suspension, a victim's job included), and each failed
// call by action. tree is the quota tree of the plan carried out.
func (m *Metrics) ObserveOutcome(o act.Outcome, tree *quota.Node) {
	if m == nil {
		return
	}
	var nsNode map[string]string
	for _, s := range o.Preempted {
		m.Preemptions.WithLabelValues(string(s.Rule), s.Namespace, s.Claimant.Namespace).Inc()
		m.PreemptedGPUs.WithLabelValues(string(s.Rule)).Add(float64(s.GPUs))
		if !plan.EvictionRule(s.Rule) {
			continue
		}
		if nsNode == nil {
			nsNode = quota.Namespaces(tree)
		}
		if q, ok := nsNode[s.Namespace]; ok {
			m.EvictedGPUs.WithLabelValues(q, string(s.Rule)).Add(float64(s.GPUs))
		}
	}
	for _, mv := range o.Moves {
		if mv.Admission {
			m.Admissions.WithLabelValues(mv.Namespace).Inc()
		} else {
			m.Suspensions.WithLabelValues(mv.Namespace).Inc()
		}
	}
	for _, action := range o.Failed {
		m.ActionErrors.WithLabelValues(action).Inc()
	}
}
