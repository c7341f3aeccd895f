package sim

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/plan"
)

// runScenario loads and runs a scenario text under the real core, with
// its events.
func runScenario(t *testing.T, text string) (*Scenario, *Result, []Event) {
	t.Helper()
	sc, err := LoadFile(writeScenario(t, text, nil))
	if err != nil {
		t.Fatal(err)
	}
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	var ev bytes.Buffer
	r, err := Run(sc, w, Options{Events: &ev})
	if err != nil {
		t.Fatal(err)
	}
	noConflicts(t, r)
	return sc, r, events(t, ev.Bytes())
}

// line renders an event for comparison: "15:04:05 event job rule".
func line(e Event) string { return fmt.Sprintf("%s %s %s %s", e.T[11:19], e.Event, e.Job, e.Rule) }

const calNodes = header + `
length = "6h"
cluster {
  nodes "n" {
    count = 4
    gpus  = 8
  }
}
`

// A Calendar booking in the simulator (DESIGN L10): four idle jobs of
// workspace-c fill the cluster; workspace-b books 16 GPUs (2 x 8) from
// 02:00 for 2 hours, and its job naming the booking, submitted at 00:30,
// waits for the start (rule L10). The core drains two idle jobs at
// 02:00 - (30s + drain_margin 60s) (rule L10.drain) and holds their GPUs;
// no idle job runs on them; the booking's job runs at its start (within
// one broker interval: at once) on the held nodes, and is stopped whole
// at end - kill_timeout (rule L10.end), gone by the end.
func TestSimBookingHonouredAtStart(t *testing.T) {
	text := calNodes + `
reservation "r-train" {
  namespace  = "workspace-b"
  gpus       = 16
  alloc_gpus = 8
  start      = "2026-12-07 02:00"
  duration   = "2h"
}
job "booked" {
  namespace   = "workspace-b"
  at          = "2026-12-07 00:30"
  count       = 2
  gpus        = 8
  duration    = "5h"
  reservation = "r-train"
}
`
	for i := 1; i <= 4; i++ {
		text += fmt.Sprintf("job \"idle%d\" {\n  namespace = \"workspace-c\"\n  gpus = 8\n  duration = \"10h\"\n  idle = true\n}\n", i)
	}
	sc, r, evs := runScenario(t, text)
	start := time.Date(2026, 12, 7, 2, 0, 0, 0, sc.Zone)
	var got []string
	var heldNodes, bookedNodes []string
	for _, e := range evs {
		at, _ := time.Parse(time.RFC3339, e.T)
		switch {
		case e.Job == "booked" && e.Event != "submit":
			got = append(got, line(e))
			if e.Event == "start" {
				bookedNodes = append(bookedNodes, e.Node)
			}
			if e.Event == "wait" && (e.Rule != "L10" || !strings.Contains(e.Reason, "reservation r-train starts at 2026-12-07T10:00:00Z")) {
				t.Errorf("booked job's wait: rule %s, reason %q; want L10, the booking's start", e.Rule, e.Reason)
			}
		case e.Event == "hold":
			got = append(got, line(e))
			heldNodes = append(heldNodes, e.Node)
			if e.For != "reservation r-train" {
				t.Errorf("hold on %s for %q, want the reservation", e.Node, e.For)
			}
		case e.Event == "stop" && e.Rule != "":
			got = append(got, line(e))
			if e.For != "reservation r-train" {
				t.Errorf("drain stop of %s for %q, want the reservation", e.Alloc, e.For)
			}
		case e.Event == "start" && strings.HasPrefix(e.Job, "idle") && at.After(sc.Start):
			// No idle job on the held GPUs: the stopped ones restart only
			// when the booking's job is gone.
			if at.Before(start.Add(2 * time.Hour)) {
				t.Errorf("%s: idle job %s started on %s while the booking holds or uses its GPUs", e.T, e.Job, e.Node)
			}
		}
	}
	want := []string{
		"00:30:00 wait booked L10",
		"01:58:30 hold  L10.drain",
		"01:58:30 hold  L10.drain",
		"01:58:30 stop idle1 L10.drain",
		"01:58:30 stop idle2 L10.drain",
		"02:00:00 admit booked L10",
		"02:00:00 start booked ",
		"02:00:00 start booked ",
		"03:59:30 stop_job booked L10.end",
		"04:00:00 gone booked ",
		"04:00:00 gone booked ",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the booking's events (-want +got):\n%s", d)
	}
	slices.Sort(heldNodes)
	slices.Sort(bookedNodes)
	if !slices.Equal(heldNodes, bookedNodes) || len(bookedNodes) != 2 {
		t.Errorf("booked job ran on %v, the drain held %v; want the held nodes", bookedNodes, heldNodes)
	}
	wantStops := []JobStop{{At: start.Add(2*time.Hour - 30*time.Second), Namespace: "workspace-b", Job: "booked", Rule: plan.RuleEnd,
		Reservation: "r-train"}}
	if d := cmp.Diff(wantStops, r.JobStops, cmp.Comparer(time.Time.Equal), cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".Reason"
	}, cmp.Ignore())); d != "" {
		t.Errorf("job stops (-want +got):\n%s", d)
	}
}

