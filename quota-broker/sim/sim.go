// Package sim is gputide's simulator: it replays a scenario (a quota tree, a
// modelled Nomad cluster, inference services on day/night schedules, training
// replayed from the Philly trace, dev instances, quota moves) in simulated
// time against a planning policy, the real planning core (package plan) or
// one of the alternatives it is compared with, and measures what happens.
//
// The simulation is deterministic: the same scenario, workload and policy
// give the same events, byte for byte.
package sim

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/sim/trace"
)

// Policy plans a snapshot of the modelled cluster. The simulator applies the
// plan exactly: stop actions stop those allocations, admit actions place
// allocations on the nodes they name, expire actions drop flex requests.
type Policy interface {
	Name() string
	Plan(*plan.Snapshot) (*plan.Plan, error)
}

// Gputide is the real planning core with DESIGN L14's order of idle jobs
// and rule L14.fair (plan.IdleOrderFair), the broker's planner.
type Gputide struct{}

// Name implements Policy.
func (Gputide) Name() string { return "gputide" }

// Plan implements Policy.
func (Gputide) Plan(s *plan.Snapshot) (*plan.Plan, error) {
	return plan.ComputeWith(s, plan.Options{IdleOrder: plan.IdleOrderFair})
}

// GputideFIFO is the real planning core as it was before DESIGN L14: idle
// jobs decided after the non-idle work in L3 order, on free GPUs only,
// with no give-back (plan.IdleOrderL3). Run beside Gputide, it measures
// what fair lending changes.
type GputideFIFO struct{}

// Name implements Policy.
func (GputideFIFO) Name() string { return "gputide-fifo" }

// Plan implements Policy.
func (GputideFIFO) Plan(s *plan.Snapshot) (*plan.Plan, error) {
	return plan.ComputeWith(s, plan.Options{IdleOrder: plan.IdleOrderL3})
}

// CorePolicy returns the policy of the real core called name: Gputide
// ("gputide") or GputideFIFO ("gputide-fifo"); false for another name.
func CorePolicy(name string) (Policy, bool) {
	switch name {
	case Gputide{}.Name():
		return Gputide{}, true
	case GputideFIFO{}.Name():
		return GputideFIFO{}, true
	}
	return nil, false
}

// Options control one run.
type Options struct {
	Policy Policy    // default Gputide
	Events io.Writer // events.jsonl; nil: not written
	// Progress, when set, is called with the fraction of simulated time done,
	// about every percent.
	Progress func(frac float64)
	// Sample is the period of the occupancy samples; 0: about 1,000 samples.
	Sample time.Duration
	// noBookkeeping leaves out the report's bookkeeping of issue 12: what
	// bound each wait (waits.go), the losses per hour and rule, and the
	// queue per sample. Only BenchmarkReportBookkeeping sets it, to measure
	// what that bookkeeping costs.
	noBookkeeping bool
}

// Event is one line of events.jsonl: a plan action (stop, admit, wait,
// expire) with its rule, or a lifecycle event of the modelled cluster
// (submit, start, finish, gone, scale, quota_move, conflict).
type Event struct {
	T         string   `json:"t"`
	Event     string   `json:"event"`
	Rule      string   `json:"rule,omitempty"`
	Alloc     string   `json:"alloc,omitempty"`
	Namespace string   `json:"namespace,omitempty"`
	Job       string   `json:"job,omitempty"`
	Group     string   `json:"group,omitempty"`
	Node      string   `json:"node,omitempty"`
	Nodes     []string `json:"nodes,omitempty"`
	Count     int      `json:"count,omitempty"`
	GPUs      int      `json:"gpus,omitempty"`
	For       string   `json:"for,omitempty"`
	From      *int     `json:"from,omitempty"`
	To        *int     `json:"to,omitempty"`
	LostGPUh  float64  `json:"lost_gpu_hours,omitempty"`
	Quota     string   `json:"quota,omitempty"` // wait: the quota node that binds it (DESIGN L3)
	// Flavor is the flavor of an admit, a start or a stop (DESIGN L13);
	// "" in a tree of the implicit flavor.
	Flavor string `json:"flavor,omitempty"`
	Reason string `json:"reason,omitempty"`
}

type evKind uint8

const (
	evArrive evKind = iota
	evMove
	evGone
	evFinish
	evWake
	evTick
)

type event struct {
	t    int64
	seq  uint64
	kind evKind
	j    *job
	a    *alloc
	gen  int
	move *QuotaMove
}

type inferState struct {
	cfg     *Inference
	shape   *trace.Shape
	j       *job
	records []*ScaleUp
	// pre is the pre-warm entry last given to the core (hasPre: one was).
	pre    plan.Prewarm
	hasPre bool
}

type qinfo struct {
	node   *quota.Node
	own    []int // namespaces bound to it
	sub    []int // namespaces of its subtree
	leaf   bool
	parent int
}

