package plan

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gputide/gputide/quota-broker/quota"
)

// The snapshot's structural rules, checked by Validate and Check. Every
// producer of a Snapshot calls one of them before Compute: the JSON decoder
// (package snapshot) refuses the document on the first fault, the Nomad
// adapter leaves out each item that fails and reports it (DESIGN L12: only
// a fault in the tree or the settings stops the broker acting), and the
// simulator refuses a scenario whose snapshot fails.

// ErrInvalid is wrapped by every *Fault, so that callers can tell a
// snapshot that breaks a rule from other errors with errors.Is.
var ErrInvalid = errors.New("invalid snapshot")

// Item names what a fault is about, and so what is left out of a plan when
// it fails (see Check).
type Item int

// The kinds of item a fault may be about. Faults in the tree, the settings
// or the snapshot's time are fatal: nothing can be planned.
const (
	ItemSnapshot    Item = iota // the snapshot as a whole (its time): fatal
	ItemTree                    // the quota tree (L1): fatal
	ItemSettings                // the settings: fatal
	ItemNode                    // one node, with its GPUs
	ItemAllocation              // one live allocation
	ItemPending                 // one job's pending groups, all of them
	ItemReservation             // one reservation
	ItemHold                    // one hold
	ItemIdleGroup               // one idle group (IdleGroup)
	ItemPrewarm                 // one pre-warm entry (Prewarm)
)

var itemNames = [...]string{"snapshot", "tree", "settings", "node", "allocation", "pending job", "reservation", "hold", "idle group", "pre-warm"}

func (i Item) String() string {
	if i < 0 || int(i) >= len(itemNames) {
		return "item " + strconv.Itoa(int(i))
	}
	return itemNames[i]
}

// Fatal reports whether a fault in i stops all planning.
func (i Item) Fatal() bool { return i <= ItemSettings }

// Fault is one broken rule of a snapshot. Path is where, written with the
// key names of the snapshot format (docs/snapshot-format.md):
// "allocations[3].gpu_ids[1]", "pending[0].flex.max_run", "settings.debt_grace";
// Message says what is wrong and quotes the value. Item, Index (the
// position in its list), ID (node, allocation or reservation ID) and Job
// (an allocation's or a pending group's job) say what is left out when it
// fails. Err is an underlying error (a *quota.ValidationError for a tree
// that breaks L1), or nil.
type Fault struct {
	Path    string
	Message string
	Item    Item
	Index   int
	ID      string
	Job     JobKey
	Err     error
}

func (f *Fault) Error() string {
	if f.Path == "" {
		return f.Message
	}
	return f.Path + ": " + f.Message
}

// Unwrap returns ErrInvalid and the underlying error, if any.
func (f *Fault) Unwrap() []error {
	if f.Err == nil {
		return []error{ErrInvalid}
	}
	return []error{ErrInvalid, f.Err}
}

// Validate checks every structural rule of the snapshot and returns the
// first broken one as a *Fault, or nil. The rules: a time; the quota tree
// obeys L1 (quota.Validate); settings are not negative; node IDs and GPU
// IDs are non-empty and unique (a GPU ID in the whole cluster);
// allocations have non-empty, unique IDs and names without control
// characters, a job type, a priority in 1-100, a known node, GPUs of that
// node each held once, a claimant with three non-empty parts, and the same
// idle and elastic flags as the other allocations of their job; pending
// groups have names, a type and priority, count and GPUs in 1-quota.MaxGPUs
// and a job asking for at most quota.MaxGPUs, datacenters non-empty and
// listed once, flex settings within L11 and not on an idle job or one
// that names a reservation, and the
// same job-level settings as the other groups of their job; reservations
// have unique IDs, a known quota bound at or above their namespace,
// positive GPUs and an end after their start; idle groups are listed once,
// with names, a priority, GPUs and max in 1-quota.MaxGPUs, a count in
// 0-quota.MaxGPUs and datacenters as pending groups have them; pre-warm
// entries are listed once, with names, a type service or batch, a
// priority, GPUs and count in 1-quota.MaxGPUs, an at, an until after it
// and datacenters as pending groups have them.
//
// And for Calendar and Flex (DESIGN L10, L11): every setting is not
// negative; allocations have a kill_timeout not negative, a max_run within
// L11 and not with a reservation, and at most one stopping owner; pending
// groups a queued time not before the submission; reservations an
// alloc_gpus that divides their GPUs; holds name a known reservation or a
// claimant, a known node, GPUs of that node held once, and an end.
func (s *Snapshot) Validate() error {
	fatal, items := s.Check()
	if fatal != nil {
		return fatal
	}
	if len(items) > 0 {
		return items[0]
	}
	return nil
}

