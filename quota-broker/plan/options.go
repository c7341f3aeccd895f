package plan

import "math"

// IdleOrder is the order in which a plan decides idle jobs, after all the
// non-idle work (DESIGN L3, L14).
type IdleOrder uint8

const (
	// IdleOrderL3 decides idle jobs in L3 order (priority, then
	// submission, namespace and names), each placed only on free GPUs,
	// with no give-back: the planner as it was before L14 (the
	// simulator's gputide-fifo policy measures it).
	IdleOrderL3 IdleOrder = iota
	// IdleOrderFair decides idle jobs one at a time, each time the one
	// whose node would have the lowest borrowed share after its
	// admission, and lets an idle claimant stop other nodes' idle
	// allocations under rule L14.fair (DESIGN L14). Built: the order
	// (ComputeWith); not yet: L14.fair.
	IdleOrderFair
)

// String names the order as the simulator's policies do: "l3" or "fair".
func (o IdleOrder) String() string {
	switch o {
	case IdleOrderL3:
		return "l3"
	case IdleOrderFair:
		return "fair"
	}
	return "unknown"
}

// Options choose among the planner's variants. The zero value is
// Compute's planner.
type Options struct {
	// IdleOrder is how idle jobs are ordered and may take GPUs back
	// (DESIGN L14). Default IdleOrderL3.
	IdleOrder IdleOrder
}

// ComputeWith plans the snapshot as Compute does, under o. With
// IdleOrderFair the idle jobs are decided in DESIGN L14's order
// (decideIdleFair; in a tree of several flavors decideIdleFairAcross, by
// the share in the flavor each would take). The give-back rule L14.fair
// is not built yet.
func ComputeWith(s *Snapshot, o Options) (*Plan, error) {
	return compute(s, o.IdleOrder)
}

// decideIdleFair decides the idle jobs of jobs (in L3 order) not in
// suspended in DESIGN L14's order: one at a time, each time the one whose
// own node would have the lowest borrowed share after its admission, ties
// in L3 order. The share after admission is idleShareAfter's, on the
// ledger as the plan has left it so far (non-idle work and the idle jobs
// decided before). A job that then does not fit waits as in L3 order;
// nothing it did not place changes the others' shares.
//
// O(idle jobs^2 x tree depth) per plan: each pick scans the jobs left.
func (p *planner) decideIdleFair(jobs []*job, suspended map[JobKey]bool, cache map[feasibilityKey][]int) {
	var left []*job
	for _, j := range jobs {
		if j.idle && !suspended[JobKey{Namespace: j.namespace, Job: j.name}] {
			left = append(left, j)
		}
	}
	for len(left) > 0 {
		best, bestShare := 0, p.idleShareAfter(left[0])
		for i := 1; i < len(left); i++ {
			if sh := p.idleShareAfter(left[i]); sh < bestShare { // strictly: ties keep L3 order
				best, bestShare = i, sh
			}
		}
		j := left[best]
		left = append(left[:best], left[best+1:]...)
		p.decide(j, cache)
	}
}

// idleShareAfter is the borrowed share (DESIGN L4, L14: borrowed / weight,
// BorrowedShare) that idle job j's own node would have in the planner's
// flavor after all j asks for (job.asked) were admitted: borrowed =
// max(0, used + asked - max(nominal, nonIdle)) on the node's subtree
// figures. A job bound to no quota node sorts last (it is only warned
// about).
func (p *planner) idleShareAfter(j *job) float64 {
	if j.q == nil {
		return math.Inf(1)
	}
	i := j.q.index
	l := p.st.ledger
	borrowed := max(0, l.used[i]+j.asked-max(j.q.nominal, l.nonIdle[i]))
	return BorrowedShare(borrowed, j.q.weight)
}
