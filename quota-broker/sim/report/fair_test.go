package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputide/gputide/quota-broker/sim"
)

// fairFiles are the scenario of sim's TestFairLendingTable: 2 nodes x 8
// GPUs for 4 hours; Quota1 (16, team A) over Quota1.1 (4, team B) and
// Quota1.2 (12, team C). B's idle job of 16 x 1 GPU runs from 00:00, C's
// idle job of 8 x 1 GPU waits from 01:00, A's 8-GPU job takes B's GPUs at
// 03:00.
var fairFiles = map[string]string{
	"quota.hcl": `
quota "Quota1" {
  gpus             = 16
  child_preemption = true
  namespaces       = ["workspace-a"]
  quota "Quota1.1" {
    gpus       = 4
    namespaces = ["workspace-b"]
  }
  quota "Quota1.2" {
    gpus       = 12
    namespaces = ["workspace-c"]
  }
}
`,
	"scenario.hcl": `
quota     = "quota.hcl"
time_zone = "America/Los_Angeles"
start     = "2026-12-07 00:00"
length    = "4h"
cluster {
  nodes "n" {
    count = 2
    gpus  = 8
  }
}
job "b-idle" {
  namespace = "workspace-b"
  count     = 16
  gpus      = 1
  duration  = "10h"
  idle      = true
}
job "c-idle" {
  namespace = "workspace-c"
  at        = "2026-12-07 01:00"
  count     = 8
  gpus      = 1
  duration  = "10h"
  idle      = true
}
job "a-train" {
  namespace = "workspace-a"
  at        = "2026-12-07 03:00"
  gpus      = 8
  duration  = "10h"
}
`}

// The report's Fair lending section (DESIGN L14, issue 19): one row per
// workspace under the exact header, from the run itself. Over the 3 hours
// where the shares are defined (until A's job holds 8 of Quota1's own at
// 03:00: bases 4 + 8 > 16 - 8), B's fair share is 16 for an hour (base 4
// + all 12 lent) and 8 for two (C's base takes 8 of the lent: 4 + 4),
// 32 GPU-h; C's is 0 and then 8 (16 GPU-h). The report is gputide's: at
// 01:00 C's job takes 8 of B's allocations back (rule L14.fair), so B
// holds 16 and then 8 (32 GPU-h), C 8 (16 GPU-h), neither below; under
// gputide-fifo (the comparison table) C holds none, 16 below. A is bound
// to the root: n/a.
func TestFairLendingSection(t *testing.T) {
	dir := t.TempDir()
	for name, body := range fairFiles {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := sim.LoadFile(filepath.Join(dir, "scenario.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	var rs []*sim.Result
	for _, p := range []sim.Policy{sim.GputideFIFO{}, sim.Gputide{}} {
		r, err := sim.Run(sc, w, sim.Options{Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	var md, page bytes.Buffer
	Markdown(&md, rs[1], rs, w.Notes)
	HTML(&page, rs[1], rs, w.Notes, nil)
	want := "## Fair lending\n\n" + `| workspace | quota | fair share GPU-h | held GPU-h | below fair share GPU-h |
|---|---|---:|---:|---:|
| workspace-a | Quota1 | n/a | n/a | n/a |
| workspace-b | Quota1.1 | 32 | 32 | 0 |
| workspace-c | Quota1.2 | 16 | 16 | 0 |
`
	for _, s := range []string{want,
		"n/a: `workspace-a` (Quota1) bound to the root, which L14 gives no fair share.",
		"Fair shares were defined for workspace-b 3h00m, workspace-c 3h00m of the 4h00m simulated.",
		`| below fair share GPU-h | quota | gputide-fifo | gputide |
|---|---|---:|---:|
| workspace-a | Quota1 | n/a | n/a |
| workspace-b | Quota1.1 | 0 of 32 in 3h00m | 0 of 32 in 3h00m |
| workspace-c | Quota1.2 | 16 of 16 in 3h00m | 0 of 16 in 3h00m |
`} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("report.md lacks\n%s\nin:\n%s", s, md.String())
		}
	}
	for _, s := range []string{"<h2>Fair lending</h2>", "<th>below fair share GPU-h</th>", "<td>workspace-c</td><td>Quota1.2</td><td", ">16</td>"} {
		if !strings.Contains(page.String(), s) {
			t.Errorf("report.html lacks %q", s)
		}
	}
}
