package build

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"
)

// Nomad reads a device request's name as SplitN(name, "/", 3) into vendor,
// type and model, and an empty part matches any (structs.RequestedDevice.ID,
// DeviceIdTuple.Matches): "/gpu", "nvidia/" and "/" are placed on NVIDIA
// GPUs as "nvidia/gpu" is. Read otherwise, such a job asked for no GPU and
// was admitted to its pool uncounted and unpinned.
func TestGPURequestReadsNamesAsNomadMatchesThem(t *testing.T) {
	type res struct {
		model string
		ok    bool
	}
	cases := map[string]res{
		"gpu":                                 {"", true},
		"nvidia/gpu":                          {"", true},
		"nvidia/gpu/NVIDIA H100 80GB HBM3":    {"NVIDIA H100 80GB HBM3", true},
		"/gpu":                                {"", true},
		"nvidia/":                             {"", true},
		"/":                                   {"", true},
		"//":                                  {"", true},
		"nvidia//":                            {"", true},
		"//NVIDIA H100 80GB HBM3":             {"NVIDIA H100 80GB HBM3", true},
		"/gpu/NVIDIA H100 80GB HBM3":          {"NVIDIA H100 80GB HBM3", true},
		"nvidia/gpu/A/B":                      {"A/B", true},
		"nvidia/gpu/NVIDIA A100 MIG 1g.5gb/x": {"NVIDIA A100 MIG 1g.5gb/x", true},
		"":                                    {"", false},
		"amd/gpu":                             {"", false},
		"fpga":                                {"", false},
		"nvidia/fpga":                         {"", false},
		"NVIDIA/gpu":                          {"", false},
		"GPU":                                 {"", false},
		"gpu/":                                {"", false}, // vendor "gpu"
		"/fpga":                               {"", false},
	}
	for name, want := range cases {
		model, ok := gpuRequest(name)
		if (res{model, ok}) != want {
			t.Errorf("gpuRequest(%q) = %q, %v; want %q, %v", name, model, ok, want.model, want.ok)
		}
	}
	// Such a group asks for GPUs: it has flavors and is pinned.
	tg := &api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{{Resources: &api.Resources{Devices: []*api.RequestedDevice{
		{Name: "/gpu", Count: ptr[uint64](8)}}}}}}
	if n, _ := groupGPUs(tg); n != 8 {
		t.Errorf("groupGPUs of a /gpu request of 8 = %d", n)
	}
	if diff := cmp.Diff([]string{"h100", "a100", "a100-1g"}, AllowedFlavors(tree, groupDevices(tg))); diff != "" {
		t.Errorf("flavors of /gpu (-want +got):\n%s", diff)
	}
	j := &api.Job{TaskGroups: []*api.TaskGroup{tg}}
	if !PinJob(j, h100) {
		t.Error("PinJob left a /gpu request unpinned")
	}
}

// A device count past the int range (Count is a uint64) made the group's
// GPUs negative or small: the job read as asking for no GPU (admitted
// uncounted) or for fewer than Nomad would place. It stays a GPU group,
// too large for any plan (plan.Snapshot.Usable refuses it with a fault).
func TestGroupGPUsOfAHugeDeviceCount(t *testing.T) {
	for _, counts := range [][]uint64{
		{math.MaxUint64},
		{math.MaxUint64 - 7, 16},
		{1 << 63},
		{math.MaxUint64, math.MaxUint64, math.MaxUint64},
	} {
		var devs []*api.RequestedDevice
		for _, c := range counts {
			devs = append(devs, &api.RequestedDevice{Name: "nvidia/gpu", Count: ptr(c)})
		}
		tg := &api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{{Resources: &api.Resources{Devices: devs}}}}
		if n, _ := groupGPUs(tg); n < 1<<20 {
			t.Errorf("counts %v: groupGPUs = %d, want at least %d", counts, n, 1<<20)
		}
	}
}
