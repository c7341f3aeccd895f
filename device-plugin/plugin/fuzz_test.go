package plugin

import (
	"testing"

	"github.com/gputide/gputide/device-plugin/mockgpu"
)

// FuzzSetConfig feeds arbitrary msgpack_config bytes to the decoder: it must
// never panic, and whatever it accepts must be a valid config.
func FuzzSetConfig(f *testing.F) {
	for _, body := range []string{
		``,
		`enabled = false`,
		`backend = "mock"` + "\n" + `mock_profile = "dgxh100:2"` + "\n" + `mock_mig = ["1:3g.40gb,3g.40gb"]`,
		`fingerprint_period = "1s"` + "\n" + `health_check_period = "500ms"` + "\n" + `ignored_gpu_ids = ["GPU-1"]`,
		`backend = "mock"` + "\n" + `mock_gpu_name = "NVIDIA A100-SXM4-40GB"` + "\n" + `mock_mig = ["6-7:7x1g.5gb"]`,
		`extra_critical_xids = [13]` + "\n" + `ignored_xids = [92, 94]` + "\n" + `mock_fault_file = "/tmp/f"`,
		`backend = "mock"` + "\n" + `mock_mig = ["9223372036854775807:1g.5gb"]`,
		`backend = "mock"` + "\n" + `mock_profile = "dgxh100:16"` + "\n" + `mock_mig = ["0-15:7x1g.10gb", "3:1g.10gb"]`,
		`backend = "mock"` + "\n" + `mock_mig = ["0:7x1g.5gb,7x1g.5gb,7x1g.5gb"]`,
		`mock_gpu_name = "NVIDIA A100 MIG"` + "\n" + `mock_mig = ["+1-+2:1x1g.5gb", " 0 : 1g.5gb , , 2g.10gb "]`,
	} {
		f.Add(encode(f, body))
	}
	f.Add([]byte{})
	f.Add([]byte{0xc0})
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := DecodeConfig(raw)
		if err != nil {
			return
		}
		if cfg.FingerprintPeriod < MinPeriod || cfg.HealthCheckPeriod < MinPeriod {
			t.Fatalf("accepted periods %s / %s below %s", cfg.FingerprintPeriod, cfg.HealthCheckPeriod, MinPeriod)
		}
		if cfg.Backend != BackendNVML && cfg.Backend != BackendMock {
			t.Fatalf("accepted backend %q", cfg.Backend)
		}
		if _, _, err := mockgpu.ParseProfile(cfg.MockProfile); err != nil {
			t.Fatalf("accepted mock_profile %q: %v", cfg.MockProfile, err)
		}
		if cfg.MockGPUName != "" {
			if err := mockgpu.CheckGPUName(cfg.MockGPUName); err != nil {
				t.Fatalf("accepted mock_gpu_name %q: %v", cfg.MockGPUName, err)
			}
		}
		for _, x := range append(append([]uint64(nil), cfg.ExtraCriticalXids...), cfg.IgnoredXids...) {
			if x < 1 || x > 999 {
				t.Fatalf("accepted Xid %d", x)
			}
		}
		for i, names := range cfg.MockMIG {
			if i < 0 || i >= mockgpu.MaxGPUs || len(names) < 1 || len(names) > maxMIGPerGPU {
				t.Fatalf("accepted mock_mig GPU %d with %d instances", i, len(names))
			}
		}
		if cfg.Backend == BackendMock {
			if _, err := mockgpu.NewLib(cfg.mockOptions(nil)); err != nil {
				t.Fatalf("accepted a mock config the mock rejects: %v", err)
			}
		}
	})
}
