package command

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Bad input to gputide sim: exit code 1 and an error that names the flag
// or file and the value, at once (a /dev/zero scenario is not read).
func TestSimCommandRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	scenario := filepath.Join(dir, "s.hcl")
	os.WriteFile(scenario, []byte(`quota = "q.hcl"
time_zone = "UTC"
start = "2026-01-01"
length = "1h"
cluster {
  nodes "n" {
    count = 1
    gpus  = 8
  }
}
training "t" {
  trace       = "/dev/zero"
  trace_start = "2017-10-23"
  workspaces  = { "*" = "ws" }
}
`), 0o644)
	os.WriteFile(filepath.Join(dir, "q.hcl"), []byte("quota \"q\" {\n  gpus = 8\n  namespaces = [\"ws\"]\n}\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "-scenario", "/dev/zero"}, "Error loading scenario: /dev/zero: not a regular file (a character device): want a regular file\n"},
		{[]string{"sim", "-scenario", dir}, "Error loading scenario: " + dir + ": not a regular file (a folder): want a regular file\n"},
		{[]string{"sim", "-scenario", scenario}, "Error reading the workload: " + scenario + `:12: training "t": /dev/zero: not a regular file (a character device): want a regular file` + "\n"},
		{[]string{"sim", "-days", "NaN"}, "Invalid -days=NaN: want a number of days from 0 (the scenario's length) to 1830\n"},
		{[]string{"sim", "-days", "Inf"}, "Invalid -days=+Inf: want a number of days from 0 (the scenario's length) to 1830\n"},
		{[]string{"sim", "-seed", "-1"}, "Invalid -seed=-1: want a whole number from 0 to 9007199254740992\n"},
		{[]string{"sim", "-seed", "9007199254740993"}, "Invalid -seed=9007199254740993: want a whole number from 0 to 9007199254740992\n"},
	} {
		var out, errb bytes.Buffer
		start := time.Now()
		code := Run(tc.args, nil, &out, &errb)
		if code != 1 || errb.String() != tc.want {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, errb.String(), tc.want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%v took %s; want an error at once", tc.args, d)
		}
	}
}

// A scenario start in a daylight-saving gap runs, with a warning on stderr
// that gives the instant used.
func TestSimCommandWarnsOfAStartInADSTGap(t *testing.T) {
	dir := t.TempDir()
	scenario := filepath.Join(dir, "s.hcl")
	os.WriteFile(scenario, []byte(`quota = "q.hcl"
time_zone = "Europe/Berlin"
start = "2026-03-29 02:15"
length = "1h"
cluster {
  nodes "n" {
    count = 1
    gpus  = 8
  }
}
job "j" {
  namespace = "ws"
  gpus      = 1
  duration  = "30m"
}
`), 0o644)
	os.WriteFile(filepath.Join(dir, "q.hcl"), []byte("quota \"q\" {\n  gpus = 8\n  namespaces = [\"ws\"]\n}\n"), 0o644)
	var out, errb bytes.Buffer
	if code := Run([]string{"sim", "-scenario", scenario, "-out", filepath.Join(dir, "o")}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	want := "Warning: " + scenario + `:3: start = "2026-03-29 02:15" does not exist in Europe/Berlin (a daylight-saving gap): using 2026-03-29 03:15:00 CEST (2026-03-29T01:15:00Z)` + "\n"
	if !strings.HasPrefix(errb.String(), want) {
		t.Errorf("stderr %q; want it to start %q", errb.String(), want)
	}
	report, err := os.ReadFile(filepath.Join(dir, "o", "report.md"))
	if err != nil || !strings.Contains(string(report), `start = "2026-03-29 02:15" does not exist in Europe/Berlin`) {
		t.Errorf("report.md does not carry the note (%v)", err)
	}
}
