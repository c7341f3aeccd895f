package plan

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gputide/gputide/quota-broker/quota"
)

// IdleGroup is a task group whose scaling policy uses the gputide-idle
// strategy (issue 11 item 4): an elastic idle batch group that the Nomad
// Autoscaler grows by the group's idle fit. The Nomad adapter reads it from
// the group's scaling policy and the job (snapshot key idle_groups).
type IdleGroup struct {
	Namespace   string
	Job         string
	Group       string
	Priority    int      // job priority, 1-100 (L3 order)
	GPUs        int      // GPUs per allocation, 1-quota.MaxGPUs
	Model       string   // "" = any model
	Datacenters []string // empty = any datacenter
	NodePool    string   // "" = default
	// Max is the scaling policy's max and Count the group's count now
	// (placed or not), 0 <= Count; the fit is at most Max - Count.
	Max   int
	Count int
	// Flavors are the flavors the group may use, in the order it tries
	// them (DESIGN L13, as Pending.Flavors; snapshot key flavors). Nil:
	// every flavor of the tree, in tree order.
	Flavors []string
}

// Key returns the key of the group.
func (g *IdleGroup) Key() GroupKey {
	return GroupKey{Namespace: g.Namespace, Job: g.Job, Group: g.Group}
}

// GroupFit is the idle fit of one idle group: Fit more allocations of the
// group's shape fit now (plan field idle_fit; GET /v1/idle-fit answers it
// as {"idle_fit": Fit}).
type GroupFit struct {
	Namespace string `json:"namespace"`
	Job       string `json:"job"`
	Group     string `json:"group"`
	Fit       int    `json:"fit"`
	// Flavor is the flavor the fit lies in (DESIGN L13: all of a job's
	// allocations take one flavor), named when Fit > 0 in a tree that
	// declares flavors; "" (omitted) otherwise, so that trees without
	// flavor blocks answer as before flavors.
	Flavor string `json:"flavor,omitempty"`
}

// Key returns the key of the group.
func (f GroupFit) Key() GroupKey { return GroupKey{Namespace: f.Namespace, Job: f.Job, Group: f.Group} }

// IdleFitOf returns the idle fit of group k in the plan, and false when k
// is not an idle group of its snapshot (or p is nil).
func (p *Plan) IdleFitOf(k GroupKey) (int, bool) {
	f, ok := p.GroupFitOf(k)
	return f.Fit, ok
}

// GroupFitOf returns the idle fit of group k in the plan with the flavor
// it lies in (GroupFit), and false when k is not an idle group of its
// snapshot (or p is nil).
func (p *Plan) GroupFitOf(k GroupKey) (GroupFit, bool) {
	if p == nil {
		return GroupFit{}, false
	}
	i, ok := slices.BinarySearchFunc(p.IdleFit, k, func(f GroupFit, k GroupKey) int { return f.Key().Compare(k) })
	if !ok {
		return GroupFit{}, false
	}
	return p.IdleFit[i], true
}

// IdleFit returns the idle fit of every idle group of s on the snapshot as
// it is, before any plan (the GPUs free now), in L3 order. Compute reports
// the fit after its own actions in Plan.IdleFit, which is what the broker
// serves. s must pass Validate; as Compute, it returns an error only for
// no snapshot or a quota tree that breaks L1. The result is sorted by
// group key.
func IdleFit(s *Snapshot) ([]GroupFit, error) {
	if s == nil {
		return nil, fmt.Errorf("no snapshot")
	}
	if err := quota.Validate(s.Quota); err != nil {
		return nil, err
	}
	if flavors := quota.TreeFlavors(s.Quota); len(flavors) > 1 || !governed(s, &flavors[0]) {
		// One planner per flavor on the snapshot's projections (DESIGN
		// L13, flavors.go).
		fx := newFlavorIndex(s, flavors)
		bufs := make([]*buffers, len(flavors))
		for fi := range bufs {
			bufs[fi] = bufferPool.Get().(*buffers)
			defer bufferPool.Put(bufs[fi])
		}
		projected, lay := projectAll(s, fx, nil, nil, bufs)
		ps := newFlavorPlanners(projected, lay, fx, bufs, len(s.Quota.Flavors) > 0)
		for _, p := range ps {
			defer p.vc.forget()
		}
		return idleFitAcross(ps, s.IdleGroups, IdleOrderL3), nil
	}
	buf := bufferPool.Get().(*buffers)
	defer bufferPool.Put(buf)
	p := newPlanner(s, buf)
	defer p.vc.forget()
	return idleFitAcross([]*planner{p}, s.IdleGroups, IdleOrderL3), nil
}

