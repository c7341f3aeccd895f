package nvmlgpu

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputide/gputide/device-plugin/gpu"
)

func i64(v int64) *int64       { return &v }
func f64(v float64) *float64   { return &v }
func u32p(v uint32) *int64     { return i64(int64(v)) }
func ok(ret nvml.Return) bool  { return ret == nvml.SUCCESS }
func mibp(bytes uint64) *int64 { return i64(int64(bytes / mib)) }

// sampleGPU reads a whole GPU's statistics.
func sampleGPU(s *gpu.Sample, h nvml.Device) {
	if u, ret := h.GetUtilizationRates(); ok(ret) {
		s.GPUUtilPct, s.MemoryUtilPct = u32p(u.Gpu), u32p(u.Memory)
	}
	if v, _, ret := h.GetEncoderUtilization(); ok(ret) {
		s.EncoderUtilPct = u32p(v)
	}
	if v, _, ret := h.GetDecoderUtilization(); ok(ret) {
		s.DecoderUtilPct = u32p(v)
	}
	if m, ret := h.GetMemoryInfo(); ok(ret) {
		s.MemoryUsedMiB, s.MemoryTotalMiB = mibp(m.Used), mibp(m.Total)
	}
	if m, ret := h.GetBAR1MemoryInfo(); ok(ret) {
		s.BAR1UsedMiB, s.BAR1TotalMiB = mibp(m.Bar1Used), mibp(m.Bar1Total)
	}
	samplePowerTemp(s, h)
	if v, ret := h.GetClockInfo(nvml.CLOCK_GRAPHICS); ok(ret) {
		s.GraphicsClockMHz = u32p(v)
	}
	if v, ret := h.GetClockInfo(nvml.CLOCK_MEM); ok(ret) {
		s.MemoryClockMHz = u32p(v)
	}
	ecc := func(t nvml.MemoryErrorType, c nvml.EccCounterType) *int64 {
		if v, ret := h.GetTotalEccErrors(t, c); ok(ret) {
			return i64(int64(v))
		}
		return nil
	}
	s.ECCCorrectedVolatile = ecc(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
	s.ECCUncorrectedVolatile = ecc(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	s.ECCCorrectedAggregate = ecc(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.AGGREGATE_ECC)
	s.ECCUncorrectedAggregate = ecc(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.AGGREGATE_ECC)
}

// sampleMIG reads a MIG instance's own memory and its GPU's power and
// temperature (NVML has no per-instance power or temperature).
func sampleMIG(s *gpu.Sample, h, parent nvml.Device) {
	if m, ret := h.GetMemoryInfo(); ok(ret) {
		s.MemoryUsedMiB, s.MemoryTotalMiB = mibp(m.Used), mibp(m.Total)
	}
	samplePowerTemp(s, parent)
}

func samplePowerTemp(s *gpu.Sample, h nvml.Device) {
	if mw, ret := h.GetPowerUsage(); ok(ret) {
		s.PowerW = f64(float64(mw) / 1000)
	}
	if mw, ret := h.GetEnforcedPowerLimit(); ok(ret) {
		s.PowerLimitW = f64(float64(mw) / 1000)
	}
	if v, ret := h.GetTemperature(nvml.TEMPERATURE_GPU); ok(ret) {
		s.TemperatureC = u32p(v)
	}
}
