package command

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/version"
)

var referenceSnapshot = filepath.Join("..", "..", "examples", "reference", "snapshot.json")

// run runs the CLI and returns its exit code, stdout and stderr.
func run(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// table returns the rows of the table that follows the line title in out,
// each split into its cells (columns are separated by two or more spaces).
func table(t *testing.T, out, title string) [][]string {
	t.Helper()
	lines := strings.Split(out, "\n")
	start := -1
	for i, l := range lines {
		if l == title {
			start = i + 1
			break
		}
	}
	if start < 0 {
		t.Fatalf("no %q section in output:\n%s", title, out)
	}
	var rows [][]string
	split := regexp.MustCompile(`\s{2,}`)
	for _, l := range lines[start:] {
		if strings.TrimSpace(l) == "" {
			break
		}
		rows = append(rows, split.Split(strings.TrimRight(l, " "), -1))
	}
	return rows
}

func TestPlanPrintsTablesForTheReferenceSnapshot(t *testing.T) {
	code, out, errOut := run(t, "", "plan", referenceSnapshot)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	if errOut != "" {
		t.Errorf("stderr is not empty:\n%s", errOut)
	}
	if !strings.HasPrefix(out, "Plan at 2026-12-01T08:00:00Z: ") {
		t.Errorf("output does not start with the plan's time:\n%s", out)
	}
	actions := table(t, out, "Actions")
	wantHeader := []string{"Action", "Rule", "Namespace/Job/Group or Alloc", "Node(s)", "GPUs", "For", "Reason"}
	if strings.Join(actions[0], "|") != strings.Join(wantHeader, "|") {
		t.Fatalf("actions header = %q, want %q", actions[0], wantHeader)
	}
	admitted, stops := false, 0
	for _, r := range actions[1:] {
		if len(r) != len(wantHeader) {
			t.Errorf("row %q has %d cells, want %d", r, len(r), len(wantHeader))
			continue
		}
		switch r[0] {
		case "admit":
			if r[2] == "workspace-a/chat/server" {
				admitted = true
				if r[1] != "L3" {
					t.Errorf("the inference group is admitted by rule %s, want L3 (DESIGN L3)", r[1])
				}
				if r[4] != "2 x 8" {
					t.Errorf("the inference group is admitted as %q GPUs, want \"2 x 8\"", r[4])
				}
				if n := strings.Split(r[3], ","); len(n) != 2 {
					t.Errorf("the inference admit names nodes %q, want two nodes", r[3])
				}
			}
		case "stop":
			stops++
			if !strings.HasPrefix(r[1], "L5.") {
				t.Errorf("stop %q carries rule %q, want an L5 rule", r[2], r[1])
			}
			if r[5] == "-" || r[5] == "" {
				t.Errorf("stop %q names no claimant in For", r[2])
			}
		}
	}
	if !admitted {
		t.Errorf("no admit of workspace-a/chat/server in:\n%s", out)
	}
	if stops == 0 {
		t.Errorf("every GPU is held, yet the plan stops nothing to admit 16 GPUs:\n%s", out)
	}

	usage := table(t, out, "Usage")
	wantUsageHeader := []string{"Quota", "Nominal", "Used", "NonIdle", "Borrowed", "Debt", "Lendable"}
	if strings.Join(usage[0], "|") != strings.Join(wantUsageHeader, "|") {
		t.Fatalf("usage header = %q, want %q", usage[0], wantUsageHeader)
	}
	nominal := map[string]string{}
	for _, r := range usage[1:] {
		if len(r) != len(wantUsageHeader) {
			t.Fatalf("usage row %q has %d cells", r, len(r))
		}
		nominal[r[0]] = r[1]
	}
	for q, n := range map[string]string{"Quota1": "128", "Quota1.1": "48", "Quota1.2": "80"} {
		if nominal[q] != n {
			t.Errorf("usage of %s shows nominal %q, want %s", q, nominal[q], n)
		}
	}
}

func TestPlanJSONForTheReferenceSnapshot(t *testing.T) {
	code, out, errOut := run(t, "", "plan", "-json", referenceSnapshot)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	var p plan.Plan
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("output is not a plan: %v\n%s", err, out)
	}
	if !strings.HasPrefix(out, "{\n  \"actions\": [") || !strings.HasSuffix(out, "}\n") {
		t.Errorf("output is not the indented plan object:\n%s", out)
	}
	var admit *plan.Action
	for i, a := range p.Actions {
		switch a.Action {
		case plan.ActionAdmit:
			if a.Namespace == "workspace-a" && a.Job == "chat" && a.Group == "server" {
				admit = &p.Actions[i]
			}
		case plan.ActionStop:
			if !strings.HasPrefix(string(a.Rule), "L5.") || a.For.IsZero() || a.Alloc == "" || a.GPUs == 0 {
				t.Errorf("stop %+v lacks an L5 rule, a claimant, an allocation or its GPUs", a)
			}
		}
	}
	if admit == nil {
		t.Fatalf("no admit of workspace-a/chat/server in %+v", p.Actions)
	}
	if admit.Rule != plan.RuleAdmission || admit.Count != 2 || admit.GPUs != 8 || len(admit.Nodes) != 2 {
		t.Errorf("admit = %+v, want rule L3, 2 allocations of 8 GPUs on 2 nodes", *admit)
	}
	if len(p.Usage) != 3 || p.Usage[0].Quota != "Quota1" || p.Usage[0].Nominal != 128 {
		t.Errorf("usage = %+v, want Quota1 (128) and its two children", p.Usage)
	}

	// The same input gives byte-identical output (DESIGN §3: deterministic).
	_, again, _ := run(t, "", "plan", "-json", referenceSnapshot)
	if again != out {
		t.Errorf("a second run printed different JSON")
	}
}

