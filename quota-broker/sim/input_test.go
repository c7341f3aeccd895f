package sim

import (
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/internal/regfile"
)

// allocated runs f and returns the bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A scenario path that is not a regular file is refused before a byte is
// read: /dev/zero would grow without end, a FIFO would block.
func TestLoadFileRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/dev/zero", dir, fifo} {
		var err error
		start := time.Now()
		n := allocated(func() { _, err = LoadFile(p) })
		if !errors.Is(err, regfile.ErrNotRegular) || !strings.HasPrefix(err.Error(), p+": not a regular file") {
			t.Errorf("LoadFile(%s): %v; want %s: not a regular file", p, err, p)
		}
		if d := time.Since(start); d > 2*time.Second || n > 1<<20 {
			t.Errorf("LoadFile(%s) took %s and allocated %d bytes; want an error at once", p, d, n)
		}
	}
}

// A trace, a fallback trace, a demand shape or a quota file at /dev/zero is
// an error naming the file and the scenario line, found at once.
func TestTracesAtDevZeroAreRefused(t *testing.T) {
	demand := func(trace, fallback string) string {
		if fallback != "" {
			fallback = "    fallback = \"" + fallback + "\"\n"
		}
		return header + `length = "1h"
cluster {
  nodes "n" {
    count = 2
    gpus  = 8
  }
}
inference "chat" {
  namespace = "workspace-a"
  gpus      = 8
  windows   = { day = "mon-fri 08:00-22:00 1" }
  demand {
    trace    = "` + trace + `"
` + fallback + `    extra    = 1
  }
}
`
	}
	for _, tc := range []struct {
		name, scenario, want string
	}{
		{"training trace", trainingScenario("/dev/zero", ""), `scenario.hcl:13: training "philly": /dev/zero: not a regular file (a character device): want a regular file`},
		{"training fallback", trainingScenario("absent.csv", "  fallback = \"/dev/zero\"\n"), `scenario.hcl:13: training "philly": /dev/zero: not a regular file (a character device): want a regular file`},
		{"demand trace", demand("/dev/zero", ""), `scenario.hcl:16: inference "chat" demand: /dev/zero: not a regular file (a character device): want a regular file`},
		{"demand fallback", demand("absent.csv", "/dev/zero"), `scenario.hcl:16: inference "chat" demand: /dev/zero: not a regular file (a character device): want a regular file`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := LoadFile(writeScenario(t, tc.scenario, nil))
			if err != nil {
				t.Fatal(err)
			}
			n := allocated(func() { _, err = sc.Workload() })
			if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
				t.Errorf("error %v; want it to end %q", err, tc.want)
			}
			if n > 1<<20 {
				t.Errorf("allocated %d bytes before failing; want under 1 MiB", n)
			}
		})
	}
	path := writeScenario(t, strings.Replace(trainingScenario("t.csv", ""), `"quota.hcl"`, `"/dev/zero"`, 1), nil)
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), `scenario.hcl:2: quota = "/dev/zero": /dev/zero: not a regular file`) {
		t.Errorf("quota = /dev/zero: %v", err)
	}
}

