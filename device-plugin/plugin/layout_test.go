package plugin

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/device-plugin/proto/devicepb"
)

// groupView is what the quota broker reads of a fingerprinted group
// (DESIGN L13): its name, size, health and the mig attributes.
type groupView struct {
	Name       string
	Devices    int
	Healthy    int
	MIG        bool
	MIGProfile string
	MemoryMiB  int64
}

func groupViews(r *devicepb.FingerprintResponse) []groupView {
	var out []groupView
	for _, g := range r.GetDeviceGroup() {
		v := groupView{Name: g.GetDeviceName(), Devices: len(g.GetDevices()),
			MIG: g.GetAttributes()["mig"].GetBoolVal(), MIGProfile: g.GetAttributes()["mig_profile"].GetStringVal(),
			MemoryMiB: g.GetAttributes()["memory"].GetIntVal()}
		for _, d := range g.GetDevices() {
			if d.GetHealthy() {
				v.Healthy++
			}
		}
		out = append(out, v)
	}
	return out
}

// The two nodes of the flavor e2e (issue 17), each from one plugin config:
// 8 whole H100s, and 8 A100s named as real ones of which GPUs 6 and 7 are
// cut into 7 x 1g.5gb each. Groups come in inventory order; a MIG group is
// "<GPU name> MIG <profile>" with mig = true and its mig_profile.
func TestFingerprintFlavorLayouts(t *testing.T) {
	cases := []struct {
		name, body string
		want       []groupView
	}{
		{"h100", `
			backend       = "mock"
			mock_profile  = "dgxh100"
		`, []groupView{{Name: "NVIDIA H100 80GB HBM3", Devices: 8, Healthy: 8, MemoryMiB: 81920}}},
		{"mixed a100", `
			backend       = "mock"
			mock_profile  = "dgxa100"
			mock_gpu_name = "NVIDIA A100-SXM4-40GB"
			mock_mig      = ["6-7:7x1g.5gb"]
		`, []groupView{
			{Name: "NVIDIA A100-SXM4-40GB", Devices: 6, Healthy: 6, MemoryMiB: 40960},
			{Name: "NVIDIA A100-SXM4-40GB MIG 1g.5gb", Devices: 14, Healthy: 14, MIG: true, MIGProfile: "1g.5gb", MemoryMiB: 4864},
		}},
		{"go-nvml name kept", `
			backend       = "mock"
			mock_profile  = "dgxa100:2"
			mock_mig      = ["1:3g.20gb,2x2g.10gb"]
		`, []groupView{
			{Name: "Mock NVIDIA A100-SXM4-40GB", Devices: 1, Healthy: 1, MemoryMiB: 40960},
			{Name: "Mock NVIDIA A100-SXM4-40GB MIG 3g.20gb", Devices: 1, Healthy: 1, MIG: true, MIGProfile: "3g.20gb", MemoryMiB: 19968},
			{Name: "Mock NVIDIA A100-SXM4-40GB MIG 2g.10gb", Devices: 2, Healthy: 2, MIG: true, MIGProfile: "2g.10gb", MemoryMiB: 9856},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := next(t, fingerprints(t, newPlugin(t, tc.body+"\nmock_uuid_seed = \"layout\"")), 5*time.Second)
			if diff := cmp.Diff(tc.want, groupViews(r)); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
		})
	}
}
