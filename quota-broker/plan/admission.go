package plan

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// job is the pending work of one Nomad job: all its pending groups are
// decided together (DESIGN L3).
type job struct {
	namespace string
	name      string
	groups    []*Pending // sorted by group name
	q         *qnode
	priority  int
	idle      bool
	flex      *Flex
	submitted time.Time
	// queued is the job's latest queued time (L11: max_wait counts from
	// it); its groups agree on it (Validate).
	queued time.Time
	// reservation is the reservation the job names, or ""; res is it when
	// it is active now and of the job's namespace (L10), else nil.
	reservation string
	res         *Reservation
	// booked is booked(N) per quota node as the job counts it (L10), set
	// when the job is decided.
	booked []int
	// asked is the total GPUs of all pending allocations of all groups,
	// saturated at MaxAsk so that no sum of counts can wrap around.
	asked int
	// fairLeft is, while an idle job whose allocations form one unit
	// (L5: a batch job that is not elastic, a flex request) is decided,
	// the GPUs it asks for that are not admitted yet; 0 for other jobs
	// (planner.fairAsk, rule L14.fair).
	fairLeft int
}

// maxRun is the job's flex max_run for ordering; a non-flex job counts as 0.
func (j *job) maxRun() time.Duration {
	if j.flex == nil {
		return 0
	}
	return j.flex.MaxRun
}

// pendingJobs groups the snapshot's pending groups by job and orders the
// jobs as DESIGN L3 says:
//  1. higher priority first;
//  2. among flex requests, shorter max_run first (a non-flex job counts as 0);
//  3. earlier submission;
//  4. namespace, then job name (group names order the groups of a job).
func (p *planner) pendingJobs() []*job {
	jobs := p.pendingJobList()
	sort.SliceStable(jobs, func(a, b int) bool {
		x, y := jobs[a], jobs[b]
		if x.priority != y.priority {
			return x.priority > y.priority
		}
		if x.maxRun() != y.maxRun() {
			return x.maxRun() < y.maxRun()
		}
		if !x.submitted.Equal(y.submitted) {
			return x.submitted.Before(y.submitted)
		}
		if x.namespace != y.namespace {
			return x.namespace < y.namespace
		}
		return x.name < y.name
	})
	return jobs
}

