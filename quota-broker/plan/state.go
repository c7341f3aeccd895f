package plan

import (
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// GPU holder values of state.holder besides allocation indices.
const (
	holderFree    int32 = -1 // healthy or not, held by nobody
	holderPlanned int32 = -2 // taken by an allocation admitted in this plan
)

// noClaimant marks a GPU that is not being freed for anybody.
const noClaimant int32 = -1

// qnode is a quota node with its place in the tree and its ledger.
type qnode struct {
	node *quota.Node
	// nominal is the node's nominal of the planner's flavor (DESIGN L13):
	// node.GPUs.Of(planner.flavor).
	nominal int
	// weight is the node's weight in the planner's flavor (DESIGN L14):
	// node.Weight's explicit one, else nominal.
	weight   int
	index    int
	parent   *qnode
	children []*qnode
	// ancestors are the node's ancestors, nearest first.
	ancestors []*qnode
	// first and last bound the node's subtree in pre-order: q is in the
	// subtree of n when n.first <= q.index && q.index <= n.last.
	first, last int
}

// isDescendantOf reports whether q is a strict descendant of n.
func (q *qnode) isDescendantOf(n *qnode) bool {
	return q != n && n.first <= q.index && q.index <= n.last
}

// ledger holds the GPU figures of every quota node (DESIGN L2, L4, L9).
// own* are the node's own namespaces; the others are subtree figures.
type ledger struct {
	used       []int // subtree GPUs of live allocations
	nonIdle    []int // subtree GPUs of non-idle allocations (debt included)
	debt       []int // subtree GPUs of debt allocations
	ownNonIdle []int // own namespaces' non-idle GPUs (debt included)
	// reserved, reservedNonDebt and ownReserved are the parts of nonIdle,
	// nonIdle - debt and ownNonIdle that are allocations of active
	// reservations, left out of the usage for other jobs (DESIGN L3, L10).
	reserved, reservedNonDebt, ownReserved []int
}

func newLedger(n int) ledger {
	return ledger{used: make([]int, n), nonIdle: make([]int, n), debt: make([]int, n), ownNonIdle: make([]int, n),
		reserved: make([]int, n), reservedNonDebt: make([]int, n), ownReserved: make([]int, n)}
}

func (l ledger) clone() ledger {
	return ledger{
		used:            append([]int(nil), l.used...),
		nonIdle:         append([]int(nil), l.nonIdle...),
		debt:            append([]int(nil), l.debt...),
		ownNonIdle:      append([]int(nil), l.ownNonIdle...),
		reserved:        append([]int(nil), l.reserved...),
		reservedNonDebt: append([]int(nil), l.reservedNonDebt...),
		ownReserved:     append([]int(nil), l.ownReserved...),
	}
}

// add books gpus (negative to remove) for an allocation of node q; reserved
// marks an allocation of an active reservation (L10).
func (l ledger) add(q *qnode, gpus int, idle, debt, reserved bool) {
	if !idle {
		l.ownNonIdle[q.index] += gpus
		if reserved {
			l.ownReserved[q.index] += gpus
		}
	}
	for n := q; n != nil; n = n.parent {
		l.used[n.index] += gpus
		if !idle {
			l.nonIdle[n.index] += gpus
			if reserved {
				l.reserved[n.index] += gpus
				if !debt {
					l.reservedNonDebt[n.index] += gpus
				}
			}
		}
		if debt {
			l.debt[n.index] += gpus
		}
	}
}

// ownGPUs sums the GPUs of the allocations of one quota node's own
// namespaces (L2), for ledger.addOwn.
type ownGPUs struct {
	seen                    bool
	used, nonIdle, reserved int
}

// count adds allocation a, of this node's namespaces.
func (o *ownGPUs) count(a *alloc) {
	o.seen = true
	o.used += a.count
	if !a.idle {
		o.nonIdle += a.count
		if a.reserved {
			o.reserved += a.count
		}
	}
}

// addOwn books, as add would allocation by allocation (no debt yet),
// the GPUs own[i] of the allocations of quota node i's own namespaces, in
// the node and its ancestors.
func (l ledger) addOwn(quotas []*qnode, own []ownGPUs) {
	for _, q := range quotas {
		o := own[q.index]
		if !o.seen {
			continue
		}
		l.ownNonIdle[q.index] += o.nonIdle
		l.ownReserved[q.index] += o.reserved
		for n := q; n != nil; n = n.parent {
			l.used[n.index] += o.used
			l.nonIdle[n.index] += o.nonIdle
			l.reserved[n.index] += o.reserved
			l.reservedNonDebt[n.index] += o.reserved
		}
	}
}

// alloc is a snapshot allocation with what the planner derived for it. The
// facts of the snapshot's allocation that passes over every allocation
// read (priority, idle, kill_timeout, start) are copied here, so that those
// passes read this smaller array and not the snapshot's. The fields are
// laid out in two cache lines of 64 bytes, the first with what the passes
// over every allocation read (ledger, debt, victim classes, usage).
type alloc struct {
	q       *qnode // nil: its namespace is outside the tree
	started int64  // start, Unix nanoseconds
	index   int
	// count is how many GPUs it holds (see gpus).
	count int
	unit  int // index into planner.units
	// victimable: its static facts allow it to be a victim at all (DESIGN
	// L5): a service or batch job in the tree, not in an active
	// reservation, not already being stopped.
	victimable bool
	// reserved: it names a reservation that is active now (L10).
	reserved bool
	idle     bool // Allocation.Idle
	// wholeJob: its whole job is one unit of preemption (DESIGN L5): a
	// batch job that is not elastic, or a flex request (L11).
	wholeJob bool
	// alone: its unit has no other allocation.
	alone bool
	// healthy is how many of its GPUs are healthy.
	healthy  int32
	priority int32 // Allocation.Priority, 1-100 (Validate)

	node int // index into planner.nodes, -1 if unknown
	a    *Allocation
	// gpus are its GPUs, resolved from GPUIDs when its node is resolved
	// (planner.resolve); count is known before that.
	gpus []int32
	// killTimeout is Allocation.KillTimeout (L8).
	killTimeout time.Duration
	_           [24]byte // to 128 bytes, so that the first line of each stays one line
}

// unit is the unit of preemption (DESIGN L5): a whole batch job, or one
// allocation of a service job or of an elastic batch job.
type unit struct {
	allocs []int // allocation indices, sorted
	gpus   int   // GPUs of all its allocations
	// youngest is the latest start among its allocations (its age), Unix
	// nanoseconds.
	youngest int64
}

// cnode is a client node of the cluster.
type cnode struct {
	n     *Node
	index int
	gpus  []int32 // global GPU indices, in the node's order
	// model is the node's only GPU model, or "" when it has several.
	model  string
	allocs []int // allocation indices on this node
	// allHealthy: every GPU of the node is healthy; healthy counts them.
	allHealthy bool
	healthy    int
	// resolved: the GPUs of its allocations are booked GPU by GPU in
	// state.holder. Until then the node's free count is derived from the
	// allocations' GPU counts (see planner.resolve).
	resolved bool
}

// state is everything a plan changes while it is built. It is copied to try
// a flex request as a whole and restored when the request does not fit.
type state struct {
	holder   []int32 // per GPU: allocation index, holderFree or holderPlanned
	freeFor  []int32 // per GPU: claimant it is being freed for, or noClaimant
	stopped  []bool  // per allocation: stopped by this plan
	nodeFree []int   // per node: healthy GPUs with holderFree
	// nodeFreeing counts, per node, GPUs that are being freed for someone.
	nodeFreeing []int
	// heldBy is, per GPU, the owner (a claimant ID) a hold keeps it for
	// (DESIGN L10), or noClaimant; nil while no GPU is held. nodeHeld
	// counts, per node, its held GPUs (nil with heldBy).
	heldBy   []int32
	nodeHeld []int
	// debt is, per allocation, the quota node whose lowered nominal makes
	// it debt (DESIGN L9), and displaced the quota node at which the
	// active reservations displace it (L10); nil slices while no
	// allocation is. Both are derived from the live allocations the plan
	// has not stopped (planner.rederive): they are state, so that a state
	// restored (a flex request or a drain's dry run) restores them too.
	debt, displaced []*qnode
	// claimedBy is, per allocation, the owner (a claimant ID) that counts
	// on it without stopping it in this plan, or noClaimant; nil while no
	// allocation is claimed: a drain's or pre-warm's victim whose stop is
	// not due yet, or an idle allocation under a reservation's Cover
	// (DESIGN L3: GPUs and victims planned for one owner are not free for
	// the next; L10 Cover). Such an allocation is a victim of that owner
	// only (see claimedByOther).
	claimedBy []int32
	// evicted is, per quota node with an eviction budget (DESIGN L14),
	// the GPUs of its subtree stopped as victims within its window: the
	// snapshot's Evictions, then this plan's stops (budget.go); nil when
	// no node has a budget.
	evicted []int
	ledger  ledger
	actions []Action
}

// debtOf returns the quota node whose lowered nominal makes allocation ai
// debt now (DESIGN L9), or nil.
func (s *state) debtOf(ai int) *qnode {
	if s.debt == nil {
		return nil
	}
	return s.debt[ai]
}

// displacedOf returns the quota node at which the active reservations
// displace allocation ai now (DESIGN L10), or nil.
func (s *state) displacedOf(ai int) *qnode {
	if s.displaced == nil {
		return nil
	}
	return s.displaced[ai]
}

func (s *state) clone() *state {
	return &state{
		holder:      append([]int32(nil), s.holder...),
		freeFor:     append([]int32(nil), s.freeFor...),
		stopped:     append([]bool(nil), s.stopped...),
		nodeFree:    append([]int(nil), s.nodeFree...),
		nodeFreeing: append([]int(nil), s.nodeFreeing...),
		heldBy:      cloneOrNil(s.heldBy),
		nodeHeld:    cloneOrNil(s.nodeHeld),
		debt:        cloneOrNil(s.debt),
		displaced:   cloneOrNil(s.displaced),
		claimedBy:   cloneOrNil(s.claimedBy),
		evicted:     cloneOrNil(s.evicted),
		ledger:      s.ledger.clone(),
		actions:     append([]Action(nil), s.actions...),
	}
}

// gpuInfo is the static part of a GPU, without pointers so that the
// garbage collector need not scan tens of thousands of them.
type gpuInfo struct {
	node    int32 // index into planner.nodes
	pos     int32 // index into that node's GPUs
	healthy bool
}

func cloneOrNil[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append([]T(nil), s...)
}
