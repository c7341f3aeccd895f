package mockgpu

import (
	"encoding/binary"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// Idle readings the mock reports for every GPU (MiB in use with persistence
// mode on, BAR1 in use).
const (
	idleMemoryUsedMiB = 4
	idleBAR1UsedMiB   = 2
)

// gpuState is the injected fault state of one GPU; guarded by device.mu.
type gpuState struct {
	lost     bool
	recovery nvml.DeviceGpuRecoveryAction
	// Volatile counters reset with the GPU; aggregate ones never do.
	eccUncorrectedVolatile, eccCorrectedVolatile   uint64
	eccUncorrectedAggregate, eccCorrectedAggregate uint64
	remapPending                                   bool
	// events are the registrations of RegisterEvents.
	events []registration
}

type registration struct {
	set  *eventSet
	mask uint64
}

// device wraps a go-nvml mock server device: its function fields are filled
// by fill, and the methods the plugin calls bypass the generated call
// recording.
type device struct {
	*server.Device
	lib   *Lib
	hw    hardware
	index int
	count int
	st    gpuState
	migs  []*migDevice
}

var _ nvml.Device = (*device)(nil)

// fault returns the NVML error a faulted GPU gives for dynamic queries.
func (d *device) fault() nvml.Return {
	d.RLock()
	defer d.RUnlock()
	if d.st.lost {
		return nvml.ERROR_GPU_IS_LOST
	}
	return nvml.SUCCESS
}

// fill sets the function fields go-nvml's server leaves unset (see the
// package comment) and the ones whose values it gets wrong for the plugin
// (PCI info without a bus ID, memory with nothing used).
func (d *device) fill() {
	hw := d.hw
	total := d.Config.MemoryMB * 1024 * 1024
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		p := nvml.PciInfo{
			Domain:         0,
			Bus:            hw.busID(d.index),
			Device:         0,
			PciDeviceId:    d.Config.PciDeviceId,
			PciSubSystemId: 0x147f10de,
		}
		for i, c := range []byte(d.PciBusID) { // NUL-padded like the C struct
			p.BusId[i] = int8(c)
		}
		for i, c := range []byte(d.PciBusID[4:]) {
			if i < len(p.BusIdLegacy)-1 {
				p.BusIdLegacy[i] = int8(c)
			}
		}
		return p, nvml.SUCCESS
	}
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		used := uint64(idleMemoryUsedMiB) * 1024 * 1024
		return nvml.Memory{Total: total, Used: used, Free: total - used}, nvml.SUCCESS
	}
	d.GetBAR1MemoryInfoFunc = func() (nvml.BAR1Memory, nvml.Return) {
		t := hw.bar1MiB * 1024 * 1024
		u := uint64(idleBAR1UsedMiB) * 1024 * 1024
		return nvml.BAR1Memory{Bar1Total: t, Bar1Used: u, Bar1Free: t - u}, nvml.SUCCESS
	}
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return hw.powerLimitW * 1000, nvml.SUCCESS }
	d.GetPowerManagementLimitFunc = d.GetEnforcedPowerLimitFunc
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) {
		if r := d.fault(); r != nvml.SUCCESS {
			return 0, r
		}
		return (hw.idlePowerW + uint32(d.index%4)) * 1000, nvml.SUCCESS
	}
	d.GetMaxClockInfoFunc = func(t nvml.ClockType) (uint32, nvml.Return) {
		switch t {
		case nvml.CLOCK_GRAPHICS, nvml.CLOCK_SM:
			return hw.maxGraphicsMHz, nvml.SUCCESS
		case nvml.CLOCK_MEM:
			return hw.maxMemoryMHz, nvml.SUCCESS
		}
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetClockInfoFunc = func(t nvml.ClockType) (uint32, nvml.Return) {
		if r := d.fault(); r != nvml.SUCCESS {
			return 0, r
		}
		switch t {
		case nvml.CLOCK_GRAPHICS, nvml.CLOCK_SM:
			return hw.idleGraphicsMH, nvml.SUCCESS
		case nvml.CLOCK_MEM:
			return hw.maxMemoryMHz, nvml.SUCCESS
		}
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetMaxPcieLinkGenerationFunc = func() (int, nvml.Return) { return hw.pcieGen, nvml.SUCCESS }
	d.GetMaxPcieLinkWidthFunc = func() (int, nvml.Return) { return hw.pcieWidth, nvml.SUCCESS }
	d.GetCurrPcieLinkGenerationFunc = d.GetMaxPcieLinkGenerationFunc
	d.GetCurrPcieLinkWidthFunc = d.GetMaxPcieLinkWidthFunc
	d.GetDisplayModeFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_DISABLED, nvml.SUCCESS }
	d.GetPersistenceModeFunc = func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_ENABLED, nvml.SUCCESS }
	d.GetEccModeFunc = func() (nvml.EnableState, nvml.EnableState, nvml.Return) {
		return nvml.FEATURE_ENABLED, nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	d.GetNumaNodeIdFunc = func() (int, nvml.Return) { return d.index * 2 / d.count, nvml.SUCCESS }
	d.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
		if link < 0 || link >= hw.nvlinks {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		if r := d.fault(); r != nvml.SUCCESS {
			return 0, r
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	d.GetNvLinkVersionFunc = func(link int) (uint32, nvml.Return) {
		if link < 0 || link >= hw.nvlinks {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return hw.nvlinkVersion, nvml.SUCCESS
	}
	d.GetNvLinkRemoteDeviceTypeFunc = func(link int) (nvml.IntNvLinkDeviceType, nvml.Return) {
		if link < 0 || link >= hw.nvlinks {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
	}
	d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
		if r := d.fault(); r != nvml.SUCCESS {
			return 0, r
		}
		return hw.idleTempC + uint32(d.index%4), nvml.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		if r := d.fault(); r != nvml.SUCCESS {
			return nvml.Utilization{}, r
		}
		return nvml.Utilization{Gpu: 0, Memory: 0}, nvml.SUCCESS
	}
	d.GetEncoderUtilizationFunc = func() (uint32, uint32, nvml.Return) {
		if r := d.fault(); r != nvml.SUCCESS {
			return 0, 0, r
		}
		return 0, 167000, nvml.SUCCESS
	}
	d.GetDecoderUtilizationFunc = d.GetEncoderUtilizationFunc
	d.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		if r := d.fault(); r != nvml.SUCCESS {
			return 0, r
		}
		d.RLock()
		defer d.RUnlock()
		switch {
		case t == nvml.MEMORY_ERROR_TYPE_UNCORRECTED && c == nvml.VOLATILE_ECC:
			return d.st.eccUncorrectedVolatile, nvml.SUCCESS
		case t == nvml.MEMORY_ERROR_TYPE_CORRECTED && c == nvml.VOLATILE_ECC:
			return d.st.eccCorrectedVolatile, nvml.SUCCESS
		case t == nvml.MEMORY_ERROR_TYPE_UNCORRECTED && c == nvml.AGGREGATE_ECC:
			return d.st.eccUncorrectedAggregate, nvml.SUCCESS
		case t == nvml.MEMORY_ERROR_TYPE_CORRECTED && c == nvml.AGGREGATE_ECC:
			return d.st.eccCorrectedAggregate, nvml.SUCCESS
		}
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		if r := d.fault(); r != nvml.SUCCESS {
			return 0, 0, false, false, r
		}
		d.RLock()
		defer d.RUnlock()
		return 0, int(d.st.eccUncorrectedVolatile), d.st.remapPending, false, nvml.SUCCESS
	}
	d.GetFieldValuesFunc = func(values []nvml.FieldValue) nvml.Return {
		if r := d.fault(); r != nvml.SUCCESS {
			return r
		}
		d.RLock()
		action := d.st.recovery
		d.RUnlock()
		for i := range values {
			if values[i].FieldId != nvml.FI_DEV_GET_GPU_RECOVERY_ACTION {
				values[i].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				continue
			}
			values[i].ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
			values[i].NvmlReturn = uint32(nvml.SUCCESS)
			binary.LittleEndian.PutUint32(values[i].Value[:4], uint32(action))
		}
		return nvml.SUCCESS
	}
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		return nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
	}
	d.RegisterEventsFunc = func(mask uint64, set nvml.EventSet) nvml.Return {
		s, ok := set.(*eventSet)
		if !ok {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		d.Lock()
		d.st.events = append(d.st.events, registration{set: s, mask: mask})
		d.Unlock()
		return nvml.SUCCESS
	}
	d.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return false, nvml.SUCCESS }
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return maxMIGSlices(d.Config), nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= maxMIGSlices(d.Config) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		if i >= len(d.migs) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return d.migs[i], nvml.SUCCESS
	}
}

