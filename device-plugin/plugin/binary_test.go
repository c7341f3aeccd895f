package plugin_test

// These tests launch the built nomad-device-gputide binary (built once per
// test run, on first use) with a go-plugin
// client, the way a Nomad client does (handshake v2, magic cookie, gRPC,
// plugin set keys "base" and "device"), and speak Nomad's wire protocol to
// it: PluginInfo, ConfigSchema, SetConfig with msgpack made from an HCL
// config block against the spec the binary returned, Fingerprint, Reserve
// and Stats.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/gputide/gputide/device-plugin/internal/nomadsim"
	"github.com/gputide/gputide/device-plugin/plugin"
	"github.com/gputide/gputide/device-plugin/proto/basepb"
	"github.com/gputide/gputide/device-plugin/proto/devicepb"
)

// pluginBin is the binary built (once, on first use) into binDir, which
// TestMain removes. Building lazily keeps fuzz workers, which run TestMain
// too, from building it.
var (
	binDir    string
	pluginBin string
	buildOnce sync.Once
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// builtPlugin builds the plugin binary on first use.
func builtPlugin(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "gputide-plugin-bin")
		if buildErr != nil {
			return
		}
		pluginBin = filepath.Join(binDir, "nomad-device-gputide")
		out, err := exec.Command("go", "build", "-o", pluginBin, "github.com/gputide/gputide/device-plugin/cmd/nomad-device-gputide").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("failed to build the plugin: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return pluginBin
}

// launched is one running plugin process and its two dispensed clients.
type launched struct {
	client *goplugin.Client
	base   basepb.BasePluginClient
	device devicepb.DevicePluginClient
	logs   *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// launch starts the binary and dispenses "base" and "device".
func launch(t testing.TB) *launched {
	t.Helper()
	logs := &syncBuffer{}
	c := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  plugin.Handshake,
		Plugins:          plugin.PluginSet(nil),
		Cmd:              exec.Command(builtPlugin(t)),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace}),
	})
	t.Cleanup(c.Kill)
	rpc, err := c.Client()
	if err != nil {
		t.Fatalf("failed to start plugin: %v\n%s", err, logs)
	}
	b, err := rpc.Dispense(plugin.PluginSetBase)
	if err != nil {
		t.Fatal(err)
	}
	d, err := rpc.Dispense(plugin.PluginSetDevice)
	if err != nil {
		t.Fatal(err)
	}
	return &launched{client: c, base: b.(basepb.BasePluginClient), device: d.(devicepb.DevicePluginClient), logs: logs}
}

// configure sends SetConfig as Nomad's run step does: msgpack of the HCL
// block decoded against the spec the plugin returned, plus nomad_config.
func (l *launched) configure(t testing.TB, body string) error {
	t.Helper()
	ctx := context.Background()
	schema, err := l.base.ConfigSchema(ctx, &basepb.ConfigSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := nomadsim.EncodeConfig(schema.GetSpec(), body)
	if err != nil {
		t.Fatalf("Nomad would fail to decode %q: %v", body, err)
	}
	_, err = l.base.SetConfig(ctx, &basepb.SetConfigRequest{
		MsgpackConfig:    raw,
		PluginApiVersion: plugin.DeviceAPIVersion,
		NomadConfig: &basepb.NomadConfig{Driver: &basepb.NomadDriverConfig{
			ClientMinPort: 14000, ClientMaxPort: 14512,
			Topology: &basepb.ClientTopology{NodeIds: []uint32{0}},
		}},
	})
	return err
}

// stream opens Fingerprint and delivers messages on a channel.
func (l *launched) stream(t testing.TB) <-chan *devicepb.FingerprintResponse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := l.device.Fingerprint(ctx, &devicepb.FingerprintRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *devicepb.FingerprintResponse, 64)
	go func() {
		defer close(ch)
		for {
			r, err := s.Recv()
			if err != nil {
				return
			}
			ch <- r
		}
	}()
	return ch
}

func recv(t testing.TB, ch <-chan *devicepb.FingerprintResponse, within time.Duration) *devicepb.FingerprintResponse {
	t.Helper()
	select {
	case r, ok := <-ch:
		if !ok {
			t.Fatal("the fingerprint stream closed; Nomad would drop every device for good")
		}
		if err := nomadsim.ValidateFingerprint(r); err != nil {
			t.Fatalf("Nomad would reject this fingerprint: %v", err)
		}
		return r
	case <-time.After(within):
		t.Fatalf("no fingerprint within %s", within)
	}
	return nil
}

// find and counts are the in-package test helpers device and healthyCount.
var (
	find   = plugin.FindDevice
	counts = plugin.CountHealthy
)

