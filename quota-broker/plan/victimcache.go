package plan

// victimCache keeps, while the allocations of one claim are placed one at
// a time (DESIGN L6: "a claimant with several allocations is placed one
// allocation at a time"), every feasible node's minimal victim set, so that
// placing the next allocation searches again only the nodes that the
// previous placements changed. Placing an admit of n allocations on a
// cluster of m nodes then costs about m + n node searches instead of n x m.
//
// What one node's set depends on, for one claim and one pass (units younger
// than min_runtime left out or allowed):
//   - the candidates and their keys (planner.candidates): fixed for the
//     claim (the class depends on the claimant's quota node and job, the
//     rest on the allocation and min_runtime), except that a unit this plan
//     stops is no candidate any more (unitStopped), and that a stop which
//     changes another allocation's debt or displaced class (DESIGN L9,
//     planner.rederive) forgets the cache;
//   - the GPUs the claim may take on the node (planner.freeOn) and the GPUs
//     each candidate unit holds there: they change only where GPUs are
//     taken (planner.take) or freed by a stop (planner.stopUnit, on every
//     node of the stopped unit, a batch job's other nodes included) (touch).
//
// The cache belongs to one claim (a group's claim, everything in it made
// from the group) and one state: another claim, or a state
// restored after a flex request or a yield that did not fit (placeWhole),
// starts it again; so does a node whose allocations' GPU counts its
// resolution corrected (a snapshot that Validate refuses). The best set is
// the top of a binary heap ordered by victimSet.better, a strict total
// order (node ID last), so it is the set a scan of every node picks.
//
// A rule added to the search that reads other state of the plan must mark
// the nodes whose sets that state changes (touch), or forget the cache when
// it changes; TestVictimCacheMatchesScan compares the plans with and
// without the cache.
type victimCache struct {
	// g and cid name the claim (not kept itself, so that a claim need not
	// escape to the heap); st is the state the sets were made in.
	g      *Pending
	cid    int32
	st     *state
	passes [2]victimPass // [0]: young units left out; [1]: allowed
	try    victimSet     // scratch set of one node's search
}

// victimPass is the cache of one pass of findVictims.
type victimPass struct {
	built bool
	keys  []victimKey // per unit, as planner.candidates
	ok    []bool      // per unit
	// sets holds, per node index, its set while it is in the heap (units
	// not kept: they are searched again on the node chosen).
	sets []victimSet
	// at is, per node index, 1 + the node's position in heap, or noVictims
	// (feasible, no set) or 0 (not feasible for the claim).
	at     []int32
	heap   []int32 // node indices; heap[0] has the best set
	dirty  []int32 // nodes to search again
	marked []bool  // per node index: in dirty
}

// noVictims marks, in victimPass.at, a feasible node with no victim set.
const noVictims int32 = -1

// forget drops the claim and state, so that pooled buffers keep no plan
// alive.
func (vc *victimCache) forget() {
	vc.g, vc.st = nil, nil
	for i := range vc.passes {
		vc.passes[i].built = false
	}
}

// touch records that node ni's GPUs changed: every pass searches it again
// before its next answer.
func (vc *victimCache) touch(ni int) {
	if vc.g == nil {
		return
	}
	for i := range vc.passes {
		v := &vc.passes[i]
		if v.built && v.at[ni] != 0 && !v.marked[ni] {
			v.marked[ni] = true
			v.dirty = append(v.dirty, int32(ni))
		}
	}
}

// unitStopped records that unit u was stopped: it is no candidate any more.
func (vc *victimCache) unitStopped(u int) {
	if vc.g == nil {
		return
	}
	for i := range vc.passes {
		if v := &vc.passes[i]; v.built {
			v.ok[u] = false
		}
	}
}

// findVictims runs DESIGN L6 for one allocation of claim c: for each node
// where it can run, take that node's candidates in key order until it fits,
// then drop, from the last added backwards, each one not needed; choose the
// best node. Units younger than min_runtime are allowed only when no node
// has a set without them. It returns nil when nothing makes room, else the
// set and the candidates' keys. The nodes' sets are kept between the
// allocations of c (victimCache); findVictimsScan searches every node each
// time and gives the same answer.
func (p *planner) findVictims(c *claim) (*victimSet, []victimKey) {
	if p.scanVictims {
		return p.findVictimsScan(c)
	}
	vc := p.vc
	if vc.g != c.g || vc.cid != c.cid || vc.st != p.st {
		vc.forget()
		vc.g, vc.cid, vc.st = c.g, c.cid, p.st
	}
	for i, allowYoung := range []bool{false, true} {
		if allowYoung && p.settings.MinRuntime <= 0 {
			break
		}
		v := &vc.passes[i]
		if v.built {
			p.refreshVictims(v, c)
		} else {
			p.buildVictims(v, c, allowYoung)
		}
		if len(v.heap) > 0 {
			best := &victimSet{}
			p.victimEvals++
			p.victimsOn(p.nodes[v.heap[0]], c, v.keys, v.ok, best)
			return best, v.keys
		}
	}
	return nil, nil
}

