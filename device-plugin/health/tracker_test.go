package health

import (
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/device-plugin/gpu"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func devices() []gpu.Device {
	return []gpu.Device{
		{UUID: "GPU-0", Index: 0},
		{UUID: "MIG-a", Index: 1, ParentUUID: "GPU-1", MIG: &gpu.MIG{Profile: "3g.20gb"}},
		{UUID: "MIG-b", Index: 1, ParentUUID: "GPU-1", MIG: &gpu.MIG{Profile: "3g.20gb", GPUInstanceID: 1}},
	}
}

func ok() gpu.Probe { return gpu.Probe{Recovery: gpu.RecoveryNone, ECCKnown: true} }

func TestXidPolicy(t *testing.T) {
	cases := map[string]struct {
		policy XidPolicy
		xid    uint64
		want   bool
	}{
		"79 fallen off the bus is critical":     {XidPolicy{}, 79, true},
		"48 double-bit ECC is critical":         {XidPolicy{}, 48, true},
		"13 graphics exception is an app error": {XidPolicy{}, 13, false},
		"31 page fault is an app error":         {XidPolicy{}, 31, false},
		"unknown Xid is not critical":           {XidPolicy{}, 500, false},
		"extra makes 13 critical":               {XidPolicy{Extra: []uint64{13}}, 13, true},
		"ignored wins over the built-in list":   {XidPolicy{Ignored: []uint64{92}}, 92, false},
		"ignored wins over extra":               {XidPolicy{Extra: []uint64{13}, Ignored: []uint64{13}}, 13, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.policy.Critical(tc.xid); got != tc.want {
				t.Fatalf("Critical(%d) = %v", tc.xid, got)
			}
		})
	}
	list := DefaultCriticalXids()
	for i := 1; i < len(list); i++ {
		if list[i-1].Xid >= list[i].Xid {
			t.Fatalf("DefaultCriticalXids not sorted: %v", list)
		}
	}
	for _, app := range []uint64{13, 31, 43, 45, 68, 109} {
		if (XidPolicy{}).Critical(app) {
			t.Errorf("application Xid %d must not be critical", app)
		}
	}
}