// Check is Validate item by item. fatal is the first fault in the
// snapshot's time, its quota tree or its settings (then items is nil);
// items lists, in snapshot order (nodes, allocations, pending, reservations,
// then idle groups and pre-warm entries), every node, allocation, pending job, reservation, idle group and pre-warm entry that
// breaks a rule, one fault each. Items are checked against the items that
// passed before them: an allocation on a node that failed fails as on an
// unknown node. Without (items) is the snapshot the adapter can plan.
func (s *Snapshot) Check() (fatal *Fault, items []*Fault) { return s.check(nil) }

// check is Check with the node index of nodes (nil: made here).
func (s *Snapshot) check(nodes *NodeCheck) (fatal *Fault, items []*Fault) {
	c := &checker{s: s}
	if fatal := c.fatal(); fatal != nil {
		return fatal, nil
	}
	kept := nodes.use(c)
	nodes.allocations(c, kept)
	c.pending()
	c.reservations()
	c.holds()
	c.idleGroups()
	c.prewarms()
	return nil, c.faults
}

// Without returns a copy of s without the items that faults name: each
// node, allocation and reservation by its index, and every pending group
// of each job. Lists are copied, but for the nodes when none is left out
// (the same slice, so that a NodeCheck kept for s serves the result too);
// the items kept are shared with s (Compute does not change them). Fatal
// faults are ignored.
func (s *Snapshot) Without(faults []*Fault) *Snapshot {
	if len(faults) == 0 {
		return s
	}
	drop := map[Item]map[int]bool{}
	jobs := map[JobKey]bool{}
	for _, f := range faults {
		if f.Item == ItemPending {
			jobs[f.Job] = true
			continue
		}
		if drop[f.Item] == nil {
			drop[f.Item] = map[int]bool{}
		}
		drop[f.Item][f.Index] = true
	}
	out := *s
	if len(drop[ItemNode]) > 0 {
		out.Nodes = keep(s.Nodes, func(i int, _ *Node) bool { return !drop[ItemNode][i] })
	}
	out.Allocations = keep(s.Allocations, func(i int, _ *Allocation) bool { return !drop[ItemAllocation][i] })
	out.Pending = keep(s.Pending, func(_ int, p *Pending) bool { return !jobs[p.JobKey()] })
	out.Reservations = keep(s.Reservations, func(i int, _ *Reservation) bool { return !drop[ItemReservation][i] })
	out.Holds = keep(s.Holds, func(i int, _ *Hold) bool { return !drop[ItemHold][i] })
	out.IdleGroups = keep(s.IdleGroups, func(i int, _ *IdleGroup) bool { return !drop[ItemIdleGroup][i] })
	out.Prewarm = keep(s.Prewarm, func(i int, _ *Prewarm) bool { return !drop[ItemPrewarm][i] })
	return &out
}

func keep[T any](in []T, ok func(int, *T) bool) []T {
	var out []T
	for i := range in {
		if ok(i, &in[i]) {
			out = append(out, in[i])
		}
	}
	return out
}

// Usable returns s without every item that breaks a rule, with the faults
// of those items, or the fatal fault (tree, settings, time) and nil. Items
// are left out until the rest passes: leaving out a node also leaves out
// its allocations. This is what the Nomad adapter plans (DESIGN L12).
func (s *Snapshot) Usable() (*Snapshot, []*Fault, error) { return s.UsableWith(nil) }

// UsableWith is Usable with nodes keeping the check of the snapshot's
// nodes from one call to the next (nil: each call checks them). Only the
// first check, of s itself, uses it: the nodes a later call passes are
// s's, not those left after a node was left out.
func (s *Snapshot) UsableWith(nodes *NodeCheck) (*Snapshot, []*Fault, error) {
	var all []*Fault
	for {
		fatal, items := s.check(nodes)
		nodes = nil
		if fatal != nil {
			return nil, nil, fatal
		}
		if len(items) == 0 {
			return s, all, nil
		}
		all = append(all, items...)
		s = s.Without(items)
	}
}

// checker holds what Check has seen so far.
type checker struct {
	s      *Snapshot
	faults []*Fault
	bound  map[string]string      // namespace -> quota node name
	tree   map[string]*quota.Node // quota node name -> node
	parent map[string]*quota.Node // quota node name -> parent
	nodeAt map[string]int         // node ID -> index, nodes that passed
	gpus   map[string]gpuRef      // GPU ID -> where, GPUs of nodes that passed
	// holder is, per GPU (gpuRef.slot), 1 + the index of the allocation
	// holding it, or 0: a slice, so that booking a GPU does not write the
	// map again. off is, per node, the slot of its first GPU.
	holder []int32
	off    []int32
}

// gpuRef is where a GPU is: 12 bytes, so that the index of a cluster's
// GPUs stays small next to the snapshot itself.
type gpuRef struct {
	ni, gi int32 // nodes[ni].gpus[gi]
	slot   int32 // its entry in checker.holder
}