type sim struct {
	sc     *Scenario
	w      *Workload
	opt    Options
	policy Policy

	now, start, end int64
	interval        int64

	nodes     []*node
	slots     []*gpuSlot
	planNodes []plan.Node
	nodeIndex map[string]int
	capacity  int

	tree    *quota.Node
	ns      []string
	nsIndex map[string]int
	qs      []*qinfo

	jobs     []*job
	jobByKey map[plan.GroupKey]*job
	jobByJob map[plan.JobKey]*job
	active   []*job
	stopping []*alloc
	allocs   map[string]*alloc
	infer    []*inferState

	own   [][3][2]int // namespace x state x idle: GPUs owned
	flOwn []int       // per declared flavor (the tree's order): GPUs owned
	pendI int         // GPUs asked by pending idle training jobs
	// asked are, per namespace, the GPUs its pending allocations ask for
	// (every job: the demand of DESIGN L14 beyond what is held).
	asked []int
	// fair and fairOut are the buffers of the fair-lending figures
	// (fairLending); fairErr the first error computing them.
	fair    plan.FairFigures
	fairOut []plan.FairShare
	// fairOwn are, per quota node, its own figures (plan.OwnFigures);
	// fairHeld the GPUs its subtree holds.
	fairOwn  []plan.OwnFigures
	fairHeld []int
	fairErr  error

	heap  []event
	seq   uint64
	dirty bool
	last  int64

	ew       *bufio.Writer
	ewErr    error
	nextProg int64

	res        *Result
	nextSample int64
	sampleDt   int64
	snap       plan.Snapshot

	// corePre: the policy pre-warms in the core (corePrewarm) and the
	// scenario asks for pre-warm; early: the autoscaler raises counts
	// early instead (the other policies, with pre-warm).
	corePre, early bool
	// The Calendar (calendar.go): the bookings as the core sees them, the
	// holds kept from the plans (heldIdx: GPU slot -> index in holds,
	// rebuilt when nil), the instants a plan asked to be woken at.
	reservations []plan.Reservation
	resByID      map[string]*plan.Reservation
	holds        []plan.Hold
	heldIdx      map[int]int
	slotByID     map[string]int
	wakes        map[int64]bool
	// pendByKey are the jobs pending in snap: a map of the backlog, much
	// smaller than jobByKey (every job of the trace), in which apply finds
	// the job of each wait action (one per pending job and plan).
	pendByKey map[plan.GroupKey]*job
	// evicted are the victim stops the plans made that eviction budgets
	// count (DESIGN L14, plan.Evictions), within the tree's largest
	// max_evict per (plan.RecentEvictions; none while no node has a
	// budget): the snapshot's evictions, as the broker's history gives
	// them.
	evicted []plan.Eviction
}

// The garbage collector's settings `gputide sim` runs under (unless GOGC
// is set) and the benchmarks use: the simulator is a batch program with a
// small live heap, and the planning core allocates large short-lived
// arrays per pending job and flavor (DESIGN L13's choice across flavors),
// so it trades memory for fewer collections: GOGC 1000, within a 512 MiB
// soft limit that bounds the larger replays (the whole Philly trace stays
// at about 520 MB, as it was at GOGC 400 with 900 MiB). At GOGC 400 the
// mixed example spent 14 of its 71 s of CPU in the kernel (the scavenger
// returning freed pages that the next arrays fault in again); at 1000, 5
// of 51 s, at about 300 MB peak RSS (docs/benchmarks.md, "The mixed
// example").
const (
	GCPercent   = 1000
	MemoryLimit = 512 << 20 // bytes
)

// Run simulates the scenario's workload under one policy.
func Run(sc *Scenario, w *Workload, opt Options) (*Result, error) {
	if opt.Policy == nil {
		opt.Policy = Gputide{}
	}
	if sc.Length < sc.MinLength() {
		return nil, fmt.Errorf("length %s is below the minimum %s (a minute, and two broker intervals)", sc.Length, sc.MinLength())
	}
	wall := time.Now()
	s := &sim{sc: sc, w: w, opt: opt, policy: opt.Policy, nodeIndex: map[string]int{}, jobByKey: map[plan.GroupKey]*job{},
		jobByJob: map[plan.JobKey]*job{}, allocs: map[string]*alloc{}, nsIndex: map[string]int{}}
	_, inCore := opt.Policy.(corePrewarm)
	s.corePre, s.early = sc.Broker.Prewarm && inCore, sc.Broker.Prewarm && !inCore
	s.reservations = snapshotReservations(sc)
	s.resByID = map[string]*plan.Reservation{}
	for i := range s.reservations {
		s.resByID[s.reservations[i].ID] = &s.reservations[i]
	}
	s.start, s.end = sc.Start.UnixNano(), sc.End().UnixNano()
	s.now, s.last = s.start, s.start
	s.interval = int64(sc.Broker.Interval)
	if opt.Events != nil {
		s.ew = bufio.NewWriterSize(opt.Events, 1<<16)
	}
	s.newCluster()
	s.tree = sc.Quota.Clone()
	s.initQuota()
	s.res = newResult(s)
	s.sampleDt = int64(opt.Sample)
	if s.sampleDt <= 0 {
		s.sampleDt = max(int64(time.Minute), (s.end-s.start)/1000)
	}
	s.nextSample = s.start
	if err := s.initJobs(); err != nil {
		return nil, err
	}
	for _, m := range sc.Moves {
		s.push(event{t: m.At.UnixNano(), kind: evMove, move: m})
	}
	s.push(event{t: s.start, kind: evTick})
	if err := s.loop(); err != nil {
		return nil, err
	}
	if s.fairErr != nil {
		return nil, fmt.Errorf("fair lending figures: %w", s.fairErr)
	}
	s.finishStats()
	if s.ew != nil {
		if err := s.ew.Flush(); err != nil && s.ewErr == nil {
			s.ewErr = err
		}
		if s.ewErr != nil {
			return nil, fmt.Errorf("writing events: %w", s.ewErr)
		}
	}
	s.res.Wall = time.Since(wall)
	return s.res, nil
}

