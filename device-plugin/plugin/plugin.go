// Package plugin is gputide's Nomad device plugin: it serves Nomad's
// BasePlugin and DevicePlugin gRPC services (package proto) over go-plugin,
// and turns a GPU backend (packages nvmlgpu and mockgpu) and the health
// tracker (package health) into fingerprints, reservations and statistics.
//
// Life of a plugin process, as Nomad drives it (see
// shared/reference/nomad-device-plugin-protocol.md): PluginInfo and
// ConfigSchema on a first launch, SetConfig (twice) on a second, then on the
// long-lived launch SetConfig, Fingerprint (a stream that must never close),
// Stats (a stream) and Reserve at every task start. The GPU backend is opened
// lazily by the first Fingerprint, Stats or Reserve, so the short-lived
// launches never touch NVML.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gputide/gputide/device-plugin/gpu"
	"github.com/gputide/gputide/device-plugin/mockgpu"
	"github.com/gputide/gputide/device-plugin/nvmlgpu"
	"github.com/gputide/gputide/device-plugin/proto/basepb"
	"github.com/gputide/gputide/device-plugin/proto/hclspecpb"
	"github.com/gputide/gputide/quota-broker/version"
)

// Identity of the plugin.
const (
	// PluginName is the logical plugin ID Nomad shows (PluginInfo.name).
	PluginName = "gputide-gpu"
	// DeviceAPIVersion is the only device plugin API Nomad speaks.
	DeviceAPIVersion = "v0.1.0"
	// Vendor and DeviceType name the device groups: "nvidia/gpu/<model>".
	Vendor     = "nvidia"
	DeviceType = "gpu"
)

// Version is the plugin's version (PluginInfo.plugin_version): gputide's
// version number, which Nomad parses with go-version.
const Version = version.Number

// ErrDisabled is returned by Fingerprint, Stats and Reserve (with IDs) when
// the config sets enabled = false; the text matches Nomad's own.
var ErrDisabled = errors.New("device is not enabled")

// BackendFactory opens the GPU backend for a config.
type BackendFactory func(cfg Config, log hclog.Logger) (gpu.Backend, error)

// OpenBackend is the default BackendFactory: real NVML or the mock. A nil
// log discards the backends' log lines.
func OpenBackend(cfg Config, log hclog.Logger) (gpu.Backend, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	switch cfg.Backend {
	case BackendMock:
		opts := cfg.mockOptions(cfg.XidPolicy().Critical)
		opts.Logger = log.Named("mock")
		b, _, err := mockgpu.Open(opts)
		return b, err
	default:
		return nvmlgpu.OpenSystem(cfg.NVMLLibraryPath, nvmlgpu.Options{Name: BackendNVML, Logger: log.Named("nvml")})
	}
}

// Plugin is the device plugin. Its methods are safe for concurrent use.
type Plugin struct {
	log        hclog.Logger
	newBackend BackendFactory
	hub        *hub

	mu     sync.Mutex
	cfg    Config
	mon    *monitor
	closed bool
}

// New returns a plugin with the default config that opens backends with
// newBackend (nil means OpenBackend).
func New(log hclog.Logger, newBackend BackendFactory) *Plugin {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if newBackend == nil {
		newBackend = OpenBackend
	}
	return &Plugin{log: log, newBackend: newBackend, hub: newHub(), cfg: DefaultConfig()}
}

// PluginInfo describes the plugin to Nomad.
func (p *Plugin) PluginInfo() *basepb.PluginInfoResponse {
	return &basepb.PluginInfoResponse{
		Type:              basepb.PluginType_DEVICE,
		PluginApiVersions: []string{DeviceAPIVersion},
		PluginVersion:     Version,
		Name:              PluginName,
	}
}

// ConfigSchema returns the config block's spec (see ConfigSpec).
func (p *Plugin) ConfigSchema() *hclspecpb.Spec { return ConfigSpec() }

// SetConfig decodes and applies the agent's config block. A config that
// differs from the running one restarts the GPU monitor; streams carry on
// with the new one. Errors name the option and the value.
func (p *Plugin) SetConfig(msgpackConfig []byte) error {
	cfg, err := DecodeConfig(msgpackConfig)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if reflect.DeepEqual(cfg, p.cfg) {
		return nil
	}
	p.log.Debug("config set", "backend", cfg.Backend, "enabled", cfg.Enabled,
		"fingerprint_period", cfg.FingerprintPeriod.String(), "health_check_period", cfg.HealthCheckPeriod.String())
	p.cfg = cfg
	if p.mon != nil {
		p.mon.stop()
		p.mon = nil
		if cfg.Enabled {
			p.mon = startMonitor(cfg, p.newBackend, p.hub, p.log)
		}
	}
	return nil
}

// config returns the current config.
func (p *Plugin) config() Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
}

// monitor returns the running monitor, starting it if needed; nil when the
// plugin is disabled or shut down.
func (p *Plugin) monitor() *monitor {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !p.cfg.Enabled {
		return nil
	}
	if p.mon == nil {
		p.mon = startMonitor(p.cfg, p.newBackend, p.hub, p.log)
	}
	return p.mon
}

// Shutdown stops the monitor and closes the backend.
func (p *Plugin) Shutdown() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.mon != nil {
		p.mon.stop()
		p.mon = nil
	}
}

// waitSnapshot starts the monitor and waits (up to ctx) for its first
// published inventory.
func (p *Plugin) waitSnapshot(ctx context.Context) (*snapshot, error) {
	for {
		if p.monitor() == nil {
			return nil, ErrDisabled
		}
		snap, ch := p.hub.current()
		if snap != nil {
			return snap, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no GPU inventory yet: %w", ctx.Err())
		case <-ch:
		}
	}
}

// snapshotTimeout bounds how long Reserve waits for a first inventory.
const snapshotTimeout = 30 * time.Second
