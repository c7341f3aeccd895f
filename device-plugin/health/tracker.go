// Package health turns NVML health events and probes into a healthy flag and
// a description per device, the way the fingerprint reports them to Nomad.
//
// The rules, in the order a description lists them:
//
//  1. A critical Xid (see XidPolicy and DefaultCriticalXids) or a double-bit
//     ECC event marks the device it names unhealthy: the MIG instance when
//     NVML names a GPU/compute instance, else the GPU and all its MIG
//     instances. The mark is sticky.
//  2. A probe that finds the GPU lost (ERROR_GPU_IS_LOST) or needing a reset
//     (ERROR_RESET_REQUIRED), a driver recovery action other than "none"
//     (reset, reboot, drain), uncorrected ECC errors since the last reset
//     (volatile counter > 0), or row remapping pending or failed marks the
//     GPU and its MIG instances unhealthy for as long as the probe says so.
//  3. Sticky marks are cleared when a GPU reset is observed: the GPU answers
//     normally after a probe found it lost, needing a reset or with a
//     recovery action pending, or its volatile ECC counters went down (NVML
//     resets them on every GPU reset and driver load). A plugin restart also
//     starts without sticky marks, and re-derives rule 2 from the hardware.
//
// Tracker is not safe for concurrent use; the caller serialises access.
package health

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gputide/gputide/device-plugin/gpu"
)

// Status is a device's health as the fingerprint reports it.
type Status struct {
	// Healthy is false when any rule marks the device.
	Healthy bool
	// Description lists the reasons, "; "-separated; empty when healthy.
	Description string
}

type condition struct {
	desc string
	at   time.Time
}

type probeRecord struct {
	probe gpu.Probe
	at    time.Time
}

// Tracker holds the health state of the node's devices.
type Tracker struct {
	policy XidPolicy
	// parent maps every known device UUID to its physical GPU's UUID.
	parent map[string]string
	// sticky holds rule-1 marks per device UUID (GPU or MIG).
	sticky map[string][]condition
	// probes holds the last probe per physical GPU UUID.
	probes map[string]probeRecord
}

// NewTracker returns a Tracker that classifies Xids with policy.
func NewTracker(policy XidPolicy) *Tracker {
	return &Tracker{
		policy: policy,
		parent: map[string]string{},
		sticky: map[string][]condition{},
		probes: map[string]probeRecord{},
	}
}

// SetDevices tells the tracker which devices exist. State of devices that
// are gone (and of GPUs none of whose devices remain) is dropped.
func (t *Tracker) SetDevices(devs []gpu.Device) {
	parent := make(map[string]string, len(devs)*2)
	for _, d := range devs {
		parent[d.UUID] = d.PhysicalUUID()
		parent[d.PhysicalUUID()] = d.PhysicalUUID()
	}
	t.parent = parent
	for id := range t.sticky {
		if _, ok := parent[id]; !ok {
			delete(t.sticky, id)
		}
	}
	for id := range t.probes {
		if _, ok := parent[id]; !ok {
			delete(t.probes, id)
		}
	}
}

// ObserveEvent applies rule 1. It reports whether the event is critical and
// whether a device's status changed. Events for unknown devices are ignored.
func (t *Tracker) ObserveEvent(ev gpu.Event) (critical, changed bool) {
	var desc string
	switch ev.Kind {
	case gpu.EventXid:
		if !t.policy.Critical(ev.Xid) {
			return false, false
		}
		desc = DescribeXid(ev.Xid)
	case gpu.EventDoubleBitECC:
		desc = "double-bit ECC error event"
	default:
		return false, false
	}
	if _, ok := t.parent[ev.UUID]; !ok {
		return true, false
	}
	for _, c := range t.sticky[ev.UUID] {
		if c.desc == desc {
			return true, false
		}
	}
	t.sticky[ev.UUID] = append(t.sticky[ev.UUID], condition{desc: desc, at: ev.Time})
	return true, true
}

