// Package mockgpu is the device plugin's mock GPU backend: go-nvml's own
// mock DGX servers (pkg/nvml/mock/dgxa100, dgxh100, dgxh200, dgxb200) with
// every NVML call the plugin makes filled in with plausible values, MIG
// instances on request, an NVML event set, and fault injection from a
// control file. The plugin reads it through the same nvmlgpu code as real
// NVML, so a Nomad agent and the tests can run the plugin without a GPU.
//
// go-nvml's mock servers answer names, UUIDs, PCI device IDs, memory size,
// compute capability, driver versions and MIG profile tables. Power, clocks,
// BAR1, PCIe link, temperature, utilisation, ECC, row remapping, recovery
// action, event sets, NVLink, NUMA and MIG device handles panic there until
// set; this package sets them from the per-model table in profile.go.
//
// The mock's GPU UUIDs are name-based (SHA-1, version 5) UUIDs of the seed,
// the profile and the GPU index, so they are stable across plugin restarts
// (Nomad requires that) and differ between hosts with different seeds.
//
// go-nvml's generated mocks record every call in a slice that only grows;
// the wrappers here call the function fields directly so that a plugin that
// runs for weeks does not grow.
package mockgpu

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/gputide/gputide/device-plugin/gpu"
	"github.com/gputide/gputide/device-plugin/nvmlgpu"
)

// Options configure the mock.
type Options struct {
	// Profile is "<system>" or "<system>:<gpus>", see ParseProfile.
	Profile string
	// GPUName, when not empty, is the NVML device name every GPU of the
	// profile reports instead of go-nvml's (e.g. "NVIDIA A100-SXM4-40GB"
	// for dgxa100, whose go-nvml name is "Mock NVIDIA A100-SXM4-40GB"); it
	// is the Nomad device group name, and its MIG groups are named
	// "<GPUName> MIG <profile>". See CheckGPUName.
	GPUName string
	// UUIDSeed makes the GPU UUIDs; empty means the host name.
	UUIDSeed string
	// MIG puts GPUs (by index) in MIG mode with one instance per profile
	// name, e.g. {0: {"3g.20gb", "3g.20gb"}}.
	MIG map[int][]string
	// FaultFile is the fault control file read before every health check
	// (see ParseFaults); empty disables fault injection.
	FaultFile string
	// Critical tells which Xids leave the GPU asking for a reset; nil means
	// none do.
	Critical func(xid uint64) bool
	// Logger receives fault-file warnings; nil discards them.
	Logger hclog.Logger
}

// Lib is a mock NVML library: an nvml.Interface over a go-nvml mock server.
type Lib struct {
	*server.Server
	profile profile
	devices []*device
	opts    Options
	log     hclog.Logger

	mu      sync.Mutex
	sets    []*eventSet
	applied map[string]faultSpec
	// lastFaults is the fault file's last content; nil before the first read.
	lastFaults []byte
}

var _ nvml.Interface = (*Lib)(nil)

// Open builds the mock library and opens an nvmlgpu backend named "mock" on
// it, reading the fault file before every health check.
func Open(opts Options) (*nvmlgpu.Backend, *Lib, error) {
	lib, err := NewLib(opts)
	if err != nil {
		return nil, nil, err
	}
	b, err := nvmlgpu.Open(lib, nvmlgpu.Options{
		Name:              "mock",
		Logger:            opts.Logger,
		BeforeHealthCheck: lib.ApplyFaultFile,
	})
	if err != nil {
		return nil, nil, err
	}
	return b, lib, nil
}

// NewLib builds the mock library for opts.Profile.
func NewLib(opts Options) (*Lib, error) {
	name, count, err := ParseProfile(opts.Profile)
	if err != nil {
		return nil, err
	}
	p := profiles[name]
	seed := opts.UUIDSeed
	if seed == "" {
		seed, _ = os.Hostname()
	}
	if opts.GPUName != "" {
		if err := CheckGPUName(opts.GPUName); err != nil {
			return nil, err
		}
	}
	cfgs := make([]gpus.Config, count)
	for i := range cfgs {
		cfgs[i] = p.gpu
		if opts.GPUName != "" {
			cfgs[i].Name = opts.GPUName
		}
	}
	srv := p.newServer(cfgs...)
	if srv == nil {
		return nil, fmt.Errorf("failed to build mock server for profile %q", name)
	}
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	l := &Lib{Server: srv, profile: p, opts: opts, log: log, applied: map[string]faultSpec{}}
	for i, nd := range srv.Devices {
		sd := nd.(*server.Device)
		sd.UUID = "GPU-" + uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "gputide-mock/%s/%s/%d", seed, name, i)).String()
		sd.PciBusID = fmt.Sprintf("%08x:%02x:00.0", 0, p.hw.busID(i))
		d := &device{Device: sd, lib: l, hw: p.hw, index: i, count: count}
		d.fill()
		l.devices = append(l.devices, d)
	}
	indexes := make([]int, 0, len(opts.MIG))
	for i := range opts.MIG {
		indexes = append(indexes, i)
	}
	sort.Ints(indexes)
	for _, i := range indexes {
		if i < 0 || i >= count {
			return nil, fmt.Errorf("MIG GPU index %d out of range (profile %q has GPUs 0 to %d)", i, opts.Profile, count-1)
		}
		if err := l.devices[i].enableMIG(opts.MIG[i], seed); err != nil {
			return nil, fmt.Errorf("GPU %d: %w", i, err)
		}
	}
	l.fill()
	return l, nil
}