func TestBinaryProtocol(t *testing.T) {
	l := launch(t)
	ctx := context.Background()

	info, err := l.base.PluginInfo(ctx, &basepb.PluginInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != basepb.PluginType_DEVICE || len(info.PluginApiVersions) != 1 || info.PluginApiVersions[0] != "v0.1.0" ||
		info.Name != "gputide-gpu" || info.PluginVersion != "0.1.0-dev" {
		t.Fatalf("PluginInfo %v", info)
	}

	// Bad config: the error names the option and the value.
	err = l.configure(t, `fingerprint_period = "soon"`)
	if err == nil || !strings.Contains(status.Convert(err).Message(), `invalid fingerprint_period "soon"`) {
		t.Fatalf("bad config: got %v", err)
	}

	// Nomad's validation launch sends SetConfig twice; then the run step.
	cfg := `
		backend = "mock"
		mock_profile = "dgxa100"
		mock_uuid_seed = "binary"
		fingerprint_period = "1s"
	`
	for i := 0; i < 3; i++ {
		if err := l.configure(t, cfg); err != nil {
			t.Fatalf("SetConfig %d: %v", i, err)
		}
	}

	r := recv(t, l.stream(t), 10*time.Second)
	if len(r.DeviceGroup) != 1 || len(r.DeviceGroup[0].Devices) != 8 {
		t.Fatalf("want 1 group of 8, got %v", r)
	}
	g := r.DeviceGroup[0]
	if g.Attributes["memory"].GetIntVal() != 40960 || g.Attributes["memory"].GetUnit() != "MiB" {
		t.Fatalf("memory attribute %v", g.Attributes["memory"])
	}
	for _, d := range g.Devices {
		if !d.Healthy || strings.ContainsRune(d.GetHwLocality().GetPciBusId(), 0) {
			t.Fatalf("device %v", d)
		}
	}

	ids := []string{g.Devices[1].ID, g.Devices[6].ID}
	res, err := l.device.Reserve(ctx, &devicepb.ReserveRequest{DeviceIds: ids})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetContainerRes().GetEnvs()["NVIDIA_VISIBLE_DEVICES"]; got != strings.Join(ids, ",") {
		t.Fatalf("NVIDIA_VISIBLE_DEVICES = %q, want %q", got, strings.Join(ids, ","))
	}
	_, err = l.device.Reserve(ctx, &devicepb.ReserveRequest{DeviceIds: []string{ids[0], "GPU-00000000-dead"}})
	if err == nil || status.Convert(err).Message() != "unknown device IDs: GPU-00000000-dead" {
		t.Fatalf("unknown ID: got %v", err)
	}

	// The interval is asserted from the time the request was sent, not
	// from gaps between messages: the plugin's ticker keeps its schedule
	// and drops ticks a slow receiver missed, so one late message followed
	// by an on-time one makes a gap shorter than the interval. Message k
	// (the first is k=0, sent at once) cannot leave before k intervals
	// after the request, however loaded the machine; and had the plugin
	// ignored the interval and used its 1s default, it could not arrive
	// before k seconds. The upper bound sits at that point, leaving a
	// loaded machine k*(1s-interval) of slack.
	const interval = 150 * time.Millisecond
	const k = 5
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	asked := time.Now()
	stats, err := l.device.Stats(sctx, &devicepb.StatsRequest{CollectionInterval: durationpb.New(interval)})
	if err != nil {
		t.Fatal(err)
	}
	var took time.Duration
	for i := 0; i <= k; i++ {
		s, err := stats.Recv()
		if err != nil {
			t.Fatal(err)
		}
		took = time.Since(asked)
		if len(s.Groups) != 1 || len(s.Groups[0].InstanceStats) != 8 {
			t.Fatalf("stats cover %v", s)
		}
		st := s.Groups[0].InstanceStats[ids[0]]
		if st.GetStats().GetAttributes()["Memory state"].GetIntDenominatorVal().GetValue() != 40960 ||
			st.GetStats().GetAttributes()["Power usage"].GetFloatDenominatorVal().GetValue() != 400 ||
			st.GetStats().GetAttributes()["Temperature"].GetUnit() != "C" {
			t.Fatalf("stats of %s: %v", ids[0], st)
		}
	}
	if took < k*interval || took >= k*plugin.DefaultStatsInterval {
		t.Errorf("%d stats intervals of %s took %s, want at least %s and well under the %s of the default interval",
			k, interval, took, k*interval, k*plugin.DefaultStatsInterval)
	}
}

// changeWithin bounds how long a test waits for a change that a short
// configured period should bring: long enough for a loaded CI machine, and
// half the default health check period, which the change could not beat
// had the configured period been ignored.
var changeWithin = plugin.DefaultConfig().HealthCheckPeriod / 2

// TestBinaryHealthXid79 is the health test against the binary.
func TestBinaryHealthXid79(t *testing.T) {
	faults := filepath.Join(t.TempDir(), "faults")
	const period = 250 * time.Millisecond
	cfg := fmt.Sprintf(`
		backend = "mock"
		mock_uuid_seed = "health"
		health_check_period = %q
		mock_fault_file = %q
	`, period, faults)
	l := launch(t)
	if err := l.configure(t, cfg); err != nil {
		t.Fatal(err)
	}
	ch := l.stream(t)
	r := recv(t, ch, 10*time.Second)
	gpu3 := r.DeviceGroup[0].Devices[3].ID
	if h, n := counts(r); h != 8 || n != 8 {
		t.Fatalf("start: %d/%d healthy", h, n)
	}

	if err := os.WriteFile(faults, []byte("# injected by the test\n3 xid 79\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	injected := time.Now()
	r = recv(t, ch, changeWithin)
	d := find(r, gpu3)
	if d.GetHealthy() {
		t.Fatalf("next fingerprint still has GPU 3 healthy: %v", d)
	}
	// Within one health period; changeWithin leaves a loaded machine
	// seconds of slack yet fails if the period were ignored.
	if took := time.Since(injected); took >= changeWithin {
		t.Errorf("GPU 3 unhealthy after %s; health period is %s", took, period)
	}
	if !strings.Contains(d.HealthDescription, "Xid 79") && !strings.Contains(d.HealthDescription, "ERROR_GPU_IS_LOST") {
		t.Errorf("description %q", d.HealthDescription)
	}
	if h, n := counts(r); h != 7 || n != 8 {
		t.Fatalf("after Xid 79: %d/%d healthy, want 7/8", h, n)
	}

	// A relaunched plugin derives health from the fault file again.
	l2 := launch(t)
	if err := l2.configure(t, cfg); err != nil {
		t.Fatal(err)
	}
	r2 := recv(t, l2.stream(t), 10*time.Second)
	if d := find(r2, gpu3); d == nil || d.Healthy {
		t.Fatalf("relaunched plugin reports GPU 3 as %v, want unhealthy", d)
	}
	if h, _ := counts(r2); h != 7 {
		t.Fatalf("relaunched: %d healthy, want 7", h)
	}

	if err := os.WriteFile(faults, []byte("3 xid 79\n3 recover\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	recovered := time.Now()
	for !d.GetHealthy() {
		r = recv(t, ch, changeWithin)
		d = find(r, gpu3)
	}
	if took := time.Since(recovered); took >= changeWithin {
		t.Errorf("recovery took %s", took)
	}
	if h, n := counts(r); h != 8 || n != 8 {
		t.Fatalf("after recovery: %d/%d healthy", h, n)
	}
}

// TestBinaryWithoutNVML runs the real NVML backend where the library is
// absent: the stream stays open with no devices and the log says why.
func TestBinaryWithoutNVML(t *testing.T) {
	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		t.Skip("this machine has an NVIDIA driver")
	}
	l := launch(t)
	if err := l.configure(t, `fingerprint_period = "500ms"`); err != nil {
		t.Fatal(err)
	}
	ch := l.stream(t)
	r := recv(t, ch, 10*time.Second)
	if len(r.DeviceGroup) != 0 {
		t.Fatalf("want no devices without NVML, got %v", r)
	}
	time.Sleep(1200 * time.Millisecond)
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatal("stream closed")
		}
	default:
	}
	logs := l.logs.String()
	if !strings.Contains(logs, "libnvidia-ml.so.1") || !strings.Contains(logs, "not found") {
		t.Fatalf("plugin log lacks a clear NVML error:\n%s", logs)
	}
}

// cpuTicks reads utime+stime of pid from /proc (clock ticks).
func cpuTicks(t testing.TB, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the ")" that closes the command name: state is field 3,
	// utime field 14 and stime field 15.
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100

// TestSteadyStateCPU streams stats at Nomad's default 1s interval from the
// mock DGX A100 with default periods and measures the plugin's CPU time.
// GPUTIDE_CPU_SECONDS sets the window (default 5; docs/benchmarks.md uses 60).
func TestSteadyStateCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for several seconds")
	}
	window := 5 * time.Second
	if v := os.Getenv("GPUTIDE_CPU_SECONDS"); v != "" {
		s, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("GPUTIDE_CPU_SECONDS=%q", v)
		}
		window = time.Duration(s) * time.Second
	}
	l := launch(t)
	if err := l.configure(t, "backend = \"mock\"\nmock_uuid_seed = \"cpu\""); err != nil {
		t.Fatal(err)
	}
	_ = recv(t, l.stream(t), 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stats, err := l.device.Stats(ctx, &devicepb.StatsRequest{CollectionInterval: durationpb.New(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := stats.Recv(); err != nil {
				done <- err
				return
			}
			n++
		}
	}()
	time.Sleep(1500 * time.Millisecond) // past start-up
	pid := l.client.ReattachConfig().Pid
	t0, c0 := time.Now(), cpuTicks(t, pid)
	time.Sleep(window)
	elapsed, used := time.Since(t0), cpuTicks(t, pid)-c0
	cancel()
	<-done
	cpuSeconds := float64(used) / clockTicks
	pct := 100 * cpuSeconds / elapsed.Seconds()
	t.Logf("plugin CPU over %s at a 1s stats interval: %.2fs = %.3f%% of one core (%d stats messages)", elapsed.Round(time.Millisecond), cpuSeconds, pct, n)
	if n < int(window/time.Second)-1 {
		t.Errorf("only %d stats messages in %s", n, window)
	}
	if pct >= 1 {
		t.Errorf("steady-state CPU %.3f%% of one core, want under 1%%", pct)
	}
}

var _ io.Writer = (*syncBuffer)(nil)
