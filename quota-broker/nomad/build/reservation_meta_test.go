package build

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// bookingsAt are three bookings around now: r-1 of workspace-b in its
// window, r-2 of workspace-c, r-3 of workspace-b that ended a minute ago
// (not yet moved to history).
func bookingsAt(now time.Time) []plan.Reservation {
	return []plan.Reservation{
		{ID: "r-1", Namespace: "workspace-b", Quota: "Quota1.1", GPUs: 2, Start: now.Add(-time.Hour), End: now.Add(time.Hour)},
		{ID: "r-2", Namespace: "workspace-c", Quota: "Quota1.2", GPUs: 2, Start: now.Add(time.Hour), End: now.Add(2 * time.Hour)},
		{ID: "r-3", Namespace: "workspace-b", Quota: "Quota1.1", GPUs: 2, Start: now.Add(-2 * time.Hour), End: now.Add(-time.Minute)},
	}
}

// gputide_reservation names an unended booking of the job's own namespace,
// else a meta error naming the key and the ID (issue 9 item 4, DESIGN L10).
func TestCheckReservation(t *testing.T) {
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	res := bookingsAt(now)
	for _, tt := range []struct {
		name, id, ns, want string
	}{
		{"none named", "", "workspace-b", ""},
		{"active, own namespace", "r-1", "workspace-b", ""},
		{"not started yet, own namespace", "r-2", "workspace-c", ""},
		{"unknown ID", "r-1234abcd", "workspace-b",
			`job meta gputide_reservation = "r-1234abcd": no unended booking of namespace "workspace-b" has this ID`},
		{"another namespace's booking, said as unknown", "r-2", "workspace-b",
			`job meta gputide_reservation = "r-2": no unended booking of namespace "workspace-b" has this ID`},
		{"ended", "r-3", "workspace-b",
			`job meta gputide_reservation = "r-3": the booking of namespace "workspace-b" ended at 2026-12-07T07:59:00Z; name an unended booking`},
	} {
		err := jobmeta.CheckReservation(tt.id, tt.ns, jobmeta.IndexBookings(res), now)
		got := ""
		if err != nil {
			got = err.Error()
			var me *jobmeta.MetaError
			if !errors.As(err, &me) || me.Key != jobmeta.MetaReservation || me.Value != tt.id {
				t.Errorf("%s: error %#v, want a *jobmeta.MetaError on %s = %q", tt.name, err, jobmeta.MetaReservation, tt.id)
			}
		}
		if got != tt.want {
			t.Errorf("%s: jobmeta.CheckReservation(%q, %q) = %q, want %q", tt.name, tt.id, tt.ns, got, tt.want)
		}
	}
	// End is exclusive: at the end instant the booking has ended.
	if err := jobmeta.CheckReservation("r-1", "workspace-b", jobmeta.IndexBookings(res), res[0].End); err == nil {
		t.Error("a booking is unended at its end instant; want the ended error")
	}
}

