package plugin

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gputide/gputide/device-plugin/gpu"
	"github.com/gputide/gputide/device-plugin/health"
)

// benchSnapshot opens the mock DGX A100 (8 GPUs) and builds a snapshot the
// way the monitor does.
func benchSnapshot(b *testing.B) (*snapshot, gpu.Backend, *health.Tracker) {
	b.Helper()
	cfg := DefaultConfig()
	cfg.Backend, cfg.MockUUIDSeed = BackendMock, "bench"
	be, err := OpenBackend(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	inv, err := be.Inventory()
	if err != nil || len(inv.Devices) != 8 {
		b.Fatalf("inventory %d devices, %v", len(inv.Devices), err)
	}
	tr := health.NewTracker(cfg.XidPolicy())
	tr.SetDevices(inv.Devices)
	s := &snapshot{inv: inv, status: map[string]health.Status{}, backend: be, ignored: map[string]bool{}}
	for _, d := range inv.Devices {
		s.status[d.UUID] = tr.Status(d.UUID)
	}
	return s, be, tr
}

// BenchmarkFingerprint8GPU is one fingerprint round of an 8-GPU node: read
// the inventory through NVML (mock) and render the Nomad response.
func BenchmarkFingerprint8GPU(b *testing.B) {
	s, be, _ := benchSnapshot(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		inv, err := be.Inventory()
		if err != nil {
			b.Fatal(err)
		}
		s.inv = inv
		if r := renderFingerprint(s); len(r.DeviceGroup[0].Devices) != 8 {
			b.Fatal("bad fingerprint")
		}
	}
}

// BenchmarkFingerprintRender is the per-change cost of the stream: render
// and compare with the last message sent.
func BenchmarkFingerprintRender(b *testing.B) {
	s, _, _ := benchSnapshot(b)
	last := renderFingerprint(s)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := renderFingerprint(s); !proto.Equal(r, last) {
			b.Fatal("render not stable")
		}
	}
}

// BenchmarkHealthCheck8GPU is one health period: probe 8 GPUs and apply.
func BenchmarkHealthCheck8GPU(b *testing.B) {
	_, be, tr := benchSnapshot(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		probes, err := be.CheckHealth()
		if err != nil || len(probes) != 8 {
			b.Fatal(err)
		}
		tr.ObserveProbes(probes, time.Now())
	}
}

// BenchmarkStatsRound8GPU is one stats message for 8 GPUs.
func BenchmarkStatsRound8GPU(b *testing.B) {
	s, _, _ := benchSnapshot(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := collectStats(s); len(r.Groups[0].InstanceStats) != 8 {
			b.Fatal("bad stats")
		}
	}
}
