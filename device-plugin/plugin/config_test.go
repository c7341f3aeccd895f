package plugin

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/device-plugin/internal/nomadsim"
)

// encode gives the msgpack bytes Nomad sends for a config block body.
func encode(t testing.TB, body string) []byte {
	t.Helper()
	b, err := nomadsim.EncodeConfig(ConfigSpec(), body)
	if err != nil {
		t.Fatalf("failed to encode config %q: %v", body, err)
	}
	return b
}

func TestDecodeConfigDefaults(t *testing.T) {
	want := Config{
		Enabled:           true,
		FingerprintPeriod: time.Minute,
		HealthCheckPeriod: 10 * time.Second,
		Backend:           "nvml",
		MockProfile:       "dgxa100",
	}
	for name, raw := range map[string][]byte{
		"no msgpack at all (no spec case)": nil,
		"empty config block":               encode(t, ""),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeConfig(raw)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestDecodeConfigAllOptions(t *testing.T) {
	got, err := DecodeConfig(encode(t, `
		enabled             = true
		ignored_gpu_ids     = ["GPU-1", "MIG-2"]
		fingerprint_period  = "30s"
		health_check_period = "2s"
		backend             = "mock"
		nvml_library_path   = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
		mock_profile        = "dgxh100:4"
		mock_gpu_name       = "NVIDIA H100 80GB HBM3 (lab)"
		mock_fault_file     = "/var/lib/gputide/faults"
		mock_mig            = ["1:3g.40gb,3g.40gb"]
		mock_uuid_seed      = "node-7"
		extra_critical_xids = [13, 31]
		ignored_xids        = [92]
	`))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Enabled:           true,
		IgnoredGPUIDs:     []string{"GPU-1", "MIG-2"},
		FingerprintPeriod: 30 * time.Second,
		HealthCheckPeriod: 2 * time.Second,
		Backend:           "mock",
		NVMLLibraryPath:   "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
		MockProfile:       "dgxh100:4",
		MockGPUName:       "NVIDIA H100 80GB HBM3 (lab)",
		MockFaultFile:     "/var/lib/gputide/faults",
		MockMIG:           map[int][]string{1: {"3g.40gb", "3g.40gb"}},
		MockUUIDSeed:      "node-7",
		ExtraCriticalXids: []uint64{13, 31},
		IgnoredXids:       []uint64{92},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if p := got.XidPolicy(); !p.Critical(13) || p.Critical(92) || !p.Critical(79) {
		t.Fatalf("xid policy %+v: want 13 and 79 critical, 92 not", p)
	}
}

func TestDecodeConfigErrorsNameOptionAndValue(t *testing.T) {
	cases := map[string]struct {
		body string
		want []string
	}{
		"bad duration":          {`fingerprint_period = "5x"`, []string{"fingerprint_period", `"5x"`}},
		"too short period":      {`health_check_period = "1ms"`, []string{"health_check_period", `"1ms"`, "at least 100ms"}},
		"unknown backend":       {`backend = "rocm"`, []string{"backend", `"rocm"`, `"nvml" or "mock"`}},
		"unknown profile":       {`mock_profile = "dgx1"`, []string{"mock_profile", `"dgx1"`, "dgxa100"}},
		"bad gpu count":         {`mock_profile = "dgxa100:99"`, []string{"mock_profile", `"dgxa100:99"`, "1 to 16"}},
		"relative fault file":   {`mock_fault_file = "faults.txt"`, []string{"mock_fault_file", `"faults.txt"`, "absolute"}},
		"xid out of range":      {`extra_critical_xids = [1000]`, []string{"extra_critical_xids", "[1000]", "1 to 999"}},
		"fractional xid":        {`ignored_xids = [1.5]`, []string{"ignored_xids", "[1.5]", "whole"}},
		"bad mig entry":         {`mock_mig = ["3g.20gb"]`, []string{"mock_mig", `["3g.20gb"]`, "<gpu index>"}},
		"empty ignored id":      {`ignored_gpu_ids = [""]`, []string{"ignored_gpu_ids", `[""]`}},
		"unknown mig profile":   {"backend = \"mock\"\nmock_mig = [\"0:9g.99gb\"]", []string{"mock_mig", "9g.99gb", "dgxa100"}},
		"mig gpu out of range":  {"backend = \"mock\"\nmock_profile = \"dgxa100:2\"\nmock_mig = [\"5:1g.5gb\"]", []string{"mock_mig", "5:1g.5gb", "out of range"}},
		"too many mig slices":   {"backend = \"mock\"\nmock_mig = [\"0:4g.20gb,4g.20gb\"]", []string{"mock_mig", "8 slices"}},
		"gpu listed twice":      {`mock_mig = ["0:1g.5gb", "0:2g.10gb"]`, []string{"mock_mig", "GPU 0 listed twice"}},
		"mig entry no profiles": {`mock_mig = ["0:"]`, []string{"mock_mig", "no MIG profiles"}},
		"mig range backwards":   {`mock_mig = ["7-6:1g.5gb"]`, []string{"mock_mig", `"7-6:1g.5gb"`, "runs backwards", "6-7", "<gpu index>[-<last index>]"}},
		"mig range overlaps":    {`mock_mig = ["6-7:1g.5gb", "7:2g.10gb"]`, []string{"mock_mig", `"7:2g.10gb"`, "GPU 7 listed twice"}},
		"mig count zero":        {`mock_mig = ["0:0x1g.5gb"]`, []string{"mock_mig", `"0x1g.5gb"`, "count of 1 to 7"}},
		"mig count too large":   {`mock_mig = ["0:8x1g.5gb"]`, []string{"mock_mig", `"8x1g.5gb"`, "count of 1 to 7"}},
		"mig count no profile":  {`mock_mig = ["0:7x"]`, []string{"mock_mig", `"7x"`, "a profile after it"}},
		"mig repeat too many":   {"backend = \"mock\"\nmock_mig = [\"0:4x2g.10gb\"]", []string{"mock_mig", "8 slices"}},
		"gpu name with slash":   {`mock_gpu_name = "NVIDIA/A100"`, []string{"mock_gpu_name", `"NVIDIA/A100"`, `"/"`}},
		"gpu name with MIG":     {`mock_gpu_name = "A100 MIG 1g.5gb"`, []string{"mock_gpu_name", `"A100 MIG 1g.5gb"`, `" MIG "`}},
		"gpu name spaces":       {`mock_gpu_name = " A100"`, []string{"mock_gpu_name", `" A100"`, "leading or trailing"}},
		"gpu name too long":     {`mock_gpu_name = "` + strings.Repeat("A", 96) + `"`, []string{"mock_gpu_name", "96 bytes", "at most 95"}},
		"gpu name control":      {`mock_gpu_name = "A100\tX"`, []string{"mock_gpu_name", "unprintable"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeConfig(encode(t, tc.body))
			if err == nil {
				t.Fatalf("config %q: want an error", tc.body)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// The shorthands of mock_mig (a GPU range, a repeat count) expand to one
// profile name per instance and GPU: the mixed A100 node of the flavor
// e2e (issue 17) is 6 whole GPUs and 2 cut into 7 x 1g.5gb.
func TestDecodeConfigMockMIGShorthands(t *testing.T) {
	seven := []string{"1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb"}
	for body, want := range map[string]map[int][]string{
		`mock_mig = ["6-7:7x1g.5gb"]`:                        {6: seven, 7: seven},
		`mock_mig = ["6 - 7 : 7x1g.5gb"]`:                    {6: seven, 7: seven},
		`mock_mig = ["0:2x3g.20gb", "1:1x2g.10gb,2x1g.5gb"]`: {0: {"3g.20gb", "3g.20gb"}, 1: {"2g.10gb", "1g.5gb", "1g.5gb"}},
		`mock_mig = ["3-3:3g.20gb,1g.5gb"]`:                  {3: {"3g.20gb", "1g.5gb"}},
	} {
		got, err := DecodeConfig(encode(t, "backend = \"mock\"\nmock_gpu_name = \"NVIDIA A100-SXM4-40GB\"\n"+body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if diff := cmp.Diff(want, got.MockMIG); diff != "" {
			t.Errorf("%s: MockMIG (-want +got):\n%s", body, diff)
		}
		if got.MockGPUName != "NVIDIA A100-SXM4-40GB" {
			t.Errorf("%s: MockGPUName %q", body, got.MockGPUName)
		}
	}
}

func TestDecodeConfigRejectsGarbage(t *testing.T) {
	for name, raw := range map[string][]byte{
		"not msgpack":       []byte("hello"),
		"wrong type":        {0x81, 0xa7, 'e', 'n', 'a', 'b', 'l', 'e', 'd', 0x05},
		"truncated message": encode(t, `backend = "mock"`)[:10],
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeConfig(raw); err == nil || !strings.Contains(err.Error(), "failed to decode plugin config") {
				t.Fatalf("got %v, want a decode error", err)
			}
		})
	}
}

func TestConfigSpecMatchesSchemaType(t *testing.T) {
	spec := ConfigSpec().GetObject().GetAttributes()
	if len(spec) != len(SchemaType().AttributeTypes()) {
		t.Fatalf("spec has %d keys, schema type %d", len(spec), len(SchemaType().AttributeTypes()))
	}
	for name := range SchemaType().AttributeTypes() {
		d := spec[name].GetDefault()
		if d == nil || d.GetPrimary().GetAttr().GetName() != name || d.GetDefault().GetLiteral() == nil {
			t.Errorf("key %q: want Default{Attr %q, Literal}, got %v", name, name, spec[name])
		}
		if d.GetPrimary().GetAttr().GetRequired() {
			t.Errorf("key %q must be optional", name)
		}
	}
}
