// Package nvmlgpu implements gpu.Backend over any nvml.Interface: the real
// NVML library (OpenSystem) or a go-nvml mock server (package mockgpu uses
// it that way), so both backends share one code path for inventory, health
// probes, events and statistics.
package nvmlgpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/hashicorp/go-hclog"

	"github.com/gputide/gputide/device-plugin/gpu"
)

// ErrLibraryNotFound is returned by Open when libnvidia-ml cannot be loaded.
var ErrLibraryNotFound = errors.New("NVML library (libnvidia-ml.so.1) not found: install the NVIDIA driver, " +
	`set nvml_library_path to the library, or use backend = "mock" on machines without GPUs`)

// Options configure a Backend.
type Options struct {
	// Name is the backend's name for logs ("nvml" or "mock").
	Name string
	// Logger receives debug and warning lines; nil discards them.
	Logger hclog.Logger
	// BeforeHealthCheck, when set, runs at the start of every CheckHealth.
	// The mock backend reads its fault file here.
	BeforeHealthCheck func() error
}

// Backend reads GPUs through an nvml.Interface. It implements gpu.Backend.
type Backend struct {
	lib  nvml.Interface
	opts Options
	log  hclog.Logger

	mu sync.Mutex
	// inv is the last inventory.
	inv gpu.Inventory
	// handles maps every device UUID (GPU or MIG) to its handle.
	handles map[string]nvml.Device
	// gpus maps physical GPU UUIDs to their handles.
	gpus map[string]nvml.Device
	// byIndex keeps the last devices of each GPU index, reused when a GPU
	// cannot be read.
	byIndex map[int][]gpu.Device
	// migIDs maps "<gpu uuid>/<gi>/<ci>" to the MIG instance's UUID.
	migIDs map[string]string
	// registered marks physical GPUs registered with the event set.
	registered map[string]bool
	events     nvml.EventSet
	closed     bool
}

var _ gpu.Backend = (*Backend)(nil)

// OpenSystem loads the system's NVML library (libraryPath, or
// libnvidia-ml.so.1 from the loader path when empty) and opens a Backend on
// it. It fails with ErrLibraryNotFound when the library is absent.
func OpenSystem(libraryPath string, opts Options) (*Backend, error) {
	var lib nvml.Interface
	if libraryPath != "" {
		lib = nvml.New(nvml.WithLibraryPath(libraryPath))
	} else {
		lib = nvml.New()
	}
	if opts.Name == "" {
		opts.Name = "nvml"
	}
	return Open(lib, opts)
}

// Open initialises lib and creates the event set. It fails with
// ErrLibraryNotFound when lib cannot load its library, and with NVML's error
// text for other Init failures (driver not loaded, no permission).
func Open(lib nvml.Interface, opts Options) (*Backend, error) {
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, ErrLibraryNotFound
	default:
		return nil, fmt.Errorf("failed to initialise NVML: %s", nvml.ErrorString(ret))
	}
	b := &Backend{
		lib:        lib,
		opts:       opts,
		log:        log,
		handles:    map[string]nvml.Device{},
		gpus:       map[string]nvml.Device{},
		byIndex:    map[int][]gpu.Device{},
		migIDs:     map[string]string{},
		registered: map[string]bool{},
	}
	set, ret := lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		log.Warn("NVML event set unavailable; health relies on probes only", "error", nvml.ErrorString(ret))
	} else {
		b.events = set
	}
	return b, nil
}

// Name implements gpu.Backend.
func (b *Backend) Name() string { return b.opts.Name }

// Close implements gpu.Backend: it frees the event set and shuts NVML down.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	if b.events != nil {
		b.events.Free()
	}
	if ret := b.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("failed to shut NVML down: %s", nvml.ErrorString(ret))
	}
	return nil
}

