package plan

import "math"

// IdleOrder is the order in which a plan decides idle jobs, after all the
// non-idle work (DESIGN L3, L14).
type IdleOrder uint8

const (
	// IdleOrderFair decides idle jobs in DESIGN L14's order as the broker
	// reads it: one admission at a time, each time the quota node whose
	// first idle job left, in L3 order, would give it the lowest borrowed
	// share after its admission (ties in L3 order), and lets an idle
	// claimant stop other nodes' idle allocations under rule L14.fair
	// (fair.go). Within one node idle jobs keep L3 order, as every other
	// law orders a node's own work (Kueue's queue heads): compared job by
	// job across a node's own jobs, the share after admission grows with
	// the job's GPUs, so a node's smaller jobs would pass its older larger
	// one and leave GPUs spread too thin for it (IdleOrderFairEvery;
	// docs/benchmarks.md "Fair lending": 1.3 points of utilisation on the
	// reference). Compute's, the broker's, the zero value.
	IdleOrderFair IdleOrder = iota
	// IdleOrderL3 decides idle jobs in L3 order (priority, then
	// submission, namespace and names), each placed only on free GPUs,
	// with no give-back: the planner as it was before L14 (the
	// simulator's gputide-fifo policy measures it).
	IdleOrderL3
	// IdleOrderFairEvery is IdleOrderFair with the share comparison made
	// between every idle job left, a node's own included: L14's order
	// read word for word, kept to measure against (tests,
	// docs/benchmarks.md). Rule L14.fair applies as under IdleOrderFair.
	IdleOrderFairEvery
)

// String names the order: "fair", "l3" or "fair-every".
func (o IdleOrder) String() string {
	switch o {
	case IdleOrderL3:
		return "l3"
	case IdleOrderFair:
		return "fair"
	case IdleOrderFairEvery:
		return "fair-every"
	}
	return "unknown"
}

// fair reports whether o decides idle jobs in an order of DESIGN L14's
// shares, with rule L14.fair (IdleOrderFair, IdleOrderFairEvery).
func (o IdleOrder) fair() bool {
	return o == IdleOrderFair || o == IdleOrderFairEvery
}

// Options choose among the planner's variants. The zero value is
// Compute's planner.
type Options struct {
	// IdleOrder is how idle jobs are ordered and may take GPUs back
	// (DESIGN L14). Default IdleOrderFair.
	IdleOrder IdleOrder
}

// ComputeWith plans the snapshot as Compute does, under o. With
// IdleOrderFair the idle jobs are decided in DESIGN L14's order
// (decideIdleFair; in a tree of several flavors decideIdleFairAcross, by
// the share in the flavor each would take), and an idle claimant that
// fits on no free GPUs may take other nodes' idle allocations under rule
// L14.fair (fair.go).
func ComputeWith(s *Snapshot, o Options) (*Plan, error) {
	return compute(s, o.IdleOrder)
}

// ComputeFair is ComputeWith under IdleOrderFair: DESIGN L14's order and
// rule L14.fair, the planner the broker runs; Compute is the same.
func ComputeFair(s *Snapshot) (*Plan, error) {
	return ComputeWith(s, Options{IdleOrder: IdleOrderFair})
}

// decideIdleFair decides the idle jobs of jobs (in L3 order) not in
// suspended in DESIGN L14's order: one at a time, each time the one whose
// own node would have the lowest borrowed share after its admission, ties
// in L3 order, on the ledger as the plan has left it so far (non-idle
// work and the idle admissions decided before). Under IdleOrderFair only
// each quota node's first idle job left (in L3 order) competes; under
// IdleOrderFairEvery every idle job left.
//
// "One at a time" is one admission: a job stopped whole (L5: a batch job
// that is not elastic, a flex request) is one, decided whole (decide) with
// its share after all it asks for; the allocations of any other idle job
// (service, elastic batch: each a unit of L5) are each one, so that the
// sides of rule L14.fair meet within one allocation and no node takes
// from a second one what a third will take from it in the same plan (the
// property of no taking back, fair_test.go). A job whose allocation does
// not fit stops there and waits for the rest; its admits are one action
// per group, emitted when the job is done.
//
// O(idle admissions x quota nodes) per plan under IdleOrderFair, O(idle
// admissions x idle jobs) under IdleOrderFairEvery.
func (p *planner) decideIdleFair(jobs []*job, suspended map[JobKey]bool, cache map[feasibilityKey][]int) {
	// The candidates are the queues' heads: one queue per quota node
	// under IdleOrderFair, one per job under IdleOrderFairEvery (and for
	// a job bound to no node), each in L3 order; pos is the L3 position
	// of a queue's head, for ties.
	type queue struct {
		steps []*idleStep
		pos   []int
	}
	var queues []*queue
	byNode := map[*qnode]*queue{}
	for pos, j := range jobs {
		if !j.idle || suspended[JobKey{Namespace: j.namespace, Job: j.name}] {
			continue
		}
		q := byNode[j.q]
		if q == nil || p.idleOrder != IdleOrderFair || j.q == nil {
			q = &queue{}
			queues = append(queues, q)
			if p.idleOrder == IdleOrderFair && j.q != nil {
				byNode[j.q] = q
			}
		}
		q.steps = append(q.steps, &idleStep{j: j, byOne: p.admitsOneByOne(j)})
		q.pos = append(q.pos, pos)
	}
	for len(queues) > 0 {
		best, bestShare := -1, 0.0
		for i, q := range queues {
			sh := p.idleStepShare(q.steps[0])
			if best < 0 || sh < bestShare || sh == bestShare && q.pos[0] < queues[best].pos[0] { // ties: L3 order
				best, bestShare = i, sh
			}
		}
		q := queues[best]
		st := q.steps[0]
		done := true
		if st.byOne {
			if done = !p.idleStepOne(st, cache); done {
				p.idleStepDone(st)
			}
		} else {
			p.decide(st.j, cache)
		}
		if done {
			if q.steps, q.pos = q.steps[1:], q.pos[1:]; len(q.steps) == 0 {
				queues = append(queues[:best], queues[best+1:]...)
			}
		}
	}
}

