package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gputide/gputide/device-plugin/gpu"
	"github.com/gputide/gputide/device-plugin/internal/nomadsim"
	"github.com/gputide/gputide/device-plugin/proto/devicepb"
)

// fingerprints runs Fingerprint in the background and hands every message
// on the returned channel.
func fingerprints(t *testing.T, p *Plugin) <-chan *devicepb.FingerprintResponse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan *devicepb.FingerprintResponse, 64)
	done := make(chan error, 1)
	go func() {
		done <- p.Fingerprint(ctx, func(r *devicepb.FingerprintResponse) error {
			ch <- r
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Fingerprint returned %v", err)
		}
		p.Shutdown()
	})
	return ch
}

func next(t *testing.T, ch <-chan *devicepb.FingerprintResponse, within time.Duration) *devicepb.FingerprintResponse {
	t.Helper()
	select {
	case r := <-ch:
		if err := nomadsim.ValidateFingerprint(r); err != nil {
			t.Fatalf("Nomad would reject this fingerprint: %v", err)
		}
		return r
	case <-time.After(within):
		t.Fatalf("no fingerprint within %s", within)
	}
	return nil
}

func newPlugin(t *testing.T, body string) *Plugin {
	t.Helper()
	p := New(nil, nil)
	if err := p.SetConfig(encode(t, body)); err != nil {
		t.Fatal(err)
	}
	return p
}

func device(r *devicepb.FingerprintResponse, id string) *devicepb.DetectedDevice {
	for _, g := range r.GetDeviceGroup() {
		for _, d := range g.GetDevices() {
			if d.GetID() == id {
				return d
			}
		}
	}
	return nil
}

func healthyCount(r *devicepb.FingerprintResponse) (healthy, total int) {
	for _, g := range r.GetDeviceGroup() {
		for _, d := range g.GetDevices() {
			total++
			if d.GetHealthy() {
				healthy++
			}
		}
	}
	return healthy, total
}

func TestFingerprintDGXA100(t *testing.T) {
	p := newPlugin(t, `
		backend = "mock"
		mock_uuid_seed = "test"
	`)
	r := next(t, fingerprints(t, p), 5*time.Second)
	if len(r.DeviceGroup) != 1 {
		t.Fatalf("want one group per model, got %d", len(r.DeviceGroup))
	}
	g := r.DeviceGroup[0]
	if g.Vendor != "nvidia" || g.DeviceType != "gpu" || g.DeviceName != "Mock NVIDIA A100-SXM4-40GB" {
		t.Fatalf("group %q/%q/%q", g.Vendor, g.DeviceType, g.DeviceName)
	}
	if len(g.Devices) != 8 {
		t.Fatalf("want 8 devices, got %d", len(g.Devices))
	}
	wantBus := []string{"07", "0f", "47", "4e", "87", "90", "b7", "bd"}
	for i, d := range g.Devices {
		if !strings.HasPrefix(d.ID, "GPU-") || !d.Healthy || d.HealthDescription != "" {
			t.Errorf("device %d: %v", i, d)
		}
		want := "00000000:" + wantBus[i] + ":00.0"
		if got := d.GetHwLocality().GetPciBusId(); got != want {
			t.Errorf("device %d bus id %q, want %q (no NULs)", i, got, want)
		}
	}
	type attr struct {
		i    int64
		s    string
		unit string
	}
	want := map[string]attr{
		"memory":             {i: 40960, unit: "MiB"},
		"bar1":               {i: 65536, unit: "MiB"},
		"power":              {i: 400, unit: "W"},
		"cores_clock":        {i: 1410, unit: "MHz"},
		"memory_clock":       {i: 1215, unit: "MHz"},
		"pci_bandwidth":      {i: 31504, unit: "MB/s"},
		"pcie_generation":    {i: 4},
		"pcie_width":         {i: 16},
		"driver_version":     {s: "550.54.15"},
		"cuda_version":       {s: "12.4"},
		"compute_capability": {s: "8.0"},
		"architecture":       {s: "ampere"},
		"display_state":      {s: "disabled"},
		"persistence_mode":   {s: "enabled"},
		"ecc_mode":           {s: "enabled"},
		"nvlink_links":       {i: 12},
		"nvlink_bandwidth":   {i: 600, unit: "GB/s"},
		"nvlink_topology":    {s: "nvswitch"},
	}
	for k, w := range want {
		a, ok := g.Attributes[k]
		if !ok {
			t.Errorf("attribute %q missing", k)
			continue
		}
		if a.GetIntVal() != w.i || a.GetStringVal() != w.s || a.GetUnit() != w.unit {
			t.Errorf("attribute %q = %v, want int %d string %q unit %q", k, a, w.i, w.s, w.unit)
		}
	}
	if a := g.Attributes["mig"]; a == nil || a.GetBoolVal() {
		t.Errorf("mig attribute %v, want false", a)
	}
	if a, ok := g.Attributes["numa_node"]; ok {
		t.Errorf("numa_node %v on a group spanning two NUMA nodes", a)
	}

	// Same seed, same UUIDs (Nomad needs IDs stable across restarts).
	p2 := newPlugin(t, "backend = \"mock\"\nmock_uuid_seed = \"test\"")
	r2 := next(t, fingerprints(t, p2), 5*time.Second)
	for i, d := range r2.DeviceGroup[0].Devices {
		if d.ID != g.Devices[i].ID {
			t.Errorf("device %d: UUID %s after restart, was %s", i, d.ID, g.Devices[i].ID)
		}
	}
}

