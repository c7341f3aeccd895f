package plan

// SnapshotJSON, when set, encodes a snapshot in the snapshot format
// (docs/snapshot-format.md) for the failure reports of the booking
// property suite (property_booking_test.go), so that a shrunk failing case
// can be planned with `gputide plan FILE`. This package cannot import the
// snapshot package (it imports plan); the external test package sets it
// (fuzz_plan_test.go).
var SnapshotJSON func(*Snapshot) ([]byte, error)