func TestTrackerRules(t *testing.T) {
	tr := NewTracker(XidPolicy{})
	tr.SetDevices(devices())
	tr.ObserveProbes(map[string]gpu.Probe{"GPU-0": ok(), "GPU-1": ok()}, t0)
	for _, id := range []string{"GPU-0", "MIG-a", "MIG-b"} {
		if s := tr.Status(id); !s.Healthy || s.Description != "" {
			t.Fatalf("%s starts %+v", id, s)
		}
	}

	// Rule 1: a non-critical Xid changes nothing; a critical one on a MIG
	// instance marks that instance only.
	if crit, changed := tr.ObserveEvent(gpu.Event{UUID: "GPU-0", Kind: gpu.EventXid, Xid: 13, Time: t0}); crit || changed {
		t.Fatal("Xid 13 must not count")
	}
	if _, changed := tr.ObserveEvent(gpu.Event{UUID: "MIG-b", Kind: gpu.EventXid, Xid: 94, Time: t0.Add(time.Second)}); !changed {
		t.Fatal("Xid 94 on MIG-b must change health")
	}
	if _, changed := tr.ObserveEvent(gpu.Event{UUID: "MIG-b", Kind: gpu.EventXid, Xid: 94, Time: t0.Add(2 * time.Second)}); changed {
		t.Fatal("a repeated Xid must not change health")
	}
	if s := tr.Status("MIG-b"); s.Healthy || s.Description != "Xid 94 (contained ECC error) at 2026-11-01T12:00:01Z" {
		t.Fatalf("MIG-b %+v", s)
	}
	if !tr.Status("MIG-a").Healthy {
		t.Fatal("MIG-a must stay healthy")
	}

	// A GPU-wide Xid marks every instance of the GPU.
	tr.ObserveEvent(gpu.Event{UUID: "GPU-1", Kind: gpu.EventXid, Xid: 62, Time: t0.Add(3 * time.Second)})
	if s := tr.Status("MIG-a"); s.Healthy || !strings.Contains(s.Description, "Xid 62") {
		t.Fatalf("MIG-a after GPU Xid: %+v", s)
	}

	// Rule 2: probes; rule 3: the reset clears the sticky marks raised
	// before it.
	at := t0.Add(10 * time.Second)
	_, changed := tr.ObserveProbes(map[string]gpu.Probe{"GPU-0": {State: gpu.ProbeLost}, "GPU-1": {Recovery: gpu.RecoveryGPUReset, ECCKnown: true}}, at)
	if !changed {
		t.Fatal("probe change not reported")
	}
	if s := tr.Status("GPU-0"); s.Healthy || !strings.Contains(s.Description, "ERROR_GPU_IS_LOST") {
		t.Fatalf("lost GPU-0: %+v", s)
	}
	if s := tr.Status("MIG-a"); !strings.Contains(s.Description, "driver requests recovery action: GPU reset") {
		t.Fatalf("MIG-a recovery action: %+v", s)
	}
	// An event after the last bad probe but before the reset is seen.
	tr.ObserveEvent(gpu.Event{UUID: "GPU-0", Kind: gpu.EventXid, Xid: 79, Time: at.Add(time.Second)})
	resets, changed := tr.ObserveProbes(map[string]gpu.Probe{"GPU-0": ok(), "GPU-1": ok()}, at.Add(5*time.Second))
	if !changed || len(resets) != 2 {
		t.Fatalf("resets %v changed %v", resets, changed)
	}
	for _, id := range []string{"GPU-0", "MIG-a", "MIG-b"} {
		if s := tr.Status(id); !s.Healthy {
			t.Errorf("%s after reset: %+v", id, s)
		}
	}

	// ECC: uncorrected volatile errors mark the GPU; the counter dropping
	// is a reset that clears a DBE event mark.
	tr.ObserveEvent(gpu.Event{UUID: "GPU-0", Kind: gpu.EventDoubleBitECC, Time: at.Add(6 * time.Second)})
	tr.ObserveProbes(map[string]gpu.Probe{"GPU-0": {Recovery: gpu.RecoveryNone, ECCKnown: true, VolatileUncorrectedECC: 2, RemapPending: true}}, at.Add(7*time.Second))
	s := tr.Status("GPU-0")
	for _, want := range []string{"double-bit ECC error event", "2 uncorrected ECC errors since the last GPU reset", "row remapping pending"} {
		if !strings.Contains(s.Description, want) {
			t.Errorf("description %q lacks %q", s.Description, want)
		}
	}
	resets, _ = tr.ObserveProbes(map[string]gpu.Probe{"GPU-0": ok()}, at.Add(8*time.Second))
	if len(resets) != 1 || !tr.Status("GPU-0").Healthy {
		t.Fatalf("ECC reset: resets %v status %+v", resets, tr.Status("GPU-0"))
	}

	// A repeated identical probe changes nothing.
	if _, changed := tr.ObserveProbes(map[string]gpu.Probe{"GPU-0": ok(), "GPU-1": ok()}, at.Add(9*time.Second)); changed {
		t.Fatal("identical probes reported a change")
	}

	// Devices that vanish lose their state.
	tr.ObserveEvent(gpu.Event{UUID: "GPU-0", Kind: gpu.EventXid, Xid: 79, Time: at.Add(10 * time.Second)})
	tr.SetDevices(devices()[1:])
	tr.SetDevices(devices())
	if !tr.Status("GPU-0").Healthy {
		t.Fatal("state of a removed device survived")
	}
	if _, changed := tr.ObserveEvent(gpu.Event{UUID: "GPU-9", Kind: gpu.EventXid, Xid: 79}); changed {
		t.Fatal("an event for an unknown device changed health")
	}
}

func TestDescribeXid(t *testing.T) {
	for xid, want := range map[uint64]string{
		79:  "Xid 79 (GPU has fallen off the bus)",
		13:  "Xid 13 (graphics engine exception)",
		777: "Xid 777",
	} {
		if got := DescribeXid(xid); got != want {
			t.Errorf("DescribeXid(%d) = %q, want %q", xid, got, want)
		}
	}
}
