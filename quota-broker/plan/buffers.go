package plan

import "sync"

// buffers are the planner's large working arrays. Compute takes them from
// a sync.Pool and gives them back, so that planning a cluster of thousands
// of nodes again and again allocates, and makes the garbage collector work,
// little. Nothing in a returned Plan refers to them.
type buffers struct {
	holder, freeFor, gpuPool, nodeGPUs, nodeOf []int32
	nodeFree, nodeFreeing, order, perNode      []int
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