// itemPath is the path of the i-th item of a list: "allocations[3]".
func itemPath(list string, i int) string { return list + "[" + strconv.Itoa(i) + "]" }

func gpuPath(ni, gi int32) string {
	return "nodes[" + strconv.Itoa(int(ni)) + "].gpus[" + strconv.Itoa(int(gi)) + "].id"
}

// fatal checks the time, the tree (L1) and the settings.
func (c *checker) fatal() *Fault {
	s := c.s
	if s.Time.IsZero() {
		return &Fault{Path: "time", Item: ItemSnapshot, Message: "missing: a snapshot needs the time it was taken"}
	}
	if s.Quota == nil {
		return &Fault{Path: "quota", Item: ItemTree, Message: "missing: a snapshot needs the quota tree"}
	}
	if err := quota.Validate(s.Quota); err != nil {
		var verr *quota.ValidationError
		if errors.As(err, &verr) {
			kind := "quota"
			if verr.Flavor {
				kind = "flavor"
			}
			return &Fault{Path: verr.Pos, Item: ItemTree, Message: fmt.Sprintf("%s %q: %s", kind, verr.Node, verr.Message), Err: err}
		}
		return &Fault{Path: "quota", Item: ItemTree, Message: err.Error(), Err: err}
	}
	st := &s.Settings
	for _, f := range []struct {
		key string
		v   time.Duration
	}{
		{"min_runtime", st.MinRuntime}, {"debt_grace", st.DebtGrace}, {"settle", st.Settle},
		{"drain_margin", st.DrainMargin}, {"drain_horizon", st.DrainHorizon},
		{"reservation_max_ahead", st.ReservationMaxAhead}, {"reservation_min_duration", st.ReservationMinDuration},
		{"autoscaler_evaluation_interval", st.AutoscalerEvaluationInterval},
	} {
		if f.v < 0 {
			return &Fault{Path: "settings." + f.key, Item: ItemSettings, Message: fmt.Sprintf("%q is negative", f.v.String())}
		}
	}
	c.tree = map[string]*quota.Node{}
	c.parent = map[string]*quota.Node{}
	s.Quota.Walk(func(n *quota.Node) {
		c.tree[n.Name] = n
		for _, ch := range n.Children {
			c.parent[ch.Name] = n
		}
	})
	c.bound = quota.Namespaces(s.Quota)
	return nil
}

// fail records a fault of an item.
func (c *checker) fail(f *Fault) { c.faults = append(c.faults, f) }

// NodeCheck keeps the check of a snapshot's nodes (the nodes' faults and
// the index of their IDs and GPUs that the checks of allocations and holds
// read) from one check to the next while the snapshot's Nodes are the same
// slice: the same first element and length (a snapshot is read only, and
// a builder that keeps its nodes from one snapshot to the next passes the
// same slice; build.Memo does). It saves a check at 5,000 nodes indexing
// 40,000 GPU IDs again (issue 18). While the nodes are kept it keeps the
// check of the allocations too, while the snapshot's Allocations are the
// same slice (the allocations check reads the nodes and the allocations
// alone; build.Memo passes the slice it made before only when it was made
// of the same inputs): 20,000 allocations are not booked GPU by GPU again.
// The zero value is ready; it is not safe for concurrent use.
type NodeCheck struct {
	first  *Node // &Nodes[0] of the nodes checked
	n      int   // their number
	nodeAt map[string]int
	gpus   map[string]gpuRef
	off    []int32
	total  int // GPUs of the nodes
	faults []*Fault
	// allocs is the check of the allocations last checked against these
	// nodes: &Allocations[0], their number and their faults.
	allocs struct {
		first  *Allocation
		n      int
		faults []*Fault
	}
}

// use gives c the node index of c's snapshot: the one m kept when the
// snapshot's nodes are the nodes m checked (kept), else a new one (kept in
// m when m is not nil).
func (m *NodeCheck) use(c *checker) (kept bool) {
	nodes := c.s.Nodes
	if m != nil && len(nodes) > 0 && m.first == &nodes[0] && m.n == len(nodes) {
		c.nodeAt, c.gpus, c.off = m.nodeAt, m.gpus, m.off
		c.holder = make([]int32, m.total)
		c.faults = append(c.faults, m.faults...)
		return true
	}
	before := len(c.faults)
	c.nodes()
	if m == nil || len(nodes) == 0 {
		return false
	}
	*m = NodeCheck{first: &nodes[0], n: len(nodes), nodeAt: c.nodeAt, gpus: c.gpus, off: c.off, total: len(c.holder),
		faults: slices.Clone(c.faults[before:])}
	return false
}

