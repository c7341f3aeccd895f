// Package reservation holds Calendar bookings (DESIGN L10) and the pure
// checks on them: the validation of one booking (window, shape, ID) and the
// booking check of law L10 (at every instant, the bookings in the subtree of
// each quota node fit that node's nominal), with the earliest later start
// that fits when a booking is refused.
//
// Everything here is pure: the current time, the quota tree and the
// existing bookings come in as arguments; the random part of a default ID
// comes in as bytes (NewID). No I/O, no clock.
package reservation

import (
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Defaults and bounds of a booking (DESIGN L10). The tree's settings carry
// reservation_max_ahead and reservation_min_duration; MaxDuration is fixed.
const (
	// DefaultMaxAhead is the default reservation_max_ahead: a booking
	// starts at most this far after the time it is made (8 weeks).
	DefaultMaxAhead = 1344 * time.Hour
	// DefaultMinDuration is the default reservation_min_duration (1 hour).
	DefaultMinDuration = time.Hour
	// MaxDuration is the longest booking (90 days).
	MaxDuration = 2160 * time.Hour
	// MaxAllocGPUs is the largest default GPUs per allocation: the default
	// alloc_gpus is the largest divisor of gpus up to it.
	MaxAllocGPUs = 8
	// MaxGPUs bounds a booking's GPUs so that every sum stays far from
	// integer overflow (the same bound as quota.MaxGPUs).
	MaxGPUs = 1<<31 - 1
	// MaxIDLength is the longest reservation ID: [a-z0-9][a-z0-9-]{0,62}.
	MaxIDLength = 63
	// IDPrefix starts every generated ID ("r-" + 8 hex digits).
	IDPrefix = "r-"
	// MaxModelLength bounds a booking's GPU model name in bytes (Nomad's
	// device names, e.g. "NVIDIA H100 80GB HBM3", are far shorter).
	MaxModelLength = 256
)

// Booking is one Calendar booking: GPUs of one quota node for one
// namespace over the window [Start, End).
type Booking struct {
	// ID matches [a-z0-9][a-z0-9-]{0,62}; default IDPrefix + 8 hex digits.
	ID string `json:"id"`
	// Namespace is the workspace the booking is for; only its jobs may name
	// the booking (L10).
	Namespace string `json:"namespace"`
	// Node is the quota node the namespace is bound to (set by Prepare).
	Node string `json:"node"`
	// GPUs booked, > 0.
	GPUs int `json:"gpus"`
	// AllocGPUs is the GPUs per allocation of the booking's shape; it
	// divides GPUs. Default: the largest divisor of GPUs up to 8.
	AllocGPUs int `json:"alloc_gpus"`
	// Model is the GPU model asked for; "" = any. Only in a tree without
	// flavor blocks: with flavors a booking names a flavor (DESIGN L13).
	Model string `json:"model,omitempty"`
	// Flavor is the flavor the booking is of (DESIGN L13): it is checked
	// against that flavor's nominals and bookings only, and its jobs take
	// it. Set by Prepare to a declared flavor of the tree; "" in a tree
	// without flavor blocks (its implicit flavor "gpu"). A booking stored
	// before flavors existed has none and reads as the tree's only
	// flavor (Tree.FlavorOf).
	Flavor string `json:"flavor,omitempty"`
	// NodePool is the Nomad node pool; "" = default.
	NodePool string `json:"node_pool,omitempty"`
	// Start is the first instant of the window. Its location is the one the
	// booking was made in and is used to print its instants.
	Start time.Time `json:"start"`
	// End is the first instant after the window (exclusive): Start plus the
	// booked duration, as an absolute duration (a DST change inside the
	// window moves the wall-clock end, not the instant).
	End time.Time `json:"end"`
	// CancelledAt is set by a forced cancel of a started booking with
	// running jobs (DESIGN L10 "End": its jobs are then stopped at once):
	// End is moved to it, so that the core's rule L10.end stops the jobs
	// now and every check sees the window as over, and the leader moves
	// the booking to history (outcome "forced") once its jobs are gone.
	// Zero otherwise.
	CancelledAt time.Time `json:"cancelled_at,omitzero"`
}

// Duration is End - Start.
func (b *Booking) Duration() time.Duration { return b.End.Sub(b.Start) }

// Overlaps reports whether the booking's window meets [start, end).
func (b *Booking) Overlaps(start, end time.Time) bool {
	return b.Start.Before(end) && start.Before(b.End)
}

// Limits are the tree settings that bound a booking (DESIGN L10, §6: they
// live in the tree's settings so that every broker agrees).
type Limits struct {
	// MaxAhead is reservation_max_ahead: the latest start is now + MaxAhead.
	MaxAhead time.Duration
	// MinDuration is reservation_min_duration, the shortest booking.
	MinDuration time.Duration
}

// DefaultLimits returns reservation_max_ahead 1344h and
// reservation_min_duration 1h.
func DefaultLimits() Limits {
	return Limits{MaxAhead: DefaultMaxAhead, MinDuration: DefaultMinDuration}
}

// ErrInvalid marks a booking that is malformed whatever the other bookings
// are (HTTP 400); ErrRefused marks one that does not fit law L10 (HTTP
// 409). Both come as *Error.
var (
	ErrInvalid = errors.New("invalid booking")
	ErrRefused = errors.New("booking refused")
)

// Error is the package's one error shape. Kind is ErrInvalid or ErrRefused
// (errors.Is works through Unwrap).
//
// For ErrInvalid, Field and Value name the bad input and Reason says what
// is wrong. For ErrRefused, Node, At, Booked, Nominal and Asked give the
// first instant at which a node's subtree would be over its nominal of
// Flavor ("" in a tree without flavor blocks), and Earliest the earliest
// later start at which the booking fits (zero when none fits within
// reservation_max_ahead).
type Error struct {
	Kind error

	Field  string
	Value  string
	Reason string

	Flavor   string
	Node     string
	At       time.Time
	Booked   int
	Nominal  int
	Asked    int
	Earliest time.Time
}

func (e *Error) Error() string {
	if e.Kind == ErrRefused {
		gpus := "GPUs"
		if e.Flavor != "" {
			gpus = e.Flavor + " GPUs"
		}
		s := fmt.Sprintf("%s at %s: %d of %d %s booked", e.Node, FormatInstant(e.At), e.Booked, e.Nominal, gpus)
		if e.Asked > 0 {
			s += fmt.Sprintf(", %d asked", e.Asked)
		}
		if e.Reason != "" {
			s += "; " + e.Reason
		}
		return s
	}
	return fmt.Sprintf("%s %s: %s", e.Field, strconv.Quote(e.Value), e.Reason)
}

// Unwrap returns Kind.
func (e *Error) Unwrap() error { return e.Kind }

func invalid(field, value, format string, args ...any) *Error {
	return &Error{Kind: ErrInvalid, Field: field, Value: value, Reason: fmt.Sprintf(format, args...)}
}

// FormatInstant prints t to the minute (to the second, or nanosecond, when
// it has them) in t's own location with its offset, e.g.
// "2026-12-08T09:00+09:00", so a refusal shows instants in the zone the
// booking was made in.
func FormatInstant(t time.Time) string {
	switch {
	case t.Nanosecond() != 0:
		return t.Format("2006-01-02T15:04:05.999999999Z07:00")
	case t.Second() != 0:
		return t.Format("2006-01-02T15:04:05Z07:00")
	default:
		return t.Format("2006-01-02T15:04Z07:00")
	}
}

// ValidID checks id against [a-z0-9][a-z0-9-]{0,62}.
func ValidID(id string) error {
	if id == "" {
		return invalid("id", id, "is empty; an ID matches [a-z0-9][a-z0-9-]{0,62}")
	}
	n := 0 // characters (runes), so that a bad one is named as written
	for i, c := range id {
		n++
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && n > 1
		switch {
		case ok:
		case c == utf8.RuneError && !strings.HasPrefix(id[i:], string(utf8.RuneError)):
			return invalid("id", id, "character %d (byte 0x%02x, not UTF-8) is not allowed; an ID matches [a-z0-9][a-z0-9-]{0,62}", n, id[i])
		default:
			return invalid("id", id, "character %d (%q) is not allowed; an ID matches [a-z0-9][a-z0-9-]{0,62}", n, c)
		}
	}
	if len(id) > MaxIDLength { // ASCII only here: bytes are characters
		return invalid("id", id, "is %d characters long, more than %d", len(id), MaxIDLength)
	}
	return nil
}

// poolName is Nomad's rule for node pool names: 1 to 128 letters, digits,
// '-' or '_'.
var poolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)

