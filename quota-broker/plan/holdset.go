package plan

import (
	"cmp"
	"slices"
	"time"
)

// The one place holds are merged and compared (DESIGN L10, L5 pre-warm):
// the broker's store records, its dry-run memory and the simulator all
// keep the holds of a plan's hold actions with these.

// Compare orders owners by reservation ID (a group owner has none, so the
// groups come first), then by group key.
func (o HoldOwner) Compare(p HoldOwner) int {
	return cmp.Or(cmp.Compare(o.Reservation, p.Reservation), o.Group.Compare(p.Group))
}

// Compare orders holds by owner, then node: the order of a snapshot's
// holds.
func (h Hold) Compare(o Hold) int {
	return cmp.Or(h.For.Compare(o.For), cmp.Compare(h.Node, o.Node))
}

// Equal reports whether two holds keep the same GPUs (in the same order)
// of the same node for the same owner until the same instant.
func (h Hold) Equal(o Hold) bool {
	return h.For == o.For && h.Node == o.Node && h.Until.Equal(o.Until) && slices.Equal(h.GPUIDs, o.GPUIDs)
}

// HoldOfAction returns the hold of a plan's hold action: owner the
// reservation, else the claimant (For), its GPU IDs sorted; ok false for
// another action or one without an owner, a node or GPUs.
func HoldOfAction(act Action) (h Hold, ok bool) {
	if act.Action != ActionHold {
		return Hold{}, false
	}
	owner := HoldOwner{Reservation: act.Reservation}
	if owner.Reservation == "" {
		owner.Group = act.For
	}
	if owner.IsZero() || act.Node == "" || len(act.GPUIDs) == 0 {
		return Hold{}, false
	}
	ids := slices.Clone(act.GPUIDs)
	slices.Sort(ids)
	return Hold{For: owner, Node: act.Node, GPUIDs: slices.Compact(ids), Until: act.Until}, true
}

// MergeHold adds h to hs, holds of any owners: on a node already held for
// h's owner its GPUs are added (sorted, once) and the later Until kept;
// otherwise h is added. hs's own entries are not changed in place (they
// may be shared with a reader); the result is sorted by Compare.
func MergeHold(hs []Hold, h Hold) []Hold {
	out := slices.Clone(hs)
	for i := range out {
		if out[i].For != h.For || out[i].Node != h.Node {
			continue
		}
		ids := append(slices.Clone(out[i].GPUIDs), h.GPUIDs...)
		slices.Sort(ids)
		out[i].GPUIDs = slices.Compact(ids)
		if h.Until.After(out[i].Until) {
			out[i].Until = h.Until
		}
		return out
	}
	h.GPUIDs = slices.Clone(h.GPUIDs)
	slices.Sort(h.GPUIDs)
	out = append(out, h)
	slices.SortFunc(out, Hold.Compare)
	return out
}

// HoldEnds returns when each hold ends given the reservations res: a
// claimant's hold (pre-warm) at its Until; a reservation's hold at End
// (the later of its Until and the reservation's end: from Until the core
// lends the held GPUs to idle jobs until the end, DESIGN L10); the hold of
// a reservation not in res (cancelled, or moved to history) has ended (the
// zero time).
func HoldEnds(res []Reservation) func(Hold) time.Time {
	byID := make(map[string]*Reservation, len(res))
	for i := range res {
		byID[res[i].ID] = &res[i]
	}
	return func(h Hold) time.Time {
		if h.For.Reservation == "" {
			return h.Until
		}
		r, ok := byID[h.For.Reservation]
		if !ok {
			return time.Time{}
		}
		return h.End(r)
	}
}
