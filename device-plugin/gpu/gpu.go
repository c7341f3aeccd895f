// Package gpu holds the neutral types that the device plugin's GPU backends
// produce and the plugin consumes: the inventory of GPUs and MIG instances
// with their static attributes, health probes, health events and statistics
// samples, and the small Backend interface that the NVML and mock backends
// implement. It has no dependency on NVML or on the plugin protocol.
package gpu

import (
	"errors"
	"time"
)

// Backend is a source of GPUs. The NVML backend (package nvmlgpu) reads the
// real driver; the mock backend (package mockgpu) serves go-nvml's mock DGX
// servers through the same code. All methods are safe for concurrent use.
type Backend interface {
	// Name is the backend's name for logs: "nvml" or "mock".
	Name() string

	// Inventory enumerates the GPUs and MIG instances that NVML reports now,
	// with their static attributes. A GPU that is in MIG mode is replaced by
	// its MIG instances. Devices are ordered by GPU index, then GPU instance
	// and compute instance IDs. A device that cannot be read this time (lost,
	// needing a reset) keeps the entry of the previous enumeration.
	Inventory() (Inventory, error)

	// CheckHealth probes every physical GPU of the last inventory and returns
	// one Probe per GPU UUID. MIG instances inherit their GPU's probe.
	CheckHealth() (map[string]Probe, error)

	// WaitEvent waits up to timeout for the next health event (critical Xid,
	// double-bit ECC). ok is false when none arrived in time; err is set when
	// the event source failed and will not deliver more.
	WaitEvent(timeout time.Duration) (ev Event, ok bool, err error)

	// Sample reads the statistics of one device of the last inventory. Values
	// that cannot be read are left unset; err is set only for unknown IDs.
	Sample(uuid string) (Sample, error)

	// Close releases the backend (NVML shutdown). Further calls fail.
	Close() error
}

// ErrUnknownDevice is returned for a UUID that the last inventory lacks.
var ErrUnknownDevice = errors.New("unknown device")

// Inventory is one enumeration of the node's GPUs.
type Inventory struct {
	// DriverVersion is the NVIDIA driver version, e.g. "550.54.15".
	DriverVersion string
	// CUDAVersion is the highest CUDA version the driver supports, as
	// "major.minor", e.g. "12.4" (NVML's SystemGetCudaDriverVersion).
	CUDAVersion string
	// Devices are the allocatable devices: whole GPUs not in MIG mode and MIG
	// instances, ordered as documented on Backend.Inventory.
	Devices []Device
}

// Device is one allocatable GPU or MIG instance.
type Device struct {
	// UUID is NVML's UUID, "GPU-<uuid>" or "MIG-<uuid>". Stable across
	// restarts; it is the Nomad device instance ID.
	UUID string
	// Index is NVML's index of the GPU (of the parent GPU for MIG).
	Index int
	// Model is the group name: the NVML device name ("NVIDIA A100-SXM4-40GB"),
	// or "<parent model> MIG <profile>" for MIG instances.
	Model string
	// PCIBusID is the GPU's PCI address as NVML prints it, without trailing
	// NUL bytes, e.g. "00000000:07:00.0" (the parent's for MIG).
	PCIBusID string
	// ParentUUID is the UUID of the parent GPU of a MIG instance; empty for
	// a whole GPU.
	ParentUUID string
	// MIG describes a MIG instance; nil for a whole GPU.
	MIG *MIG
	// Attrs are the static attributes; zero values mean unknown.
	Attrs Attributes
}

// PhysicalUUID is the UUID of the physical GPU: the parent's for a MIG
// instance, the device's own otherwise.
func (d Device) PhysicalUUID() string {
	if d.ParentUUID != "" {
		return d.ParentUUID
	}
	return d.UUID
}

// MIG describes one MIG instance (a compute instance inside a GPU instance).
type MIG struct {
	// Profile is the MIG profile name, e.g. "1g.5gb" or "1c.3g.20gb".
	Profile string
	// GPUInstanceID and ComputeInstanceID are NVML's instance IDs.
	GPUInstanceID     int
	ComputeInstanceID int
}

// Attributes are a device's static properties. Field names carry units;
// a zero value (or "") means NVML did not report it.
type Attributes struct {
	// MemoryMiB is the frame buffer size (the slice's size for MIG).
	MemoryMiB int64
	// BAR1MiB is the BAR1 aperture size.
	BAR1MiB int64
	// PowerLimitW is the enforced power management limit in watts.
	PowerLimitW int64
	// GraphicsClockMHz and MemoryClockMHz are the maximum clocks.
	GraphicsClockMHz int64
	MemoryClockMHz   int64
	// PCIeGeneration and PCIeWidth are the maximum PCIe link generation and
	// lane count; PCIBandwidthMBs is their per-direction bandwidth in MB/s.
	PCIeGeneration  int64
	PCIeWidth       int64
	PCIBandwidthMBs int64
	// ComputeCapability is the CUDA compute capability, "major.minor".
	ComputeCapability string
	// Architecture is the GPU architecture in lower case, e.g. "ampere".
	Architecture string
	// DisplayState, PersistenceMode and ECCMode are "enabled" or "disabled".
	DisplayState    string
	PersistenceMode string
	ECCMode         string
	// NUMANode is the NUMA node closest to the GPU; -1 when unknown.
	NUMANode int64
	// NVLinkLinks is the number of active NVLink links; NVLinkBandwidthGBs
	// their total bidirectional bandwidth in GB/s; NVLinkTopology is
	// "nvswitch" when the links end at NVSwitches, "direct" when they end at
	// other GPUs, "" without NVLink.
	NVLinkLinks        int64
	NVLinkBandwidthGBs int64
	NVLinkTopology     string
	// Multiprocessors is the number of streaming multiprocessors of a MIG
	// instance (0 for whole GPUs).
	Multiprocessors int64
}

