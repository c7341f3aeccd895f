package sim

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fairQuota is a small tree for the fair-lending figures: 16 GPUs, team
// A's root over B (4) and C (12), with child-level preemption.
const fairQuota = `
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
`

// fairScenario: 2 nodes x 8 GPUs for 4 hours. Team B's idle job of 16 x
// 1 GPU takes the whole cluster at 00:00; team C's idle job of 8 x 1 GPU
// arrives at 01:00 and, idle jobs never preempting, waits; team A's job of
// 8 GPUs arrives at 03:00 and takes B's GPUs (child-level preemption).
const fairScenario = header + `
length = "4h"
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
`

// The Fair lending figures (DESIGN L14) on a hand-checkable run, under the
// core with and without L14's order (alike until the core builds it):
//
//	00:00-01:00  B demand 16 (held), C demand 0.
//	             base(B) = max(0, min(4, 16)) = 4, base(C) = 0;
//	             lent = 16 - 0 - 4 = 12, all to B (wants 12): B 16, C 0.
//	             B holds 16: below 0.
//	01:00-03:00  C asks for 8: base(C) = min(12, 8) = 8, wants 0;
//	             lent = 16 - (4 + 8) = 4, to B: B 8, C 8.
//	             B holds 16, C 0: C is 8 below.
//	03:00-04:00  A's job holds 8 of Quota1's own: bases 4 + 8 = 12 exceed
//	             16 - 8: not defined, left out.
//
// Over the 3 defined hours: B fair share 16 + 2 x 8 = 32 GPU-h, held 48,
// below 0; C fair share 2 x 8 = 16, held 0, below 16. Team A is bound to
// the root, which has no fair share. The report's table of the same run
// is checked in package report (TestFairLendingSection).
func TestFairLendingTable(t *testing.T) {
	for _, p := range []Policy{GputideFIFO{}, Gputide{}} {
		t.Run(p.Name(), func(t *testing.T) {
			sc, err := LoadFile(writeScenario(t, fairScenario, map[string]string{"quota.hcl": fairQuota}))
			if err != nil {
				t.Fatal(err)
			}
			w, err := sc.Workload()
			if err != nil {
				t.Fatal(err)
			}
			r, err := Run(sc, w, Options{Policy: p})
			if err != nil {
				t.Fatal(err)
			}
			noConflicts(t, r)
			type fair struct {
				Quota                     string
				Hours, Share, Held, Below float64 // hours, GPU-hours
			}
			var got []fair
			for _, q := range r.Quotas {
				got = append(got, fair{q.Quota, q.FairTime / 3600, q.FairShare / 3600, q.FairHeld / 3600, q.FairBelow / 3600})
			}
			want := []fair{
				{Quota: "Quota1"},
				{"Quota1.1", 3, 32, 48, 0},
				{"Quota1.2", 3, 16, 0, 16},
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("fair lending figures (-want +got):\n%s", d)
			}
		})
	}
}
