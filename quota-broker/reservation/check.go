package reservation

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// Tree is the quota tree as the booking check needs it: each node's
// nominal GPUs, parent and depth, and the namespace -> node binding. Build
// it once per tree with NewTree; it is read-only afterwards and safe for
// concurrent use.
type Tree struct {
	names   []string
	nominal []int
	parent  []int32 // -1 for the root
	depth   []int32 // 0 for the root
	index   map[string]int32
	ns      map[string]string
}

// NewTree indexes the quota tree rooted at root. It does not check law L1
// (quota.Validate does); it only refuses a nil root and duplicate names,
// which would make a booking's node ambiguous.
func NewTree(root *quota.Node) (*Tree, error) {
	if root == nil {
		return nil, fmt.Errorf("reservation: the quota tree has no root")
	}
	t := &Tree{index: map[string]int32{}, ns: map[string]string{}}
	// Bookings count the tree's first flavor (its only one, or the
	// implicit "gpu"): per-flavor bookings (a booking's shape names a
	// flavor, DESIGN L13) are issue 17 item 4.
	flavor := quota.FlavorNames(root)[0]
	var add func(n *quota.Node, parent, depth int32) error
	add = func(n *quota.Node, parent, depth int32) error {
		if _, dup := t.index[n.Name]; dup {
			return fmt.Errorf("reservation: quota %q: name used twice", n.Name)
		}
		if depth >= quota.MaxDepth {
			return fmt.Errorf("reservation: quota %q: the tree is deeper than %d levels", n.Name, quota.MaxDepth)
		}
		i := int32(len(t.names))
		t.index[n.Name] = i
		t.names = append(t.names, n.Name)
		t.nominal = append(t.nominal, n.GPUs.Of(flavor))
		t.parent = append(t.parent, parent)
		t.depth = append(t.depth, depth)
		for _, ns := range n.Namespaces {
			t.ns[ns] = n.Name
		}
		for _, c := range n.Children {
			if c == nil {
				continue
			}
			if err := add(c, i, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := add(root, -1, 0); err != nil {
		return nil, err
	}
	return t, nil
}

// NodeOf returns the quota node namespace ns is bound to.
func (t *Tree) NodeOf(ns string) (string, bool) {
	n, ok := t.ns[ns]
	return n, ok
}

// Nominal returns the nominal GPUs of the node called name.
func (t *Tree) Nominal(name string) (int, bool) {
	i, ok := t.index[name]
	if !ok {
		return 0, false
	}
	return t.nominal[i], true
}

// event is a step of the booked GPUs: +gpus at a booking's start, -gpus
// at its end, for the path levels 0..levels (see Check).
type event struct {
	at     int64 // Unix nanoseconds
	delta  int32 // GPUs added (start) or removed (end); bookings are <= MaxGPUs
	levels int32 // the deepest path level the booking counts in
}

func byTime(x, y event) int { return cmp.Compare(x.at, y.at) }

// span is an interval [from, to) of Unix nanoseconds in which the new
// booking does not fit, with the first node found over its nominal there.
type span struct {
	from, to int64
	level    int32 // path level of the node
	booked   int   // GPUs already booked in the node's subtree at from
}

// Check decides whether booking b, already prepared (Prepare), fits law L10
// among existing (bookings with b's ID are left out, so a booking can be
// re-checked): at every instant of [b.Start, b.End), for each node on the
// path from b.Node to the root, the GPUs booked in the node's subtree plus
// b.GPUs are at most the node's nominal.
//
// A refusal is an *Error of kind ErrRefused naming the node, the first
// instant and the numbers (the deepest node over its nominal at that
// instant), with Earliest the earliest start after b.Start, no later than
// latest (now + reservation_max_ahead), at which b with its duration fits;
// zero when none does. A booking whose node is not in the tree is an
// ErrInvalid. Cost: O(k log k) for the k bookings overlapping the window
// (O(K log K) over the K bookings up to latest + duration on a refusal).
func (t *Tree) Check(existing []Booking, b Booking, latest time.Time) error {
	path, err := t.path(b.Node)
	if err != nil {
		return err
	}
	start, end := b.Start.UnixNano(), b.End.UnixNano()
	bad := t.overloads(path, existing, b, start, end, true)
	if len(bad) == 0 {
		return nil
	}
	first := bad[0]
	refusal := &Error{
		Kind:    ErrRefused,
		Node:    t.names[path[first.level]],
		At:      time.Unix(0, max(first.from, start)).In(b.Start.Location()),
		Booked:  first.booked,
		Nominal: t.nominal[path[first.level]],
		Asked:   b.GPUs,
	}
	if s, ok := t.earliest(path, existing, b, latest); ok {
		refusal.Earliest = s
		refusal.Reason = "earliest start that fits: " + FormatInstant(s)
	} else {
		refusal.Reason = "no start up to " + FormatInstant(latest.In(b.Start.Location())) + " fits"
	}
	return refusal
}

// Earliest returns the earliest start s >= b.Start, s <= latest, at which b
// moved to [s, s + b.Duration()) fits law L10 among existing; false when
// none does. The earliest fitting start is b.Start or the end of an
// existing booking (only an end lowers the booked GPUs), so the search is
// one sweep over the bookings up to latest + duration.
func (t *Tree) Earliest(existing []Booking, b Booking, latest time.Time) (time.Time, bool, error) {
	path, err := t.path(b.Node)
	if err != nil {
		return time.Time{}, false, err
	}
	s, ok := t.earliest(path, existing, b, latest)
	return s, ok, nil
}

func (t *Tree) earliest(path []int32, existing []Booking, b Booking, latest time.Time) (time.Time, bool) {
	d := b.End.UnixNano() - b.Start.UnixNano()
	from, last := b.Start.UnixNano(), latest.UnixNano()
	if last < from {
		return time.Time{}, false
	}
	bad := t.overloads(path, existing, b, from, last+d, false)
	s := from
	for _, sp := range bad {
		if sp.from >= s+d {
			break
		}
		if sp.to > s {
			s = sp.to
		}
		if s > last {
			return time.Time{}, false
		}
	}
	return time.Unix(0, s).In(b.Start.Location()), true
}

// path returns the tree indexes from the root (level 0) down to node.
func (t *Tree) path(node string) ([]int32, error) {
	i, ok := t.index[node]
	if !ok {
		return nil, invalid("node", node, "is not a node of the quota tree")
	}
	path := make([]int32, t.depth[i]+1)
	for ; i >= 0; i = t.parent[i] {
		path[t.depth[i]] = i
	}
	return path, nil
}

// level returns the deepest level of path that is an ancestor-or-self of
// node x (the level of their lowest common ancestor), or -1 when x is not
// in the tree.
func (t *Tree) level(path []int32, x string) int32 {
	i, ok := t.index[x]
	if !ok {
		return -1
	}
	for t.depth[i] >= int32(len(path)) {
		i = t.parent[i]
	}
	for path[t.depth[i]] != i {
		i = t.parent[i]
	}
	return t.depth[i]
}

// overloads sweeps the bookings that meet [from, to) and returns, in time
// order, the spans of [from, to) in which adding b.GPUs to some node on
// path would exceed its nominal. With firstOnly it stops at the first
// span. A booking whose node is not in the tree is not counted.
func (t *Tree) overloads(path []int32, existing []Booking, b Booking, from, to int64, firstOnly bool) []span {
	meets := func(e *Booking) bool {
		s, en := e.Start.UnixNano(), e.End.UnixNano()
		return e.ID != b.ID && s < to && en > from && en > s
	}
	n := 0
	for i := range existing {
		if meets(&existing[i]) {
			n++
		}
	}
	events := make([]event, 0, 2*n)
	for i := range existing {
		e := &existing[i]
		if !meets(e) {
			continue
		}
		lv := t.level(path, e.Node)
		if lv < 0 {
			continue
		}
		g := int32(min(max(e.GPUs, 0), MaxGPUs))
		events = append(events, event{at: max(e.Start.UnixNano(), from), delta: g, levels: lv}, event{at: e.End.UnixNano(), delta: -g, levels: lv})
	}
	slices.SortFunc(events, byTime)
	load := make([]int, len(path))
	var bad []span
	// Check before the first event too: b alone may exceed a nominal.
	at := from
	for i := 0; ; {
		for ; i < len(events) && events[i].at == at; i++ {
			for l := int32(0); l <= events[i].levels; l++ {
				load[l] += int(events[i].delta)
			}
		}
		next := to
		if i < len(events) && events[i].at < to {
			next = events[i].at
		}
		if lv := deepestOver(t, path, load, b.GPUs); lv >= 0 {
			if n := len(bad); n > 0 && bad[n-1].to == at {
				bad[n-1].to = next
			} else {
				bad = append(bad, span{from: at, to: next, level: lv, booked: load[lv]})
				if firstOnly {
					return bad
				}
			}
		}
		if next >= to {
			return bad
		}
		at = next
	}
}

// deepestOver returns the deepest level of path whose node's load plus ask
// exceeds its nominal, or -1.
func deepestOver(t *Tree, path []int32, load []int, ask int) int32 {
	for l := len(path) - 1; l >= 0; l-- {
		if load[l]+ask > t.nominal[path[l]] {
			return int32(l)
		}
	}
	return -1
}

// Fits checks law L10 on a whole set of bookings against the tree (for a
// tree write or a quota move, DESIGN L9: a move never leaves booked
// reservations above a nominal at any instant): at every instant, for every
// node, the GPUs booked in its subtree are at most its nominal. The first
// violation in time (the deepest node at that instant) is an *Error of kind
// ErrRefused with Asked 0; a booking whose node is not in the tree is an
// ErrInvalid naming it.
func (t *Tree) Fits(bookings []Booking) error {
	type step struct {
		at    int64
		delta int
		node  int32
	}
	steps := make([]step, 0, 2*len(bookings))
	for i := range bookings {
		b := &bookings[i]
		n, ok := t.index[b.Node]
		if !ok {
			return invalid("node", b.Node, "of booking %q is not a node of the quota tree", b.ID)
		}
		if !b.Start.Before(b.End) {
			continue
		}
		steps = append(steps, step{b.Start.UnixNano(), b.GPUs, n}, step{b.End.UnixNano(), -b.GPUs, n})
	}
	slices.SortFunc(steps, func(x, y step) int {
		switch {
		case x.at < y.at:
			return -1
		case x.at > y.at:
			return 1
		}
		return 0
	})
	load := make([]int, len(t.names))
	var touched []int32
	for i := 0; i < len(steps); {
		at := steps[i].at
		touched = touched[:0]
		for ; i < len(steps) && steps[i].at == at; i++ {
			for n := steps[i].node; n >= 0; n = t.parent[n] {
				load[n] += steps[i].delta
				if steps[i].delta > 0 {
					touched = append(touched, n)
				}
			}
		}
		worst := int32(-1)
		for _, n := range touched {
			if load[n] > t.nominal[n] && (worst < 0 || t.depth[n] > t.depth[worst]) {
				worst = n
			}
		}
		if worst >= 0 {
			loc := time.UTC
			for j := range bookings {
				if bookings[j].Start.UnixNano() == at {
					loc = bookings[j].Start.Location()
					break
				}
			}
			return &Error{Kind: ErrRefused, Node: t.names[worst], At: time.Unix(0, at).In(loc), Booked: load[worst], Nominal: t.nominal[worst]}
		}
	}
	return nil
}