// buildVictims fills pass v for claim c: the candidates, then every
// feasible node's set, in a heap.
func (p *planner) buildVictims(v *victimPass, c *claim, allowYoung bool) {
	for _, ni := range v.dirty {
		v.marked[ni] = false
	}
	v.dirty = v.dirty[:0]
	// planner.candidates fills the buffers it finds in p.buf: give it this
	// pass's own, so that the two passes keep theirs.
	p.buf.keys, p.buf.ok = v.keys, v.ok
	v.keys, v.ok = p.candidates(c, allowYoung)
	n := len(p.nodes)
	v.at = sized(v.at, n)
	v.marked = sized(v.marked, n)
	if cap(v.sets) < n {
		v.sets = make([]victimSet, n)
	}
	v.sets = v.sets[:n]
	v.heap = v.heap[:0]
	for _, ni := range c.nodes {
		v.at[ni] = noVictims
		if p.searchNode(v, c, ni) {
			v.heap = append(v.heap, int32(ni))
			v.at[ni] = int32(len(v.heap))
		}
	}
	for i := len(v.heap)/2 - 1; i >= 0; i-- {
		p.heapDown(v, i)
	}
	v.built = true
}

// refreshVictims searches again the nodes touched since pass v's last
// answer and moves them in the heap.
func (p *planner) refreshVictims(v *victimPass, c *claim) {
	for _, n := range v.dirty {
		ni := int(n)
		v.marked[ni] = false
		has, pos := p.searchNode(v, c, ni), int(v.at[ni])-1
		switch {
		case has && pos >= 0:
			if !p.heapDown(v, pos) {
				p.heapUp(v, pos)
			}
		case has:
			v.heap = append(v.heap, n)
			v.at[ni] = int32(len(v.heap))
			p.heapUp(v, len(v.heap)-1)
		case pos >= 0:
			p.heapRemove(v, pos)
		}
	}
	v.dirty = v.dirty[:0]
}

// searchNode searches node ni's set for claim c into v.sets[ni] (units not
// kept) and reports whether it has one.
func (p *planner) searchNode(v *victimPass, c *claim, ni int) bool {
	p.victimEvals++
	try := &p.vc.try
	if !p.victimsOn(p.nodes[ni], c, v.keys, v.ok, try) {
		return false
	}
	v.sets[ni] = *try
	v.sets[ni].units = nil
	return true
}

func (p *planner) heapLess(v *victimPass, i, j int) bool {
	return v.sets[v.heap[i]].better(&v.sets[v.heap[j]])
}

func (p *planner) heapSwap(v *victimPass, i, j int) {
	v.heap[i], v.heap[j] = v.heap[j], v.heap[i]
	v.at[v.heap[i]], v.at[v.heap[j]] = int32(i+1), int32(j+1)
}

func (p *planner) heapUp(v *victimPass, i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !p.heapLess(v, i, parent) {
			return
		}
		p.heapSwap(v, i, parent)
		i = parent
	}
}

// heapDown moves entry i down to its place and reports whether it moved.
func (p *planner) heapDown(v *victimPass, i int) bool {
	start := i
	for {
		least, l, r := i, 2*i+1, 2*i+2
		if l < len(v.heap) && p.heapLess(v, l, least) {
			least = l
		}
		if r < len(v.heap) && p.heapLess(v, r, least) {
			least = r
		}
		if least == i {
			return i != start
		}
		p.heapSwap(v, i, least)
		i = least
	}
}

// heapRemove takes entry i out of the heap; its node has no set now.
func (p *planner) heapRemove(v *victimPass, i int) {
	last := len(v.heap) - 1
	ni := v.heap[i]
	if i != last {
		p.heapSwap(v, i, last)
	}
	v.heap = v.heap[:last]
	v.at[ni] = noVictims
	if i < last && !p.heapDown(v, i) {
		p.heapUp(v, i)
	}
}
