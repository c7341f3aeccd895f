package sim

import (
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/reservation"
)

// The scenario's Calendar bookings and flex requests (DESIGN L10, L11):
//
//	reservation "r-train" {            # the label is the booking's ID
//	  namespace  = "workspace-b"
//	  gpus       = 16
//	  alloc_gpus = 8                   # default: the largest divisor of gpus up to 8
//	  start      = "2026-12-07 09:00"  # local time or RFC 3339
//	  duration   = "4h"
//	  flavor     = "h100"              # a flavor of the tree (DESIGN L13): required
//	                                   # when it declares several flavors
//	  # model, node_pool: the booking's shape (model only without flavors)
//	}
//	job "run" {
//	  namespace   = "workspace-b"
//	  reservation = "r-train"          # runs in the booking's window
//	  ...
//	}
//	job "sweep" {
//	  flex_max_run  = "2h"             # a flex request: all-or-nothing
//	  flex_max_wait = "1h"             # default 168h
//	  ...
//	}

// parseReservation reads a reservation block. A booking is checked as the
// broker checks one made at the scenario's start (reservation.Prepare: ID,
// namespace bound, gpus, alloc_gpus dividing gpus, duration from the tree's
// reservation_min_duration to 90 days; flavor a flavor of the tree,
// required when it declares several (DESIGN L13), and not with a model),
// starting at or after the
// scenario's start and at most reservation_max_ahead after it, and it must
// fit law L10 with the bookings before it in the file (reservation.Tree).
// Every error names the field and its value.
func (s *Scenario) parseReservation(blk *hcl.Block, what string) error {
	b, _, err := open(blk.Body, s.File, what, blk.DefRange,
		[]string{"namespace", "gpus", "alloc_gpus", "start", "duration", "model", "node_pool", "flavor"})
	if err != nil {
		return err
	}
	r := &Booking{ID: blk.Labels[0], Pos: posOf(blk.DefRange)}
	r.Namespace = b.str("namespace", true, "")
	r.GPUs = b.integer("gpus", true, 0, 1, reservation.MaxGPUs)
	r.AllocGPUs = b.integer("alloc_gpus", false, 0, 1, reservation.MaxGPUs)
	r.Start = b.instant("start", true, time.Time{}, s.Zone)
	r.Duration = b.duration("duration", true, 0, 1, reservation.MaxDuration)
	r.Model = b.str("model", false, "")
	r.NodePool = b.str("node_pool", false, "")
	r.Flavor = b.str("flavor", false, "")
	s.Notes = append(s.Notes, b.notes...)
	if b.err != nil {
		return b.err
	}
	fail := func(attr string, format string, args ...any) error {
		rng := blk.DefRange
		if a, ok := b.attrs[attr]; ok {
			rng = a.Range
		}
		b.fail(rng, format, args...)
		return b.err
	}
	maxAhead := s.Settings.ReservationMaxAhead
	if r.Start.Before(s.Start) {
		return fail("start", "start = %q: before the scenario's start %s; a booking is made before the run, for a window in it",
			reservation.FormatInstant(r.Start), reservation.FormatInstant(s.Start))
	}
	if latest := s.Start.Add(maxAhead); r.Start.After(latest) {
		return fail("start", "start = %q: more than reservation_max_ahead (%s) after the scenario's start; the latest start is %s",
			reservation.FormatInstant(r.Start), maxAhead, reservation.FormatInstant(latest))
	}
	tree, err := reservation.NewTree(s.Quota)
	if err != nil {
		return &Error{Pos: s.QuotaPos, Msg: err.Error()}
	}
	lim := reservation.Limits{MaxAhead: maxAhead, MinDuration: s.Settings.ReservationMinDuration}
	// Prepare checks a booking made before its start: "now" is just before
	// it (the start's own bounds are checked above).
	bk, err := reservation.Prepare(tree, reservation.Booking{ID: r.ID, Namespace: r.Namespace, GPUs: r.GPUs, AllocGPUs: r.AllocGPUs,
		Model: r.Model, Flavor: r.Flavor, NodePool: r.NodePool, Start: r.Start, End: r.End()}, r.Start.Add(-time.Nanosecond), lim)
	if err != nil {
		attr := ""
		if e, ok := err.(*reservation.Error); ok {
			attr = e.Field
		}
		if attr == "id" || attr == "" {
			return &Error{Pos: r.Pos, Msg: fmt.Sprintf("%s: %v", what, err)}
		}
		return fail(attr, "%v", err)
	}
	r.Quota, r.AllocGPUs, r.Flavor = bk.Node, bk.AllocGPUs, bk.Flavor
	var before []reservation.Booking
	for _, o := range s.Reservations {
		if o.ID == r.ID {
			return &Error{Pos: r.Pos, Msg: fmt.Sprintf("%s: ID used twice (first at %s)", what, o.Pos)}
		}
		before = append(before, reservation.Booking{ID: o.ID, Namespace: o.Namespace, Node: o.Quota, GPUs: o.GPUs,
			AllocGPUs: o.AllocGPUs, Model: o.Model, Flavor: o.Flavor, Start: o.Start, End: o.End()})
	}
	if err := tree.Check(before, bk, s.Start.Add(maxAhead)); err != nil {
		return fail("gpus", "gpus = %d: refused by law L10: %v", r.GPUs, err)
	}
	s.Reservations = append(s.Reservations, r)
	return nil
}

