package mockgpu

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func TestParseProfile(t *testing.T) {
	cases := map[string]struct {
		in      string
		name    string
		count   int
		wantErr string
	}{
		"bare profile is a full DGX":   {"dgxa100", "dgxa100", 8, ""},
		"count suffix":                 {"dgxh100:4", "dgxh100", 4, ""},
		"case and spaces":              {" DGXB200 : 2 ", "dgxb200", 2, ""},
		"h200":                         {"dgxh200", "dgxh200", 8, ""},
		"unknown system lists choices": {"dgx2", "", 0, "dgxa100, dgxb200, dgxh100, dgxh200"},
		"zero GPUs":                    {"dgxa100:0", "", 0, "1 to 16"},
		"too many GPUs":                {"dgxa100:17", "", 0, "1 to 16"},
		"not a number":                 {"dgxa100:x", "", 0, "bad GPU count"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n, c, err := ParseProfile(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || n != tc.name || c != tc.count {
				t.Fatalf("got %q %d %v", n, c, err)
			}
		})
	}
}

func newLib(t *testing.T, opts Options) *Lib {
	t.Helper()
	if opts.Profile == "" {
		opts.Profile = "dgxa100"
	}
	if opts.UUIDSeed == "" {
		opts.UUIDSeed = "seed"
	}
	l, err := NewLib(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestUUIDsAreStableAndSeeded(t *testing.T) {
	a, b := newLib(t, Options{}), newLib(t, Options{})
	c := newLib(t, Options{UUIDSeed: "other-host"})
	seen := map[string]bool{}
	for i, id := range a.UUIDs() {
		if !strings.HasPrefix(id, "GPU-") || len(id) != 40 {
			t.Fatalf("UUID %q", id)
		}
		if b.UUIDs()[i] != id {
			t.Fatalf("GPU %d: %s then %s with the same seed", i, id, b.UUIDs()[i])
		}
		if c.UUIDs()[i] == id {
			t.Fatalf("GPU %d: same UUID with another seed", i)
		}
		if seen[id] {
			t.Fatalf("duplicate UUID %s", id)
		}
		seen[id] = true
	}
}

// TestFilledFunctionsDoNotPanic calls every NVML function the plugin uses
// that go-nvml's mock server leaves unset, and checks the documented values.
func TestFilledFunctionsDoNotPanic(t *testing.T) {
	for _, p := range Profiles() {
		t.Run(p, func(t *testing.T) {
			l := newLib(t, Options{Profile: p + ":2"})
			h, _ := l.DeviceGetHandleByIndex(1)
			hw := profiles[p].hw
			if mw, ret := h.GetEnforcedPowerLimit(); ret != nvml.SUCCESS || mw != hw.powerLimitW*1000 {
				t.Errorf("power limit %d %v", mw, ret)
			}
			if v, ret := h.GetMaxClockInfo(nvml.CLOCK_GRAPHICS); ret != nvml.SUCCESS || v != hw.maxGraphicsMHz {
				t.Errorf("max graphics clock %d", v)
			}
			pci, _ := h.GetPciInfo()
			if pci.Bus != hw.busIDs[1] || pci.BusId[16] != 0 || pci.BusId[15] != '0' {
				t.Errorf("PCI info %+v", pci)
			}
			if b, ret := h.GetBAR1MemoryInfo(); ret != nvml.SUCCESS || b.Bar1Total != hw.bar1MiB<<20 {
				t.Errorf("BAR1 %+v", b)
			}
			for _, call := range []func() nvml.Return{
				func() nvml.Return { _, r := h.GetPowerUsage(); return r },
				func() nvml.Return { _, r := h.GetTemperature(nvml.TEMPERATURE_GPU); return r },
				func() nvml.Return { _, r := h.GetUtilizationRates(); return r },
				func() nvml.Return { _, _, r := h.GetEncoderUtilization(); return r },
				func() nvml.Return { _, _, r := h.GetDecoderUtilization(); return r },
				func() nvml.Return { _, r := h.GetClockInfo(nvml.CLOCK_MEM); return r },
				func() nvml.Return { _, r := h.GetMaxPcieLinkGeneration(); return r },
				func() nvml.Return { _, r := h.GetMaxPcieLinkWidth(); return r },
				func() nvml.Return {
					_, r := h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.AGGREGATE_ECC)
					return r
				},
				func() nvml.Return { _, _, _, _, r := h.GetRemappedRows(); return r },
				func() nvml.Return { _, r := h.GetNvLinkState(0); return r },
				func() nvml.Return { _, r := h.GetNvLinkVersion(0); return r },
				func() nvml.Return { _, r := h.GetNvLinkRemoteDeviceType(0); return r },
				func() nvml.Return { _, r := h.GetNumaNodeId(); return r },
				func() nvml.Return { _, r := h.GetDisplayMode(); return r },
				func() nvml.Return { _, r := h.GetPersistenceMode(); return r },
				func() nvml.Return { _, _, r := h.GetEccMode(); return r },
				func() nvml.Return { _, r := h.GetMaxMigDeviceCount(); return r },
				func() nvml.Return { _, r := h.GetSupportedEventTypes(); return r },
			} {
				if r := call(); r != nvml.SUCCESS {
					t.Errorf("call returned %v", r)
				}
			}
			if _, ret := h.GetNvLinkState(hw.nvlinks); ret != nvml.ERROR_INVALID_ARGUMENT {
				t.Errorf("link past the last: %v", ret)
			}
		})
	}
}

func TestMIG(t *testing.T) {
	l := newLib(t, Options{MIG: map[int][]string{2: {"1g.5gb", "2g.10gb", "4g.20gb"}}})
	migs := l.MIGUUIDs(2)
	if len(migs) != 3 {
		t.Fatalf("MIG UUIDs %v", migs)
	}
	h, _ := l.DeviceGetHandleByIndex(2)
	if mode, _, _ := h.GetMigMode(); mode != nvml.DEVICE_MIG_ENABLE {
		t.Fatal("GPU 2 not in MIG mode")
	}
	m, ret := h.GetMigDeviceHandleByIndex(2)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	a, _ := m.GetAttributes()
	if a.GpuInstanceSliceCount != 4 || a.MemorySizeMB != 19968 {
		t.Fatalf("4g.20gb attributes %+v", a)
	}
	if _, ret := h.GetMigDeviceHandleByIndex(3); ret != nvml.ERROR_NOT_FOUND {
		t.Fatalf("index past the instances: %v", ret)
	}
	if p, _ := m.GetDeviceHandleFromMigDeviceHandle(); p != h {
		t.Fatal("parent handle differs")
	}
	for name, mig := range map[string]map[int][]string{
		"unknown profile":    {0: {"5g.25gb"}},
		"too many slices":    {0: {"4g.20gb", "4g.20gb"}},
		"index past the end": {9: {"1g.5gb"}},
	} {
		if _, err := NewLib(Options{Profile: "dgxa100", MIG: mig}); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func TestParseFaults(t *testing.T) {
	l := newLib(t, Options{MIG: map[int][]string{1: {"3g.20gb", "3g.20gb"}}})
	mig := l.MIGUUIDs(1)[1]
	text := strings.Join([]string{
		"# comment",
		"3 xid 79 # trailing comment",
		l.UUIDs()[4] + " lost",
		"5 ecc-dbe",
		"5 ecc-dbe 3",
		mig + " xid 94",
		"6 xid 13",
		"6 recover",
		"",
		"9 xid 79",
		"2 xid",
		"2 xid 1000",
		"2 explode",
		mig + " lost",
		"2 ecc-dbe 0",
	}, "\n")
	got, errs := l.parseFaults([]byte(text))
	want := map[string]faultSpec{
		"gpu/3":      {xids: []uint64{79}},
		"gpu/4":      {lost: true},
		"gpu/5":      {dbe: 4},
		"mig/" + mig: {xids: []uint64{94}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, w := range want {
		g := got[k]
		if g.lost != w.lost || g.dbe != w.dbe || len(g.xids) != len(w.xids) || (len(w.xids) > 0 && g.xids[0] != w.xids[0]) {
			t.Errorf("%s: got %+v, want %+v", k, g, w)
		}
	}
	wantErrs := []string{"line 10", "out of range", "line 11", "line 12", "1 to 999", "line 13", "unknown action", "line 14", "cannot be lost", "line 15"}
	all := ""
	for _, e := range errs {
		all += e.Error() + "\n"
	}
	if len(errs) != 6 {
		t.Fatalf("want 6 line errors, got %d:\n%s", len(errs), all)
	}
	for _, w := range wantErrs {
		if !strings.Contains(all, w) {
			t.Errorf("errors lack %q:\n%s", w, all)
		}
	}
}

func recoveryAction(t *testing.T, h nvml.Device) (nvml.DeviceGpuRecoveryAction, nvml.Return) {
	t.Helper()
	fv := []nvml.FieldValue{{FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION}}
	ret := h.GetFieldValues(fv)
	return nvml.DeviceGpuRecoveryAction(binary.LittleEndian.Uint32(fv[0].Value[:4])), ret
}

func TestApplyFaults(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "faults")
	l := newLib(t, Options{FaultFile: file, Critical: func(x uint64) bool { return x == 79 || x == 62 }})
	set, _ := l.EventSetCreate()
	for i := 0; i < 8; i++ {
		h, _ := l.DeviceGetHandleByIndex(i)
		h.RegisterEvents(nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError, set)
	}
	events := func() []nvml.EventData {
		var out []nvml.EventData
		for {
			ev, ret := set.Wait(0)
			if ret != nvml.SUCCESS {
				return out
			}
			out = append(out, ev)
		}
	}

	// No file: no faults.
	if err := l.ApplyFaultFile(); err != nil {
		t.Fatal(err)
	}
	if evs := events(); len(evs) != 0 {
		t.Fatalf("events without a file: %v", evs)
	}

	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := l.ApplyFaultFile(); err != nil {
			t.Fatal(err)
		}
	}
	write("3 xid 79\n1 xid 62\n2 ecc-dbe 2\n")
	evs := events()
	if len(evs) != 4 {
		t.Fatalf("want Xid 79, Xid 62, a DBE event and Xid 48, got %d: %+v", len(evs), evs)
	}
	h3, _ := l.DeviceGetHandleByIndex(3)
	if _, ret := h3.GetTemperature(nvml.TEMPERATURE_GPU); ret != nvml.ERROR_GPU_IS_LOST {
		t.Fatalf("GPU 3 after Xid 79 answers %v", ret)
	}
	if id, ret := h3.GetUUID(); ret != nvml.SUCCESS || id != l.UUIDs()[3] {
		t.Fatal("a lost GPU must keep its identity")
	}
	h1, _ := l.DeviceGetHandleByIndex(1)
	if a, _ := recoveryAction(t, h1); a != nvml.GPU_RECOVERY_ACTION_GPU_RESET {
		t.Fatalf("GPU 1 after Xid 62: recovery action %v", a)
	}
	h2, _ := l.DeviceGetHandleByIndex(2)
	if n, _ := h2.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); n != 2 {
		t.Fatalf("GPU 2 volatile DBE %d", n)
	}
	if _, _, pending, _, _ := h2.GetRemappedRows(); !pending {
		t.Fatal("GPU 2 row remapping not pending")
	}

	// Unchanged file: nothing new.
	if err := l.ApplyFaultFile(); err != nil {
		t.Fatal(err)
	}
	if evs := events(); len(evs) != 0 {
		t.Fatalf("re-reading the same file raised %v", evs)
	}

	// Recovery of all: a reset.
	write("3 xid 79\n3 recover\n")
	if _, ret := h3.GetTemperature(nvml.TEMPERATURE_GPU); ret != nvml.SUCCESS {
		t.Fatalf("GPU 3 after recover: %v", ret)
	}
	if a, _ := recoveryAction(t, h1); a != nvml.GPU_RECOVERY_ACTION_NONE {
		t.Fatalf("GPU 1 recovery action after reset %v", a)
	}
	if n, _ := h2.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); n != 0 {
		t.Fatalf("volatile DBE after reset %d", n)
	}
	if n, _ := h2.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.AGGREGATE_ECC); n != 2 {
		t.Fatalf("aggregate DBE after reset %d, want 2 (it survives resets)", n)
	}
	if evs := events(); len(evs) != 0 {
		t.Fatalf("recovery raised events %v", evs)
	}

	// A fresh library (a relaunched plugin) raises the file's faults again.
	write("4 lost\n")
	l2 := newLib(t, Options{FaultFile: file, Critical: func(x uint64) bool { return x == 79 }})
	set2, _ := l2.EventSetCreate()
	h4, _ := l2.DeviceGetHandleByIndex(4)
	h4.RegisterEvents(nvml.EventTypeXidCriticalError, set2)
	if err := l2.ApplyFaultFile(); err != nil {
		t.Fatal(err)
	}
	ev, ret := set2.Wait(0)
	if ret != nvml.SUCCESS || ev.EventData != 79 || ev.Device != h4 || ev.GpuInstanceId != noInstance {
		t.Fatalf("relaunch event %+v %v", ev, ret)
	}
	if _, ret := h4.GetPowerUsage(); ret != nvml.ERROR_GPU_IS_LOST {
		t.Fatalf("relaunched GPU 4 answers %v", ret)
	}
}

func TestEventSetTimesOutAndFrees(t *testing.T) {
	s := newEventSet()
	if _, ret := s.Wait(10); ret != nvml.ERROR_TIMEOUT {
		t.Fatalf("empty set: %v", ret)
	}
	for i := 0; i < eventQueueSize+10; i++ {
		s.push(nvml.EventData{EventData: uint64(i)})
	}
	if ev, _ := s.Wait(0); ev.EventData != 10 {
		t.Fatalf("full queue must drop the oldest, got %d first", ev.EventData)
	}
	s.Free()
	for len(s.ch) > 0 {
		<-s.ch
	}
	if _, ret := s.Wait(1000); ret != nvml.ERROR_UNINITIALIZED {
		t.Fatalf("freed set: %v", ret)
	}
}
