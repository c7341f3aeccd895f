package nvmlgpu

import (
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputide/gputide/device-plugin/gpu"
)

const mib = 1024 * 1024

// BusID gives NVML's PCI bus ID ("00000000:07:00.0") without the trailing
// NUL bytes of the fixed 32-byte C array; if that field is empty it is built
// from the domain, bus and device numbers.
func BusID(p nvml.PciInfo) string {
	b := make([]byte, 0, len(p.BusId))
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return s
	}
	if p.Domain == 0 && p.Bus == 0 && p.Device == 0 {
		return ""
	}
	return fmt.Sprintf("%08x:%02x:%02x.0", p.Domain, p.Bus, p.Device)
}

// pcieLaneMBs is the usable bandwidth of one PCIe lane per direction in MB/s
// by generation, after line encoding (8b/10b for gen 1-2, 128b/130b for gen
// 3-5, FLIT for gen 6): PCI-SIG's 2.5, 5, 8, 16, 32 and 64 GT/s.
var pcieLaneMBs = map[int]int64{1: 250, 2: 500, 3: 985, 4: 1969, 5: 3938, 6: 7563}

// PCIBandwidthMBs gives a link's per-direction bandwidth in MB/s, 0 when the
// generation is unknown.
func PCIBandwidthMBs(gen, width int) int64 {
	return pcieLaneMBs[gen] * int64(width)
}

// nvlinkLinkGBs is one NVLink link's bidirectional bandwidth in GB/s by
// NVML's nvmlNvlinkVersion_t (1 = 1.0 ... 7 = 5.0): NVLink 1 (P100) 40,
// NVLink 2-4 (V100, A100, H100) 50, NVLink 5 (B200) 100.
var nvlinkLinkGBs = map[uint32]int64{1: 40, 2: 50, 3: 50, 4: 50, 5: 50, 6: 50, 7: 100}

var archNames = map[nvml.DeviceArchitecture]string{
	nvml.DEVICE_ARCH_KEPLER:    "kepler",
	nvml.DEVICE_ARCH_MAXWELL:   "maxwell",
	nvml.DEVICE_ARCH_PASCAL:    "pascal",
	nvml.DEVICE_ARCH_VOLTA:     "volta",
	nvml.DEVICE_ARCH_TURING:    "turing",
	nvml.DEVICE_ARCH_AMPERE:    "ampere",
	nvml.DEVICE_ARCH_ADA:       "ada",
	nvml.DEVICE_ARCH_HOPPER:    "hopper",
	nvml.DEVICE_ARCH_BLACKWELL: "blackwell",
	nvml.DEVICE_ARCH_RUBIN:     "rubin",
}

func enableState(s nvml.EnableState) string {
	if s == nvml.FEATURE_ENABLED {
		return "enabled"
	}
	return "disabled"
}

// readAttributes reads a whole GPU's static attributes; anything NVML does
// not answer stays zero.
func readAttributes(h nvml.Device) gpu.Attributes {
	a := gpu.Attributes{NUMANode: -1}
	if m, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
		a.MemoryMiB = int64(m.Total / mib)
	}
	if m, ret := h.GetBAR1MemoryInfo(); ret == nvml.SUCCESS {
		a.BAR1MiB = int64(m.Bar1Total / mib)
	}
	if mw, ret := h.GetEnforcedPowerLimit(); ret == nvml.SUCCESS {
		a.PowerLimitW = int64(mw / 1000)
	} else if mw, ret := h.GetPowerManagementLimit(); ret == nvml.SUCCESS {
		a.PowerLimitW = int64(mw / 1000)
	}
	if v, ret := h.GetMaxClockInfo(nvml.CLOCK_GRAPHICS); ret == nvml.SUCCESS {
		a.GraphicsClockMHz = int64(v)
	}
	if v, ret := h.GetMaxClockInfo(nvml.CLOCK_MEM); ret == nvml.SUCCESS {
		a.MemoryClockMHz = int64(v)
	}
	gen, r1 := h.GetMaxPcieLinkGeneration()
	width, r2 := h.GetMaxPcieLinkWidth()
	if r1 == nvml.SUCCESS && r2 == nvml.SUCCESS {
		a.PCIeGeneration, a.PCIeWidth = int64(gen), int64(width)
		a.PCIBandwidthMBs = PCIBandwidthMBs(gen, width)
	}
	if major, minor, ret := h.GetCudaComputeCapability(); ret == nvml.SUCCESS {
		a.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	}
	if arch, ret := h.GetArchitecture(); ret == nvml.SUCCESS {
		a.Architecture = archNames[arch]
	}
	if s, ret := h.GetDisplayMode(); ret == nvml.SUCCESS {
		a.DisplayState = enableState(s)
	}
	if s, ret := h.GetPersistenceMode(); ret == nvml.SUCCESS {
		a.PersistenceMode = enableState(s)
	}
	if cur, _, ret := h.GetEccMode(); ret == nvml.SUCCESS {
		a.ECCMode = enableState(cur)
	}
	if n, ret := h.GetNumaNodeId(); ret == nvml.SUCCESS && n >= 0 {
		a.NUMANode = int64(n)
	}
	readNVLink(h, &a)
	return a
}

// readNVLink counts active NVLink links and classifies their far ends.
func readNVLink(h nvml.Device, a *gpu.Attributes) {
	switches, gpus := 0, 0
	for link := 0; link < nvml.NVLINK_MAX_LINKS; link++ {
		state, ret := h.GetNvLinkState(link)
		if ret == nvml.ERROR_NOT_SUPPORTED && link == 0 {
			return
		}
		if ret != nvml.SUCCESS {
			if ret == nvml.ERROR_INVALID_ARGUMENT {
				break // past the device's last link
			}
			continue
		}
		if state != nvml.FEATURE_ENABLED {
			continue
		}
		a.NVLinkLinks++
		if v, ret := h.GetNvLinkVersion(link); ret == nvml.SUCCESS {
			a.NVLinkBandwidthGBs += nvlinkLinkGBs[v]
		}
		if t, ret := h.GetNvLinkRemoteDeviceType(link); ret == nvml.SUCCESS {
			switch t {
			case nvml.NVLINK_DEVICE_TYPE_SWITCH:
				switches++
			case nvml.NVLINK_DEVICE_TYPE_GPU:
				gpus++
			}
		}
	}
	switch {
	case switches > 0:
		a.NVLinkTopology = "nvswitch"
	case gpus > 0:
		a.NVLinkTopology = "direct"
	}
}