// A trace line over trace.MaxLineBytes is an error at its line, read
// without holding the whole line.
func TestATraceLineOverTheCapIsAnError(t *testing.T) {
	long := phillyHeader + strings.Repeat("x", 70<<10) + "\n"
	sc, err := LoadFile(writeScenario(t, trainingScenario("t.csv", ""), map[string]string{"t.csv": long}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sc.Workload()
	if err == nil || !strings.Contains(err.Error(), "t.csv:2: line longer than 64 KiB") {
		t.Errorf("error %v; want t.csv:2: line longer than 64 KiB", err)
	}
}

// A Philly trace with a header and no rows has no jobs: an error at the
// header's line, not an empty replay.
func TestAHeaderOnlyPhillyTraceIsAnError(t *testing.T) {
	sc, err := LoadFile(writeScenario(t, trainingScenario("t.csv", ""), map[string]string{"t.csv": "# a comment\n" + phillyHeader}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sc.Workload()
	if err == nil || !strings.HasSuffix(err.Error(), "t.csv:2: the trace has no jobs: a header and no rows") {
		t.Errorf("error %v; want t.csv:2: the trace has no jobs", err)
	}
}

// A local time inside a daylight-saving gap is used as Go's time.Date
// moves it, and said so with the instant used; times outside a gap and
// RFC 3339 times give no note. In America/Los_Angeles 2026-03-08 02:00
// to 03:00 does not exist.
func TestATimeInADSTGapIsNoted(t *testing.T) {
	text := strings.Replace(header, "2026-12-07 00:00", "2026-03-08 02:30", 1) + `length = "4h"
cluster {
  nodes "n" {
    count = 2
    gpus  = 8
  }
}
job "in-gap" {
  namespace = "workspace-b"
  at        = "2026-03-08 02:45"
  gpus      = 1
  duration  = "1h"
}
job "after" {
  namespace = "workspace-b"
  at        = "2026-03-08 03:00"
  gpus      = 1
  duration  = "1h"
}
job "rfc3339" {
  namespace = "workspace-b"
  at        = "2026-03-08T10:50:00Z"
  gpus      = 1
  duration  = "1h"
}
`
	sc, err := LoadFile(writeScenario(t, text, nil))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(sc.File)
	want := []string{
		filepath.Join(dir, "scenario.hcl") + `:4: start = "2026-03-08 02:30" does not exist in America/Los_Angeles (a daylight-saving gap): using 2026-03-08 03:30:00 PDT (2026-03-08T10:30:00Z)`,
		filepath.Join(dir, "scenario.hcl") + `:14: job "in-gap": at = "2026-03-08 02:45" does not exist in America/Los_Angeles (a daylight-saving gap): using 2026-03-08 03:45:00 PDT (2026-03-08T10:45:00Z)`,
	}
	if diff := cmp.Diff(want, sc.Notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	if got := sc.Start.UTC().Format(time.RFC3339); got != "2026-03-08T10:30:00Z" {
		t.Errorf("start %s; want 2026-03-08T10:30:00Z", got)
	}
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, w.Notes[:len(want)]); diff != "" {
		t.Errorf("workload notes (-want +got):\n%s", diff)
	}
}

// A local time that occurs twice (clocks go back: in America/Los_Angeles
// 2026-11-01 01:00 to 02:00 is lived once in PDT, then in PST) is used at
// its first occurrence and said so with both instants, as a gap is: a
// booking's start there is one of two instants an hour apart.
func TestATimeInADSTOverlapIsNoted(t *testing.T) {
	text := strings.Replace(header, "2026-12-07 00:00", "2026-10-31 00:00", 1) + `length = "72h"
cluster {
  nodes "n" {
    count = 2
    gpus  = 8
  }
}
reservation "r-fold" {
  namespace = "workspace-b"
  gpus      = 8
  start     = "2026-11-01 01:30"
  duration  = "2h"
}
job "after" {
  namespace = "workspace-b"
  at        = "2026-11-01 02:00"
  gpus      = 1
  duration  = "1h"
}
`
	sc, err := LoadFile(writeScenario(t, text, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(filepath.Dir(sc.File), "scenario.hcl") +
		`:15: reservation "r-fold": start = "2026-11-01 01:30" occurs twice in America/Los_Angeles (clocks go back): using the first, 2026-11-01 01:30:00 PDT (2026-11-01T08:30:00Z), not 2026-11-01 01:30:00 PST (2026-11-01T09:30:00Z)`}
	if diff := cmp.Diff(want, sc.Notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	if got := sc.Reservations[0].Start.UTC().Format(time.RFC3339); got != "2026-11-01T08:30:00Z" {
		t.Errorf("booking start %s; want the first 01:30, 2026-11-01T08:30:00Z", got)
	}
}
