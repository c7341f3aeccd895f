package act

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/gputide/gputide/quota-broker/nomad/watch"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/nomad/api"
)

// StatusStopped is the gputide_status of a job the broker stopped by a timed
// rule (DESIGN L10.end, L11.max_run); gputide_reason gives the rule.
const StatusStopped = "stopped"

// calendar is what the Actor remembers of the Calendar and Flex actions
// (DESIGN L10, L11) between plans. It has its own lock: the Actor's mu is
// not held while it is used.
type calendar struct {
	mu sync.Mutex
	// stopped: jobs the broker stopped whole (stop_job), with the status
	// reason to write once they have no live allocation.
	stopped map[plan.JobKey]stoppedJob
	// requeued: when each job suspended by L11.settle was queued again.
	requeued map[plan.JobKey]time.Time
	// holds: the holds of the plans' hold actions, by owner, one per node.
	holds map[plan.HoldOwner][]plan.Hold
	// admitted: when the broker admitted each job (AdmittedAt).
	admitted map[plan.JobKey]time.Time
	// stoppingFor: allocations stopped for a reservation (rules L10.drain,
	// L10.start), alloc ID -> reservation ID.
	stoppingFor map[string]string
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
	a.mu.Lock()
	delete(a.accepted, v.Key)
	a.mu.Unlock()
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
// the holding pool, live allocations stopped) and notes when it was queued
// again (Requeued).
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
			x.a.cal.mu.Lock()
			if x.a.cal.requeued == nil {
				x.a.cal.requeued = map[plan.JobKey]time.Time{}
			}
			x.a.cal.requeued[k] = x.b.Snapshot.Time
			delete(x.a.cal.admitted, k) // admitted again later, counted from then
			x.a.cal.mu.Unlock()
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

// Requeued returns when the broker last queued the job again (rule
// L11.settle), or the zero time.
func (a *Actor) Requeued(k plan.JobKey) time.Time {
	a.cal.mu.Lock()
	defer a.cal.mu.Unlock()
	return a.cal.requeued[k]
}

// keepHolds is step 1c of Execute: the plan's hold actions are kept in
// memory, by owner and node (GPU IDs merged, the later Until kept), and
// given back by Holds until they end.
func (x *execution) keepHolds() {
	a := x.a
	a.cal.mu.Lock()
	defer a.cal.mu.Unlock()
	for _, act := range x.p.Actions {
		h, ok := HoldAction(act)
		if !ok {
			continue
		}
		if a.cal.holds == nil {
			a.cal.holds = map[plan.HoldOwner][]plan.Hold{}
		}
		a.cal.holds[h.For] = MergeHold(a.cal.holds[h.For], h)
		x.out.Held++
	}
}

// HoldAction returns the hold of a plan's hold action (DESIGN L10 drain,
// L5 pre-warm): owner the reservation, else the claimant (For); ok false
// for another action or one without an owner, a node or GPUs.
func HoldAction(act plan.Action) (h plan.Hold, ok bool) {
	if act.Action != plan.ActionHold {
		return plan.Hold{}, false
	}
	owner := plan.HoldOwner{Reservation: act.Reservation}
	if owner.Reservation == "" {
		owner.Group = act.For
	}
	if owner.IsZero() || act.Node == "" || len(act.GPUIDs) == 0 {
		return plan.Hold{}, false
	}
	return plan.Hold{For: owner, Node: act.Node, GPUIDs: slices.Clone(act.GPUIDs), Until: act.Until}, true
}

// MergeHold adds h to hs, the holds of one owner: on a node already held
// its GPUs are added (sorted, once) and the later Until kept. The agent's
// store records (holds/<owner>) merge the same way.
func MergeHold(hs []plan.Hold, h plan.Hold) []plan.Hold {
	for i := range hs {
		if hs[i].Node != h.Node {
			continue
		}
		ids := append(slices.Clone(hs[i].GPUIDs), h.GPUIDs...)
		slices.Sort(ids)
		hs[i].GPUIDs = slices.Compact(ids)
		if h.Until.After(hs[i].Until) {
			hs[i].Until = h.Until
		}
		return hs
	}
	slices.Sort(h.GPUIDs)
	return append(hs, h)
}

// Holds returns the holds the Actor keeps that have not ended at now,
// sorted by owner then node, for plan.Snapshot.Holds; the ended ones are
// dropped. A hold ends at lasts(h) (nil: its Until). The core keeps a
// reservation's hold past its Until, lending its GPUs to idle jobs until
// the reservation ends (DESIGN L10), so the agent's lasts gives such a
// hold its reservation's end.
func (a *Actor) Holds(now time.Time, lasts func(plan.Hold) time.Time) []plan.Hold {
	if lasts == nil {
		lasts = func(h plan.Hold) time.Time { return h.Until }
	}
	a.cal.mu.Lock()
	defer a.cal.mu.Unlock()
	var out []plan.Hold
	for owner, hs := range a.cal.holds {
		hs = slices.DeleteFunc(hs, func(h plan.Hold) bool { return !lasts(h).After(now) })
		if len(hs) == 0 {
			delete(a.cal.holds, owner)
			continue
		}
		a.cal.holds[owner] = hs
		for _, h := range hs {
			h.GPUIDs = slices.Clone(h.GPUIDs)
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(p, q plan.Hold) int {
		return cmp.Or(cmp.Compare(p.For.Reservation, q.For.Reservation), p.For.Group.Compare(q.For.Group), cmp.Compare(p.Node, q.Node))
	})
	return out
}

// noteReservationStop remembers an allocation stopped for a reservation
// (act.Reservation set, For zero: rules L10.drain, L10.start), so that the
// next snapshots carry it as stopping for that reservation and it is not
// stopped twice.
func (a *Actor) noteReservationStop(act plan.Action) {
	if act.Reservation == "" || !act.For.IsZero() {
		return
	}
	a.cal.mu.Lock()
	defer a.cal.mu.Unlock()
	if a.cal.stoppingFor == nil {
		a.cal.stoppingFor = map[string]string{}
	}
	a.cal.stoppingFor[act.Alloc] = act.Reservation
}

// StoppingForReservation returns a copy of the allocations the broker
// stopped for a reservation and is still waiting on: alloc ID ->
// reservation ID.
func (a *Actor) StoppingForReservation() map[string]string {
	a.cal.mu.Lock()
	defer a.cal.mu.Unlock()
	return maps.Clone(a.cal.stoppingFor)
}

// forgetReservationStops drops the allocations stopped for a reservation
// that are no longer live in s.
func (a *Actor) forgetReservationStops(s *watch.State) {
	a.cal.mu.Lock()
	defer a.cal.mu.Unlock()
	for id := range a.cal.stoppingFor {
		if al, ok := s.Alloc(id); !ok || !al.Live() {
			delete(a.cal.stoppingFor, id)
		}
	}
}

// noteAdmitted remembers when the broker admitted (or accepted) a job: the
// admitted_at that L11's max_run and settle count from.
func (a *Actor) noteAdmitted(k plan.JobKey) {
	a.cal.mu.Lock()
	defer a.cal.mu.Unlock()
	if a.cal.admitted == nil {
		a.cal.admitted = map[plan.JobKey]time.Time{}
	}
	a.cal.admitted[k] = a.now().UTC()
}

// AdmittedAt returns when the broker admitted the job, or the zero time
// when it did not in this process (a job running before it started).
func (a *Actor) AdmittedAt(k plan.JobKey) time.Time {
	a.cal.mu.Lock()
	defer a.cal.mu.Unlock()
	return a.cal.admitted[k]
}