// allocations checks c's allocations, or gives c the faults m kept when
// its nodes were kept (nodesKept) and the allocations are the slice m
// checked last; a check made is kept in m when m is not nil.
func (m *NodeCheck) allocations(c *checker, nodesKept bool) {
	allocs := c.s.Allocations
	if m != nil && nodesKept && len(allocs) > 0 && m.allocs.first == &allocs[0] && m.allocs.n == len(allocs) {
		c.faults = append(c.faults, m.allocs.faults...)
		return
	}
	before := len(c.faults)
	c.allocations()
	if m == nil || len(allocs) == 0 {
		return
	}
	m.allocs.first, m.allocs.n, m.allocs.faults = &allocs[0], len(allocs), slices.Clone(c.faults[before:])
}

func (c *checker) nodes() {
	total := 0
	for i := range c.s.Nodes {
		total += len(c.s.Nodes[i].GPUs)
	}
	c.nodeAt = make(map[string]int, len(c.s.Nodes))
	c.gpus = make(map[string]gpuRef, total)
	c.holder = make([]int32, total)
	c.off = make([]int32, len(c.s.Nodes))
	slot := int32(0)
	for i := range c.s.Nodes {
		c.off[i] = slot
		slot += int32(len(c.s.Nodes[i].GPUs))
	}
	for i := range c.s.Nodes {
		if f := c.node(i); f != nil {
			c.fail(f)
		}
	}
}

// node checks nodes[i] and, when it passes, registers it and its GPUs.
func (c *checker) node(i int) *Fault {
	n := &c.s.Nodes[i]
	bad := func(p, format string, args ...any) *Fault {
		return &Fault{Path: p, Item: ItemNode, Index: i, ID: n.ID, Message: fmt.Sprintf(format, args...)}
	}
	if n.ID == "" {
		return bad(itemPath("nodes", i)+".id", "must not be empty")
	}
	if j, dup := c.nodeAt[n.ID]; dup {
		return bad(itemPath("nodes", i)+".id", "node %s is listed twice (also nodes[%d])", Quote(n.ID), j)
	}
	for k, g := range n.GPUs {
		var f *Fault
		if g.ID == "" {
			f = bad(gpuPath(int32(i), int32(k)), "must not be empty")
		} else if prev, dup := c.gpus[g.ID]; dup {
			f = bad(gpuPath(int32(i), int32(k)), "GPU %s is listed twice (also %s)", Quote(g.ID), gpuPath(prev.ni, prev.gi))
		}
		if f != nil {
			for _, x := range n.GPUs[:k] { // the node is left out with its GPUs
				delete(c.gpus, x.ID)
			}
			return f
		}
		c.gpus[g.ID] = gpuRef{ni: int32(i), gi: int32(k), slot: c.off[i] + int32(k)}
	}
	c.nodeAt[n.ID] = i
	return nil
}

func (c *checker) allocations() {
	ids := make(map[string]int, len(c.s.Allocations))
	first := make(map[JobKey]int, len(c.s.Allocations)) // job -> index of its first allocation that passed
	for i := range c.s.Allocations {
		if f := c.allocation(i, ids, first); f != nil {
			c.fail(f)
		}
	}
}

// allocation checks allocations[i] and, when it passes, books its GPUs.
func (c *checker) allocation(i int, ids map[string]int, first map[JobKey]int) *Fault {
	a := &c.s.Allocations[i]
	// bad builds the fault's path, "allocations[i]" and the suffix sfx,
	// only when there is a fault: Validate runs on every snapshot planned.
	bad := func(sfx, format string, args ...any) *Fault {
		return &Fault{Path: itemPath("allocations", i) + sfx, Item: ItemAllocation, Index: i, ID: a.ID, Job: a.JobKey(),
			Message: fmt.Sprintf(format, args...)}
	}
	if a.ID == "" {
		return bad(".id", "must not be empty")
	}
	if p, msg := names("", "namespace", a.Namespace, "job", a.Job, "group", a.Group); msg != "" {
		return bad(p, "%s", msg)
	}
	if j, dup := ids[a.ID]; dup {
		return bad(".id", "allocation %s is listed twice (also allocations[%d])", Quote(a.ID), j)
	}
	if !a.Type.Valid() {
		return bad(".type", "%s is not a job type (service, batch, system or sysbatch)", Quote(string(a.Type)))
	}
	if a.Priority < 1 || a.Priority > 100 {
		return bad(".priority", "%d is outside 1-100", a.Priority)
	}
	if a.Node == "" {
		return bad(".node", "must not be empty")
	}
	ni, ok := c.nodeAt[a.Node]
	if !ok {
		return bad(".node", "unknown node %s", Quote(a.Node))
	}
	if f := c.book(i, ni, bad); f != nil {
		return f
	}
	if a.StoppingForReservation != "" && !a.StoppingFor.IsZero() {
		c.unbook(i, a.GPUIDs)
		return bad(".stopping_for", "names both reservation %s and claimant %s; give one",
			Quote(a.StoppingForReservation), Quote(a.StoppingFor.String()))
	}
	if k := a.StoppingFor; !k.IsZero() {
		if p, msg := names(".stopping_for", "namespace", k.Namespace, "job", k.Job, "group", k.Group); msg != "" {
			c.unbook(i, a.GPUIDs)
			return bad(p, "%s", msg)
		}
	}
	if f := allocationTimes(a, bad); f != nil {
		c.unbook(i, a.GPUIDs)
		return f
	}
	// idle and elastic are job meta (gputide_idle, gputide_elastic): every
	// allocation of a job has the same. The planner preempts a batch job
	// as one unit and relies on it.
	key := a.JobKey()
	if j, ok := first[key]; ok {
		f := &c.s.Allocations[j]
		if a.Idle != f.Idle || a.Elastic != f.Elastic {
			c.unbook(i, a.GPUIDs)
			field, got, want := "idle", a.Idle, f.Idle
			if a.Idle == f.Idle {
				field, got, want = "elastic", a.Elastic, f.Elastic
			}
			return bad("."+field, "%v differs from %v in allocations[%d], an allocation of the same job %s",
				got, want, j, Quote(a.JobKey().String()))
		}
	} else {
		first[key] = i
	}
	ids[a.ID] = i
	return nil
}

