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
	allocs                                     []*alloc
	unitStore                                  []unit
	units                                      []*unit
	keys                                       []victimKey
	victims                                    victimCache
	// feasible backs the feasible-node lists of one plan (feasibleNodes).
	feasible []int
	// nodeByID is planner.nodeByID, emptied for each plan; nodeByIDLen is
	// how many nodes it indexed last.
	nodeByID    map[string]int
	nodeByIDLen int
}

// nodeIndex returns the empty map of node IDs for a plan of n nodes: the
// previous plan's, cleared, unless it was made for many more nodes (a
// cleared map costs its capacity to clear again).
func (b *buffers) nodeIndex(n int) map[string]int {
	if b.nodeByID == nil || b.nodeByIDLen > 4*n+64 {
		b.nodeByID = make(map[string]int, n)
	} else {
		clear(b.nodeByID)
	}
	b.nodeByIDLen = n
	return b.nodeByID
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
