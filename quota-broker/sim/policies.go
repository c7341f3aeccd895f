package sim

import (
	"fmt"
	"sort"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

type quotaNode = quota.Node

// The alternatives gputide is compared with (`gputide sim -compare`). Both
// plan the same snapshots as the real core and give plans the simulator
// applies the same way. Jobs keep their workload semantics under every
// policy: a gang is placed whole or not at all and gives up after
// plan.MaxFlexWait.

// Rules of the alternative policies' actions.
const (
	RuleStatic       plan.Rule = "static"        // admitted within a hard limit, or waits for it
	RuleKueueNominal plan.Rule = "kueue:nominal" // admitted within its queue's nominal quota
	RuleKueueBorrow  plan.Rule = "kueue:borrow"  // admitted on capacity borrowed in the cohort
	RuleKueueReclaim plan.Rule = "kueue:reclaim" // victim: reclaimed from a borrowing queue
	RuleKueueWait    plan.Rule = "kueue:quota"   // waits for quota
)

// Shares are the per-workspace GPU shares of the alternative policies:
// each inference workspace gets its day peak (the most GPUs its count asks
// for in a week), and the other workspaces split the rest of the cluster in
// proportion to their quota nodes' nominal GPUs (48:80 in the reference).
type Shares struct {
	Namespaces []string
	GPUs       []int // per namespace
	Dedicated  []int // per namespace: whole nodes reserved for it (inference), 0 for shared
}

// PolicyShares computes the shares of the scenario.
func PolicyShares(sc *Scenario, w *Workload) *Shares {
	ns := quotaNamespaces(sc)
	sh := &Shares{Namespaces: ns, GPUs: make([]int, len(ns)), Dedicated: make([]int, len(ns))}
	idx := map[string]int{}
	for i, n := range ns {
		idx[n] = i
	}
	perNode := sc.Nodes[0].GPUs
	used := 0
	isInfer := map[string]bool{}
	for k, in := range sc.Infer {
		st := &inferState{cfg: in, shape: w.Shapes[k]}
		peak := 0
		s := &sim{sc: sc}
		for t := sc.Start; t.Before(sc.Start.Add(7 * 24 * time.Hour)); t = t.Add(time.Minute) {
			peak = max(peak, s.countAt(st, t.UnixNano()))
		}
		i := idx[in.Namespace]
		nodes := (peak*in.GPUs + perNode - 1) / perNode
		sh.GPUs[i] += peak * in.GPUs
		sh.Dedicated[i] += nodes
		used += nodes * perNode
		isInfer[in.Namespace] = true
	}
	rest := max(0, sc.GPUs()-used)
	// The others split the rest by their quota nodes' nominal GPUs.
	weights, sum := make([]int, len(ns)), 0
	sc.Quota.Walk(func(q *quotaNode) {
		for _, n := range q.Namespaces {
			if !isInfer[n] {
				weights[idx[n]] = q.GPUs.Total() // the total over flavors: per-flavor partitions are left (issue 17 item 6)
				sum += q.GPUs.Total()
			}
		}
	})
	given, last := 0, -1
	for i := range ns {
		if isInfer[ns[i]] || sum == 0 {
			continue
		}
		sh.GPUs[i] = rest * weights[i] / sum
		given += sh.GPUs[i]
		last = i
	}
	if last >= 0 {
		sh.GPUs[last] += rest - given
	}
	return sh
}

func quotaNamespaces(sc *Scenario) []string {
	var ns []string
	sc.Quota.Walk(func(q *quotaNode) { ns = append(ns, q.Namespaces...) })
	sort.Strings(ns)
	return ns
}

// pjob is a pending job with its groups, in the order the alternatives
// decide them: priority, submission, namespace, job (as DESIGN L3).
type pjob struct {
	ns, name string
	groups   []*plan.Pending
	prio     int
	sub      time.Time
	gang     bool
	wait     time.Duration // a gang's flex max_wait (L11)
	ask      int
}

// unitKey names a preemption unit: a batch job, or one allocation of
// another type.
type unitKey struct {
	job   plan.JobKey
	alloc string
}

// pendingJobs groups the snapshot's pending groups by job, in the order the
// alternatives decide them (pjob).
//
// The simulator plans after every event with the whole backlog pending, so
// this runs on thousands of groups per plan: the map is sized once, the
// jobs are kept in one backing array, and a stable sort by priority then
// (submission, namespace, job) is done as a stable split by priority and
// a stable sort of each priority's jobs that is skipped when they are
// already in order (the simulator lists them by arrival). The order is
// that of one stable sort by the whole key.
//
// by is a map to reuse from plan to plan (cleared here; nil: a new one), so
// that a plan does not allocate a map of the backlog.
func pendingJobs(s *plan.Snapshot, by map[plan.JobKey]*pjob) []*pjob {
	if by == nil {
		by = make(map[plan.JobKey]*pjob, len(s.Pending))
	}
	clear(by)
	all := make([]pjob, 0, len(s.Pending))
	groups := make([]*plan.Pending, len(s.Pending))
	var out []*pjob
	for i := range s.Pending {
		g := &s.Pending[i]
		key := g.JobKey()
		j := by[key]
		if j == nil {
			all = append(all, pjob{ns: g.Namespace, name: g.Job, sub: g.SubmittedAt})
			j = &all[len(all)-1]
			// Most jobs have one group: a slice of one from groups.
			j.groups = groups[i : i : i+1]
			by[key] = j
			out = append(out, j)
		}
		j.groups = append(j.groups, g)
		j.prio = max(j.prio, g.Priority)
		j.gang = j.gang || g.Flex != nil
		if g.Flex != nil {
			j.wait = g.Flex.MaxWait
		}
		j.ask += g.Count * g.GPUs
	}
	sortPending(out)
	return out
}

// sortPending sorts jobs stably by priority (highest first), then
// submission, namespace and job name: the order DESIGN L3 decides in.
func sortPending(out []*pjob) {
	later := func(x, y *pjob) bool { // x after y within one priority
		if !x.sub.Equal(y.sub) {
			return x.sub.After(y.sub)
		}
		if x.ns != y.ns {
			return x.ns > y.ns
		}
		return x.name > y.name
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].prio > out[b].prio })
	for lo := 0; lo < len(out); {
		hi := lo + 1
		sorted := true
		for ; hi < len(out) && out[hi].prio == out[lo].prio; hi++ {
			sorted = sorted && !later(out[hi-1], out[hi])
		}
		if !sorted {
			part := out[lo:hi]
			sort.SliceStable(part, func(a, b int) bool { return later(part[b], part[a]) })
		}
		lo = hi
	}
}

