package act

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/gputide/gputide/quota-broker/nomad/build"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/nomad/api"
)

// StatusStopped is the gputide_status of a job the broker stopped by a timed
// rule (DESIGN L10.end, L11.max_run); gputide_reason gives the rule.
const StatusStopped = "stopped"

// calendar is what the Actor keeps of the stop_job actions (DESIGN L10.end,
// L11.max_run) between plans: the status meta still to write once a
// stopped job has no live allocation. It has its own lock: the Actor's mu
// is not held while it is used.
type calendar struct {
	mu sync.Mutex
	// stopped: jobs the broker stopped whole (stop_job), with the status
	// reason to write once they have no live allocation.
	stopped map[plan.JobKey]stoppedJob
}

// stoppedJob is a job the broker stopped whole: the status reason to write
// and the job's modify index when it was stopped (a job seen running again
// at another index was started again by its user).
type stoppedJob struct {
	reason string
	index  uint64
}

// stopJobs is step 1a of Execute: each stop_job action (rules L10.end,
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

// stopJob deregisters v's job without purge for act and remembers the
// status to write. It reports whether it called Nomad: a job already
// stopped (by Nomad's state or by an earlier plan) is not stopped again.
func (a *Actor) stopJob(ctx context.Context, v *build.JobView, act plan.Action) (bool, error) {
	reason := string(act.Rule) + ": " + act.Reason
	a.cal.mu.Lock()
	_, again := a.cal.stopped[v.Key]
	a.cal.mu.Unlock()
	if again || (v.Job.Stop != nil && *v.Job.Stop) {
		return false, nil
	}
	if a.DryRun {
		a.Logger.Info("dry run: would stop a job", "job", v.Key.String(), "rule", act.Rule, "reason", act.Reason)
		return false, nil
	}
	if err := a.beforeJob(ctx, v.Key, WriteStatus); err != nil { // only the leader acts (L12)
		return false, fmt.Errorf("not stopping job %s (%s): %w", v.Key, act.Rule, err)
	}
	ns, id := v.Key.Namespace, v.Key.Job
	if _, _, err := a.Client.Jobs().Deregister(id, false, (&api.WriteOptions{Namespace: ns}).WithContext(ctx)); err != nil {
		return false, fmt.Errorf("failed to stop job %s (%s): %w", v.Key, act.Rule, err)
	}
	a.cal.mu.Lock()
	if a.cal.stopped == nil {
		a.cal.stopped = map[plan.JobKey]stoppedJob{}
	}
	a.cal.stopped[v.Key] = stoppedJob{reason: reason, index: modifyIndex(v.Job)}
	a.cal.mu.Unlock()
	a.Logger.Info("stopped a job", "job", v.Key.String(), "rule", act.Rule, "reservation", act.Reservation, "reason", act.Reason)
	return true, nil
}

// queueStoppedStatus is step 5a of Execute: each job stopped by stop_job
// that has no live allocation left gets gputide_status = stopped and its
// reason, written in step 6 like the other status writes. A job gone from
// Nomad, or started again by its user, is forgotten.
func (x *execution) queueStoppedStatus() {
	a := x.a
	a.cal.mu.Lock()
	defer a.cal.mu.Unlock()
	for _, k := range slices.SortedFunc(maps.Keys(a.cal.stopped), plan.JobKey.Compare) {
		sj, v := a.cal.stopped[k], x.b.Jobs[k]
		switch {
		case v == nil:
			delete(a.cal.stopped, k) // gone from Nomad
			continue
		case v.Job.Stop == nil || !*v.Job.Stop:
			if modifyIndex(v.Job) != sj.index {
				delete(a.cal.stopped, k) // registered again by its user
			}
			continue
		case v.Live > 0:
			continue
		case v.Job.Meta[build.MetaStatus] == StatusStopped && v.Job.Meta[build.MetaReason] == sj.reason:
			delete(a.cal.stopped, k) // written
			continue
		}
		if _, queued := x.metaText[k]; !queued {
			x.metaJobs = append(x.metaJobs, v)
			x.metaText[k] = [2]string{StatusStopped, sj.reason}
		}
	}
}

func modifyIndex(j *api.Job) uint64 {
	if j == nil || j.JobModifyIndex == nil {
		return 0
	}
	return *j.JobModifyIndex
}

// suspendJobs is step 1b of Execute: each suspend action (rule L11.settle)
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

// countHolds is step 1c of Execute: the plan's hold actions are counted
// (Outcome.Held). The broker records them in its store before Execute
// (plan.MergeHold), and reads them back into every later snapshot.
func (x *execution) countHolds() {
	for _, act := range x.p.Actions {
		if _, ok := plan.HoldOfAction(act); ok {
			x.out.Held++
		}
	}
}
