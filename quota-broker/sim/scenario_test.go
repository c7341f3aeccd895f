package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/sim/trace"
)

// writeScenario writes a scenario and the files it names into a temporary
// folder (the reference quota tree as quota.hcl unless given) and returns
// the scenario's path.
func writeScenario(t *testing.T, text string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	q, err := os.ReadFile("../../examples/reference/quota.hcl")
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{"quota.hcl": string(q), "scenario.hcl": text}
	for k, v := range files {
		all[k] = v
	}
	for name, body := range all {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "scenario.hcl")
}

func events(t *testing.T, b []byte) []Event {
	t.Helper()
	var out []Event
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var e Event
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

const header = `
quota     = "quota.hcl"
time_zone = "America/Los_Angeles"
start     = "2026-12-07 00:00"
`

// Use case 2: after the quota move Quota1.1 holds 56 GPUs of non-idle work
// and Quota1.2 72. Until the debt grace has passed nothing is stopped; then
// team B's entitled job reclaims exactly the debt (L5.1).
func TestQuotaMove(t *testing.T) {
	var jobs strings.Builder
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&jobs, "job \"b%d\" {\n  namespace = \"workspace-b\"\n  gpus = 8\n  duration = \"24h\"\n}\n", i)
	}
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&jobs, "job \"c%02d\" {\n  namespace = \"workspace-c\"\n  gpus = 8\n  duration = \"24h\"\n}\n", i)
	}
	path := writeScenario(t, header+`
length = "4h"
cluster {
  nodes "h100" {
    count = 16
    gpus  = 8
  }
}
inference "chat" {
  namespace = "workspace-a"
  gpus      = 8
  default   = 0
  windows   = { day = "mon-fri 08:00-22:00 4" }
}
quota_move "use-case-2" {
  at   = "2026-12-07 02:00"
  gpus = { "Quota1.1" = 56, "Quota1.2" = 72 }
}
`+jobs.String(), nil)
	sc, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	var ev bytes.Buffer
	r, err := Run(sc, w, Options{Events: &ev, Sample: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	noConflicts(t, r)
	at := func(hhmm string) Sample {
		t.Helper()
		for _, s := range r.Samples {
			if s.T.Format("15:04") == hhmm {
				return s
			}
		}
		t.Fatalf("no sample at %s", hhmm)
		return Sample{}
	}
	check := func(hhmm string, b, c int) {
		t.Helper()
		s := at(hhmm)
		if s.NonIdle[1] != b || s.NonIdle[2] != c {
			t.Errorf("%s: non-idle Quota1.1 %d, Quota1.2 %d; want %d and %d (nominal %v)", hhmm, s.NonIdle[1], s.NonIdle[2], b, c, s.Nominal)
		}
	}
	check("01:55", 48, 80) // before the move: 48 + 80
	check("02:05", 48, 80) // debt within its grace is not stopped (L9)
	check("02:30", 56, 72) // B's entitled job reclaimed C's debt
	check("03:55", 56, 72)
	for _, s := range r.Samples {
		if s.NonIdle[1] > s.Nominal[1] {
			t.Errorf("%s: Quota1.1 runs %d non-idle GPUs, above its nominal %d", s.T.Format("15:04"), s.NonIdle[1], s.Nominal[1])
		}
	}
	move := time.Date(2026, 12, 7, 2, 0, 0, 0, sc.Zone)
	stops := 0
	for _, e := range events(t, ev.Bytes()) {
		if e.Event != "stop" {
			continue
		}
		stops++
		when, _ := time.Parse(time.RFC3339, e.T)
		if e.Rule != "L5.1" || e.Namespace != "workspace-c" || e.For != "workspace-b/b7/worker" || when.Before(move.Add(sc.Settings.DebtGrace)) {
			t.Errorf("stop %+v: want C's debt stopped by L5.1 for workspace-b/b7 after the grace", e)
		}
	}
	if stops != 1 {
		t.Errorf("%d stops, want exactly the one debt allocation", stops)
	}
}

const tiny = `
quota     = "quota.hcl"
time_zone = "America/Los_Angeles"
start     = "2026-12-07 00:00"
length    = "12h"
broker {
  kill_timeout = "30s"
  prewarm      = %v
}
cluster {
  nodes "n" {
    count = 1
    gpus  = 8
  }
}
inference "chat" {
  namespace = "workspace-a"
  gpus      = 8
  default   = 0
  windows   = { night = "mon 02:00-03:00 1" }
}
job "idle" {
  namespace  = "workspace-b"
  gpus       = 8
  duration   = "10h"
  idle       = true
  checkpoint = "25m"
}
`

// A victim holds its GPUs for its kill_timeout: inference claims the only
// node at 02:00 and, without pre-warm, runs at 02:00:30. With pre-warm the
// core stops the idle job at 02:00 - (kill_timeout 30s + drain_margin 60s)
// = 01:58:30 (rule L5.prewarm), holds its GPUs for inference, and
// inference runs at the boundary itself; the count is raised only then.
// The idle job loses the work since its last checkpoint, waits (the held
// GPUs are not its), and runs again when inference scales down.
func TestKillTimeoutAndLostWork(t *testing.T) {
	for _, prewarm := range []bool{false, true} {
		t.Run(fmt.Sprint("prewarm=", prewarm), func(t *testing.T) {
			path := writeScenario(t, fmt.Sprintf(tiny, prewarm), nil)
			sc, err := LoadFile(path)
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
			var got []string
			for _, e := range events(t, ev.Bytes()) {
				switch e.Event {
				case "stop", "start", "gone", "finish", "hold", "scale":
					got = append(got, fmt.Sprintf("%s %s %s %s", e.T[11:19], e.Event, e.Job, e.Rule))
				}
			}
			want := []string{"00:00:00 start idle "}
			if prewarm {
				want = append(want,
					"01:58:30 hold chat L5.prewarm",
					"01:58:30 stop idle L5.prewarm",
					"01:59:00 gone idle ",
					"02:00:00 scale chat autoscaler",
					"02:00:00 start chat ")
			} else {
				want = append(want,
					"02:00:00 scale chat autoscaler",
					"02:00:00 stop idle L5.1",
					"02:00:30 gone idle ",
					"02:00:30 start chat ")
			}
			want = append(want,
				"03:00:00 scale chat autoscaler",
				"03:00:00 stop chat autoscaler",
				"03:00:05 gone chat ",
				"03:00:05 start idle ")
			// The idle job ran 2h or 1h58m30s; with checkpoints every 25
			// minutes it lost 20m or 18m30s; the rest of its 10 hours follows.
			ran := map[bool]time.Duration{false: 2 * time.Hour, true: 118*time.Minute + 30*time.Second}[prewarm]
			lost := ran % (25 * time.Minute)
			end := time.Date(2026, 12, 7, 3, 0, 5, 0, sc.Zone).Add(10*time.Hour - ran + lost)
			want = append(want, end.Format("15:04:05")+" finish idle ")
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if d := r.LostGPUh - lost.Hours()*8; d > 1e-9 || d < -1e-9 {
				t.Errorf("work lost %.4f GPU-h, want %.4f", r.LostGPUh, lost.Hours()*8)
			}
			wait := map[bool]time.Duration{false: 30 * time.Second, true: 0}[prewarm]
			if len(r.ScaleUps) != 1 || r.ScaleUps[0].Wait != wait || !r.ScaleUps[0].Raised.Equal(r.ScaleUps[0].Due) {
				t.Errorf("scale-ups %+v, want one raised when due that waited %s", r.ScaleUps, wait)
			}
			if len(r.Takes) != 8 {
				t.Fatalf("inference took %d GPUs, want 8", len(r.Takes))
			}
			if prewarm {
				// The GPUs were freed ahead and held: free when taken.
				if tk := r.Takes[0]; tk.From != "" {
					t.Errorf("inference took %+v, want the free GPUs held for it", tk)
				}
			} else if r.Takes[0].Rule != plan.RuleIdleDebt || r.Takes[0].FromJob != "idle" {
				t.Errorf("inference took %+v, want the idle job's 8 GPUs by L5.1", r.Takes)
			}
		})
	}
}

// Bad scenario files give errors that name the file and the line.
func TestBadScenario(t *testing.T) {
	good := header + `length = "1h"
cluster {
  nodes "n" {
    count = 2
    gpus  = 8
  }
}
`
	for _, tc := range []struct {
		name, text string
		line       int
		want       string
	}{
		{"syntax", good + "inference \"x\" {\n  gpus = \n}\n", 13, "Invalid expression"},
		{"unknown attribute", good + "colour = \"red\"\n", 12, "Unsupported argument"},
		{"bad duration", strings.Replace(good, `length = "1h"`, `length = "1 hour"`, 1), 5, `length = "1 hour"`},
		{"bad zone", strings.Replace(good, "America/Los_Angeles", "Mars/Olympus", 1), 3, "Mars/Olympus"},
		{"bad time", strings.Replace(good, "2026-12-07 00:00", "7 Dec 2026", 1), 4, "7 Dec 2026"},
		{"no cluster", header + `length = "1h"` + "\n", 0, "missing cluster block"},
		{"bad window", good + "inference \"chat\" {\n  namespace = \"workspace-a\"\n  gpus = 8\n  windows = {\n    day = \"mon-fri 25:00-22:00 4\"\n  }\n}\n", 16, "25:00"},
		{"unbound namespace", good + "dev \"nb\" {\n  namespace = \"workspace-z\"\n  count = 1\n}\n", 13, `dev "nb": namespace "workspace-z" is not bound`},
		{"unbound inference namespace", good + "inference \"chat\" {\n  gpus = 8\n  namespace = \"workspace-z\"\n  windows = { day = \"mon-fri 08:00-22:00 4\" }\n}\n", 14, `inference "chat": namespace "workspace-z" is not bound`},
		{"unbound job namespace", good + "job \"j\" {\n  gpus = 1\n  duration = \"1h\"\n  namespace = \"workspace-z\"\n}\n", 15, `job "j": namespace "workspace-z" is not bound`},
		{"unbound training namespace", good + "training \"t\" {\n  trace = \"t.csv\"\n  trace_start = \"2017-10-23\"\n  workspaces = {\n    \"*\" = \"workspace-z\"\n  }\n}\n", 16, `namespace "workspace-z" is not bound`},
		{"negative count", good + "dev \"nb\" {\n  namespace = \"workspace-c\"\n  count = -1\n}\n", 14, "count = -1"},
		{"large count", good + "dev \"nb\" {\n  namespace = \"workspace-c\"\n  count = 100000000\n}\n", 14, "count = 100000000: want a whole number"},
		{"fraction", good + "job \"j\" {\n  namespace = \"workspace-c\"\n  gpus = 1.5\n  duration = \"1h\"\n}\n", 14, "gpus = 1.5"},
		{"missing", good + "job \"j\" {\n  namespace = \"workspace-c\"\n  duration = \"1h\"\n}\n", 12, "missing gpus"},
		{"duplicate", good + "dev \"x\" {\n  namespace = \"workspace-c\"\n  count = 1\n}\njob \"x\" {\n  namespace = \"workspace-c\"\n  gpus = 1\n  duration = \"1h\"\n}\n", 16, "name used twice"},
		{"move breaks L1", good + "quota_move \"m\" {\n  at = \"2026-12-07 00:30\"\n  gpus = { \"Quota1.1\" = 60 }\n}\n", 12, "Quota1"},
		{"move unknown quota", good + "quota_move \"m\" {\n  at = \"2026-12-07 00:30\"\n  gpus = { \"Quota9\" = 6 }\n}\n", 14, `no quota node "Quota9"`},
		{"bad gang", good + "training \"t\" {\n  trace = \"t.csv\"\n  trace_start = \"2017-10-23\"\n  gang = \"some\"\n  workspaces = { \"*\" = \"workspace-b\" }\n}\n", 15, `gang = "some"`},
		{"unknown flavor", good + "dev \"nb\" {\n  namespace = \"workspace-c\"\n  count = 1\n  flavors = [\"h100\"]\n}\n", 15, `dev "nb": flavors: "h100" is not a flavor of the quota tree (flavors: gpu)`},
		{"flavor twice", good + "job \"j\" {\n  namespace = \"workspace-c\"\n  gpus = 1\n  duration = \"1h\"\n  flavors = [\"gpu\", \"gpu\"]\n}\n", 16, `job "j": flavors: "gpu" named twice`},
		{"missing quota file", strings.Replace(good, `"quota.hcl"`, `"nope.hcl"`, 1), 2, "nope.hcl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeScenario(t, tc.text, nil)
			_, err := LoadFile(path)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, "scenario.hcl") || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q: want the file and %q", msg, tc.want)
			}
			if tc.line > 0 && !strings.Contains(msg, fmt.Sprintf("scenario.hcl:%d:", tc.line)) {
				t.Errorf("error %q: want line %d", msg, tc.line)
			}
		})
	}
	// An L1 violation in the quota tree names the quota file and line.
	path := writeScenario(t, good, map[string]string{"quota.hcl": "quota \"Q\" {\n  gpus = 8\n  quota \"R\" {\n    gpus = 9\n  }\n}\n"})
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), "quota.hcl:1") {
		t.Errorf("bad tree: error %v, want quota.hcl:1", err)
	}
}

