package store

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
)

// Key is a key of the store relative to its prefix (DESIGN §6). Build keys
// with the functions below, never by joining strings: each escapes its
// parts (a Nomad job ID may contain "/").
type Key string

// The fixed keys and the key folders (DESIGN §6).
const (
	// KeyTree holds the quota tree, its settings and change time (TreeRecord).
	KeyTree Key = "tree"
	// KeyGuard is the guard counter every guarded write checks and increments.
	KeyGuard Key = "guard"
	// KeyLeader is the leader lock (a session lock, DESIGN L12).
	KeyLeader Key = "leader"

	dirReservations        Key = "reservations/"
	dirJobs                Key = "jobs/"
	dirIntents             Key = "intents/"
	dirHolds               Key = "holds/"
	dirHistoryReservations Key = "history/reservations/"
	dirHistoryPreemptions  Key = "history/preemptions/"
)

// escape makes one key segment of s: url.PathEscape, which escapes "/"
// (as %2F) and "%", so a segment never splits and always reads back; a
// segment "." or ".." is escaped whole (%2E, %2E%2E), since Consul's HTTP
// server cleans such a path (GET /v1/kv/p/jobs/ns/.. is redirected to
// p/jobs) and the key, written by a transaction, would never read back.
func escape(s string) string {
	switch s {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(s)
}

// ReservationKey is reservations/<id>.
func ReservationKey(id string) Key { return dirReservations + Key(escape(id)) }

// JobID names a Nomad job: namespace and job ID.
type JobID struct {
	Namespace string
	Job       string
}

func (j JobID) String() string { return j.Namespace + "/" + j.Job }

// JobKey is jobs/<namespace>/<job>, each part escaped.
func JobKey(id JobID) Key { return dirJobs + Key(escape(id.Namespace)+"/"+escape(id.Job)) }

// IntentKey is intents/<alloc>.
func IntentKey(alloc string) Key { return dirIntents + Key(escape(alloc)) }

// The two kinds of hold owner under dirHolds.
const (
	holdReservation = "reservation/"
	holdGroup       = "group/"
)

// HoldKey is holds/<owner>: holds/reservation/<id> for a reservation,
// holds/group/<namespace>/<job>/<group> for a claimant task group (a
// pre-warm, DESIGN L5), each part escaped (job IDs and group names may
// contain "/"). An owner that names both or neither has no key ("").
func HoldKey(owner plan.HoldOwner) Key {
	switch {
	case owner.Reservation != "" && owner.Group.IsZero():
		return dirHolds + holdReservation + Key(escape(owner.Reservation))
	case owner.Reservation == "" && owner.Group.Namespace != "" && owner.Group.Job != "" && owner.Group.Group != "":
		g := owner.Group
		return dirHolds + holdGroup + Key(escape(g.Namespace)+"/"+escape(g.Job)+"/"+escape(g.Group))
	}
	return ""
}

// parseHoldKey reads a HoldKey (relative to the prefix) back.
func parseHoldKey(k Key) (plan.HoldOwner, error) {
	rest, ok := strings.CutPrefix(string(k), string(dirHolds))
	if !ok {
		return plan.HoldOwner{}, fmt.Errorf("key %q is not under %s", k, dirHolds)
	}
	if id, ok := strings.CutPrefix(rest, holdReservation); ok {
		idu, err := url.PathUnescape(id)
		if err != nil || id == "" || strings.Contains(id, "/") {
			return plan.HoldOwner{}, fmt.Errorf("key %q: want %s%s<id>", k, dirHolds, holdReservation)
		}
		return plan.HoldOwner{Reservation: idu}, nil
	}
	if g, ok := strings.CutPrefix(rest, holdGroup); ok {
		parts := strings.Split(g, "/")
		if len(parts) == 3 {
			var out [3]string
			bad := false
			for i, p := range parts {
				u, err := url.PathUnescape(p)
				bad = bad || err != nil || u == ""
				out[i] = u
			}
			if !bad {
				return plan.HoldOwner{Group: plan.GroupKey{Namespace: out[0], Job: out[1], Group: out[2]}}, nil
			}
		}
	}
	return plan.HoldOwner{}, fmt.Errorf("key %q: want %s%s<id> or %s%s<namespace>/<job>/<group>", k, dirHolds, holdReservation, dirHolds, holdGroup)
}

// HistoryReservationKey is history/reservations/<id>.
func HistoryReservationKey(id string) Key { return dirHistoryReservations + Key(escape(id)) }

// historyTimeLayout is fixed-width UTC, so preemption keys sort by time.
const historyTimeLayout = "20060102T150405.000000000Z"

// HistoryPreemptionKey is history/preemptions/<time>-<alloc>, the time in
// fixed-width UTC (20261208T000000.000000000Z) so keys sort by time.
func HistoryPreemptionKey(at time.Time, alloc string) Key {
	return dirHistoryPreemptions + Key(at.UTC().Format(historyTimeLayout)+"-"+escape(alloc))
}

// parseJobKey reads a JobKey (relative to the prefix) back.
func parseJobKey(k Key) (JobID, error) {
	rest, ok := strings.CutPrefix(string(k), string(dirJobs))
	if !ok {
		return JobID{}, fmt.Errorf("key %q is not under %s", k, dirJobs)
	}
	ns, job, ok := strings.Cut(rest, "/")
	if !ok {
		return JobID{}, fmt.Errorf("key %q: want jobs/<namespace>/<job>", k)
	}
	nsu, err1 := url.PathUnescape(ns)
	jobu, err2 := url.PathUnescape(job)
	if err1 != nil || err2 != nil || strings.Contains(job, "/") {
		return JobID{}, fmt.Errorf("key %q: bad escaping", k)
	}
	return JobID{Namespace: nsu, Job: jobu}, nil
}

// parsePreemptionTime reads the time of a HistoryPreemptionKey.
func parsePreemptionTime(k Key) (time.Time, error) {
	rest, ok := strings.CutPrefix(string(k), string(dirHistoryPreemptions))
	if !ok || len(rest) < len(historyTimeLayout) {
		return time.Time{}, fmt.Errorf("key %q: want %s<time>-<alloc>", k, dirHistoryPreemptions)
	}
	return time.Parse(historyTimeLayout, rest[:len(historyTimeLayout)])
}
