// Package jobmeta reads what a Nomad job spec says to gputide: its
// gputide_* meta (JobOptions, DESIGN §5), checked against the admit pools
// and the bookings, the flavors its GPU requests allow in the order its
// meta gives (DESIGN L13), and the few spec fields the broker reads
// besides (a group's GPU ask and kill_timeout, the job's priority,
// datacenters and submission time). The build, the Actor and the API read
// a job through it, so that each rule of the meta is written once.
package jobmeta

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
)

// The job meta keys gputide reads (DESIGN §5). A meta block does not accept
// dotted keys, so they use underscores.
const (
	MetaIdle         = "gputide_idle"          // "true" or "false"
	MetaElastic      = "gputide_elastic"       // "true" or "false"
	MetaFlexMaxWait  = "gputide_flex_max_wait" // Go duration, 0 < d <= 168h, default 168h (plan.Flex.Check)
	MetaFlexMaxRun   = "gputide_flex_max_run"  // Go duration, 0 < d <= 168h, required with either flex key
	MetaReservation  = "gputide_reservation"   // reservation ID
	MetaPool         = "gputide_pool"          // node pool to admit into, default "default"
	MetaFlavors      = "gputide_flavors"       // the job's flavors in order, "h100,a100" (DESIGN L13)
	MetaStatus       = "gputide_status"        // written by the broker: waiting, error, expired
	MetaReason       = "gputide_reason"        // written by the broker: why
	MetaSubmitted    = "gputide_submitted"     // written by the broker: first submission (RFC 3339)
	DefaultAdmitPool = "default"
)

// JobOptions are the gputide settings a job declares in its meta.
type JobOptions struct {
	Idle        bool
	Elastic     bool
	Flex        *plan.Flex // nil unless gputide_flex_max_wait or _max_run is set
	Reservation string
	Pool        string // the node pool admission moves the job to
	// Flavors are the flavor names of gputide_flavors in the job's order
	// (nil when unset): well formed here, checked against the tree and the
	// job's device requests by GroupFlavors (DESIGN L13).
	Flavors []string
}

// MetaError is a bad gputide meta value. Its message names the key and the
// value; a job with one is left unadmitted (DESIGN §5).
type MetaError struct {
	Key, Value, Problem string
}

func (e *MetaError) Error() string {
	return fmt.Sprintf("job meta %s = %q: %s", e.Key, e.Value, e.Problem)
}

