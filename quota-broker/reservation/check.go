package reservation

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// Tree is the quota tree as the booking check needs it: each node's
// nominal GPUs per flavor (DESIGN L13), parent and depth, the tree's
// flavors and the namespace -> node binding. Build it once per tree with
// NewTree; it is read-only afterwards and safe for concurrent use.
type Tree struct {
	names    []string
	flavors  []string // quota.FlavorNames: the declared ones, else "gpu"
	declared bool     // the tree has flavor blocks
	nominal  [][]int  // [flavor index][node index]
	parent   []int32  // -1 for the root
	depth    []int32  // 0 for the root
	index    map[string]int32
	ns       map[string]string
}

// NewTree indexes the quota tree rooted at root. It does not check law L1
// (quota.Validate does); it only refuses a nil root and duplicate names,
// which would make a booking's node ambiguous.
func NewTree(root *quota.Node) (*Tree, error) {
	if root == nil {
		return nil, fmt.Errorf("reservation: the quota tree has no root")
	}
	t := &Tree{index: map[string]int32{}, ns: map[string]string{},
		flavors: quota.FlavorNames(root), declared: len(root.Flavors) > 0}
	t.nominal = make([][]int, len(t.flavors))
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
		for f, name := range t.flavors {
			t.nominal[f] = append(t.nominal[f], n.GPUs.Of(name))
		}
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

// Flavors returns the names of the tree's flavors in order: the declared
// ones, or the implicit "gpu" alone.
func (t *Tree) Flavors() []string { return slices.Clone(t.flavors) }

// flavorOf checks the flavor and model of a new booking (DESIGN L13) and
// returns the flavor to store: a declared flavor's name; "" in a tree
// without flavor blocks (where "gpu", its implicit flavor, is taken as
// ""). A tree of several flavors needs one named; a flavor and a model
// together, or a model in a tree with flavors, are refused. Errors are
// ErrInvalid naming the field, its value and the tree's flavors.
func (t *Tree) flavorOf(flavor, model string) (string, error) {
	choices := strings.Join(t.flavors, ", ")
	switch {
	case flavor != "" && model != "":
		return "", invalid("flavor", flavor, "given with model %q: a booking gives flavor or model, not both", model)
	case flavor != "" && !slices.Contains(t.flavors, flavor):
		return "", invalid("flavor", flavor, "is not a flavor of the tree (%s)", choices)
	case !t.declared:
		return "", nil
	case model != "":
		return "", invalid("model", model, "the tree declares flavors (%s): a booking names a flavor, not a model", choices)
	case flavor != "":
		return flavor, nil
	case len(t.flavors) == 1:
		return t.flavors[0], nil
	}
	return "", invalid("flavor", "", "is missing: the tree has %d flavors (%s), name one", len(t.flavors), choices)
}

// flavorIndex returns the index in t.flavors of a stored booking's
// flavor: its Flavor, or, for a booking without one (made in a tree
// without flavor blocks, or before flavors existed), the tree's only
// flavor. A booking that the tree cannot place in one flavor (a flavor
// the tree no longer declares, none in a tree of several, a model in a
// tree with flavors) is an ErrInvalid naming the booking, its flavor and
// the tree's flavors: the tree changed since it was booked.
func (t *Tree) flavorIndex(b *Booking) (int, error) {
	choices := strings.Join(t.flavors, ", ")
	switch {
	case b.Flavor == "" && len(t.flavors) > 1:
		return 0, invalid("flavor", "", "of booking %q: it names no flavor and the tree has %d (%s); cancel the booking first", b.ID, len(t.flavors), choices)
	case b.Model != "" && t.declared:
		return 0, invalid("model", b.Model, "of booking %q: the tree declares flavors (%s) and a booking names a flavor, not a model; cancel the booking first", b.ID, choices)
	case b.Flavor == "":
		return 0, nil
	}
	i := slices.Index(t.flavors, b.Flavor)
	if i < 0 {
		return 0, invalid("flavor", b.Flavor, "of booking %q is not a flavor of the tree (%s); cancel the booking first", b.ID, choices)
	}
	return i, nil
}

// FlavorOf returns the name of a stored booking's flavor in the tree
// ("gpu" in a tree without flavor blocks), or an ErrInvalid when the tree
// changed so that it has none (flavorIndex).
func (t *Tree) FlavorOf(b Booking) (string, error) {
	i, err := t.flavorIndex(&b)
	if err != nil {
		return "", err
	}
	return t.flavors[i], nil
}

// errorFlavor is the flavor a refusal names: the flavor's name in a tree
// with flavor blocks, "" without (the message then says "GPUs").
func (t *Tree) errorFlavor(f int) string {
	if !t.declared {
		return ""
	}
	return t.flavors[f]
}

// NodeOf returns the quota node namespace ns is bound to.
func (t *Tree) NodeOf(ns string) (string, bool) {
	n, ok := t.ns[ns]
	return n, ok
}

// Nominal returns the nominal GPUs of flavor of the node called name; a
// flavor "" is the tree's first. False for an unknown node or flavor.
func (t *Tree) Nominal(name, flavor string) (int, bool) {
	i, ok := t.index[name]
	f := 0
	if flavor != "" {
		f = slices.Index(t.flavors, flavor)
	}
	if !ok || f < 0 {
		return 0, false
	}
	return t.nominal[f][i], true
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
// path from b.Node to the root, the GPUs of b's flavor booked in the
// node's subtree plus b.GPUs are at most the node's nominal of that
// flavor (DESIGN L13: bookings of other flavors do not count; an existing
// booking the tree cannot place in a flavor, see FlavorOf, is not
// counted either: CheckTree refuses such a tree).
//
// A refusal is an *Error of kind ErrRefused naming the node, the first
// instant and the numbers (the deepest node over its nominal at that
// instant; Flavor its flavor in a tree with flavor blocks), with Earliest the earliest start after b.Start, no later than
// latest (now + reservation_max_ahead), at which b with its duration fits;
// zero when none does. A booking whose node is not in the tree, or whose
// flavor is not (FlavorOf), is an ErrInvalid. Cost: O(k log k) for the k bookings overlapping the window
// (O(K log K) over the K bookings up to latest + duration on a refusal).
func (t *Tree) Check(existing []Booking, b Booking, latest time.Time) error {
	path, err := t.path(b.Node)
	if err != nil {
		return err
	}
	f, err := t.flavorIndex(&b)
	if err != nil {
		return err
	}
	start, end := b.Start.UnixNano(), b.End.UnixNano()
	bad := t.overloads(path, f, existing, b, start, end, true)
	if len(bad) == 0 {
		return nil
	}
	first := bad[0]
	refusal := &Error{
		Kind:    ErrRefused,
		Flavor:  t.errorFlavor(f),
		Node:    t.names[path[first.level]],
		At:      time.Unix(0, max(first.from, start)).In(b.Start.Location()),
		Booked:  first.booked,
		Nominal: t.nominal[f][path[first.level]],
		Asked:   b.GPUs,
	}
	if s, ok := t.earliest(path, f, existing, b, latest); ok {
		refusal.Earliest = s
		refusal.Reason = "earliest start that fits: " + FormatInstant(s)
	} else {
		refusal.Reason = "no start up to " + FormatInstant(latest.In(b.Start.Location())) + " fits"
	}
	return refusal
}

// Earliest returns the earliest start s >= b.Start, s <= latest, at which b
// moved to [s, s + b.Duration()) fits law L10 among existing, in b's
// flavor only (DESIGN L13); false when none does. The earliest fitting start is b.Start or the end of an
// existing booking (only an end lowers the booked GPUs), so the search is
// one sweep over the bookings up to latest + duration.
func (t *Tree) Earliest(existing []Booking, b Booking, latest time.Time) (time.Time, bool, error) {
	path, err := t.path(b.Node)
	if err != nil {
		return time.Time{}, false, err
	}
	f, err := t.flavorIndex(&b)
	if err != nil {
		return time.Time{}, false, err
	}
	s, ok := t.earliest(path, f, existing, b, latest)
	return s, ok, nil
}

func (t *Tree) earliest(path []int32, f int, existing []Booking, b Booking, latest time.Time) (time.Time, bool) {
	d := b.End.UnixNano() - b.Start.UnixNano()
	from, last := b.Start.UnixNano(), latest.UnixNano()
	if last < from {
		return time.Time{}, false
	}
	bad := t.overloads(path, f, existing, b, from, last+d, false)
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

// overloads sweeps the bookings of flavor index f that meet [from, to)
// and returns, in time order, the spans of [from, to) in which adding
// b.GPUs to some node on path would exceed its nominal of flavor f. With
// firstOnly it stops at the first span. A booking whose node or flavor is
// not in the tree is not counted.
func (t *Tree) overloads(path []int32, f int, existing []Booking, b Booking, from, to int64, firstOnly bool) []span {
	// flavorIndex(e) == f without its errors' cost: flavor names are
	// unique, and "" is the only flavor of a one-flavor tree.
	want, only := t.flavors[f], len(t.flavors) == 1
	meets := func(e *Booking) bool {
		s, en := e.Start.UnixNano(), e.End.UnixNano()
		if e.ID == b.ID || s >= to || en <= from || en <= s || e.Model != "" && t.declared {
			return false
		}
		return e.Flavor == want || e.Flavor == "" && only
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
		if lv := deepestOver(t.nominal[f], path, load, b.GPUs); lv >= 0 {
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
// exceeds its nominal (nominal: one flavor's, by node index), or -1.
func deepestOver(nominal []int, path []int32, load []int, ask int) int32 {
	for l := len(path) - 1; l >= 0; l-- {
		if load[l]+ask > nominal[path[l]] {
			return int32(l)
		}
	}
	return -1
}

// Fits checks law L10 on a whole set of bookings against the tree (for a
// tree write or a quota move, DESIGN L9: a move never leaves booked
// reservations above a nominal at any instant): at every instant, for every
// node and flavor (DESIGN L13), the GPUs of that flavor booked in its
// subtree are at most its nominal of the flavor. The first violation in
// time (the deepest node at that instant) is an *Error of kind ErrRefused
// with Asked 0 and Flavor set in a tree with flavor blocks; a booking
// whose node is not in the tree, or that the tree cannot place in one of
// its flavors (FlavorOf: the tree changed since it was booked), is an
// ErrInvalid naming it.
func (t *Tree) Fits(bookings []Booking) error {
	type step struct {
		at     int64
		delta  int
		node   int32
		flavor int32
	}
	steps := make([]step, 0, 2*len(bookings))
	for i := range bookings {
		b := &bookings[i]
		n, ok := t.index[b.Node]
		if !ok {
			return invalid("node", b.Node, "of booking %q is not a node of the quota tree", b.ID)
		}
		f, err := t.flavorIndex(b)
		if err != nil {
			return err
		}
		if !b.Start.Before(b.End) {
			continue
		}
		steps = append(steps, step{b.Start.UnixNano(), b.GPUs, n, int32(f)}, step{b.End.UnixNano(), -b.GPUs, n, int32(f)})
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
	// load by flavor*len(names) + node; touched holds that key and the
	// node.
	nn := int32(len(t.names))
	load := make([]int, len(t.flavors)*len(t.names))
	var touched [][2]int32
	for i := 0; i < len(steps); {
		at := steps[i].at
		touched = touched[:0]
		for ; i < len(steps) && steps[i].at == at; i++ {
			base := steps[i].flavor * nn
			for n := steps[i].node; n >= 0; n = t.parent[n] {
				load[base+n] += steps[i].delta
				if steps[i].delta > 0 {
					touched = append(touched, [2]int32{base + n, n})
				}
			}
		}
		worst := [2]int32{-1, -1}
		for _, kn := range touched {
			k, n := kn[0], kn[1]
			if load[k] > t.nominal[k/nn][n] && (worst[0] < 0 || t.depth[n] > t.depth[worst[1]]) {
				worst = kn
			}
		}
		if worst[0] >= 0 {
			f, n := int(worst[0]/nn), worst[1]
			loc := time.UTC
			for j := range bookings {
				if bookings[j].Start.UnixNano() == at {
					loc = bookings[j].Start.Location()
					break
				}
			}
			return &Error{Kind: ErrRefused, Flavor: t.errorFlavor(f), Node: t.names[n], At: time.Unix(0, at).In(loc), Booked: load[worst[0]], Nominal: t.nominal[f][n]}
		}
	}
	return nil
}