// idleFit is the last step of a plan of one planner: idleFitAcross on it
// alone, in the planner's idle order.
func (p *planner) idleFit() []GroupFit {
	return idleFitAcross([]*planner{p}, p.snap.IdleGroups, p.idleOrder)
}

// idleFitAcross is the last step of a plan (issue 11 item 4, DESIGN L3,
// L4, L13, L14, §8 idle_fit): the idle fit of each idle group of gs on
// the planners ps, one per flavor of the tree (tree order), after the
// plan's actions. The groups are served one after another: under
// IdleOrderL3 in L3 order (higher priority first, then namespace, job
// and group); under IdleOrderFair in DESIGN L14's order as the plan
// decides idle jobs (decideIdleFair), each time the group, among the
// quota nodes' first groups left in L3 order, whose own node would have
// the lowest borrowed share after it is served (fairShareAfter), ties in
// L3 order (IdleOrderFairEvery: among all groups left). A group's fit lies in
// one flavor, as all of a job's allocations take one (L13): the first of
// its allowed flavors (IdleGroup.Flavors, in its order; nil: every
// flavor in tree order) with free GPUs for one allocation of its shape
// (of those in which its job runs allocations, only the first:
// firstWithRoom), where its allocations are placed one at a time by bin-packing as
// admission places them (binPack: the feasible node with the fewest free
// GPUs that still fit, then the lowest node ID) on GPUs that are
// healthy, held by nobody and being freed for nobody, at most Max -
// Count. Each placement takes its GPUs, so no GPU is promised to two
// groups; GPUs admitted or freed for claimants by the plan are not
// free. A group whose namespace is bound to no quota is not governed:
// fit 0. GroupFit.Flavor names the flavor where Fit > 0 and the tree
// declares flavors (planner.label).
//
// It changes the planners' GPU holders (not the ledgers nor the
// actions): it runs after the plan's actions and usage are made.
//
// O(groups x flavors) picks in L3 order; O(groups^2 x flavors) under
// the fair orders, whose every step looks at the groups left.
func idleFitAcross(ps []*planner, gs []IdleGroup, order IdleOrder) []GroupFit {
	if len(gs) == 0 {
		return nil
	}
	left := make([]int, len(gs))
	for i := range left {
		left[i] = i
	}
	sort.SliceStable(left, func(a, b int) bool {
		x, y := &gs[left[a]], &gs[left[b]]
		if x.Priority != y.Priority {
			return x.Priority > y.Priority
		}
		return x.Key().Compare(y.Key()) < 0
	})
	fs := make([]*fitter, len(ps))
	for fi, p := range ps {
		fs[fi] = &fitter{p: p, classes: map[fitClassKey]*fitClass{}}
	}
	// given[fi][qi] are the GPUs the fits served so far give quota node
	// qi's subtree in flavor fi (IdleOrderFair).
	var given [][]int
	if order.fair() {
		given = make([][]int, len(ps))
		for fi, p := range ps {
			given[fi] = make([]int, len(p.quotas))
		}
	}
	// runsIn are, in a tree of several flavors, the flavors in which the
	// idle groups' jobs run allocations (by job).
	var runsIn map[JobKey][]int
	if len(ps) > 1 {
		runsIn = map[JobKey][]int{}
		for i := range gs {
			runsIn[JobKey{Namespace: gs[i].Namespace, Job: gs[i].Job}] = nil
		}
		for fi, p := range ps {
			for k := range p.allocs {
				a := p.allocs[k].a
				jk := JobKey{Namespace: a.Namespace, Job: a.Job}
				if in, ok := runsIn[jk]; ok && !slices.Contains(in, fi) {
					runsIn[jk] = append(in, fi)
				}
			}
		}
	}
	// tries[i] are the flavors group i may take its fit in, in order,
	// and cls[i][fi] its class in flavor fi, built on first use.
	all := make([]int, len(fs))
	for fi := range all {
		all[fi] = fi
	}
	tries := make([][]int, len(gs))
	flat := make([]*fitClass, len(gs)*len(fs))
	cls := make([][]*fitClass, len(gs))
	for i := range gs {
		tries[i] = fitFlavors(fs, &gs[i], runsIn[JobKey{Namespace: gs[i].Namespace, Job: gs[i].Job}], all)
		cls[i] = flat[i*len(fs) : (i+1)*len(fs) : (i+1)*len(fs)]
	}
	out := make([]GroupFit, len(gs))
	// seen marks, under IdleOrderFair, the quota nodes whose first group
	// left is already in this step's comparison (a node's own groups keep
	// L3 order, as the plan's idle jobs do: decideIdleFair).
	seen := map[string]bool{}
	for len(left) > 0 {
		best, bestFlavor, bestShare := -1, -1, math.Inf(1)
		clear(seen)
		for k, i := range left {
			if order == IdleOrderFair {
				q := ps[0].byNS[gs[i].Namespace]
				if q != nil && seen[q.node.Name] {
					continue
				}
				if q != nil {
					seen[q.node.Name] = true
				}
			}
			fi := firstWithRoom(fs, &gs[i], tries[i], cls[i])
			if !order.fair() {
				best, bestFlavor = k, fi
				break
			}
			share := math.Inf(1)
			if fi >= 0 {
				share = fairShareAfter(ps[fi], given[fi], &gs[i])
			}
			if best < 0 || bestFlavor < 0 && fi >= 0 || share < bestShare { // strictly: ties keep L3 order
				best, bestFlavor, bestShare = k, fi, share
			}
		}
		i := left[best]
		left = slices.Delete(left, best, best+1)
		g := &gs[i]
		out[i] = GroupFit{Namespace: g.Namespace, Job: g.Job, Group: g.Group}
		if bestFlavor < 0 {
			continue
		}
		f := fs[bestFlavor]
		c := cls[i][bestFlavor]
		for out[i].Fit < g.Max-g.Count {
			ni := f.pick(c, g.GPUs)
			if ni < 0 {
				break
			}
			f.take(ni, g)
			out[i].Fit++
		}
		if out[i].Fit > 0 {
			out[i].Flavor = f.p.label
			if given != nil {
				q := f.p.byNS[g.Namespace]
				given[bestFlavor][q.index] += out[i].Fit * g.GPUs
				for _, a := range q.ancestors {
					given[bestFlavor][a.index] += out[i].Fit * g.GPUs
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b GroupFit) int { return a.Key().Compare(b.Key()) })
	return out
}

// fitFlavors returns the indices in fs of the flavors group g may take
// its fit in, in the order it tries them: those it allows
// (IdleGroup.Flavors, in its order; nil: all, in tree order); when its
// job runs allocations in some of them (runs, indices in fs), the first
// of those alone: the job has taken it (DESIGN L13, all of a job's
// allocations take one flavor). all lists every index of fs, and is
// returned for a group that allows every flavor and runs nowhere.
func fitFlavors(fs []*fitter, g *IdleGroup, runs []int, all []int) []int {
	var allowed []int
	if g.Flavors == nil {
		allowed = all
	} else {
		for _, name := range g.Flavors {
			for fi, f := range fs {
				if f.p.flavor == name {
					allowed = append(allowed, fi)
				}
			}
		}
	}
	for _, fi := range allowed {
		if slices.Contains(runs, fi) {
			return []int{fi}
		}
	}
	return allowed
}

// firstWithRoom returns the first of flavors tries (fitFlavors) in which
// group g has free GPUs for one allocation of its shape, or -1 (none, or
// g is not governed); cls caches g's class in each flavor (fitter.class).
func firstWithRoom(fs []*fitter, g *IdleGroup, tries []int, cls []*fitClass) int {
	for _, fi := range tries {
		f := fs[fi]
		if f.p.byNS[g.Namespace] == nil {
			continue
		}
		if cls[fi] == nil {
			cls[fi] = f.class(g)
		}
		if f.pick(cls[fi], g.GPUs) >= 0 {
			return fi
		}
	}
	return -1
}

// fairShareAfter is the borrowed share (DESIGN L4, L14) that idle group
// g's own quota node would have in planner p's flavor once all g asks
// for, (Max - Count) x GPUs, were placed on top of the plan and of given
// (GPUs the fits served before give each quota node's subtree, by
// quota index): planner.idleShareAfter of a job asking for both.
func fairShareAfter(p *planner, given []int, g *IdleGroup) float64 {
	q := p.byNS[g.Namespace]
	if q == nil {
		return math.Inf(1)
	}
	asked := min(int64(max(0, g.Max-g.Count))*int64(g.GPUs)+int64(given[q.index]), MaxAsk)
	return p.idleShareAfter(&job{namespace: g.Namespace, name: g.Job, q: q, priority: g.Priority, idle: true}, int(asked))
}

// fitClassKey is what decides which nodes can run a group, but for the
// number of GPUs per allocation.
type fitClassKey struct {
	datacenters string // joined with NUL
	pool        string
	model       string
}

// fitClass indexes the nodes of one class by their free GPUs of its model:
// byFree[f] is a min-heap of the indices of nodes that had f free GPUs when
// pushed. A node is pushed again each time its count falls, so an entry
// whose count no longer matches is stale and dropped when met.
type fitClass struct {
	key    fitClassKey
	byFree [][]int32
	member []bool // per node index: the node was pushed into the class
	cl     *claim // what freeOn counts for the class: free, unheld GPUs of its model
}

// fitClaim is the claim an idle group's extra allocations are counted as:
// no claimant, so that only free, healthy, unheld GPUs of the model count
// (DESIGN §8: held GPUs, lent ones included, are not offered to idle_fit).
func fitClaim(model string, gpus int) *claim {
	return &claim{j: &job{}, g: &Pending{Model: model, GPUs: gpus}, cid: noClaimant, alt: noClaimant}
}

// fitter places idle-fit allocations, one class index per class of node
// that the idle groups ask for.
type fitter struct {
	p       *planner
	classes map[fitClassKey]*fitClass
	list    []*fitClass // the classes in the order they were built
}

// class returns the index of g's class, building it on first use from the
// nodes of g's datacenters and pool with free GPUs of g's model.
func (f *fitter) class(g *IdleGroup) *fitClass {
	key := fitClassKey{datacenters: strings.Join(g.Datacenters, "\x00"), pool: poolOf(g.NodePool), model: g.Model}
	if c, ok := f.classes[key]; ok {
		return c
	}
	c := &fitClass{key: key, member: make([]bool, len(f.p.nodes)), cl: fitClaim(g.Model, g.GPUs)}
	f.classes[key] = c
	f.list = append(f.list, c)
	for _, n := range f.p.nodes {
		if !inPlace(n, g.Datacenters, g.NodePool) {
			continue
		}
		if free := f.p.freeOn(n, c.cl); free > 0 {
			c.push(free, int32(n.index))
			c.member[n.index] = true
		}
	}
	return c
}

// inPlace reports whether node n is in one of dcs (empty or "*": any) and
// in pool.
func inPlace(n *cnode, dcs []string, pool string) bool {
	if poolOf(pool) != poolOf(n.n.NodePool) {
		return false
	}
	if len(dcs) == 0 {
		return true
	}
	for _, dc := range dcs {
		if dc == n.n.Datacenter || dc == "*" {
			return true
		}
	}
	return false
}

// pick returns the node binPack would choose for an allocation of gpus
// GPUs of class c (fewest free GPUs that fit, then lowest index), or -1.
func (f *fitter) pick(c *fitClass, gpus int) int {
	for free := gpus; free < len(c.byFree); free++ {
		h := c.byFree[free]
		for len(h) > 0 {
			ni := int(h[0])
			if f.p.freeOn(f.p.nodes[ni], c.cl) == free {
				return ni
			}
			h = popHeap(h)
			c.byFree[free] = h
		}
	}
	return -1
}

// take books one allocation of g on node ni and re-files the node in every
// class it belongs to under its new free count.
func (f *fitter) take(ni int, g *IdleGroup) {
	n := f.p.nodes[ni]
	if st := f.p.st; n.model != "" && st.nodeFreeing[ni] == 0 && (st.nodeHeld == nil || st.nodeHeld[ni] == 0) {
		// One model and nothing being freed: freeOn reads nodeFree for
		// every model that can match, so the count is all there is to
		// book (the holders are not read again after the last step).
		st.nodeFree[ni] -= g.GPUs
	} else {
		f.p.take(n, fitClaim(g.Model, g.GPUs), g.GPUs, noClaimant)
	}
	for _, c := range f.list {
		if !c.member[ni] {
			continue
		}
		if free := f.p.freeOn(n, c.cl); free > 0 {
			c.push(free, int32(ni))
		}
	}
}

func (c *fitClass) push(free int, ni int32) {
	for len(c.byFree) <= free {
		c.byFree = append(c.byFree, nil)
	}
	h := append(c.byFree[free], ni)
	for i := len(h) - 1; i > 0; {
		up := (i - 1) / 2
		if h[up] <= h[i] {
			break
		}
		h[up], h[i] = h[i], h[up]
		i = up
	}
	c.byFree[free] = h
}

// popHeap removes the least element of min-heap h.
func popHeap(h []int32) []int32 {
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h[l] < h[m] {
			m = l
		}
		if r < len(h) && h[r] < h[m] {
			m = r
		}
		if m == i {
			return h
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// idleGroups checks the snapshot's idle groups (part of Check).
func (c *checker) idleGroups() {
	seen := map[GroupKey]int{}
	for i := range c.s.IdleGroups {
		if f := c.idleGroup(i, seen); f != nil {
			c.fail(f)
		}
	}
}

// idleGroup checks idle_groups[i]: names, listed once, priority 1-100,
// gpus and max 1-quota.MaxGPUs (idle policies need max >= min >= 1, issue
// 11 item 4), count 0-quota.MaxGPUs, datacenters non-empty and listed once.
func (c *checker) idleGroup(i int, seen map[GroupKey]int) *Fault {
	g := &c.s.IdleGroups[i]
	path := "idle_groups[" + strconv.Itoa(i) + "]"
	bad := func(p, format string, args ...any) *Fault {
		return &Fault{Path: p, Item: ItemIdleGroup, Index: i, Job: JobKey{Namespace: g.Namespace, Job: g.Job}, Message: fmt.Sprintf(format, args...)}
	}
	if p, msg := names(path, "namespace", g.Namespace, "job", g.Job, "group", g.Group); msg != "" {
		return bad(p, "%s", msg)
	}
	if j, dup := seen[g.Key()]; dup {
		return bad(path, "group %s is listed twice (also idle_groups[%d])", Quote(g.Key().String()), j)
	}
	seen[g.Key()] = i
	if g.Priority < 1 || g.Priority > 100 {
		return bad(path+".priority", "%d is outside 1-100", g.Priority)
	}
	if msg := positive(g.GPUs); msg != "" {
		return bad(path+".gpus", "%s", msg)
	}
	if msg := positive(g.Max); msg != "" {
		return bad(path+".max", "%s", msg)
	}
	if g.Count < 0 || g.Count > quota.MaxGPUs {
		return bad(path+".count", "must be in 0-%d, not %d", quota.MaxGPUs, g.Count)
	}
	if p, msg := datacenters(path, g.Datacenters); msg != "" {
		return bad(p, "%s", msg)
	}
	if p, msg := flavorNames(path, c.s.Quota, g.Flavors); msg != "" {
		return bad(p, "%s", msg)
	}
	return nil
}

// flavorNames checks the flavors list at path+".flavors" (an idle group's
// or a pre-warm's, DESIGN L13): each a flavor of the tree rooted at root,
// listed once. It returns the path of the first bad entry and why, or "".
func flavorNames(path string, root *quota.Node, fs []string) (string, string) {
	names := quota.FlavorNames(root)
	for k, f := range fs {
		p := path + ".flavors[" + strconv.Itoa(k) + "]"
		if !slices.Contains(names, f) {
			return p, fmt.Sprintf("%s is not a flavor of the tree (%s)", Quote(f), strings.Join(names, ", "))
		}
		if slices.Index(fs, f) < k {
			return p, fmt.Sprintf("flavor %s is listed twice", Quote(f))
		}
	}
	return "", ""
}
