package build

import (
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/nomad/policies"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// prewarms is the Build step that turns schedule policies into the
// snapshot's pre-warm entries (DESIGN L5 "Pre-warm", issue 11 item 5):
// for each enabled policy with a gputide-schedule check whose target is a
// governed, running service or batch job (not idle) with a task group of
// that name that asks for GPUs, the first boundary in (now, now +
// drain_horizon] after which the schedule's count, once the boundary's
// ramp is done and capped at the policy's max (the Autoscaler never
// scales above it), is above the group's count now becomes an entry: at the
// boundary, count = that count minus the group's count, until = at +
// evaluation_interval (when unset, the agent's: the tree's
// autoscaler_evaluation_interval, else policies.DefaultEvaluationInterval) + settle,
// flavors = the job's (jobmeta.JobFlavors, DESIGN L13: the core drains it in one).
// Policies read from files never reach Policies, and a broker whose
// policies are not synced makes none: those get no pre-warm, and scaling
// goes on. A check whose config does not parse is skipped (the Autoscaler
// reports the same error on its Run).
func prewarms(pols *policies.Policies, jobs map[plan.JobKey]*JobView, now time.Time, set quota.Settings) []plan.Prewarm {
	scheds := pols.SchedulePolicies()
	if len(scheds) == 0 || !pols.Synced() {
		return nil
	}
	var out []plan.Prewarm
	for _, sp := range scheds {
		t, ok := scaledGroupOf(jobs, sp.Group)
		if !ok || t.view.Options.Idle || (t.typ != plan.JobService && t.typ != plan.JobBatch) {
			continue
		}
		v, j, typ, gpus, model, count := t.view, t.view.Job, t.typ, t.gpus, t.model, t.count
		at, target, ok := policies.RaisingBoundary(sp.Checks, now, set.DrainHorizon, count, sp.Max)
		if !ok {
			continue
		}
		eval := sp.EvaluationInterval
		if eval <= 0 {
			eval = set.AutoscalerEvaluationInterval
		}
		if eval <= 0 {
			eval = policies.DefaultEvaluationInterval
		}
		out = append(out, plan.Prewarm{Namespace: sp.Group.Namespace, Job: sp.Group.Job, Group: sp.Group.Group,
			Type: typ, Priority: jobmeta.Priority(j), GPUs: gpus, Model: model, Datacenters: jobmeta.Datacenters(j.Datacenters),
			NodePool: v.Options.Pool, At: at, Count: min(target-count, quota.MaxGPUs),
			Until: at.Add(eval + set.Settle), Flavors: v.Flavors})
	}
	return out
}