const phillyHeader = "timestamp,duration,num_gpus,gpu_time,cluster\n"

func trainingScenario(trace string, extra string) string {
	return header + `length = "24h"
cluster {
  nodes "n" {
    count = 2
    gpus  = 8
  }
}
training "philly" {
  trace       = "` + trace + `"
  trace_start = "2017-10-23 00:00:00"
  workspaces  = { "*" = "workspace-b" }
` + extra + `}
`
}

// Bad trace rows give errors with the trace file and line.
func TestBadTraceRows(t *testing.T) {
	for _, tc := range []struct{ name, rows, want string }{
		{"timestamp", "2017-10-23 01:00:00,60.0,1,60.0,aa\n2017-10-23 25:00:00,60.0,1,60.0,aa\n", "t.csv:3: timestamp"},
		{"duration", "2017-10-23 01:00:00,-5,1,-5,aa\n", "t.csv:2: duration"},
		{"gpus", "2017-10-23 01:00:00,60.0,0,0,aa\n", "t.csv:2: num_gpus"},
		{"gpu_time", "2017-10-23 01:00:00,60.0,2,60.0,aa\n", "t.csv:2: gpu_time"},
		{"fields", "2017-10-23 01:00:00,60.0,1,aa\n", "t.csv:2: 4 fields"},
		{"quoted", "\"2017-10-23 01:00:00\",60.0,1,60.0,aa\n", "t.csv:2: quoted"},
		{"empty vc", "2017-10-23 01:00:00,60.0,1,60.0,\n", "t.csv:2: cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeScenario(t, trainingScenario("t.csv", ""), map[string]string{"t.csv": phillyHeader + tc.rows})
			sc, err := LoadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = sc.Workload()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := trace.ReadPhilly(strings.NewReader("time,gpus\n"), "h.csv", time.UTC); err == nil || !strings.Contains(err.Error(), "h.csv:1: header") {
		t.Errorf("bad header: %v", err)
	}
	for _, tc := range []struct{ text, want string }{
		{"hour,requests\n0,1\n0,2\n", "s.csv:3: hour 0 given twice"},
		{"hour,requests\n24,1\n", "s.csv:2: hour \"24\""},
		{"hour,requests\n0,1\n", "hour 1 is missing"},
		{"gmt_create,x\n2024-13-01 00:00:00,1\n", "s.csv:2: gmt_create"},
		{"when,what\n", "s.csv:1: unknown shape header"},
	} {
		if _, err := trace.ReadShape(strings.NewReader(tc.text), "s.csv", 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("shape %q: error %v, want %q", tc.text, err, tc.want)
		}
	}
}

// A truncated trace is reported, not silently cut: a last row without a
// line end, a row count other than expect_rows, and a trace that ends
// before the run.
func TestTruncatedTrace(t *testing.T) {
	rows := phillyHeader + "2017-10-23 01:00:00,600.0,1,600.0,aa\n2017-10-23 02:00:00,600.0,1,600.0,aa\n"
	cut := rows + "2017-10-23 03:00:00,60"
	path := writeScenario(t, trainingScenario("t.csv", ""), map[string]string{"t.csv": cut})
	sc, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sc.Workload()
	if !errors.Is(err, trace.ErrTruncated) || !strings.Contains(err.Error(), "t.csv:4:") {
		t.Errorf("cut file: error %v, want ErrTruncated at t.csv:4", err)
	}

	path = writeScenario(t, trainingScenario("t.csv", "  expect_rows = 3\n"), map[string]string{"t.csv": rows})
	if sc, err = LoadFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err = sc.Workload(); err == nil || !strings.Contains(err.Error(), "2 rows, expect_rows = 3") || !strings.Contains(err.Error(), "scenario.hcl:") {
		t.Errorf("short file: error %v", err)
	}

	path = writeScenario(t, trainingScenario("t.csv", ""), map[string]string{"t.csv": rows})
	if sc, err = LoadFile(path); err != nil {
		t.Fatal(err)
	}
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	warned := false
	for _, n := range w.Notes {
		warned = warned || strings.Contains(n, "WARNING: the trace ends at 2017-10-23 02:00:00")
	}
	if !warned || len(w.Jobs) != 2 {
		t.Errorf("a trace ending before the run: notes %q, %d jobs", w.Notes, len(w.Jobs))
	}
}

// The trace falls back to the sample only when the primary does not exist.
func TestTraceFallback(t *testing.T) {
	rows := phillyHeader + "2017-10-23 01:00:00,600.0,1,600.0,aa\n"
	path := writeScenario(t, trainingScenario("missing.csv", "  fallback = \"sample/t.csv\"\n"), map[string]string{"sample/t.csv": rows})
	sc, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Jobs) != 1 || !strings.Contains(w.Jobs[0].Origin, filepath.Join("sample", "t.csv")+":2") {
		t.Errorf("jobs %+v: want the sample's row", w.Jobs)
	}
	path = writeScenario(t, trainingScenario("missing.csv", ""), nil)
	if sc, err = LoadFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Workload(); err == nil || !strings.Contains(err.Error(), "missing.csv") || !strings.Contains(err.Error(), "scenario.hcl:") {
		t.Errorf("missing trace: %v", err)
	}
}

// Run refuses a run shorter than two broker intervals.
func TestMinLength(t *testing.T) {
	sc, err := LoadReference()
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.MinLength(); got != time.Minute {
		t.Errorf("MinLength %s, want 1m (interval %s)", got, sc.Broker.Interval)
	}
	sc.Broker.Interval = 5 * time.Minute
	sc.Length = 9 * time.Minute
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(sc, w, Options{}); err == nil || !strings.Contains(err.Error(), "length 9m0s is below the minimum 10m0s") {
		t.Errorf("error %v, want the length below the minimum 10m0s", err)
	}
}

// flavorQuota is a tree of two flavors for the flavor_shares tests.
const flavorQuota = `flavor "h100" {
  models = ["NVIDIA H100 80GB HBM3"]
}
flavor "a100" {
  models = ["NVIDIA A100-SXM4-80GB"]
}
quota "Quota1" {
  gpus = { h100 = 16, a100 = 16 }
  namespaces = ["workspace-a"]
  quota "Quota1.2" {
    gpus = { h100 = 8, a100 = 8 }
    namespaces = ["workspace-b"]
  }
}
`

// A training block's flavor_shares split its jobs by the flavors they
// allow (DESIGN L13): of 400 rows, each drawn to allow h100 only with
// probability 0.25 (93 drew it), the others a100 then h100 (the key's
// spaces trimmed); the draw is the scenario seed's, so the split is the
// same on every load. Bad shares are errors naming the
// file and line.
func TestTrainingFlavorShares(t *testing.T) {
	var rows strings.Builder
	rows.WriteString(phillyHeader)
	for i := 0; i < 400; i++ {
		fmt.Fprintf(&rows, "2017-10-23 01:%02d:%02d,60.0,1,60.0,aa\n", i/60, i%60)
	}
	files := map[string]string{"t.csv": rows.String(), "quota.hcl": flavorQuota}
	shares := "  flavor_shares = { \"h100\" = 0.25, \"a100, h100\" = 0.75 }\n"
	sc, err := LoadFile(writeScenario(t, trainingScenario("t.csv", shares), files))
	if err != nil {
		t.Fatal(err)
	}
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, j := range w.Jobs {
		got[strings.Join(j.Flavors, ",")]++
	}
	if d := cmp.Diff(map[string]int{"h100": 93, "a100,h100": 307}, got); d != "" {
		t.Errorf("jobs per allowed flavors (-want +got):\n%s", d)
	}

	for _, tc := range []struct{ name, extra, want string }{
		{"sum", "  flavor_shares = { \"h100\" = 0.5, \"a100\" = 0.25 }\n", `scenario.hcl:16: training "philly": flavor_shares: the shares add up to 0.75, want 1`},
		{"unknown", "  flavor_shares = { \"h100,v100\" = 1 }\n", `scenario.hcl:16: training "philly" flavor_shares["h100,v100"]: flavors: "v100" is not a flavor of the quota tree (flavors: h100, a100)`},
		{"both", "  flavors = [\"h100\"]\n  flavor_shares = { \"h100\" = 1 }\n", `scenario.hcl:17: training "philly": flavor_shares: give either flavors or flavor_shares, not both`},
	} {
		_, err := LoadFile(writeScenario(t, trainingScenario("t.csv", tc.extra), files))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A quota_move names the flavor whose nominals it sets (DESIGN L13):
// Quota1.2's a100 goes from 8 to 4 and its h100 stays 8; an unknown
// flavor is an error at file:line.
func TestQuotaMoveFlavor(t *testing.T) {
	text := header + `length = "2h"
cluster {
  nodes "n" {
    count = 2
    gpus  = 8
  }
}
quota_move "m" {
  at     = "2026-12-07 01:00"
  flavor = "a100"
  gpus   = { "Quota1.2" = 4 }
}
`
	files := map[string]string{"quota.hcl": flavorQuota}
	sc, err := LoadFile(writeScenario(t, text, files))
	if err != nil {
		t.Fatal(err)
	}
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	var ev bytes.Buffer
	res, err := Run(sc, w, Options{Policy: Gputide{}, Events: &ev})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events(t, ev.Bytes()) {
		if e.Event == "quota_move" {
			got = append(got, fmt.Sprintf("%s %s %d -> %d", e.Job, e.Flavor, *e.From, *e.To))
		}
	}
	if d := cmp.Diff([]string{"Quota1.2 a100 8 -> 4"}, got); d != "" {
		t.Errorf("quota_move events (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]QuotaChange{{Quota: "Quota1.2", From: 8, To: 4}}, res.Moves[0].Changes); d != "" {
		t.Errorf("move record (-want +got):\n%s", d)
	}
	// The total nominal after the move: h100 8 + a100 4.
	if last := res.Samples[len(res.Samples)-1]; len(last.Nominal) != 2 || last.Nominal[1] != 12 {
		t.Errorf("nominals at the end %v, want Quota1.2 at 12 (h100 8 + a100 4)", last.Nominal)
	}
	bad := strings.Replace(text, `flavor = "a100"`, `flavor = "v100"`, 1)
	if _, err := LoadFile(writeScenario(t, bad, files)); err == nil || !strings.Contains(err.Error(), `scenario.hcl:14: quota_move "m": flavor = "v100": not a flavor of the quota tree (flavors: h100, a100)`) {
		t.Errorf("unknown flavor: error %v", err)
	}
}
