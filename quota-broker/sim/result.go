package sim

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// Result is what one run measured.
type Result struct {
	Policy string
	// Label names a what-if run whose quota tree is not the scenario's
	// (gputide sim -compare-quota), and LabelText says what the tree is;
	// "" for a run of the scenario's tree.
	Label, LabelText string
	Scenario         *Scenario
	Start            time.Time
	End              time.Time
	Capacity         int // GPUs in the cluster
	Interval         time.Duration

	Wall   time.Duration // real time the run took
	Events int           // simulated events processed
	Plans  int           // policy calls

	Namespaces []string
	WS         []*WSStats    // per namespace, in Namespaces order
	Quotas     []*QuotaStats // per quota node, parents first
	Total      Usage         // the whole cluster, GPU-seconds
	FreeGPUs   float64       // GPU-seconds on no allocation

	Night      float64 // seconds off every inference window (night)
	NightAlloc float64 // GPU-seconds allocated then
	// NightDemand are the night seconds while idle training waited for at
	// least as many GPUs as were free (demand that could fill the cluster),
	// and NightDemandAlloc the GPU-seconds allocated in them.
	NightDemand      float64
	NightDemandAlloc float64

	// Flavors are the figures per flavor of the tree (DESIGN L13), in the
	// tree's order; nil for a tree of the implicit flavor.
	Flavors []*FlavorStats

	Rules    []*RuleStats // preemptions by rule, sorted by rule
	LostGPUh float64      // GPU-hours of work lost to preemption
	ScaleUps []*ScaleUp   // inference scale-ups, in time order
	Takes    []Take       // where each GPU inference took came from
	Moves    []MoveRecord
	Samples  []Sample

	Finished, Expired int
	// JobStops are the whole jobs stopped (L10.end, L11.max_run) or
	// suspended (L11.settle) by the core's timed rules, in time order.
	JobStops  []JobStop
	Conflicts []string // plan actions the simulator could not apply

	// WaitGroups split the training jobs' waits by workspace, idle or not,
	// and what bound them (see WaitGroup); BoundQuotas are the quota nodes
	// that bound waits, by name.
	WaitGroups  []*WaitGroup
	BoundQuotas []*BoundQuota
	Losses      []Loss // every preemption that lost work, in time order

	// Limits are, per quota node (Quotas order), the GPUs the policy caps
	// its subtree at when that differs from the tree's nominal (the static
	// partition, the Kueue-like nominal quotas: the sum of the shares of
	// the subtree's workspaces); nil for gputide. LimitName says what they
	// are.
	Limits    []int
	LimitName string
	// NSLimits are the same shares per namespace (Namespaces order); nil
	// for gputide.
	NSLimits []int

	lastLost float64
	rules    map[string]*RuleStats
	bounds   map[string]*BoundQuota
}

// Usage are GPU-seconds by allocation state.
type Usage struct {
	Running, Placing, Stopping float64 // owned by running, placing (waiting for a victim to end) and stopping allocations
	Idle                       float64 // of those, owned by idle jobs
}

// Owned is all GPU-seconds owned by allocations (DESIGN L2).
func (u Usage) Owned() float64 { return u.Running + u.Placing + u.Stopping }

// WSStats are one workspace's figures.
type WSStats struct {
	Namespace string
	Quota     string
	Usage     Usage
	// Training queue waits: from submission to first start, in seconds, of
	// the training jobs submitted during the run; Unstarted are still waiting
	// at the end (their wait so far is in Censored).
	Waits     []float64
	Censored  []float64
	Unstarted int
	Jobs      int
	Preempted int // allocations of this workspace stopped by a plan
}

// QuotaStats are one quota node's figures over its subtree (DESIGN L4), in
// GPU-seconds.
type QuotaStats struct {
	Quota   string
	Nominal int // at the start
	// NominalTime is the nominal over time, in GPU-seconds: a quota move
	// counts from when it happens. Used, Borrowed and Lendable are measured
	// against it.
	NominalTime float64
	Used        float64
	NonIdle     float64
	Borrowed    float64
	Lendable    float64
	Debt        float64
	// Fair lending (DESIGN L14), over the instants where L14 defines the
	// node's fair share (never for the root: it has no parent): FairTime
	// is their length in seconds, FairShare the integral of the node's
	// fair share, FairHeld of the GPUs its subtree held (L2: placing,
	// running and stopping allocations, idle or not) and FairBelow of
	// max(0, fair share - held), in GPU-seconds. Figures of the one
	// implicit flavor, weights the defaults (the nominals).
	FairTime, FairShare, FairHeld, FairBelow float64
}

