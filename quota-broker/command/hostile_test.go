package command

import (
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
)

func TestPrintableEscapesWhatATerminalWouldInterpret(t *testing.T) {
	for in, want := range map[string]string{
		"workspace-a/chat/server": "workspace-a/chat/server",
		"Quöta☃":                  "Quöta☃",
		"a\x1b[2Jb":               `a\x1b[2Jb`,
		"title\x1b]0;pwned\a":     `title\x1b]0;pwned\a`,
		"two\nlines\r":            `two\nlines\r`,
		"tab\there":               `tab\there`,
		"cell\x1fsep":             `cell\x1fsep`,
		"evil\u202egnp.exe":       `evil\u202egnp.exe`,
		"nul\x00":                 `nul\x00`,
		"del\x7f":                 `del\x7f`,
		"c1\u009b31m":             `c1\u009b31m`,
		"bad\xffutf8":             `bad\xffutf8`,
		"nbsp\u00a0":              `nbsp\u00a0`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestFormatPlanEscapesControlCharactersInNames(t *testing.T) {
	snap := &plan.Snapshot{Time: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}
	p := &plan.Plan{
		Actions: []plan.Action{
			{Action: plan.ActionStop, Alloc: "a\x1b[2J", Namespace: "ns", Job: "j\u202e", Group: "g\n",
				Node: "n\x1fode", GPUs: 1, Rule: plan.RuleIdleDebt, For: plan.GroupKey{Namespace: "x", Job: "y", Group: "z"}, Reason: "r\x07"},
		},
		Usage:    []plan.Usage{{Quota: "Q\x1b[31m", Nominal: 1}},
		Warnings: []plan.Warning{{Kind: plan.WarnGeneral, Namespace: "ns", Message: "job ns/j\x1b]0;t\a: namespace \"ns\" is not bound to any quota; not governed"}},
	}
	out := formatPlan(snap, p, false)
	for i := 0; i < len(out); i++ {
		if c := out[i]; c < 0x20 && c != '\n' || c == 0x7f {
			t.Fatalf("output holds control byte %#x at %d:\n%s", c, i, out)
		}
	}
	for _, want := range []string{`a\x1b[2J (ns/j\u202e/g\n)`, `n\x1fode`, `r\a`, `Q\x1b[31m`,
		`* job ns/j\x1b]0;t\a: namespace`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
}

// zeros is an endless reader of zero bytes, like /dev/zero.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestPlanOfEndlessBinaryInputExitsAtOnce(t *testing.T) {
	done := make(chan int, 1)
	var errOut strings.Builder
	go func() { done <- Run([]string{"plan", "-"}, zeros{}, &strings.Builder{}, &errOut) }()
	select {
	case code := <-done:
		want := `Error reading snapshot from standard input: JSON syntax error at line 1, column 1: invalid character '\x00' looking for beginning of value`
		if code != 1 || strings.TrimSpace(errOut.String()) != want {
			t.Errorf("exit %d, stderr %q; want 1, %q", code, errOut.String(), want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("gputide plan - on an endless stream of zero bytes did not exit")
	}
}

func TestPlanRejectsAJobWhoseGPUsOverflow(t *testing.T) {
	// Before the decoder bounded count x gpus, this job's total wrapped to a
	// negative number, made it entitled, and its "small" group was admitted
	// to all 16 GPUs of a 1-GPU quota.
	var groups []string
	for _, g := range []string{"g0", "g1", "g2"} {
		groups = append(groups, `{"namespace": "a", "job": "p", "group": "`+g+`", "type": "batch", "priority": 50,
		  "count": 2147483647, "gpus": 2147483647, "submitted_at": "2026-12-01T07:00:00Z"}`)
	}
	groups = append(groups, `{"namespace": "a", "job": "p", "group": "small", "type": "batch", "priority": 50,
	  "count": 16, "gpus": 1, "submitted_at": "2026-12-01T07:00:00Z"}`)
	var gpus []string
	for _, id := range strings.Fields("0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15") {
		gpus = append(gpus, `{"id": "g`+id+`"}`)
	}
	doc := `{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1, "namespaces": ["a"]},
	  "nodes": [{"id": "n1", "gpus": [` + strings.Join(gpus, ",") + `]}],
	  "pending": [` + strings.Join(groups, ",") + `]}`
	code, out, errOut := run(t, doc, "plan", "-json", "-")
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout:\n%s\nwant exit 1 and no plan", code, out)
	}
	if want := "pending[0]: count 2147483647 x gpus 2147483647 asks for 4611686014132420609 GPUs, more than 2147483647"; !strings.Contains(errOut, want) {
		t.Errorf("stderr = %s, want it to contain %s", errOut, want)
	}
}

// mixedIdleDebt is the smallest snapshot found that crashed gputide plan
// (exit 2, a nil dereference in plan/victims.go stopReason): a batch job of
// quota B (nominal 0, so its non-idle allocation is debt with no grace
// left) with one non-idle and one idle allocation. Its unit key is that of
// its largest-key allocation (debt), and stopReason reads a.debt of the
// idle allocation, which is nil. idle is job meta, so the decoder now
// rejects the snapshot; plan.Compute itself still panics on it.
const mixedIdleDebt = `{
  "time": "2026-12-01T08:00:00Z",
  "quota": {"name": "R", "gpus": 8, "children": [
    {"name": "B", "gpus": 0, "namespaces": ["b"]},
    {"name": "A", "gpus": 8, "namespaces": ["a"]}]},
  "nodes": [{"id": "n1", "gpus": [{"id": "g0"}, {"id": "g1"}]}],
  "allocations": [
    {"id": "x1", "namespace": "b", "job": "train", "group": "worker", "type": "batch", "priority": 50,
     "node": "n1", "gpu_ids": ["g0"], "started_at": "2026-12-01T07:00:00Z"},
    {"id": "x2", "namespace": "b", "job": "train", "group": "helper", "type": "batch", "priority": 50,
     "node": "n1", "gpu_ids": ["g1"], "idle": true, "started_at": "2026-12-01T07:00:00Z"}],
  "pending": [{"namespace": "a", "job": "chat", "group": "server", "type": "service", "priority": 50,
               "count": 1, "gpus": 2, "submitted_at": "2026-12-01T07:59:00Z"}]
}`

func TestPlanRejectsAJobWithIdleAndNonIdleAllocations(t *testing.T) {
	code, out, errOut := run(t, mixedIdleDebt, "plan", "-json", "-")
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 1 and no plan", code, out, errOut)
	}
	want := `allocations[1].idle: true differs from false in allocations[0], an allocation of the same job "b/train"`
	if !strings.Contains(errOut, want) {
		t.Errorf("stderr = %s, want it to contain %s", errOut, want)
	}
}
