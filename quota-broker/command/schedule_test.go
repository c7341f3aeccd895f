package command

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	nomadapi "github.com/hashicorp/nomad/api"
)

const policyFile = `
scaling "inference" {
  enabled = true
  min     = 0
  max     = 32
  policy {
    evaluation_interval = "1m"
    cooldown            = "1m"
    check "day-night" {
      source = "gputide-apm"
      query  = "schedule"
      strategy "gputide-schedule" {
        window_day    = "mon-fri 08:00-22:00 24"
        default_count = 2
        timezone      = "Europe/Berlin"
      }
    }
    target "nomad-target" {
      Job   = "inference"
      Group = "serve"
    }
  }
}
`

// jobJSON is a job as "nomad job run -output" writes it, with two
// gputide-schedule checks in its scaling policy (Nomad's list-of-maps shape).
const jobJSON = `{"Job": {"ID": "inference", "Name": "inference", "Namespace": "workspace-a", "TaskGroups": [{"Name": "serve", "Count": 2,
  "Scaling": {"Min": 0, "Max": 32, "Enabled": true, "Policy": {"evaluation_interval": "1m", "check": [
    {"day": [{"source": "gputide-apm", "query": "schedule", "strategy": [{"gputide-schedule": [{"window_day": "mon-fri 08:00-22:00 24", "default_count": 2, "timezone": "Europe/Berlin"}]}]}]},
    {"night": [{"source": "gputide-apm", "query": "schedule", "strategy": [{"gputide-schedule": [{"window_night": "mon-sun 22:00-06:00 1", "default_count": 4, "timezone": "Asia/Tokyo"}]}]}]}
  ]}}}]}}`

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func decodePreview(t *testing.T, out string) previewJSON {
	t.Helper()
	var got previewJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("-json output is not JSON: %v\n%s", err, out)
	}
	return got
}

