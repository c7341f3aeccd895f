package plan

import (
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

// liveJobs groups by job, in order of each job's first allocation, the
// allocations inside the tree that a timed rule may act on: those of flex
// requests and those naming a reservation of the snapshot that has started
// (planner.timedAllocs).
func (p *planner) liveJobs() []liveJob {
	b, idx := p.buf, p.timedAllocs
	if len(idx) == 0 {
		return nil
	}
	// Number the jobs in order of first allocation, then lay each job's
	// allocations out together, in index order. The map and arrays are the
	// previous plan's, emptied (buffers).
	slot := emptied(&b.liveSlot, &b.liveSlotLen, len(idx))
	jobOf := grown(b.liveJobOf, len(idx))
	sizes := b.liveSizes[:0]
	defer func() { b.liveJobOf, b.liveSizes = jobOf, sizes }()
	for i, ai := range idx {
		k := p.allocs[ai].a.JobKey()
		j, ok := slot[k]
		if !ok {
			j = len(sizes)
			slot[k] = j
			sizes = append(sizes, 0)
		}
		jobOf[i] = j
		sizes[j]++
	}
	out := sized(b.liveJobs, len(sizes))
	pool := grown(b.livePool, len(idx))
	b.liveJobs, b.livePool = out, pool
	for j, n := range sizes {
		out[j].allocs, pool = pool[:0:n], pool[n:]
	}
	for i, ai := range idx {
		j := &out[jobOf[i]]
		a := &p.allocs[ai]
		if len(j.allocs) == 0 {
			j.key = a.a.JobKey()
		}
		j.allocs = append(j.allocs, ai)
		j.gpus += a.count
		j.killTimeout = max(j.killTimeout, a.killTimeout)
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
	return out
}

// wakes reports whether wake(t) would change the plan's WakeAt.
func (p *planner) wakes(t time.Time) bool {
	return t.After(p.now) && (p.wakeAt.IsZero() || t.Before(p.wakeAt))
}

// wake records t as a candidate for the plan's WakeAt (DESIGN L12): the
// earliest instant after now at which time alone changes the plan.
func (p *planner) wake(t time.Time) {
	if p.wakes(t) {
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
//
// Each job's rules read only its own allocations, so the jobs are decided
// in any order and their actions emitted in job key order.
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
	var acts []timedStop
	for i := range live {
		j := &live[i]
		if r := p.reservationOf(j.reservation); r != nil {
			at := r.End.Add(-j.killTimeout)
			if !p.now.Before(at) {
				acts = append(acts, timedStop{j, ActionStopJob, RuleEnd, r})
				p.cal.res[p.cal.started[r.ID]].ending = true
				continue
			}
			p.wake(at)
		}
		if j.maxRun <= 0 || j.admitted.IsZero() {
			continue
		}
		at := j.admitted.Add(j.maxRun - j.killTimeout)
		if !p.now.Before(at) {
			acts = append(acts, timedStop{j, ActionStopJob, RuleFlexMaxRun, nil})
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
		acts = append(acts, timedStop{j, ActionSuspend, RuleFlexSettle, nil})
		suspended[j.key] = true
	}
	slices.SortFunc(acts, func(a, b timedStop) int { return a.j.key.Compare(b.j.key) })
	for _, t := range acts {
		j := t.j
		switch t.rule {
		case RuleEnd:
			p.stopJob(j, t.kind, t.rule, t.res.ID, fmt.Sprintf("reservation %s ends at %s; stopped %s (its kill_timeout) before",
				t.res.ID, t.res.End.Format(time.RFC3339), j.killTimeout))
		case RuleFlexMaxRun:
			p.stopJob(j, t.kind, t.rule, "", fmt.Sprintf("flex request admitted at %s with max_run %s; stopped %s (its kill_timeout) before",
				j.admitted.Format(time.RFC3339), j.maxRun, j.killTimeout))
		default:
			p.stopJob(j, t.kind, t.rule, "", fmt.Sprintf("flex request admitted at %s has fewer live allocations than asked after settle %s; suspended whole and queued again",
				j.admitted.Format(time.RFC3339), p.settings.Settle))
		}
	}
	return suspended
}

// timedStop is a whole-job action that timedStops decided for live job j,
// by rule, with the reservation that ends for rule L10.end.
type timedStop struct {
	j    *liveJob
	kind ActionKind
	rule Rule
	res  *Reservation
}

// reservationOf returns the snapshot's reservation id if it has started
// (active or ended), or nil.
func (p *planner) reservationOf(id string) *Reservation {
	if id == "" {
		return nil
	}
	if i, ok := p.cal.started[id]; ok {
		return p.cal.res[i].r
	}
	return nil
}

// stopJob emits one whole-job action of kind for live job j and takes its
// allocations out of the ledger (they are stopped, never victims again in
// this plan). Its GPUs stay taken until the allocations are terminal.
func (p *planner) stopJob(j *liveJob, kind ActionKind, rule Rule, res, reason string) {
	for _, ai := range j.allocs {
		a := &p.allocs[ai]
		if p.st.stopped[ai] {
			continue
		}
		p.st.stopped[ai] = true
		p.st.ledger.add(a.q, -a.count, a.idle, p.st.debtOf(ai) != nil, a.reserved)
	}
	p.rederive() // L9: stopped, they leave debt and displaced at once
	p.emit(Action{Action: kind, Namespace: j.key.Namespace, Job: j.key.Job, GPUs: j.gpus, Rule: rule,
		Reservation: res, Reason: reason})
}