// validModel checks a GPU model name: "" (any) or at most MaxModelLength
// bytes of printable UTF-8.
func validModel(model string) error {
	if len(model) > MaxModelLength {
		return invalid("model", model, "is %d bytes long, more than %d", len(model), MaxModelLength)
	}
	if !utf8.ValidString(model) {
		return invalid("model", model, "is not UTF-8")
	}
	n := 0
	for _, r := range model {
		n++
		if !unicode.IsPrint(r) {
			return invalid("model", model, "character %d (%q) is not printable", n, r)
		}
	}
	return nil
}

// NewID returns the default ID IDPrefix + 8 hex digits of random. The
// caller supplies the random bytes (crypto/rand in the broker), which keeps
// this package pure.
func NewID(random [4]byte) string { return IDPrefix + hex.EncodeToString(random[:]) }

// DefaultAllocGPUs returns the largest divisor of gpus up to MaxAllocGPUs
// (DESIGN L10: the booking's default shape), or 0 when gpus <= 0.
func DefaultAllocGPUs(gpus int) int {
	for d := min(gpus, MaxAllocGPUs); d > 1; d-- {
		if gpus%d == 0 {
			return d
		}
	}
	if gpus <= 0 {
		return 0
	}
	return 1
}

// Prepare validates a new booking made at now against lim and returns it
// completed: Node set to the quota node its namespace is bound to in
// tree, AllocGPUs defaulted. b.ID must already be set (NewID for a
// default). The checks, each an *Error of kind ErrInvalid naming the field:
//   - id matches [a-z0-9][a-z0-9-]{0,62};
//   - namespace is bound to a node of the tree (L10: a booking books GPUs
//     of its namespace's node, no other);
//   - node_pool "" or a Nomad node pool name; model "" or at most
//     MaxModelLength bytes of printable UTF-8;
//   - flavor (DESIGN L13): a flavor of the tree, which Flavor is set to;
//     "" only in a tree of one flavor (then its only one). In a tree
//     without flavor blocks Flavor stays "" ("gpu" is taken as ""), and a
//     model may be given; with flavors, a model is refused (a booking
//     gives flavor or model, not both);
//   - 0 < gpus <= MaxGPUs; alloc_gpus 0 (default) or a divisor of gpus;
//   - now < start <= now + MaxAhead;
//   - MinDuration <= end - start <= MaxDuration.
//
// It does not check law L10 against other bookings: that is Tree.Check.
func Prepare(tree *Tree, b Booking, now time.Time, lim Limits) (Booking, error) {
	if err := ValidID(b.ID); err != nil {
		return Booking{}, err
	}
	if b.Namespace == "" {
		return Booking{}, invalid("namespace", b.Namespace, "is empty")
	}
	node, ok := tree.NodeOf(b.Namespace)
	if !ok {
		return Booking{}, invalid("namespace", b.Namespace, "is not bound to any quota node of the tree")
	}
	if b.Node != "" && b.Node != node {
		return Booking{}, invalid("node", b.Node, "is not the node of namespace %q (%s)", b.Namespace, node)
	}
	b.Node = node
	if b.NodePool != "" && !poolName.MatchString(b.NodePool) {
		return Booking{}, invalid("node_pool", b.NodePool, "not a Nomad node pool name (1 to 128 letters, digits, '-' or '_')")
	}
	if err := validModel(b.Model); err != nil {
		return Booking{}, err
	}
	flavor, err := tree.flavorOf(b.Flavor, b.Model)
	if err != nil {
		return Booking{}, err
	}
	b.Flavor = flavor
	if b.GPUs <= 0 || b.GPUs > MaxGPUs {
		return Booking{}, invalid("gpus", strconv.Itoa(b.GPUs), "must be from 1 to %d", MaxGPUs)
	}
	switch {
	case b.AllocGPUs == 0:
		b.AllocGPUs = DefaultAllocGPUs(b.GPUs)
	case b.AllocGPUs < 0 || b.AllocGPUs > b.GPUs || b.GPUs%b.AllocGPUs != 0:
		return Booking{}, invalid("alloc_gpus", strconv.Itoa(b.AllocGPUs), "must divide gpus (%d)", b.GPUs)
	}
	if !b.Start.After(now) {
		return Booking{}, invalid("start", FormatInstant(b.Start), "is not in the future (now %s)", FormatInstant(now.In(b.Start.Location())))
	}
	if latest := now.Add(lim.MaxAhead); b.Start.After(latest) {
		return Booking{}, invalid("start", FormatInstant(b.Start),
			"is more than reservation_max_ahead (%s) ahead; the latest start is %s", lim.MaxAhead, FormatInstant(latest.In(b.Start.Location())))
	}
	d := b.End.Sub(b.Start)
	if d < lim.MinDuration || d > MaxDuration {
		return Booking{}, invalid("duration", d.String(), "must be from reservation_min_duration (%s) to %s", lim.MinDuration, MaxDuration)
	}
	return b, nil
}
