package build

import (
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/scalingpolicy"
	"github.com/gputide/gputide/quota-broker/schedule"
)

// DefaultEvaluationInterval is the Nomad Autoscaler's evaluation_interval
// when a policy sets none and the tree's settings do not say the agent's
// (autoscaler_evaluation_interval): the Autoscaler v0.5.0 agent's own
// default_evaluation_interval. The pre-warm hold lasts at + this + settle
// then.
const DefaultEvaluationInterval = quota.DefaultAutoscalerEvaluationInterval

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
// autoscaler_evaluation_interval, else DefaultEvaluationInterval) + settle,
// flavors = the job's (JobFlavors, DESIGN L13: the core drains it in one).
// Policies read from files never reach Policies, and a broker whose
// policies are not synced makes none: those get no pre-warm, and scaling
// goes on. A check whose config does not parse is skipped (the Autoscaler
// reports the same error on its Run).
func prewarms(pols *Policies, jobs map[plan.JobKey]*JobView, now time.Time, set quota.Settings) []plan.Prewarm {
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
		at, target, ok := raisingBoundary(sp.Checks, now, set.DrainHorizon, count, sp.Max)
		if !ok {
			continue
		}
		eval := sp.EvaluationInterval
		if eval <= 0 {
			eval = set.AutoscalerEvaluationInterval
		}
		if eval <= 0 {
			eval = DefaultEvaluationInterval
		}
		out = append(out, plan.Prewarm{Namespace: sp.Group.Namespace, Job: sp.Group.Job, Group: sp.Group.Group,
			Type: typ, Priority: prio(j), GPUs: gpus, Model: model, Datacenters: datacenters(j.Datacenters),
			NodePool: v.Options.Pool, At: at, Count: min(target-count, quota.MaxGPUs),
			Until: at.Add(eval + set.Settle), Flavors: v.Flavors})
	}
	return out
}

// raisingBoundary returns the first boundary of the policy's first
// gputide-schedule check in (now, now + horizon] whose count after its
// ramp (the count at the boundary + ramp, or at the boundary without one),
// capped at the policy's max (the Autoscaler v0.5.0 clamps a strategy's
// count to the policy's [min, max] before it scales), is above current,
// with that count. ok is false when there is none, or the check's config
// does not parse.
func raisingBoundary(checks []scalingpolicy.Check, now time.Time, horizon time.Duration, current int, maxCount int64) (time.Time, int, bool) {
	for _, c := range checks {
		if c.Strategy != scalingpolicy.ScheduleStrategy {
			continue
		}
		s, err := schedule.Parse(c.Config)
		if err != nil {
			return time.Time{}, 0, false
		}
		end := now.Add(horizon)
		for t := now; ; {
			at, n, ok := s.NextBoundary(t)
			if !ok || at.After(end) {
				return time.Time{}, 0, false
			}
			if s.Ramp() > 0 {
				n = max(n, s.CountAt(at.Add(s.Ramp())))
			}
			n = int(min(int64(n), maxCount))
			if n > current {
				return at.UTC(), n, true
			}
			t = at
		}
	}
	return time.Time{}, 0, false
}