// RuleStats count the preemptions of one rule.
type RuleStats struct {
	Rule     string
	Stops    int // allocations stopped
	Units    int // jobs stopped (a batch job is one unit)
	GPUs     int
	LostGPUh float64
	// StopsBorrowing are the allocations stopped that were idle jobs'
	// (borrowing, DESIGN L4), LostBorrowing the work they lost; the rest
	// ran inside their quota.
	StopsBorrowing int
	LostBorrowing  float64
}

// ScaleUp is one rise of an inference service's count and how long the
// service waited for its GPUs.
type ScaleUp struct {
	Service   string
	Raised    time.Time // when the autoscaler set the count
	Due       time.Time // when the schedule (or demand) wants it
	From, To  int       // running replicas before, count wanted
	Ready     time.Time // when To replicas ran (or the end of the run)
	Wait      time.Duration
	Boundary  bool // a schedule boundary (e.g. the morning scale-up), not a demand change
	Cancelled bool // the count was lowered before it was met
	Open      bool // not met by the end of the run
	done      bool
}

// Take is one GPU an inference allocation took, and whose it was.
type Take struct {
	At            time.Time
	Service       string
	Alloc, GPU    string
	Node          string
	From          string // the allocation that held it, "" if it was free
	FromNamespace string
	FromJob       string
	FromType      plan.JobType
	FromTraining  bool
	Rule          plan.Rule // the rule the holder was stopped by
	For           string    // the claimant the holder was stopped for
}

// MoveRecord is a quota move that happened.
type MoveRecord struct {
	Name    string
	At      time.Time
	Changes []QuotaChange // in the order the move gives them
}

// QuotaChange is one quota node's nominal before and after a move.
type QuotaChange struct {
	Quota    string
	From, To int
}

// Sample is the state at one instant, for the occupancy chart.
type Sample struct {
	T        time.Time
	Active   []int // per namespace: GPUs of placing and running allocations
	Borrowed []int // per namespace: of those, borrowed (DESIGN L4)
	Stopping int   // GPUs held by stopping allocations
	Nominal  []int // per quota node
	NonIdle  []int // per quota node, subtree (placing, running, stopping)
	Used     []int // per quota node, subtree
	Pending  int   // GPUs asked by pending idle training
	// Waiting are per namespace the GPUs its pending allocations ask for
	// (the queue), WaitingIdle those of idle jobs.
	Waiting     []int
	WaitingIdle []int
}

// FlavorStats are one flavor's figures (DESIGN L13): its devices, how
// much of them allocations held, the waits of the jobs that first started
// in it and the allocations stopped in it as victims.
type FlavorStats struct {
	Flavor   string
	GPUs     int     // device instances of the flavor in the cluster
	Used     float64 // GPU-seconds held by allocations (placing, running or stopping)
	Started  int     // jobs whose first allocation started in the flavor
	Wait     float64 // seconds those jobs waited, summed: submission (or the run's start) to first start
	Stops    int     // allocations of the flavor stopped by a plan (preemptions)
	LostGPUh float64 // GPU-hours of work those stops lost
}

// Occupancy is the share of the flavor's GPU time held by allocations
// over a run of length sec seconds (0 for a flavor of no device).
func (f *FlavorStats) Occupancy(sec float64) float64 {
	if f.GPUs == 0 || sec <= 0 {
		return 0
	}
	return f.Used / (float64(f.GPUs) * sec)
}

// MeanWait is the mean wait of the jobs that first started in the flavor.
func (f *FlavorStats) MeanWait() time.Duration {
	if f.Started == 0 {
		return 0
	}
	return time.Duration(f.Wait / float64(f.Started) * float64(time.Second))
}

func newResult(s *sim) *Result {
	r := &Result{Policy: s.policy.Name(), Scenario: s.sc, Start: s.sc.Start, End: s.sc.End(), Capacity: s.capacity,
		Interval: s.sc.Broker.Interval, Namespaces: s.ns, rules: map[string]*RuleStats{}, bounds: map[string]*BoundQuota{}}
	for _, n := range s.ns {
		r.WS = append(r.WS, &WSStats{Namespace: n})
	}
	if s.tree != nil && len(s.tree.Flavors) > 0 {
		for _, f := range s.tree.Flavors {
			r.Flavors = append(r.Flavors, &FlavorStats{Flavor: f.Name})
		}
		for _, g := range s.slots {
			if fi := s.flavorIndex(g.flavor); fi >= 0 {
				r.Flavors[fi].GPUs++
			}
		}
	}
	for _, q := range s.qs {
		r.Quotas = append(r.Quotas, &QuotaStats{Quota: q.node.Name, Nominal: q.node.GPUs.Total()})
		for _, i := range q.own {
			r.WS[i].Quota = q.node.Name
		}
	}
	if l, ok := s.policy.(Limiter); ok {
		name, per := l.Limits()
		r.LimitName = name
		for _, n := range s.ns {
			r.NSLimits = append(r.NSLimits, per[n])
		}
		for _, q := range s.qs {
			sum := 0
			for _, i := range q.sub {
				sum += per[s.ns[i]]
			}
			r.Limits = append(r.Limits, sum)
		}
	}
	return r
}