// ProbeState is the liveness of a GPU as NVML answers for it.
type ProbeState int

const (
	// ProbeOK means NVML answered normally.
	ProbeOK ProbeState = iota
	// ProbeLost means NVML answered ERROR_GPU_IS_LOST (fallen off the bus).
	ProbeLost
	// ProbeResetRequired means NVML answered ERROR_RESET_REQUIRED.
	ProbeResetRequired
)

// String names the state for health descriptions.
func (s ProbeState) String() string {
	switch s {
	case ProbeOK:
		return "ok"
	case ProbeLost:
		return "lost"
	case ProbeResetRequired:
		return "reset required"
	}
	return "unknown"
}

// RecoveryAction is the driver's requested recovery action for a GPU
// (NVML field FI_DEV_GET_GPU_RECOVERY_ACTION, drivers R550 and later).
type RecoveryAction int

const (
	// RecoveryUnknown means the driver does not report an action.
	RecoveryUnknown RecoveryAction = iota
	// RecoveryNone means no action is needed.
	RecoveryNone
	// RecoveryGPUReset asks for a GPU reset.
	RecoveryGPUReset
	// RecoveryNodeReboot asks for a node reboot.
	RecoveryNodeReboot
	// RecoveryDrainP2P asks to stop peer-to-peer work.
	RecoveryDrainP2P
	// RecoveryDrainAndReset asks to drain the GPU and reset it.
	RecoveryDrainAndReset
	// RecoveryOther is an action this plugin does not know by name.
	RecoveryOther
)

// String gives the action as text for health descriptions.
func (a RecoveryAction) String() string {
	switch a {
	case RecoveryNone:
		return "none"
	case RecoveryGPUReset:
		return "GPU reset"
	case RecoveryNodeReboot:
		return "node reboot"
	case RecoveryDrainP2P:
		return "drain peer-to-peer work"
	case RecoveryDrainAndReset:
		return "drain and reset"
	case RecoveryOther:
		return "driver-specific recovery"
	}
	return "unknown"
}

// Probe is one health probe of a physical GPU.
type Probe struct {
	// State is the GPU's liveness.
	State ProbeState
	// Recovery is the driver's requested recovery action.
	Recovery RecoveryAction
	// ECCKnown tells whether the ECC counters below were read.
	ECCKnown bool
	// VolatileUncorrectedECC and VolatileCorrectedECC count ECC errors since
	// the last driver load or GPU reset (NVML's volatile counters).
	VolatileUncorrectedECC uint64
	VolatileCorrectedECC   uint64
	// RemapPending and RemapFailure report row remapping (Ampere and later):
	// pending needs a GPU reset; failure needs the GPU replaced.
	RemapPending bool
	RemapFailure bool
}

// EventKind is the kind of a health event.
type EventKind int

const (
	// EventXid is an Xid error reported by the driver.
	EventXid EventKind = iota
	// EventDoubleBitECC is an uncorrectable (double-bit) ECC error.
	EventDoubleBitECC
)

// Event is a health event from NVML's event set.
type Event struct {
	// UUID is the device the event belongs to: the MIG instance's UUID when
	// NVML names a GPU/compute instance, else the GPU's UUID.
	UUID string
	// Kind is the event kind.
	Kind EventKind
	// Xid is the Xid number for EventXid.
	Xid uint64
	// Time is when the backend received the event.
	Time time.Time
}

// Sample is one statistics reading of a device. Pointer fields are nil when
// NVML did not answer.
type Sample struct {
	// Time is when the sample was taken.
	Time time.Time
	// GPUUtilPct, MemoryUtilPct, EncoderUtilPct and DecoderUtilPct are
	// utilisation percentages (0-100) over NVML's last sample period.
	GPUUtilPct     *int64
	MemoryUtilPct  *int64
	EncoderUtilPct *int64
	DecoderUtilPct *int64
	// MemoryUsedMiB and MemoryTotalMiB are frame buffer use and size.
	MemoryUsedMiB  *int64
	MemoryTotalMiB *int64
	// BAR1UsedMiB and BAR1TotalMiB are BAR1 aperture use and size.
	BAR1UsedMiB  *int64
	BAR1TotalMiB *int64
	// PowerW is the current draw and PowerLimitW the enforced limit, in W.
	PowerW      *float64
	PowerLimitW *float64
	// TemperatureC is the GPU core temperature in degrees Celsius.
	TemperatureC *int64
	// GraphicsClockMHz and MemoryClockMHz are the current clocks.
	GraphicsClockMHz *int64
	MemoryClockMHz   *int64
	// ECC error counts: volatile (since the last reset) and aggregate
	// (lifetime), corrected (single-bit) and uncorrected (double-bit).
	ECCCorrectedVolatile    *int64
	ECCUncorrectedVolatile  *int64
	ECCCorrectedAggregate   *int64
	ECCUncorrectedAggregate *int64
}
