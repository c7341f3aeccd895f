package sim

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The mixed example (examples/mixed/scenario.hcl): 8 nodes of 8 H100, 6 of
// 8 A100 and 2 of 8 A100 cut into 7 x 1g.10gb slices each, a tree of three
// flavors and no node pools: under each of the three policies, half a day
// in, the inference runs on H100 only (flavor h100), the notebooks on
// slices only (a100-1g), training on H100 and whole A100 only (both
// flavors), and every plan action is applied. The traces are the shipped samples when
// ../shared/traces is absent.
func TestMixedExample(t *testing.T) {
	sc, err := LoadFile("../../examples/mixed/scenario.hcl")
	if err != nil {
		t.Fatal(err)
	}
	type group struct {
		Name, Model, Pool, MIG string
		Count, Whole, Devices  int
	}
	var groups []group
	for _, g := range sc.Nodes {
		mig := ""
		if g.MIG != nil {
			mig = fmt.Sprintf("%d x %d %s", g.MIG.GPUs, g.MIG.Slices, g.MIG.Profile)
		}
		groups = append(groups, group{g.Name, g.Model, g.NodePool, mig, g.Count, g.Whole(), g.Devices()})
	}
	const h100, a100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
	if d := cmp.Diff([]group{
		{"h100", h100, "default", "", 8, 8, 8},
		{"a100", a100, "default", "", 6, 8, 8},
		{"a100-mig", a100, "default", "8 x 7 1g.10gb", 2, 0, 56},
	}, groups); d != "" {
		t.Errorf("node groups (-want +got):\n%s", d)
	}
	if sc.GPUs() != 224 {
		t.Errorf("%d device instances, want 64 H100 + 48 A100 + 112 slices = 224", sc.GPUs())
	}
	sc.Length = 12 * time.Hour // 00:00 to 12:00: the morning scale-up at 08:00
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	sh := PolicyShares(sc, w)
	for _, p := range []Policy{Gputide{}, NewStatic(sh), NewKueue(sh)} {
		var ev bytes.Buffer
		res, err := Run(sc, w, Options{Policy: p, Events: &ev})
		if err != nil {
			t.Fatalf("%s: %v", p.Name(), err)
		}
		if len(res.Conflicts) != 0 {
			t.Errorf("%s: %d plan actions not applied, first %s", p.Name(), len(res.Conflicts), res.Conflicts[0])
		}
		// The per-flavor figures: each flavor's devices; every allocation
		// holds GPUs of one flavor, so the flavors' held GPU time adds up
		// to the cluster's; the 24 notebooks are the jobs that started in
		// a100-1g.
		type fl struct {
			Flavor string
			GPUs   int
		}
		var fls []fl
		held := 0.0
		for _, f := range res.Flavors {
			fls = append(fls, fl{f.Flavor, f.GPUs})
			held += f.Used
		}
		if d := cmp.Diff([]fl{{"h100", 64}, {"a100", 48}, {"a100-1g", 112}}, fls); d != "" {
			t.Errorf("%s: flavors (-want +got):\n%s", p.Name(), d)
		}
		if all := res.Total.Placing + res.Total.Running + res.Total.Stopping; fmt.Sprintf("%.0f", held) != fmt.Sprintf("%.0f", all) {
			t.Errorf("%s: the flavors held %.0f GPU-seconds, the cluster %.0f", p.Name(), held, all)
		}
		if len(res.Flavors) == 3 && res.Flavors[2].Started != 24 {
			t.Errorf("%s: %d jobs started in a100-1g, want the 24 notebooks", p.Name(), res.Flavors[2].Started)
		}
		// Where each kind of work started: node-01..08 are H100, 09..14
		// whole A100, 15..16 the slices.
		where := map[string]map[string]int{}   // kind -> node range -> allocations
		flavors := map[string]map[string]int{} // kind -> flavor -> allocations started
		for _, e := range events(t, ev.Bytes()) {
			if e.Event != "start" {
				continue
			}
			kind := "training"
			switch {
			case e.Job == "chat":
				kind = "inference"
			case strings.HasPrefix(e.Job, "notebook-"):
				kind = "notebook"
			}
			var n int
			fmt.Sscanf(e.Node, "node-%d", &n)
			r := "h100"
			if n > 14 {
				r = "a100-mig"
			} else if n > 8 {
				r = "a100"
			}
			if where[kind] == nil {
				where[kind] = map[string]int{}
			}
			where[kind][r]++
			if flavors[kind] == nil {
				flavors[kind] = map[string]int{}
			}
			flavors[kind][e.Flavor]++
		}
		// Each kind started in its flavors only, and each flavor is the
		// node range it is laid out on (DESIGN L13: placed on the
		// admitted flavor's devices).
		for kind, want := range map[string][]string{"inference": {"h100"}, "notebook": {"a100-1g"}, "training": {"a100", "h100"}} {
			var got []string
			for f := range flavors[kind] {
				got = append(got, f)
			}
			sort.Strings(got)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s: %s started in flavors (-want +got):\n%s", p.Name(), kind, d)
			}
		}
		if where["notebook"]["a100-mig"] != 24 || len(where["notebook"]) != 1 {
			t.Errorf("%s: notebooks started on %v, want 24 on the cut nodes only", p.Name(), where["notebook"])
		}
		if where["inference"]["h100"] == 0 || len(where["inference"]) != 1 {
			t.Errorf("%s: inference started on %v, want H100 only", p.Name(), where["inference"])
		}
		if where["training"]["a100-mig"] != 0 || where["training"]["h100"] == 0 || where["training"]["a100"] == 0 {
			t.Errorf("%s: training started on %v, want H100 and whole A100, no slice", p.Name(), where["training"])
		}
	}
}