// Build gives a waiting job naming a booking that is unknown, another
// namespace's or ended a meta error and no pending group; a valid booking
// leaves it pending, naming the booking; a stopped job is not checked.
func TestBuildChecksTheJobsReservation(t *testing.T) {
	_, s := listRecorded(t)
	now := at(t)
	k := plan.JobKey{Namespace: "workspace-b", Job: "training"}
	orig := raw(s).Jobs[k]
	if orig == nil {
		t.Fatalf("the recording has no job %s", k)
	}
	build := func(id string, stop bool) *Build {
		j := *orig
		j.Meta = map[string]string{jobmeta.MetaReservation: id}
		j.Stop = &stop
		raw(s).Jobs[k] = &j
		return From(s, Input{Now: now, Quota: e2eTree(), Settings: quota.DefaultSettings(),
			Accepted: func(plan.JobKey) bool { return true }, Reservations: bookingsAt(now)})
	}
	type got struct {
		MetaErr     string
		Reservation []string // of the job's pending groups
	}
	gotOf := func(b *Build) got {
		var g got
		if err := b.Jobs[k].MetaErr; err != nil {
			g.MetaErr = err.Error()
		}
		for _, p := range b.Snapshot.Pending {
			if p.JobKey() == k {
				g.Reservation = append(g.Reservation, p.Reservation)
			}
		}
		return g
	}
	for _, tt := range []struct {
		name string
		id   string
		stop bool
		want got
	}{
		{"valid", "r-1", false, got{Reservation: []string{"r-1"}}},
		{"unknown", "r-1234abcd", false, got{MetaErr: `job meta gputide_reservation = "r-1234abcd": no unended booking of namespace "workspace-b" has this ID`}},
		{"other namespace", "r-2", false, got{MetaErr: `job meta gputide_reservation = "r-2": no unended booking of namespace "workspace-b" has this ID`}},
		{"ended", "r-3", false, got{MetaErr: `job meta gputide_reservation = "r-3": the booking of namespace "workspace-b" ended at ` +
			now.Add(-time.Minute).UTC().Format(time.RFC3339) + `; name an unended booking`}},
		{"stopped job of an ended booking", "r-3", true, got{}},
	} {
		if diff := cmp.Diff(tt.want, gotOf(build(tt.id, tt.stop))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

// The flex keys read as DESIGN L11 says: either makes the job flex (the
// other cases are in TestParseJobOptionsAppliesTheCoresFlexRule): a given
// max_wait is kept, max_run and max_wait must be more than 0, a value
// that is not a duration names the key and the value; flex keys and a
// reservation together name both keys, whichever flex key is set; so do
// flex keys and gputide_idle = "true".
func TestParseJobOptionsFlexValues(t *testing.T) {
	type res struct {
		Flex *plan.Flex
		Err  string
	}
	for _, tt := range []struct {
		meta map[string]string
		want res
	}{
		{map[string]string{jobmeta.MetaFlexMaxWait: "24h", jobmeta.MetaFlexMaxRun: "4h"}, res{Flex: &plan.Flex{MaxWait: 24 * time.Hour, MaxRun: 4 * time.Hour}}},
		{map[string]string{jobmeta.MetaFlexMaxWait: "168h", jobmeta.MetaFlexMaxRun: "168h"}, res{Flex: &plan.Flex{MaxWait: 168 * time.Hour, MaxRun: 168 * time.Hour}}},
		{map[string]string{jobmeta.MetaFlexMaxRun: "-5m"}, res{Err: `job meta gputide_flex_max_run = "-5m": must be more than 0`}},
		{map[string]string{jobmeta.MetaFlexMaxWait: "0s", jobmeta.MetaFlexMaxRun: "1h"},
			res{Err: `job meta gputide_flex_max_wait = "0s": must be more than 0 (leave max_wait out for the default 168h)`}},
		{map[string]string{jobmeta.MetaFlexMaxRun: "72 hours"}, res{Err: `job meta gputide_flex_max_run = "72 hours": want a duration such as "72h"`}},
		{map[string]string{jobmeta.MetaFlexMaxWait: "24h", jobmeta.MetaReservation: "r-1"},
			res{Err: `job meta gputide_reservation = "r-1": cannot be combined with gputide_flex_max_wait = "24h": a flex request cannot name a reservation (L11)`}},
		{map[string]string{jobmeta.MetaFlexMaxWait: "24h", jobmeta.MetaFlexMaxRun: "4h", jobmeta.MetaReservation: "r-1"},
			res{Err: `job meta gputide_reservation = "r-1": cannot be combined with gputide_flex_max_run = "4h" and gputide_flex_max_wait = "24h": a flex request cannot name a reservation (L11)`}},
		{map[string]string{jobmeta.MetaReservation: "r-1"}, res{}},
		// A flex request is a non-idle job (L11), as the simulator's
		// scenario says too: gputide_idle = "true" with a flex key names both.
		{map[string]string{jobmeta.MetaIdle: "true", jobmeta.MetaFlexMaxRun: "1h"},
			res{Err: `job meta gputide_idle = "true": cannot be combined with gputide_flex_max_run = "1h": a flex request is a non-idle job (L11)`}},
		{map[string]string{jobmeta.MetaIdle: "1", jobmeta.MetaFlexMaxWait: "2h", jobmeta.MetaFlexMaxRun: "1h"},
			res{Err: `job meta gputide_idle = "1": cannot be combined with gputide_flex_max_run = "1h" and gputide_flex_max_wait = "2h": a flex request is a non-idle job (L11)`}},
		{map[string]string{jobmeta.MetaIdle: "false", jobmeta.MetaFlexMaxRun: "1h"}, res{Flex: &plan.Flex{MaxWait: plan.DefaultFlexWait, MaxRun: time.Hour}}},
	} {
		o, err := jobmeta.ParseJobOptions(tt.meta, DefaultHoldingPool)
		got := res{Flex: o.Flex}
		if err != nil {
			got.Err = err.Error()
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("jobmeta.ParseJobOptions(%v) (-want +got):\n%s", tt.meta, diff)
		}
	}
}

// A meta key spelt as a gputide key in another case or with "-" or "."
// (GPUTIDE_IDLE, gputide-idle, gputide.flex_max_run) is an error naming
// it, not ignored: ignored, it would leave an idle job non-idle (entitled,
// L3) or a flex request gang-less. Other keys stay the job's own.
func TestParseJobOptionsMisspeltKeys(t *testing.T) {
	known := "(known: gputide_elastic, gputide_flavors, gputide_flex_max_run, gputide_flex_max_wait, gputide_idle, gputide_pool, gputide_reservation)"
	for key, want := range map[string]string{
		"GPUTIDE_IDLE":         `job meta GPUTIDE_IDLE = "v": unknown gputide key ` + known,
		"gputide-idle":         `job meta gputide-idle = "v": unknown gputide key ` + known,
		"Gputide.flex_max_run": `job meta Gputide.flex_max_run = "v": unknown gputide key ` + known,
		"gputide_what":         `job meta gputide_what = "v": unknown gputide key ` + known,
		"gputide":              `job meta gputide = "v": unknown gputide key ` + known,
		"gputidex":             "",
		"team_gputide_idle":    "",
		"owner":                "",
	} {
		_, err := jobmeta.ParseJobOptions(map[string]string{key: "v"}, DefaultHoldingPool)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("jobmeta.ParseJobOptions(%s = v): %q, want %q", key, got, want)
		}
	}
}

// FuzzCheckReservation: the booking check never panics; it passes exactly
// an ID of an unended booking of the job's namespace (or no ID), and its
// error is a *jobmeta.MetaError naming gputide_reservation and the ID.
func FuzzCheckReservation(f *testing.F) {
	f.Add("r-1", "workspace-b", int64(0))
	f.Add("r-2", "workspace-b", int64(3600))
	f.Add("r-3", "workspace-b", int64(-60))
	f.Add("", "default", int64(1))
	f.Add("r-1234abcd", "workspace-c", int64(7200))
	f.Fuzz(func(t *testing.T, id, ns string, offset int64) {
		base := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
		res := bookingsAt(base)
		now := base.Add(time.Duration(offset%(1<<40)) * time.Second)
		err := jobmeta.CheckReservation(id, ns, jobmeta.IndexBookings(res), now)
		ok := id == ""
		for _, r := range res {
			if r.ID == id && r.Namespace == ns && now.Before(r.End) {
				ok = true
			}
		}
		if ok != (err == nil) {
			t.Fatalf("jobmeta.CheckReservation(%q, %q, at %s) = %v; want ok %v", id, ns, now, err, ok)
		}
		if err == nil {
			return
		}
		var me *jobmeta.MetaError
		if !errors.As(err, &me) || me.Key != jobmeta.MetaReservation || me.Value != id ||
			!strings.HasPrefix(err.Error(), "job meta gputide_reservation = "+strconv.Quote(id)+": ") {
			t.Fatalf("jobmeta.CheckReservation(%q, %q) = %v, want a *jobmeta.MetaError naming %s and the ID", id, ns, err, jobmeta.MetaReservation)
		}
	})
}