// pendingJobList returns the pending jobs by job key, not yet in L3
// order (pendingJobs).
func (p *planner) pendingJobList() []*job {
	byKey := map[JobKey]*job{}
	for i := range p.snap.Pending {
		g := &p.snap.Pending[i]
		key := g.JobKey()
		j, ok := byKey[key]
		if !ok {
			j = &job{namespace: g.Namespace, name: g.Job, q: p.byNS[g.Namespace], submitted: g.SubmittedAt}
			byKey[key] = j
		}
		j.groups = append(j.groups, g)
	}
	jobs := make([]*job, 0, len(byKey))
	for _, key := range slices.SortedFunc(maps.Keys(byKey), JobKey.Compare) {
		j := byKey[key]
		sort.SliceStable(j.groups, func(a, b int) bool { return j.groups[a].Group < j.groups[b].Group })
		first := j.groups[0]
		j.idle = first.Idle
		j.reservation = first.Reservation
		for _, g := range j.groups {
			j.priority = max(j.priority, g.Priority)
			if g.SubmittedAt.Before(j.submitted) {
				j.submitted = g.SubmittedAt
			}
			if q := g.Queued(); q.After(j.queued) {
				j.queued = q
			}
			if j.flex == nil && g.Flex != nil {
				j.flex = g.Flex
			}
			j.asked = addAsk(j.asked, g.Count, g.GPUs)
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// MaxAsk bounds the GPUs a job may ask for in total: a larger ask is
// never entitled, and no arithmetic on it overflows.
const MaxAsk = 1 << 31

// addAsk returns total + count*gpus, saturated at MaxAsk; negative counts
// count as 0.
func addAsk(total, count, gpus int) int {
	if count <= 0 || gpus <= 0 {
		return total
	}
	if count > MaxAsk/gpus || total+count*gpus > MaxAsk {
		return MaxAsk
	}
	return total + count*gpus
}

// yielded is what a job's own node gives back when its lower-priority
// allocations yield to the job (DESIGN L3 and L5 step 3, priority
// preemption; Kueue's withinClusterQueue: LowerPriority). gpus are their
// non-idle GPUs, debt included, left out of the node's own figure; nonDebt
// is the part that is not debt, left out of each ancestor's figure (which
// leaves debt out already). The zero value yields nothing.
type yielded struct{ gpus, nonDebt int }

// entitlement checks DESIGN L3 for a non-idle job of node q asking for
// gpus more GPUs, with y left out of the figures and each node's nominal
// lowered by booked (booked(N) of L10, indexed by quota node; nil for
// none). Allocations of active reservations are left out of the usage
// (L10). It returns "" when the job is entitled, or the quota node that
// binds it and the reason, naming the quota and the numbers.
//
//   - q's non-idle usage, debt included, less y.gpus, plus gpus stays
//     within q's nominal less booked(q); when q has child-level preemption
//     only q's own namespaces count, as its descendants yield to it (L5
//     step 2);
//   - for every ancestor a of q, a's non-idle subtree usage, debt excluded
//     (debt never blocks the quota it was moved to), less y.nonDebt, plus
//     gpus stays within a's nominal less booked(a).
func (p *planner) entitlement(q *qnode, gpus int, y yielded, booked []int) (bound, reason string) {
	l := p.st.ledger
	used, scope := l.nonIdle[q.index]-l.reserved[q.index], ""
	if q.node.ChildPreemption {
		used, scope = l.ownNonIdle[q.index]-l.ownReserved[q.index], " by its own namespaces"
	}
	if y.gpus > 0 {
		used -= y.gpus
		scope += fmt.Sprintf(", not counting %d of lower priority that yield", y.gpus)
	}
	if nominal := lowered(q, booked); used+gpus > nominal {
		return q.node.Name, fmt.Sprintf("%s: %s; %s", q.node.Name, inUseText(q, booked, used, scope), shortfall(gpus, nominal-used))
	}
	scope = ""
	if y.nonDebt > 0 {
		scope = fmt.Sprintf(", not counting %d of lower priority in %s that yield", y.nonDebt, q.node.Name)
	}
	for _, a := range q.ancestors {
		used := l.nonIdle[a.index] - l.debt[a.index] - l.reservedNonDebt[a.index] - y.nonDebt
		if nominal := lowered(a, booked); used+gpus > nominal {
			return a.node.Name, fmt.Sprintf("%s (above %s): %s; %s",
				a.node.Name, q.node.Name, inUseText(a, booked, used, ", debt excluded"+scope), shortfall(gpus, nominal-used))
		}
	}
	return "", ""
}

// lowered returns q's nominal less booked(q) (L10; booked may be nil).
func lowered(q *qnode, booked []int) int {
	if booked == nil {
		return q.nominal
	}
	return q.nominal - booked[q.index]
}

// inUseText writes q's usage against its lowered nominal for a reason,
// scope following "in use": "40 of 48 GPUs in use", or, with GPUs of q
// booked (L10), "40 GPUs in use, of the 16 it may use while 32 of its 48
// are booked" (issue 20: "40 of 16 (48 less 32 booked)" read as nonsense).
func inUseText(q *qnode, booked []int, used int, scope string) string {
	if booked == nil || booked[q.index] == 0 {
		return fmt.Sprintf("%d of %d GPUs in use%s", used, q.nominal, scope)
	}
	b := booked[q.index]
	return fmt.Sprintf("%d GPUs in use%s, of the %d it may use while %d of its %d are booked", used, scope, q.nominal-b, b, q.nominal)
}

// entitled decides DESIGN L3 for non-idle job j: it returns "" and what
// yields to j (zero when j is entitled without it), or the quota node that
// binds j and the reason j waits. Only when j is not entitled on the plain
// figures and its node has priority preemption are the node's
// lower-priority allocations that L5 step 3 may stop (min_runtime aside,
// as the search may allow them) left out; the plan must then restore the
// quota (restoreQuota).
func (p *planner) entitled(j *job) (bound, reason string, y yielded) {
	bound, reason = p.entitlement(j.q, j.asked, yielded{}, j.booked)
	if reason == "" || !j.q.node.PriorityPreemption {
		return bound, reason, yielded{}
	}
	for _, u := range p.yieldUnits(j, true) {
		y.gpus += u.gpus
		y.nonDebt += u.nonDebt
	}
	if y.gpus == 0 {
		return bound, reason, yielded{}
	}
	bound, reason = p.entitlement(j.q, j.asked, y, j.booked)
	return bound, reason, y
}

// feasible reports whether node c can ever run an allocation of g: its
// datacenter and node pool match and it has enough healthy GPUs of the
// model.
func (p *planner) feasible(c *cnode, g *Pending) bool {
	if len(g.Datacenters) > 0 {
		ok := false
		for _, dc := range g.Datacenters {
			if dc == c.n.Datacenter || dc == "*" {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if poolOf(g.NodePool) != poolOf(c.n.NodePool) {
		return false
	}
	if g.Model == "" || c.model != "" {
		// Every healthy GPU is of the model asked for, or (a node of one
		// other model) none is.
		if !modelMatches(g.Model, c.model) {
			return false
		}
		return c.healthy >= g.GPUs
	}
	n := 0
	for _, gi := range c.gpus {
		if p.gpus[gi].healthy && modelMatches(g.Model, p.gpu(gi).Model) {
			n++
		}
	}
	return n >= g.GPUs
}

func poolOf(pool string) string {
	if pool == "" {
		return "default"
	}
	return pool
}

func modelMatches(want, have string) bool { return want == "" || want == have }

// shortfall says how many GPUs a job asking for gpus lacks when left GPUs
// of a nominal remain: "8 more needed", and the ask when it differs
// ("8 more needed for 16 asked").
func shortfall(gpus, left int) string {
	left = max(left, 0)
	if left == 0 || gpus >= MaxAsk {
		if gpus >= MaxAsk {
			return fmt.Sprintf("more than %d GPUs asked", MaxAsk-1)
		}
		return fmt.Sprintf("%d more needed", gpus)
	}
	return fmt.Sprintf("%d more needed for %d asked", gpus-left, gpus)
}

// feasibilityKey is what decides which nodes can run an allocation.
type feasibilityKey struct {
	datacenters string // joined with NUL
	pool        string
	gpus        int
	model       string
}

// feasibleNodes returns the indices of the nodes that can run allocations
// of g, cached by the group's constraints.
func (p *planner) feasibleNodes(g *Pending, cache map[feasibilityKey][]int) []int {
	key := feasibilityKey{datacenters: strings.Join(g.Datacenters, "\x00"), pool: poolOf(g.NodePool), gpus: g.GPUs, model: g.Model}
	if nodes, ok := cache[key]; ok {
		return nodes
	}
	// The lists share one array, reused across plans (buffers.feasible).
	start := len(p.buf.feasible)
	for _, c := range p.nodes {
		if p.feasible(c, g) {
			p.buf.feasible = append(p.buf.feasible, c.index)
		}
	}
	nodes := p.buf.feasible[start:len(p.buf.feasible):len(p.buf.feasible)]
	cache[key] = nodes
	return nodes
}

// freeOn counts the GPUs of node n that claim cl may take for its
// model: healthy GPUs held by nobody, plus GPUs being freed for it (DESIGN
// L6, L7: GPUs freed for a claimant go to that claimant only), less GPUs
// held (L10) for another owner; held GPUs lent to idle jobs (a
// reservation's, from start + settle) count for an idle claim.
func (p *planner) freeOn(n *cnode, cl *claim) int {
	st := p.st
	if st.nodeFreeing[n.index] == 0 && (st.nodeHeld == nil || st.nodeHeld[n.index] == 0) && modelMatches(cl.g.Model, n.model) {
		return st.nodeFree[n.index]
	}
	p.resolve(n.index)
	count := 0
	for _, g := range n.gpus {
		if p.usable(g, cl) {
			count++
		}
	}
	return count
}

// usable reports whether claim cl may take GPU g (see freeOn).
func (p *planner) usable(g int32, cl *claim) bool {
	st := p.st
	if !p.gpus[g].healthy || !modelMatches(cl.g.Model, p.gpu(g).Model) {
		return false
	}
	switch h := st.holder[g]; {
	case h == holderFree:
	case h >= 0 && st.freeFor[g] != noClaimant && (st.freeFor[g] == cl.cid || st.freeFor[g] == cl.alt):
	default:
		return false
	}
	if st.heldBy == nil || st.heldBy[g] == noClaimant {
		return true
	}
	h := st.heldBy[g]
	if cl.drain != nil {
		// A drain places what its whole held slots do not (heldSlots):
		// on its other held GPUs too.
		return h == cl.cid && !cl.drain.slotted[g]
	}
	return h == cl.cid || h == cl.alt || (cl.j.idle && p.lend != nil && p.lend[g])
}

// binPack picks the node for one allocation of claim cl on free GPUs,
// like Nomad's bin-packing: the feasible node with the fewest free GPUs
// that still fit, then the lowest node ID (nodes are sorted by ID). It
// returns -1 when no node fits.
func (p *planner) binPack(nodes []int, cl *claim) int {
	best, bestFree := -1, 0
	for _, ni := range nodes {
		free := p.freeOn(p.nodes[ni], cl)
		if free < cl.g.GPUs {
			continue
		}
		if best == -1 || free < bestFree {
			best, bestFree = ni, free
			if free == cl.g.GPUs {
				break
			}
		}
	}
	return best
}

// take assigns gpus GPUs of node n that claim cl may use (see usable) and
// returns them: first GPUs held for it (L10), then GPUs being freed for
// it, then free ones, each pass in node order. With hold == noClaimant
// the GPUs go to a new allocation of cl (their hold, if any, ends);
// otherwise they are held for owner hold (DESIGN L10) and stay as they
// are (free, or being freed for cl).
func (p *planner) take(n *cnode, cl *claim, gpus int, hold int32) []int32 {
	p.resolve(n.index)
	p.vc.touch(n.index)
	st := p.st
	var out []int32
	for pass := 0; pass < 3 && gpus > 0; pass++ {
		for _, g := range n.gpus {
			if gpus == 0 {
				break
			}
			if !p.usable(g, cl) {
				continue
			}
			held := st.heldBy != nil && st.heldBy[g] != noClaimant
			freeing := st.holder[g] >= 0
			switch {
			case pass == 0 && held:
			case pass == 1 && !held && freeing:
			case pass == 2 && !held && !freeing:
			default:
				continue
			}
			out = append(out, g)
			gpus--
			if hold != noClaimant {
				if !held || st.heldBy[g] != hold {
					p.holdGPU(g, hold)
				}
				continue
			}
			if freeing {
				st.nodeFreeing[n.index]--
			} else {
				st.nodeFree[n.index]--
			}
			if held {
				st.heldBy[g] = noClaimant
				st.nodeHeld[n.index]--
			}
			st.holder[g] = holderPlanned
			st.freeFor[g] = noClaimant
		}
	}
	return out
}