func TestFingerprintMIGGroupsAndIgnoredIDs(t *testing.T) {
	// Find the UUIDs first, then ignore GPU 7 and one MIG instance.
	probe := newPlugin(t, "backend = \"mock\"\nmock_uuid_seed = \"mig\"\nmock_mig = [\"0:3g.20gb,2g.10gb,1g.5gb,1g.5gb\"]")
	r := next(t, fingerprints(t, probe), 5*time.Second)
	byName := map[string]*devicepb.DeviceGroup{}
	for _, g := range r.DeviceGroup {
		byName[g.DeviceName] = g
	}
	full := byName["Mock NVIDIA A100-SXM4-40GB"]
	if full == nil || len(full.Devices) != 7 {
		t.Fatalf("want 7 whole GPUs (GPU 0 is in MIG mode), got %v", full)
	}
	checks := map[string]struct {
		n       int
		memory  int64
		sms     int64
		profile string
	}{
		"Mock NVIDIA A100-SXM4-40GB MIG 3g.20gb": {1, 19968, 42, "3g.20gb"},
		"Mock NVIDIA A100-SXM4-40GB MIG 2g.10gb": {1, 9856, 28, "2g.10gb"},
		"Mock NVIDIA A100-SXM4-40GB MIG 1g.5gb":  {2, 4864, 14, "1g.5gb"},
	}
	for name, c := range checks {
		g := byName[name]
		if g == nil {
			t.Fatalf("group %q missing; groups: %v", name, byName)
		}
		if len(g.Devices) != c.n {
			t.Errorf("%s: %d devices, want %d", name, len(g.Devices), c.n)
		}
		for _, d := range g.Devices {
			if !strings.HasPrefix(d.ID, "MIG-") || d.GetHwLocality().GetPciBusId() != "00000000:07:00.0" {
				t.Errorf("%s: device %v", name, d)
			}
		}
		if g.Attributes["memory"].GetIntVal() != c.memory || g.Attributes["multiprocessors"].GetIntVal() != c.sms ||
			g.Attributes["mig_profile"].GetStringVal() != c.profile || !g.Attributes["mig"].GetBoolVal() ||
			g.Attributes["power"].GetIntVal() != 400 || g.Attributes["numa_node"] == nil || g.Attributes["numa_node"].GetIntVal() != 0 {
			t.Errorf("%s attributes: %v", name, g.Attributes)
		}
	}
	ignoredMIG := byName["Mock NVIDIA A100-SXM4-40GB MIG 1g.5gb"].Devices[0].ID
	ignoredGPU := full.Devices[6].ID

	p := newPlugin(t, fmt.Sprintf("backend = \"mock\"\nmock_uuid_seed = \"mig\"\nmock_mig = [\"0:3g.20gb,2g.10gb,1g.5gb,1g.5gb\"]\nignored_gpu_ids = [%q, %q]", ignoredMIG, ignoredGPU))
	r = next(t, fingerprints(t, p), 5*time.Second)
	if device(r, ignoredMIG) != nil || device(r, ignoredGPU) != nil {
		t.Fatal("ignored devices are fingerprinted")
	}
	if _, total := healthyCount(r); total != 6+3 {
		t.Fatalf("want 9 devices after ignoring 2 of 11, got %d", total)
	}
	if _, err := p.Reserve(context.Background(), []string{ignoredGPU}); err == nil {
		t.Fatal("reserving an ignored GPU must fail")
	}
	res, err := p.Reserve(context.Background(), []string{byName["Mock NVIDIA A100-SXM4-40GB MIG 3g.20gb"].Devices[0].ID})
	if err != nil || !strings.HasPrefix(res.Envs[VisibleDevicesEnv], "MIG-") {
		t.Fatalf("reserve MIG: %v %v", res, err)
	}
}

