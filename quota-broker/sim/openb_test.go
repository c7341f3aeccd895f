package sim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// sharedOpenb is the openb pod list beside the repository
// (../shared/traces/alibaba/v2023), as the example scenario names it.
const sharedOpenb = "../../../shared/traces/alibaba/v2023/openb_pod_list_default.csv"

const openbNodes = "sn,cpu_milli,memory_mib,gpu,model\n" +
	"n0,1,1,8,G2\nn1,1,1,8,G2\nn2,1,1,8,G2\nn3,1,1,8,G2\nn4,1,1,4,G2\n" + // 36 G2 on 8-GPU nodes mostly
	"n5,1,1,2,T4\nn6,1,1,2,T4\nn7,1,1,4,T4\n" + // 8 T4: 2-GPU nodes hold 4, the 4-GPU node 4: the larger size
	"n8,1,1,1,A10\n" +
	"n9,1,1,0,\n" // a CPU node

const openbPods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n" +
	"p0,1,1,1,1000,,LS,Running,0,7200,0\n" +
	"p1,1,1,1,300,,LS,Running,60,3660,60\n" + // shares a GPU: one whole GPU
	"p2,1,1,8,1000,,BE,Succeeded,120,1920,120\n" +
	"p3,1,1,1,1000,,BE,Pending,180,600,\n" + // never ran
	"p4,1,1,0,0,,BE,Running,180,600,200\n" + // no GPU
	"p5,1,1,2,1000,,Burstable,Running,240,840,300\n" + // a class with no workspace
	"p6,1,1,1,1000,,LS,Running,900000,900100,900000\n" // after the end of a day's run

func openbScenario(scaleDown int, extra string) string {
	return header + `length = "24h"
cluster {
  inventory "trace" {
    nodes      = "nodes.csv"
    scale_down = ` + fmt.Sprint(scaleDown) + `
  }
}
openb "pods" {
  trace      = "pods.csv"
  workspaces = { LS = "workspace-a", BE = "workspace-b" }
` + extra + `}
`
}