func (s *sim) initQuota() {
	s.ns = quota.SortedNamespaces(s.tree)
	for i, n := range s.ns {
		s.nsIndex[n] = i
	}
	s.own = make([][3][2]int, len(s.ns))
	s.flOwn = make([]int, len(s.tree.Flavors))
	s.asked = make([]int, len(s.ns))
	var walk func(n *quota.Node, parent int) []int
	walk = func(n *quota.Node, parent int) []int {
		q := &qinfo{node: n, leaf: len(n.Children) == 0, parent: parent}
		idx := len(s.qs)
		s.qs = append(s.qs, q)
		for _, ns := range n.Namespaces {
			q.own = append(q.own, s.nsIndex[ns])
		}
		q.sub = append(q.sub, q.own...)
		for _, c := range n.Children {
			q.sub = append(q.sub, walk(c, idx)...)
		}
		return q.sub
	}
	walk(s.tree, -1)
}

func (s *sim) newJob(spec *JobSpec) *job {
	j := &job{spec: spec, key: plan.GroupKey{Namespace: spec.Namespace, Job: spec.Name, Group: spec.Group}, ns: s.nsIndex[spec.Namespace],
		remaining: spec.Work, queuedAt: spec.Submit.UnixNano()}
	s.jobs = append(s.jobs, j)
	s.jobByKey[j.key] = j
	if s.jobByJob == nil {
		s.jobByJob = map[plan.JobKey]*job{}
	}
	s.jobByJob[j.key.JobKey()] = j
	return j
}

func (s *sim) initJobs() error {
	for i, in := range s.sc.Infer {
		spec := &JobSpec{Namespace: in.Namespace, Name: in.Name, Group: in.Group, Type: plan.JobService,
			Priority: in.Priority, GPUs: in.GPUs, Submit: s.sc.Start, KillTimeout: in.KillTimeout,
			Origin: fmt.Sprintf("inference %q", in.Name), Placement: in.Placement}
		j := s.newJob(spec)
		st := &inferState{cfg: in, shape: s.w.Shapes[i], j: j}
		j.infer = st
		s.infer = append(s.infer, st)
		j.submitted = true
		j.desired, _ = s.target(st, s.start)
		s.active = append(s.active, j)
		s.pend(j)
		s.record(Event{Event: "submit", Namespace: spec.Namespace, Job: spec.Name, Group: spec.Group, Count: j.desired, GPUs: spec.GPUs})
	}
	for _, spec := range s.w.Jobs {
		if _, dup := s.jobByKey[plan.GroupKey{Namespace: spec.Namespace, Job: spec.Name, Group: spec.Group}]; dup {
			return fmt.Errorf("%s: job %s/%s defined twice", spec.Origin, spec.Namespace, spec.Name)
		}
		j := s.newJob(spec)
		s.push(event{t: spec.Submit.UnixNano(), kind: evArrive, j: j})
	}
	return nil
}

// countAt is the inference replica count the autoscaler wants at t: the
// schedule's count plus the demand shape's extra replicas.
func (s *sim) countAt(st *inferState, t int64) int {
	tt := time.Unix(0, t).In(s.sc.Zone)
	c := st.cfg.Schedule.CountAt(tt)
	if st.shape != nil && st.cfg.Demand != nil {
		c += int(float64(st.cfg.Demand.Extra)*st.shape.At(tt) + 0.5)
	}
	return c
}