// ObserveProbes applies rules 2 and 3 to probes taken at time at (keyed by
// physical GPU UUID). It returns the GPUs on which a reset was observed and
// whether any status may have changed.
func (t *Tracker) ObserveProbes(probes map[string]gpu.Probe, at time.Time) (resets []string, changed bool) {
	for id, p := range probes {
		if _, ok := t.parent[id]; !ok {
			continue
		}
		prev, had := t.probes[id]
		t.probes[id] = probeRecord{probe: p, at: at}
		if !had {
			changed = true
			continue
		}
		if probeConditions(prev.probe) != probeConditions(p) {
			changed = true
		}
		if resetObserved(prev.probe, p) {
			resets = append(resets, id)
			if t.clearSticky(id, at) {
				changed = true
			}
		}
	}
	sort.Strings(resets)
	return resets, changed
}

// resetObserved is rule 3 for one GPU.
func resetObserved(prev, cur gpu.Probe) bool {
	if needsAttention(prev) && !needsAttention(cur) {
		return true
	}
	if prev.ECCKnown && cur.ECCKnown &&
		cur.VolatileCorrectedECC+cur.VolatileUncorrectedECC < prev.VolatileCorrectedECC+prev.VolatileUncorrectedECC {
		return true
	}
	return false
}

func needsAttention(p gpu.Probe) bool {
	return p.State != gpu.ProbeOK || recoveryPending(p.Recovery)
}

func recoveryPending(a gpu.RecoveryAction) bool {
	return a != gpu.RecoveryUnknown && a != gpu.RecoveryNone
}

// clearSticky removes marks raised up to at on GPU id and its MIG instances.
func (t *Tracker) clearSticky(id string, at time.Time) bool {
	cleared := false
	for dev, phys := range t.parent {
		if phys != id {
			continue
		}
		conds := t.sticky[dev]
		kept := conds[:0]
		for _, c := range conds {
			if c.at.After(at) {
				kept = append(kept, c)
			} else {
				cleared = true
			}
		}
		if len(kept) == 0 {
			delete(t.sticky, dev)
		} else {
			t.sticky[dev] = kept
		}
	}
	return cleared
}

// probeConditions is rule 2 as text.
func probeConditions(p gpu.Probe) string {
	var out []string
	switch p.State {
	case gpu.ProbeLost:
		out = append(out, "GPU lost: NVML reports ERROR_GPU_IS_LOST (fallen off the bus)")
	case gpu.ProbeResetRequired:
		out = append(out, "GPU requires a reset: NVML reports ERROR_RESET_REQUIRED")
	}
	if recoveryPending(p.Recovery) {
		out = append(out, "driver requests recovery action: "+p.Recovery.String())
	}
	if p.ECCKnown && p.VolatileUncorrectedECC > 0 {
		noun := "errors"
		if p.VolatileUncorrectedECC == 1 {
			noun = "error"
		}
		out = append(out, fmt.Sprintf("%d uncorrected ECC %s since the last GPU reset", p.VolatileUncorrectedECC, noun))
	}
	if p.RemapFailure {
		out = append(out, "row remapping failed: GPU needs service")
	} else if p.RemapPending {
		out = append(out, "row remapping pending: GPU reset required")
	}
	return strings.Join(out, "; ")
}

// Status gives the device's health. Unknown devices and devices not yet
// probed are healthy unless an event marked them.
func (t *Tracker) Status(uuid string) Status {
	var parts []string
	phys, ok := t.parent[uuid]
	if !ok {
		phys = uuid
	}
	for _, c := range t.sticky[phys] {
		parts = append(parts, stickyText(c))
	}
	if phys != uuid {
		for _, c := range t.sticky[uuid] {
			parts = append(parts, stickyText(c))
		}
	}
	if rec, ok := t.probes[phys]; ok {
		if s := probeConditions(rec.probe); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return Status{Healthy: true}
	}
	return Status{Healthy: false, Description: strings.Join(parts, "; ")}
}

func stickyText(c condition) string {
	return fmt.Sprintf("%s at %s", c.desc, c.at.UTC().Format(time.RFC3339))
}
