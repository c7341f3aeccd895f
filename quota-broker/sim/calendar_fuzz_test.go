package sim

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/gputide/gputide/quota-broker/reservation"
)

// hclString is s as an HCL string literal (escapes, "${" and "%{" kept
// literal), so a fuzzed value reaches the attribute as written.
func hclString(s string) string {
	return string(hclwrite.TokensForValue(cty.StringVal(strings.ToValidUTF8(s, "?"))).Bytes())
}

// FuzzScenarioCalendar: a scenario's reservation blocks and its jobs'
// reservation, flex_max_wait and flex_max_run keys (DESIGN L10, L11), with
// any values, never panic the parser and parse in bounded time; an error
// names the scenario's file and line; what is accepted keeps the rules:
// a booking of a valid ID, bound namespace, alloc_gpus dividing gpus, a
// window from the scenario's start to reservation_max_ahead after it of
// reservation_min_duration to 90 days, bookings fitting L10; a job names a
// booking of its own namespace, and a flex job names none and is not idle.
func FuzzScenarioCalendar(f *testing.F) {
	q, err := os.ReadFile("../../examples/reference/quota.hcl")
	if err != nil {
		f.Fatal(err)
	}
	fsys := fstest.MapFS{"quota.hcl": {Data: q}}
	f.Add("r-train", "workspace-b", "16", "8", "2026-12-07 02:00", "2h", "r-train", "workspace-b", "", "", false, "2")
	f.Add("R1", "workspace-b", "16", "0", "2026-12-07 02:00", "90d", "nope", "workspace-c", "1h", "", true, "1")
	f.Add("..", "nowhere", "-1", "3", "2026-11-01 01:30", "1e9h", "", "workspace-b", "", "2h", false, "100000")
	f.Add("r", "workspace-b", "9223372036854775808", "1.5", "9999-12-31 23:59", "-1h", "r", "workspace-b", "169h", "1h", true, "0")
	f.Add("r", "workspace-b", `"16"`, "8", "2026-12-07T02:00:00+09:00", "2160h", "r", "workspace-b", "0s", "168h", false, "1e30")
	f.Add("r", "workspace-b", "48", "8", "2026-12-07 02:00", "1h", "r", "workspace-b", "", "1ns", false, "null")
	f.Fuzz(func(t *testing.T, id, ns, gpus, alloc, start, duration, jobRes, jobNS, flexWait, flexRun string, idle bool, count string) {
		// Numbers go in as written (HCL expressions of one token at most);
		// anything longer or with a newline or brace is not a number.
		for _, n := range []*string{&gpus, &alloc, &count} {
			if len(*n) > 40 || strings.ContainsAny(*n, "\n\r{}#/$%*") {
				*n = "1"
			}
		}
		var b strings.Builder
		b.WriteString(header + "length = \"24h\"\ncluster {\n  nodes \"n\" {\n    count = 16\n    gpus = 8\n  }\n}\n")
		b.WriteString("reservation " + hclString(id) + " {\n  namespace = " + hclString(ns) + "\n  gpus = " + gpus + "\n")
		if alloc != "0" {
			b.WriteString("  alloc_gpus = " + alloc + "\n")
		}
		b.WriteString("  start = " + hclString(start) + "\n  duration = " + hclString(duration) + "\n}\n")
		b.WriteString("job \"j\" {\n  namespace = " + hclString(jobNS) + "\n  gpus = 8\n  duration = \"1h\"\n  count = " + count + "\n")
		if jobRes != "" {
			b.WriteString("  reservation = " + hclString(jobRes) + "\n")
		}
		if flexWait != "" {
			b.WriteString("  flex_max_wait = " + hclString(flexWait) + "\n")
		}
		if flexRun != "" {
			b.WriteString("  flex_max_run = " + hclString(flexRun) + "\n")
		}
		if idle {
			b.WriteString("  idle = true\n")
		}
		b.WriteString("}\n")
		text := b.String()
		t0 := time.Now()
		sc, err := Parse([]byte(text), "scenario.hcl", fsSource{fsys: fsys, dir: "."})
		if d := time.Since(t0); d > 2*time.Second {
			t.Fatalf("parse took %s:\n%s", d, text)
		}
		if err != nil {
			var se *Error
			if !errors.As(err, &se) || !regexp.MustCompile(`^scenario\.hcl:\d+$`).MatchString(se.Pos) {
				t.Fatalf("error %T %q names no scenario.hcl:line:\n%s", err, err, text)
			}
			return
		}
		checkAccepted(t, sc, text)
	})
}

// checkAccepted asserts the Calendar and flex rules on a parsed scenario.
func checkAccepted(t *testing.T, sc *Scenario, text string) {
	t.Helper()
	byID := map[string]*Booking{}
	for _, r := range sc.Reservations {
		byID[r.ID] = r
		switch {
		case reservation.ValidID(r.ID) != nil:
			t.Fatalf("accepted booking ID %q:\n%s", r.ID, text)
		case r.GPUs <= 0 || r.AllocGPUs <= 0 || r.GPUs%r.AllocGPUs != 0:
			t.Fatalf("accepted booking %d GPUs by %d:\n%s", r.GPUs, r.AllocGPUs, text)
		case r.Start.Before(sc.Start) || r.Start.After(sc.Start.Add(sc.Settings.ReservationMaxAhead)):
			t.Fatalf("accepted booking start %s (scenario from %s):\n%s", r.Start, sc.Start, text)
		case r.Duration < sc.Settings.ReservationMinDuration || r.Duration > reservation.MaxDuration:
			t.Fatalf("accepted booking duration %s:\n%s", r.Duration, text)
		case r.Quota == "":
			t.Fatalf("accepted booking with no quota node:\n%s", text)
		}
	}
	for _, j := range sc.Jobs {
		if j.Reservation != "" {
			r := byID[j.Reservation]
			if r == nil || r.Namespace != j.Namespace {
				t.Fatalf("job %q accepted naming reservation %q:\n%s", j.Name, j.Reservation, text)
			}
		}
		if j.Flex != nil && (j.Idle || j.Reservation != "" || j.Flex.Check() != nil) {
			t.Fatalf("job %q accepted as flex %+v, idle %v, reservation %q:\n%s", j.Name, j.Flex, j.Idle, j.Reservation, text)
		}
	}
}