// freeMap is the free GPUs per node and flavor (GPUs on no allocation),
// for placement, and what each node offers a group's placement
// constraints. The alternatives place by flavor as the core does (DESIGN
// L13): an allocation takes GPUs of one flavor, the first of the group's
// flavors (Pending.Flavors, nil for the tree's order) with room on a node,
// as Kueue's TryNextFlavor does; ungoverned devices are never offered.
type freeMap struct {
	ids     []string
	flavors []string // the tree's flavor names
	free    []int    // node i, flavor fi: free[i*len(flavors)+fi]
	idx     map[string]int
	dc      []string
	pool    []string // "" read as "default", as Nomad does
	// model is the model of every GPU of the node, or "" for a node of
	// several models (none in the simulator's clusters).
	model []string
}

func newFreeMap(s *plan.Snapshot) *freeMap {
	tf := quota.TreeFlavors(s.Quota)
	f := &freeMap{idx: map[string]int{}, flavors: quota.FlavorNames(s.Quota)}
	nf := len(f.flavors)
	fidx := map[string]int{}
	for i, n := range f.flavors {
		fidx[n] = i
	}
	gpuFlavor := map[string]int{} // GPU ID -> flavor index, governed devices only
	for i, n := range s.Nodes {
		f.ids = append(f.ids, n.ID)
		row := make([]int, nf)
		model := ""
		for k, g := range n.GPUs {
			if name, ok := quota.FlavorOf(tf, g.Model, g.MIGProfile); ok {
				gpuFlavor[g.ID] = fidx[name]
				if g.Healthy {
					row[fidx[name]]++
				}
			}
			if k == 0 || g.Model == model {
				model = g.Model
			} else {
				model = ""
			}
		}
		f.free = append(f.free, row...)
		f.idx[n.ID] = i
		pool := n.NodePool
		if pool == "" {
			pool = "default"
		}
		f.dc, f.pool, f.model = append(f.dc, n.Datacenter), append(f.pool, pool), append(f.model, model)
	}
	for i := range s.Allocations {
		a := &s.Allocations[i]
		ni := f.idx[a.Node]
		for _, id := range a.GPUIDs {
			if fi, ok := gpuFlavor[id]; ok {
				f.free[ni*nf+fi]--
			}
		}
	}
	return f
}

