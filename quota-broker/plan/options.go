package plan

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
	// allocations under rule L14.fair (DESIGN L14). Not built yet: a
	// plan with it is IdleOrderL3's, so that the simulator's gputide
	// policy, which asks for it, decides as gputide-fifo does until then.
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

// ComputeWith plans the snapshot as Compute does, under o. Today every
// option plans as Compute: the L14 order (IdleOrderFair) is later work
// (issue 19), and switching it on is this function's business alone.
func ComputeWith(s *Snapshot, o Options) (*Plan, error) {
	_ = o.IdleOrder // IdleOrderFair: not built yet, see IdleOrder
	return Compute(s)
}
