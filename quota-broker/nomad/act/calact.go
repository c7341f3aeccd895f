package act

import (
	"context"
	"fmt"
	"slices"

	"github.com/gputide/gputide/quota-broker/nomad/build"

	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/nomad/api"
)

// StatusStopped is the gputide_status of a job the broker stopped by a timed
// rule (DESIGN L10.end, L11.max_run); gputide_reason gives the rule.
const StatusStopped = "stopped"

// stopJobs is step 2a of Execute: each stop_job action (rules L10.end,
// L11.max_run) stops its whole job (job deregister, no purge: Nomad sends
// each task its kill signal and kill_timeout, the job keeps its spec), once
// per job; the status is written by queueStoppedStatus once the job has no
// live allocation.
func (x *execution) stopJobs(ctx context.Context) {
	done := map[plan.JobKey]bool{}
	for _, act := range x.p.Actions {
		k := plan.JobKey{Namespace: act.Namespace, Job: act.Job}
		if act.Action != plan.ActionStopJob || done[k] {
			continue
		}
		done[k] = true
		v := x.b.Jobs[k]
		if v == nil {
			continue
		}
		stopped, err := x.a.stopJob(ctx, v, act)
		if err != nil {
			x.fail("stop_job", err)
			continue
		}
		if stopped {
			x.out.JobsStopped++
		}
	}
}

// stopJob deregisters v's job without purge for act. The status to write
// once its allocations are gone is recorded first, through the Fence (the
// broker's store: jobs/<ns>/<job>.stopped), and comes back in every later
// build as JobView.Stopped: the Actor keeps none of it (issue 18). It
// reports whether it called Nomad: a job already stopped (by Nomad's state
// or by an earlier plan, this broker's or its predecessor's) is not stopped
// again.
func (a *Actor) stopJob(ctx context.Context, v *build.JobView, act plan.Action) (bool, error) {
	if !v.Stopped.IsZero() || (v.Job.Stop != nil && *v.Job.Stop) {
		return false, nil
	}
	if a.DryRun {
		a.Logger.Info("dry run: would stop a job", "job", v.Key.String(), "rule", act.Rule, "reason", act.Reason)
		return false, nil
	}
	st := build.StopStatus{Reason: string(act.Rule) + ": " + act.Reason, JobModifyIndex: modifyIndex(v.Job)}
	if err := a.beforeStopJob(ctx, v.Key, st); err != nil { // only the leader acts (L12)
		return false, fmt.Errorf("not stopping job %s (%s): %w", v.Key, act.Rule, err)
	}
	ns, id := v.Key.Namespace, v.Key.Job
	if _, _, err := a.Client.Jobs().Deregister(id, false, (&api.WriteOptions{Namespace: ns}).WithContext(ctx)); err != nil {
		return false, fmt.Errorf("failed to stop job %s (%s): %w", v.Key, act.Rule, err)
	}
	a.Logger.Info("stopped a job", "job", v.Key.String(), "rule", act.Rule, "reservation", act.Reservation, "reason", act.Reason)
	return true, nil
}

// queueStoppedStatus is step 6a of Execute: each job stopped whole by the
// broker (JobView.Stopped) that has no live allocation left gets
// gputide_status = stopped and its reason, written in step 7 like the
// other status writes (and then forgotten, through the Fence). A job
// started again by its user, or whose status is already written, is
// forgotten; a job gone from Nomad has its whole record dropped by the
// broker.
func (x *execution) queueStoppedStatus(ctx context.Context) {
	var stopped []plan.JobKey // few among thousands: only they are sorted
	for k, v := range x.b.Jobs {
		if !v.Stopped.IsZero() {
			stopped = append(stopped, k)
		}
	}
	slices.SortFunc(stopped, plan.JobKey.Compare)
	for _, k := range stopped {
		v := x.b.Jobs[k]
		st := v.Stopped
		switch {
		case v.Job.Stop == nil || !*v.Job.Stop:
			if modifyIndex(v.Job) != st.JobModifyIndex {
				x.a.forgetStop(ctx, k) // registered again by its user
			}
			continue
		case v.Live > 0:
			continue
		case v.Job.Meta[jobmeta.MetaStatus] == StatusStopped && v.Job.Meta[jobmeta.MetaReason] == st.Reason:
			x.a.forgetStop(ctx, k) // written
			continue
		}
		if _, queued := x.metaText[k]; !queued {
			x.metaJobs = append(x.metaJobs, v)
			x.metaText[k] = [2]string{StatusStopped, st.Reason}
		}
	}
}

func modifyIndex(j *api.Job) uint64 {
	if j == nil || j.JobModifyIndex == nil {
		return 0
	}
	return *j.JobModifyIndex
}

// suspendJobs is step 2b of Execute: each suspend action (rule L11.settle)
// suspends its whole job as a straight registration is suspended (moved to
// the holding pool, live allocations stopped; the Fence records when it was
// queued again).
func (x *execution) suspendJobs(ctx context.Context) {
	done := map[plan.JobKey]bool{}
	for _, act := range x.p.Actions {
		k := plan.JobKey{Namespace: act.Namespace, Job: act.Job}
		if act.Action != plan.ActionSuspend || done[k] {
			continue
		}
		done[k] = true
		v := x.b.Jobs[k]
		if v == nil || v.Holding {
			continue
		}
		moved, err := x.a.suspend(ctx, v, string(act.Rule)+": "+act.Reason)
		if moved {
			x.moved(Move{Namespace: k.Namespace, Job: k.Job, Pool: x.a.holding()})
		}
		if err != nil {
			x.fail("suspend", err)
			continue
		}
		if moved {
			x.out.JobsSuspended++
		}
	}
}

// countHolds is step 2c of Execute: the plan's hold actions are counted
// (Outcome.Held). The broker records them in its store before Execute
// (plan.MergeHold), and reads them back into every later snapshot.
func (x *execution) countHolds() {
	for _, act := range x.p.Actions {
		if _, ok := plan.HoldOfAction(act); ok {
			x.out.Held++
		}
	}
}