// allocationTimes checks an allocation's kill_timeout and flex fields
// (DESIGN L8, L11): kill_timeout not negative, max_run within L11 when
// given (0 = not flex), and a flex allocation does not name a reservation.
func allocationTimes(a *Allocation, bad func(sfx, format string, args ...any) *Fault) *Fault {
	switch {
	case a.KillTimeout < 0:
		return bad(".kill_timeout", "%s is negative", Quote(a.KillTimeout.String()))
	case a.MaxRun < 0:
		return bad(".max_run", "%s must be more than 0", Quote(a.MaxRun.String()))
	case a.MaxRun > MaxFlexRun:
		return bad(".max_run", "%s is above the maximum of 168h", Quote(a.MaxRun.String()))
	case a.MaxRun > 0 && a.Reservation != "":
		return bad(".max_run", "a flex request (max_run %s) cannot name reservation %s (DESIGN L11)",
			Quote(a.MaxRun.String()), Quote(a.Reservation))
	}
	return nil
}

// book marks the GPUs of allocations[i], on nodes[ni] (a node that
// passed), as held by it, checking that each is on its node and held once;
// on a fault it unbooks them again. bad takes the path after
// "allocations[i]".
func (c *checker) book(i, ni int, bad func(sfx, format string, args ...any) *Fault) *Fault {
	a := &c.s.Allocations[i]
	for k, id := range a.GPUIDs {
		ref, ok := c.onNode(ni, id)
		var f *Fault
		switch {
		case !ok && ref.slot < 0:
			f = bad(itemPath(".gpu_ids", k), "GPU %s is not on node %s (no node has it)", Quote(id), Quote(a.Node))
		case !ok:
			f = bad(itemPath(".gpu_ids", k), "GPU %s is not on node %s (it is on node %s)", Quote(id), Quote(a.Node), Quote(c.s.Nodes[ref.ni].ID))
		case c.holder[ref.slot] == int32(i+1):
			f = bad(itemPath(".gpu_ids", k), "GPU %s is listed twice in this allocation", Quote(id))
		case c.holder[ref.slot] != 0:
			f = bad(itemPath(".gpu_ids", k), "GPU %s is used twice (also by allocations[%d])", Quote(id), c.holder[ref.slot]-1)
		}
		if f != nil {
			c.unbook(i, a.GPUIDs[:k])
			return f
		}
		c.holder[ref.slot] = int32(i + 1)
	}
	return nil
}

// onNode finds GPU id on nodes[ni], a node that passed: its ref and true.
// Else it returns where the GPU is, with false (slot -1: on no node that
// passed). A node with few GPUs is scanned, which costs less than the map:
// a GPU a passed node lists is in c.gpus with that node (node), so both
// find the same.
func (c *checker) onNode(ni int, id string) (gpuRef, bool) {
	if gpus := c.s.Nodes[ni].GPUs; len(gpus) <= 16 {
		for gi := range gpus {
			if gpus[gi].ID == id {
				return gpuRef{ni: int32(ni), gi: int32(gi), slot: c.off[ni] + int32(gi)}, true
			}
		}
	}
	ref, ok := c.gpus[id]
	if !ok {
		return gpuRef{slot: -1}, false
	}
	return ref, int(ref.ni) == ni
}