// emit queues an event on every set registered for its type.
func (d *device) emit(eventType, data uint64, gi, ci uint32) {
	d.RLock()
	regs := append([]registration(nil), d.st.events...)
	d.RUnlock()
	for _, r := range regs {
		if r.mask&eventType == 0 {
			continue
		}
		r.set.push(nvml.EventData{Device: d, EventType: eventType, EventData: data, GpuInstanceId: gi, ComputeInstanceId: ci})
	}
}

// The methods below implement nvml.Device by calling the function fields
// directly, without the generated mock's ever-growing call log.

func (d *device) GetUUID() (string, nvml.Return)            { return d.GetUUIDFunc() }
func (d *device) GetName() (string, nvml.Return)            { return d.GetNameFunc() }
func (d *device) GetIndex() (int, nvml.Return)              { return d.GetIndexFunc() }
func (d *device) GetMinorNumber() (int, nvml.Return)        { return d.GetMinorNumberFunc() }
func (d *device) GetPciInfo() (nvml.PciInfo, nvml.Return)   { return d.GetPciInfoFunc() }
func (d *device) GetMemoryInfo() (nvml.Memory, nvml.Return) { return d.GetMemoryInfoFunc() }
func (d *device) GetArchitecture() (nvml.DeviceArchitecture, nvml.Return) {
	return d.GetArchitectureFunc()
}
func (d *device) GetBrand() (nvml.BrandType, nvml.Return) { return d.GetBrandFunc() }
func (d *device) GetCudaComputeCapability() (int, int, nvml.Return) {
	return d.GetCudaComputeCapabilityFunc()
}
func (d *device) GetBAR1MemoryInfo() (nvml.BAR1Memory, nvml.Return) { return d.GetBAR1MemoryInfoFunc() }
func (d *device) GetEnforcedPowerLimit() (uint32, nvml.Return)      { return d.GetEnforcedPowerLimitFunc() }
func (d *device) GetPowerManagementLimit() (uint32, nvml.Return) {
	return d.GetPowerManagementLimitFunc()
}
func (d *device) GetPowerUsage() (uint32, nvml.Return) { return d.GetPowerUsageFunc() }
func (d *device) GetMaxClockInfo(t nvml.ClockType) (uint32, nvml.Return) {
	return d.GetMaxClockInfoFunc(t)
}
func (d *device) GetClockInfo(t nvml.ClockType) (uint32, nvml.Return) { return d.GetClockInfoFunc(t) }
func (d *device) GetMaxPcieLinkGeneration() (int, nvml.Return) {
	return d.GetMaxPcieLinkGenerationFunc()
}
func (d *device) GetMaxPcieLinkWidth() (int, nvml.Return) { return d.GetMaxPcieLinkWidthFunc() }
func (d *device) GetCurrPcieLinkGeneration() (int, nvml.Return) {
	return d.GetCurrPcieLinkGenerationFunc()
}
func (d *device) GetCurrPcieLinkWidth() (int, nvml.Return)        { return d.GetCurrPcieLinkWidthFunc() }
func (d *device) GetDisplayMode() (nvml.EnableState, nvml.Return) { return d.GetDisplayModeFunc() }
func (d *device) GetPersistenceMode() (nvml.EnableState, nvml.Return) {
	return d.GetPersistenceModeFunc()
}
func (d *device) GetEccMode() (nvml.EnableState, nvml.EnableState, nvml.Return) {
	return d.GetEccModeFunc()
}
func (d *device) GetNumaNodeId() (int, nvml.Return) { return d.GetNumaNodeIdFunc() }
func (d *device) GetNvLinkState(link int) (nvml.EnableState, nvml.Return) {
	return d.GetNvLinkStateFunc(link)
}
func (d *device) GetNvLinkVersion(link int) (uint32, nvml.Return) {
	return d.GetNvLinkVersionFunc(link)
}
func (d *device) GetNvLinkRemoteDeviceType(link int) (nvml.IntNvLinkDeviceType, nvml.Return) {
	return d.GetNvLinkRemoteDeviceTypeFunc(link)
}
func (d *device) GetTemperature(s nvml.TemperatureSensors) (uint32, nvml.Return) {
	return d.GetTemperatureFunc(s)
}
func (d *device) GetUtilizationRates() (nvml.Utilization, nvml.Return) {
	return d.GetUtilizationRatesFunc()
}
func (d *device) GetEncoderUtilization() (uint32, uint32, nvml.Return) {
	return d.GetEncoderUtilizationFunc()
}
func (d *device) GetDecoderUtilization() (uint32, uint32, nvml.Return) {
	return d.GetDecoderUtilizationFunc()
}
func (d *device) GetTotalEccErrors(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
	return d.GetTotalEccErrorsFunc(t, c)
}
func (d *device) GetRemappedRows() (int, int, bool, bool, nvml.Return) {
	return d.GetRemappedRowsFunc()
}
func (d *device) GetFieldValues(v []nvml.FieldValue) nvml.Return { return d.GetFieldValuesFunc(v) }
func (d *device) GetSupportedEventTypes() (uint64, nvml.Return) {
	return d.GetSupportedEventTypesFunc()
}
func (d *device) RegisterEvents(mask uint64, set nvml.EventSet) nvml.Return {
	return d.RegisterEventsFunc(mask, set)
}
func (d *device) IsMigDeviceHandle() (bool, nvml.Return)   { return d.IsMigDeviceHandleFunc() }
func (d *device) GetMigMode() (int, int, nvml.Return)      { return d.GetMigModeFunc() }
func (d *device) GetMaxMigDeviceCount() (int, nvml.Return) { return d.GetMaxMigDeviceCountFunc() }
func (d *device) GetMigDeviceHandleByIndex(i int) (nvml.Device, nvml.Return) {
	return d.GetMigDeviceHandleByIndexFunc(i)
}