// changeWithin bounds how long a test waits for a change that a short
// configured period should bring: long enough for a loaded CI machine, and
// half the default health check period (the shortest default), which the
// change could not beat had the configured period been ignored.
var changeWithin = DefaultConfig().HealthCheckPeriod / 2

// TestHealthXid79OnGPU3 is the health test in process: an Xid 79
// injected on GPU 3 through the fault file makes the next fingerprint mark
// it unhealthy within the health period, recovery makes it healthy, and a
// restarted plugin derives the same health from the file.
func TestHealthXid79OnGPU3(t *testing.T) {
	faults := filepath.Join(t.TempDir(), "faults")
	const period = 200 * time.Millisecond
	body := fmt.Sprintf("backend = \"mock\"\nmock_uuid_seed = \"h\"\nhealth_check_period = %q\nmock_fault_file = %q", period, faults)
	p := newPlugin(t, body)
	ch := fingerprints(t, p)
	r := next(t, ch, 5*time.Second)
	gpu3 := r.DeviceGroup[0].Devices[3].ID
	if h, n := healthyCount(r); h != 8 || n != 8 {
		t.Fatalf("start: %d/%d healthy", h, n)
	}

	if err := os.WriteFile(faults, []byte("3 xid 79\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var d *devicepb.DetectedDevice
	for d == nil || d.Healthy {
		r = next(t, ch, changeWithin)
		d = device(r, gpu3)
	}
	// Within one health period; changeWithin leaves a loaded machine
	// seconds of slack yet fails if the period were ignored.
	if took := time.Since(start); took >= changeWithin {
		t.Errorf("unhealthy after %s, want within one health period (%s)", took, period)
	}
	// The event and the probe may land in one fingerprint or two.
	for !strings.Contains(d.HealthDescription, "Xid 79 (GPU has fallen off the bus)") ||
		!strings.Contains(d.HealthDescription, "ERROR_GPU_IS_LOST") {
		r = next(t, ch, changeWithin)
		d = device(r, gpu3)
	}
	if d.Healthy {
		t.Fatalf("GPU 3 healthy again without recovery: %v", d)
	}
	if h, n := healthyCount(r); h != 7 || n != 8 {
		t.Fatalf("after Xid: %d/%d healthy, want 7/8", h, n)
	}

	// Nothing changes: no resend.
	select {
	case r := <-ch:
		t.Fatalf("fingerprint resent without a change: %v", device(r, gpu3))
	case <-time.After(5 * period):
	}

	// Restart: a fresh plugin derives the unhealthy state from the file in
	// its very first fingerprint.
	p2 := newPlugin(t, body)
	r2 := next(t, fingerprints(t, p2), 5*time.Second)
	if d := device(r2, gpu3); d == nil || d.Healthy {
		t.Fatalf("after restart GPU 3 is %v, want unhealthy", d)
	}

	if err := os.WriteFile(faults, []byte("3 xid 79\n3 recover\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for !d.GetHealthy() {
		r = next(t, ch, changeWithin)
		d = device(r, gpu3)
	}
	if d.HealthDescription != "" {
		t.Errorf("recovered device keeps description %q", d.HealthDescription)
	}
	if h, n := healthyCount(r); h != 8 || n != 8 {
		t.Fatalf("after recovery: %d/%d healthy", h, n)
	}
}

func TestHealthFaultKinds(t *testing.T) {
	faults := filepath.Join(t.TempDir(), "faults")
	const period = 100 * time.Millisecond
	p := newPlugin(t, fmt.Sprintf("backend = \"mock\"\nmock_uuid_seed = \"k\"\nhealth_check_period = %q\nmock_fault_file = %q\nmock_mig = [\"1:3g.20gb,3g.20gb\"]\nignored_xids = [92]", period, faults))
	ch := fingerprints(t, p)
	r := next(t, ch, 5*time.Second)
	var gpus, migs []string
	for _, g := range r.DeviceGroup {
		for _, d := range g.Devices {
			if strings.HasPrefix(d.ID, "MIG-") {
				migs = append(migs, d.ID)
			} else {
				gpus = append(gpus, d.ID)
			}
		}
	}
	if len(gpus) != 7 || len(migs) != 2 {
		t.Fatalf("want 7 GPUs and 2 MIG instances, got %d and %d", len(gpus), len(migs))
	}
	cases := []struct {
		name      string
		file      string
		unhealthy map[string]string // id -> description part
	}{
		{"non-critical Xid 13 leaves the GPU healthy", "0 xid 13\n", nil},
		{"ignored Xid 92 leaves the GPU healthy", "0 xid 92\n", nil},
		{"lost GPU by UUID", gpus[2] + " lost\n", map[string]string{gpus[2]: "ERROR_GPU_IS_LOST"}},
		{"double-bit ECC", "4 ecc-dbe 2\n", map[string]string{gpus[3]: "2 uncorrected ECC errors"}},
		{"Xid 48 names the Xid and asks for a reset", "0 xid 48\n", map[string]string{gpus[0]: "Xid 48 (double-bit ECC error)"}},
		{"Xid on one MIG instance", migs[1] + " xid 94\n", map[string]string{
			migs[1]: "Xid 94 (contained ECC error)",
			migs[0]: "driver requests recovery action: GPU reset",
		}},
		{"everything recovered", "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(faults, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(changeWithin)
			for {
				bad := 0
				ok := true
				for _, g := range r.DeviceGroup {
					for _, d := range g.Devices {
						want, isBad := tc.unhealthy[d.ID]
						if !d.Healthy {
							bad++
						}
						if d.Healthy == isBad || (isBad && !strings.Contains(d.HealthDescription, want)) {
							ok = false
						}
					}
				}
				if ok && bad == len(tc.unhealthy) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("health never matched %v; last fingerprint: %v", tc.unhealthy, r)
				}
				select {
				case r = <-ch:
				case <-time.After(time.Until(deadline)):
				}
			}
		})
	}
}

func TestReserve(t *testing.T) {
	p := newPlugin(t, "backend = \"mock\"\nmock_uuid_seed = \"r\"")
	r := next(t, fingerprints(t, p), 5*time.Second)
	ids := []string{r.DeviceGroup[0].Devices[5].ID, r.DeviceGroup[0].Devices[2].ID}
	res, err := p.Reserve(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Envs["NVIDIA_VISIBLE_DEVICES"]; got != ids[0]+","+ids[1] {
		t.Fatalf("NVIDIA_VISIBLE_DEVICES = %q", got)
	}
	if len(res.Mounts) != 0 || len(res.Devices) != 0 {
		t.Fatalf("unexpected mounts/devices %v", res)
	}
	_, err = p.Reserve(context.Background(), []string{ids[0], "GPU-nope", "MIG-nah"})
	if err == nil || err.Error() != "unknown device IDs: GPU-nope, MIG-nah" {
		t.Fatalf("unknown IDs: got %v", err)
	}
	empty, err := p.Reserve(context.Background(), nil)
	if err != nil || len(empty.Envs) != 0 {
		t.Fatalf("empty reserve: %v %v", empty, err)
	}
}

func TestStats(t *testing.T) {
	p := newPlugin(t, "backend = \"mock\"\nmock_uuid_seed = \"s\"\nmock_mig = [\"7:7g.40gb\"]")
	fp := next(t, fingerprints(t, p), 5*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	var first *devicepb.StatsResponse
	var took time.Duration
	const interval = 100 * time.Millisecond
	start := time.Now()
	err := p.Stats(ctx, interval, func(r *devicepb.StatsResponse) error {
		if first == nil {
			first = r
		}
		if n.Add(1) == 4 {
			took = time.Since(start)
			cancel()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The first round is sent at once and round k no earlier than k
	// intervals after the call, however loaded the machine. The upper bound
	// is where the 1s default would put round 3 had the interval been
	// ignored; under it, a loaded machine has 2.7s of slack.
	if took < 3*interval || took >= 3*DefaultStatsInterval {
		t.Errorf("4 rounds at %s took %s, want at least %s and under %s", interval, took, 3*interval, 3*DefaultStatsInterval)
	}
	if len(first.Groups) != 2 {
		t.Fatalf("want stats for 2 groups, got %d", len(first.Groups))
	}
	for _, g := range first.Groups {
		if g.Vendor != "nvidia" || g.Type != "gpu" {
			t.Errorf("group %q/%q", g.Vendor, g.Type)
		}
	}
	gpu0 := fp.DeviceGroup[0].Devices[0].ID
	st := first.Groups[0].InstanceStats[gpu0]
	if st == nil {
		t.Fatalf("no stats for %s", gpu0)
	}
	a := st.Stats.Attributes
	check := func(name string, num, den int64, unit string) {
		t.Helper()
		v := a[name]
		if v == nil || v.GetIntNumeratorVal().GetValue() != num || v.GetUnit() != unit ||
			(den != 0 && v.GetIntDenominatorVal().GetValue() != den) {
			t.Errorf("%s = %v, want %d/%d %s", name, v, num, den, unit)
		}
	}
	check("Memory state", 4, 40960, "MiB")
	check("BAR1 buffer state", 2, 65536, "MiB")
	check("Temperature", 31, 0, "C")
	check("GPU utilization", 0, 0, "%")
	check("Graphics clock", 210, 0, "MHz")
	check("ECC uncorrected errors (volatile)", 0, 0, "#")
	if pw := a["Power usage"]; pw.GetFloatNumeratorVal().GetValue() != 54 || pw.GetFloatDenominatorVal().GetValue() != 400 || pw.GetUnit() != "W" {
		t.Errorf("power %v, want 54/400 W", pw)
	}
	if st.Summary.GetIntNumeratorVal().GetValue() != 4 || st.Summary.GetUnit() != "MiB" || st.Timestamp == nil {
		t.Errorf("summary %v", st)
	}
	mig := first.Groups[1]
	if mig.Name != "Mock NVIDIA A100-SXM4-40GB MIG 7g.40gb" || len(mig.InstanceStats) != 1 {
		t.Fatalf("MIG stats group %v", mig)
	}
	for _, s := range mig.InstanceStats {
		if s.Stats.Attributes["Memory state"].GetIntDenominatorVal().GetValue() != 40192 {
			t.Errorf("MIG memory %v", s.Stats.Attributes["Memory state"])
		}
	}
}

func TestDisabled(t *testing.T) {
	p := newPlugin(t, "enabled = false\nbackend = \"mock\"")
	err := p.Fingerprint(context.Background(), func(*devicepb.FingerprintResponse) error { return nil })
	if !errors.Is(err, ErrDisabled) || err.Error() != "device is not enabled" {
		t.Fatalf("Fingerprint: %v", err)
	}
	if err := p.Stats(context.Background(), time.Second, func(*devicepb.StatsResponse) error { return nil }); !errors.Is(err, ErrDisabled) {
		t.Fatalf("Stats: %v", err)
	}
	if _, err := p.Reserve(context.Background(), []string{"GPU-1"}); !errors.Is(err, ErrDisabled) {
		t.Fatalf("Reserve: %v", err)
	}
}

// failingBackend stands in for a node without the NVIDIA driver.
func TestMissingNVMLKeepsStreamOpen(t *testing.T) {
	var opens atomic.Int32
	p := New(nil, func(Config, hclog.Logger) (gpu.Backend, error) {
		opens.Add(1)
		return nil, errors.New("NVML library (libnvidia-ml.so.1) not found")
	})
	if err := p.SetConfig(encode(t, `fingerprint_period = "100ms"`)); err != nil {
		t.Fatal(err)
	}
	r := next(t, fingerprints(t, p), 5*time.Second)
	if len(r.DeviceGroup) != 0 {
		t.Fatalf("want no devices, got %v", r)
	}
	// Three opens take two periods (200ms); had the retry waited for the
	// default 1m fingerprint period, there would be one.
	start := time.Now()
	for opens.Load() < 3 {
		if time.Since(start) >= changeWithin {
			t.Fatalf("backend opened %d times in %s at a 100ms period; want retries", opens.Load(), changeWithin)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fakeBackend is a backend whose inventory the test changes.
type fakeBackend struct {
	mu  sync.Mutex
	inv gpu.Inventory
}

func (f *fakeBackend) Name() string { return "fake" }
func (f *fakeBackend) Inventory() (gpu.Inventory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	inv := f.inv
	inv.Devices = append([]gpu.Device(nil), f.inv.Devices...)
	return inv, nil
}
func (f *fakeBackend) CheckHealth() (map[string]gpu.Probe, error) { return nil, nil }
func (f *fakeBackend) WaitEvent(d time.Duration) (gpu.Event, bool, error) {
	time.Sleep(d)
	return gpu.Event{}, false, nil
}
func (f *fakeBackend) Sample(string) (gpu.Sample, error) { return gpu.Sample{}, nil }
func (f *fakeBackend) Close() error                      { return nil }

func (f *fakeBackend) set(mutate func(*gpu.Inventory)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mutate(&f.inv)
}

// TestFingerprintResendsOnlyOnChange: an attribute change or a new device
// is resent at the next fingerprint period; unchanged periods send nothing.
func TestFingerprintResendsOnlyOnChange(t *testing.T) {
	const period = 100 * time.Millisecond
	fb := &fakeBackend{inv: gpu.Inventory{DriverVersion: "1", Devices: []gpu.Device{
		{UUID: "GPU-a", Model: "Test GPU", PCIBusID: "00000000:01:00.0", Attrs: gpu.Attributes{MemoryMiB: 1024, PowerLimitW: 300}},
	}}}
	p := New(nil, func(Config, hclog.Logger) (gpu.Backend, error) { return fb, nil })
	if err := p.SetConfig(encode(t, fmt.Sprintf("fingerprint_period = %q", period))); err != nil {
		t.Fatal(err)
	}
	ch := fingerprints(t, p)
	r := next(t, ch, 5*time.Second)
	if r.DeviceGroup[0].Attributes["power"].GetIntVal() != 300 {
		t.Fatalf("first fingerprint %v", r)
	}
	quiet := func() {
		t.Helper()
		select {
		case r := <-ch:
			t.Fatalf("resent without a change: %v", r)
		case <-time.After(5 * period):
		}
	}
	quiet()

	fb.set(func(inv *gpu.Inventory) { inv.Devices[0].Attrs.PowerLimitW = 250 })
	r = next(t, ch, changeWithin)
	if got := r.DeviceGroup[0].Attributes["power"].GetIntVal(); got != 250 {
		t.Fatalf("power after the change %d, want 250", got)
	}
	quiet()

	fb.set(func(inv *gpu.Inventory) {
		inv.Devices = append(inv.Devices, gpu.Device{UUID: "GPU-b", Model: "Test GPU", Attrs: inv.Devices[0].Attrs})
	})
	r = next(t, ch, changeWithin)
	if _, n := healthyCount(r); n != 2 {
		t.Fatalf("after adding a GPU: %d devices", n)
	}
	quiet()
}
