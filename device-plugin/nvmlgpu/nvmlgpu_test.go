package nvmlgpu_test

import (
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputide/gputide/device-plugin/gpu"
	"github.com/gputide/gputide/device-plugin/mockgpu"
	"github.com/gputide/gputide/device-plugin/nvmlgpu"
)

func TestBusID(t *testing.T) {
	var p nvml.PciInfo
	for i, c := range []byte("00000000:4E:00.0") {
		p.BusId[i] = int8(c)
	}
	if got := nvmlgpu.BusID(p); got != "00000000:4E:00.0" {
		t.Fatalf("BusID = %q (len %d)", got, len(got))
	}
	if got := nvmlgpu.BusID(nvml.PciInfo{Domain: 1, Bus: 0x87}); got != "00000001:87:00.0" {
		t.Fatalf("fallback BusID = %q", got)
	}
	if got := nvmlgpu.BusID(nvml.PciInfo{}); got != "" {
		t.Fatalf("empty BusID = %q", got)
	}
}

func TestPCIBandwidth(t *testing.T) {
	for _, tc := range []struct {
		gen, width int
		want       int64
	}{{3, 16, 15760}, {4, 16, 31504}, {5, 16, 63008}, {4, 8, 15752}, {9, 16, 0}} {
		if got := nvmlgpu.PCIBandwidthMBs(tc.gen, tc.width); got != tc.want {
			t.Errorf("gen %d x%d = %d MB/s, want %d", tc.gen, tc.width, got, tc.want)
		}
	}
}

func TestOpenSystemWithoutLibrary(t *testing.T) {
	_, err := nvmlgpu.OpenSystem("/nonexistent/libnvidia-ml.so.1", nvmlgpu.Options{})
	if !errors.Is(err, nvmlgpu.ErrLibraryNotFound) {
		t.Fatalf("bogus path: %v", err)
	}
	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		t.Skip("this machine has the NVIDIA driver")
	}
	_, err = nvmlgpu.OpenSystem("", nvmlgpu.Options{})
	if !errors.Is(err, nvmlgpu.ErrLibraryNotFound) || !strings.Contains(err.Error(), `backend = "mock"`) {
		t.Fatalf("no driver: %v", err)
	}
}

func open(t *testing.T, opts mockgpu.Options) (*nvmlgpu.Backend, *mockgpu.Lib) {
	t.Helper()
	if opts.Profile == "" {
		opts.Profile = "dgxa100"
	}
	opts.UUIDSeed = "nvmlgpu"
	opts.Critical = func(x uint64) bool { return x == 79 || x == 94 }
	b, l, err := mockgpu.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, l
}

func TestInventory(t *testing.T) {
	b, l := open(t, mockgpu.Options{Profile: "dgxh100", MIG: map[int][]string{5: {"3g.40gb", "1g.10gb"}}})
	inv, err := b.Inventory()
	if err != nil {
		t.Fatal(err)
	}
	if inv.DriverVersion != "550.54.15" || inv.CUDAVersion != "12.4" {
		t.Fatalf("versions %q %q", inv.DriverVersion, inv.CUDAVersion)
	}
	if len(inv.Devices) != 9 {
		t.Fatalf("want 7 GPUs + 2 MIG instances, got %d", len(inv.Devices))
	}
	d0 := inv.Devices[0]
	want := gpu.Attributes{
		MemoryMiB: 81920, BAR1MiB: 131072, PowerLimitW: 700, GraphicsClockMHz: 1980, MemoryClockMHz: 2619,
		PCIeGeneration: 5, PCIeWidth: 16, PCIBandwidthMBs: 63008, ComputeCapability: "9.0", Architecture: "hopper",
		DisplayState: "disabled", PersistenceMode: "enabled", ECCMode: "enabled", NUMANode: 0,
		NVLinkLinks: 18, NVLinkBandwidthGBs: 900, NVLinkTopology: "nvswitch",
	}
	if d0.Attrs != want || d0.Model != "NVIDIA H100 80GB HBM3" || d0.UUID != l.UUIDs()[0] || d0.PCIBusID != "00000000:18:00.0" {
		t.Fatalf("GPU 0 = %+v\nwant attrs %+v", d0, want)
	}
	if inv.Devices[7].Attrs.NUMANode != 1 {
		t.Errorf("GPU 7 NUMA node %d, want 1", inv.Devices[7].Attrs.NUMANode)
	}
	m := inv.Devices[5]
	if m.UUID != l.MIGUUIDs(5)[0] || m.ParentUUID != l.UUIDs()[5] || m.MIG.Profile != "3g.40gb" ||
		m.Model != "NVIDIA H100 80GB HBM3 MIG 3g.40gb" || m.Attrs.MemoryMiB != 40960 || m.Attrs.PowerLimitW != 700 || m.Index != 5 {
		t.Fatalf("MIG instance %+v", m)
	}
	if inv.Devices[6].MIG.Profile != "1g.10gb" || inv.Devices[6].MIG.GPUInstanceID != 1 {
		t.Fatalf("second MIG instance %+v", inv.Devices[6].MIG)
	}
}

