// Package store is the broker's durable state (DESIGN §6): the quota tree
// and its settings, the guard counter, reservations, the broker's per-job
// times, intents, holds, history and the leader lock (L12), in Consul KV
// under one prefix, or in memory with the same behaviour.
//
// One implementation (*KV) runs over two backends, Consul (NewConsul) and
// memory (NewMemory), and one test suite runs on both. Writes that must not
// race (a booking, a cancel, a tree write, a quota move) go through
// Guarded: one transaction that checks and increments the guard after the
// caller has validated the laws (L1, L10) on the state read at that guard
// index. The store itself knows no law.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/reservation"
)

// Limits of one transaction (DESIGN §6, Consul's own limits).
const (
	// MaxOps is the most operations in one transaction.
	MaxOps = 64
	// MaxValueSize is the largest value, in bytes (Consul refuses 512 KB).
	MaxValueSize = 512*1024 - 1
	// Retries is how often a guarded write re-reads and retries after a
	// conflict before it returns ErrConflict.
	Retries = 3
	// DefaultHistoryRetention is history_retention (90 days).
	DefaultHistoryRetention = 2160 * time.Hour
	// DefaultHistoryMax is the most entries kept in each history folder.
	DefaultHistoryMax = 100000
	// DefaultPrefix is the default key prefix.
	DefaultPrefix = "gputide/"
)

// The sentinels callers branch on; every error of the package is an *Error
// that unwraps to one of them (or to the caller's own validation error).
var (
	// ErrConflict: a guarded write lost its race Retries+1 times (HTTP 409).
	ErrConflict = errors.New("conflict: the guarded state changed while writing, retries exhausted")
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable: the backend cannot be reached or failed; nothing was
	// written unless the error says the outcome is unknown (L12: stop acting).
	ErrUnavailable = errors.New("store unavailable")
	// ErrInvalid: refused before anything was sent (too many operations,
	// a value too large, a record that does not encode, a bad consul
	// block), or a stored value that does not decode.
	ErrInvalid = errors.New("invalid")
	// ErrNotLeader: a write fenced by the leader lock found the lock lost.
	ErrNotLeader = errors.New("not the leader")
)

// Error is the package's one error shape: the operation, the key (relative
// to the prefix, "" for several) and the cause. Unwrap gives Kind (a
// sentinel) and Err (the underlying error), so errors.Is works on both.
type Error struct {
	Op   string // "get", "put", "guarded", "txn", "lock", ...
	Key  Key
	Kind error // ErrConflict, ErrNotFound, ErrUnavailable, ErrInvalid, ErrNotLeader
	Err  error // the cause, may be nil
}