// fill sets the library-level function fields the server leaves unset or
// that must hand out the wrappers.
func (l *Lib) fill() {
	l.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= len(l.devices) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return l.devices[i], nvml.SUCCESS
	}
	l.DeviceGetHandleByUUIDFunc = func(id string) (nvml.Device, nvml.Return) {
		for _, d := range l.devices {
			if d.UUID == id {
				return d, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	l.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		s := newEventSet()
		l.mu.Lock()
		l.sets = append(l.sets, s)
		l.mu.Unlock()
		return s, nvml.SUCCESS
	}
	l.ErrorStringFunc = func(r nvml.Return) string { return r.Error() }
}

// Init implements nvml.Interface without recording the call.
func (l *Lib) Init() nvml.Return { return l.InitFunc() }

// Shutdown implements nvml.Interface without recording the call.
func (l *Lib) Shutdown() nvml.Return { return l.ShutdownFunc() }

// DeviceGetCount implements nvml.Interface without recording the call.
func (l *Lib) DeviceGetCount() (int, nvml.Return) { return len(l.devices), nvml.SUCCESS }

// DeviceGetHandleByIndex implements nvml.Interface without recording the call.
func (l *Lib) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	return l.DeviceGetHandleByIndexFunc(i)
}

// DeviceGetHandleByUUID implements nvml.Interface without recording the call.
func (l *Lib) DeviceGetHandleByUUID(id string) (nvml.Device, nvml.Return) {
	return l.DeviceGetHandleByUUIDFunc(id)
}

// SystemGetDriverVersion implements nvml.Interface without recording the call.
func (l *Lib) SystemGetDriverVersion() (string, nvml.Return) { return l.SystemGetDriverVersionFunc() }

// SystemGetCudaDriverVersion implements nvml.Interface without recording the call.
func (l *Lib) SystemGetCudaDriverVersion() (int, nvml.Return) {
	return l.SystemGetCudaDriverVersionFunc()
}

// EventSetCreate implements nvml.Interface without recording the call.
func (l *Lib) EventSetCreate() (nvml.EventSet, nvml.Return) { return l.EventSetCreateFunc() }

// ErrorString implements nvml.Interface.
func (l *Lib) ErrorString(r nvml.Return) string { return r.Error() }

// UUIDs lists the GPU UUIDs by index.
func (l *Lib) UUIDs() []string {
	out := make([]string, len(l.devices))
	for i, d := range l.devices {
		out[i] = d.UUID
	}
	return out
}

// MIGUUIDs lists the MIG instance UUIDs of GPU i in instance order.
func (l *Lib) MIGUUIDs(i int) []string {
	if i < 0 || i >= len(l.devices) {
		return nil
	}
	var out []string
	for _, m := range l.devices[i].migs {
		out = append(out, m.uuid)
	}
	return out
}

// MaxGPUNameLen is the longest GPUName accepted (NVML's device name buffer
// is 96 bytes, NVML_DEVICE_NAME_V2_BUFFER_SIZE).
const MaxGPUNameLen = 95

// CheckGPUName checks a GPUName: 1 to MaxGPUNameLen bytes of printable UTF-8,
// no leading or trailing space, no "/" (Nomad splits a job's device name
// "nvidia/gpu/<model>" on it) and no " MIG " (the suffix that names a MIG
// group, DESIGN L13).
func CheckGPUName(name string) error {
	switch {
	case name == "" || strings.TrimSpace(name) != name:
		return errors.New("want a device name such as \"NVIDIA A100-SXM4-40GB\", without leading or trailing spaces")
	case len(name) > MaxGPUNameLen:
		return fmt.Errorf("%d bytes long; NVML names are at most %d", len(name), MaxGPUNameLen)
	case !utf8.ValidString(name):
		return errors.New("is not UTF-8 (Nomad's device names are protobuf strings)")
	case strings.Contains(name, "/"):
		return errors.New(`must not contain "/": Nomad splits a device name "nvidia/gpu/<model>" on it`)
	case strings.Contains(name, gpu.MIGNameSep):
		return fmt.Errorf("must not contain %q, which names MIG groups", gpu.MIGNameSep)
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("holds the unprintable character %q", r)
		}
	}
	return nil
}

func migName(giSlices, ciSlices uint32, sliceMiB, totalMiB uint64) string {
	return gpu.MIGProfileName(giSlices, ciSlices, sliceMiB, totalMiB)
}
