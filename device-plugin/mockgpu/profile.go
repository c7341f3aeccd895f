package mockgpu

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// MaxGPUs is the largest GPU count a profile accepts.
const MaxGPUs = 16

// hardware holds the values go-nvml's mock servers leave unset, per GPU
// model. They are the public data-sheet figures of the SXM parts in NVIDIA's
// DGX systems (power limit, maximum clocks, BAR1 size, PCIe link, NVLink
// links and version) and the PCI bus numbers of the GPUs in those systems;
// idle readings are typical of an idle GPU with persistence mode on.
type hardware struct {
	powerLimitW    uint32
	idlePowerW     uint32
	bar1MiB        uint64
	maxGraphicsMHz uint32
	maxMemoryMHz   uint32
	idleGraphicsMH uint32
	pcieGen        int
	pcieWidth      int
	nvlinks        int
	// nvlinkVersion is NVML's nvmlNvlinkVersion_t: 4 = 3.0, 6 = 4.0, 7 = 5.0.
	nvlinkVersion uint32
	idleTempC     uint32
	// busIDs are the PCI bus numbers of GPUs 0-7 in the DGX system.
	busIDs []uint32
}

// profile is one mock system.
type profile struct {
	name string
	gpu  gpus.Config
	hw   hardware
	// newServer is the go-nvml preset constructor for the system.
	newServer func(...gpus.Config) *server.Server
}

var profiles = map[string]profile{
	// DGX A100: 8 x A100-SXM4-40GB, 400 W, 1410/1215 MHz, PCIe 4.0 x16,
	// 12 NVLink 3.0 links to NVSwitch.
	"dgxa100": {
		name: "dgxa100", gpu: gpus.A100_SXM4_40GB, newServer: dgxa100.NewWithGPUs,
		hw: hardware{
			powerLimitW: 400, idlePowerW: 54, bar1MiB: 65536,
			maxGraphicsMHz: 1410, maxMemoryMHz: 1215, idleGraphicsMH: 210,
			pcieGen: 4, pcieWidth: 16, nvlinks: 12, nvlinkVersion: 4, idleTempC: 31,
			busIDs: []uint32{0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd},
		},
	},
	// DGX H100: 8 x H100 SXM5 80GB, 700 W, 1980/2619 MHz, PCIe 5.0 x16,
	// 18 NVLink 4.0 links to NVSwitch.
	"dgxh100": {
		name: "dgxh100", gpu: gpus.H100_SXM5_80GB, newServer: dgxh100.NewWithGPUs,
		hw: hardware{
			powerLimitW: 700, idlePowerW: 72, bar1MiB: 131072,
			maxGraphicsMHz: 1980, maxMemoryMHz: 2619, idleGraphicsMH: 345,
			pcieGen: 5, pcieWidth: 16, nvlinks: 18, nvlinkVersion: 6, idleTempC: 29,
			busIDs: []uint32{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb},
		},
	},
	// DGX H200: 8 x H200 SXM5 141GB, 700 W, 1980/3201 MHz, PCIe 5.0 x16,
	// 18 NVLink 4.0 links to NVSwitch.
	"dgxh200": {
		name: "dgxh200", gpu: gpus.H200_SXM5_141GB, newServer: dgxh200.NewWithGPUs,
		hw: hardware{
			powerLimitW: 700, idlePowerW: 75, bar1MiB: 262144,
			maxGraphicsMHz: 1980, maxMemoryMHz: 3201, idleGraphicsMH: 345,
			pcieGen: 5, pcieWidth: 16, nvlinks: 18, nvlinkVersion: 6, idleTempC: 29,
			busIDs: []uint32{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb},
		},
	},
	// DGX B200: 8 x B200 180GB, 1000 W, 1965/3996 MHz, PCIe 5.0 x16,
	// 18 NVLink 5.0 links to NVSwitch.
	"dgxb200": {
		name: "dgxb200", gpu: gpus.B200_SXM5_180GB, newServer: dgxb200.NewWithGPUs,
		hw: hardware{
			powerLimitW: 1000, idlePowerW: 120, bar1MiB: 262144,
			maxGraphicsMHz: 1965, maxMemoryMHz: 3996, idleGraphicsMH: 420,
			pcieGen: 5, pcieWidth: 16, nvlinks: 18, nvlinkVersion: 7, idleTempC: 30,
			busIDs: []uint32{0x1b, 0x43, 0x52, 0x61, 0x9d, 0xc3, 0xd1, 0xdf},
		},
	},
}

// Profiles lists the profile names ("dgxa100", "dgxb200", "dgxh100",
// "dgxh200") in order.
func Profiles() []string {
	return slices.Sorted(maps.Keys(profiles))
}

// ParseProfile parses "<profile>" or "<profile>:<gpus>", e.g. "dgxa100" (8
// GPUs, like the real system) or "dgxh100:4". The count must be 1 to MaxGPUs.
func ParseProfile(s string) (name string, count int, err error) {
	name, countText, hasCount := strings.Cut(strings.TrimSpace(s), ":")
	name = strings.ToLower(strings.TrimSpace(name))
	if _, ok := profiles[name]; !ok {
		return "", 0, fmt.Errorf("unknown mock profile %q (want one of %s, optionally with :<gpus>)",
			name, strings.Join(Profiles(), ", "))
	}
	count = 8
	if hasCount {
		count, err = strconv.Atoi(strings.TrimSpace(countText))
		if err != nil || count < 1 || count > MaxGPUs {
			return "", 0, fmt.Errorf("bad GPU count %q in mock profile %q (want 1 to %d)", countText, s, MaxGPUs)
		}
	}
	return name, count, nil
}

// busID gives GPU i's PCI bus number: the DGX system's for the first eight,
// then numbers after the last of them.
func (h hardware) busID(i int) uint32 {
	if i < len(h.busIDs) {
		return h.busIDs[i]
	}
	return 0xc0 + uint32(i)*4
}

// migProfileID finds the GPU instance profile whose name (as
// gpu.MIGProfileName gives it) is name; the lowest profile ID wins.
func migProfileID(cfg gpus.Config, name string) (nvml.GpuInstanceProfileInfo, bool) {
	ids := make([]int, 0, len(cfg.MIGProfiles.GpuInstanceProfiles))
	for id := range cfg.MIGProfiles.GpuInstanceProfiles {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		info := cfg.MIGProfiles.GpuInstanceProfiles[id]
		if migName(info.SliceCount, info.SliceCount, info.MemorySizeMB, cfg.MemoryMB) == name {
			return info, true
		}
	}
	return nvml.GpuInstanceProfileInfo{}, false
}

// migProfileNames lists a model's MIG profile names, for error messages.
func migProfileNames(cfg gpus.Config) []string {
	seen := map[string]bool{}
	var out []string
	for _, info := range cfg.MIGProfiles.GpuInstanceProfiles {
		n := migName(info.SliceCount, info.SliceCount, info.MemorySizeMB, cfg.MemoryMB)
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
