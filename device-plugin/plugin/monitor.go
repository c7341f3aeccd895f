package plugin

import (
	"reflect"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gputide/gputide/device-plugin/gpu"
	"github.com/gputide/gputide/device-plugin/health"
)

// snapshot is what the monitor publishes: an inventory with each device's
// health, plus the backend to sample stats from. It is immutable.
type snapshot struct {
	inv     gpu.Inventory
	status  map[string]health.Status
	backend gpu.Backend
	ignored map[string]bool
	// err is set while the backend cannot be opened.
	err error
}

// hub hands the latest snapshot to the streams and wakes them on change.
type hub struct {
	mu      sync.Mutex
	snap    *snapshot
	changed chan struct{}
}

func newHub() *hub { return &hub{changed: make(chan struct{})} }

// current returns the latest snapshot (nil before the first) and a channel
// closed at the next publish.
func (h *hub) current() (*snapshot, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.snap, h.changed
}

func (h *hub) publish(s *snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.snap = s
	close(h.changed)
	h.changed = make(chan struct{})
}

// eventWait is the longest one NVML event wait blocks; it bounds how long
// stopping the monitor takes.
const eventWait = time.Second

// monitor owns one GPU backend: it re-reads the inventory every fingerprint
// period, probes health every health check period, consumes NVML events,
// and publishes a snapshot whenever devices, attributes or health change.
type monitor struct {
	cfg        Config
	log        hclog.Logger
	hub        *hub
	newBackend BackendFactory
	ignored    map[string]bool

	mu      sync.Mutex // guards backend, inv, tracker
	backend gpu.Backend
	inv     gpu.Inventory
	tracker *health.Tracker

	done chan struct{}
	wg   sync.WaitGroup
}

func startMonitor(cfg Config, newBackend BackendFactory, h *hub, log hclog.Logger) *monitor {
	m := &monitor{
		cfg:        cfg,
		log:        log.Named("monitor"),
		hub:        h,
		newBackend: newBackend,
		ignored:    map[string]bool{},
		tracker:    health.NewTracker(cfg.XidPolicy()),
		done:       make(chan struct{}),
	}
	for _, id := range cfg.IgnoredGPUIDs {
		m.ignored[id] = true
	}
	m.wg.Add(1)
	go m.run()
	return m
}

// stop ends the monitor's goroutines and closes its backend.
func (m *monitor) stop() {
	close(m.done)
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.backend != nil {
		if err := m.backend.Close(); err != nil {
			m.log.Warn("failed to close GPU backend", "error", err)
		}
		m.backend = nil
	}
}

func (m *monitor) stopped() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

func (m *monitor) run() {
	defer m.wg.Done()
	if !m.open() {
		return
	}
	// First round before the first publish, so that the first fingerprint
	// of a (re)started plugin already carries health.
	m.refreshInventory()
	m.checkHealth()
	m.drainEvents()
	m.publish()

	m.wg.Add(1)
	go m.eventLoop()

	fp := time.NewTicker(m.cfg.FingerprintPeriod)
	defer fp.Stop()
	hc := time.NewTicker(m.cfg.HealthCheckPeriod)
	defer hc.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-fp.C:
			if m.refreshInventory() {
				m.publish()
			}
		case <-hc.C:
			// Events the probe round raised (the mock's fault file) are
			// applied with it, so that one fingerprint carries both.
			changed := m.checkHealth()
			if m.drainEvents() || changed {
				m.publish()
			}
		}
	}
}