func TestSchedulePreviewPolicyFileJSON(t *testing.T) {
	f := writeFile(t, "inference.hcl", policyFile)
	code, out, errOut := run(t, "", "schedule", "preview", "-policy", f, "-from", "2026-03-02T00:00:00Z", "-days", "1", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := previewJSON{TimeZone: "Europe/Berlin", Changes: []previewChangeJSON{
		{At: "2026-03-02T00:00:00Z", Local: "2026-03-02T01:00:00+01:00", Count: 2, Window: "default"},
		{At: "2026-03-02T07:00:00Z", Local: "2026-03-02T08:00:00+01:00", Count: 24, Window: "day"},
		{At: "2026-03-02T21:00:00Z", Local: "2026-03-02T22:00:00+01:00", Count: 2, Window: "default"},
	}}
	if diff := cmp.Diff(want, decodePreview(t, out)); diff != "" {
		t.Errorf("preview (-want +got):\n%s", diff)
	}
	// The exact key set of the shape.
	var raw map[string]any
	_ = json.Unmarshal([]byte(out), &raw)
	first := raw["changes"].([]any)[0].(map[string]any)
	if len(raw) != 2 || len(first) != 4 {
		t.Errorf("JSON keys: top %v, change %v; want timezone, changes and at, local, count, window", raw, first)
	}
}

func TestSchedulePreviewTable(t *testing.T) {
	f := writeFile(t, "inference.hcl", policyFile)
	code, out, errOut := run(t, "", "schedule", "preview", "-policy", f, "-from", "2026-03-07T00:00:00Z", "-days", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "Time zone Europe/Berlin, 3 days from 2026-03-07T01:00:00+01:00\n\n" +
		"Local                        UTC                   Count  Window\n" +
		"Sat 2026-03-07 01:00:00 CET  2026-03-07T00:00:00Z  2      default\n" +
		"Mon 2026-03-09 08:00:00 CET  2026-03-09T07:00:00Z  24     day\n" +
		"Mon 2026-03-09 22:00:00 CET  2026-03-09T21:00:00Z  2      default\n"
	if out != want {
		t.Errorf("output\n got:\n%s\nwant:\n%s", out, want)
	}
}

// One day is "1 day", and a start inside a second is shown as its first
// row is: rounded up to the second.
func TestSchedulePreviewTableOneDay(t *testing.T) {
	f := writeFile(t, "inference.hcl", policyFile)
	code, out, errOut := run(t, "", "schedule", "preview", "-policy", f, "-from", "2026-03-07T00:00:00.4Z", "-days", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "Time zone Europe/Berlin, 1 day from 2026-03-07T01:00:01+01:00\n\n" +
		"Local                        UTC                   Count  Window\n" +
		"Sat 2026-03-07 01:00:01 CET  2026-03-07T00:00:01Z  2      default\n"
	if out != want {
		t.Errorf("output\n got:\n%s\nwant:\n%s", out, want)
	}
}

func TestSchedulePreviewJSONJobspecNeedsCheck(t *testing.T) {
	f := writeFile(t, "job.json", jobJSON)
	code, _, errOut := run(t, "", "schedule", "preview", "-policy", f, "-from", "2026-03-02T00:00:00Z")
	want := `Error: ` + f + `: 2 gputide-schedule checks: choose one with -check; there are "day" (job "inference" group "serve"), "night" (job "inference" group "serve")`
	if code != 1 || strings.TrimSpace(errOut) != want {
		t.Errorf("exit %d, stderr\n got: %s\nwant: %s", code, errOut, want)
	}
	code, out, errOut := run(t, "", "schedule", "preview", "-policy", f, "-check", "night", "-from", "2026-03-02T00:00:00Z", "-days", "1", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want2 := previewJSON{TimeZone: "Asia/Tokyo", Changes: []previewChangeJSON{
		{At: "2026-03-02T00:00:00Z", Local: "2026-03-02T09:00:00+09:00", Count: 4, Window: "default"},
		{At: "2026-03-02T13:00:00Z", Local: "2026-03-02T22:00:00+09:00", Count: 1, Window: "night"},
		{At: "2026-03-02T21:00:00Z", Local: "2026-03-03T06:00:00+09:00", Count: 4, Window: "default"},
	}}
	if diff := cmp.Diff(want2, decodePreview(t, out)); diff != "" {
		t.Errorf("preview (-want +got):\n%s", diff)
	}
}

const jobHCL = `job "inference" {
  group "serve" {
    scaling {
      policy {
      }
    }
  }
}
`

func TestSchedulePreviewHCLJobspecGoesToNomad(t *testing.T) {
	var got nomadapi.JobsParseRequest
	nomad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/jobs/parse" || r.Header.Get("X-Nomad-Token") != "secret" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		_ = json.NewDecoder(r.Body).Decode(&got)
		var wrapped struct{ Job json.RawMessage }
		_ = json.Unmarshal([]byte(jobJSON), &wrapped)
		_, _ = w.Write(wrapped.Job)
	}))
	defer nomad.Close()
	t.Setenv("NOMAD_ADDR", nomad.URL)
	t.Setenv("NOMAD_TOKEN", "secret")
	f := writeFile(t, "job.nomad.hcl", jobHCL)
	code, out, errOut := run(t, "", "schedule", "preview", "-policy", f, "-check", "day", "-from", "2026-03-02T00:00:00Z", "-days", "1", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got.JobHCL != jobHCL {
		t.Errorf("Nomad got JobHCL %q, want the file", got.JobHCL)
	}
	if n := len(decodePreview(t, out).Changes); n != 3 {
		t.Errorf("%d changes, want 3", n)
	}

	// Nomad not answering: the error says to use JSON.
	c := &SchedulePreviewCommand{Meta: Meta{Ui: nil}, parseHCL: func([]byte) (*nomadapi.Job, error) {
		return nil, errors.New("nomad at http://127.0.0.1:1: connection refused")
	}}
	_, err := c.loadSchedule(f, "")
	want := f + `: an HCL jobspec is parsed by Nomad's /v1/jobs/parse, which failed: nomad at http://127.0.0.1:1: connection refused; give the job as JSON instead (nomad job run -output ` + f + ` > job.json)`
	if err == nil || err.Error() != want {
		t.Errorf("error\n got: %v\nwant: %s", err, want)
	}
}

func TestSchedulePreviewErrors(t *testing.T) {
	bad := writeFile(t, "bad.hcl", strings.Replace(policyFile, "08:00-22:00", "25:00-22:00", 1))
	good := writeFile(t, "good.hcl", policyFile)
	none := writeFile(t, "none.hcl", strings.Replace(policyFile, `"gputide-schedule"`, `"target-value"`, 1))
	broken := writeFile(t, "broken.hcl", `scaling "x" {`)
	tests := []struct {
		name string
		args []string
		want string // first line of stderr
	}{
		{"a bad window names file, check, key and value", []string{"-policy", bad},
			`Error: ` + bad + `: policy "inference" check "day-night": window_day: invalid time "25:00" in "mon-fri 25:00-22:00 24"`},
		{"no gputide-schedule check", []string{"-policy", none}, `Error: ` + none + `: no check with strategy "gputide-schedule"`},
		{"an unknown -check", []string{"-policy", good, "-check", "night"},
			`Error: ` + good + `: no gputide-schedule check named "night"; there are "day-night" (policy "inference")`},
		{"a file that does not parse", []string{"-policy", broken}, `Error: ` + broken + `: line 1, column 13: Unclosed configuration block; There is no closing brace for this block before the end of the file. This may be caused by incorrect brace nesting elsewhere in this file.`},
		{"a missing file", []string{"-policy", "/nonexistent/p.hcl"}, `Error: stat /nonexistent/p.hcl: no such file or directory`},
		{"no -policy", nil, `Missing -policy FILE: the Autoscaler policy file or jobspec to preview`},
		{"-days 0", []string{"-policy", good, "-days", "0"}, `Invalid -days 0: want 1..366`},
		{"a bad -from", []string{"-policy", good, "-from", "monday"}, `Invalid -from "monday": want RFC 3339, e.g. 2026-03-02T08:00:00+01:00`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, "", append([]string{"schedule", "preview"}, tt.args...)...)
			first, _, _ := strings.Cut(errOut, "\n")
			if code != 1 || first != tt.want || out != "" {
				t.Errorf("exit %d, stdout %q, stderr\n got: %s\nwant: %s", code, out, first, tt.want)
			}
		})
	}
}

// BenchmarkSchedulePreview30Days is the whole preview of 30 days of a
// schedule with a ramp: read and decode the policy file, parse the check,
// list the changes (issue 11: under 100 ms).
func BenchmarkSchedulePreview30Days(b *testing.B) {
	dir := b.TempDir()
	f := filepath.Join(dir, "p.hcl")
	src := strings.Replace(policyFile, `timezone      = "Europe/Berlin"`, `timezone      = "Europe/Berlin"
        ramp          = "10m"
        window_sat    = "sat 10:00-14:00 8"`, 1)
	if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
		b.Fatal(err)
	}
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	c := &SchedulePreviewCommand{}
	n := 0
	for b.Loop() {
		s, err := c.loadSchedule(f, "")
		if err != nil {
			b.Fatal(err)
		}
		n = len(s.Changes(from, 30*24*time.Hour))
	}
	b.ReportMetric(float64(n), "changes")
}