// Flex requests in the simulator (DESIGN L11): on 4 x 8 GPUs, a
// non-idle job of workspace-c holds one node until 01:00. The flex
// request "sweep" (4 x 8, max_run 2h) waits whole while only 24 GPUs are
// free (rule L11, never a partial admission), is admitted whole when
// the node frees, and is stopped at admitted + max_run - kill_timeout
// (rule L11.max_run). The flex request "late" (4 x 8, max_wait 30m),
// queued at 00:10 behind it, expires at 00:40 (rule L11.expire).
func TestSimFlexWaitsWholeAndExpires(t *testing.T) {
	text := calNodes + `
job "busy" {
  namespace = "workspace-c"
  gpus      = 8
  duration  = "1h"
}
job "sweep" {
  namespace    = "workspace-b"
  count        = 4
  gpus         = 8
  duration     = "5h"
  flex_max_run = "2h"
}
job "late" {
  namespace     = "workspace-b"
  at            = "2026-12-07 00:10"
  count         = 4
  gpus          = 8
  duration      = "1h"
  flex_max_run  = "1h"
  flex_max_wait = "30m"
}
`
	sc, r, evs := runScenario(t, text)
	var got []string
	for _, e := range evs {
		if e.Job != "sweep" && e.Job != "late" || e.Event == "submit" {
			continue
		}
		got = append(got, line(e))
		switch {
		case e.Event == "wait" && e.Job == "sweep":
			if e.Count != 4 || !strings.Contains(e.Reason, "flex request admitted only whole: 3 of 4 allocations fit now") {
				t.Errorf("sweep waits %d allocations: %q; want all 4, 3 of 4 fitting", e.Count, e.Reason)
			}
		case e.Event == "wait" && e.Job == "late":
			if e.Count != 4 || !strings.Contains(e.Reason, "flex request admitted only whole") {
				t.Errorf("late waits %d allocations: %q; want all 4, whole", e.Count, e.Reason)
			}
		case e.Event == "admit" && e.Count != 4:
			t.Errorf("%s admitted %d allocations: a flex request is admitted whole", e.Job, e.Count)
		case e.Event == "expire":
			if !strings.Contains(e.Reason, "more than max_wait 30m0s") {
				t.Errorf("late expired: %q", e.Reason)
			}
		}
	}
	want := []string{
		"00:00:00 wait sweep L11",
		"00:10:00 wait late L11",
		"00:40:00 expire late L11.expire",
		"01:00:00 admit sweep L3",
		"01:00:00 start sweep ",
		"01:00:00 start sweep ",
		"01:00:00 start sweep ",
		"01:00:00 start sweep ",
		"02:59:30 stop_job sweep L11.max_run",
		"03:00:00 gone sweep ",
		"03:00:00 gone sweep ",
		"03:00:00 gone sweep ",
		"03:00:00 gone sweep ",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("flex events (-want +got):\n%s", d)
	}
	if r.Expired != 1 {
		t.Errorf("%d expired, want late", r.Expired)
	}
	// The waits: sweep from its submission to its start (1h), late from
	// its queueing to its expiry (its 30m max_wait).
	times := map[string]time.Time{}
	for _, e := range evs {
		at, _ := time.Parse(time.RFC3339, e.T)
		if k := e.Job + " " + e.Event; (e.Job == "sweep" || e.Job == "late") && times[k].IsZero() {
			times[k] = at
		}
	}
	if w := times["sweep start"].Sub(times["sweep submit"]); w != time.Hour {
		t.Errorf("sweep waited %s, want 1h", w)
	}
	if w := times["late expire"].Sub(times["late submit"]); w != 30*time.Minute {
		t.Errorf("late waited %s before it expired, want its max_wait 30m", w)
	}
	if !times["late submit"].Equal(time.Date(2026, 12, 7, 0, 10, 0, 0, sc.Zone)) {
		t.Errorf("late submitted at %s", times["late submit"])
	}
}

