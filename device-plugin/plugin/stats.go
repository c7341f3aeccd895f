package plugin

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/gputide/gputide/device-plugin/gpu"
	"github.com/gputide/gputide/device-plugin/proto/devicepb"
	"github.com/gputide/gputide/device-plugin/proto/structspb"
)

// DefaultStatsInterval is used when Nomad asks for interval 0.
const DefaultStatsInterval = time.Second

// minStatsInterval bounds the sampling rate.
const minStatsInterval = 100 * time.Millisecond

// Stat names and units. Stats units are free text in Nomad.
const (
	statMemory      = "Memory state"
	statBAR1        = "BAR1 buffer state"
	statPower       = "Power usage"
	statTemperature = "Temperature"
	statGPUUtil     = "GPU utilization"
	statMemUtil     = "Memory utilization"
	statEncUtil     = "Encoder utilization"
	statDecUtil     = "Decoder utilization"
	statGfxClock    = "Graphics clock"
	statMemClock    = "Memory clock"
	statECCCorrV    = "ECC corrected errors (volatile)"
	statECCUncV     = "ECC uncorrected errors (volatile)"
	statECCCorrA    = "ECC corrected errors (aggregate)"
	statECCUncA     = "ECC uncorrected errors (aggregate)"
)

// Stats streams one StatsResponse at once and then one per interval (0
// means 1s, shorter than 100ms is raised to 100ms) until ctx ends. Each
// covers every fingerprinted, non-ignored device, grouped like the
// fingerprint; see statsFor for the values and units.
func (p *Plugin) Stats(ctx context.Context, interval time.Duration, send func(*devicepb.StatsResponse) error) error {
	if p.monitor() == nil {
		return ErrDisabled
	}
	if interval <= 0 {
		interval = DefaultStatsInterval
	}
	if interval < minStatsInterval {
		interval = minStatsInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if snap, _ := p.hub.current(); snap != nil && snap.backend != nil {
			if err := send(collectStats(snap)); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// collectStats samples every device of the snapshot.
func collectStats(s *snapshot) *devicepb.StatsResponse {
	resp := &devicepb.StatsResponse{Groups: []*devicepb.DeviceGroupStats{}}
	groups := map[string]*devicepb.DeviceGroupStats{}
	for _, d := range s.inv.Devices {
		if s.ignoredDevice(d) {
			continue
		}
		sample, err := s.backend.Sample(d.UUID)
		if err != nil {
			continue
		}
		g, ok := groups[d.Model]
		if !ok {
			g = &devicepb.DeviceGroupStats{Vendor: Vendor, Type: DeviceType, Name: d.Model, InstanceStats: map[string]*devicepb.DeviceStats{}}
			groups[d.Model] = g
			resp.Groups = append(resp.Groups, g)
		}
		g.InstanceStats[d.UUID] = statsFor(d, sample)
	}
	return resp
}

func intStat(v *int64, unit, desc string) *structspb.StatValue {
	if v == nil {
		return naStat(unit, desc)
	}
	return &structspb.StatValue{IntNumeratorVal: wrapperspb.Int64(*v), Unit: unit, Desc: desc}
}

func ratioStat(num, den *int64, unit, desc string) *structspb.StatValue {
	if num == nil || den == nil {
		return naStat(unit, desc)
	}
	return &structspb.StatValue{IntNumeratorVal: wrapperspb.Int64(*num), IntDenominatorVal: wrapperspb.Int64(*den), Unit: unit, Desc: desc}
}

func naStat(unit, desc string) *structspb.StatValue {
	return &structspb.StatValue{StringVal: wrapperspb.String("N/A"), Unit: unit, Desc: desc}
}

// statsFor renders one sample. Summary: memory used / total in MiB.
// Attributes: utilisations in %, temperature in C, power draw / limit in W
// (float), memory and BAR1 used / total in MiB, clocks in MHz, ECC error
// counts in #. A value NVML did not give is the string "N/A". MIG
// instances report their own memory and their GPU's power and temperature.
func statsFor(d gpu.Device, s gpu.Sample) *devicepb.DeviceStats {
	memory := ratioStat(s.MemoryUsedMiB, s.MemoryTotalMiB, "MiB", "GPU memory used / total")
	attrs := map[string]*structspb.StatValue{
		statMemory:      memory,
		statTemperature: intStat(s.TemperatureC, "C", "GPU core temperature"),
	}
	power := naStat("W", "power draw / enforced power limit")
	if s.PowerW != nil && s.PowerLimitW != nil {
		power = &structspb.StatValue{
			FloatNumeratorVal:   wrapperspb.Double(*s.PowerW),
			FloatDenominatorVal: wrapperspb.Double(*s.PowerLimitW),
			Unit:                "W",
			Desc:                "power draw / enforced power limit",
		}
	}
	attrs[statPower] = power
	if d.MIG != nil {
		attrs[statTemperature].Desc = "temperature of the MIG instance's GPU"
		power.Desc = "power draw / limit of the MIG instance's GPU"
	} else {
		attrs[statBAR1] = ratioStat(s.BAR1UsedMiB, s.BAR1TotalMiB, "MiB", "BAR1 aperture used / total")
		attrs[statGPUUtil] = intStat(s.GPUUtilPct, "%", "time a kernel ran over the last sample period")
		attrs[statMemUtil] = intStat(s.MemoryUtilPct, "%", "time memory was read or written over the last sample period")
		attrs[statEncUtil] = intStat(s.EncoderUtilPct, "%", "video encoder utilisation")
		attrs[statDecUtil] = intStat(s.DecoderUtilPct, "%", "video decoder utilisation")
		attrs[statGfxClock] = intStat(s.GraphicsClockMHz, "MHz", "current graphics clock")
		attrs[statMemClock] = intStat(s.MemoryClockMHz, "MHz", "current memory clock")
		attrs[statECCCorrV] = intStat(s.ECCCorrectedVolatile, "#", "corrected (single-bit) ECC errors since the last reset")
		attrs[statECCUncV] = intStat(s.ECCUncorrectedVolatile, "#", "uncorrected (double-bit) ECC errors since the last reset")
		attrs[statECCCorrA] = intStat(s.ECCCorrectedAggregate, "#", "corrected ECC errors over the GPU's life")
		attrs[statECCUncA] = intStat(s.ECCUncorrectedAggregate, "#", "uncorrected ECC errors over the GPU's life")
	}
	return &devicepb.DeviceStats{
		Summary:   memory,
		Stats:     &structspb.StatObject{Attributes: attrs},
		Timestamp: timestamppb.New(s.Time),
	}
}