// open opens the backend, retrying every fingerprint period; meanwhile it
// publishes an empty snapshot so that Nomad sees no devices rather than a
// closed stream. It returns false when the monitor was stopped.
func (m *monitor) open() bool {
	lastErr := ""
	for {
		b, err := m.newBackend(m.cfg, m.log)
		if err == nil {
			m.mu.Lock()
			m.backend = b
			m.mu.Unlock()
			m.log.Info("GPU backend opened", "backend", b.Name())
			return true
		}
		if err.Error() != lastErr { // log each distinct failure once at error level
			m.log.Error("failed to open GPU backend; reporting no devices and retrying",
				"backend", m.cfg.Backend, "error", err, "retry_every", m.cfg.FingerprintPeriod.String())
			lastErr = err.Error()
		} else {
			m.log.Debug("GPU backend still unavailable", "backend", m.cfg.Backend, "error", err)
		}
		m.hub.publish(&snapshot{err: err, ignored: m.ignored})
		select {
		case <-m.done:
			return false
		case <-time.After(m.cfg.FingerprintPeriod):
		}
	}
}

// refreshInventory re-reads the inventory; it reports a change.
func (m *monitor) refreshInventory() bool {
	m.mu.Lock()
	b := m.backend
	m.mu.Unlock()
	inv, err := b.Inventory()
	if err != nil {
		m.log.Warn("failed to read GPU inventory; keeping the last one", "error", err)
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if reflect.DeepEqual(inv, m.inv) {
		return false
	}
	m.inv = inv
	m.tracker.SetDevices(inv.Devices)
	m.log.Debug("GPU inventory changed", "devices", len(inv.Devices), "driver", inv.DriverVersion)
	return true
}

// checkHealth probes every GPU; it reports a change of health.
func (m *monitor) checkHealth() bool {
	m.mu.Lock()
	b := m.backend
	m.mu.Unlock()
	at := time.Now()
	probes, err := b.CheckHealth()
	if err != nil {
		m.log.Warn("failed to probe GPU health", "error", err)
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	resets, changed := m.tracker.ObserveProbes(probes, at)
	for _, id := range resets {
		m.log.Info("GPU reset observed; clearing its Xid and ECC marks", "uuid", id)
	}
	return changed
}

// observe applies one event; it reports a change of health.
func (m *monitor) observe(ev gpu.Event) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	critical, changed := m.tracker.ObserveEvent(ev)
	switch {
	case ev.Kind == gpu.EventXid && critical:
		m.log.Warn("critical Xid: device unhealthy", "uuid", ev.UUID, "xid", ev.Xid, "error", health.DescribeXid(ev.Xid))
	case ev.Kind == gpu.EventXid:
		m.log.Info("non-critical Xid", "uuid", ev.UUID, "xid", ev.Xid, "error", health.DescribeXid(ev.Xid))
	default:
		m.log.Warn("double-bit ECC error: device unhealthy", "uuid", ev.UUID)
	}
	return changed
}

// drainEvents applies the events already queued, without waiting; it
// reports a change of health.
func (m *monitor) drainEvents() bool {
	changed := false
	for i := 0; i < 1024; i++ {
		ev, ok, err := m.backend.WaitEvent(0)
		if err != nil || !ok {
			break
		}
		changed = m.observe(ev) || changed
	}
	return changed
}

func (m *monitor) eventLoop() {
	defer m.wg.Done()
	for !m.stopped() {
		ev, ok, err := m.backend.WaitEvent(eventWait)
		if err != nil {
			if m.stopped() {
				return
			}
			m.log.Warn("NVML event wait failed; probes continue", "error", err)
			select {
			case <-m.done:
				return
			case <-time.After(m.cfg.HealthCheckPeriod):
			}
			continue
		}
		if ok && m.observe(ev) {
			m.publish()
		}
	}
}

// publish hands the current state to the streams.
func (m *monitor) publish() {
	m.mu.Lock()
	s := &snapshot{
		inv:     m.inv,
		status:  make(map[string]health.Status, len(m.inv.Devices)),
		backend: m.backend,
		ignored: m.ignored,
	}
	for _, d := range m.inv.Devices {
		s.status[d.UUID] = m.tracker.Status(d.UUID)
	}
	m.mu.Unlock()
	if m.stopped() {
		return
	}
	m.hub.publish(s)
}
