package sim

import (
	"fmt"
	"slices"
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

// Shares are the per-workspace GPU shares of the alternative policies, per
// flavor (DESIGN L13: a static partition and a Kueue ClusterQueue's nominal
// quota are per flavor, as Kueue's ResourceFlavors are): each inference
// workspace gets its day peak (the most GPUs its count asks for in a week)
// in its first flavor, on nodes of that flavor dedicated to it, and the
// other workspaces split the rest of each flavor's devices in proportion to
// their quota nodes' nominal GPUs of that flavor (48:80 in the reference,
// whose one flavor is the implicit "gpu").
type Shares struct {
	Namespaces []string
	GPUs       []int // per namespace: its GPUs over all flavors (the report's limits)
	Dedicated  []int // per namespace: whole nodes reserved for it (inference), 0 for shared
	// Flavors are the tree's flavor names in its order (quota.FlavorNames);
	// nil reads as the implicit flavor alone, with ByFlavor[i] = {GPUs[i]}.
	Flavors []string
	// ByFlavor[i][f] is namespace i's share of flavor Flavors[f], in GPU
	// device instances; each row sums to GPUs[i].
	ByFlavor [][]int
	// DedicatedFlavor[i] is the flavor of namespace i's dedicated nodes
	// ("" when it has none, or for any node); nil: "" for all.
	DedicatedFlavor []string
}

// byFlavor returns the shares per namespace and flavor of the snapshot's
// flavors (names, in the tree's order): namespace -> one share per name,
// 0 for a flavor the shares do not name. Shares without Flavors are of the
// implicit flavor, so a hand-made Shares{GPUs} keeps meaning what it did.
func (sh *Shares) byFlavor(names []string) map[string][]int {
	flavors, by := sh.Flavors, sh.ByFlavor
	if flavors == nil {
		flavors = []string{quota.ImplicitFlavor}
		by = make([][]int, len(sh.Namespaces))
		for i := range by {
			by[i] = []int{sh.GPUs[i]}
		}
	}
	out := make(map[string][]int, len(sh.Namespaces))
	for i, n := range sh.Namespaces {
		row := make([]int, len(names))
		for fi, name := range names {
			for k, f := range flavors {
				if f == name {
					row[fi] = by[i][k]
				}
			}
		}
		out[n] = row
	}
	return out
}

// flavorDevices is the scenario's GPU device instances per flavor of its
// tree (names in the tree's order): whole GPUs and MIG slices each in the
// flavor they belong to; devices of no flavor (ungoverned) are not counted.
func flavorDevices(sc *Scenario, names []string) []int {
	tf := quota.TreeFlavors(sc.Quota)
	out := make([]int, len(names))
	add := func(model, profile string, n int) {
		if name, ok := quota.FlavorOf(tf, model, profile); ok {
			for fi, f := range names {
				if f == name {
					out[fi] += n
				}
			}
		}
	}
	for _, g := range sc.Nodes {
		add(g.Model, "", g.Count*g.Whole())
		if g.MIG != nil {
			add(g.Model, g.MIG.Profile, g.Count*g.MIG.GPUs*g.MIG.Slices)
		}
	}
	return out
}

// PolicyShares computes the shares of the scenario, per flavor (Shares).
func PolicyShares(sc *Scenario, w *Workload) *Shares {
	ns := quotaNamespaces(sc)
	names := quota.FlavorNames(sc.Quota)
	nf := len(names)
	sh := &Shares{Namespaces: ns, GPUs: make([]int, len(ns)), Dedicated: make([]int, len(ns)),
		Flavors: names, ByFlavor: make([][]int, len(ns)), DedicatedFlavor: make([]string, len(ns))}
	idx := map[string]int{}
	for i, n := range ns {
		idx[n] = i
		sh.ByFlavor[i] = make([]int, nf)
	}
	flavorIdx := func(name string) int {
		for fi, f := range names {
			if f == name {
				return fi
			}
		}
		return 0
	}
	capacity := flavorDevices(sc, names)
	tf := quota.TreeFlavors(sc.Quota)
	used := make([]int, nf)
	isInfer := map[string]bool{}
	for k, in := range sc.Infer {
		st := &inferState{cfg: in, shape: w.Shapes[k]}
		peak := 0
		s := &sim{sc: sc}
		for t := sc.Start; t.Before(sc.Start.Add(7 * 24 * time.Hour)); t = t.Add(time.Minute) {
			peak = max(peak, s.countAt(st, t.UnixNano()))
		}
		// Its nodes are of its first flavor, as many as its peak fills of
		// the first node group whose whole GPUs are of that flavor.
		fi := 0
		if len(in.Flavors) > 0 {
			fi = flavorIdx(in.Flavors[0])
		}
		perNode := sc.Nodes[0].GPUs
		for _, g := range sc.Nodes {
			if name, ok := quota.FlavorOf(tf, g.Model, ""); ok && name == names[fi] && g.Whole() > 0 {
				perNode = g.Whole()
				break
			}
		}
		i := idx[in.Namespace]
		nodes := (peak*in.GPUs + perNode - 1) / perNode
		sh.ByFlavor[i][fi] += peak * in.GPUs
		sh.Dedicated[i] += nodes
		if nf > 1 || len(in.Flavors) > 0 {
			sh.DedicatedFlavor[i] = names[fi]
		}
		used[fi] += nodes * perNode
		isInfer[in.Namespace] = true
	}
	// The others split the rest of each flavor by their quota nodes'
	// nominal GPUs of that flavor.
	for fi, name := range names {
		rest := max(0, capacity[fi]-used[fi])
		weights, sum := make([]int, len(ns)), 0
		sc.Quota.Walk(func(q *quotaNode) {
			for _, n := range q.Namespaces {
				if !isInfer[n] {
					weights[idx[n]] = q.GPUs.Of(name)
					sum += q.GPUs.Of(name)
				}
			}
		})
		given, last := 0, -1
		for i := range ns {
			if isInfer[ns[i]] || sum == 0 {
				continue
			}
			sh.ByFlavor[i][fi] = rest * weights[i] / sum
			given += sh.ByFlavor[i][fi]
			last = i
		}
		if last >= 0 {
			sh.ByFlavor[last][fi] += rest - given
		}
	}
	for i := range ns {
		for _, g := range sh.ByFlavor[i] {
			sh.GPUs[i] += g
		}
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
// L13): a job takes one flavor for all its allocations, chosen by the
// policy among its flavors in order (jobOrder: Pending.Flavors, nil for
// the tree's order), and is placed on GPUs of that flavor only (place);
// ungoverned devices are never offered.
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
	// gpuFlavor is the flavor index of each governed GPU device, by ID.
	gpuFlavor map[string]int
	// has[i*len(flavors)+fi]: node i has devices of flavor fi.
	has []bool
}

// allocFlavors adds a's GPUs per flavor to into (len(f.flavors)): the
// devices it holds of each flavor (DESIGN L2, L13; ungoverned devices are
// not counted).
func (f *freeMap) allocFlavors(a *plan.Allocation, into []int) {
	for _, id := range a.GPUIDs {
		if fi, ok := f.gpuFlavor[id]; ok {
			into[fi]++
		}
	}
}

// flavorIndex is the index of the flavor name, or -1.
func (f *freeMap) flavorIndex(name string) int {
	for i, n := range f.flavors {
		if n == name {
			return i
		}
	}
	return -1
}

// jobOrder is the flavor indices j may take, in the order it tries them:
// its first group's order, less the flavors another group does not allow
// (a job takes one flavor for all its groups, DESIGN L13).
func (f *freeMap) jobOrder(j *pjob) []int {
	order := f.order(j.groups[0])
	if len(j.groups) == 1 {
		return order
	}
	var out []int
	for _, fi := range order {
		ok := true
		for _, g := range j.groups[1:] {
			in := false
			for _, x := range f.order(g) {
				in = in || x == fi
			}
			ok = ok && in
		}
		if ok {
			out = append(out, fi)
		}
	}
	return out
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
	f.gpuFlavor = gpuFlavor
	for i, n := range s.Nodes {
		f.ids = append(f.ids, n.ID)
		row := make([]int, nf)
		has := make([]bool, nf)
		model := ""
		for k, g := range n.GPUs {
			if name, ok := quota.FlavorOf(tf, g.Model, g.MIGProfile); ok {
				gpuFlavor[g.ID] = fidx[name]
				if g.Healthy {
					row[fidx[name]]++
				}
				has[fidx[name]] = true
			}
			if k == 0 || g.Model == model {
				model = g.Model
			} else {
				model = ""
			}
		}
		f.free = append(f.free, row...)
		f.has = append(f.has, has...)
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

// place places a job's allocations on free GPUs of flavor fi on the nodes
// that allowed accepts and that meet each group's constraints, whole (gang)
// or in part: the peers choose a job's flavor first, then place it there
// (DESIGN L13: all groups of a job take one flavor). It returns the
// placements per group, or nil when a gang does not fit.
func (f *freeMap) place(j *pjob, allowed func(i int) bool, fi int) [][]placed {
	saved := append([]int(nil), f.free...)
	nf := len(f.flavors)
	out := make([][]placed, len(j.groups))
	only := []int{fi}
	for gi, g := range j.groups {
		ok := func(i int) bool { return allowed(i) && f.feasible(i, g) }
		order := only
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

// Static is flat, hard quotas per flavor (what Nomad Enterprise quotas
// give, counted per device model): each inference workspace has its own
// nodes of its flavor, sized to its day peak; the other workspaces share
// the remaining nodes under hard limits, one per flavor (a static
// partition of each flavor's devices, Shares). A job tries its flavors in
// order and takes the first in which all of it fits within the limit and
// on the nodes; failing that (not a gang), the first in which some of it
// does. No lending between workspaces or flavors, no preemption.
type Static struct {
	sh    *Shares
	limit map[string]int // namespace -> limit over all flavors (the report's)
	own   map[string]int // namespace -> dedicated node count
	owner []string       // node index -> namespace that owns it, "" shared
	why   map[string]string
	bound map[string]string // namespace -> StaticBound(namespace)
	// flavors and perFlavor are the limits per flavor of the snapshot's
	// tree (namespace -> one per flavor), made when its flavors change.
	flavors   []string
	perFlavor map[string][]int
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

// Limits implements Limiter: the hard limits, over all flavors.
func (p *Static) Limits() (string, map[string]int) { return "hard limit (static partition)", p.limit }

// assignOwners gives each namespace with dedicated nodes its nodes: the
// first nodes (snapshot order) with devices of its dedicated flavor (any
// node when it names none) not given to another.
func (p *Static) assignOwners(s *plan.Snapshot, free *freeMap) {
	p.owner = make([]string, len(s.Nodes))
	dflavor := map[string]string{}
	for i, n := range p.sh.Namespaces {
		if i < len(p.sh.DedicatedFlavor) {
			dflavor[n] = p.sh.DedicatedFlavor[i]
		}
	}
	nf := len(free.flavors)
	for _, n := range p.sh.Namespaces {
		fi := -1
		if dflavor[n] != "" {
			fi = free.flavorIndex(dflavor[n])
		}
		given := 0
		for k := 0; k < len(s.Nodes) && given < p.own[n]; k++ {
			if p.owner[k] != "" || (fi >= 0 && !free.has[k*nf+fi]) {
				continue
			}
			p.owner[k] = n
			given++
		}
	}
}

// Plan implements Policy.
func (p *Static) Plan(s *plan.Snapshot) (*plan.Plan, error) {
	free := newFreeMap(s)
	nf := len(free.flavors)
	if len(p.owner) != len(s.Nodes) {
		p.assignOwners(s, free)
	}
	if !slices.Equal(p.flavors, free.flavors) {
		p.flavors = free.flavors
		p.perFlavor = p.sh.byFlavor(free.flavors)
	}
	// One entry per namespace: its limits and GPUs used per flavor, and
	// labels, found with one lookup per pending job (the backlog is
	// thousands of jobs).
	type nsState struct {
		limit, used []int
		dedicated   bool
		why, bound  string
	}
	nss := make(map[string]*nsState, len(p.limit))
	state := func(ns string) *nsState {
		x := nss[ns]
		if x == nil {
			x = &nsState{limit: p.perFlavor[ns], used: make([]int, nf), dedicated: p.own[ns] > 0, why: p.why[ns], bound: p.bound[ns]}
			if x.limit == nil {
				x.limit = make([]int, nf)
			}
			if x.bound == "" {
				x.bound = StaticBound(ns)
			}
			nss[ns] = x
		}
		return x
	}
	for i := range s.Allocations {
		a := &s.Allocations[i]
		free.allocFlavors(a, state(a.Namespace).used)
	}
	// At least one action per pending group (an admit or a wait).
	out := &plan.Plan{Actions: make([]plan.Action, 0, len(s.Pending))}
	if p.jobsBy == nil {
		p.jobsBy = map[plan.JobKey]*pjob{}
	}
	saved := make([]int, len(free.free))
	for _, j := range pendingJobs(s, p.jobsBy) {
		if expired(s, j) {
			emitExpire(out, j)
			continue
		}
		x := state(j.ns)
		dedicated := x.dedicated
		allowed := func(i int) bool { return (p.owner[i] == j.ns) == dedicated && (dedicated || p.owner[i] == "") }
		order := free.jobOrder(j)
		// The first flavor where all of it fits within the hard limit and
		// on the nodes; failing that (not a gang), the first where some
		// allocations fit (one by one within the limit).
		var nodes [][]placed
		chosen, roomy := -1, false
		for _, fi := range order {
			if x.limit[fi]-x.used[fi] < j.ask {
				continue
			}
			roomy = true
			copy(saved, free.free)
			got := free.place(j, allowed, fi)
			if placedGPUs(j, got) == j.ask {
				nodes, chosen = got, fi
				break
			}
			copy(free.free, saved)
		}
		if chosen < 0 && !j.gang {
			for _, fi := range order {
				trimmed := trimToRoom(j, x.limit[fi]-x.used[fi])
				if trimmed == nil {
					continue
				}
				if got := free.place(trimmed, allowed, fi); placedGPUs(j, got) > 0 {
					nodes, chosen = got, fi
					break
				}
			}
		}
		if chosen >= 0 {
			x.used[chosen] += placedGPUs(j, nodes)
		}
		bound := ""
		if !roomy {
			bound = x.bound
		}
		emitPlaced(out, j, nodes, RuleStatic, "within the hard limit", x.why, bound)
	}
	return out, nil
}

// placedGPUs is the GPUs of j's placements (place's result).
func placedGPUs(j *pjob, nodes [][]placed) int {
	n := 0
	for gi := range nodes {
		n += len(nodes[gi]) * j.groups[gi].GPUs
	}
	return n
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
// shares as nominal quotas, one per flavor (Kueue's ResourceFlavors), all in
// one cohort. Idle capacity of a flavor is borrowed by anyone; a queue below
// its nominal of a flavor reclaims borrowed capacity of that flavor by
// evicting the borrowers' workloads chosen by quota alone (lowest priority,
// newest first, on any node: not node-aware); no parent-level (child)
// preemption and no preemption within a queue. A workload tries its
// flavors in order as Kueue's default flavor fungibility does
// (whenCanBorrow: Borrow, whenCanPreempt: TryNextFlavor): it takes the
// first flavor where it fits in the cohort (borrowing if need be), and
// only when none does, the first where reclaiming makes room. Evicted
// workloads release their quota at once; their pods hold the GPUs until
// their kill_timeout ends.
type Kueue struct {
	sh      *Shares
	nominal map[string]int // namespace -> nominal over all flavors (the report's)
	// flavors, perFlavor and capacity are the nominal quotas per flavor
	// of the snapshot's tree (namespace -> one per flavor) and the
	// cohort's capacity per flavor (their sum), made when its flavors
	// change.
	flavors   []string
	perFlavor map[string][]int
	capacity  []int
	// reserved are the workloads admitted by quota whose pods are not all
	// placed yet, with the flavor index they were admitted in: their quota
	// stays reserved from plan to plan, as in Kueue.
	reserved map[plan.JobKey]int
	// jobsBy is pendingJobs' map, kept from plan to plan (a policy value
	// plans one run at a time, as Kueue's reservations already require).
	jobsBy map[plan.JobKey]*pjob
}

// NewKueue builds the Kueue-like policy from the shares.
func NewKueue(sh *Shares) *Kueue {
	p := &Kueue{sh: sh, nominal: map[string]int{}, reserved: map[plan.JobKey]int{}}
	for i, n := range sh.Namespaces {
		p.nominal[n] = sh.GPUs[i]
	}
	return p
}

// Name implements Policy.
func (*Kueue) Name() string { return "kueue" }

// Limits implements Limiter: the queues' nominal quotas over all flavors
// (borrowing above them is allowed).
func (p *Kueue) Limits() (string, map[string]int) { return "Kueue nominal quota", p.nominal }

// Plan implements Policy.
func (p *Kueue) Plan(s *plan.Snapshot) (*plan.Plan, error) {
	free := newFreeMap(s)
	nf := len(free.flavors)
	if !slices.Equal(p.flavors, free.flavors) {
		p.flavors = free.flavors
		p.perFlavor = p.sh.byFlavor(free.flavors)
		p.capacity = make([]int, nf)
		for _, row := range p.perFlavor {
			for fi, g := range row {
				p.capacity[fi] += g
			}
		}
	}
	zero := make([]int, nf)
	nominal := func(ns string) []int {
		if n := p.perFlavor[ns]; n != nil {
			return n
		}
		return zero
	}
	// Per queue (namespace): its GPUs per flavor in use by admitted
	// workloads, found with one lookup per pending job (the backlog is
	// thousands of jobs).
	queues := make(map[string][]int, len(p.perFlavor))
	usage := func(ns string) []int {
		u := queues[ns]
		if u == nil {
			u = make([]int, nf)
			queues[ns] = u
		}
		return u
	}
	total := make([]int, nf)
	type unit struct {
		ns      string
		prio    int
		started time.Time
		id      string
		allocs  []*plan.Allocation
		gpus    []int // per flavor
	}
	units := map[unitKey]*unit{}
	var unitList []*unit
	for i := range s.Allocations {
		a := &s.Allocations[i]
		if !a.StoppingFor.IsZero() {
			continue // evicted: its quota is released
		}
		key := unitKey{job: a.JobKey()} // a batch job is one unit
		if a.Type != plan.JobBatch {
			key = unitKey{alloc: a.ID}
		}
		u := units[key]
		if u == nil {
			u = &unit{ns: a.Namespace, prio: a.Priority, started: a.StartedAt, id: a.ID, gpus: make([]int, nf)}
			units[key] = u
			unitList = append(unitList, u)
		}
		u.allocs = append(u.allocs, a)
		free.allocFlavors(a, u.gpus)
		if a.StartedAt.After(u.started) {
			u.started = a.StartedAt
		}
	}
	for _, u := range unitList {
		use := usage(u.ns)
		for fi, g := range u.gpus {
			use[fi] += g
			total[fi] += g
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
	all := func(int) bool { return true }
	// At least one action per pending group (an admit or a wait).
	out := &plan.Plan{Actions: make([]plan.Action, 0, len(s.Pending))}
	if p.jobsBy == nil {
		p.jobsBy = map[plan.JobKey]*pjob{}
	}
	jobs := pendingJobs(s, p.jobsBy)
	// Workloads already admitted keep their quota in their flavor and are
	// placed first (still[i]: jobs[i] is one, in flavor at[i];
	// pendingJobs lists a job once).
	still := make([]bool, len(jobs))
	at := make([]int, len(jobs))
	reserved := map[plan.JobKey]int{}
	for i, j := range jobs {
		key := plan.JobKey{Namespace: j.ns, Job: j.name}
		if fi, ok := p.reserved[key]; ok && fi < nf {
			reserved[key] = fi
			still[i], at[i] = true, fi
			usage(j.ns)[fi] += j.ask
			total[fi] += j.ask
		}
	}
	p.reserved = reserved
	for i, j := range jobs {
		if still[i] {
			nodes := free.place(j, all, at[i])
			emitPlaced(out, j, nodes, RuleKueueNominal, "admitted earlier; pods placed", "quota reserved; no node has room for the pods yet", "")
		}
	}
	// reclaim is the borrowing units whose eviction makes room for ask
	// GPUs of flavor fi in the cohort for queue ns, or false when evicting
	// every one it may does not.
	reclaim := func(ns string, fi, ask int) ([]*unit, bool) {
		var set []*unit
		t, u2 := total[fi], map[string]int{}
		for _, u := range unitList {
			if t+ask <= p.capacity[fi] {
				break
			}
			if taken[u] || u.ns == ns || u.gpus[fi] == 0 || usage(u.ns)[fi]-u2[u.ns] <= nominal(u.ns)[fi] {
				continue
			}
			set = append(set, u)
			u2[u.ns] += u.gpus[fi]
			t -= u.gpus[fi]
		}
		return set, t+ask <= p.capacity[fi]
	}
	for i, j := range jobs {
		if still[i] {
			continue
		}
		if expired(s, j) {
			emitExpire(out, j)
			continue
		}
		nom, use := nominal(j.ns), usage(j.ns)
		// TryNextFlavor: the first flavor where it fits (within its
		// nominal, or borrowing); else the first where reclaiming makes
		// room within its nominal.
		chosen, rule := -1, RuleKueueNominal
		preempt := -1
		var set []*unit
		for _, fi := range free.jobOrder(j) {
			within := use[fi]+j.ask <= nom[fi]
			if total[fi]+j.ask <= p.capacity[fi] {
				chosen = fi
				if !within {
					rule = RuleKueueBorrow
				}
				break
			}
			if within && preempt < 0 {
				if x, ok := reclaim(j.ns, fi, j.ask); ok {
					preempt, set = fi, x
				}
			}
		}
		if chosen < 0 && preempt >= 0 {
			chosen = preempt
			claimant := j.groups[0].Key()
			of := ""
			if nf > 1 {
				of = " " + free.flavors[preempt]
			}
			for _, u := range set {
				taken[u] = true
				uses := usage(u.ns)
				for fi, g := range u.gpus {
					uses[fi] -= g
					total[fi] -= g
				}
				for _, a := range u.allocs {
					out.Actions = append(out.Actions, plan.Action{Action: plan.ActionStop, Alloc: a.ID, Namespace: a.Namespace,
						Job: a.Job, Group: a.Group, Node: a.Node, GPUs: a.GPUs(), Rule: RuleKueueReclaim, For: claimant,
						Reason: fmt.Sprintf("%s reclaims its nominal %d%s from borrowing queue %s", j.ns, nom[preempt], of, u.ns)})
				}
			}
		}
		if chosen < 0 {
			emitPlaced(out, j, nil, RuleKueueWait, "", "no quota: the cohort is full and the queue may not reclaim", BoundCohort)
			continue
		}
		// Quota reserved (admitted by Kueue) in its flavor; its pods
		// start where nodes have room now, the rest stay pending with the
		// quota reserved.
		use[chosen] += j.ask
		total[chosen] += j.ask
		nodes := free.place(j, all, chosen)
		if placedGPUs(j, nodes) < j.ask {
			p.reserved[plan.JobKey{Namespace: j.ns, Job: j.name}] = chosen
		}
		emitPlaced(out, j, nodes, rule, "admitted by quota", "quota reserved; no node has room for the pods yet", "")
	}
	return out, nil
}