// idleStep is an idle job being decided allocation by allocation
// (decideIdleFair): the group at gi, of which placed allocations are
// placed so far on nodes.
type idleStep struct {
	j      *job
	byOne  bool
	gi     int
	claim  *claim
	nodes  [][]string // per group, the nodes of its placed allocations
	reason string     // why the allocation that did not fit did not
}

// admitsOneByOne reports whether idle job j is admitted allocation by
// allocation under DESIGN L14's order: bound to a quota node, not a flex
// request, every group a service or elastic batch one (L5's units of one
// allocation).
func (p *planner) admitsOneByOne(j *job) bool {
	if j.q == nil || j.flex != nil {
		return false
	}
	for _, g := range j.groups {
		if g.Type != JobService && (g.Type != JobBatch || !g.Elastic) {
			return false
		}
	}
	return true
}

// idleStepShare is the borrowed share st's node would have after its next
// admission: its next allocation's GPUs, or, for a job decided whole, all
// it asks for (idleShareAfter).
func (p *planner) idleStepShare(st *idleStep) float64 {
	if !st.byOne {
		return p.idleShareAfter(st.j, st.j.asked)
	}
	return p.idleShareAfter(st.j, st.j.groups[st.gi].GPUs)
}

// idleStepOne places st's next allocation and reports whether the job has
// more to place.
func (p *planner) idleStepOne(st *idleStep, cache map[feasibilityKey][]int) bool {
	j := st.j
	if st.nodes == nil {
		st.nodes = make([][]string, len(j.groups))
	}
	g := j.groups[st.gi]
	if st.claim == nil || st.claim.g != g {
		st.claim = p.newClaim(j, g, cache)
	}
	ni, why := p.placeOne(st.claim)
	if ni < 0 {
		st.reason = why
		return false
	}
	st.nodes[st.gi] = append(st.nodes[st.gi], p.nodes[ni].n.ID)
	for len(st.nodes[st.gi]) == j.groups[st.gi].Count {
		if st.gi++; st.gi == len(j.groups) {
			return false
		}
	}
	return true
}

// idleStepDone emits st's actions: an admit per group with the nodes of
// its placed allocations, and a wait for the allocations not placed, of
// the group that did not fit and of the groups after it.
func (p *planner) idleStepDone(st *idleStep) {
	for gi, g := range st.j.groups {
		var nodes []string
		if st.nodes != nil {
			nodes = st.nodes[gi]
		}
		if len(nodes) > 0 {
			p.emit(Action{Action: ActionAdmit, Namespace: g.Namespace, Job: g.Job, Group: g.Group,
				Count: len(nodes), GPUs: g.GPUs, Nodes: nodes, Rule: RuleIdle, Reason: p.admitReason(st.j)})
		}
		if rest := g.Count - len(nodes); rest > 0 && st.reason != "" {
			p.emit(Action{Action: ActionWait, Namespace: g.Namespace, Job: g.Job, Group: g.Group,
				Count: rest, GPUs: g.GPUs, Rule: RuleAdmission, Reason: st.reason})
		}
	}
}

// idleShareAfter is the borrowed share (DESIGN L4, L14: borrowed / weight,
// BorrowedShare) that idle job j's own node would have in the planner's
// flavor after gpus more GPUs of j were admitted: borrowed = max(0, used
// + gpus - max(nominal, nonIdle)) on the node's subtree figures. A job bound to no quota node sorts last (it is only warned
// about).
func (p *planner) idleShareAfter(j *job, gpus int) float64 {
	if j.q == nil {
		return math.Inf(1)
	}
	i := j.q.index
	l := p.st.ledger
	borrowed := max(0, l.used[i]+gpus-max(j.q.nominal, l.nonIdle[i]))
	return BorrowedShare(borrowed, j.q.weight)
}