// target is the count the autoscaler sets at t, and the instant it is due.
// Under the real core the count is set when it is due: the core pre-warms
// (prewarmOf). Under the other policies, with pre-warm, a rise due within
// kill_timeout plus one interval is set now, so that borrowers are drained
// in time for the boundary (what an operator would do for a scheduler
// that has no pre-warm: start the windows that much early).
func (s *sim) target(st *inferState, t int64) (int, int64) {
	c := s.countAt(st, t)
	if !s.early {
		return c, t
	}
	lead := int64(s.sc.Broker.KillTimeout) + s.interval
	ahead := s.countAt(st, t+lead)
	if ahead <= c {
		return c, t
	}
	// The rise is due at the first change of the count after t: a schedule
	// boundary or, with a demand shape, the next local hour.
	due := t + lead
	tt := time.Unix(0, t).In(s.sc.Zone)
	if nb, _, ok := st.cfg.Schedule.NextBoundary(tt); ok && nb.UnixNano() <= due && s.countAt(st, nb.UnixNano()) >= ahead {
		due = nb.UnixNano()
	}
	if st.shape != nil {
		h := tt.Truncate(time.Hour).Add(time.Hour).UnixNano()
		if h < due && s.countAt(st, h) >= ahead {
			due = h
		}
	}
	return ahead, due
}

func (s *sim) push(e event) {
	s.seq++
	e.seq = s.seq
	s.heap = append(s.heap, e)
	i := len(s.heap) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !less(&s.heap[i], &s.heap[p]) {
			break
		}
		s.heap[i], s.heap[p] = s.heap[p], s.heap[i]
		i = p
	}
}

func less(a, b *event) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	return a.seq < b.seq
}