// An inventory block makes one node group per model, in the order the
// models first appear, each keeping its GPUs / scale_down in nodes of its
// usual size; an openb block makes each pod that ran on GPUs one job.
func TestOpenbInventoryAndPods(t *testing.T) {
	path := writeScenario(t, openbScenario(4, "  idle_fraction = { BE = 1 }\n"), map[string]string{"nodes.csv": openbNodes, "pods.csv": openbPods})
	sc, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// G2: 36 / 4 = 9 GPUs, one node of 8 (9/8 rounds to 1). T4: 8 / 4 = 2
	// GPUs, 2/4 of a 4-GPU node rounds to 1 node (half up). A10: 1 / 4
	// rounds to no node: one node of its share rounded, at least 1 GPU.
	want := []NodeGroup{
		{Name: "G2", Count: 1, GPUs: 8, Model: "G2", Datacenter: "dc1", NodePool: "default"},
		{Name: "T4", Count: 1, GPUs: 4, Model: "T4", Datacenter: "dc1", NodePool: "default"},
		{Name: "A10", Count: 1, GPUs: 1, Model: "A10", Datacenter: "dc1", NodePool: "default"},
	}
	if d := cmp.Diff(want, sc.Nodes); d != "" {
		t.Errorf("node groups (-want +got):\n%s", d)
	}
	inv := sc.Inventories[0]
	if n, g := inv.Total(); n != 9 || g != 45 || inv.Rows != 10 || inv.NoGPU != 1 || inv.ScaleDown != 4 {
		t.Errorf("inventory: %d nodes, %d GPUs, %d rows, %d without GPUs, scale_down %d; want 9, 45, 10, 1, 4", n, g, inv.Rows, inv.NoGPU, inv.ScaleDown)
	}
	if sc.GPUs() != 13 {
		t.Errorf("cluster %d GPUs, want 13", sc.GPUs())
	}
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	wantCounts := OpenbCounts{Name: "pods", File: w.Openb[0].File, Rows: 7, NeverRan: 1, NoGPU: 1, Shared: 1, Unmapped: 1, After: 1,
		Jobs: 3, Idle: 1, GPUh: 2 + 1 + 8*0.5}
	if d := cmp.Diff([]OpenbCounts{wantCounts}, w.Openb); d != "" {
		t.Errorf("counts (-want +got):\n%s", d)
	}
	start := sc.Start
	var got []string
	for _, j := range w.Jobs {
		got = append(got, fmt.Sprintf("%s/%s %s x%d gpus=%d idle=%v work=%s origin=%s", j.Namespace, j.Name, j.Submit.Sub(start), j.Count, j.GPUs, j.Idle,
			j.Work, j.Origin[strings.LastIndex(j.Origin, "/")+1:]))
	}
	if d := cmp.Diff([]string{
		"workspace-a/pod-p0 0s x1 gpus=1 idle=false work=2h0m0s origin=pods.csv:2",
		"workspace-a/pod-p1 1m0s x1 gpus=1 idle=false work=1h0m0s origin=pods.csv:3",
		"workspace-b/idle-p2 2m0s x1 gpus=8 idle=true work=30m0s origin=pods.csv:4",
	}, got); d != "" {
		t.Errorf("jobs (-want +got):\n%s", d)
	}
	notes := strings.Join(w.Notes, "\n")
	for _, s := range []string{
		"scaled down by 4 to 3 nodes with 13 GPUs",
		"G2 36 GPUs (80.0%) -> 1 nodes x 8 = 8 (61.5%)",
		"A10 1 GPUs (2.2%) -> 1 nodes x 1 = 1 (7.7%)",
		"7 pods; 3 jobs replayed (1 idle, 7 GPU-hours of work), 1 of them sharing a GPU (gpu_milli < 1000) counted as one whole GPU; left out: 1 never ran (no scheduled_time), 1 without GPUs, 1 of unmapped QoS classes, 0 above 8 GPUs, 0 created before trace_start, 1 created after the end of the run",
	} {
		if !strings.Contains(notes, s) {
			t.Errorf("notes lack %q:\n%s", s, notes)
		}
	}
	// The jobs run on the models the inventory kept, whichever the pod:
	// every pod may use every model.
	res, err := Run(sc, w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Conflicts) != 0 || res.Finished != 3 {
		t.Errorf("conflicts %v, finished %d; want none, 3", res.Conflicts, res.Finished)
	}

	// trace_start leaves out the pods created before it; the others are
	// shifted to the scenario's start.
	path = writeScenario(t, openbScenario(4, "  trace_start = \"2m\"\n"), map[string]string{"nodes.csv": openbNodes, "pods.csv": openbPods})
	if sc, err = LoadFile(path); err != nil {
		t.Fatal(err)
	}
	if w, err = sc.Workload(); err != nil {
		t.Fatal(err)
	}
	if c := w.Openb[0]; c.Before != 2 || c.Jobs != 1 || len(w.Jobs) != 1 || !w.Jobs[0].Submit.Equal(sc.Start) || w.Jobs[0].Idle {
		t.Errorf("trace_start 2m: %+v, jobs %d; want 2 before, 1 job (p2, not idle) at the start", c, len(w.Jobs))
	}
}

// A nodes block's mig block cuts GPUs of each node into slices, each a
// device instance of the GPU's model with the profile (DESIGN L13).
func TestMIGLayout(t *testing.T) {
	path := writeScenario(t, header+`length = "1h"
cluster {
  nodes "a100-mig" {
    count = 2
    gpus  = 4
    model = "NVIDIA A100-SXM4-80GB"
    mig {
      gpus    = 1
      profile = "3g.40gb"
      slices  = 2
    }
  }
}
`, nil)
	sc, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if g := sc.Nodes[0]; g.Whole() != 3 || g.Devices() != 5 || sc.GPUs() != 10 {
		t.Errorf("whole %d, devices %d a node, cluster %d; want 3, 5, 10", g.Whole(), g.Devices(), sc.GPUs())
	}
	s := &sim{sc: sc, nodeIndex: map[string]int{}}
	s.newCluster()
	const a100 = "NVIDIA A100-SXM4-80GB"
	want := []plan.GPU{
		{ID: "GPU-02-0", Model: a100, Healthy: true},
		{ID: "GPU-02-1", Model: a100, Healthy: true},
		{ID: "GPU-02-2", Model: a100, Healthy: true},
		{ID: "MIG-02-3-0", Model: a100, MIGProfile: "3g.40gb", Healthy: true},
		{ID: "MIG-02-3-1", Model: a100, MIGProfile: "3g.40gb", Healthy: true},
	}
	if d := cmp.Diff(want, s.planNodes[1].GPUs); d != "" {
		t.Errorf("node-02 (-want +got):\n%s", d)
	}
	if s.capacity != 10 || len(s.nodes[1].gpus) != 5 {
		t.Errorf("capacity %d, node-02 slots %d; want 10, 5", s.capacity, len(s.nodes[1].gpus))
	}
}

func manyNodes(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "m%d,1,G2\n", i)
	}
	return b.String()
}