// Limiter is a policy that caps workspaces at GPU shares of its own
// instead of the tree's nominals.
type Limiter interface {
	// Limits names the shares ("static partition") and gives them per
	// namespace.
	Limits() (string, map[string]int)
}

func (r *Result) rule(name string) *RuleStats {
	x, ok := r.rules[name]
	if !ok {
		x = &RuleStats{Rule: name}
		r.rules[name] = x
	}
	return x
}

// Utilisation is the share of GPU time allocated to running allocations.
func (r *Result) Utilisation() float64 {
	return r.Total.Running / (float64(r.Capacity) * r.End.Sub(r.Start).Seconds())
}

// Allocation is the share of GPU time owned by any allocation (running,
// placing or stopping: DESIGN L2).
func (r *Result) Allocation() float64 {
	return r.Total.Owned() / (float64(r.Capacity) * r.End.Sub(r.Start).Seconds())
}

// NightAllocation is the share of GPUs allocated at night while idle
// training waited for GPUs (the ">= 95%" figure); -1 without such
// time.
func (r *Result) NightAllocation() float64 {
	if r.NightDemand == 0 {
		return -1
	}
	return r.NightDemandAlloc / (float64(r.Capacity) * r.NightDemand)
}

// BoundaryWaits returns the waits of the scheduled (morning) scale-ups.
func (r *Result) BoundaryWaits() []time.Duration {
	var out []time.Duration
	for _, u := range r.ScaleUps {
		if u.Boundary {
			out = append(out, u.Wait)
		}
	}
	return out
}

// MaxBoundaryWait is the longest wait of a scheduled scale-up.
func (r *Result) MaxBoundaryWait() time.Duration {
	var m time.Duration
	for _, w := range r.BoundaryWaits() {
		m = max(m, w)
	}
	return m
}

// MeanScaleUpWait is the mean wait over all scale-ups (scheduled and
// demand-driven).
func (r *Result) MeanScaleUpWait() time.Duration {
	if len(r.ScaleUps) == 0 {
		return 0
	}
	var sum time.Duration
	for _, u := range r.ScaleUps {
		sum += u.Wait
	}
	return sum / time.Duration(len(r.ScaleUps))
}

// TrainingWait is the mean queue wait of training jobs submitted during the
// run, counting a job still waiting at the end with its wait so far.
func (r *Result) TrainingWait() time.Duration {
	sum, n := 0.0, 0
	for _, w := range r.WS {
		for _, x := range w.Waits {
			sum += x
		}
		for _, x := range w.Censored {
			sum += x
		}
		n += len(w.Waits) + len(w.Censored)
	}
	if n == 0 {
		return 0
	}
	return time.Duration(sum / float64(n) * float64(time.Second))
}

// RuleList returns the preemption rules in order.
func (r *Result) RuleList() []*RuleStats { return r.Rules }