// unbook releases the GPUs ids that allocations[i] booked.
func (c *checker) unbook(i int, ids []string) {
	for _, id := range ids {
		if ref, ok := c.gpus[id]; ok && c.holder[ref.slot] == int32(i+1) {
			c.holder[ref.slot] = 0
		}
	}
}

// pendingJob is what the groups of one job seen so far have in common.
type pendingJob struct {
	first int   // index of its first group
	asked int64 // GPUs asked by its groups so far
	more  []int // indexes of its other groups that passed
}

func (c *checker) pending() {
	jobs := make(map[JobKey]pendingJob, len(c.s.Pending))
	var failed map[JobKey]bool // made at the first fault
	for i := range c.s.Pending {
		g := &c.s.Pending[i]
		if failed[g.JobKey()] {
			continue // the job is left out already, with its first fault
		}
		if f := c.group(i, jobs); f != nil {
			if failed == nil {
				failed = map[JobKey]bool{}
			}
			failed[g.JobKey()] = true
			c.fail(f)
		}
	}
}

// group checks pending[i] against the groups of its job before it. jobs
// holds the jobs whose groups so far all passed: a group listed twice is
// found among them, since a job is left out at its first fault.
func (c *checker) group(i int, jobs map[JobKey]pendingJob) *Fault {
	g := &c.s.Pending[i]
	// bad builds the path, "pending[i]" and the suffix sfx, only on a fault.
	bad := func(sfx, format string, args ...any) *Fault {
		return &Fault{Path: itemPath("pending", i) + sfx, Item: ItemPending, Index: i, Job: g.JobKey(), Message: fmt.Sprintf(format, args...)}
	}
	if p, msg := names("", "namespace", g.Namespace, "job", g.Job, "group", g.Group); msg != "" {
		return bad(p, "%s", msg)
	}
	key := g.JobKey()
	j, seen := jobs[key]
	if seen {
		for n := -1; n < len(j.more); n++ {
			k := j.first
			if n >= 0 {
				k = j.more[n]
			}
			if c.s.Pending[k].Group == g.Group {
				return bad("", "group %s is listed twice (also pending[%d])", Quote(g.Key().String()), k)
			}
		}
	}
	if !g.Type.Valid() {
		return bad(".type", "%s is not a job type (service, batch, system or sysbatch)", Quote(string(g.Type)))
	}
	if g.Priority < 1 || g.Priority > 100 {
		return bad(".priority", "%d is outside 1-100", g.Priority)
	}
	if msg := positive(g.Count); msg != "" {
		return bad(".count", "%s", msg)
	}
	if msg := positive(g.GPUs); msg != "" {
		return bad(".gpus", "%s", msg)
	}
	// Both are at most MaxGPUs, so the product fits in an int64; the
	// planner adds up the GPUs a job asks for, which must not overflow.
	if n := int64(g.Count) * int64(g.GPUs); n > quota.MaxGPUs {
		return bad("", "count %d x gpus %d asks for %d GPUs, more than %d", g.Count, g.GPUs, n, quota.MaxGPUs)
	}
	for k, f := range g.Flavors {
		if !slices.Contains(quota.FlavorNames(c.s.Quota), f) {
			return bad(".flavors["+strconv.Itoa(k)+"]", "%s is not a flavor of the tree (%s)", Quote(f), strings.Join(quota.FlavorNames(c.s.Quota), ", "))
		}
		if slices.Index(g.Flavors, f) < k {
			return bad(".flavors["+strconv.Itoa(k)+"]", "flavor %s is listed twice", Quote(f))
		}
	}
	if p, msg := datacenters("", g.Datacenters); msg != "" {
		return bad(p, "%s", msg)
	}
	if !g.QueuedAt.IsZero() && g.QueuedAt.Before(g.SubmittedAt) {
		return bad(".queued_at", "%s is before submitted_at %s", Quote(g.QueuedAt.Format(time.RFC3339Nano)),
			Quote(g.SubmittedAt.Format(time.RFC3339Nano)))
	}
	if g.Flex != nil {
		if g.Idle {
			return bad(".flex", "an idle job (idle: true) cannot be a flex request")
		}
		if g.Reservation != "" {
			return bad(".reservation", "%s: a flex request cannot name a reservation (L11)", Quote(g.Reservation))
		}
		if err := g.Flex.Check(); err != nil {
			var fe *FlexError
			errors.As(err, &fe)
			f := bad(".flex."+fe.Key, "%s", fe.Message(Quote(fe.Value.String())))
			f.Err = fe
			return f
		}
	}
	if !seen {
		jobs[key] = pendingJob{first: i, asked: int64(g.Count) * int64(g.GPUs)}
		return nil
	}
	if j.asked += int64(g.Count) * int64(g.GPUs); j.asked > quota.MaxGPUs {
		return bad("", "the groups of job %s ask for %d GPUs in all, more than %d", Quote(g.JobKey().String()), j.asked, quota.MaxGPUs)
	}
	if f := c.sameJob(g, j.first, bad); f != nil {
		return f
	}
	j.more = append(j.more, i)
	jobs[key] = j
	return nil
}

