package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
)

func TestKeys(t *testing.T) {
	at := time.Date(2026, 12, 8, 9, 0, 0, 5, time.FixedZone("JST", 9*3600))
	got := []Key{
		ReservationKey("r-0ab1ff00"), JobKey(JobID{"workspace-a", "sweep/run-1"}), IntentKey("9f0c-1"),
		HoldKey(plan.HoldOwner{Group: plan.GroupKey{Namespace: "workspace-b", Job: "train/p", Group: "g/1"}}),
		HistoryReservationKey("r-1"), HistoryPreemptionKey(at, "a/1"), HoldKey(plan.HoldOwner{Reservation: "r-1"}),
	}
	want := []Key{
		"reservations/r-0ab1ff00", "jobs/workspace-a/sweep%2Frun-1", "intents/9f0c-1",
		"holds/group/workspace-b/train%2Fp/g%2F1", "history/reservations/r-1", "history/preemptions/20261208T000000.000000005Z-a%2F1",
		"holds/reservation/r-1",
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("key %d: %q, want %q", i, got[i], want[i])
		}
	}
	if p, err := parsePreemptionTime(got[5]); err != nil || !p.Equal(at) {
		t.Fatalf("preemption time %v %v", p, err)
	}
}

// FuzzJobKey: any namespace and job ID give one key that reads back.
func FuzzJobKey(f *testing.F) {
	for _, s := range [][2]string{{"default", "train"}, {"ns", "a/b/c"}, {"ns", "100%"}, {"a b", "é/../x"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, ns, job string) {
		id := JobID{ns, job}
		back, err := parseJobKey(JobKey(id))
		if err != nil || back != id {
			t.Fatalf("%+v -> %q -> %+v %v", id, JobKey(id), back, err)
		}
	})
}

// A hold owner names a reservation or a whole group, never both or
// neither: the others have no key.
func TestHoldKeyRefusesHalfOwners(t *testing.T) {
	g := plan.GroupKey{Namespace: "ns", Job: "j", Group: "g"}
	for _, o := range []plan.HoldOwner{{}, {Reservation: "r-1", Group: g}, {Group: plan.GroupKey{Namespace: "ns", Job: "j"}}} {
		if k := HoldKey(o); k != "" {
			t.Errorf("HoldKey(%+v) = %q, want none", o, k)
		}
	}
	for _, k := range []Key{"holds/r-1", "holds/group/ns/j", "holds/group/ns/j/g/x", "holds/reservation/a/b", "holds/group/ns//g", "holds/reservation/%zz"} {
		if o, err := parseHoldKey(k); err == nil {
			t.Errorf("parseHoldKey(%q) = %+v, want an error", k, o)
		}
	}
}

// FuzzHoldKey: any reservation ID, and any namespace, job ID and group
// name, give one key that reads back to the same owner.
func FuzzHoldKey(f *testing.F) {
	for _, s := range [][4]string{{"r-1", "default", "train", "g"}, {"a/b", "ns", "a/b/c", "g/1"}, {"100%", "a b", "é/../x", ".."}} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, id, ns, job, group string) {
		owners := []plan.HoldOwner{{Reservation: id}, {Group: plan.GroupKey{Namespace: ns, Job: job, Group: group}}}
		for _, o := range owners {
			k := HoldKey(o)
			if k == "" {
				continue // an empty part: no owner
			}
			back, err := parseHoldKey(k)
			if err != nil || back != o {
				t.Fatalf("%+v -> %q -> %+v %v", o, k, back, err)
			}
		}
	})
}

func TestOpen(t *testing.T) {
	kv, warn, err := Open(nil)
	if err != nil || warn != MemoryWarning {
		t.Fatalf("Open(nil): %v %q", err, warn)
	}
	if _, ok := kv.b.(*memory); !ok {
		t.Fatalf("Open(nil) backend %T", kv.b)
	}
	kv, warn, err = Open(&ConsulConfig{Address: "127.0.0.1:1"})
	if err != nil || warn != "" || kv.b.(*consul).prefix != DefaultPrefix {
		t.Fatalf("Open(consul): %v %q", err, warn)
	}
	if _, _, err := Open(&ConsulConfig{Prefix: "no-slash"}); err == nil || err.Error() != `store: config: invalid: consul.prefix "no-slash": must end with "/" and not start with one` {
		t.Fatalf("bad prefix: %v", err)
	}
	// Nothing listens on port 1: the first call says ErrUnavailable.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := kv.ReadGuarded(ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("unreachable consul: %v", err)
	}
}

// No key has a "." or ".." segment, whatever the owner's names: Consul's
// HTTP server cleans such a path (GET /v1/kv/p/jobs/ns/.. is answered for
// p/jobs/), so a job "..", or a group "." of a hold, would be written by a
// transaction and never read back. Such segments are escaped (%2E) and
// still read back.
func TestKeysHaveNoDotSegments(t *testing.T) {
	for _, name := range []string{".", ".."} {
		job := JobID{Namespace: name, Job: name}
		owner := plan.HoldOwner{Group: plan.GroupKey{Namespace: name, Job: name, Group: name}}
		keys := []Key{ReservationKey(name), JobKey(job), IntentKey(name), HoldKey(owner),
			HoldKey(plan.HoldOwner{Reservation: name}), HistoryReservationKey(name)}
		for _, k := range keys {
			for _, seg := range strings.Split(string(k), "/") {
				if seg == "." || seg == ".." {
					t.Errorf("key %q has a %q segment", k, seg)
				}
			}
		}
		if back, err := parseJobKey(JobKey(job)); err != nil || back != job {
			t.Errorf("%+v -> %q -> %+v %v", job, JobKey(job), back, err)
		}
		if back, err := parseHoldKey(HoldKey(owner)); err != nil || back != owner {
			t.Errorf("%+v -> %q -> %+v %v", owner, HoldKey(owner), back, err)
		}
	}
	if got, want := JobKey(JobID{"ns", "..."}), Key("jobs/ns/..."); got != want {
		t.Errorf("three dots: %q, want %q (only . and .. are cleaned)", got, want)
	}
}
