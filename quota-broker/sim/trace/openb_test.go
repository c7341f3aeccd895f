package trace

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const openbNodesHeader = "sn,cpu_milli,memory_mib,gpu,model\n"

func TestReadOpenbNodes(t *testing.T) {
	in := openbNodesHeader +
		"n0,64000,262144,2,P100\n" +
		"n1,96000,786432,8,G2\n" +
		"# a comment\n" +
		"n2,96000,786432,0,\n" + // a CPU node of the all-node list
		"n3,64000,262144,2,P100\n" +
		"n4,64000,262144,1,P100\n" +
		"n5,64000,262144,4,V100M16\n" +
		"n6,64000,262144,8,V100M16\n" +
		"n7,64000,262144,4,V100M16\n"
	inv, err := ReadOpenbNodes(strings.NewReader(in), "nodes.csv")
	if err != nil {
		t.Fatal(err)
	}
	if inv.Rows != 8 || inv.NoGPU != 1 || len(inv.Nodes) != 7 {
		t.Errorf("rows %d, no GPU %d, nodes %d; want 8, 1, 7", inv.Rows, inv.NoGPU, len(inv.Nodes))
	}
	if d := cmp.Diff(OpenbNode{Line: 3, Name: "n1", GPUs: 8, Model: "G2"}, inv.Nodes[1]); d != "" {
		t.Errorf("node 1 (-want +got):\n%s", d)
	}
	want := []OpenbModel{
		{Model: "P100", Nodes: 3, GPUs: 5, Size: 2},     // 2-GPU nodes hold 4 of 5
		{Model: "G2", Nodes: 1, GPUs: 8, Size: 8},       //
		{Model: "V100M16", Nodes: 3, GPUs: 16, Size: 8}, // 8 GPUs on 4-GPU nodes, 8 on 8: the larger
	}
	if d := cmp.Diff(want, inv.Models()); d != "" {
		t.Errorf("models (-want +got):\n%s", d)
	}
}

func TestReadOpenbNodesErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "nodes.csv: empty node list: no header"},
		{"sn,gpu\n", `nodes.csv:1: header "sn,gpu" has no column "model"`},
		{openbNodesHeader + "n0,1,1,x,G2\n", `nodes.csv:2: column 4 (gpu) "x": want a whole number of GPUs from 0 to 64`},
		{openbNodesHeader + "n0,1,1,65,G2\n", `nodes.csv:2: column 4 (gpu) "65"`},
		{openbNodesHeader + "n0,1,1,-1,G2\n", `nodes.csv:2: column 4 (gpu) "-1"`},
		{openbNodesHeader + "n0,1,1,2,\n", `nodes.csv:2: column 5 (model) "": empty model on a node of 2 GPUs`},
		{openbNodesHeader + ",1,1,2,G2\n", `nodes.csv:2: column 1 (sn) "": empty node name`},
		{openbNodesHeader + "n0,1,1,2,G2\nn0,1,1,2,G2\n", `nodes.csv:3: column 1 (sn) "n0": node listed twice (first at line 2)`},
		{openbNodesHeader + "n0,1,1,2\n", `nodes.csv:2: 4 fields, the header has 5`},
		{openbNodesHeader + "n0,1,1,0,\n", `nodes.csv:1: no GPU node: 1 rows, none with gpu > 0`},
		{openbNodesHeader + "n0,1,1,2,G2", `nodes.csv:2: the last row has no line end`},
	} {
		_, err := ReadOpenbNodes(strings.NewReader(c.in), "nodes.csv")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to contain %q", c.in, err, c.want)
		}
	}
}

const openbPodsHeader = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"

func TestReadOpenbPods(t *testing.T) {
	in := openbPodsHeader +
		"p0,12000,16384,1,1000,,LS,Running,0,12537496,0\n" +
		"p1,6000,12288,1,460,,LS,Running,427061,12902960,427061\n" + // shares its GPU: one whole GPU
		"p2,6000,12288,1,500,,BE,Pending,100,200,\n" + // never ran
		"p3,6000,12288,0,0,,BE,Running,100,200,150\n" + // no GPU
		"p4,88000,65536,8,1000,,BE,Succeeded,1000,5000,1200\n" +
		"p5,6000,12288,1,200,,BE,Pending,100,200,\n" // never ran
	got, err := ReadOpenbPods(strings.NewReader(in), "pods.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := &OpenbPods{
		Pods: []OpenbPod{
			{Line: 2, Name: "p0", GPUs: 1, Milli: 1000, QoS: "LS", Created: 0, Scheduled: 0, Deleted: 12537496 * time.Second},
			{Line: 3, Name: "p1", GPUs: 1, Milli: 460, QoS: "LS", Created: 427061 * time.Second, Scheduled: 427061 * time.Second, Deleted: 12902960 * time.Second},
			{Line: 6, Name: "p4", GPUs: 8, Milli: 1000, QoS: "BE", Created: 1000 * time.Second, Scheduled: 1200 * time.Second, Deleted: 5000 * time.Second},
		},
		Rows: 6, NeverRan: 2, NoGPU: 1, Shared: 1,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("pods (-want +got):\n%s", d)
	}
	if d := got.Pods[2].Duration(); d != 3800*time.Second {
		t.Errorf("p4 ran %s, want 3800s (deletion - scheduled)", d)
	}
}