// sameJob checks that a pending group agrees with the first group of its
// job on what Nomad sets per job: type, priority, idle, elastic,
// reservation, submission time and flex settings.
func (c *checker) sameJob(g *Pending, at int, bad func(sfx, format string, args ...any) *Fault) *Fault {
	first := &c.s.Pending[at]
	differ := func(field string, got, want any) *Fault {
		return bad("."+field, "%v differs from %v in pending[%d], a group of the same job %s", got, want, at, Quote(g.JobKey().String()))
	}
	switch {
	case g.Type != first.Type:
		return differ("type", Quote(string(g.Type)), Quote(string(first.Type)))
	case g.Priority != first.Priority:
		return differ("priority", g.Priority, first.Priority)
	case g.Idle != first.Idle:
		return differ("idle", g.Idle, first.Idle)
	case g.Elastic != first.Elastic:
		return differ("elastic", g.Elastic, first.Elastic)
	case g.Reservation != first.Reservation:
		return differ("reservation", Quote(g.Reservation), Quote(first.Reservation))
	case !g.Queued().Equal(first.Queued()):
		return differ("queued_at", Quote(g.Queued().Format(time.RFC3339Nano)), Quote(first.Queued().Format(time.RFC3339Nano)))
	case !g.SubmittedAt.Equal(first.SubmittedAt):
		return differ("submitted_at", Quote(g.SubmittedAt.Format(time.RFC3339Nano)), Quote(first.SubmittedAt.Format(time.RFC3339Nano)))
	case g.Flex.String() != first.Flex.String():
		return differ("flex", g.Flex.String(), first.Flex.String())
	}
	return nil
}

func (c *checker) reservations() {
	ids := map[string]int{}
	for i := range c.s.Reservations {
		if f := c.reservation(i, ids); f != nil {
			c.fail(f)
		}
	}
}

func (c *checker) reservation(i int, ids map[string]int) *Fault {
	r := &c.s.Reservations[i]
	path := "reservations[" + strconv.Itoa(i) + "]"
	bad := func(p, format string, args ...any) *Fault {
		return &Fault{Path: p, Item: ItemReservation, Index: i, ID: r.ID, Message: fmt.Sprintf(format, args...)}
	}
	if p, msg := names(path, "id", r.ID, "namespace", r.Namespace, "quota", r.Quota); msg != "" {
		return bad(p, "%s", msg)
	}
	if j, dup := ids[r.ID]; dup {
		return bad(path+".id", "reservation %s is listed twice (also reservations[%d])", Quote(r.ID), j)
	}
	ids[r.ID] = i
	q, ok := c.tree[r.Quota]
	if !ok {
		return bad(path+".quota", "unknown quota %s", Quote(r.Quota))
	}
	if !c.within(c.bound[r.Namespace], q) {
		owner := "no quota"
		if b, ok := c.bound[r.Namespace]; ok {
			owner = "quota " + Quote(b)
		}
		return bad(path+".namespace", "namespace %s is bound to %s, not to quota %s or below it", Quote(r.Namespace), owner, Quote(r.Quota))
	}
	if msg := positive(r.GPUs); msg != "" {
		return bad(path+".gpus", "%s", msg)
	}
	if !r.End.After(r.Start) {
		return bad(path+".end", "%s is not after start %s", Quote(r.End.Format(time.RFC3339)), Quote(r.Start.Format(time.RFC3339)))
	}
	if r.AllocGPUs < 0 || (r.AllocGPUs > 0 && r.GPUs%r.AllocGPUs != 0) {
		return bad(path+".alloc_gpus", "%d does not divide gpus %d", r.AllocGPUs, r.GPUs)
	}
	// DESIGN L13: a booking is of one flavor, named when the tree declares
	// flavors; it gives flavor or model, not both.
	flavors := quota.FlavorNames(c.s.Quota)
	switch {
	case r.Flavor != "" && !slices.Contains(flavors, r.Flavor):
		return bad(path+".flavor", "%s is not a flavor of the tree (%s)", Quote(r.Flavor), strings.Join(flavors, ", "))
	case r.Flavor == "" && len(c.s.Quota.Flavors) > 0:
		return bad(path+".flavor", "is missing: the tree declares flavors (%s), and a booking names one", strings.Join(flavors, ", "))
	case r.Flavor != "" && r.Model != "":
		return bad(path+".model", "%s with flavor %s: a booking gives flavor or model, not both", Quote(r.Model), Quote(r.Flavor))
	}
	return nil
}