// advance accounts for the time from the last event to t, during which the
// state did not change.
func (s *sim) advance(t int64) {
	if t <= s.last {
		s.now = max(s.now, t)
		return
	}
	for s.nextSample < t && s.nextSample <= s.end {
		s.sample(s.nextSample)
		s.nextSample += s.sampleDt
	}
	dt := float64(t-s.last) / 1e9
	r := s.res
	total := 0
	for i := range s.own {
		o := &s.own[i]
		w := &r.WS[i].Usage
		w.Placing += float64(o[placing][0]+o[placing][1]) * dt
		w.Running += float64(o[running][0]+o[running][1]) * dt
		w.Stopping += float64(o[stopping][0]+o[stopping][1]) * dt
		w.Idle += float64(o[placing][1]+o[running][1]+o[stopping][1]) * dt
		r.Total.Placing += float64(o[placing][0]+o[placing][1]) * dt
		r.Total.Running += float64(o[running][0]+o[running][1]) * dt
		r.Total.Stopping += float64(o[stopping][0]+o[stopping][1]) * dt
		r.Total.Idle += float64(o[placing][1]+o[running][1]+o[stopping][1]) * dt
		total += o[placing][0] + o[placing][1] + o[running][0] + o[running][1] + o[stopping][0] + o[stopping][1]
	}
	r.FreeGPUs += float64(s.capacity-total) * dt
	for fi, f := range r.Flavors {
		f.Used += float64(s.flOwn[fi]) * dt
	}
	for qi, q := range s.qs {
		used, nonidle, debt := s.quotaFigures(q)
		nom := q.node.GPUs.Total() // the total over flavors; the Flavors table has the per-flavor figures (issue 17 item 6)
		x := r.Quotas[qi]
		x.NominalTime += float64(nom) * dt
		x.Used += float64(used) * dt
		x.NonIdle += float64(nonidle) * dt
		x.Borrowed += float64(max(0, used-max(nom, nonidle))) * dt
		x.Lendable += float64(max(0, nom-used)) * dt
		x.Debt += float64(debt) * dt
	}
	s.fairLending(dt)
	if s.night(s.last) {
		r.Night += dt
		r.NightAlloc += float64(total) * dt
		if s.pendI > 0 && s.pendI >= s.capacity-total {
			r.NightDemand += dt
			r.NightDemandAlloc += float64(total) * dt
		}
	}
	s.last, s.now = t, t
}

// fairLending adds dt seconds of the state now to each quota node's fair
// lending figures (QuotaStats.FairTime and the rest): the fair shares of
// DESIGN L14 (plan.FairShares) on the nodes' figures now, for the
// tree's first flavor, built by plan.FairFigures.Build (the rule the API
// and the metrics use too) from each node's own figures: the GPUs its
// namespaces hold (every allocation state), non-idle or not, and what
// their pending allocations ask for. The simulator counts every device of
// a node whatever its flavor, against the nominal and weight of the first
// flavor: exact on a tree of one flavor. A batch job stopped as a victim counts
// twice while its allocations run out their kill_timeout (held, and asked
// for again), as the broker's snapshot shows it.
func (s *sim) fairLending(dt float64) {
	own, held := s.fairOwn[:0], s.fairHeld[:0]
	for _, q := range s.qs {
		var o plan.OwnFigures
		for _, i := range q.own {
			c := &s.own[i]
			o.NonIdle += c[placing][0] + c[running][0] + c[stopping][0]
			o.Held += c[placing][0] + c[running][0] + c[stopping][0] + c[placing][1] + c[running][1] + c[stopping][1]
			o.Asked += s.asked[i]
		}
		own = append(own, o)
		used, _, _ := s.quotaFigures(q)
		held = append(held, used)
	}
	s.fairOwn, s.fairHeld = own, held
	f := &s.fair
	err := f.Build(s.tree, quota.FlavorNames(s.tree)[0], own)
	if err != nil {
		if s.fairErr == nil {
			s.fairErr = fmt.Errorf("at %s: %w", s.fmt(s.last), err)
		}
		return
	}
	out, err := plan.AppendFairShares(s.fairOut[:0], s.tree, f)
	s.fairOut = out
	if err != nil {
		if s.fairErr == nil {
			s.fairErr = fmt.Errorf("at %s: %w", s.fmt(s.last), err)
		}
		return
	}
	for qi, x := range out {
		if !x.Defined {
			continue
		}
		st := s.res.Quotas[qi]
		st.FairTime += dt
		st.FairShare += x.Share * dt
		st.FairHeld += float64(held[qi]) * dt
		st.FairBelow += max(0, x.Share-float64(held[qi])) * dt
	}
}

// quotaFigures are q's subtree GPUs owned, non-idle, and (for a leaf) its
// debt: non-idle usage above a nominal that was lowered (DESIGN L9,
// simplified to leaves).
func (s *sim) quotaFigures(q *qinfo) (used, nonidle, debt int) {
	for _, i := range q.sub {
		o := &s.own[i]
		ni := o[placing][0] + o[running][0] + o[stopping][0]
		nonidle += ni
		used += ni + o[placing][1] + o[running][1] + o[stopping][1]
	}
	if q.leaf {
		debt = max(0, nonidle-q.node.GPUs.Total())
	}
	return used, nonidle, debt
}

// night reports whether every inference service is outside its windows at
// t (its schedule is at its default count).
func (s *sim) night(t int64) bool {
	if len(s.infer) == 0 {
		return false
	}
	tt := time.Unix(0, t).In(s.sc.Zone)
	for _, st := range s.infer {
		if st.cfg.Schedule.CountAt(tt) != st.cfg.Default {
			return false
		}
	}
	return true
}

