package plan

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func pReservation(id string) pendOpt { return func(p *Pending) { p.Reservation = id } }

// booking adds a reservation of gpus GPUs for ns in quota q over [start, end).
func (b *snapBuilder) booking(id, ns, q string, gpus int, start, end time.Time) *snapBuilder {
	b.s.Reservations = append(b.s.Reservations, Reservation{ID: id, Namespace: ns, Quota: q, GPUs: gpus,
		AllocGPUs: min(gpus, 8), Start: start, End: end})
	return b
}

// displacedCluster is 8 nodes x 8 GPUs: workspace-b runs 6 whole-node
// jobs started 6h..1h ago (its nominal 48), workspace-c 2; reservation r-b
// books 16 GPUs of Quota1.1 over [t0 - 1m, t0 + 1h).
func displacedCluster() *snapBuilder {
	b := newSnap(referenceTree()).nodes(8, 8, h100)
	for i := 1; i <= 6; i++ {
		b.alloc(fmt.Sprintf("b%d", i), "workspace-b", fmt.Sprintf("t%d", i), nodeID(i), 8, started(time.Duration(7-i)*time.Hour))
	}
	b.alloc("c7", "workspace-c", "c7", nodeID(7), 8).alloc("c8", "workspace-c", "c8", nodeID(8), 8)
	return b.booking("r-b", "workspace-b", "Quota1.1", 16, t0.Add(-time.Minute), t0.Add(time.Hour))
}

// TestL10DisplacedAndStart: the 16 booked GPUs displace workspace-b's two
// youngest jobs (Usage booked 16, displaced 16); a job of the reservation
// is entitled by its booking alone and stops exactly them (rule L10.start).
func TestL10DisplacedAndStart(t *testing.T) {
	p := mustPlan(t, displacedCluster().build())
	u := usageOf(t, p, "Quota1.1")
	if u.Booked != 16 || u.Displaced != 16 {
		t.Fatalf("Quota1.1 usage = %+v, want booked 16 and displaced 16", u)
	}
	s := displacedCluster().pending("workspace-b", "res", 2, 8, pType(JobBatch), pReservation("r-b")).build()
	p = mustPlan(t, s)
	want := []brief{
		{Action: ActionStop, Alloc: "b6", Job: "t6", GPUs: 8, Rule: RuleStart},
		{Action: ActionStop, Alloc: "b5", Job: "t5", GPUs: 8, Rule: RuleStart},
		{Action: ActionAdmit, Job: "res", Count: 2, GPUs: 8, Rule: RuleReservation},
	}
	if d := cmp.Diff(want, briefs(p)); d != "" {
		t.Fatalf("actions (-want +got):\n%s", d)
	}
	if u := usageOf(t, p, "Quota1.1"); u.Displaced != 0 || u.NonIdle != 48 {
		t.Errorf("Quota1.1 after = %+v, want displaced 0, nonidle 48", u)
	}
}

// TestL10ReservationJobLimitedByItsBooking: a job of the reservation asking
// more than the booking has left waits with the numbers.
func TestL10ReservationJobLimitedByItsBooking(t *testing.T) {
	s := displacedCluster().pending("workspace-b", "res", 3, 8, pType(JobBatch), pReservation("r-b")).build()
	p := mustPlan(t, s)
	w := actionsOf(p, ActionWait)
	if len(w) != 1 || w[0].Rule != RuleReservation || w[0].Reason != "reservation r-b: 0 of 16 GPUs in use; 8 more needed for 24 asked" {
		t.Fatalf("waits = %+v", w)
	}
}

// TestL10ReservationJobWaitsForTheStart: before the start a job naming the
// reservation waits (rule L10), and the plan wakes at the start.
func TestL10ReservationJobWaitsForTheStart(t *testing.T) {
	start := t0.Add(2 * time.Hour)
	s := newSnap(referenceTree()).nodes(2, 8, h100).
		booking("r-b", "workspace-b", "Quota1.1", 16, start, start.Add(time.Hour)).
		pending("workspace-b", "res", 1, 8, pReservation("r-b")).build()
	p := mustPlan(t, s)
	w := actionsOf(p, ActionWait)
	if len(w) != 1 || w[0].Rule != RuleReservation || w[0].Reason != "reservation r-b starts at 2026-12-01T10:00:00Z" {
		t.Fatalf("waits = %+v", w)
	}
	if !p.WakeAt.Equal(start) {
		t.Errorf("wake_at = %s, want the start %s", p.WakeAt, start)
	}
}

// TestL10OtherJobsSeeTheNominalLessBooked: with 16 of Quota1.1's 48 booked
// from t0 + 30m, a non-flex job of workspace-b counts booked(N) over
// drain_horizon (1h) and a flex request over its max_run: the flex
// request whose max_run crosses the start waits, one that ends before it
// is admitted.
func TestL10OtherJobsSeeTheNominalLessBooked(t *testing.T) {
	start := t0.Add(3 * time.Hour)
	base := func() *snapBuilder {
		b := newSnap(referenceTree()).nodes(8, 8, h100)
		for i := 1; i <= 5; i++ {
			b.alloc(fmt.Sprintf("b%d", i), "workspace-b", fmt.Sprintf("t%d", i), nodeID(i), 8)
		}
		return b.booking("r-b", "workspace-b", "Quota1.1", 16, start, start.Add(4*time.Hour))
	}
	// Non-flex: the booking starts beyond drain_horizon, so 40 + 8 fit 48.
	p := mustPlan(t, base().pending("workspace-b", "plain", 1, 8).build())
	if a := actionsOf(p, ActionAdmit); len(a) != 1 {
		t.Fatalf("non-flex: actions %+v, want admitted", p.Actions)
	}
	// Flex with max_run 4h crosses the start: 40 + 8 > 48 - 16.
	p = mustPlan(t, base().pending("workspace-b", "long", 1, 8, pFlex(24*time.Hour, 4*time.Hour)).build())
	w := actionsOf(p, ActionWait)
	if len(w) != 1 || w[0].Reason != "Quota1.1: 40 of 32 (48 less 16 booked) GPUs in use; 8 more needed" {
		t.Fatalf("flex crossing the start: actions %+v", p.Actions)
	}
	// Flex with max_run 2h ends before the start.
	p = mustPlan(t, base().pending("workspace-b", "short", 1, 8, pFlex(24*time.Hour, 2*time.Hour)).build())
	if a := actionsOf(p, ActionAdmit); len(a) != 1 {
		t.Fatalf("flex ending before the start: actions %+v, want admitted", p.Actions)
	}
	// Within drain_horizon of the start, the non-flex job waits too.
	s := base().pending("workspace-b", "plain", 1, 8).build()
	s.Time = start.Add(-30 * time.Minute)
	for i := range s.Allocations {
		s.Allocations[i].StartedAt = s.Time.Add(-time.Hour)
	}
	p = mustPlan(t, s)
	if w := actionsOf(p, ActionWait); len(w) != 1 {
		t.Fatalf("non-flex within drain_horizon: actions %+v, want a wait", p.Actions)
	}
}