func (c *checker) holds() {
	res := map[string]bool{}
	for _, r := range c.s.Reservations {
		res[r.ID] = true
	}
	held := map[string]int{}
	for i := range c.s.Holds {
		if f := c.hold(i, res, held); f != nil {
			c.fail(f)
		}
	}
}

// hold checks holds[i]: an owner (a known reservation, or a claimant with
// three names), a known node, GPUs of that node each held once, an end.
func (c *checker) hold(i int, res map[string]bool, held map[string]int) *Fault {
	h := &c.s.Holds[i]
	path := "holds[" + strconv.Itoa(i) + "]"
	bad := func(p, format string, args ...any) *Fault {
		return &Fault{Path: p, Item: ItemHold, Index: i, ID: h.For.String(), Message: fmt.Sprintf(format, args...)}
	}
	switch o := h.For; {
	case o.Reservation != "" && !o.Group.IsZero():
		return bad(path+".for", "names both reservation %s and claimant %s; give one", Quote(o.Reservation), Quote(o.Group.String()))
	case o.Reservation != "":
		if !res[o.Reservation] {
			return bad(path+".for.reservation", "unknown reservation %s", Quote(o.Reservation))
		}
	default:
		if p, msg := names(path+".for", "namespace", o.Group.Namespace, "job", o.Group.Job, "group", o.Group.Group); msg != "" {
			return bad(p, "%s", msg)
		}
	}
	if _, ok := c.nodeAt[h.Node]; !ok {
		return bad(path+".node", "unknown node %s", Quote(h.Node))
	}
	if h.Until.IsZero() {
		return bad(path+".until", "missing: a hold needs its end")
	}
	for k, id := range h.GPUIDs {
		gpath := path + ".gpu_ids[" + strconv.Itoa(k) + "]"
		ref, ok := c.gpus[id]
		switch {
		case !ok || c.s.Nodes[ref.ni].ID != h.Node:
			return bad(gpath, "GPU %s is not on node %s", Quote(id), Quote(h.Node))
		case held[id] > 0:
			return bad(gpath, "GPU %s is held twice (also by holds[%d])", Quote(id), held[id]-1)
		}
	}
	for _, id := range h.GPUIDs {
		held[id] = i + 1
	}
	return nil
}

// within reports whether the quota node called name is q or below it.
func (c *checker) within(name string, q *quota.Node) bool {
	for n := c.tree[name]; n != nil; n = c.parent[n.Name] {
		if n == q {
			return true
		}
	}
	return false
}

// datacenters checks a pending group's datacenters: each non-empty and
// listed once. It returns the path of the first bad entry and what is
// wrong, or "", "".
func datacenters(path string, dcs []string) (string, string) {
	seen := make(map[string]int, len(dcs))
	for k, dc := range dcs {
		dpath := path + ".datacenters[" + strconv.Itoa(k) + "]"
		if dc == "" {
			return dpath, "must not be empty"
		}
		if j, dup := seen[dc]; dup {
			return dpath, fmt.Sprintf("datacenter %s is listed twice (also datacenters[%d])", Quote(dc), j)
		}
		seen[dc] = k
	}
	return "", ""
}

// names checks (key, value) pairs of names: each must be non-empty and
// hold no control character (a NUL or an escape in a namespace, job or
// group name would reach logs, terminals and Nomad's API). It returns the
// path of the first bad one and what is wrong, or "", "".
func names(path string, kv ...string) (string, string) {
	for i := 0; i+1 < len(kv); i += 2 {
		v := kv[i+1]
		if v == "" {
			return path + "." + kv[i], "must not be empty"
		}
		if !hasControl(v) {
			continue
		}
		for _, r := range v {
			if unicode.IsControl(r) {
				return path + "." + kv[i], fmt.Sprintf("%s holds the control character %U; a name may not", Quote(v), r)
			}
		}
	}
	return "", ""
}

// hasControl reports whether v may hold a control character: an ASCII
// control byte, or any byte of a multi-byte character (then names decodes
// it). Names are ASCII in practice, so names rarely decodes.
func hasControl(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; b < 0x20 || b >= 0x7f {
			return true
		}
	}
	return false
}

// positive checks a count of allocations or GPUs: 1-quota.MaxGPUs.
func positive(v int) string {
	if v < 1 {
		return fmt.Sprintf("must be at least 1, not %d", v)
	}
	if v > quota.MaxGPUs {
		return fmt.Sprintf("must be at most %d, not %d", quota.MaxGPUs, v)
	}
	return ""
}

// Quote quotes s for a message, cut to 64 bytes (not inside a UTF-8
// character), so that a hostile name cannot put control characters or
// megabytes into an error.
func Quote(s string) string {
	if len(s) <= 64 {
		return strconv.Quote(s)
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}
