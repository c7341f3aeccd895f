package jobmeta

import (
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"

	"github.com/gputide/gputide/quota-broker/nomad/device"
	"github.com/gputide/gputide/quota-broker/quota"
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
		model, ok := device.GPURequest(name)
		if (res{model, ok}) != want {
			t.Errorf("device.GPURequest(%q) = %q, %v; want %q, %v", name, model, ok, want.model, want.ok)
		}
	}
	// Such a group asks for GPUs: it has flavors and is pinned.
	tg := &api.TaskGroup{Name: ptr("g"), Tasks: []*api.Task{{Resources: &api.Resources{Devices: []*api.RequestedDevice{
		{Name: "/gpu", Count: ptr[uint64](8)}}}}}}
	if n, _ := GroupGPUs(tg); n != 8 {
		t.Errorf("GroupGPUs of a /gpu request of 8 = %d", n)
	}
	if diff := cmp.Diff([]string{"h100", "a100", "a100-1g"}, device.AllowedFlavors(tree, device.Requests(tg))); diff != "" {
		t.Errorf("flavors of /gpu (-want +got):\n%s", diff)
	}
	j := &api.Job{TaskGroups: []*api.TaskGroup{tg}}
	if !device.PinJob(j, h100) {
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
		if n, _ := GroupGPUs(tg); n < 1<<20 {
			t.Errorf("counts %v: groupGPUs = %d, want at least %d", counts, n, 1<<20)
		}
	}
}