// Bad Calendar and flex settings in a scenario name the field and value.
func TestBadCalendarScenario(t *testing.T) {
	booking := func(body string) string {
		return calNodes + "reservation \"r-1\" {\n" + body + "\n}\n"
	}
	good := `  namespace = "workspace-b"
  gpus      = 16
  start     = "2026-12-07 02:00"
  duration  = "2h"`
	for _, tc := range []struct{ name, text, want string }{
		{"alloc_gpus", booking(good + "\n  alloc_gpus = 3"), `alloc_gpus "3": must divide gpus (16)`},
		{"short", booking(strings.Replace(good, `"2h"`, `"30m"`, 1)), `duration "30m0s": must be from reservation_min_duration (1h0m0s)`},
		{"past", booking(strings.Replace(good, `"2026-12-07 02:00"`, `"2026-12-06 23:00"`, 1)), `start = "2026-12-06T23:00-08:00": before the scenario's start`},
		{"unbound", booking(strings.Replace(good, "workspace-b", "workspace-z", 1)), `namespace "workspace-z": is not bound to any quota node`},
		{"id", strings.Replace(booking(good), `"r-1"`, `"R_1"`, 1), `id "R_1": character 1 ('R') is not allowed`},
		{"L10", booking(good) + "reservation \"r-2\" {\n" + strings.Replace(good, "16", "40", 1) + "\n}\n",
			`gpus = 40: refused by law L10: Quota1.1 at 2026-12-07T02:00-08:00: 16 of 48 GPUs booked, 40 asked; earliest start that fits: 2026-12-07T04:00-08:00`},
		{"unknown booking", calNodes + "job \"j\" {\n  namespace = \"workspace-b\"\n  gpus = 8\n  duration = \"1h\"\n  reservation = \"r-9\"\n}\n",
			`job "j": reservation = "r-9": no reservation block of that ID`},
		{"other namespace", booking(good) + "job \"j\" {\n  namespace = \"workspace-c\"\n  gpus = 8\n  duration = \"1h\"\n  reservation = \"r-1\"\n}\n",
			`reservation = "r-1": the booking is for namespace "workspace-b", not "workspace-c"`},
		{"no max_run", calNodes + "job \"j\" {\n  namespace = \"workspace-b\"\n  gpus = 8\n  duration = \"1h\"\n  flex_max_wait = \"2h\"\n}\n",
			`flex_max_wait = "2h0m0s" without flex_max_run: a flex request needs max_run`},
		{"max_run", calNodes + "job \"j\" {\n  namespace = \"workspace-b\"\n  gpus = 8\n  duration = \"1h\"\n  flex_max_run = \"200h\"\n}\n",
			`flex_max_run = "200h": want a duration from 1ns to 168h0m0s`},
		{"flex and booking", booking(good) + "job \"j\" {\n  namespace = \"workspace-b\"\n  gpus = 8\n  duration = \"1h\"\n  reservation = \"r-1\"\n  flex_max_run = \"1h\"\n}\n",
			`flex_max_run and reservation: a flex request cannot name a reservation`},
		{"flex and idle", calNodes + "job \"j\" {\n  namespace = \"workspace-b\"\n  gpus = 8\n  duration = \"1h\"\n  idle = true\n  flex_max_run = \"1h\"\n}\n",
			`flex_max_run: an idle job cannot be a flex request`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadFile(writeScenario(t, tc.text, nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "scenario.hcl:") {
				t.Errorf("error %v, want it to name the line and contain %q", err, tc.want)
			}
		})
	}
}