// binPack picks, among allowed nodes, the one with the fewest free GPUs of
// flavor fi that still fit, then the lowest node ID (like Nomad, and like
// the core).
func (f *freeMap) binPack(gpus, fi int, allowed func(i int) bool) int {
	nf := len(f.flavors)
	best := -1
	for i := range f.ids {
		c := f.free[i*nf+fi]
		if c < gpus || !allowed(i) {
			continue
		}
		if best < 0 || c < f.free[best*nf+fi] || (c == f.free[best*nf+fi] && f.ids[i] < f.ids[best]) {
			best = i
		}
	}
	return best
}

// order is the flavor indices g tries, in its order (all, in the tree's
// order, when it names none).
func (f *freeMap) order(g *plan.Pending) []int {
	var out []int
	if len(g.Flavors) == 0 {
		for i := range f.flavors {
			out = append(out, i)
		}
		return out
	}
	for _, name := range g.Flavors {
		for i, n := range f.flavors {
			if n == name {
				out = append(out, i)
			}
		}
	}
	return out
}

// feasible reports whether node i meets g's placement constraints
// (datacenters, node pool, model), as the core's feasibility does: the
// alternatives place where Nomad would let them, no more.
func (f *freeMap) feasible(i int, g *plan.Pending) bool {
	if len(g.Datacenters) > 0 {
		ok := false
		for _, dc := range g.Datacenters {
			ok = ok || dc == f.dc[i] || dc == "*"
		}
		if !ok {
			return false
		}
	}
	pool := g.NodePool
	if pool == "" {
		pool = "default"
	}
	return pool == f.pool[i] && (g.Model == "" || g.Model == f.model[i])
}

// placed is one allocation placed by an alternative: its node and flavor.
type placed struct {
	node   string
	flavor string
}

// place places a job's allocations on free GPUs of the nodes that allowed
// accepts and that meet each group's constraints, whole (gang) or in
// part, each allocation in the first of its group's flavors with room. It
// returns the placements per group, or nil when a gang does not fit.
func (f *freeMap) place(j *pjob, allowed func(i int) bool) [][]placed {
	saved := append([]int(nil), f.free...)
	nf := len(f.flavors)
	out := make([][]placed, len(j.groups))
	for gi, g := range j.groups {
		ok := func(i int) bool { return allowed(i) && f.feasible(i, g) }
		order := f.order(g)
		for k := 0; k < g.Count; k++ {
			ni, fi := -1, -1
			for _, x := range order {
				if ni = f.binPack(g.GPUs, x, ok); ni >= 0 {
					fi = x
					break
				}
			}
			if ni < 0 {
				if j.gang {
					copy(f.free, saved)
					return nil
				}
				break
			}
			f.free[ni*nf+fi] -= g.GPUs
			out[gi] = append(out[gi], placed{f.ids[ni], f.flavors[fi]})
		}
	}
	return out
}

func expired(s *plan.Snapshot, j *pjob) bool {
	return j.gang && s.Time.Sub(j.sub) > j.wait
}

