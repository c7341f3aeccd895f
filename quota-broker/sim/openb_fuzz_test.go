package sim

import (
	"errors"
	"os"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// FuzzScenarioOpenb: an inventory block, an openb block and a nodes
// block's mig layout, with any numbers, profile and node and pod lists,
// never panic the parser or the workload and take bounded time; an error
// is a scenario or trace error naming its file; what is accepted keeps a
// cluster within MaxClusterDevices whose MIG layouts fit a GPU's 7
// slices, and jobs submitted within the run with a work of zero or more.
func FuzzScenarioOpenb(f *testing.F) {
	q, err := os.ReadFile("../../examples/reference/quota.hcl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add("2", "1", "2", "1g.10gb", "7", openbNodes, openbPods)
	f.Add("100000", "0.001", "8", "7g.80gb", "1", "\ufeffsn,gpu,model\r\nn0,64,G2\r\n", openbPods+"late,1,1,1,1000,,LS,Running,3000000000,3000000001,3000000000\n")
	f.Add("1", "1e6", "9", "1g.10gb+me", "0", "sn,gpu,model,gpu\nn0,8,G2,1\n", "name\n")
	f.Add("1e309", "NaN", "-1", " MIG ", "1e309", "sn,gpu,model\nn0,8,\"G2\"\n", openbPods+"p0,1,1,1,1000,,LS,Running,0,1,0\n")
	f.Fuzz(func(t *testing.T, scaleDown, timeScale, migGPUs, profile, slices, nodes, pods string) {
		for _, n := range []*string{&scaleDown, &timeScale, &migGPUs, &slices} {
			if len(*n) > 40 || strings.ContainsAny(*n, "\n\r{}#/$%*\"") {
				*n = "1"
			}
		}
		text := header + "length = \"24h\"\ncluster {\n" +
			"  inventory \"trace\" {\n    nodes = \"nodes.csv\"\n    scale_down = " + scaleDown + "\n  }\n" +
			"  nodes \"cut\" {\n    count = 2\n    gpus = 8\n    mig {\n      gpus = " + migGPUs + "\n      profile = " + hclString(profile) + "\n      slices = " + slices + "\n    }\n  }\n}\n" +
			"openb \"pods\" {\n  trace = \"pods.csv\"\n  time_scale = " + timeScale + "\n  workspaces = { LS = \"workspace-a\", BE = \"workspace-b\" }\n}\n"
		fsys := fstest.MapFS{"quota.hcl": {Data: q}, "nodes.csv": {Data: []byte(nodes)}, "pods.csv": {Data: []byte(pods)}}
		t0 := time.Now()
		sc, err := Parse([]byte(text), "scenario.hcl", fsSource{fsys: fsys, dir: "."})
		if err == nil {
			if sc.GPUs() > MaxClusterDevices {
				t.Fatalf("accepted a cluster of %d devices", sc.GPUs())
			}
			for _, g := range sc.Nodes {
				if g.MIG != nil && (g.MIG.GPUs < 1 || g.MIG.GPUs > g.GPUs || g.MIG.Slices < 1 || g.MIG.Slices > MaxMIGSlices) {
					t.Fatalf("accepted mig %+v on %d GPUs", *g.MIG, g.GPUs)
				}
			}
			var w *Workload
			if w, err = sc.Workload(); err == nil {
				for _, j := range w.Jobs {
					if j.Work < 0 || j.Submit.Before(sc.Start) || !j.Submit.Before(sc.End()) || j.GPUs < 1 {
						t.Fatalf("job %s: submit %s, work %s, %d GPUs", j.Name, j.Submit, j.Work, j.GPUs)
					}
				}
			}
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Fatalf("took %s:\n%s", d, text)
		}
		if err != nil {
			var se *Error
			if !errors.As(err, &se) && !strings.Contains(err.Error(), ".csv") {
				t.Fatalf("error %v names no file", err)
			}
		}
	})
}