// Inventory implements gpu.Backend.
func (b *Backend) Inventory() (gpu.Inventory, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return gpu.Inventory{}, errors.New("backend closed")
	}
	count, ret := b.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return gpu.Inventory{}, fmt.Errorf("failed to count GPUs: %s", nvml.ErrorString(ret))
	}
	inv := gpu.Inventory{}
	if v, ret := b.lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		inv.DriverVersion = v
	}
	if v, ret := b.lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS && v > 0 {
		inv.CUDAVersion = fmt.Sprintf("%d.%d", v/1000, (v%1000)/10)
	}

	handles := map[string]nvml.Device{}
	gpus := map[string]nvml.Device{}
	byIndex := map[int][]gpu.Device{}
	migIDs := map[string]string{}
	for i := 0; i < count; i++ {
		devs, err := b.readGPU(i, handles, gpus, migIDs)
		if err != nil {
			prior := b.byIndex[i]
			b.log.Warn("failed to read GPU; keeping its last known devices", "index", i, "error", err, "kept", len(prior))
			for _, d := range prior {
				devs = append(devs, d)
				if h, ok := b.handles[d.UUID]; ok {
					handles[d.UUID] = h
				}
				if h, ok := b.gpus[d.PhysicalUUID()]; ok {
					gpus[d.PhysicalUUID()] = h
				}
			}
			for k, v := range b.migIDs {
				for _, d := range prior {
					if v == d.UUID {
						migIDs[k] = v
					}
				}
			}
		}
		byIndex[i] = devs
		inv.Devices = append(inv.Devices, devs...)
	}
	b.inv, b.handles, b.gpus, b.byIndex, b.migIDs = inv, handles, gpus, byIndex, migIDs
	b.registerEvents()
	return copyInventory(inv), nil
}

// readGPU reads GPU i and, in MIG mode, its MIG instances.
func (b *Backend) readGPU(i int, handles, gpus map[string]nvml.Device, migIDs map[string]string) ([]gpu.Device, error) {
	h, ret := b.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("failed to get handle: %s", nvml.ErrorString(ret))
	}
	uuid, ret := h.GetUUID()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("failed to read UUID: %s", nvml.ErrorString(ret))
	}
	name, ret := h.GetName()
	if ret != nvml.SUCCESS || name == "" {
		name = "N/A"
	}
	busID := ""
	if pci, ret := h.GetPciInfo(); ret == nvml.SUCCESS {
		busID = BusID(pci)
	}
	attrs := readAttributes(h)
	gpus[uuid] = h

	if mode, _, ret := h.GetMigMode(); ret == nvml.SUCCESS && mode == nvml.DEVICE_MIG_ENABLE {
		migs := b.readMIG(h, uuid, name, busID, i, attrs, migIDs)
		for _, m := range migs {
			handles[m.dev.UUID] = m.handle
		}
		out := make([]gpu.Device, len(migs))
		for k, m := range migs {
			out[k] = m.dev
		}
		if len(out) == 0 {
			b.log.Debug("GPU is in MIG mode without MIG instances; nothing to offer", "uuid", uuid)
		}
		return out, nil
	}
	handles[uuid] = h
	return []gpu.Device{{UUID: uuid, Index: i, Model: name, PCIBusID: busID, Attrs: attrs}}, nil
}

type migDevice struct {
	dev    gpu.Device
	handle nvml.Device
}

// readMIG enumerates the MIG instances of GPU h.
func (b *Backend) readMIG(h nvml.Device, parentUUID, parentName, busID string, index int, parent gpu.Attributes, migIDs map[string]string) []migDevice {
	max, ret := h.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		b.log.Warn("failed to read MIG device count", "uuid", parentUUID, "error", nvml.ErrorString(ret))
		return nil
	}
	var out []migDevice
	for j := 0; j < max; j++ {
		mh, ret := h.GetMigDeviceHandleByIndex(j)
		if ret != nvml.SUCCESS {
			continue // NOT_FOUND: no instance at this index
		}
		uuid, ret := mh.GetUUID()
		if ret != nvml.SUCCESS {
			b.log.Warn("failed to read MIG UUID", "parent", parentUUID, "index", j, "error", nvml.ErrorString(ret))
			continue
		}
		gi, _ := mh.GetGpuInstanceId()
		ci, _ := mh.GetComputeInstanceId()
		attrs := parent
		attrs.Multiprocessors = 0
		profile := "unknown"
		if a, ret := mh.GetAttributes(); ret == nvml.SUCCESS {
			attrs.MemoryMiB = int64(a.MemorySizeMB)
			attrs.Multiprocessors = int64(a.MultiprocessorCount)
			profile = gpu.MIGProfileName(a.GpuInstanceSliceCount, a.ComputeInstanceSliceCount, a.MemorySizeMB, uint64(parent.MemoryMiB))
		} else if m, ret := mh.GetMemoryInfo(); ret == nvml.SUCCESS {
			attrs.MemoryMiB = int64(m.Total / mib)
		}
		migIDs[migKey(parentUUID, uint32(gi), uint32(ci))] = uuid
		out = append(out, migDevice{
			dev: gpu.Device{
				UUID:       uuid,
				Index:      index,
				Model:      parentName + gpu.MIGNameSep + profile,
				PCIBusID:   busID,
				ParentUUID: parentUUID,
				MIG:        &gpu.MIG{Profile: profile, GPUInstanceID: gi, ComputeInstanceID: ci},
				Attrs:      attrs,
			},
			handle: mh,
		})
	}
	sort.Slice(out, func(a, c int) bool {
		ma, mc := out[a].dev.MIG, out[c].dev.MIG
		if ma.GPUInstanceID != mc.GPUInstanceID {
			return ma.GPUInstanceID < mc.GPUInstanceID
		}
		return ma.ComputeInstanceID < mc.ComputeInstanceID
	})
	return out
}

