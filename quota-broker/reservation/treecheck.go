package reservation

import (
	"errors"
	"fmt"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// ErrUnbound is wrapped by every *BindingError.
var ErrUnbound = errors.New("a booking's namespace is not bound to its quota node")

// BindingError says that a quota tree leaves a booking that has not ended
// outside its namespace's binding: the booking's node is gone, or the
// namespace is bound elsewhere (BoundTo) or nowhere (BoundTo "").
type BindingError struct {
	ID        string // the booking
	Namespace string
	Node      string // the booking's quota node
	NodeGone  bool   // the tree has no node Node
	BoundTo   string // the node the tree binds Namespace to, "" for none
}

func (e *BindingError) Error() string {
	if e.NodeGone {
		return fmt.Sprintf("namespace %q: its booking %q is in quota %q, which this tree removes; cancel the booking first",
			e.Namespace, e.ID, e.Node)
	}
	bound := "binds it to no quota node"
	if e.BoundTo != "" {
		bound = fmt.Sprintf("binds it to quota %q", e.BoundTo)
	}
	return fmt.Sprintf("namespace %q: its booking %q is in quota %q and this tree %s; a booking's namespace stays bound to its quota node or below it until the booking ends: cancel the booking first",
		e.Namespace, e.ID, e.Node, bound)
}

// Unwrap returns ErrUnbound.
func (e *BindingError) Unwrap() error { return ErrUnbound }

// CheckTree checks a quota tree against the bookings that have not ended
// at now, as the running broker uses them (DESIGN L1, L10): the tree obeys
// L1 (quota.Validate, its *quota.ValidationError returned as it is); each
// booking's node is in the tree and its namespace is bound to that node or
// below it (else a *BindingError; the planner would leave the booking out,
// plan.Snapshot.Check); each booking is of a flavor of the tree (DESIGN
// L13; Tree.FlavorOf: an ErrInvalid naming the booking, its flavor and
// the tree's flavors); and the bookings fit every nominal of their flavor
// at every instant (Tree.Fits: a *Error of kind ErrRefused with the
// numbers).
func CheckTree(root *quota.Node, bookings []Booking, now time.Time) error {
	if err := quota.Validate(root); err != nil {
		return err
	}
	t, err := NewTree(root)
	if err != nil {
		return err
	}
	live := make([]Booking, 0, len(bookings))
	for _, b := range bookings {
		if !b.End.After(now) {
			continue
		}
		live = append(live, b)
		node, ok := t.index[b.Node]
		if !ok {
			return &BindingError{ID: b.ID, Namespace: b.Namespace, Node: b.Node, NodeGone: true}
		}
		bound, ok := t.ns[b.Namespace]
		if !ok || !t.under(t.index[bound], node) {
			return &BindingError{ID: b.ID, Namespace: b.Namespace, Node: b.Node, BoundTo: bound}
		}
	}
	return t.Fits(live)
}

// under reports whether node n is node top or below it.
func (t *Tree) under(n, top int32) bool {
	for ; n >= 0; n = t.parent[n] {
		if n == top {
			return true
		}
	}
	return false
}