// emitPlaced emits the admits of j's placed allocations and a wait for the
// rest, bound by bound (a label of waits.go, "" for no room on the nodes).
func emitPlaced(p *plan.Plan, j *pjob, nodes [][]placed, rule plan.Rule, reason, waitWhy, bound string) {
	for gi, g := range j.groups {
		var got []placed
		if len(nodes) > gi {
			got = nodes[gi]
		}
		// One admit per flavor, in the order the allocations took them.
		for len(got) > 0 {
			fl := got[0].flavor
			var ns []string
			rest := got[:0:0]
			for _, x := range got {
				if x.flavor == fl {
					ns = append(ns, x.node)
				} else {
					rest = append(rest, x)
				}
			}
			p.Actions = append(p.Actions, plan.Action{Action: plan.ActionAdmit, Namespace: g.Namespace, Job: g.Job, Group: g.Group,
				Count: len(ns), GPUs: g.GPUs, Nodes: ns, Rule: rule, Reason: reason, Flavor: fl})
			got = rest
		}
		n := 0
		if len(nodes) > gi {
			n = len(nodes[gi])
		}
		if rest := g.Count - n; rest > 0 {
			p.Actions = append(p.Actions, plan.Action{Action: plan.ActionWait, Namespace: g.Namespace, Job: g.Job, Group: g.Group,
				Count: rest, GPUs: g.GPUs, Rule: rule, Quota: bound, Reason: waitWhy})
		}
	}
}

func emitExpire(p *plan.Plan, j *pjob) {
	for _, g := range j.groups {
		p.Actions = append(p.Actions, plan.Action{Action: plan.ActionExpire, Namespace: g.Namespace, Job: g.Job, Group: g.Group,
			Count: g.Count, GPUs: g.GPUs, Rule: plan.RuleFlex, Reason: fmt.Sprintf("gang waited longer than its max_wait %s", j.wait)})
	}
}

// Static is flat, hard quotas (what Nomad Enterprise quotas give): each
// inference workspace has its own nodes, sized to its day peak; the other
// workspaces share the remaining nodes under hard limits. No lending, no
// preemption.
type Static struct {
	sh    *Shares
	limit map[string]int
	own   map[string]int // namespace -> dedicated node count
	owner []string       // node index -> namespace that owns it, "" shared
	why   map[string]string
	bound map[string]string // namespace -> StaticBound(namespace)
	// jobsBy is pendingJobs' map, kept from plan to plan (a policy value
	// plans one run at a time, as Kueue's reservations already require).
	jobsBy map[plan.JobKey]*pjob
}

// NewStatic builds the static policy from the shares.
func NewStatic(sh *Shares) *Static {
	p := &Static{sh: sh, limit: map[string]int{}, own: map[string]int{}, why: map[string]string{}, bound: map[string]string{}}
	for i, n := range sh.Namespaces {
		p.bound[n] = StaticBound(n)
		p.limit[n] = sh.GPUs[i]
		p.own[n] = sh.Dedicated[i]
		p.why[n] = fmt.Sprintf("%s: hard limit of %d GPUs reached, or no node has room", n, sh.GPUs[i])
	}
	return p
}

// Name implements Policy.
func (*Static) Name() string { return "static" }

// Limits implements Limiter: the hard limits.
func (p *Static) Limits() (string, map[string]int) { return "hard limit (static partition)", p.limit }

// Plan implements Policy.
func (p *Static) Plan(s *plan.Snapshot) (*plan.Plan, error) {
	if len(p.owner) != len(s.Nodes) {
		p.owner = make([]string, len(s.Nodes))
		k := 0
		for _, n := range p.sh.Namespaces {
			for c := 0; c < p.own[n] && k < len(s.Nodes); c++ {
				p.owner[k] = n
				k++
			}
		}
	}
	// One entry per namespace: its limit, GPUs used and labels, found with
	// one lookup per pending job (the backlog is thousands of jobs).
	type nsState struct {
		limit, used int
		dedicated   bool
		why, bound  string
	}
	nss := make(map[string]*nsState, len(p.limit))
	state := func(ns string) *nsState {
		x := nss[ns]
		if x == nil {
			x = &nsState{limit: p.limit[ns], dedicated: p.own[ns] > 0, why: p.why[ns], bound: p.bound[ns]}
			if x.bound == "" {
				x.bound = StaticBound(ns)
			}
			nss[ns] = x
		}
		return x
	}
	for i := range s.Allocations {
		state(s.Allocations[i].Namespace).used += s.Allocations[i].GPUs()
	}
	free := newFreeMap(s)
	// At least one action per pending group (an admit or a wait).
	out := &plan.Plan{Actions: make([]plan.Action, 0, len(s.Pending))}
	if p.jobsBy == nil {
		p.jobsBy = map[plan.JobKey]*pjob{}
	}
	for _, j := range pendingJobs(s, p.jobsBy) {
		if expired(s, j) {
			emitExpire(out, j)
			continue
		}
		x := state(j.ns)
		dedicated := x.dedicated
		allowed := func(i int) bool { return (p.owner[i] == j.ns) == dedicated && (dedicated || p.owner[i] == "") }
		// Allocations fit one by one within the hard limit (a gang whole).
		room := x.limit - x.used
		var nodes [][]placed
		if !j.gang || room >= j.ask {
			trimmed := trimToRoom(j, room)
			if trimmed != nil {
				nodes = free.place(trimmed, allowed)
			}
		}
		n := 0
		for gi := range nodes {
			n += len(nodes[gi]) * j.groups[gi].GPUs
		}
		x.used += n
		bound := ""
		if room < j.ask {
			bound = x.bound
		}
		emitPlaced(out, j, nodes, RuleStatic, "within the hard limit", x.why, bound)
	}
	return out, nil
}

