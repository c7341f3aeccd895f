package sim

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A pod's times divided by a small time_scale overflow a time.Duration
// (292 years): the trace's bound (100 years) over time_scale 0.001 is
// 100,000 years. Such a pod is created after the end of the run (left
// out as such), and a work that long is clamped, never negative.
func TestOpenbTimesPastDurationRange(t *testing.T) {
	pods := openbPods +
		"late,1,1,1,1000,,LS,Running,3000000000,3000000001,3000000000\n" + // created ~95 years in
		"long,1,1,1,1000,,LS,Running,0,3000000000,0\n" // runs ~95 years
	sc, err := LoadFile(writeScenario(t, openbScenario(2, "  time_scale = 0.001\n"), map[string]string{"nodes.csv": openbNodes, "pods.csv": pods}))
	if err != nil {
		t.Fatal(err)
	}
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	c := w.Openb[0]
	for _, j := range w.Jobs {
		if j.Work < 0 || j.Submit.Before(sc.Start) || !j.Submit.Before(sc.End()) {
			t.Errorf("job %s: submit %s, work %s: want a submit in the run and a work >= 0", j.Name, j.Submit, j.Work)
		}
		if strings.HasSuffix(j.Name, "-late") {
			t.Errorf("job %s created ~95 years in is replayed", j.Name)
		}
	}
	if c.GPUh < 0 {
		t.Errorf("GPU-hours %f", c.GPUh)
	}
	if c.After < 2 { // p6 and late
		t.Errorf("%d pods after the end, want 2: %+v", c.After, c)
	}
	// The run copes with a job that never ends.
	sc.Length = time.Hour
	if _, err := Run(sc, w, Options{}); err != nil {
		t.Fatal(err)
	}
}

// A node list or pod list that is a device, a folder or a FIFO is refused
// before anything is read (no endless read of /dev/zero, no open blocked
// on a FIFO), with an error naming the block's attribute and the path.
func TestOpenbPathsThatAreNotFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO:", err)
	}
	for _, p := range []string{"/dev/zero", dir, fifo} {
		text := strings.Replace(openbScenario(2, ""), `nodes      = "nodes.csv"`, fmt.Sprintf("nodes = %q", p), 1)
		done := make(chan error, 1)
		go func() {
			_, err := LoadFile(writeScenario(t, text, map[string]string{"pods.csv": openbPods}))
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("nodes = %q", p)) {
				t.Errorf("nodes = %q: error %v", p, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("nodes = %q: still loading after 10s", p)
		}
		text = strings.Replace(openbScenario(2, ""), `trace      = "pods.csv"`, fmt.Sprintf("trace = %q", p), 1)
		sc, err := LoadFile(writeScenario(t, text, map[string]string{"nodes.csv": openbNodes}))
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, err := sc.Workload(); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), `openb "pods"`) || !strings.Contains(err.Error(), p) {
				t.Errorf("trace = %q: error %v", p, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("trace = %q: still reading after 10s", p)
		}
	}
}

// Two pods of one name are refused when the pod list is read, naming both
// lines: they made two jobs of one name, refused only when the run began.
func TestOpenbPodsOfOneName(t *testing.T) {
	pods := openbPods + "p0,1,1,1,1000,,LS,Running,10,7210,10\n"
	sc, err := LoadFile(writeScenario(t, openbScenario(2, ""), map[string]string{"nodes.csv": openbNodes, "pods.csv": pods}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Workload(); err == nil || !strings.Contains(err.Error(), `pods.csv:9: column 1 (name) "p0": pod listed twice (first at line 2)`) {
		t.Errorf("error %v", err)
	}
}

// The modelled cluster's device instances are bounded (MaxClusterDevices):
// a few nodes blocks of 100,000 nodes of 64 GPUs, each cut into 7 slices,
// asked for hundreds of millions of devices, built one by one when the run
// began. The error names the cluster block and the numbers.
func TestClusterOfTooManyDevices(t *testing.T) {
	block := func(name string) string {
		return "  nodes \"" + name + "\" {\n    count = 100000\n    gpus = 64\n    mig {\n      gpus = 64\n      profile = \"1g.10gb\"\n      slices = 7\n    }\n  }\n"
	}
	text := header + "length = \"1h\"\ncluster {\n" + block("a") + block("b") + block("c") + "}\n"
	_, err := LoadFile(writeScenario(t, text, nil))
	if err == nil || !strings.Contains(err.Error(), "cluster: 300000 nodes with 134400000 GPU devices (MIG slices counted apart), more than 1048576") {
		t.Fatalf("error %v", err)
	}
}