func migKey(parent string, gi, ci uint32) string {
	return fmt.Sprintf("%s/%d/%d", parent, gi, ci)
}

// registerEvents registers new GPUs for Xid and double-bit ECC events.
// Caller holds b.mu.
func (b *Backend) registerEvents() {
	if b.events == nil {
		return
	}
	const wanted = uint64(nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError)
	for uuid, h := range b.gpus {
		if b.registered[uuid] {
			continue
		}
		mask := wanted
		if supported, ret := h.GetSupportedEventTypes(); ret == nvml.SUCCESS {
			mask &= supported
		}
		if mask == 0 {
			b.log.Warn("GPU supports no health events; health relies on probes", "uuid", uuid)
			b.registered[uuid] = true
			continue
		}
		if ret := h.RegisterEvents(mask, b.events); ret != nvml.SUCCESS {
			b.log.Warn("failed to register health events", "uuid", uuid, "error", nvml.ErrorString(ret))
			continue
		}
		b.registered[uuid] = true
	}
}

// CheckHealth implements gpu.Backend.
func (b *Backend) CheckHealth() (map[string]gpu.Probe, error) {
	if f := b.opts.BeforeHealthCheck; f != nil {
		if err := f(); err != nil {
			b.log.Warn("health check hook failed", "error", err)
		}
	}
	b.mu.Lock()
	gpus := make(map[string]nvml.Device, len(b.gpus))
	for k, v := range b.gpus {
		gpus[k] = v
	}
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return nil, errors.New("backend closed")
	}
	out := make(map[string]gpu.Probe, len(gpus))
	for uuid, h := range gpus {
		out[uuid] = probe(h)
	}
	return out, nil
}

// probe reads one GPU's liveness, recovery action, ECC and row remapping.
func probe(h nvml.Device) gpu.Probe {
	var p gpu.Probe
	state := func(ret nvml.Return) bool {
		switch ret {
		case nvml.ERROR_GPU_IS_LOST:
			p.State = gpu.ProbeLost
			return true
		case nvml.ERROR_RESET_REQUIRED:
			if p.State == gpu.ProbeOK {
				p.State = gpu.ProbeResetRequired
			}
		}
		return false
	}
	if _, ret := h.GetTemperature(nvml.TEMPERATURE_GPU); state(ret) {
		return p
	}
	unc, r1 := h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC)
	cor, r2 := h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC)
	if state(r1) || state(r2) {
		return p
	}
	if r1 == nvml.SUCCESS && r2 == nvml.SUCCESS {
		p.ECCKnown = true
		p.VolatileUncorrectedECC, p.VolatileCorrectedECC = unc, cor
	}
	_, _, pending, failure, ret := h.GetRemappedRows()
	if state(ret) {
		return p
	}
	if ret == nvml.SUCCESS {
		p.RemapPending, p.RemapFailure = pending, failure
	}
	fv := []nvml.FieldValue{{FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION}}
	if ret := h.GetFieldValues(fv); ret == nvml.SUCCESS && nvml.Return(fv[0].NvmlReturn) == nvml.SUCCESS {
		p.Recovery = recoveryAction(binary.LittleEndian.Uint32(fv[0].Value[:4]))
	} else {
		state(ret)
	}
	return p
}