// A booking and a flex request on the loaded reference day (its idle and
// entitled training, inference scaling at 08:00 and by demand): the
// booking's 3 x 8 GPUs of workspace-b from 10:00 are drained ahead and its
// job, waiting since 09:00, runs all its allocations at 10:00 (within one
// broker interval) and is stopped at 12:59:30 (L10.end); the flex request
// of workspace-c is admitted only whole, or expires at its max_wait.
func TestSimBookingOnTheReferenceDay(t *testing.T) {
	sc, err := LoadFile(referenceFile)
	if err != nil {
		t.Fatal(err)
	}
	sc.Length = 24 * time.Hour
	at := func(h int) time.Time { return time.Date(2026, 12, 7, h, 0, 0, 0, sc.Zone) }
	sc.Reservations = append(sc.Reservations, &Booking{ID: "r-big", Namespace: "workspace-b", Quota: "Quota1.1", GPUs: 24, AllocGPUs: 8,
		Start: at(10), Duration: 3 * time.Hour})
	sc.Jobs = append(sc.Jobs,
		&BatchJob{Name: "booked", Namespace: "workspace-b", At: at(9), Count: 3, GPUs: 8, Duration: 5 * time.Hour, Priority: 50,
			KillTimeout: 30 * time.Second, Reservation: "r-big"},
		&BatchJob{Name: "sweep", Namespace: "workspace-c", At: at(9), Count: 2, GPUs: 8, Duration: 3 * time.Hour, Priority: 50,
			KillTimeout: 30 * time.Second, Flex: &plan.Flex{MaxWait: 2 * time.Hour, MaxRun: time.Hour}})
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	var ev bytes.Buffer
	r, err := Run(sc, w, Options{Events: &ev})
	if err != nil {
		t.Fatal(err)
	}
	noConflicts(t, r)
	var booked []string
	sweep := map[string]int{}
	var sweepEnd string
	for _, e := range events(t, ev.Bytes()) {
		switch {
		case e.Job == "booked" && (e.Event == "start" || e.Event == "stop_job" || e.Event == "admit"):
			booked = append(booked, line(e))
		case e.Job == "sweep":
			sweep[e.Event] += max(1, e.Count)
			if e.Event == "admit" && e.Count != 2 {
				t.Errorf("sweep admitted %d of 2 allocations: a flex request is admitted whole", e.Count)
			}
			if e.Event == "expire" || e.Event == "stop_job" {
				sweepEnd = line(e)
			}
		}
	}
	want := []string{
		"10:00:00 admit booked L10",
		"10:00:00 start booked ",
		"10:00:00 start booked ",
		"10:00:00 start booked ",
		"12:59:30 stop_job booked L10.end",
	}
	if d := cmp.Diff(want, booked); d != "" {
		t.Errorf("the booking's job (-want +got):\n%s", d)
	}
	switch {
	case sweep["admit"] == 2 && sweep["start"] == 2:
		// Admitted whole: stopped at its max_run less its kill_timeout.
		if !strings.HasSuffix(sweepEnd, "stop_job sweep L11.max_run") {
			t.Errorf("sweep ran, then %q; want its L11.max_run stop", sweepEnd)
		}
	case sweep["admit"] == 0:
		if sweepEnd != "11:00:00 expire sweep L11.expire" {
			t.Errorf("sweep never admitted, then %q; want it expired at 11:00", sweepEnd)
		}
	default:
		t.Errorf("sweep events %v: want it admitted whole or expired", sweep)
	}
	t.Logf("sweep: %v, %s", sweep, sweepEnd)
}

// The simulator's side of L11.settle and of holds, on one node: a suspend
// stops the flex job's allocations, queues it again from now and forgets
// its admission; GPUs held for a group go to that group only (an idle job
// cannot take them), and to it before any other free GPU.
func TestSimSuspendAndHeldGPUs(t *testing.T) {
	s := oneNode()
	s.resByID = map[string]*plan.Reservation{}
	flex := s.testJob("flex", 4, false)
	flex.spec.Type, flex.spec.Flex, flex.spec.Gang = plan.JobBatch, &plan.Flex{MaxWait: time.Hour, MaxRun: time.Hour}, true
	flex.desired = 2
	s.now = int64(10 * time.Minute)
	if _, err := s.place(flex, 0); err != nil {
		t.Fatal(err)
	}
	flex.admittedAt = s.now
	s.now += int64(time.Minute)
	s.apply(&plan.Plan{Actions: []plan.Action{{Action: plan.ActionSuspend, Namespace: "ns", Job: "flex", Rule: plan.RuleFlexSettle}}})
	if flex.done || len(flex.live) != 0 || flex.missing() != 2 || flex.queuedAt != s.now || flex.admittedAt != 0 {
		t.Errorf("suspended: done %v, live %d, missing %d, queued %d, admitted %d; want queued again now with 2 pending",
			flex.done, len(flex.live), flex.missing(), flex.queuedAt, flex.admittedAt)
	}
	if len(s.res.JobStops) != 1 || !s.res.JobStops[0].Suspended {
		t.Errorf("job stops %+v, want the suspension", s.res.JobStops)
	}
	// GPUs 4-7 held for the group ns/owner/g until 20 minutes.
	s.stopping = nil
	for _, a := range s.allocs {
		s.gone(a)
	}
	owner, idle := s.testJob("owner", 4, false), s.testJob("idle", 4, true)
	s.apply(&plan.Plan{Actions: []plan.Action{{Action: plan.ActionHold, Namespace: "ns", Job: "owner", Group: "g", Node: "node-01",
		GPUIDs: []string{"GPU-01-7", "GPU-01-6", "GPU-01-5", "GPU-01-4"}, For: owner.key, Rule: plan.RulePrewarm,
		Until: time.Unix(0, int64(20*time.Minute))}}})
	a, err := s.place(owner, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"GPU-01-4", "GPU-01-5", "GPU-01-6", "GPU-01-7"}, a.ids); d != "" {
		t.Errorf("the owner's GPUs (-want +got):\n%s", d)
	}
	s.release(a)
	s.place(s.testJob("filler", 4, false), 0) // GPUs 0-3
	if _, err := s.place(idle, 0); err == nil {
		t.Error("an idle job took GPUs held for another group")
	}
}

