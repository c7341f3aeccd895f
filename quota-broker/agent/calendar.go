package agent

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/reservation"
	"github.com/gputide/gputide/quota-broker/store"
)

// planReservations converts the store's bookings to the core's
// reservations (snapshot reservations[]: id, namespace, quota = the
// booking's quota node, gpus, alloc_gpus, model, flavor, node_pool, start,
// end). A booking's flavor is as stored: forFlavors names the tree's only
// flavor for one stored before flavors.
// Ended bookings are kept until the leader moves them to history
// (endBookings): the core's rule L10.end stops the jobs of a started
// booking whose end - kill_timeout has passed, also when the leader was
// away at that instant, and the Nomad adapter tells a job naming an ended
// booking so (jobmeta.CheckReservation).
func planReservations(bs []reservation.Booking) []plan.Reservation {
	var out []plan.Reservation
	for _, b := range bs {
		out = append(out, plan.Reservation{ID: b.ID, Namespace: b.Namespace, Quota: b.Node, GPUs: b.GPUs,
			AllocGPUs: b.AllocGPUs, Model: b.Model, Flavor: b.Flavor, NodePool: b.NodePool, Start: b.Start.UTC(), End: b.End.UTC()})
	}
	return out
}

// forFlavors returns the reservations as the core takes them in the tree
// rooted at root (DESIGN L13, issue 17 item 4: a reservation names its
// flavor when the tree declares flavors): a booking stored without a
// flavor, before flavors existed, reads as the tree's only declared
// flavor. res itself is returned when nothing changes; otherwise a copy.
// A booking that still has no flavor the tree knows (the tree changed
// since, which tree writes refuse, reservation.CheckTree) is passed as it
// is: the core's snapshot check names it and leaves it out.
func forFlavors(res []plan.Reservation, root *quota.Node) []plan.Reservation {
	if root == nil || len(root.Flavors) != 1 {
		return res
	}
	var out []plan.Reservation
	for i, r := range res {
		if r.Flavor != "" || r.Model != "" {
			continue
		}
		if out == nil {
			out = slices.Clone(res)
		}
		out[i].Flavor = root.Flavors[0].Name
	}
	if out == nil {
		return res
	}
	return out
}

// endBatch is the most bookings endBookings moves in one transaction: a
// delete and a history entry each, besides the lock check and the guard
// (store.MaxOps).
const endBatch = (store.MaxOps - 2) / 2

// endBookings is the leader's end of a booking (DESIGN L10 "End": its jobs
// are stopped at end - kill_timeout, by the core's rule L10.end, "and the
// reservation moves to history"): every booking of the store whose end has
// passed at now and that no live allocation names any more (its jobs are
// gone, or stopped with their allocations terminal) is moved from
// reservations/<id> to history/reservations/<id> with outcome "ended" (or
// "forced" after a forced cancel, which moved End to now) and ended_at its
// end, at most endBatch a cycle, in one guarded transaction
// fenced by the leader lock (store.GuardedFenced; a lost lock writes
// nothing). b is the cycle's build: its jobs say which bookings still have
// live allocations. res are the bookings the cycle read (its view):
// when none of them has ended with no live allocation, the store is not
// read again. It returns the IDs moved.
func (a *Agent) endBookings(ctx context.Context, lock *store.Lock, res []plan.Reservation, b *build.Build, now time.Time) ([]string, error) {
	busy := map[string]bool{}
	for _, v := range b.Jobs {
		if v.Options.Reservation != "" && v.Live > 0 {
			busy[v.Options.Reservation] = true
		}
	}
	due := false
	for _, r := range res {
		due = due || (!now.Before(r.End) && !busy[r.ID])
	}
	if !due {
		return nil, nil
	}
	var moved []string
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	_, err := a.store.GuardedFenced(ctx, lock, func(g *store.Guarded) ([]store.Change, error) {
		var changes []store.Change
		moved, changes = endedChanges(g.Reservations, busy, now)
		if len(changes) == 0 {
			return nil, errNothingEnded
		}
		return changes, nil
	})
	if errors.Is(err, errNothingEnded) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return moved, nil
}

// errNothingEnded ends endBookings' guarded write without writing.
var errNothingEnded = errors.New("no booking to end")

// ended reports whether booking r has ended at now (End is exclusive) and
// no live allocation names it (busy).
func ended(r reservation.Booking, busy map[string]bool, now time.Time) bool {
	return !now.Before(r.End) && !busy[r.ID]
}

// endedChanges returns the bookings of bs that have ended (ended), at
// most endBatch of them in the store's order (by ID), and the store
// changes that move them to history: a delete of reservations/<id> and a
// history entry with ended_at the booking's end and outcome "ended", or
// "forced" for a booking cancelled by force (CancelledAt set, End moved
// to it).
func endedChanges(bs []reservation.Booking, busy map[string]bool, now time.Time) ([]string, []store.Change) {
	var ids []string
	var out []store.Change
	for _, r := range bs {
		if !ended(r, busy, now) || len(ids) == endBatch {
			continue
		}
		outcome := "ended"
		if !r.CancelledAt.IsZero() {
			outcome = "forced" // the API's forced cancel moved End to CancelledAt
		}
		ids = append(ids, r.ID)
		out = append(out, store.DeleteReservation(r.ID),
			store.PutReservationHistory(store.ReservationHistory{Booking: r, EndedAt: r.End, Outcome: outcome}))
	}
	return ids, out
}

// wakeTimer plans again at a plan's WakeAt (DESIGN L12: the next instant
// at which time alone changes the plan), besides the agent's interval.
type wakeTimer struct {
	t  *time.Timer
	at time.Time // when it is armed for; zero: not armed
}

func newWakeTimer() *wakeTimer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &wakeTimer{t: t}
}

// C is the channel the timer fires on.
func (w *wakeTimer) C() <-chan time.Time { return w.t.C }

// fired notes that the timer fired (its channel was read).
func (w *wakeTimer) fired() { w.at = time.Time{} }

// reset arms the timer for wake (from now), or disarms it when wake is
// zero or not after now (a past WakeAt is left to the interval: no tight
// loop when the agent cannot plan).
func (w *wakeTimer) reset(wake, now time.Time) {
	if wake.Equal(w.at) {
		return
	}
	if !w.t.Stop() && !w.at.IsZero() {
		select {
		case <-w.t.C:
		default:
		}
	}
	w.at = time.Time{}
	if wake.IsZero() || !wake.After(now) {
		return
	}
	w.at = wake
	w.t.Reset(wake.Sub(now))
}

// wakeAt is the WakeAt of the agent's last plan, zero if none.
func (a *Agent) wakeAt() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lastPlan == nil {
		return time.Time{}
	}
	return a.lastPlan.WakeAt
}
