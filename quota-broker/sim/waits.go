package sim

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
)

// What bound a wait that no quota bound: the labels of WaitGroup.Bound
// besides quota node names.
const (
	// BoundNone: the job started at its first plan (no wait).
	BoundNone = "(no wait)"
	// BoundIdle: an idle job waits for free GPUs; idle jobs never preempt
	// (DESIGN L3, L4).
	BoundIdle = "(idle: no free GPUs)"
	// BoundNoRoom: a non-idle job within its quotas finds no node with
	// room, even with preemption (L5, L6).
	BoundNoRoom = "(no room on the nodes)"
	// BoundGang: a gang (flex) is admitted whole or not at all (L11).
	BoundGang = "(gang: not all of it fits)"
	// BoundVictims: admitted, placed on GPUs whose victims are still in
	// their kill_timeout (L8).
	BoundVictims = "(victims' kill_timeout)"
	// BoundBooking: a job that names a reservation waits for its start,
	// or for room in the booking (DESIGN L10).
	BoundBooking = "(reservation: not started or full)"
	// BoundCohort: the Kueue-like cohort is full and may not be reclaimed.
	BoundCohort = "(kueue: cohort full)"
)

// StaticBound is the label of a wait bound by a static partition.
func StaticBound(ns string) string { return "partition of " + ns }

// bindSpan is how long a job waited under one binding, in nanoseconds.
type bindSpan struct {
	bound string
	ns    int64
}

// WaitGroup are the training jobs of one workspace, idle or not, whose
// wait was bound mostly by one thing: a quota node's name (DESIGN L3 counts
// the job's quota and its ancestors) or one of the Bound labels. A job is
// counted in the group of the binding it waited under longest; the groups
// of a workspace add up to its WSStats.
type WaitGroup struct {
	Namespace string
	Idle      bool
	Bound     string
	Started   int     // jobs that started
	Waiting   int     // jobs still waiting at the end, or expired
	Seconds   float64 // their waits, to the start, the end or the expiry
}

// Jobs is the number of jobs in the group.
func (g *WaitGroup) Jobs() int { return g.Started + g.Waiting }

// Mean is the group's mean wait.
func (g *WaitGroup) Mean() time.Duration {
	if g.Jobs() == 0 {
		return 0
	}
	return time.Duration(g.Seconds / float64(g.Jobs()) * float64(time.Second))
}

// BoundQuota is what the waits bound by one quota node saw of it: at each
// wait event naming it (the planner's Action.Quota), its non-idle GPUs in
// use and its nominal, and who held those GPUs.
type BoundQuota struct {
	Quota   string
	Events  int
	Used    float64 // sum over the events of the node's non-idle GPUs (subtree)
	Nominal float64 // sum over the events of its nominal
	// Holders are, per namespace (Result.Namespaces order), the sum over
	// the events of its non-idle GPUs in the node's subtree.
	Holders []float64
}

// MeanUsed and MeanNominal are the node's non-idle use and nominal,
// averaged over the wait events that named it.
func (b *BoundQuota) MeanUsed() float64    { return b.Used / float64(max(1, b.Events)) }
func (b *BoundQuota) MeanNominal() float64 { return b.Nominal / float64(max(1, b.Events)) }

// Loss is the work one preemption lost: GPU-hours since the victim's last
// checkpoint (see sim.halt).
type Loss struct {
	At   time.Time
	Rule string
	GPUh float64
	// Borrowing: the victim was an idle job (borrowed GPUs, DESIGN L4);
	// else it ran inside its quota.
	Borrowing bool
}

// waitBinding is what an action that makes j wait says bound it.
func waitBinding(j *job, act *plan.Action) string {
	switch {
	case act.Quota != "":
		return act.Quota
	case j.spec.Idle:
		return BoundIdle
	case act.Rule == plan.RuleFlex:
		return BoundGang
	case act.Rule == plan.RuleReservation:
		return BoundBooking
	}
	return BoundNoRoom
}

// bind makes bound the binding of j's wait from now: the time since the
// last change goes to the binding before.
func (s *sim) bind(j *job, bound string) {
	if s.opt.noBookkeeping || j.everStarted || j.done || j.bound == bound {
		return
	}
	s.closeBind(j, s.now)
	j.bound = bound
}

// closeBind adds the time since the last change of j's binding, up to t.
func (s *sim) closeBind(j *job, t int64) {
	if s.opt.noBookkeeping {
		return
	}
	since := max(j.boundSince, j.spec.Submit.UnixNano())
	if d := t - since; d > 0 {
		b := j.bound
		if b == "" {
			b = BoundNone
		}
		i := slices.IndexFunc(j.binds, func(x bindSpan) bool { return x.bound == b })
		if i < 0 {
			j.binds = append(j.binds, bindSpan{bound: b})
			i = len(j.binds) - 1
		}
		j.binds[i].ns += d
	}
	j.boundSince = max(t, since)
}

// mainBinding is the binding j waited under longest (the first of equals).
func (j *job) mainBinding() string {
	best := BoundNone
	var most int64
	for _, b := range j.binds {
		if b.ns > most {
			best, most = b.bound, b.ns
		}
	}
	return best
}

// boundQuota records a wait event bound by quota node name: its state now.
func (s *sim) boundQuota(name string) {
	if s.opt.noBookkeeping {
		return
	}
	qi := -1
	for i, q := range s.qs {
		if q.node.Name == name {
			qi = i
			break
		}
	}
	if qi < 0 {
		return
	}
	r := s.res
	b := r.bounds[name]
	if b == nil {
		b = &BoundQuota{Quota: name, Holders: make([]float64, len(s.ns))}
		r.bounds[name] = b
	}
	q := s.qs[qi]
	_, nonidle, _ := s.quotaFigures(q)
	b.Events++
	b.Used += float64(nonidle)
	b.Nominal += float64(q.node.GPUs.Total())
	for _, i := range q.sub {
		o := &s.own[i]
		b.Holders[i] += float64(o[placing][0] + o[running][0] + o[stopping][0])
	}
}

// waitGroups groups the training jobs' waits (finishStats).
func (s *sim) waitGroups() {
	r := s.res
	type key struct {
		ns    int
		idle  bool
		bound string
	}
	groups := map[key]*WaitGroup{}
	for _, j := range s.jobs {
		if !j.spec.Training || j.spec.InFlight || !j.submitted {
			continue
		}
		var wait float64
		switch {
		case j.everStarted:
			wait = float64(j.firstStart-j.spec.Submit.UnixNano()) / 1e9
		case !j.expired:
			s.closeBind(j, s.end)
			wait = float64(s.end-j.spec.Submit.UnixNano()) / 1e9
		default:
			wait = plan.MaxFlexWait.Seconds()
		}
		k := key{j.ns, j.spec.Idle, j.mainBinding()}
		g := groups[k]
		if g == nil {
			g = &WaitGroup{Namespace: j.spec.Namespace, Idle: j.spec.Idle, Bound: k.bound}
			groups[k] = g
		}
		if j.everStarted {
			g.Started++
		} else {
			g.Waiting++
		}
		g.Seconds += wait
	}
	for _, g := range groups {
		r.WaitGroups = append(r.WaitGroups, g)
	}
	slices.SortFunc(r.WaitGroups, func(a, b *WaitGroup) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmpBool(a.Idle, b.Idle), cmp.Compare(a.Bound, b.Bound))
	})
	for _, name := range slices.Sorted(maps.Keys(r.bounds)) {
		r.BoundQuotas = append(r.BoundQuotas, r.bounds[name])
	}
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
