package sim

import (
	"strings"
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