// flaky fails DeviceGetHandleByIndex(3) once armed.
type flaky struct {
	*mockgpu.Lib
	armed atomic.Bool
}

func (f *flaky) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	if i == 3 && f.armed.Load() {
		return nil, nvml.ERROR_GPU_IS_LOST
	}
	return f.Lib.DeviceGetHandleByIndex(i)
}

func TestInventoryKeepsUnreadableGPUs(t *testing.T) {
	lib, err := mockgpu.NewLib(mockgpu.Options{Profile: "dgxa100", UUIDSeed: "flaky"})
	if err != nil {
		t.Fatal(err)
	}
	f := &flaky{Lib: lib}
	b, err := nvmlgpu.Open(f, nvmlgpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	first, _ := b.Inventory()
	f.armed.Store(true)
	second, err := b.Inventory()
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Devices) != 8 || second.Devices[3].UUID != first.Devices[3].UUID {
		t.Fatalf("GPU 3 dropped from the inventory while unreadable: %d devices", len(second.Devices))
	}
	if _, err := b.Sample(first.Devices[3].UUID); err != nil {
		t.Fatalf("the kept GPU lost its handle: %v", err)
	}
}

func TestHealthProbesAndEvents(t *testing.T) {
	b, l := open(t, mockgpu.Options{MIG: map[int][]string{1: {"3g.20gb", "3g.20gb"}}})
	inv, _ := b.Inventory()
	if err := l.ApplyFaults([]byte("3 lost\n2 ecc-dbe 2\n" + l.MIGUUIDs(1)[1] + " xid 94\n")); err != nil {
		t.Fatal(err)
	}
	probes, err := b.CheckHealth()
	if err != nil {
		t.Fatal(err)
	}
	if len(probes) != 8 {
		t.Fatalf("want a probe per physical GPU, got %d", len(probes))
	}
	if p := probes[l.UUIDs()[3]]; p.State != gpu.ProbeLost {
		t.Errorf("GPU 3 probe %+v", p)
	}
	if p := probes[l.UUIDs()[2]]; p.State != gpu.ProbeOK || !p.ECCKnown || p.VolatileUncorrectedECC != 2 || !p.RemapPending || p.Recovery != gpu.RecoveryNone {
		t.Errorf("GPU 2 probe %+v", p)
	}
	if p := probes[l.UUIDs()[1]]; p.Recovery != gpu.RecoveryGPUReset {
		t.Errorf("GPU 1 probe %+v (Xid 94 on a MIG instance asks for a GPU reset)", p)
	}
	if p := probes[l.UUIDs()[0]]; p != (gpu.Probe{ECCKnown: true, Recovery: gpu.RecoveryNone}) {
		t.Errorf("GPU 0 probe %+v", p)
	}

	got := map[string][]string{}
	for {
		ev, ok, err := b.WaitEvent(50 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		k := "dbe"
		if ev.Kind == gpu.EventXid {
			k = "xid " + strconv.FormatUint(ev.Xid, 10)
		}
		got[ev.UUID] = append(got[ev.UUID], k)
	}
	want := map[string][]string{
		l.UUIDs()[3]:     {"xid 79"},
		l.UUIDs()[2]:     {"dbe", "xid 48"},
		l.MIGUUIDs(1)[1]: {"xid 94"},
	}
	for id, w := range want {
		if strings.Join(got[id], ",") != strings.Join(w, ",") {
			t.Errorf("events of %s: %v, want %v", id, got[id], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("events %v", got)
	}

	s, err := b.Sample(inv.Devices[0].UUID)
	if err != nil || *s.TemperatureC != 31 || *s.PowerW != 54 || *s.PowerLimitW != 400 || *s.MemoryTotalMiB != 40960 || *s.ECCUncorrectedAggregate != 0 {
		t.Fatalf("sample of GPU 0: %+v %v", s, err)
	}
	lost, _ := b.Sample(l.UUIDs()[3])
	if lost.TemperatureC != nil || lost.PowerW != nil || lost.MemoryTotalMiB == nil {
		t.Fatalf("sample of the lost GPU must lack dynamic values: %+v", lost)
	}
	mig, _ := b.Sample(l.MIGUUIDs(1)[0])
	if *mig.MemoryTotalMiB != 19968 || mig.GPUUtilPct != nil || *mig.TemperatureC != 32 {
		t.Fatalf("MIG sample %+v", mig)
	}
	if _, err := b.Sample("GPU-nope"); !errors.Is(err, gpu.ErrUnknownDevice) {
		t.Fatalf("unknown device: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Inventory(); err == nil {
		t.Fatal("Inventory after Close must fail")
	}
}
