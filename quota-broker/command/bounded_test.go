package command

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
)

// Issue 8, item 5: bad input to "gputide plan" is an error that names the
// field and the value, with exit code 1, and memory and output stay
// proportional to the input.

// pendingDoc is a valid snapshot with one pending group whose JSON members
// after "gpus" are extra (such as a datacenters list).
func pendingDoc(ns, job, group, extra string) string {
	return `{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 8, "namespaces": [` + ns + `]},
 "nodes": [{"id": "n1", "gpus": [{"id": "g1"}]}],
 "allocations": [{"id": "a1", "namespace": ` + ns + `, "job": "old", "group": "g", "type": "batch", "priority": 50,
   "node": "n1", "gpu_ids": ["g1"], "started_at": "2026-12-01T07:00:00Z", "stopping_for": "ns/j/g"}],
 "pending": [{"namespace": ` + ns + `, "job": ` + job + `, "group": ` + group + `, "type": "batch", "priority": 50,
   "count": 1, "gpus": 1, "submitted_at": "2026-12-01T07:00:00Z"` + extra + `}]}`
}

// runFile writes doc to a file, runs "gputide plan" on it and returns the
// exit code, stdout, stderr and the bytes allocated while it ran.
func runFile(t *testing.T, doc string, args ...string) (int, string, string, uint64) {
	t.Helper()
	name := filepath.Join(t.TempDir(), "snapshot.json")
	if err := os.WriteFile(name, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code, out, errOut := run(t, "", append(append([]string{"plan"}, args...), name)...)
	runtime.ReadMemStats(&after)
	return code, out, errOut, after.TotalAlloc - before.TotalAlloc
}

func TestPlanRefusesBadNamesAndListsNamingTheFieldAndValue(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"a NUL byte in a namespace bound in the tree: the tree's own list is refused first (quota.Validate, Nomad's namespace rule)",
			pendingDoc(`"ns\u0000"`, `"j"`, `"g"`, ""),
			`namespaces[0] = "ns\x00" is not a Nomad namespace name`},
		{"a NUL byte in a pending job's namespace", strings.Replace(pendingDoc(`"ns"`, `"j"`, `"g"`, ""),
			`"pending": [{"namespace": "ns"`, `"pending": [{"namespace": "n\u0000s"`, 1),
			`pending[0].namespace: "n\x00s" holds the control character U+0000; a name may not`},
		{"an escape in a job name", pendingDoc(`"ns"`, `"j\u001b[2J"`, `"g"`, ""),
			`pending[0].job: "j\x1b[2J" holds the control character U+001B; a name may not`},
		{"a NUL byte in a group name", pendingDoc(`"ns"`, `"j"`, `"g\u0000"`, ""),
			`pending[0].group: "g\x00" holds the control character U+0000; a name may not`},
		{"a datacenter listed twice", pendingDoc(`"ns"`, `"j"`, `"g"`, `, "datacenters": ["dc1", "dc2", "dc1"]`),
			`pending[0].datacenters[2]: datacenter "dc1" is listed twice (also datacenters[0])`},
		{"a stopping_for string of four parts", strings.Replace(pendingDoc(`"ns"`, `"j"`, `"g"`, ""),
			`"stopping_for": "ns/j/g"`, `"stopping_for": "a/b/c/d"`, 1),
			`allocations[0].stopping_for: "a/b/c/d" is not a claimant of the form "namespace/job/group"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut, _ := runFile(t, tt.doc)
			if code != 1 || out != "" {
				t.Errorf("exit %d, stdout %q; want 1 and nothing", code, out)
			}
			if !strings.Contains(errOut, tt.want) {
				t.Errorf("stderr =\n%s\nwant it to contain\n%s", errOut, tt.want)
			}
		})
	}
}

func TestPlanRefusesManyRepeatedDatacentersAtTheFirstRepeat(t *testing.T) {
	// 2 million entries (12 MB): before, the whole list was decoded (about
	// 12x the file in memory) and copied before anything was checked.
	dcs := strings.Repeat(`"dc1",`, 2_000_000)
	doc := pendingDoc(`"ns"`, `"j"`, `"g"`, `, "datacenters": [`+dcs+`"dc2"]`)
	start := time.Now()
	code, _, errOut, allocated := runFile(t, doc)
	if code != 1 || !strings.Contains(errOut, `pending[0].datacenters[1]: datacenter "dc1" is listed twice (also datacenters[0])`) {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	if limit := uint64(3 * len(doc)); allocated > limit {
		t.Errorf("allocated %d bytes for a %d-byte file; want at most %d (3x)", allocated, len(doc), limit)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestPlanMemoryStaysProportionalToSmallGPUObjects(t *testing.T) {
	// 300,000 GPU objects of about 12 bytes each: the case that reached
	// 12-15x the file at peak. All that reading and planning allocate,
	// garbage included, must stay under 16x the file (it was 22x; 12.3x
	// now).
	ids := make([]string, 300_000)
	for i := range ids {
		ids[i] = fmt.Sprintf(`{"id":"g%d"}`, i)
	}
	doc := `{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1}, "nodes": [{"id": "n1", "gpus": [` +
		strings.Join(ids, ",") + `]}]}`
	code, _, errOut, allocated := runFile(t, doc)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if limit := uint64(16 * len(doc)); allocated > limit {
		t.Errorf("allocated %d bytes (%.1fx) for a %d-byte file; want at most 16x", allocated,
			float64(allocated)/float64(len(doc)), len(doc))
	}
	t.Logf("allocated %.1fx the file", float64(allocated)/float64(len(doc)))
}

func TestPlanTableStaysNarrowForAWideAdmit(t *testing.T) {
	// One admit of 6,000 allocations on 750 nodes and 2,000 stops: the
	// table used to pad every row to the admit's 66,000-byte node list.
	snap := &plan.Snapshot{Time: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}
	var nodes []string
	for i := 0; i < 6000; i++ {
		nodes = append(nodes, fmt.Sprintf("node-%05d", i/8))
	}
	p := &plan.Plan{}
	for i := 0; i < 2000; i++ {
		p.Actions = append(p.Actions, plan.Action{Action: plan.ActionStop, Alloc: fmt.Sprintf("alloc-%05d", i),
			Namespace: "workspace-b", Job: "train", Group: "w", Node: "node-00001", GPUs: 1, Rule: plan.RuleChild,
			For: plan.GroupKey{Namespace: "workspace-a", Job: "chat", Group: "server"}, Reason: "child-level preemption for Quota1"})
	}
	p.Actions = append(p.Actions, plan.Action{Action: plan.ActionAdmit, Namespace: "workspace-a", Job: "chat",
		Group: "server", Count: 6000, GPUs: 1, Nodes: nodes, Rule: plan.RuleAdmission})
	out := formatPlan(snap, p, false)
	if want := "node-00000 x8,node-00001 x8,node-00002 x8 +747 more nodes"; !strings.Contains(out, want) {
		t.Errorf("the admit row lacks %q", want)
	}
	if len(out) > 2001*200 {
		t.Errorf("output is %d bytes for 2,001 rows; want under 200 bytes a row", len(out))
	}
	verbose := formatPlan(snap, p, true)
	all := len(strings.Join(nodes, ","))
	if !strings.Contains(verbose, strings.Join(nodes, ",")) {
		t.Errorf("-verbose does not list every node")
	}
	if len(verbose) > len(out)+all {
		t.Errorf("-verbose output is %d bytes; want at most %d (the rows plus the node list once)", len(verbose), len(out)+all)
	}
}
