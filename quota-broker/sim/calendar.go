package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// The simulator's side of the core's timed and Calendar rules (DESIGN L5
// "Pre-warm", L10, L11, L12), as the Nomad adapter carries them out:
//
//   - pre-warm: under a policy that pre-warms in the core (corePrewarm,
//     the real core), each inference service's next schedule boundary
//     within drain_horizon that raises its count is a Snapshot.Prewarm
//     entry (prewarmOf, as quota-broker/nomad's prewarms builds it); the
//     count itself is raised only at the boundary;
//   - holds: the plans' hold actions are kept (by owner and node, GPU IDs
//     merged, the later end kept, as the adapter's Actor keeps them) and
//     given to the following plans as Snapshot.Holds until they end: a
//     pre-warm's at its Until, a reservation's at the reservation's end
//     (from start + settle the core lends them to idle jobs only);
//   - stop_job (L10.end, L11.max_run) stops a whole job for good, suspend
//     (L11.settle) stops it and queues it again;
//   - the plan's WakeAt: the simulator plans again then.

// corePrewarm is implemented by the policies whose plans pre-warm
// scheduled scale-ups themselves from Snapshot.Prewarm and Snapshot.Holds
// (the real core). For the others the autoscaler raises a count due
// within kill_timeout plus one interval early (see sim.target).
type corePrewarm interface{ prewarmsInCore() }

func (Gputide) prewarmsInCore()     {}
func (GputideFIFO) prewarmsInCore() {}

// prewarmOf returns the pre-warm entry of inference service st at t, as
// the broker builds one from a gputide-schedule check (issue 11 item 5,
// quota-broker/nomad's raisingBoundary): the first schedule boundary in
// (t, t + drain_horizon] after which the count, once the boundary's ramp
// is done, is above the service's count now. Its count is the difference;
// its holds last until the boundary + the autoscaler's evaluation interval
// (the broker interval) + settle. The count after the boundary is the
// simulated autoscaler's (countAt: the schedule plus the demand shape's
// extra replicas at that instant); only schedule boundaries are known
// ahead, the demand shape's hourly changes are not (they are metric-driven
// on a real cluster).
func (s *sim) prewarmOf(st *inferState, t int64) (plan.Prewarm, bool) {
	sched := st.cfg.Schedule
	now := s.tm(t)
	end := now.Add(s.sc.Settings.DrainHorizon)
	cur := st.j.desired
	for from := now; ; {
		at, _, ok := sched.NextBoundary(from)
		if !ok || at.After(end) {
			return plan.Prewarm{}, false
		}
		target := s.countAt(st, at.UnixNano())
		if r := sched.Ramp(); r > 0 {
			target = max(target, s.countAt(st, at.Add(r).UnixNano()))
		}
		if target > cur {
			in := st.cfg
			return plan.Prewarm{Namespace: in.Namespace, Job: in.Name, Group: in.Group, Type: plan.JobService,
				Priority: in.Priority, GPUs: in.GPUs, Model: in.Model, Datacenters: in.Datacenters, NodePool: in.NodePool, Flavors: in.Flavors,
				At: at.UTC(), Count: min(target-cur, quota.MaxGPUs),
				Until: at.Add(time.Duration(s.interval) + s.sc.Settings.Settle).UTC()}, true
		}
		from = at
	}
}

// prewarms returns the snapshot's pre-warm entries at now, in service
// order, and notes whether they changed since the last call (a change
// makes the broker plan).
func (s *sim) prewarms(out []plan.Prewarm) ([]plan.Prewarm, bool) {
	changed := false
	for _, st := range s.infer {
		w, ok := s.prewarmOf(st, s.now)
		if ok != st.hasPre || (ok && (!w.At.Equal(st.pre.At) || w.Count != st.pre.Count)) {
			changed = true
		}
		st.pre, st.hasPre = w, ok
		if ok {
			out = append(out, w)
		}
	}
	return out, changed
}

// holdOwner is whom a hold action keeps GPUs for: its reservation, or the
// pre-warmed group.
func holdOwner(act *plan.Action) plan.HoldOwner {
	if act.Reservation != "" {
		return plan.HoldOwner{Reservation: act.Reservation}
	}
	return plan.HoldOwner{Group: act.For}
}

// keepHold keeps the GPUs of hold action act as the broker does
// (plan.MergeHold: on a node already held for the same owner its GPUs are
// added, sorted, once, and the later end kept).
func (s *sim) keepHold(act *plan.Action) {
	h, ok := plan.HoldOfAction(*act)
	if !ok {
		return
	}
	s.heldIdx = nil
	s.holds = plan.MergeHold(s.holds, h)
}

// holdEnd is when the simulator forgets hold h: its Until, or for a
// reservation's hold the reservation's end (the core lends it to idle jobs
// from Until on).
func (s *sim) holdEnd(h *plan.Hold) time.Time {
	return h.End(s.resByID[h.For.Reservation])
}

// liveHolds drops the holds that have ended at now and returns the rest.
func (s *sim) liveHolds() []plan.Hold {
	now := s.tm(s.now)
	n := len(s.holds)
	s.holds = slices.DeleteFunc(s.holds, func(h plan.Hold) bool { return !s.holdEnd(&h).After(now) })
	if len(s.holds) != n {
		s.heldIdx = nil
	}
	return s.holds
}

