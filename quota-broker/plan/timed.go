package plan

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// liveJob is the live allocations of one job, for the rules that act on
// whole jobs at an instant (DESIGN L10.end, L11.settle, L11.max_run).
type liveJob struct {
	key    JobKey
	allocs []int // allocation indices, in index order
	gpus   int
	// killTimeout is the largest kill_timeout of its allocations (L8).
	killTimeout time.Duration
	// maxRun and admitted are the flex request's max_run and admitted
	// time (L11); maxRun is 0 for a job that is not flex.
	maxRun   time.Duration
	admitted time.Time
	// reservation is the reservation its allocations name, or "".
	reservation string
}

// liveJobs groups by job, in key order, the allocations inside the tree
// that a timed rule may act on: those of flex requests and those naming a
// reservation of the snapshot that has started.
func (p *planner) liveJobs() []liveJob {
	var idx []int
	for _, a := range p.allocs {
		if a.q == nil || (a.a.MaxRun <= 0 && (a.a.Reservation == "" || p.cal.started[a.a.Reservation] == nil)) {
			continue
		}
		idx = append(idx, a.index)
	}
	if len(idx) == 0 {
		return nil
	}
	slices.SortFunc(idx, func(x, y int) int {
		return cmp.Or(p.allocs[x].a.JobKey().Compare(p.allocs[y].a.JobKey()), cmp.Compare(x, y))
	})
	out := make([]liveJob, 0, min(len(idx), 64))
	for i := 0; i < len(idx); {
		k := p.allocs[idx[i]].a.JobKey()
		j := liveJob{key: k}
		n := i
		for ; n < len(idx) && p.allocs[idx[n]].a.JobKey() == k; n++ {
			a := p.allocs[idx[n]]
			j.gpus += a.count
			j.killTimeout = max(j.killTimeout, a.a.KillTimeout)
			if a.a.MaxRun > 0 {
				j.maxRun = a.a.MaxRun
			}
			if !a.a.AdmittedAt.IsZero() && (j.admitted.IsZero() || a.a.AdmittedAt.Before(j.admitted)) {
				j.admitted = a.a.AdmittedAt
			}
			if a.a.Reservation != "" {
				j.reservation = a.a.Reservation
			}
		}
		j.allocs = idx[i:n:n]
		out = append(out, j)
		i = n
	}
	return out
}

// wake records t as a candidate for the plan's WakeAt (DESIGN L12): the
// earliest instant after now at which time alone changes the plan.
func (p *planner) wake(t time.Time) {
	if t.After(p.now) && (p.wakeAt.IsZero() || t.Before(p.wakeAt)) {
		p.wakeAt = t
	}
}

// timedStops applies the rules that stop or suspend whole live jobs at an
// instant, before any pending work is decided, and returns the jobs
// suspended (whose pending groups are not decided in this plan):
//
//   - L10.end: the jobs of a reservation are stopped (job stop) at
//     end - kill_timeout, their largest kill_timeout;
//   - L11.max_run: an admitted flex request is stopped (job stop) at
//     admitted + max_run - kill_timeout;
//   - L11.settle: an admitted flex request that still has pending
//     allocations (fewer live allocations than it asked for) at
//     admitted + settle is suspended whole and queued again.
//
// Their allocations leave the ledger; their GPUs are not free in this
// plan (they are free once the allocations are terminal).
func (p *planner) timedStops() map[JobKey]bool {
	live := p.liveJobs()
	if len(live) == 0 {
		return nil
	}
	pendingOf := map[JobKey]bool{}
	for i := range p.snap.Pending {
		pendingOf[p.snap.Pending[i].JobKey()] = true
	}
	suspended := map[JobKey]bool{}
	for i := range live {
		j := &live[i]
		if r := p.reservationOf(j.reservation); r != nil {
			at := r.End.Add(-j.killTimeout)
			if !p.now.Before(at) {
				p.stopJob(j, ActionStopJob, RuleEnd, r.ID, fmt.Sprintf("reservation %s ends at %s; stopped %s (its kill_timeout) before",
					r.ID, r.End.Format(time.RFC3339), j.killTimeout))
				continue
			}
			p.wake(at)
		}
		if j.maxRun <= 0 || j.admitted.IsZero() {
			continue
		}
		at := j.admitted.Add(j.maxRun - j.killTimeout)
		if !p.now.Before(at) {
			p.stopJob(j, ActionStopJob, RuleFlexMaxRun, "", fmt.Sprintf("flex request admitted at %s with max_run %s; stopped %s (its kill_timeout) before",
				j.admitted.Format(time.RFC3339), j.maxRun, j.killTimeout))
			continue
		}
		p.wake(at)
		if !pendingOf[j.key] {
			continue
		}
		settle := j.admitted.Add(p.settings.Settle)
		if p.now.Before(settle) {
			p.wake(settle)
			suspended[j.key] = true // still settling: its pending allocations are Nomad's to place
			continue
		}
		p.stopJob(j, ActionSuspend, RuleFlexSettle, "", fmt.Sprintf("flex request admitted at %s has fewer live allocations than asked after settle %s; suspended whole and queued again",
			j.admitted.Format(time.RFC3339), p.settings.Settle))
		suspended[j.key] = true
	}
	return suspended
}

// reservationOf returns the snapshot's reservation id if it has started
// (active or ended), or nil.
func (p *planner) reservationOf(id string) *Reservation {
	if id == "" {
		return nil
	}
	return p.cal.started[id]
}

// stopJob emits one whole-job action of kind for live job j and takes its
// allocations out of the ledger (they are stopped, never victims again in
// this plan). Its GPUs stay taken until the allocations are terminal.
func (p *planner) stopJob(j *liveJob, kind ActionKind, rule Rule, res, reason string) {
	for _, ai := range j.allocs {
		a := p.allocs[ai]
		if p.st.stopped[ai] {
			continue
		}
		p.st.stopped[ai] = true
		p.st.ledger.add(a.q, -a.count, a.a.Idle, a.debt != nil, a.reserved)
	}
	p.emit(Action{Action: kind, Namespace: j.key.Namespace, Job: j.key.Job, GPUs: j.gpus, Rule: rule,
		Reservation: res, Reason: reason})
}