func (s *sim) sample(t int64) {
	x := Sample{T: s.tm(t), Active: make([]int, len(s.ns)), Borrowed: make([]int, len(s.ns)), Pending: s.pendI,
		Waiting: make([]int, len(s.ns)), WaitingIdle: make([]int, len(s.ns))}
	for _, j := range s.active {
		if s.opt.noBookkeeping {
			break // the queue chart's figures
		}
		if m := j.missing(); m > 0 {
			x.Waiting[j.ns] += m * j.spec.GPUs
			if j.spec.Idle {
				x.WaitingIdle[j.ns] += m * j.spec.GPUs
			}
		}
	}
	for i := range s.own {
		o := &s.own[i]
		x.Active[i] = o[placing][0] + o[placing][1] + o[running][0] + o[running][1]
		x.Stopping += o[stopping][0] + o[stopping][1]
	}
	for _, q := range s.qs {
		used, nonidle, _ := s.quotaFigures(q)
		x.Nominal = append(x.Nominal, q.node.GPUs.Total())
		x.NonIdle = append(x.NonIdle, nonidle)
		x.Used = append(x.Used, used)
		if q.leaf && len(q.own) > 0 {
			// Borrowed among the active (not stopping) GPUs of a leaf's
			// workspaces, put on its first workspace.
			act, ni := 0, 0
			for _, i := range q.sub {
				o := &s.own[i]
				act += o[placing][0] + o[placing][1] + o[running][0] + o[running][1]
				ni += o[placing][0] + o[running][0]
			}
			x.Borrowed[q.own[0]] = max(0, act-max(q.node.GPUs.Total(), ni))
		}
	}
	s.res.Samples = append(s.res.Samples, x)
}

// finishStats closes what is still open at the end of the run.
func (s *sim) finishStats() {
	r := s.res
	for _, st := range s.infer {
		for _, u := range st.records {
			if !u.done {
				u.Open = true
				u.Ready = r.End
				u.Wait = max(0, r.End.Sub(u.Due))
			}
			r.ScaleUps = append(r.ScaleUps, u)
		}
	}
	sort.SliceStable(r.ScaleUps, func(a, b int) bool { return r.ScaleUps[a].Due.Before(r.ScaleUps[b].Due) })
	for _, j := range s.jobs {
		w := r.WS[j.ns]
		w.Preempted += j.preempted
		if !j.spec.Training || j.spec.InFlight || !j.submitted {
			continue
		}
		w.Jobs++
		switch {
		case j.everStarted:
			w.Waits = append(w.Waits, float64(j.firstStart-j.spec.Submit.UnixNano())/1e9)
		case !j.expired:
			w.Unstarted++
			w.Censored = append(w.Censored, float64(s.end-j.spec.Submit.UnixNano())/1e9)
		default:
			w.Censored = append(w.Censored, float64(j.spec.Submit.Add(plan.MaxFlexWait).UnixNano()-j.spec.Submit.UnixNano())/1e9)
		}
	}
	s.waitGroups()
	names := slices.Sorted(maps.Keys(r.rules))
	for _, n := range names {
		r.Rules = append(r.Rules, r.rules[n])
	}
}

// OfNominal is q's use over its nominal over time (GPU-hours of nominal
// during the run, moves included); -1 without nominal.
func (q *QuotaStats) OfNominal() float64 {
	if q.NominalTime == 0 {
		return -1
	}
	return q.Used / q.NominalTime
}

// StartedWait is the mean queue wait of the training jobs submitted during
// the run that started, and how many they are.
func (r *Result) StartedWait() (time.Duration, int) {
	sum, n := 0.0, 0
	for _, w := range r.WS {
		for _, x := range w.Waits {
			sum += x
		}
		n += len(w.Waits)
	}
	if n == 0 {
		return 0, 0
	}
	return time.Duration(sum / float64(n) * float64(time.Second)), n
}

// Waiting are the training jobs submitted during the run that never
// started: still waiting at the end, or expired.
func (r *Result) Waiting() int {
	n := 0
	for _, w := range r.WS {
		n += len(w.Censored)
	}
	return n
}

// AllWait is the workspace's mean queue wait over all its training jobs
// submitted during the run, counting one that never started with its wait
// so far (to the end, or to its expiry).
func (w *WSStats) AllWait() time.Duration {
	sum := 0.0
	for _, x := range w.Waits {
		sum += x
	}
	for _, x := range w.Censored {
		sum += x
	}
	n := len(w.Waits) + len(w.Censored)
	if n == 0 {
		return 0
	}
	return time.Duration(sum / float64(n) * float64(time.Second))
}