func TestPlanReadsStandardInputForDash(t *testing.T) {
	data, err := os.ReadFile(referenceSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	_, fromFile, _ := run(t, "", "plan", "-json", referenceSnapshot)
	code, fromStdin, errOut := run(t, string(data), "plan", "-json", "-")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	if fromStdin != fromFile {
		t.Errorf("plan of standard input differs from plan of the file")
	}
}

// small is a snapshot whose plan DESIGN fixes: the claimant fits on free
// GPUs, so it preempts nothing (L3), and bin-packing picks the node with
// the fewest free GPUs that still fit: node-02 (2 free) over node-01 (4).
const small = `{
  "time": "2026-12-01T08:00:00Z",
  "quota": {"name": "Quota1", "gpus": 8, "namespaces": ["workspace-a"]},
  "nodes": [
    {"id": "node-01", "datacenter": "dc1", "node_pool": "default",
     "gpus": [{"id": "g-1-0"}, {"id": "g-1-1"}, {"id": "g-1-2"}, {"id": "g-1-3"}]},
    {"id": "node-02", "datacenter": "dc1", "node_pool": "default",
     "gpus": [{"id": "g-2-0"}, {"id": "g-2-1"}, {"id": "g-2-2"}, {"id": "g-2-3"}]}],
  "allocations": [
    {"id": "alloc-1", "namespace": "workspace-a", "job": "old", "group": "g", "type": "service",
     "priority": 50, "node": "node-02", "gpu_ids": ["g-2-0", "g-2-1"], "started_at": "2026-12-01T07:00:00Z"}],
  "pending": [
    {"namespace": "workspace-a", "job": "new", "group": "g", "type": "service", "priority": 50,
     "count": 1, "gpus": 2, "submitted_at": "2026-12-01T07:59:00Z"}]
}`

func TestPlanOfAClaimantThatFitsAdmitsWithoutStops(t *testing.T) {
	code, out, errOut := run(t, small, "plan", "-")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	rows := table(t, out, "Actions")
	if len(rows) != 2 {
		t.Fatalf("want one action, got rows %q", rows)
	}
	r := rows[1]
	if r[0] != "admit" || r[1] != "L3" || r[2] != "workspace-a/new/g" || r[3] != "node-02" || r[4] != "1 x 2" {
		t.Errorf("action row = %q, want admit L3 workspace-a/new/g on node-02, 1 x 2", r)
	}
	usage := table(t, out, "Usage")
	// Used 4 of 8 after the admit: alloc-1's 2 GPUs and the new 2.
	if want := "Quota1|8|4|4|0|0|4"; len(usage) != 2 || strings.Join(usage[1], "|") != want {
		t.Errorf("usage rows = %q, want %s", usage, want)
	}
	if !strings.HasPrefix(out, "Plan at 2026-12-01T08:00:00Z: 1 admit, 0 stops, 0 waits, 0 expires\n") {
		t.Errorf("summary line wrong:\n%s", out)
	}
}

func TestPlanRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gpuTwice := write("twice.json", strings.Replace(small, `"allocations": [`,
		`"allocations": [
    {"id": "alloc-0", "namespace": "workspace-a", "job": "x", "group": "g", "type": "batch",
     "priority": 50, "node": "node-02", "gpu_ids": ["g-2-1"], "started_at": "2026-12-01T07:00:00Z"},`, 1))
	unknownKey := write("unknown.json", strings.Replace(small, `"count": 1,`, `"count": 1, "replicas": 3,`, 1))
	tooLong := write("wait.json", strings.Replace(small, `"submitted_at": "2026-12-01T07:59:00Z"}`,
		`"submitted_at": "2026-12-01T07:59:00Z", "flex": {"max_wait": "200h"}}`, 1))

	tests := []struct {
		name    string
		stdin   string
		args    []string
		wantErr string
	}{
		{"a GPU used twice names the allocation, the index and the GPU",
			"", []string{"plan", gpuTwice},
			`allocations[1].gpu_ids[1]: GPU "g-2-1" is used twice (also by allocations[0])`},
		{"an unknown key names its path",
			"", []string{"plan", "-json", unknownKey},
			`pending[0].replicas: unknown key "replicas"`},
		{"a max_wait above 168h names the value",
			"", []string{"plan", tooLong},
			`pending[0].flex.max_wait: "200h" is above the maximum of 168h`},
		{"invalid JSON on standard input is reported as such",
			"{", []string{"plan", "-"},
			`Error reading snapshot from standard input: unexpected end of the JSON input`},
		{"a missing file is reported",
			"", []string{"plan", filepath.Join(dir, "absent.json")},
			`no such file or directory`},
		{"no argument is an error",
			"", []string{"plan"},
			`This command takes one argument: <snapshot.json> (or - for standard input)`},
		{"two arguments are an error",
			"", []string{"plan", "a.json", "b.json"},
			`This command takes one argument`},
		{"an unknown flag is an error",
			"", []string{"plan", "-yaml", "a.json"},
			`Error parsing flags: flag provided but not defined: -yaml`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, tt.stdin, tt.args...)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if out != "" {
				t.Errorf("stdout is not empty:\n%s", out)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr =\n%s\nwant it to contain\n%s", errOut, tt.wantErr)
			}
		})
	}
}

func TestPlanErrorNamesTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "snap.json")
	if err := os.WriteFile(p, []byte(`{"time": "noon", "quota": {"name": "Q", "gpus": 1}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run(t, "", "plan", p)
	want := `Error reading snapshot "` + p + `": time: "noon" is not an RFC 3339 time (such as "2026-12-01T08:00:00Z")`
	if code != 1 || strings.TrimSpace(errOut) != want {
		t.Errorf("exit %d, stderr %q; want 1, %q", code, errOut, want)
	}
}

func TestPlanHelp(t *testing.T) {
	code, out, errOut := run(t, "", "plan", "-help")
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	if !strings.Contains(out, "Usage: gputide plan [options] <snapshot.json>") || !strings.Contains(out, "-json") {
		t.Errorf("help text missing usage or -json:\n%s", out)
	}
	if errOut != "" {
		t.Errorf("stderr is not empty: %q", errOut)
	}
}

func TestVersion(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		out  string
		err  string
	}{
		{"the version command prints the version", []string{"version"}, 0, "gputide v0.1.0-dev\n", ""},
		{"the -version flag prints the version", []string{"-version"}, 0, "gputide v0.1.0-dev\n", ""},
		{"the version command takes no arguments", []string{"version", "x"}, 1, "", "This command takes no arguments\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, "", tt.args...)
			if code != tt.code || out != tt.out || !strings.HasPrefix(errOut, tt.err) {
				t.Errorf("got exit %d, stdout %q, stderr %q; want %d, %q, %q", code, out, errOut, tt.code, tt.out, tt.err)
			}
		})
	}

	// make build sets the commit.
	defer func(c string) { version.Commit = c }(version.Commit)
	version.Commit = "9fdc0b8a1c2e"
	for _, args := range [][]string{{"version"}, {"-version"}} {
		if code, out, _ := run(t, "", args...); code != 0 || out != "gputide v0.1.0-dev (9fdc0b8a1c2e)\n" {
			t.Errorf("%v with a commit: exit %d, stdout %q", args, code, out)
		}
	}
}

// The top level behaves like the nomad CLI's, plus "help [command]": help
// that was asked for goes to stdout with 0; no command, or an unknown one,
// shows the usage on stderr with 1, or 127 and a line naming the command.
func TestTopLevelUsageHelpAndUnknownCommands(t *testing.T) {
	const usage = "Usage: gputide [--version] [--help] <command> [<args>]\n\nAvailable commands are:\n"
	const planUsage = "Usage: gputide plan [options] <snapshot.json>\n"
	tests := []struct {
		name     string
		args     []string
		code     int
		out, err string // prefixes; "" means empty
	}{
		{"no command shows the usage as an error", nil, 1, "", usage},
		{"help shows the usage", []string{"help"}, 0, usage, ""},
		{"-help shows the usage", []string{"-help"}, 0, usage, ""},
		{"help plan shows plan's help", []string{"help", "plan"}, 0, planUsage, ""},
		{"plan -help shows plan's help", []string{"plan", "-help"}, 0, planUsage, ""},
		{"help version shows version's help", []string{"help", "version"}, 0, "Usage: gputide version\n", ""},
		{"an unknown command is named", []string{"frobnicate"}, 127, "", "gputide: unknown command \"frobnicate\"\n\n" + usage},
		{"help of an unknown command names it", []string{"help", "frobnicate"}, 127, "", "gputide: unknown command \"frobnicate\"\n\n" + usage},
		{"a flag without a command is named", []string{"-frobnicate"}, 1, "", "gputide: unknown flag \"-frobnicate\"; give a command\n\n" + usage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, "", tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			if !strings.HasPrefix(out, tt.out) || (tt.out == "") != (out == "") {
				t.Errorf("stdout %q, want it to start with %q", out, tt.out)
			}
			if !strings.HasPrefix(errOut, tt.err) || (tt.err == "") != (errOut == "") {
				t.Errorf("stderr %q, want it to start with %q", errOut, tt.err)
			}
			if usageOut := out + errOut; strings.HasPrefix(usageOut, usage) || strings.Contains(usageOut, "unknown") {
				for _, c := range []string{"agent", "plan", "sim", "version", "gputide help <command>"} {
					if !strings.Contains(usageOut, c) {
						t.Errorf("usage lacks %q:\n%s", c, usageOut)
					}
				}
			}
		})
	}
	// help <command> prints exactly what <command> -help does.
	_, viaHelp, _ := run(t, "", "help", "plan")
	_, viaFlag, _ := run(t, "", "plan", "-help")
	if viaHelp != viaFlag {
		t.Errorf("help plan:\n%s\nplan -help:\n%s", viaHelp, viaFlag)
	}
}

func TestEveryRegisteredCommandHasHelpAndSynopsis(t *testing.T) {
	for name, factory := range Commands(Meta{}) {
		c, err := factory()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.HasPrefix(c.Help(), "Usage: gputide "+name) {
			t.Errorf("%s: help does not start with its usage line: %q", name, c.Help())
		}
		if c.Synopsis() == "" {
			t.Errorf("%s: empty synopsis", name)
		}
	}
}

// A word after a command group that is none of its subcommands is named
// on stderr, above the group's usage, with exit code 1 (the nomad CLI shows
// a group's usage with 1 too); -help after it still shows the usage with 0.
func TestUnknownSubcommandIsNamed(t *testing.T) {
	for _, group := range []string{"quota", "job", "reservation", "schedule"} {
		code, out, errOut := run(t, "", group, "bogus")
		want := "gputide " + group + ": unknown subcommand \"bogus\"\n\nUsage: gputide " + group + " <subcommand> [options]\n"
		if code != 1 || out != "" || !strings.HasPrefix(errOut, want) || !strings.Contains(errOut, "Subcommands:") {
			t.Errorf("%s bogus: exit %d, stdout %q, stderr %q; want 1, nothing, and stderr starting %q with the subcommands", group, code, out, errOut, want)
		}
	}
	if code, out, errOut := run(t, "", "quota"); code != 1 || out != "" || strings.Contains(errOut, "unknown") {
		t.Errorf("quota: exit %d, stdout %q, stderr %q; want 1 and the usage alone", code, out, errOut)
	}
	if code, out, _ := run(t, "", "quota", "bogus", "-help"); code != 0 || !strings.HasPrefix(out, "Usage: gputide quota <subcommand>") {
		t.Errorf("quota bogus -help: exit %d, stdout %q; want 0 and the usage", code, out)
	}
}

// Help text keeps to 80 columns, bar the usage line (a long synopsis of
// required flags, as nomad's own).
func TestHelpLinesFitEightyColumns(t *testing.T) {
	for name, factory := range Commands(Meta{}) {
		c, err := factory()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, line := range strings.Split(c.Help(), "\n") {
			if n := utf8.RuneCountInString(line); i > 0 && n > 80 {
				t.Errorf("%s -help line %d is %d columns wide: %q", name, i+1, n, line)
			}
		}
	}
}

func TestFormatPlanDrawsTheTables(t *testing.T) {
	snap := &plan.Snapshot{Time: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}
	p := &plan.Plan{
		Actions: []plan.Action{
			{Action: plan.ActionStop, Alloc: "5b0c7c4e-1f2a-4b7e-9c1d-0e6f7a8b9c0d", Namespace: "workspace-c",
				Job: "train-9", Group: "w", Node: "node-03", GPUs: 8, Rule: plan.RuleChild,
				For: plan.GroupKey{Namespace: "workspace-a", Job: "chat", Group: "server"}, Reason: "child-level preemption for Quota1"},
			{Action: plan.ActionAdmit, Namespace: "workspace-a", Job: "chat", Group: "server", Count: 2,
				Nodes: []string{"node-03", "node-07"}, GPUs: 8, Rule: plan.RuleAdmission},
			{Action: plan.ActionWait, Namespace: "workspace-b", Job: "big", Group: "g", Count: 1, GPUs: 8,
				Rule: plan.RuleAdmission, Reason: "Quota1.1: 48 of 48 GPUs in use; 8 more needed"},
			{Action: plan.ActionExpire, Namespace: "workspace-b", Job: "flex|job", Group: "g", Count: 1, GPUs: 4,
				Rule: plan.RuleFlex, Reason: "waited 170h"},
		},
		Usage: []plan.Usage{
			{Quota: "Quota1", Nominal: 128, Used: 120, NonIdle: 112, Lendable: 8},
			{Quota: "Quota1.1", Nominal: 48, Used: 56, NonIdle: 40, Borrowed: 8, Debt: 0},
		},
		Warnings: []plan.Warning{{Kind: plan.WarnGeneral, Message: `quota "Quota1": nominal 128 GPUs exceeds the 120 healthy GPUs in the cluster`}},
	}
	want := `Plan at 2026-12-01T08:00:00Z: 1 admit, 1 stop, 1 wait, 1 expire

Actions
Action  Rule  Namespace/Job/Group or Alloc      Node(s)          GPUs   For                      Reason
stop    L5.2  5b0c7c4e (workspace-c/train-9/w)  node-03          8      workspace-a/chat/server  child-level preemption for Quota1
admit   L3    workspace-a/chat/server           node-03,node-07  2 x 8  -                        -
wait    L3    workspace-b/big/g                 -                1 x 8  -                        Quota1.1: 48 of 48 GPUs in use; 8 more needed
expire  L11   workspace-b/flex|job/g            -                1 x 4  -                        waited 170h

Usage
Quota     Nominal  Used  NonIdle  Borrowed  Debt  Lendable
Quota1    128      120   112      0         0     8
Quota1.1  48       56    40       8         0     0

Warnings
* quota "Quota1": nominal 128 GPUs exceeds the 120 healthy GPUs in the cluster`
	if got := formatPlan(snap, p, false); got != want {
		t.Errorf("formatPlan =\n%s\nwant\n%s", got, want)
	}
	if got := formatPlan(snap, p, true); !strings.Contains(got, "5b0c7c4e-1f2a-4b7e-9c1d-0e6f7a8b9c0d (workspace-c/train-9/w)") {
		t.Errorf("verbose output lacks the full allocation ID:\n%s", got)
	}
	empty := formatPlan(snap, &plan.Plan{}, false)
	if !strings.Contains(empty, "Actions\nNo actions: nothing to admit, stop or expire\n") {
		t.Errorf("empty plan output:\n%s", empty)
	}
}