func recoveryAction(v uint32) gpu.RecoveryAction {
	switch nvml.DeviceGpuRecoveryAction(v) {
	case nvml.GPU_RECOVERY_ACTION_NONE:
		return gpu.RecoveryNone
	case nvml.GPU_RECOVERY_ACTION_GPU_RESET, nvml.GPU_RECOVERY_ACTION_BUS_RESET:
		return gpu.RecoveryGPUReset
	case nvml.GPU_RECOVERY_ACTION_NODE_REBOOT, nvml.GPU_RECOVERY_ACTION_SYSTEM_REBOOT:
		return gpu.RecoveryNodeReboot
	case nvml.GPU_RECOVERY_ACTION_DRAIN_P2P:
		return gpu.RecoveryDrainP2P
	case nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET:
		return gpu.RecoveryDrainAndReset
	}
	return gpu.RecoveryOther
}

// noInstance is NVML's GPU/compute instance ID for events not tied to one.
const noInstance = 0xFFFFFFFF

// WaitEvent implements gpu.Backend.
func (b *Backend) WaitEvent(timeout time.Duration) (gpu.Event, bool, error) {
	b.mu.Lock()
	set, closed := b.events, b.closed
	b.mu.Unlock()
	if closed {
		return gpu.Event{}, false, errors.New("backend closed")
	}
	if set == nil {
		time.Sleep(timeout)
		return gpu.Event{}, false, nil
	}
	data, ret := set.Wait(uint32(timeout / time.Millisecond))
	switch ret {
	case nvml.SUCCESS:
	case nvml.ERROR_TIMEOUT:
		return gpu.Event{}, false, nil
	case nvml.ERROR_GPU_IS_LOST:
		// NVML cannot say which GPU; the next probe finds it.
		b.log.Warn("NVML event wait reports a lost GPU; probes will find which")
		return gpu.Event{}, false, nil
	default:
		return gpu.Event{}, false, fmt.Errorf("failed to wait for NVML events: %s", nvml.ErrorString(ret))
	}
	ev := gpu.Event{Time: time.Now()}
	switch {
	case data.EventType&nvml.EventTypeXidCriticalError != 0:
		ev.Kind, ev.Xid = gpu.EventXid, data.EventData
	case data.EventType&nvml.EventTypeDoubleBitEccError != 0:
		ev.Kind = gpu.EventDoubleBitECC
	default:
		return gpu.Event{}, false, nil
	}
	if data.Device == nil {
		return gpu.Event{}, false, nil
	}
	uuid, ret := data.Device.GetUUID()
	if ret != nvml.SUCCESS {
		b.log.Warn("failed to name the GPU of an NVML event", "error", nvml.ErrorString(ret), "xid", data.EventData)
		return gpu.Event{}, false, nil
	}
	ev.UUID = uuid
	if data.GpuInstanceId != noInstance && data.ComputeInstanceId != noInstance {
		b.mu.Lock()
		if mig, ok := b.migIDs[migKey(uuid, data.GpuInstanceId, data.ComputeInstanceId)]; ok {
			ev.UUID = mig
		}
		b.mu.Unlock()
	}
	return ev, true, nil
}

// Sample implements gpu.Backend.
func (b *Backend) Sample(uuid string) (gpu.Sample, error) {
	b.mu.Lock()
	h, ok := b.handles[uuid]
	var parent nvml.Device
	if ok {
		for _, d := range b.inv.Devices {
			if d.UUID == uuid && d.ParentUUID != "" {
				parent = b.gpus[d.ParentUUID]
			}
		}
	}
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return gpu.Sample{}, errors.New("backend closed")
	}
	if !ok {
		return gpu.Sample{}, fmt.Errorf("%w: %s", gpu.ErrUnknownDevice, uuid)
	}
	s := gpu.Sample{Time: time.Now()}
	if parent != nil {
		sampleMIG(&s, h, parent)
		return s, nil
	}
	sampleGPU(&s, h)
	return s, nil
}

func copyInventory(inv gpu.Inventory) gpu.Inventory {
	out := inv
	out.Devices = make([]gpu.Device, len(inv.Devices))
	for i, d := range inv.Devices {
		out.Devices[i] = d
		if d.MIG != nil {
			m := *d.MIG
			out.Devices[i].MIG = &m
		}
	}
	return out
}
