package mockgpu

import (
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/google/uuid"

	"github.com/gputide/gputide/device-plugin/gpu"
)

// migDevice is a MIG device handle: one compute instance that fills its GPU
// instance. Its function fields are filled by enableMIG; its methods bypass
// the generated call log.
type migDevice struct {
	*mock.Device
	parent *device
	uuid   string
	gi, ci int
	attrs  nvml.DeviceAttributes
}

var _ nvml.Device = (*migDevice)(nil)

// maxMIGSlices is the largest GPU instance of a model (7 on A100 and H100).
func maxMIGSlices(cfg gpus.Config) int {
	max := 0
	for _, p := range cfg.MIGProfiles.GpuInstanceProfiles {
		if int(p.SliceCount) > max {
			max = int(p.SliceCount)
		}
	}
	return max
}

// enableMIG puts the GPU in MIG mode and creates one GPU instance with one
// full-size compute instance per profile name, through the go-nvml server's
// own MIG calls.
func (d *device) enableMIG(names []string, seed string) error {
	if len(d.Config.MIGProfiles.GpuInstanceProfiles) == 0 {
		return fmt.Errorf("model %q has no MIG profiles", d.Config.Name)
	}
	max := maxMIGSlices(d.Config)
	used := 0
	var infos []nvml.GpuInstanceProfileInfo
	for _, n := range names {
		n = strings.TrimSpace(n)
		info, ok := migProfileID(d.Config, n)
		if !ok {
			return fmt.Errorf("unknown MIG profile %q for %s (want one of %s)", n, d.Config.Name,
				strings.Join(migProfileNames(d.Config), ", "))
		}
		used += int(info.SliceCount)
		infos = append(infos, info)
	}
	if used > max {
		return fmt.Errorf("MIG profiles %s need %d slices; the GPU has %d", strings.Join(names, ","), used, max)
	}
	if _, ret := d.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS {
		return fmt.Errorf("failed to enable MIG mode: %s", ret.Error())
	}
	for _, info := range infos {
		info := info
		gi, ret := d.CreateGpuInstance(&info)
		if ret != nvml.SUCCESS {
			return fmt.Errorf("failed to create GPU instance: %s", ret.Error())
		}
		giInfo, _ := gi.GetInfo()
		var ciInfo nvml.ComputeInstanceProfileInfo
		found := false
		for id, p := range d.Config.MIGProfiles.ComputeInstanceProfiles[int(info.Id)] {
			if p.SliceCount == info.SliceCount {
				ciInfo, found = d.Config.MIGProfiles.ComputeInstanceProfiles[int(info.Id)][id], true
				break
			}
		}
		if !found {
			return fmt.Errorf("no full-size compute instance profile for GPU instance profile %d", info.Id)
		}
		ci, ret := gi.CreateComputeInstance(&ciInfo)
		if ret != nvml.SUCCESS {
			return fmt.Errorf("failed to create compute instance: %s", ret.Error())
		}
		cInfo, _ := ci.GetInfo()
		m := &migDevice{
			Device: &mock.Device{},
			parent: d,
			gi:     int(giInfo.Id),
			ci:     int(cInfo.Id),
			attrs: nvml.DeviceAttributes{
				MultiprocessorCount:       info.MultiprocessorCount,
				SharedCopyEngineCount:     info.CopyEngineCount,
				SharedDecoderCount:        info.DecoderCount,
				SharedEncoderCount:        info.EncoderCount,
				SharedJpegCount:           info.JpegCount,
				SharedOfaCount:            info.OfaCount,
				GpuInstanceSliceCount:     info.SliceCount,
				ComputeInstanceSliceCount: ciInfo.SliceCount,
				MemorySizeMB:              info.MemorySizeMB,
			},
		}
		m.uuid = "MIG-" + uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "gputide-mock/%s/%s/%d/%d", seed, d.UUID, m.gi, m.ci)).String()
		m.fill()
		d.migs = append(d.migs, m)
	}
	return nil
}

// fill sets the MIG handle's function fields.
func (m *migDevice) fill() {
	m.GetUUIDFunc = func() (string, nvml.Return) { return m.uuid, nvml.SUCCESS }
	m.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return true, nvml.SUCCESS }
	m.GetDeviceHandleFromMigDeviceHandleFunc = func() (nvml.Device, nvml.Return) { return m.parent, nvml.SUCCESS }
	m.GetGpuInstanceIdFunc = func() (int, nvml.Return) { return m.gi, nvml.SUCCESS }
	m.GetComputeInstanceIdFunc = func() (int, nvml.Return) { return m.ci, nvml.SUCCESS }
	m.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) { return m.attrs, nvml.SUCCESS }
	m.GetNameFunc = func() (string, nvml.Return) {
		return m.parent.Config.Name + gpu.MIGNameSep + migName(m.attrs.GpuInstanceSliceCount,
			m.attrs.ComputeInstanceSliceCount, m.attrs.MemorySizeMB, m.parent.Config.MemoryMB), nvml.SUCCESS
	}
	m.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		if r := m.parent.fault(); r != nvml.SUCCESS {
			return nvml.Memory{}, r
		}
		total := m.attrs.MemorySizeMB * 1024 * 1024
		return nvml.Memory{Total: total, Free: total}, nvml.SUCCESS
	}
}

func (m *migDevice) GetUUID() (string, nvml.Return)            { return m.GetUUIDFunc() }
func (m *migDevice) GetName() (string, nvml.Return)            { return m.GetNameFunc() }
func (m *migDevice) IsMigDeviceHandle() (bool, nvml.Return)    { return m.IsMigDeviceHandleFunc() }
func (m *migDevice) GetGpuInstanceId() (int, nvml.Return)      { return m.GetGpuInstanceIdFunc() }
func (m *migDevice) GetComputeInstanceId() (int, nvml.Return)  { return m.GetComputeInstanceIdFunc() }
func (m *migDevice) GetMemoryInfo() (nvml.Memory, nvml.Return) { return m.GetMemoryInfoFunc() }
func (m *migDevice) GetAttributes() (nvml.DeviceAttributes, nvml.Return) {
	return m.GetAttributesFunc()
}
func (m *migDevice) GetDeviceHandleFromMigDeviceHandle() (nvml.Device, nvml.Return) {
	return m.GetDeviceHandleFromMigDeviceHandleFunc()
}