// flavorBooking is a scenario on flavorQuota's tree (h100, a100): one node
// of 8 H100 and one of 8 A100, workspace-b (Quota1.2: h100 = 8, a100 = 8)
// booking 8 A100 from 02:00 for 2 hours, and its job naming the booking.
const flavorBooking = header + `length = "6h"
cluster {
  nodes "h" {
    count = 1
    gpus  = 8
    model = "NVIDIA H100 80GB HBM3"
  }
  nodes "a" {
    count = 1
    gpus  = 8
    model = "NVIDIA A100-SXM4-80GB"
  }
}
reservation "r-a100" {
  namespace = "workspace-b"
  gpus      = 8
  start     = "2026-12-07 02:00"
  duration  = "2h"
  flavor    = "a100"
}
job "booked" {
  namespace   = "workspace-b"
  at          = "2026-12-07 00:30"
  gpus        = 8
  duration    = "5h"
  reservation = "r-a100"
}
`

// A reservation block names its flavor (DESIGN L13: a booking is of one
// flavor, required in a tree of several): the booking of 8 a100 is
// checked against the a100 nominals, its job waits for the start and
// runs at 02:00 on the A100 node (node-02), in flavor a100, though the H100 node
// is free all along. A booking without a flavor in this tree of two, an
// unknown flavor, or a flavor and a model are errors naming file:line.
func TestSimBookingFlavor(t *testing.T) {
	files := map[string]string{"quota.hcl": flavorQuota}
	sc, err := LoadFile(writeScenario(t, flavorBooking, files))
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Reservations) != 1 || sc.Reservations[0].Flavor != "a100" || sc.Reservations[0].Quota != "Quota1.2" {
		t.Fatalf("reservations %+v, want r-a100 of flavor a100 at Quota1.2", sc.Reservations)
	}
	if d := cmp.Diff([]plan.Reservation{{ID: "r-a100", Namespace: "workspace-b", Quota: "Quota1.2", GPUs: 8, AllocGPUs: 8, Flavor: "a100",
		Start: time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}}, snapshotReservations(sc)); d != "" {
		t.Errorf("the snapshot's reservations (-want +got):\n%s", d)
	}
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	var ev bytes.Buffer
	r, err := Run(sc, w, Options{Events: &ev})
	if err != nil {
		t.Fatal(err)
	}
	noConflicts(t, r)
	var got []string
	for _, e := range events(t, ev.Bytes()) {
		if e.Job == "booked" && e.Event != "submit" && e.Event != "wait" {
			got = append(got, line(e)+" "+e.Node+" "+e.Flavor)
		}
	}
	want := []string{
		"02:00:00 admit booked L10  a100",
		"02:00:00 start booked  node-02 a100",
		"03:59:30 stop_job booked L10.end  ",
		"04:00:00 gone booked  node-02 ",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the booked job's events (-want +got):\n%s", d)
	}

	for _, tc := range []struct{ name, old, new, want string }{
		{"missing", "  flavor    = \"a100\"\n", "", `scenario.hcl:18: reservation "r-a100": flavor "": is missing: the tree has 2 flavors (h100, a100), name one`},
		{"unknown", `flavor    = "a100"`, `flavor    = "v100"`, `scenario.hcl:23: reservation "r-a100": flavor "v100": is not a flavor of the tree (h100, a100)`},
		{"and model", `flavor    = "a100"`, "flavor    = \"a100\"\n  model = \"NVIDIA A100-SXM4-80GB\"", `scenario.hcl:23: reservation "r-a100": flavor "a100": given with model "NVIDIA A100-SXM4-80GB": a booking gives flavor or model, not both`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadFile(writeScenario(t, strings.Replace(flavorBooking, tc.old, tc.new, 1), files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
