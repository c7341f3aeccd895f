package plugin

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/gputide/gputide/device-plugin/gpu"
	"github.com/gputide/gputide/device-plugin/proto/devicepb"
	"github.com/gputide/gputide/device-plugin/proto/structspb"
)

// Attribute units, all in Nomad's unit table (structs.UnitIndex): Nomad
// rejects a fingerprint whose attribute has any other unit.
const (
	unitMiB  = "MiB"
	unitW    = "W"
	unitMHz  = "MHz"
	unitMBps = "MB/s"
	unitGBps = "GB/s"
)

// Fingerprint streams the device groups to send: the first as soon as the
// GPU inventory is read, then a new full list whenever the devices, their
// health or their attributes change (never on an unchanged tick). It
// returns only when ctx ends (Nomad closing the stream or the plugin
// stopping): Nomad drops the plugin's devices for good if the stream ends.
// With enabled = false it fails at once with ErrDisabled.
func (p *Plugin) Fingerprint(ctx context.Context, send func(*devicepb.FingerprintResponse) error) error {
	if p.monitor() == nil {
		return ErrDisabled
	}
	var last *devicepb.FingerprintResponse
	for {
		snap, changed := p.hub.current()
		if snap != nil {
			resp := renderFingerprint(snap)
			if last == nil || !proto.Equal(resp, last) {
				if err := send(resp); err != nil {
					return err
				}
				last = resp
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// ignoredDevice reports whether a device or its GPU is in ignored_gpu_ids.
func (s *snapshot) ignoredDevice(d gpu.Device) bool {
	return s.ignored[d.UUID] || (d.ParentUUID != "" && s.ignored[d.ParentUUID])
}

// renderFingerprint builds the response: one group per model in inventory
// order (GPU index), devices in inventory order.
func renderFingerprint(s *snapshot) *devicepb.FingerprintResponse {
	resp := &devicepb.FingerprintResponse{DeviceGroup: []*devicepb.DeviceGroup{}}
	groups := map[string]*devicepb.DeviceGroup{}
	numa := map[string]map[int64]bool{} // NUMA nodes per group
	for _, d := range s.inv.Devices {
		if s.ignoredDevice(d) {
			continue
		}
		g, ok := groups[d.Model]
		if !ok {
			g = &devicepb.DeviceGroup{
				Vendor:     Vendor,
				DeviceType: DeviceType,
				DeviceName: d.Model,
				Attributes: groupAttributes(s.inv, d),
			}
			groups[d.Model] = g
			resp.DeviceGroup = append(resp.DeviceGroup, g)
		}
		if numa[d.Model] == nil {
			numa[d.Model] = map[int64]bool{}
		}
		numa[d.Model][d.Attrs.NUMANode] = true
		st := s.status[d.UUID]
		if _, known := s.status[d.UUID]; !known {
			st.Healthy = true
		}
		g.Devices = append(g.Devices, &devicepb.DetectedDevice{
			ID:                d.UUID,
			Healthy:           st.Healthy,
			HealthDescription: st.Description,
			HwLocality:        &devicepb.DeviceLocality{PciBusId: d.PCIBusID},
		})
	}
	// numa_node only when every device of the group is on the same known
	// node; per device, the PCI bus ID is the locality the protocol carries.
	for name, nodes := range numa {
		if len(nodes) != 1 {
			continue
		}
		for n := range nodes {
			if n >= 0 {
				groups[name].Attributes["numa_node"] = intAttr(n, "")
			}
		}
	}
	return resp
}

func intAttr(v int64, unit string) *structspb.Attribute {
	return &structspb.Attribute{Value: &structspb.Attribute_IntVal{IntVal: v}, Unit: unit}
}

func strAttr(v string) *structspb.Attribute {
	return &structspb.Attribute{Value: &structspb.Attribute_StringVal{StringVal: v}}
}

func boolAttr(v bool) *structspb.Attribute {
	return &structspb.Attribute{Value: &structspb.Attribute_BoolVal{BoolVal: v}}
}

// groupAttributes gives a group's attributes from its first device (the
// lowest GPU index). Keys, types and units are listed in
// docs/device-plugin.md; unknown values are left out.
func groupAttributes(inv gpu.Inventory, d gpu.Device) map[string]*structspb.Attribute {
	a := d.Attrs
	out := map[string]*structspb.Attribute{}
	putInt := func(key string, v int64, unit string) {
		if v > 0 {
			out[key] = intAttr(v, unit)
		}
	}
	putStr := func(key, v string) {
		if v != "" {
			out[key] = strAttr(v)
		}
	}
	putInt("memory", a.MemoryMiB, unitMiB)
	putInt("bar1", a.BAR1MiB, unitMiB)
	putInt("power", a.PowerLimitW, unitW)
	putInt("cores_clock", a.GraphicsClockMHz, unitMHz)
	putInt("memory_clock", a.MemoryClockMHz, unitMHz)
	putInt("pci_bandwidth", a.PCIBandwidthMBs, unitMBps)
	putInt("pcie_generation", a.PCIeGeneration, "")
	putInt("pcie_width", a.PCIeWidth, "")
	putStr("driver_version", inv.DriverVersion)
	putStr("cuda_version", inv.CUDAVersion)
	putStr("compute_capability", a.ComputeCapability)
	putStr("architecture", a.Architecture)
	putStr("display_state", a.DisplayState)
	putStr("persistence_mode", a.PersistenceMode)
	putStr("ecc_mode", a.ECCMode)
	if a.NVLinkLinks > 0 {
		out["nvlink_links"] = intAttr(a.NVLinkLinks, "")
		putInt("nvlink_bandwidth", a.NVLinkBandwidthGBs, unitGBps)
		putStr("nvlink_topology", a.NVLinkTopology)
	}
	out["mig"] = boolAttr(d.MIG != nil)
	if d.MIG != nil {
		putStr("mig_profile", d.MIG.Profile)
		putInt("multiprocessors", a.Multiprocessors, "")
	}
	return out
}