// heldFor returns the hold that keeps GPU slot si, or nil, and whether the
// hold lends it now (a reservation's hold past its Until: idle jobs and
// the reservation's own jobs may use it).
func (s *sim) heldFor(si int) (*plan.Hold, bool) {
	if len(s.holds) == 0 {
		return nil, false
	}
	if s.heldIdx == nil {
		s.heldIdx = map[int]int{}
		if s.slotByID == nil {
			s.slotByID = make(map[string]int, len(s.slots))
			for i, g := range s.slots {
				s.slotByID[g.id] = i
			}
		}
		for hi := range s.holds {
			for _, id := range s.holds[hi].GPUIDs {
				if k, ok := s.slotByID[id]; ok {
					s.heldIdx[k] = hi
				}
			}
		}
	}
	hi, ok := s.heldIdx[si]
	if !ok {
		return nil, false
	}
	h := &s.holds[hi]
	return h, !s.tm(s.now).Before(h.Until)
}

// mayUseHeld reports whether job j may take a GPU held by h (lent: h
// lends it now): the hold's owner may, and an idle job may take a lent one
// (DESIGN L10).
func mayUseHeld(j *job, h *plan.Hold, lent bool) bool {
	if h.For.Group == j.key || (j.spec.Reservation != "" && h.For.Reservation == j.spec.Reservation) {
		return true
	}
	return lent && j.spec.Idle
}

// wakeAt makes the broker plan at t (the plan's WakeAt, DESIGN L12), once
// per instant.
func (s *sim) wakeAt(t time.Time) {
	if t.IsZero() {
		return
	}
	at := t.UnixNano()
	if at <= s.now || at > s.end || s.wakes[at] {
		return
	}
	if s.wakes == nil {
		s.wakes = map[int64]bool{}
	}
	s.wakes[at] = true
	s.push(event{t: at, kind: evWake})
}

// snapshotReservations are the scenario's bookings as the core sees them.
func snapshotReservations(sc *Scenario) []plan.Reservation {
	out := make([]plan.Reservation, 0, len(sc.Reservations))
	for _, r := range sc.Reservations {
		out = append(out, plan.Reservation{ID: r.ID, Namespace: r.Namespace, Quota: r.Quota, GPUs: r.GPUs,
			AllocGPUs: r.AllocGPUs, Model: r.Model, Flavor: r.Flavor, NodePool: r.NodePool, Start: r.Start.UTC(), End: r.End().UTC()})
	}
	return out
}

// JobStop is a whole job the broker stopped by a timed rule (DESIGN
// L10.end, L11.max_run: stop_job), or suspended and queued again
// (L11.settle: suspend).
type JobStop struct {
	At          time.Time
	Namespace   string
	Job         string
	Rule        plan.Rule
	Reservation string
	Suspended   bool
	Reason      string
}

// jobStop carries out a stop_job or suspend action: every live allocation
// of the job stops (its kill_timeout runs, DESIGN L8). A stopped job is
// done: its work left is not done (it is not a preemption and loses
// nothing to one). A suspended job loses the work since its checkpoint,
// as a victim does, and is queued again from now (its max_wait counts
// from now, L11.expire). A job already stopped is not stopped again.
func (s *sim) jobStop(act *plan.Action) {
	j := s.jobByJob[plan.JobKey{Namespace: act.Namespace, Job: act.Job}]
	if j == nil {
		s.conflict(*act, "no such job")
		return
	}
	if j.done {
		return
	}
	suspend := act.Action == plan.ActionSuspend
	if !suspend {
		j.progressing = false // its work ends here, unfinished
		j.gen++
	}
	for _, a := range append([]*alloc(nil), j.live...) {
		s.stop(a, act.Rule, plan.GroupKey{})
	}
	s.res.JobStops = append(s.res.JobStops, JobStop{At: s.tm(s.now), Namespace: act.Namespace, Job: act.Job, Rule: act.Rule,
		Reservation: act.Reservation, Suspended: suspend, Reason: act.Reason})
	s.record(Event{Event: string(act.Action), Rule: string(act.Rule), Namespace: act.Namespace, Job: act.Job, GPUs: act.GPUs,
		For: act.Reservation, Reason: act.Reason})
	if suspend {
		j.queuedAt = s.now
		j.admittedAt = 0
		s.pend(j)
		return
	}
	j.stopped = true
	s.closeBind(j, s.now)
	s.retire(j)
}

// String renders a hold owner for events.jsonl.
func ownerText(o plan.HoldOwner) string {
	if o.IsZero() {
		return ""
	}
	return o.String()
}

func (s *sim) holdEvent(act *plan.Action) {
	s.record(Event{Event: "hold", Rule: string(act.Rule), Namespace: act.Namespace, Job: act.Job, Group: act.Group,
		Node: act.Node, GPUs: len(act.GPUIDs), For: ownerText(holdOwner(act)),
		Reason: fmt.Sprintf("%s (until %s)", act.Reason, s.tm(act.Until.UnixNano()).Format(time.RFC3339))})
}