// trimToRoom returns j with its groups' counts cut to fit room GPUs, or nil
// when nothing fits.
func trimToRoom(j *pjob, room int) *pjob {
	if room <= 0 {
		return nil // no group gets an allocation (the loop below)
	}
	t := *j
	t.groups = nil
	some := false
	for _, g := range j.groups {
		c := *g
		c.Count = min(g.Count, max(0, room)/g.GPUs)
		room -= c.Count * g.GPUs
		t.groups = append(t.groups, &c)
		some = some || c.Count > 0
	}
	if !some {
		return nil
	}
	return &t
}

// Kueue is a Kueue-like policy: one ClusterQueue per workspace with the
// shares as nominal quotas, all in one cohort. Idle capacity is borrowed by
// anyone; a queue below its nominal reclaims borrowed capacity by evicting
// the borrowers' workloads chosen by quota alone (lowest priority, newest
// first, on any node: not node-aware); no parent-level (child) preemption
// and no preemption within a queue. Evicted workloads release their quota
// at once; their pods hold the GPUs until their kill_timeout ends.
type Kueue struct {
	nominal  map[string]int
	capacity int
	// reserved are the workloads admitted by quota whose pods are not all
	// placed yet: their quota stays reserved from plan to plan, as in Kueue.
	reserved map[plan.JobKey]bool
	// jobsBy is pendingJobs' map, kept from plan to plan (a policy value
	// plans one run at a time, as Kueue's reservations already require).
	jobsBy map[plan.JobKey]*pjob
}

// NewKueue builds the Kueue-like policy from the shares.
func NewKueue(sh *Shares) *Kueue {
	p := &Kueue{nominal: map[string]int{}, reserved: map[plan.JobKey]bool{}}
	for i, n := range sh.Namespaces {
		p.nominal[n] = sh.GPUs[i]
		p.capacity += sh.GPUs[i]
	}
	return p
}

// Name implements Policy.
func (*Kueue) Name() string { return "kueue" }

// Limits implements Limiter: the queues' nominal quotas (borrowing above
// them is allowed).
func (p *Kueue) Limits() (string, map[string]int) { return "Kueue nominal quota", p.nominal }