func TestReadOpenbPodsErrors(t *testing.T) {
	row := func(numGPU, milli, qos, created, deleted, sched string) string {
		return openbPodsHeader + "p0,1,1," + numGPU + "," + milli + ",," + qos + ",Running," + created + "," + deleted + "," + sched + "\n"
	}
	for _, c := range []struct{ in, want string }{
		{"", "pods.csv: empty pod list: no header"},
		{"name,num_gpu\n", `pods.csv:1: header "name,num_gpu" has no column "gpu_milli"`},
		{row("x", "1000", "LS", "0", "10", "0"), `pods.csv:2: column 4 (num_gpu) "x": want a whole number of GPUs from 0 to 64`},
		{row("1", "1001", "LS", "0", "10", "0"), `pods.csv:2: column 5 (gpu_milli) "1001": want thousandths of a GPU, 0 to 1000`},
		{row("1", "-1", "LS", "0", "10", "0"), `pods.csv:2: column 5 (gpu_milli) "-1"`},
		{row("1", "1000", "", "0", "10", "0"), `pods.csv:2: column 7 (qos) "": empty QoS class`},
		{row("1", "1000", "LS", "1.5", "10", "0"), `pods.csv:2: column 9 (creation_time) "1.5": want whole seconds`},
		{row("1", "1000", "LS", "", "10", "0"), `pods.csv:2: column 9 (creation_time) ""`},
		{row("1", "1000", "LS", "0", "", "0"), `pods.csv:2: column 10 (deletion_time) ""`},
		{row("1", "1000", "LS", "5", "10", "4"), `pods.csv:2: column 11 (scheduled_time) "4": before creation_time 5`},
		{row("1", "1000", "LS", "0", "3", "4"), `pods.csv:2: column 10 (deletion_time) "3": before scheduled_time 4`},
		{row("1", "1000", "LS", "0", "99999999999999", "4"), `pods.csv:2: column 10 (deletion_time) "99999999999999"`},
		{row("1", "1000", "LS", "0", "10", ""), `pods.csv:1: no pod ran on GPUs: 1 rows, 1 never ran, 0 without GPUs`},
		{openbPodsHeader + `"p0",1,1,1,1000,,LS,Running,0,10,0` + "\n", `pods.csv:2: quoted fields are not supported`},
	} {
		_, err := ReadOpenbPods(strings.NewReader(c.in), "pods.csv")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to contain %q", c.in, err, c.want)
		}
	}
	// A cut file is a truncation, whatever its last row holds.
	_, err := ReadOpenbPods(strings.NewReader(strings.TrimSuffix(row("1", "1000", "LS", "0", "10", "0"), "\n")), "pods.csv")
	if !errors.Is(err, ErrTruncated) {
		t.Errorf("cut file: error %v, want ErrTruncated", err)
	}
}

// FuzzReadOpenb reads any text as both an openb pod list and a node list:
// no panic, and what is returned keeps the readers' promises.
func FuzzReadOpenb(f *testing.F) {
	f.Add(openbPodsHeader + "p0,12000,16384,1,460,,LS,Running,0,12537496,0\np1,1,1,1,1000,,BE,Pending,4,5,\n")
	f.Add(openbNodesHeader + "n0,64000,262144,2,P100\nn1,1,1,8,G2\n")
	f.Add("sn,gpu,model\r\nn0,8,G2\r\n")
	f.Add("name,num_gpu,gpu_milli,gpu_spec,qos,creation_time,deletion_time,scheduled_time\nx,8,1000,,BE,1,2,1\n")
	f.Add("\ufeffname,num_gpu,gpu_milli,gpu_spec,qos,creation_time,deletion_time,scheduled_time,num_gpu\nx,1e309,NaN,,BE,-1,9223372036854775807,2,\"1\"\nx,1,1000,,BE,3,2,1\n")
	f.Add("sn,gpu,model,sn\r\nn0,+8,G2 MIG 1g.5gb,n1\r\nn0,8,G2\r\n")
	f.Fuzz(func(t *testing.T, in string) {
		if pods, err := ReadOpenbPods(strings.NewReader(in), "f"); err == nil {
			shared, names := 0, map[string]bool{}
			for _, p := range pods.Pods {
				if names[p.Name] {
					t.Fatalf("pod %q twice", p.Name)
				}
				names[p.Name] = true
				if p.GPUs < 1 || p.Milli < 0 || p.Milli > 1000 || p.Scheduled < p.Created || p.Duration() < 0 || p.Name == "" {
					t.Fatalf("pod %+v breaks the reader's promises", p)
				}
				if p.Milli < 1000 {
					shared++
				}
			}
			if len(pods.Pods) == 0 || shared != pods.Shared || len(pods.Pods)+pods.NeverRan+pods.NoGPU != pods.Rows {
				t.Fatalf("counts %d pods, %d shared, %+v", len(pods.Pods), shared, *pods)
			}
		}
		if inv, err := ReadOpenbNodes(strings.NewReader(in), "f"); err == nil {
			total := 0
			for _, m := range inv.Models() {
				if m.Model == "" || m.Nodes < 1 || m.Size < 1 || m.Size > MaxOpenbNodeGPUs {
					t.Fatalf("model %+v", m)
				}
				total += m.Nodes
			}
			if len(inv.Nodes) == 0 || total != len(inv.Nodes) || total+inv.NoGPU != inv.Rows {
				t.Fatalf("counts %d nodes in models, %+v", total, *inv)
			}
		}
	})
}