// ParseJobOptions reads the gputide keys of a job's meta (DESIGN §5, L10,
// L11: a flex request names no reservation and is not idle). holdingPool is the
// broker's holding pool, which may not be named as gputide_pool. The first
// bad value, in key order, is returned as a *MetaError.
func ParseJobOptions(meta map[string]string, holdingPool string) (JobOptions, error) {
	o := JobOptions{Pool: DefaultAdmitPool}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		if gputideKey(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var flex plan.Flex
	hasFlex := false
	for _, k := range keys {
		v := meta[k]
		switch k {
		case MetaIdle, MetaElastic:
			b, err := strconv.ParseBool(v)
			if err != nil {
				return JobOptions{}, &MetaError{k, v, `want "true" or "false"`}
			}
			if k == MetaIdle {
				o.Idle = b
			} else {
				o.Elastic = b
			}
		case MetaFlexMaxWait, MetaFlexMaxRun:
			d, err := time.ParseDuration(v)
			if err != nil {
				return JobOptions{}, &MetaError{k, v, `want a duration such as "72h"`}
			}
			if k == MetaFlexMaxWait {
				flex.MaxWait = d
			} else {
				flex.MaxRun = d
			}
			hasFlex = true
		case MetaReservation:
			if strings.TrimSpace(v) == "" {
				return JobOptions{}, &MetaError{k, v, "empty reservation ID"}
			}
			o.Reservation = v
		case MetaPool:
			if strings.TrimSpace(v) == "" {
				return JobOptions{}, &MetaError{k, v, "empty node pool"}
			}
			if v == holdingPool {
				return JobOptions{}, &MetaError{k, v, "names the broker's holding pool"}
			}
			o.Pool = v
		case MetaFlavors:
			names, problem := parseFlavorList(v)
			if problem != "" {
				return JobOptions{}, &MetaError{k, v, problem}
			}
			o.Flavors = names
		case MetaStatus, MetaReason, MetaSubmitted:
			// written by the broker itself
		default:
			return JobOptions{}, &MetaError{k, v, "unknown gputide key (known: " + strings.Join(knownKeys, ", ") + ")"}
		}
	}
	if hasFlex && o.Reservation != "" {
		return JobOptions{}, &MetaError{MetaReservation, o.Reservation, "cannot be combined with " + flexKeysSet(meta) + ": a flex request cannot name a reservation (L11)"}
	}
	if hasFlex && o.Idle {
		return JobOptions{}, &MetaError{MetaIdle, meta[MetaIdle], "cannot be combined with " + flexKeysSet(meta) + ": a flex request is a non-idle job (L11)"}
	}
	if hasFlex {
		if _, set := meta[MetaFlexMaxWait]; !set {
			flex.MaxWait = plan.DefaultFlexWait
		}
		if err := flex.Check(); err != nil {
			// The rule is the core's (DESIGN L11); the error names the
			// meta key and the value as written.
			var fe *plan.FlexError
			if !errors.As(err, &fe) {
				return JobOptions{}, err
			}
			key := MetaFlexMaxWait
			if fe.Key == "max_run" {
				key = MetaFlexMaxRun
			}
			return JobOptions{}, &MetaError{key, meta[key], fe.Problem}
		}
		o.Flex = &flex
	}
	return o, nil
}

// CheckAdmitPool checks the pool a job is admitted into (its gputide_pool,
// or "default" when unset): it must be listed in admit (the broker's
// admit_pools; nil means ["default"]) and, when pools is not nil (the node
// pools Nomad listed, by name), be one of Nomad's pools (DESIGN §9, issue
// 10: Nomad CE checks no node-pool ACL at registration, so the broker only
// moves jobs into the pools its operator allows). The error is a
// *MetaError naming gputide_pool and the pool.
func CheckAdmitPool(pool string, admit []string, pools map[string]bool) error {
	if admit == nil {
		admit = []string{DefaultAdmitPool}
	}
	if !slices.Contains(admit, pool) {
		return &MetaError{MetaPool, pool, fmt.Sprintf("not one of the broker's admit_pools %q", admit)}
	}
	if pools != nil && !pools[pool] {
		return &MetaError{MetaPool, pool, "no such node pool in Nomad"}
	}
	return nil
}

// flexKeysSet names the flex keys meta sets with their values, for the
// error of a flex request that names a reservation: `gputide_flex_max_run
// = "4h"`, both joined with " and " when both are set.
func flexKeysSet(meta map[string]string) string {
	var set []string
	for _, k := range []string{MetaFlexMaxRun, MetaFlexMaxWait} {
		if v, ok := meta[k]; ok {
			set = append(set, fmt.Sprintf("%s = %q", k, v))
		}
	}
	return strings.Join(set, " and ")
}

// Bookings are bookings by ID, for CheckReservation (IDs are unique in
// the store: one key per booking).
type Bookings map[string]*plan.Reservation

// IndexBookings indexes rs by ID (the first of a repeated ID wins); rs must
// outlive the index.
func IndexBookings(rs []plan.Reservation) Bookings {
	out := make(Bookings, len(rs))
	for i := range rs {
		if _, dup := out[rs[i].ID]; !dup {
			out[rs[i].ID] = &rs[i]
		}
	}
	return out
}

// CheckReservation checks the booking a job of namespace names in
// gputide_reservation (id; "" passes) against bookings, the store's
// bookings that are not yet in history (Input.Reservations), at now:
// it must be one of them, of the job's own namespace, and not ended (End
// is exclusive) (DESIGN L10: only jobs of the reservation's namespace may
// name it; issue 9 item 4: an unended booking of the job's own namespace,
// else a meta error). The error is a *MetaError naming gputide_reservation
// and the ID. A booking of another namespace is reported as unknown, word
// for word: the error is written into the job's meta (gputide_reason),
// which the job's namespace reads, and the reservation API shows another
// namespace's booking IDs only to its readers.
func CheckReservation(id, namespace string, bookings Bookings, now time.Time) error {
	if id == "" {
		return nil
	}
	r := bookings[id]
	if r == nil || r.Namespace != namespace {
		return &MetaError{MetaReservation, id, fmt.Sprintf("no unended booking of namespace %q has this ID", namespace)}
	}
	if !now.Before(r.End) {
		return &MetaError{MetaReservation, id, fmt.Sprintf("the booking of namespace %q ended at %s; name an unended booking", namespace, r.End.UTC().Format(time.RFC3339))}
	}
	return nil
}

// gputideKey reports whether meta key k is, or is spelt like, a gputide
// key: "gputide" in any letter case, alone or followed by '_', '-' or '.'
// (GPUTIDE_IDLE, gputide-idle). ParseJobOptions refuses those it does not
// know, so a misspelt gputide_idle is an error, not a non-idle job.
func gputideKey(k string) bool {
	if len(k) < len("gputide") || !strings.EqualFold(k[:len("gputide")], "gputide") {
		return false
	}
	rest := k[len("gputide"):]
	return rest == "" || strings.ContainsRune("_-.", rune(rest[0]))
}

var knownKeys = []string{MetaElastic, MetaFlavors, MetaFlexMaxRun, MetaFlexMaxWait, MetaIdle, MetaPool, MetaReservation}