// Plan implements Policy.
func (p *Kueue) Plan(s *plan.Snapshot) (*plan.Plan, error) {
	// Per queue (namespace): its GPUs in use by admitted workloads, found
	// with one lookup per pending job (the backlog is thousands of jobs).
	queues := make(map[string]*int, len(p.nominal))
	usage := func(ns string) *int {
		u := queues[ns]
		if u == nil {
			u = new(int)
			queues[ns] = u
		}
		return u
	}
	total := 0
	type unit struct {
		ns      string
		prio    int
		started time.Time
		id      string
		allocs  []*plan.Allocation
		gpus    int
	}
	units := map[unitKey]*unit{}
	var unitList []*unit
	for i := range s.Allocations {
		a := &s.Allocations[i]
		if !a.StoppingFor.IsZero() {
			continue // evicted: its quota is released
		}
		*usage(a.Namespace) += a.GPUs()
		total += a.GPUs()
		key := unitKey{job: a.JobKey()} // a batch job is one unit
		if a.Type != plan.JobBatch {
			key = unitKey{alloc: a.ID}
		}
		u := units[key]
		if u == nil {
			u = &unit{ns: a.Namespace, prio: a.Priority, started: a.StartedAt, id: a.ID}
			units[key] = u
			unitList = append(unitList, u)
		}
		u.allocs = append(u.allocs, a)
		u.gpus += a.GPUs()
		if a.StartedAt.After(u.started) {
			u.started = a.StartedAt
		}
	}
	// Candidates for reclaim: lowest priority first, then newest, then ID.
	sort.SliceStable(unitList, func(a, b int) bool {
		x, y := unitList[a], unitList[b]
		if x.prio != y.prio {
			return x.prio < y.prio
		}
		if !x.started.Equal(y.started) {
			return x.started.After(y.started)
		}
		return x.id < y.id
	})
	taken := map[*unit]bool{}
	free := newFreeMap(s)
	all := func(int) bool { return true }
	// At least one action per pending group (an admit or a wait).
	out := &plan.Plan{Actions: make([]plan.Action, 0, len(s.Pending))}
	if p.jobsBy == nil {
		p.jobsBy = map[plan.JobKey]*pjob{}
	}
	jobs := pendingJobs(s, p.jobsBy)
	// Workloads already admitted keep their quota and are placed first
	// (still[i]: jobs[i] is one; pendingJobs lists a job once).
	still := make([]bool, len(jobs))
	reserved := map[plan.JobKey]bool{}
	for i, j := range jobs {
		if key := (plan.JobKey{Namespace: j.ns, Job: j.name}); p.reserved[key] {
			reserved[key] = true
			still[i] = true
			*usage(j.ns) += j.ask
			total += j.ask
		}
	}
	p.reserved = reserved
	for i, j := range jobs {
		if still[i] {
			nodes := free.place(j, all)
			emitPlaced(out, j, nodes, RuleKueueNominal, "admitted earlier; pods placed", "quota reserved; no node has room for the pods yet", "")
		}
	}
	for i, j := range jobs {
		if still[i] {
			continue
		}
		if expired(s, j) {
			emitExpire(out, j)
			continue
		}
		nom := p.nominal[j.ns]
		use := usage(j.ns)
		within := *use+j.ask <= nom
		fits := total+j.ask <= p.capacity
		rule := RuleKueueNominal
		if !within {
			rule = RuleKueueBorrow
		}
		if within && !fits {
			// Reclaim from borrowing queues until the cohort has room.
			var set []*unit
			t, u2 := total, map[string]int{}
			for _, u := range unitList {
				if t+j.ask <= p.capacity {
					break
				}
				if taken[u] || u.ns == j.ns || *usage(u.ns)-u2[u.ns] <= p.nominal[u.ns] {
					continue
				}
				set = append(set, u)
				u2[u.ns] += u.gpus
				t -= u.gpus
			}
			if t+j.ask <= p.capacity {
				claimant := j.groups[0].Key()
				for _, u := range set {
					taken[u] = true
					*usage(u.ns) -= u.gpus
					total -= u.gpus
					for _, a := range u.allocs {
						out.Actions = append(out.Actions, plan.Action{Action: plan.ActionStop, Alloc: a.ID, Namespace: a.Namespace,
							Job: a.Job, Group: a.Group, Node: a.Node, GPUs: a.GPUs(), Rule: RuleKueueReclaim, For: claimant,
							Reason: fmt.Sprintf("%s reclaims its nominal %d from borrowing queue %s", j.ns, nom, u.ns)})
					}
				}
				fits = true
			}
		}
		if !fits {
			emitPlaced(out, j, nil, RuleKueueWait, "", "no quota: the cohort is full and the queue may not reclaim", BoundCohort)
			continue
		}
		// Quota reserved (admitted by Kueue); its pods start where nodes
		// have room now, the rest stay pending with the quota reserved.
		*use += j.ask
		total += j.ask
		nodes := free.place(j, all)
		placed := 0
		for gi := range nodes {
			placed += len(nodes[gi]) * j.groups[gi].GPUs
		}
		if placed < j.ask {
			p.reserved[plan.JobKey{Namespace: j.ns, Job: j.name}] = true
		}
		emitPlaced(out, j, nodes, rule, "admitted by quota", "quota reserved; no node has room for the pods yet", "")
	}
	return out, nil
}