func (e *Error) Error() string {
	s := "store: " + e.Op
	if e.Key != "" {
		s += " " + string(e.Key)
	}
	s += ": " + e.Kind.Error()
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Kind and Err.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

func newErr(op string, key Key, kind, cause error) *Error {
	return &Error{Op: op, Key: key, Kind: kind, Err: cause}
}

// ConsulConfig is the broker.hcl block
//
//	consul {
//	  address = "http://127.0.0.1:8500"  # default: CONSUL_HTTP_ADDR, else 127.0.0.1:8500
//	  token   = ""                       # default: CONSUL_HTTP_TOKEN; never logged
//	  prefix  = "gputide/"               # every key lives under it; ends with "/"
//	}
type ConsulConfig struct {
	Address string `hcl:"address,optional"`
	Token   string `hcl:"token,optional"`
	Prefix  string `hcl:"prefix,optional"`
}

// TreeRecord is the value of KeyTree: the quota tree, the tree-wide
// settings (every setting that changes a plan or validates a write, so
// leader and standbys agree, DESIGN §6) and the time of the last change.
type TreeRecord struct {
	Root      *quota.Node    `json:"root"`
	Settings  quota.Settings `json:"settings"`
	ChangedAt time.Time      `json:"changed_at"`
}

// JobRecord is the value of JobKey: the broker's times of one governed job
// (DESIGN L11, L12), written by the leader before it acts.
type JobRecord struct {
	FirstSeen  time.Time `json:"first_seen"`
	QueuedAt   time.Time `json:"queued_at"`
	AdmittedAt time.Time `json:"admitted_at,omitzero"`
	// JobModifyIndex is the last JobModifyIndex the broker wrote to Nomad
	// for the job, so it can tell its own writes from the user's.
	JobModifyIndex uint64 `json:"job_modify_index,omitempty"`
}

// Intent is the value of IntentKey: what the leader is about to do to an
// allocation, written before the call so that a successor repeats nothing
// (L12).
type Intent struct {
	Alloc     string `json:"alloc"`
	Action    string `json:"action"` // "stop", ...
	Namespace string `json:"namespace"`
	Job       string `json:"job"`
	// For is the claimant, {"namespace", "job", "group"} in JSON: a key,
	// never a joined string (job IDs and group names may contain "/").
	For plan.GroupKey `json:"for,omitzero"`
	// Reservation is the booking a stop of rule L10.drain or L10.start is
	// made for (For is then zero).
	Reservation string    `json:"reservation,omitempty"`
	Rule        string    `json:"rule,omitempty"` // the law, e.g. "L5.1"
	At          time.Time `json:"at"`
}

// Hold is the value of HoldKey: the GPUs kept free for one owner (DESIGN
// L10: a reservation about to start; L5: a pre-warmed task group), one
// entry per node, each until its own instant. Written by the leader
// (fenced) when a plan emits hold actions, read back into the snapshot's
// holds each cycle, deleted once every entry has ended. In JSON:
//
//	{"for": {"reservation": "r-1"} or {"namespace": "ns", "job": "j", "group": "g"},
//	 "nodes": [{"node": "<node ID>", "gpu_ids": ["GPU-..."], "until": "<RFC 3339>"}]}
type Hold struct {
	For   plan.HoldOwner
	Nodes []HeldGPUs
}

// HeldGPUs are the GPUs of one node held for a hold's owner until Until
// (exclusive).
type HeldGPUs struct {
	Node   string    `json:"node"`    // Nomad node ID
	GPUIDs []string  `json:"gpu_ids"` // device instance IDs
	Until  time.Time `json:"until"`
}

// holdJSON is Hold's JSON shape: the owner as {"reservation"} or
// {"namespace", "job", "group"}, never a joined string.
type holdJSON struct {
	For   holdOwnerJSON `json:"for"`
	Nodes []HeldGPUs    `json:"nodes"`
}

type holdOwnerJSON struct {
	Reservation string `json:"reservation,omitempty"`
	*plan.GroupKey
}

// MarshalJSON writes h in its JSON shape.
func (h Hold) MarshalJSON() ([]byte, error) {
	o := holdOwnerJSON{Reservation: h.For.Reservation}
	if !h.For.Group.IsZero() {
		g := h.For.Group
		o.GroupKey = &g
	}
	return json.Marshal(holdJSON{For: o, Nodes: h.Nodes})
}

// UnmarshalJSON reads h from its JSON shape; an owner naming both a
// reservation and a group is an error.
func (h *Hold) UnmarshalJSON(data []byte) error {
	var v holdJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	owner := plan.HoldOwner{Reservation: v.For.Reservation}
	if v.For.GroupKey != nil {
		owner.Group = *v.For.GroupKey
	}
	if owner.Reservation != "" && !owner.Group.IsZero() {
		return fmt.Errorf("hold for reservation %q and group %s: an owner is one or the other", owner.Reservation, owner.Group)
	}
	*h = Hold{For: owner, Nodes: v.Nodes}
	return nil
}

// PlanHolds returns h as the core's holds (snapshot holds), one per node,
// in h's order.
func (h Hold) PlanHolds() []plan.Hold {
	out := make([]plan.Hold, 0, len(h.Nodes))
	for _, n := range h.Nodes {
		out = append(out, plan.Hold{For: h.For, Node: n.Node, GPUIDs: slices.Clone(n.GPUIDs), Until: n.Until})
	}
	return out
}

// HoldOf is the store's record of holds, the holds of one owner (each For
// is owner; one per node).
func HoldOf(owner plan.HoldOwner, holds []plan.Hold) Hold {
	h := Hold{For: owner, Nodes: make([]HeldGPUs, 0, len(holds))}
	for _, ph := range holds {
		h.Nodes = append(h.Nodes, HeldGPUs{Node: ph.Node, GPUIDs: slices.Clone(ph.GPUIDs), Until: ph.Until})
	}
	return h
}

// ReservationHistory is the value of HistoryReservationKey: a booking that
// ended, was cancelled or was forced off.
type ReservationHistory struct {
	Booking reservation.Booking `json:"booking"`
	EndedAt time.Time           `json:"ended_at"`
	Outcome string              `json:"outcome"` // "ended", "cancelled", "forced"
}

// Preemption is the value of HistoryPreemptionKey: one stop the broker made.
type Preemption struct {
	At        time.Time `json:"at"`
	Alloc     string    `json:"alloc"`
	Namespace string    `json:"namespace"`
	Job       string    `json:"job"`
	GPUs      int       `json:"gpus"`
	For       string    `json:"for,omitempty"` // the claimant, "namespace/job/group", for reading only
	// Reservation is the booking a stop of rule L10.drain or L10.start was
	// made for (For is then empty).
	Reservation string `json:"reservation,omitempty"`
	Rule        string `json:"rule"`
	Node        string `json:"node,omitempty"`   // Nomad node ID
	Reason      string `json:"reason,omitempty"` // the plan's reason
}

// Guarded is the state every guarded write validates against, read in one
// consistent read: the guard (ModifyIndex and counter), the tree and all
// reservations (sorted by ID).
type Guarded struct {
	// Index is the guard key's modify index the state was read at (0: no
	// guarded write yet); the write succeeds only if it is unchanged.
	Index uint64
	// Counter is the guard's value: the number of guarded writes so far.
	Counter uint64
	// Tree is nil while no tree was written.
	Tree         *TreeRecord
	Reservations []reservation.Booking
}

// Reservation returns the reservation with id, or false.
func (g *Guarded) Reservation(id string) (reservation.Booking, bool) {
	for _, r := range g.Reservations {
		if r.ID == id {
			return r, true
		}
	}
	return reservation.Booking{}, false
}

// Change is one write of a guarded transaction; build it with PutTree,
// PutReservation, DeleteReservation or PutReservationHistory.
type Change struct {
	key    Key
	del    bool
	value  any
	booked *reservation.Booking // for applying to a Guarded
	tree   *TreeRecord
}

// PutTree writes the tree record.
func PutTree(rec TreeRecord) Change { return Change{key: KeyTree, value: rec, tree: &rec} }

// PutReservation writes a reservation (a new booking or a changed one).
func PutReservation(b reservation.Booking) Change {
	return Change{key: ReservationKey(b.ID), value: b, booked: &b}
}

// DeleteReservation removes a reservation (cancel, end).
func DeleteReservation(id string) Change {
	return Change{key: ReservationKey(id), del: true, booked: &reservation.Booking{ID: id}}
}

// PutReservationHistory records an ended or cancelled booking.
func PutReservationHistory(h ReservationHistory) Change {
	return Change{key: HistoryReservationKey(h.Booking.ID), value: h}
}

// ValidateFunc validates a guarded write on the state read at one guard
// index and returns the changes to write (at most MaxOps-1). Its error is
// returned unchanged and nothing is written. It may run several times (once
// per attempt) and must not have side effects.
type ValidateFunc func(state *Guarded) ([]Change, error)

// Store is the broker's state. *KV implements it over Consul or memory.
type Store interface {
	// ReadGuarded reads the guarded state consistently.
	ReadGuarded(ctx context.Context) (*Guarded, error)
	// Guarded runs one guarded write: read, validate, write with the guard
	// checked and incremented; on conflict it retries Retries times, then
	// ErrConflict. It returns the state as written.
	Guarded(ctx context.Context, validate ValidateFunc) (*Guarded, error)
	// GuardedFenced is Guarded fenced by the leader lock (L12): the
	// leader's own guarded writes, such as moving ended bookings to
	// history. A lost lock writes nothing: ErrNotLeader.
	GuardedFenced(ctx context.Context, lock *Lock, validate ValidateFunc) (*Guarded, error)
	// WatchGuarded calls fn with the guarded state each time it changes
	// (blocking queries), and with an error when the store is unavailable
	// (then retries with back-off), until ctx ends.
	WatchGuarded(ctx context.Context, fn func(state *Guarded, err error)) error

	Job(ctx context.Context, id JobID) (JobRecord, error)
	Jobs(ctx context.Context) (map[JobID]JobRecord, error)
	PutJob(ctx context.Context, lock *Lock, id JobID, rec JobRecord) error
	DeleteJob(ctx context.Context, lock *Lock, id JobID) error

	Intents(ctx context.Context) ([]Intent, error)
	PutIntent(ctx context.Context, lock *Lock, in Intent) error
	DeleteIntent(ctx context.Context, lock *Lock, alloc string) error

	Holds(ctx context.Context) ([]Hold, error)
	PutHold(ctx context.Context, lock *Lock, h Hold) error
	DeleteHold(ctx context.Context, lock *Lock, owner plan.HoldOwner) error

	// ReadRecords reads jobs/, intents/, holds/ and the leader's name in
	// one consistent read: what the leader loads when it takes the lock.
	ReadRecords(ctx context.Context) (*Records, error)
	// WriteRecords writes job records, intents and holds in as few fenced
	// transactions as MaxOps allows (the leader's record step, L12).
	WriteRecords(ctx context.Context, lock *Lock, writes []RecordWrite) error
	// WatchRecords calls fn with the records each time a WriteRecords
	// transaction or the leader changes them (blocking queries), until ctx
	// ends: how a standby keeps its memory current.
	WatchRecords(ctx context.Context, fn func(*Records, error)) error

	ReservationHistory(ctx context.Context) ([]ReservationHistory, error)
	// ReservationHistoryOf reads one booking's history entry (ErrNotFound
	// when it has none): `reservation show ID` of an ended or cancelled one.
	ReservationHistoryOf(ctx context.Context, id string) (ReservationHistory, error)
	Preemptions(ctx context.Context) ([]Preemption, error)
	AddPreemption(ctx context.Context, lock *Lock, p Preemption) error
	PruneHistory(ctx context.Context, lock *Lock, now time.Time, retention time.Duration, maxEntries int) (int, error)

	// SeedTree writes the tree only when none is stored.
	SeedTree(ctx context.Context, rec TreeRecord) (*TreeRecord, bool, error)

	// Lock blocks until this client holds the leader lock or ctx ends.
	Lock(ctx context.Context, holder string) (*Lock, error)
	// Leader is the current holder's name, "" when none.
	Leader(ctx context.Context) (string, error)
}

var _ Store = (*KV)(nil)
