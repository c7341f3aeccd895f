package plan

import (
	"fmt"
	"math/rand/v2"
)

// SnapshotJSON, when set, encodes a snapshot in the snapshot format
// (docs/snapshot-format.md) for the failure reports of the booking
// property suite (property_booking_test.go), so that a shrunk failing case
// can be planned with `gputide plan FILE`. This package cannot import the
// snapshot package (it imports plan); the external test package sets it
// (fuzz_plan_test.go).
var SnapshotJSON func(*Snapshot) ([]byte, error)

// BookingInvariants are the names of the booking suite's invariants
// (TestBookingProperty's subtests that check one plan).
var BookingInvariants = []string{"NoPanic", "Existing", "Cover", "DebtStops", "Deterministic"}

// CheckBookingInvariant plans s and checks the booking suite's invariant
// name on it, for snapshot files (fuzz_plan_test.go). skipped reports
// that the invariant could not be checked: Compute panicked (NoPanic
// reports it).
func CheckBookingInvariant(name string, s *Snapshot) (skipped bool, err error) {
	c, err := newBookingCase(0, s)
	if err != nil {
		return false, err
	}
	if c.panicked != "" {
		if name == "NoPanic" {
			return false, fmt.Errorf("Compute panicked: %s", c.panicked)
		}
		return true, nil
	}
	switch name {
	case "NoPanic":
		return false, nil
	case "Existing":
		if err := checkPlan(s, c.p); err != nil {
			return false, err
		}
		return false, checkCalendarPlan(s, c.p)
	case "Cover":
		_, err := checkCover(s, c.p)
		return false, err
	case "DebtStops":
		_, err := checkDebtStops(s, c.p)
		return false, err
	case "Deterministic":
		return false, checkDeterministic(c, rand.New(rand.NewPCG(1, 5)))
	}
	return false, fmt.Errorf("no invariant %q", name)
}