// Nomad parses a constraint's RTarget that reads as a number (with or
// without a unit), a bool or an interpolation into that type or target:
// an "=" pin on such a model or profile never equals the device's string
// name, or (${...}) equals every device. The pin uses an anchored, quoted
// regexp for them; real names keep "=".
func TestPinConstraintsOfModelsNomadWouldNotReadAsStrings(t *testing.T) {
	for _, m := range []string{"80GB", "100", "1e3", "Inf", "true", "T", "0", "10KiB/s", "2 GHz", "${device.model}", "${node.unique.name}"} {
		f := quota.Flavor{Name: "odd", Models: []string{m}}
		got := device.Pin(f, nil)
		want := []*api.Constraint{{LTarget: "${device.model}", Operand: "regexp", RTarget: "^(?:" + regexp.QuoteMeta(m) + ")$"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("model %q: pin (-want +got):\n%s", m, diff)
		}
		mig := quota.Flavor{Name: "odd-mig", Models: []string{"NVIDIA A100-SXM4-40GB"}, MIGProfile: m}
		if got := device.Pin(mig, nil); got[1].Operand != "regexp" || got[1].RTarget != "^"+regexp.QuoteMeta(m)+"$" {
			t.Errorf("profile %q: pin %+v, want a quoted regexp", m, got[1])
		}
	}
	for _, m := range []string{"NVIDIA H100 80GB HBM3", "G2", "T4", "V100M16", "A10", "Tesla T4", "A100 (40GB)+"} {
		got := device.Pin(quota.Flavor{Name: "x", Models: []string{m}}, nil)
		if len(got) != 1 || got[0].Operand != "=" || got[0].RTarget != m {
			t.Errorf("model %q: pin %+v, want = %q", m, got, m)
		}
	}
}

// A job's regexp constraint is compiled once per AllowedFlavors call, not
// once per flavor and device kind, and one longer than maxConstraintRegexp
// is not compiled at all (the broker cannot tell: the flavors stay, the
// pin and Nomad decide): a 23 KB ".{1000}" chain compiles to millions of
// instructions, and was compiled for every flavor and kind of every
// pending job at every cycle.
func TestAllowedFlavorsOfAHugeRegexpConstraint(t *testing.T) {
	huge := strings.Repeat(".{1000}", 3300)
	req := &api.RequestedDevice{Name: "nvidia/gpu", Constraints: []*api.Constraint{
		{LTarget: "${device.model}", Operand: "regexp", RTarget: huge}}}
	var got []string
	allocs := testing.AllocsPerRun(1, func() { got = device.AllowedFlavors(tree, []*api.RequestedDevice{req}) })
	if diff := cmp.Diff([]string{"h100", "a100", "a100-1g"}, got); diff != "" {
		t.Errorf("flavors (-want +got):\n%s", diff)
	}
	if allocs > 1000 {
		t.Errorf("AllowedFlavors made %.0f allocations for a regexp it cannot afford", allocs)
	}
	// A short regexp is still decided, once per call.
	req.Constraints[0].RTarget = "H100"
	allocs = testing.AllocsPerRun(5, func() { got = device.AllowedFlavors(tree, []*api.RequestedDevice{req}) })
	if diff := cmp.Diff([]string{"h100"}, got); diff != "" {
		t.Errorf("flavors of H100 (-want +got):\n%s", diff)
	}
	one := testing.AllocsPerRun(5, func() { _ = regexp.MustCompile("H100") })
	if allocs > 2*one+20 {
		t.Errorf("AllowedFlavors made %.0f allocations, a compile makes %.0f: compiled per flavor", allocs, one)
	}
}

// Nil groups, tasks, resources, requests and constraints are skipped, and
// gputide_flavors lists with an empty item, a name twice or another case
// are meta errors naming the value.
func TestFlavorsOfNilsAndBadLists(t *testing.T) {
	gpu := &api.RequestedDevice{Name: "gpu", Constraints: []*api.Constraint{nil}}
	j := &api.Job{TaskGroups: []*api.TaskGroup{nil, {Tasks: []*api.Task{nil, {}, {Resources: &api.Resources{Devices: []*api.RequestedDevice{nil, gpu}}}}}}}
	if got := mustJobFlavors(t, j); !cmp.Equal(got, []string{"h100", "a100", "a100-1g"}) {
		t.Errorf("flavors %v", got)
	}
	for _, v := range []string{"h100,h100", ",h100,", "h100,,a100", "H100", " ", "h100;a100", strings.Repeat("h100,", 10000)} {
		j.Meta = map[string]string{MetaFlavors: v}
		_, err := JobFlavors(tree, j)
		var me *MetaError
		if !errors.As(err, &me) || me.Value != v {
			t.Errorf("gputide_flavors %.40q: error %v", v, err)
		}
	}
	j.Meta = map[string]string{MetaFlavors: " a100 , h100 "}
	if got, err := JobFlavors(tree, j); err != nil || !cmp.Equal(got, []string{"a100", "h100"}) {
		t.Errorf("spaced list: %v, %v", got, err)
	}
	if !device.PinJob(j, a100) || len(gpu.Constraints) != 2 || device.PinJob(j, a100) {
		t.Errorf("PinJob: constraints %v", gpu.Constraints)
	}
}

// ${device.attr.mig} is a bool attribute: Nomad parses the value "False",
// "F" or "TRUE" as that bool (psstructs.ParseAttribute), so
// ${device.attr.mig} = "False" places on whole GPUs. Compared as strings
// with "false", it excluded every flavor: the job moved to its pool
// uncounted and unpinned. A value other than "true" or "false" is left
// undecided (the flavors stay).
func TestMIGAttributeValuesNomadReadsAsBools(t *testing.T) {
	for _, v := range []string{"False", "F", "f", "FALSE", "0", "TRUE", "T", "1", "yes"} {
		req := &api.RequestedDevice{Name: "nvidia/gpu", Constraints: []*api.Constraint{
			{LTarget: "${device.attr.mig}", Operand: "=", RTarget: v}}}
		if got := device.AllowedFlavors(tree, []*api.RequestedDevice{req}); len(got) == 0 {
			t.Errorf("${device.attr.mig} = %q: no flavor", v)
		}
	}
	req := &api.RequestedDevice{Name: "nvidia/gpu", Constraints: []*api.Constraint{
		{LTarget: "${device.attr.mig}", Operand: "=", RTarget: "false"}}}
	if diff := cmp.Diff([]string{"h100", "a100"}, device.AllowedFlavors(tree, []*api.RequestedDevice{req})); diff != "" {
		t.Errorf("mig = false (-want +got):\n%s", diff)
	}
}