// A bad inventory, openb or mig block is an error naming the file, the
// line and the value.
func TestBadInventoryOpenbAndMIG(t *testing.T) {
	mig := func(body string) string {
		return header + "length = \"1h\"\ncluster {\n  nodes \"n\" {\n    count = 1\n    gpus = 8\n    mig {\n" + body + "    }\n  }\n}\n"
	}
	files := map[string]string{"nodes.csv": openbNodes, "pods.csv": openbPods}
	for _, tc := range []struct {
		name, text string
		files      map[string]string
		want       string
	}{
		{"mig gpus", mig("      gpus = 9\n      profile = \"1g.10gb\"\n      slices = 7\n"), nil, "scenario.hcl:11: nodes \"n\" mig: gpus = 9: want a whole number from 1 to 8"},
		{"mig profile", mig("      gpus = 2\n      profile = \"1g\"\n      slices = 7\n"), nil, `scenario.hcl:12: nodes "n" mig: profile = "1g": want a MIG profile`},
		{"mig slices", mig("      gpus = 2\n      profile = \"2g.20gb\"\n      slices = 4\n"), nil, `scenario.hcl:13: nodes "n" mig: slices = 4: 4 instances of 2g.20gb take 8 compute slices, a GPU has 7`},
		{"mig missing", mig("      gpus = 2\n"), nil, `scenario.hcl:10: nodes "n" mig: missing profile`},
		{"scale_down", openbScenario(0, ""), files, `scenario.hcl:9: inventory "trace": scale_down = 0: want a whole number from 1 to 100000`},
		{"no node list", openbScenario(2, ""), map[string]string{"pods.csv": openbPods}, `scenario.hcl:8: inventory "trace": nodes = "nodes.csv"`},
		// A missing node list says where the trace comes from, as a missing
		// pod list does: it is read first.
		{"node list missing", openbScenario(2, ""), map[string]string{"pods.csv": openbPods}, `(the openb node list; see ../shared/traces/alibaba/README.md)`},
		{"too many nodes", openbScenario(1, ""), map[string]string{"nodes.csv": "sn,gpu,model\n" + strings.Repeat("n,1,G2\n", 1) + manyNodes(100001), "pods.csv": openbPods},
			`scenario.hcl:9: inventory "trace": scale_down = 1 keeps 100002 nodes (100002 GPUs) of`},
		{"bad node row", openbScenario(2, ""), map[string]string{"nodes.csv": openbNodes + "n10,1,1,x,G2\n"}, `nodes.csv:12: column 4 (gpu) "x"`},
		{"model twice", strings.Replace(openbScenario(2, ""), "cluster {\n", "cluster {\n  nodes \"G2\" {\n    count = 1\n    gpus = 8\n  }\n", 1), files,
			`inventory "trace": model "G2" of`},
		{"idle fraction", openbScenario(2, "  idle_fraction = { BE = 2 }\n"), files, `scenario.hcl:15: openb "pods": idle_fraction["BE"] = 2: want a number from 0 to 1`},
		{"namespace", strings.Replace(openbScenario(2, ""), `BE = "workspace-b"`, `BE = "workspace-z"`, 1), files, `openb "pods" workspaces["BE"]: namespace "workspace-z" is not bound`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadFile(writeScenario(t, tc.text, tc.files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	// Rows are read when the workload is made: a bad pod row names its
	// file, line and column; a pod naming models is refused.
	for _, tc := range []struct{ pods, want string }{
		{openbPods + "p9,1,1,1,1000,,LS,Running,5,4,5\n", `pods.csv:9: column 10 (deletion_time) "4": before scheduled_time 5`},
		{openbPods + "p9,1,1,1,1000,V100M16|V100M32,LS,Running,5,9,5\n", `pods.csv:9: gpu_spec "V100M16|V100M32": pods that name GPU models are not replayed`},
	} {
		sc, err := LoadFile(writeScenario(t, openbScenario(2, ""), map[string]string{"nodes.csv": openbNodes, "pods.csv": tc.pods}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sc.Workload(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// The example examples/openb/scenario.hcl: the trace's inventory scaled
// down by 150 to 45 GPUs, each model's share kept; its pods read and
// counted as docs/simulator.md says; and a three-day slice of its busiest
// weeks (trace day 120) replayed under the three policies in seconds.
// Needs ../shared/traces.
func TestOpenbExample(t *testing.T) {
	if _, err := os.Stat(sharedOpenb); errors.Is(err, fs.ErrNotExist) {
		t.Skip("no ../shared/traces beside the repository")
	}
	sc, err := LoadFile("../../examples/openb/scenario.hcl")
	if err != nil {
		t.Fatal(err)
	}
	inv := sc.Inventories[0]
	type model struct {
		Model            string
		Nodes, GPUs      int // in the trace
		Count, PerNode   int // kept
		Kept             int
		ShareIn, ShareSc string // the model's share of the GPUs, in the trace and kept
	}
	var got []model
	_, tg := inv.Total()
	_, sg := inv.Scaled()
	for _, m := range inv.Models {
		got = append(got, model{m.Model, m.Nodes, m.OpenbModel.GPUs, m.Count, m.PerNode, m.GPUs,
			fmt.Sprintf("%.1f%%", 100*float64(m.OpenbModel.GPUs)/float64(tg)), fmt.Sprintf("%.1f%%", 100*float64(m.GPUs)/float64(sg))})
	}
	want := []model{
		{"P100", 134, 265, 1, 2, 2, "4.3%", "4.4%"},
		{"G3", 39, 312, 1, 2, 2, "5.0%", "4.4%"},
		{"V100M32", 30, 204, 1, 1, 1, "3.3%", "2.2%"},
		{"V100M16", 55, 195, 1, 1, 1, "3.1%", "2.2%"},
		{"G2", 549, 4392, 4, 8, 32, "70.7%", "71.1%"},
		{"T4", 404, 842, 3, 2, 6, "13.6%", "13.3%"},
		{"A10", 2, 2, 1, 1, 1, "0.0%", "2.2%"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("models (-want +got):\n%s", d)
	}
	if n, g := inv.Total(); n != 1213 || g != 6212 || inv.ScaleDown != 150 || sc.GPUs() != 45 || sc.Quota.GPUs.Total() != 45 {
		t.Errorf("inventory %d nodes, %d GPUs, scale_down %d, cluster %d GPUs, root quota %d; want 1213, 6212, 150, 45, 45",
			n, g, inv.ScaleDown, sc.GPUs(), sc.Quota.GPUs.Total())
	}
	// quota.hcl declares one flavor per model, in the inventory's order,
	// and the root holds each model's kept GPUs in its flavor (DESIGN L13).
	var names, kept, root []string
	for _, im := range inv.Models {
		f := strings.ToLower(im.Model)
		names = append(names, f)
		kept = append(kept, fmt.Sprintf("%s = %d", f, im.GPUs))
		root = append(root, fmt.Sprintf("%s = %d", f, sc.Quota.GPUs.Of(f)))
	}
	if d := cmp.Diff(names, quota.FlavorNames(sc.Quota)); d != "" {
		t.Errorf("flavors (-want the inventory's models +got):\n%s", d)
	}
	if d := cmp.Diff(kept, root); d != "" {
		t.Errorf("root quota per flavor (-want the inventory's kept GPUs +got):\n%s", d)
	}
	for _, g := range sc.Nodes {
		if g.Name != g.Model {
			t.Errorf("node group %q has model %q: want the model's name", g.Name, g.Model)
		}
	}

	// Three days from trace day 120.
	sc.Openb[0].TraceStart = 120 * 24 * time.Hour
	sc.Length = 3 * 24 * time.Hour
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	c := w.Openb[0]
	// Counted independently with awk on the trace: 8,152 rows, 897 without
	// scheduled_time, 1,052 of the rest with num_gpu 0; of the 6,203 pods
	// that ran on GPUs, 764 were created before day 120, 513 in the three
	// days (183 of them with gpu_milli < 1000, 1,119.3 GPU-hours of work)
	// and 4,926 after.
	if c.Rows != 8152 || c.NeverRan != 897 || c.NoGPU != 1052 || c.Before != 764 || c.Jobs != 513 || c.Shared != 183 ||
		c.After != 4926 || c.Unmapped != 0 || c.TooBig != 0 || fmt.Sprintf("%.1f", c.GPUh) != "1119.3" {
		t.Errorf("counts %+v", c)
	}
	sh := PolicyShares(sc, w)
	for _, p := range []Policy{Gputide{}, NewStatic(sh), NewKueue(sh)} {
		start := time.Now()
		res, err := Run(sc, w, Options{Policy: p})
		if err != nil {
			t.Fatalf("%s: %v", p.Name(), err)
		}
		if len(res.Conflicts) != 0 || res.Finished == 0 || res.Capacity != 45 {
			t.Errorf("%s: conflicts %v, %d finished, capacity %d", p.Name(), res.Conflicts, res.Finished, res.Capacity)
		}
		t.Logf("%s: %d events, %d plans, %d finished in %s", p.Name(), res.Events, res.Plans, res.Finished, time.Since(start).Round(time.Millisecond))
	}
}