func (s *sim) pop() event {
	h := s.heap
	e := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && less(&h[r], &h[l]) {
			m = r
		}
		if !less(&h[m], &h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	s.heap = h
	return e
}

func (s *sim) loop() error {
	for len(s.heap) > 0 {
		t := s.heap[0].t
		if t > s.end {
			break
		}
		s.advance(t)
		for len(s.heap) > 0 && s.heap[0].t == t {
			e := s.pop()
			s.res.Events++
			s.handle(e)
		}
		if s.dirty {
			if err := s.plan(); err != nil {
				return err
			}
		}
		if s.opt.Progress != nil && t >= s.nextProg {
			s.opt.Progress(float64(t-s.start) / float64(s.end-s.start))
			s.nextProg = t + (s.end-s.start)/100
		}
	}
	s.advance(s.end)
	// A sample at the end too, so that the samples span the whole run.
	if n := len(s.res.Samples); n == 0 || s.res.Samples[n-1].T.UnixNano() < s.end {
		s.sample(s.end)
	}
	if s.opt.Progress != nil {
		s.opt.Progress(1)
	}
	return nil
}

func (s *sim) handle(e event) {
	switch e.kind {
	case evArrive:
		j := e.j
		j.submitted = true
		j.desired = j.spec.Count
		s.active = append(s.active, j)
		s.pend(j)
		s.dirty = true
		if j.spec.Gang {
			// A gang still waiting after its flex wait expires (L11): plan
			// then even if nothing else happens.
			wait := plan.MaxFlexWait
			if f := j.spec.Flex; f != nil {
				wait = f.MaxWait
			}
			s.push(event{t: j.spec.Submit.Add(wait).UnixNano() + 1, kind: evWake})
		}
		s.record(Event{Event: "submit", Namespace: j.spec.Namespace, Job: j.spec.Name, Group: j.spec.Group,
			Count: j.spec.Count, GPUs: j.spec.GPUs, Reason: j.spec.Origin})
	case evFinish:
		j := e.j
		if e.gen != j.gen || j.done {
			return
		}
		for _, a := range j.live {
			s.release(a)
			delete(s.allocs, a.id)
		}
		j.live = nil
		j.progressing = false
		j.remaining = 0
		s.retire(j)
		s.res.Finished++
		s.dirty = true
		s.record(Event{Event: "finish", Namespace: j.spec.Namespace, Job: j.spec.Name, Group: j.spec.Group})
	case evGone:
		a := e.a
		s.gone(a)
		delete(s.allocs, a.id)
		for i, x := range s.stopping {
			if x == a {
				s.stopping = append(s.stopping[:i], s.stopping[i+1:]...)
				break
			}
		}
		s.dirty = true
	case evMove:
		s.move(e.move)
	case evWake:
		delete(s.wakes, e.t)
		s.dirty = true
	case evTick:
		s.autoscale()
		if next := e.t + s.interval; next <= s.end {
			s.push(event{t: next, kind: evTick})
		}
	}
}

// retire removes a finished or expired job from the active list.
func (s *sim) retire(j *job) {
	j.done = true
	s.pend(j)
	for i, x := range s.active {
		if x == j {
			s.active = append(s.active[:i], s.active[i+1:]...)
			break
		}
	}
}

// pend keeps the count of GPUs asked by pending idle training jobs, and
// per namespace those asked by every pending job. It is called whenever
// j.missing() may have changed.
func (s *sim) pend(j *job) {
	all := j.missing() * j.spec.GPUs
	n := 0
	if j.spec.Idle && j.spec.Training {
		n = all
	}
	s.pendI += n - j.pendCounted
	j.pendCounted = n
	s.asked[j.ns] += all - j.askCounted
	j.askCounted = all
}

// progress starts a batch job's work once all its allocations run.
func (s *sim) progress(j *job) {
	if j.spec.Type != plan.JobBatch || j.progressing || j.done || j.running < j.desired {
		return
	}
	j.progressing = true
	j.progStart = s.now
	j.gen++
	s.push(event{t: s.now + int64(j.remaining), kind: evFinish, j: j, gen: j.gen})
}

// halt stops a batch job's work: the work since its last checkpoint is lost
// and must be done again.
func (s *sim) halt(j *job, rule plan.Rule) {
	if !j.progressing {
		return
	}
	elapsed := time.Duration(s.now - j.progStart)
	lost := elapsed
	if c := j.spec.Checkpoint; c > 0 {
		lost = elapsed % c
	}
	if w := j.spec.CheckpointWrite; w > 0 && w <= j.spec.KillTimeout {
		// The victim writes a checkpoint in its kill_timeout (DESIGN L8).
		lost = 0
	}
	j.remaining = j.remaining - elapsed + lost
	j.progressing = false
	j.gen++
	gpuh := lost.Hours() * float64(j.desired*j.spec.GPUs)
	rs := s.res.rule(string(rule))
	rs.LostGPUh += gpuh
	if j.spec.Idle {
		rs.LostBorrowing += gpuh
	}
	s.res.LostGPUh += gpuh
	s.res.lastLost = gpuh
	if gpuh > 0 && !s.opt.noBookkeeping {
		s.res.Losses = append(s.res.Losses, Loss{At: s.tm(s.now), Rule: string(rule), GPUh: gpuh, Borrowing: j.spec.Idle})
	}
}

// autoscale evaluates every inference service's count, as the Nomad
// Autoscaler would every interval, and scales the job.
func (s *sim) autoscale() {
	for _, st := range s.infer {
		j := st.j
		want, due := s.target(st, s.now)
		if want == j.desired {
			continue
		}
		from, to := j.desired, want
		s.record(Event{Event: "scale", Rule: "autoscaler", Namespace: j.spec.Namespace, Job: j.spec.Name, Group: j.spec.Group,
			From: &from, To: &to, Reason: fmt.Sprintf("schedule count due %s", s.fmt(due))})
		if want > j.desired {
			tt := time.Unix(0, due).In(s.sc.Zone)
			sched := st.cfg.Schedule
			boundary := sched.CountAt(tt) > sched.CountAt(tt.Add(-time.Nanosecond))
			st.records = append(st.records, &ScaleUp{Service: j.key.String(), Raised: s.tm(s.now), Due: tt, From: j.running, To: want, Boundary: boundary})
		} else {
			// Nomad stops the newest allocations first: placing, then running.
			victims := append([]*alloc(nil), j.live...)
			sort.SliceStable(victims, func(a, b int) bool {
				if (victims[a].state == placing) != (victims[b].state == placing) {
					return victims[a].state == placing
				}
				return victims[a].seq > victims[b].seq
			})
			for _, a := range victims[:min(len(victims), j.desired-want)] {
				s.record(Event{Event: "stop", Rule: "autoscaler", Alloc: a.id, Namespace: j.spec.Namespace, Job: j.spec.Name,
					Group: j.spec.Group, Node: s.nodes[a.node].id, GPUs: len(a.slots), Reason: "scale down"})
				s.stop(a, "autoscaler", plan.GroupKey{})
			}
		}
		j.desired = want
		s.pend(j)
		s.dirty = true
		s.inferCheck(st)
	}
	if s.corePre {
		// A scale-up that enters drain_horizon, or changes, is planned
		// for (DESIGN L5 "Pre-warm").
		if _, changed := s.prewarms(nil); changed {
			s.dirty = true
		}
	}
}

// inferCheck closes the scale-up records that the service's running
// replicas now meet.
func (s *sim) inferCheck(st *inferState) {
	for _, r := range st.records {
		if r.done {
			continue
		}
		if st.j.running >= r.To || st.j.desired < r.To {
			r.done = true
			r.Ready = s.tm(s.now)
			r.Wait = max(0, r.Ready.Sub(r.Due))
			r.Cancelled = st.j.running < r.To
		}
	}
}

// move applies a quota move (use case 2): all its nodes change at once.
func (s *sim) move(m *QuotaMove) {
	at := s.tm(s.now)
	rec := MoveRecord{Name: m.Name, At: at}
	for _, g := range m.GPUs {
		n := s.tree.Find(g.Quota)
		flavor := cmp.Or(m.Flavor, quota.FlavorNames(s.tree)[0])
		from, to := n.GPUs.Of(flavor), g.GPUs
		n.GPUs, n.ChangedAt = n.GPUs.Clone().Set(flavor, g.GPUs), at
		s.record(Event{Event: "quota_move", Rule: "L9", Namespace: "", Job: g.Quota, From: &from, To: &to, Flavor: s.eventFlavor(flavor), Reason: m.Name})
		rec.Changes = append(rec.Changes, QuotaChange{Quota: g.Quota, From: from, To: to})
	}
	s.res.Moves = append(s.res.Moves, rec)
	// Debt grace ends: victims may change then (DESIGN L9).
	grace := s.sc.Settings.DebtGrace
	s.push(event{t: s.now + int64(grace), kind: evWake})
	s.push(event{t: s.now + int64(grace) + int64(time.Second), kind: evWake})
	s.dirty = true
}

func (s *sim) tm(t int64) time.Time { return time.Unix(0, t).In(s.sc.Zone) }

func (s *sim) fmt(t int64) string { return s.tm(t).Format(time.RFC3339) }

// eventFlavor is the flavor an event names: f, or the tree's only flavor
// when f is "" in a tree of one declared flavor; "" for the implicit one.
func (s *sim) eventFlavor(f string) string {
	switch {
	case s.tree == nil || len(s.tree.Flavors) == 0:
		return ""
	case f == "":
		return s.tree.Flavors[0].Name
	}
	return f
}

func (s *sim) record(e Event) {
	if s.ew == nil || s.ewErr != nil {
		return
	}
	e.T = s.fmt(s.now)
	b, err := json.Marshal(&e)
	if err != nil {
		s.ewErr = err
		return
	}
	b = append(b, '\n')
	if _, err := s.ew.Write(b); err != nil {
		s.ewErr = err
	}
}

// gangFlex makes a gang all-or-nothing: a flex request with the longest
// wait and the longest max_run (DESIGN L11 requires one; the simulator
// does not stop a gang at its max_run).
var gangFlex = &plan.Flex{MaxWait: plan.MaxFlexWait, MaxRun: plan.MaxFlexRun}

// snapshot builds the planner's view of the modelled cluster.
func (s *sim) snapshot() *plan.Snapshot {
	// The slices are reused from plan to plan: the planner keeps nothing of
	// a snapshot.
	snap := &s.snap
	if s.pendByKey == nil {
		s.pendByKey = map[plan.GroupKey]*job{}
	}
	clear(s.pendByKey)
	*snap = plan.Snapshot{Time: s.tm(s.now), Quota: s.tree, Settings: s.sc.Settings, Nodes: s.planNodes,
		Allocations: snap.Allocations[:0], Pending: snap.Pending[:0], Reservations: s.reservations,
		Holds: s.liveHolds(), Prewarm: snap.Prewarm[:0]}
	if len(s.evicted) > 0 {
		s.evicted = plan.RecentEvictions(s.tree, s.evicted, snap.Time)
		snap.Evictions = s.evicted
	}
	if s.corePre {
		snap.Prewarm, _ = s.prewarms(snap.Prewarm)
	}
	add := func(a *alloc) {
		if len(a.slots) == 0 {
			return
		}
		sp := a.j.spec
		pa := plan.Allocation{
			ID: a.id, Namespace: sp.Namespace, Job: sp.Name, Group: sp.Group, Type: sp.Type, Priority: sp.Priority,
			Node: s.nodes[a.node].id, GPUIDs: a.ids, Idle: sp.Idle, StoppingFor: a.stoppingFor,
			StoppingForReservation: a.stoppingForRes, StartedAt: a.placedTime, KillTimeout: sp.KillTimeout,
			Reservation: sp.Reservation,
		}
		if sp.Flex != nil && a.j.admittedAt != 0 {
			pa.MaxRun, pa.AdmittedAt = sp.Flex.MaxRun, s.tm(a.j.admittedAt).UTC()
		}
		snap.Allocations = append(snap.Allocations, pa)
	}
	for _, j := range s.active {
		for _, a := range j.live {
			add(a)
		}
		if m := j.missing(); m > 0 {
			sp := j.spec
			p := plan.Pending{Namespace: sp.Namespace, Job: sp.Name, Group: sp.Group, Type: sp.Type, Priority: sp.Priority,
				Count: m, GPUs: sp.GPUs, Model: sp.Model, Datacenters: sp.Datacenters, NodePool: sp.NodePool,
				Idle: sp.Idle, SubmittedAt: sp.Submit.UTC(), Reservation: sp.Reservation, Flavors: sp.Flavors}
			if q := j.queuedAt; q != sp.Submit.UnixNano() {
				p.QueuedAt = s.tm(q).UTC()
			}
			switch {
			case sp.Flex != nil:
				p.Flex = sp.Flex
			case sp.Gang && !sp.Idle: // an idle job cannot be a flex request (L11)
				p.Flex = gangFlex
			}
			snap.Pending = append(snap.Pending, p)
			s.pendByKey[j.key] = j
		}
	}
	for _, a := range s.stopping {
		add(a)
	}
	// A reservation's hold past its Until keeps GPUs only for the
	// allocations the booking has not placed (DESIGN L10): the simulator
	// keeps what the core keeps, so that an admit on the GPUs the hold let
	// go is no conflict.
	if kept := plan.KeptHolds(snap); len(kept) != len(s.holds) || (len(kept) > 0 && &kept[0] != &s.holds[0]) {
		s.holds, s.heldIdx = kept, nil
		snap.Holds = kept
	}
	return snap
}

// plan runs the policy on the current state and applies its plan.
func (s *sim) plan() error {
	s.dirty = false
	snap := s.snapshot()
	if len(snap.Pending) == 0 && len(snap.Prewarm) == 0 && len(snap.Reservations) == 0 && !s.timedLive(snap) {
		// Nothing is waiting, nothing is due: a plan has no claimant to
		// act for and no timed rule to apply.
		return nil
	}
	if err := snap.Validate(); err != nil {
		return fmt.Errorf("the simulated snapshot at %s breaks a rule: %w", s.fmt(s.now), err)
	}
	p, err := s.policy.Plan(snap)
	s.res.Plans++
	if err != nil {
		return fmt.Errorf("%s: planning at %s: %w", s.policy.Name(), s.fmt(s.now), err)
	}
	s.apply(p)
	s.wakeAt(p.WakeAt)
	return nil
}

// timedLive reports whether a live allocation of snap is under a timed
// rule (a flex request's max_run, L11).
func (s *sim) timedLive(snap *plan.Snapshot) bool {
	for i := range snap.Allocations {
		if snap.Allocations[i].MaxRun > 0 {
			return true
		}
	}
	return false
}

func (s *sim) conflict(a plan.Action, why string) {
	s.res.Conflicts = append(s.res.Conflicts, fmt.Sprintf("%s: %s %s/%s/%s %s: %s", s.fmt(s.now), a.Action, a.Namespace, a.Job, a.Group, a.Alloc, why))
	s.record(Event{Event: "conflict", Rule: string(a.Rule), Alloc: a.Alloc, Namespace: a.Namespace, Job: a.Job, Group: a.Group, Reason: why})
}

// apply carries out a plan exactly: stops first, then admits, expiries and
// waits, each in the plan's order.
//
// The state a plan leaves is not planned again by itself: the planner has
// already done all it can in it (re-planning it changed nothing in the
// reference scenario). What follows from the plan, victims ending and
// allocations starting, are events and are planned on.
func (s *sim) apply(p *plan.Plan) {
	replan := false
	defer func() {
		if replan {
			s.push(event{t: s.now, kind: evWake})
		}
	}()
	units := map[[2]plan.GroupKey]bool{}
	// Whole-job stops and holds first, with the stops: the GPUs a plan
	// holds are not free to the admits that follow.
	for i := range p.Actions {
		switch act := &p.Actions[i]; act.Action {
		case plan.ActionStopJob, plan.ActionSuspend:
			s.jobStop(act)
		case plan.ActionHold:
			s.keepHold(act)
			s.holdEvent(act)
		}
	}
	// The stops made, for eviction budgets (window: the tree's largest
	// per, read at the first stop; 0: none kept).
	var counted []plan.Action
	window := time.Duration(-1)
	defer func() {
		if len(counted) > 0 {
			s.evicted = append(s.evicted, plan.Evictions(s.tree, counted, s.tm(s.now))...)
		}
	}()
	for _, act := range p.Actions {
		if act.Action != plan.ActionStop {
			continue
		}
		a := s.allocs[act.Alloc]
		if a == nil {
			s.conflict(act, "no such live allocation")
			continue
		}
		forRes := ""
		if act.For.IsZero() {
			forRes = act.Reservation // a drain or start stop for a reservation (L10)
		}
		if a.state == stopping {
			switch {
			case a.stoppingFor.IsZero() && a.stoppingForRes == "":
				a.stoppingFor, a.stoppingForRes = act.For, forRes
			default:
				s.conflict(act, "already stopping for "+ownerText(plan.HoldOwner{Reservation: a.stoppingForRes, Group: a.stoppingFor}))
			}
			continue
		}
		r := s.res.rule(string(act.Rule))
		r.Stops++
		r.GPUs += len(a.slots)
		if a.idle() {
			r.StopsBorrowing++
		}
		if unit := [2]plan.GroupKey{a.j.key, act.For}; !units[unit] {
			units[unit] = true
			r.Units++
		}
		a.j.preempted++
		s.res.lastLost = 0
		node, gpus := s.nodes[a.node].id, len(a.slots)
		s.stop(a, act.Rule, act.For)
		a.stoppingForRes = forRes
		if window < 0 {
			window = quota.EvictWindow(s.tree)
		}
		if window > 0 {
			made := act
			made.GPUs = gpus
			counted = append(counted, made)
		}
		if a.fi >= 0 && a.fi < len(s.res.Flavors) {
			s.res.Flavors[a.fi].Stops++
			s.res.Flavors[a.fi].LostGPUh += s.res.lastLost
		}
		s.record(Event{Event: "stop", Rule: string(act.Rule), Alloc: act.Alloc, Namespace: act.Namespace, Job: act.Job,
			Group: a.j.spec.Group, Node: node, GPUs: gpus, For: ownerText(plan.HoldOwner{Reservation: forRes, Group: act.For}),
			LostGPUh: round3(s.res.lastLost), Flavor: s.eventFlavor(a.flavor), Reason: act.Reason})
	}
	for _, act := range p.Actions {
		switch act.Action {
		case plan.ActionAdmit:
			j := s.jobByKey[plan.GroupKey{Namespace: act.Namespace, Job: act.Job, Group: act.Group}]
			if j == nil || !j.submitted || j.done {
				s.conflict(act, "no such pending group")
				continue
			}
			if len(act.Nodes) > j.missing() {
				s.conflict(act, fmt.Sprintf("admits %d allocations, %d are pending", len(act.Nodes), j.missing()))
				continue
			}
			s.record(Event{Event: "admit", Rule: string(act.Rule), Namespace: act.Namespace, Job: act.Job, Group: act.Group,
				Nodes: act.Nodes, Count: len(act.Nodes), GPUs: j.spec.GPUs, Flavor: s.eventFlavor(act.Flavor), Reason: act.Reason})
			if len(j.live) == 0 {
				j.admittedAt = s.now // the store's admitted_at (L11 max_run counts from it)
			}
			if j.spec.Flex != nil || j.spec.Reservation != "" {
				// Its timed stop (L11.max_run, L10.end) is planned from
				// its live allocations: plan again once they are in the
				// snapshot, as the broker's next period would, for the
				// plan's wake_at.
				replan = true
			}
			for _, n := range act.Nodes {
				ni, ok := s.nodeIndex[n]
				if !ok {
					s.conflict(act, "unknown node "+n)
					continue
				}
				a, err := s.placeIn(j, ni, act.Flavor)
				if err != nil {
					s.conflict(act, err.Error())
					continue
				}
				s.allocs[a.id] = a
			}
			j.waiting = false
			s.pend(j)
			s.bind(j, BoundVictims)
		case plan.ActionExpire:
			j := s.jobByKey[plan.GroupKey{Namespace: act.Namespace, Job: act.Job, Group: act.Group}]
			if j == nil || j.done {
				s.conflict(act, "no such pending group")
				continue
			}
			for _, a := range append([]*alloc(nil), j.live...) {
				s.stop(a, act.Rule, plan.GroupKey{})
			}
			s.closeBind(j, s.now)
			j.expired = true
			s.retire(j)
			s.res.Expired++
			s.record(Event{Event: "expire", Rule: string(act.Rule), Namespace: act.Namespace, Job: act.Job, Group: act.Group, Reason: act.Reason})
		case plan.ActionWait:
			key := plan.GroupKey{Namespace: act.Namespace, Job: act.Job, Group: act.Group}
			j := s.pendByKey[key]
			if j == nil {
				j = s.jobByKey[key]
			}
			// A wait is recorded when the group starts to wait and when its
			// rule or binding quota changes, not at every plan.
			if j == nil || (j.waiting && j.waitRule == act.Rule && j.waitQuota == act.Quota) {
				continue
			}
			j.waiting, j.waitRule, j.waitQuota = true, act.Rule, act.Quota
			s.bind(j, waitBinding(j, &act))
			if act.Quota != "" {
				s.boundQuota(act.Quota)
			}
			s.record(Event{Event: "wait", Rule: string(act.Rule), Namespace: act.Namespace, Job: act.Job, Group: act.Group,
				Count: act.Count, GPUs: act.GPUs, Quota: act.Quota, Reason: act.Reason})
		}
	}
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// took records where a GPU an inference allocation takes comes from.
func (s *sim) took(a *alloc, g *gpuSlot, from *alloc) {
	if a.j.infer == nil {
		return
	}
	t := Take{At: s.tm(s.now), Service: a.j.key.String(), Alloc: a.id, GPU: g.id, Node: s.nodes[g.node].id}
	if from != nil {
		t.From, t.FromNamespace, t.FromJob, t.FromType, t.Rule, t.For = from.id, from.j.spec.Namespace, from.j.spec.Name,
			from.j.spec.Type, from.stopRule, from.stoppingFor.String()
		t.FromTraining = from.j.spec.Training
	}
	s.res.Takes = append(s.res.Takes, t)
}