// flex reads a job's flex_max_wait and flex_max_run (DESIGN L11): either
// makes the job a flex request; flex_max_run is then required (more than
// 0, at most 168h) and flex_max_wait defaults to 168h. An idle job, or one
// that names a reservation, cannot be one.
func (b *block) flex(idle, named bool) *plan.Flex {
	_, hasWait := b.attrs["flex_max_wait"]
	runAttr, hasRun := b.attrs["flex_max_run"]
	if b.err != nil || (!hasWait && !hasRun) {
		return nil
	}
	f := &plan.Flex{
		MaxWait: b.duration("flex_max_wait", false, plan.DefaultFlexWait, time.Nanosecond, plan.MaxFlexWait),
		MaxRun:  b.duration("flex_max_run", false, 0, time.Nanosecond, plan.MaxFlexRun),
	}
	if b.err != nil {
		return nil
	}
	first := "flex_max_run"
	if !hasRun {
		first = "flex_max_wait"
	}
	rng := b.attrs[first].Range
	switch {
	case idle:
		b.fail(rng, "%s: an idle job cannot be a flex request (DESIGN L11); drop idle or the flex settings", first)
	case named:
		b.fail(rng, "%s and reservation: a flex request cannot name a reservation (DESIGN L11); give one of them", first)
	case !hasRun:
		b.fail(rng, "flex_max_wait = %s without flex_max_run: a flex request needs max_run, more than 0 and at most 168h",
			strconv.Quote(f.MaxWait.String()))
	default:
		if err := f.Check(); err != nil {
			b.fail(runAttr.Range, "%v", err)
		}
	}
	if b.err != nil {
		return nil
	}
	return f
}

// checkBookings checks what spans blocks for the Calendar: a job that
// names a reservation names one of the scenario's, of its own namespace
// (DESIGN L10: only the booking's namespace may name it).
func (s *Scenario) checkBookings() error {
	byID := map[string]*Booking{}
	for _, r := range s.Reservations {
		byID[r.ID] = r
	}
	for _, j := range s.Jobs {
		if j.Reservation == "" {
			continue
		}
		r := byID[j.Reservation]
		switch {
		case r == nil:
			return &Error{Pos: j.ReservationPos, Msg: fmt.Sprintf("job %q: reservation = %q: no reservation block of that ID", j.Name, j.Reservation)}
		case r.Namespace != j.Namespace:
			return &Error{Pos: j.ReservationPos, Msg: fmt.Sprintf("job %q: reservation = %q: the booking is for namespace %q, not %q",
				j.Name, j.Reservation, r.Namespace, j.Namespace)}
		}
	}
	return nil
}
