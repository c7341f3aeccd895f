package sim

import (
	"fmt"
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
// arrives at 01:00 and, under gputide-fifo, waits (idle jobs never preempt
// there), under gputide takes 8 of B's by rule L14.fair; team A's job of
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
// core without L14 (gputide-fifo) and with it (gputide, below):
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
// below 0; C fair share 2 x 8 = 16, held 0, below 16. Under gputide C's
// job takes 8 of B's allocations back at 01:00 (rule L14.fair): B holds
// 32, C 16, neither below. Team A is bound to
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
			if p.Name() == "gputide" {
				// Rule L14.fair: at 01:00 C's 8 take 8 of B's, so each
				// holds its fair share.
				want[1].Held, want[2].Held, want[2].Below = 32, 16, 0
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("fair lending figures (-want +got):\n%s", d)
			}
		})
	}
}

// The reference's two days (seed 1), issue 19's simulator target. Under
// gputide-fifo, the core before DESIGN L14 (the baseline,
// docs/simulator.md "Fair lending"), the shares are defined for the
// nights and part of the days, and workspace-b's idle jobs, submitted
// first, sit on Quota1.2's unused nominal: Quota1.1 holds more than its
// fair share while Quota1.2 stays below its share for more than a fifth of
// it (274 of 817 GPU-h when measured). Under gputide (L14's order and rule
// L14.fair) Quota1.2's GPU-hours below its fair share are at most 10% of
// its fair share and at most half of gputide-fifo's, and the overall
// utilisation is at most 1 point below gputide-fifo's. The runs are the
// shared reference runs (reference).
func TestReferenceFairLending(t *testing.T) {
	reference(t)
	fifo, fair := ref.fifo, ref.gputide
	noConflicts(t, fifo)
	noConflicts(t, fair)
	for _, r := range []*Result{fifo, fair} {
		b, c := r.Quotas[1], r.Quotas[2]
		if b.Quota != "Quota1.1" || c.Quota != "Quota1.2" {
			t.Fatalf("%s: quotas %s, %s: want the reference tree", r.Policy, b.Quota, c.Quota)
		}
		t.Logf("%s: defined %.1fh; Quota1.1 fair %.0f held %.0f below %.0f GPU-h; Quota1.2 fair %.0f held %.0f below %.0f GPU-h; utilisation %.2f%%",
			r.Policy, c.FairTime/3600, b.FairShare/3600, b.FairHeld/3600, b.FairBelow/3600, c.FairShare/3600, c.FairHeld/3600, c.FairBelow/3600, 100*r.Utilisation())
		if b.FairTime < 20*3600 || c.FairTime < 20*3600 || b.FairTime != c.FairTime {
			t.Errorf("%s: fair shares defined for %.1fh and %.1fh: want the same span, at least the two nights (20h)", r.Policy, b.FairTime/3600, c.FairTime/3600)
		}
	}
	b, c := fifo.Quotas[1], fifo.Quotas[2]
	if b.FairHeld <= b.FairShare {
		t.Errorf("gputide-fifo: Quota1.1 held %.0f GPU-h against a fair share of %.0f: want more (its idle jobs borrow first)", b.FairHeld/3600, b.FairShare/3600)
	}
	if c.FairBelow <= 0.2*c.FairShare {
		t.Errorf("gputide-fifo: Quota1.2 below its fair share %.0f of %.0f GPU-h: want more than a fifth (the unfairness L14 removes)", c.FairBelow/3600, c.FairShare/3600)
	}
	fc := fair.Quotas[2]
	if fc.FairBelow > 0.1*fc.FairShare {
		t.Errorf("gputide: Quota1.2 below its fair share %.0f of %.0f GPU-h: want at most 10%%", fc.FairBelow/3600, fc.FairShare/3600)
	}
	if fc.FairBelow > 0.5*c.FairBelow {
		t.Errorf("gputide: Quota1.2 below its fair share %.0f GPU-h: want at most half of gputide-fifo's %.0f", fc.FairBelow/3600, c.FairBelow/3600)
	}
	if u, uf := fair.Utilisation(), fifo.Utilisation(); u < uf-0.01 {
		t.Errorf("gputide: utilisation %.2f%%: want at most 1 point below gputide-fifo's %.2f%%", 100*u, 100*uf)
	}
}

// weightQuota lends: Quota1 16 over B (2) and C (6), 8 GPUs left to lend;
// weights as each case writes them.
const weightQuota = `
quota "Quota1" {
  gpus       = 16
  namespaces = ["workspace-a"]
  quota "Quota1.1" {
    gpus       = 2
    namespaces = ["workspace-b"]
    %s
  }
  quota "Quota1.2" {
    gpus       = 6
    namespaces = ["workspace-c"]
    %s
  }
}
`

// weightScenario: B's idle job of 16 x 1 GPU takes the cluster at 00:00;
// C's idle job of 16 x 1 GPU arrives at 01:00 and waits (idle jobs never
// preempt); 3 hours.
const weightScenario = header + `
length = "3h"
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
  count     = 16
  gpus      = 1
  duration  = "10h"
  idle      = true
}
`

// TestFairLendingUsesWeights: the Fair lending figures share the lent GPUs
// by the quota file's weights (DESIGN L14), the default being the nominal.
//
//	00:00-01:00  B demand 16, C 0: base(B) 2, lent 14, all to B: B 16.
//	01:00-03:00  C asks for 16: bases 2 and 6, lent 16 - 8 = 8, both want
//	             more than 8. Default weights 2:6: parts 2 and 6, fair
//	             shares B 4, C 12. Weights 3:1: parts 6 and 2, B 8, C 8.
//
// B holds 16 throughout, C nothing: C is below its share for 2 hours.
func TestFairLendingUsesWeights(t *testing.T) {
	type fair struct {
		Quota                     string
		Hours, Share, Held, Below float64 // hours, GPU-hours
	}
	for _, tc := range []struct {
		name   string
		wb, wc string
		want   []fair
	}{
		{"default", "", "", []fair{{Quota: "Quota1"}, {"Quota1.1", 3, 16 + 2*4, 48, 0}, {"Quota1.2", 3, 2 * 12, 0, 24}}},
		{"3:1", "weight = 3", "weight = 1", []fair{{Quota: "Quota1"}, {"Quota1.1", 3, 16 + 2*8, 48, 0}, {"Quota1.2", 3, 2 * 8, 0, 16}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := LoadFile(writeScenario(t, weightScenario, map[string]string{"quota.hcl": fmt.Sprintf(weightQuota, tc.wb, tc.wc)}))
			if err != nil {
				t.Fatal(err)
			}
			w, err := sc.Workload()
			if err != nil {
				t.Fatal(err)
			}
			r, err := Run(sc, w, Options{Policy: Gputide{}})
			if err != nil {
				t.Fatal(err)
			}
			noConflicts(t, r)
			var got []fair
			for _, q := range r.Quotas {
				got = append(got, fair{q.Quota, q.FairTime / 3600, q.FairShare / 3600, q.FairHeld / 3600, q.FairBelow / 3600})
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("fair lending figures (-want +got):\n%s", d)
			}
		})
	}
}
