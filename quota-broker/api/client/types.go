package client

// The plain answers the client decodes (the server, quota-broker/api,
// writes them).

import (
	"time"
)

// QueueEntry is one waiting task group in GET /v1/queue. For a namespace
// the caller cannot read (no read-job) only Namespace and GPUs are set.
type QueueEntry struct {
	Namespace     string     `json:"namespace"`
	GPUs          int        `json:"gpus"` // GPUs still to place: count x per allocation
	Job           string     `json:"job,omitempty"`
	Group         string     `json:"group,omitempty"`
	Quota         string     `json:"quota,omitempty"`
	Count         int        `json:"count,omitempty"`
	AllocGPUs     int        `json:"alloc_gpus,omitempty"`
	Action        string     `json:"action,omitempty"` // the last plan's answer: wait, admit, expire
	Rule          string     `json:"rule,omitempty"`
	Reason        string     `json:"reason,omitempty"`
	SubmittedAt   *time.Time `json:"submitted_at,omitempty"`
	WaitedSeconds float64    `json:"waited_seconds,omitempty"`
	FlexMaxWait   string     `json:"flex_max_wait,omitempty"`
	FlexMaxRun    string     `json:"flex_max_run,omitempty"`
	FlexExpiresAt *time.Time `json:"flex_expires_at,omitempty"`
}

// QueueResponse is the body of GET /v1/queue.
type QueueResponse struct {
	State
	Queue []QueueEntry `json:"queue"`
	// Warnings are the last plan's warnings (of the namespace asked for,
	// when one is), as the caller may see them (WarningEntry).
	Warnings []WarningEntry `json:"warnings,omitempty"`
}

// WarningEntry is one warning of the last plan (plan.Warning: a booking or
// a pre-warm that cannot be placed, GPUs held for a scale-up, ...) in
// GET /v1/queue and GET /v1/reservation/<id>. For a namespace the caller
// cannot read (no read-job) only Kind, Namespace and GPUs are set; a
// warning about no namespace (the tree, the snapshot) is shown to admins
// and open reads only.
type WarningEntry struct {
	Kind        string `json:"kind"`
	Namespace   string `json:"namespace,omitempty"`
	GPUs        int    `json:"gpus,omitempty"`
	Reservation string `json:"reservation,omitempty"`
	Job         string `json:"job,omitempty"`
	Group       string `json:"group,omitempty"`
	Message     string `json:"message,omitempty"`
}

// PreemptionEntry is one stop in GET /v1/preemptions; for a namespace the
// caller cannot read only Namespace and GPUs are set. For names the
// claimant ("namespace/job/group"), only by its namespace when the caller
// cannot read that.
type PreemptionEntry struct {
	Namespace string     `json:"namespace"`
	GPUs      int        `json:"gpus"`
	At        *time.Time `json:"at,omitempty"`
	Alloc     string     `json:"alloc,omitempty"`
	Job       string     `json:"job,omitempty"`
	For       string     `json:"for,omitempty"`
	Rule      string     `json:"rule,omitempty"`
}

// PreemptionsResponse is the body of GET /v1/preemptions.
type PreemptionsResponse struct {
	State
	Preemptions []PreemptionEntry `json:"preemptions"`
}

// BookingRequest is the body of POST /v1/reservations (DESIGN L10; the
// flags of `gputide reservation create`). Start is RFC 3339 with its
// offset; Duration a Go duration ("168h"). Flavor names the booking's
// flavor (DESIGN L13): required when the tree has several, "" for its
// only one; a booking gives flavor or model, not both.
type BookingRequest struct {
	ID        string `json:"id,omitempty"`
	Namespace string `json:"namespace"`
	GPUs      int    `json:"gpus"`
	AllocGPUs int    `json:"alloc_gpus,omitempty"`
	Flavor    string `json:"flavor,omitempty"`
	Model     string `json:"model,omitempty"`
	NodePool  string `json:"node_pool,omitempty"`
	Start     string `json:"start"`
	Duration  string `json:"duration"`
}

// ReservationEntry is one booking in the reservation answers; for a
// namespace the caller cannot read only Namespace and GPUs are set.
type ReservationEntry struct {
	Namespace string `json:"namespace"`
	GPUs      int    `json:"gpus"`
	ID        string `json:"id,omitempty"`
	Node      string `json:"node,omitempty"`
	AllocGPUs int    `json:"alloc_gpus,omitempty"`
	// Flavor is the booking's flavor in the stored tree (DESIGN L13;
	// "gpu" in a tree without flavor blocks); "" when the tree changed
	// so that it has none.
	Flavor   string     `json:"flavor,omitempty"`
	Model    string     `json:"model,omitempty"`
	NodePool string     `json:"node_pool,omitempty"`
	Start    *time.Time `json:"start,omitempty"`
	End      *time.Time `json:"end,omitempty"`
	Running  int        `json:"running_allocations,omitempty"`
	// Outcome and EndedAt are set for a booking read from history (GET
	// /v1/reservation/<id> of an ended or cancelled one): "ended",
	// "cancelled" or "forced", and when.
	Outcome string     `json:"outcome,omitempty"`
	EndedAt *time.Time `json:"ended_at,omitempty"`
}

// ReservationsResponse is the body of GET /v1/reservations.
type ReservationsResponse struct {
	State
	Reservations []ReservationEntry `json:"reservations"`
}

// ReservationResponse is the body of GET, POST and DELETE answers on one
// booking.
type ReservationResponse struct {
	State
	Reservation ReservationEntry `json:"reservation"`
	// Warnings are the last plan's warnings about this booking (GET only;
	// e.g. allocations that cannot be placed before its start).
	Warnings []WarningEntry `json:"warnings,omitempty"`
}
