package plan

import "sync"

// buffers are the planner's large working arrays. Compute takes them from
// a sync.Pool and gives them back, so that planning a cluster of thousands
// of nodes again and again allocates, and makes the garbage collector work,
// little. Nothing in a returned Plan refers to them.
type buffers struct {
	holder, freeFor, gpuPool, nodeGPUs, nodeOf []int32
	nodeFree, nodeFreeing, order, perNode      []int
	nodeHeldGPUs                               []int
	reservedAllocs                             []reservedAlloc
	allocPool, sizes, unitPool                 []int
	stopped, eager, ok                         []bool
	gpus                                       []gpuInfo
	nodeStore                                  []cnode
	nodes                                      []*cnode
	allocStore                                 []alloc
	unitStore                                  []unit
	keys                                       []victimKey
	victims                                    victimCache
	// timedAllocs is planner.timedAllocs; liveSlot, liveJobOf, liveSizes,
	// liveJobs and livePool are liveJobs' (timed.go).
	timedAllocs, liveJobOf, liveSizes, livePool []int
	liveSlot                                    map[JobKey]int
	liveSlotLen, startedLen                     int
	liveJobs                                    []liveJob
	// started and res are calendar.started and calendar.res, emptied for
	// each plan.
	started map[string]int
	res     []startedRes
	soon    []*Reservation
	// feasible backs the feasible-node lists of one plan (feasibleNodes).
	feasible []int
	// nodeByID is planner.nodeByID, emptied for each plan; nodeByIDLen is
	// how many nodes it indexed last.
	nodeByID    map[string]int
	nodeByIDLen int
	// unitOf is allocIndexer.jobs (numberUnit), emptied for each plan and
	// sized for its allocations: 20,000 allocations of 10,000 jobs no
	// longer grow a map from empty each plan (issue 18).
	unitOf    map[JobKey]int
	unitOfLen int
	// proj* back the snapshot's projection onto a flavor (DESIGN L13,
	// projectAll), reused across plans like the rest.
	projNodes  []*Node
	projAllocs []*Allocation
	// layNodes and layAllocs back the projections' layout (projectAll).
	layNodes, layAllocs []int8
}

// nodeIndex returns the empty map of node IDs for a plan of n nodes.
func (b *buffers) nodeIndex(n int) map[string]int {
	return emptied(&b.nodeByID, &b.nodeByIDLen, n)
}

// emptied empties *m for about n entries and returns it: the previous
// plan's map, cleared, unless it held many more (*last entries; clearing a
// map costs its capacity) or is nil, when a new one replaces it.
func emptied[K comparable, V any](m *map[K]V, last *int, n int) map[K]V {
	if *m == nil || *last > 4*n+64 {
		*m = make(map[K]V, n)
	} else {
		clear(*m)
	}
	*last = n
	return *m
}

var bufferPool = sync.Pool{New: func() any { return new(buffers) }}

// sized returns s with length n and every element zero, reusing its array
// when it is large enough.
func sized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// grown returns s with length n, reusing its array when it is large enough,
// without clearing it: only for arrays that the caller writes in full
// before reading (or appends to from length 0), where clearing tens of
// thousands of elements per plan is wasted.
func grown[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
