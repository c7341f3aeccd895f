package mockgpu

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gputide/gputide/internal/regfile"
)

// The fault control file (option mock_fault_file) describes the mock GPUs'
// current faults, one per line; '#' starts a comment:
//
//	<target> xid <n>        the target raises Xid n (1 to 999)
//	<target> lost           the GPU falls off the bus (Xid 79, then NVML
//	                        answers ERROR_GPU_IS_LOST for it)
//	<target> ecc-dbe [n]    n uncorrected (double-bit) ECC errors (default 1)
//	<target> recover        the target is reset: faults on earlier lines are
//	                        cleared (for a GPU, also those of its MIG instances)
//
// <target> is a GPU index (0-based, as nvidia-smi numbers them), a GPU UUID
// or a MIG instance UUID. The file is the whole truth: a fault that is no
// longer listed is gone, and a GPU all of whose faults are gone has been
// reset. A missing file means no faults.
//
// How the mock shows a fault through NVML:
//   - each newly listed Xid is delivered once as an Xid event (with the MIG
//     instance's GPU/compute instance IDs for MIG targets);
//   - a critical Xid (by the plugin's Xid policy) sets the GPU's recovery
//     action (NVML field FI_DEV_GET_GPU_RECOVERY_ACTION) to "GPU reset";
//   - lost / Xid 79 make the GPU's dynamic queries (temperature, power,
//     utilisation, ECC, clocks, field values) return ERROR_GPU_IS_LOST; its
//     identity (UUID, name, PCI, memory size) still answers so that it stays
//     listed;
//   - ecc-dbe raises the volatile and aggregate uncorrected ECC counters,
//     marks row remapping pending, and delivers a double-bit ECC event and
//     Xid 48;
//   - a reset clears the lost state, the recovery action, the volatile ECC
//     counters and the pending remap, as a real GPU reset does.
//
// The plugin reads the file at the start of every health check, so a
// relaunched plugin derives the same health from it again.
//
// The file must be a regular file of at most MaxFaultFileBytes; a line
// longer than MaxFaultLineBytes is skipped and reported like any bad line.
// A path that is not a regular file (a folder, a device, a FIFO) or a file
// over the cap is an error naming it, read without blocking and without
// reading more than the cap, and leaves the faults as they were.

// MaxFaultFileBytes is the largest fault file read (1 MiB): a line per
// fault is under 100 bytes, so this is thousands of faults per GPU.
const MaxFaultFileBytes = 1 << 20

// MaxFaultLineBytes is the longest line of the fault file (64 KiB).
const MaxFaultLineBytes = 64 << 10

// faultSpec is the faults of one target.
type faultSpec struct {
	lost bool
	xids []uint64
	dbe  uint64
}

func (f faultSpec) empty() bool { return !f.lost && len(f.xids) == 0 && f.dbe == 0 }

// xidLost is the Xid of a GPU that has fallen off the bus.
const xidLost = 79

// xidDBE is the Xid the driver logs for a double-bit ECC error.
const xidDBE = 48

// noInstance is NVML's instance ID for events not tied to a MIG instance.
const noInstance = 0xFFFFFFFF

// resolve maps a fault-file target to a key ("gpu/<index>" or
// "mig/<uuid>") and the GPU index.
func (l *Lib) resolve(target string) (key string, gpuIndex int, err error) {
	if n, err := strconv.Atoi(target); err == nil {
		if n < 0 || n >= len(l.devices) {
			return "", 0, fmt.Errorf("GPU index %d out of range (0 to %d)", n, len(l.devices)-1)
		}
		return fmt.Sprintf("gpu/%d", n), n, nil
	}
	for i, d := range l.devices {
		if strings.EqualFold(d.UUID, target) {
			return fmt.Sprintf("gpu/%d", i), i, nil
		}
		for _, m := range d.migs {
			if strings.EqualFold(m.uuid, target) {
				return "mig/" + m.uuid, i, nil
			}
		}
	}
	return "", 0, fmt.Errorf("unknown GPU %q (want an index or a GPU/MIG UUID)", target)
}

// parseFaults reads the fault file's text. Lines with errors, including
// lines longer than MaxFaultLineBytes, are skipped and reported with their
// number; the lines after them are read.
func (l *Lib) parseFaults(text []byte) (map[string]faultSpec, []error) {
	out := map[string]faultSpec{}
	var errs []error
	for n := 1; len(text) > 0; n++ {
		var raw []byte
		raw, text, _ = bytes.Cut(text, []byte("\n"))
		if len(raw) > MaxFaultLineBytes {
			errs = append(errs, fmt.Errorf("line %d %q...: longer than %d KiB (%d bytes), the most a line may be",
				n, clip(raw), MaxFaultLineBytes>>10, len(raw)))
			continue
		}
		line, _, _ := strings.Cut(strings.TrimSuffix(string(raw), "\r"), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		fail := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("line %d %q: %s", n, strings.TrimSpace(line), fmt.Sprintf(format, a...)))
		}
		if len(f) < 2 {
			fail("want <gpu> <xid N|lost|ecc-dbe [N]|recover>")
			continue
		}
		key, gpuIndex, err := l.resolve(f[0])
		if err != nil {
			fail("%v", err)
			continue
		}
		spec := out[key]
		switch action := strings.ToLower(f[1]); action {
		case "xid":
			if len(f) != 3 {
				fail("want xid <number>")
				continue
			}
			x, err := strconv.ParseUint(f[2], 10, 64)
			if err != nil || x < 1 || x > 999 {
				fail("bad Xid %q (want 1 to 999)", f[2])
				continue
			}
			if !slices.Contains(spec.xids, x) {
				spec.xids = append(spec.xids, x)
			}
		case "lost":
			if strings.HasPrefix(key, "mig/") {
				fail("a MIG instance cannot be lost on its own; name its GPU")
				continue
			}
			spec.lost = true
		case "ecc-dbe":
			count := uint64(1)
			if len(f) == 3 {
				c, err := strconv.ParseUint(f[2], 10, 32)
				if err != nil || c < 1 {
					fail("bad error count %q (want a positive number)", f[2])
					continue
				}
				count = c
			}
			spec.dbe += count
		case "recover":
			delete(out, key)
			if strings.HasPrefix(key, "gpu/") {
				for _, m := range l.devices[gpuIndex].migs {
					delete(out, "mig/"+m.uuid)
				}
			}
			continue
		default:
			fail("unknown action %q (want xid, lost, ecc-dbe or recover)", action)
			continue
		}
		out[key] = spec
	}
	return out, errs
}

// clip is the start of a long line, for messages.
func clip(b []byte) string {
	const n = 40
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// ApplyFaultFile reads Options.FaultFile and applies it when its content
// changed since the last read. It is the nvmlgpu BeforeHealthCheck hook.
// A missing file means no faults; a path that is not a regular file or a
// file over MaxFaultFileBytes is an error naming it, and the faults stay
// as they were.
func (l *Lib) ApplyFaultFile() error {
	if l.opts.FaultFile == "" {
		return nil
	}
	text, err := regfile.Read(l.opts.FaultFile, MaxFaultFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		text, err = []byte{}, nil
	}
	if err != nil {
		return fmt.Errorf("failed to read mock fault file: %w", err)
	}
	l.mu.Lock()
	same := l.lastFaults != nil && bytes.Equal(text, l.lastFaults)
	l.lastFaults = text
	l.mu.Unlock()
	if same {
		return nil
	}
	return l.ApplyFaults(text)
}

// ApplyFaults applies fault-file text (see the file format above): new
// faults raise their events, removed ones reset their GPU. Lines with
// errors are skipped; the returned error lists them.
func (l *Lib) ApplyFaults(text []byte) error {
	desired, errs := l.parseFaults(text)
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, d := range l.devices {
		l.applyGPU(i, d, desired)
	}
	l.applied = desired
	for _, e := range errs {
		l.log.Warn("ignoring line of the mock fault file", "file", l.opts.FaultFile, "error", e)
	}
	return errors.Join(errs...)
}

// applyGPU moves GPU i from its applied faults to the desired ones.
func (l *Lib) applyGPU(i int, d *device, desired map[string]faultSpec) {
	gkey := fmt.Sprintf("gpu/%d", i)
	want, had := desired[gkey], l.applied[gkey]
	anyWant, anyHad := !want.empty(), !had.empty()
	critical := false
	isCritical := func(x uint64) bool { return l.opts.Critical != nil && l.opts.Critical(x) }

	for _, x := range want.xids {
		if !slices.Contains(had.xids, x) {
			d.emit(nvml.EventTypeXidCriticalError, x, noInstance, noInstance)
		}
		critical = critical || isCritical(x)
	}
	if want.lost && !had.lost && !slices.Contains(want.xids, xidLost) {
		d.emit(nvml.EventTypeXidCriticalError, xidLost, noInstance, noInstance)
	}
	if want.dbe > had.dbe {
		l.addDBE(d, want.dbe-had.dbe, noInstance, noInstance, !slices.Contains(want.xids, xidDBE))
	}
	for _, m := range d.migs {
		mkey := "mig/" + m.uuid
		mw, mh := desired[mkey], l.applied[mkey]
		anyWant = anyWant || !mw.empty()
		anyHad = anyHad || !mh.empty()
		for _, x := range mw.xids {
			if !slices.Contains(mh.xids, x) {
				d.emit(nvml.EventTypeXidCriticalError, x, uint32(m.gi), uint32(m.ci))
			}
			critical = critical || isCritical(x)
		}
		if mw.dbe > mh.dbe {
			l.addDBE(d, mw.dbe-mh.dbe, uint32(m.gi), uint32(m.ci), !slices.Contains(mw.xids, xidDBE))
		}
	}

	d.Lock()
	defer d.Unlock()
	if anyHad && !anyWant { // reset
		d.st.lost = false
		d.st.recovery = nvml.GPU_RECOVERY_ACTION_NONE
		d.st.eccUncorrectedVolatile, d.st.eccCorrectedVolatile = 0, 0
		d.st.remapPending = false
		return
	}
	d.st.lost = want.lost || slices.Contains(want.xids, xidLost)
	d.st.recovery = nvml.GPU_RECOVERY_ACTION_NONE
	if critical {
		d.st.recovery = nvml.GPU_RECOVERY_ACTION_GPU_RESET
	}
	d.st.remapPending = d.st.eccUncorrectedVolatile > 0
}

// addDBE counts n double-bit errors on d and delivers the events.
func (l *Lib) addDBE(d *device, n uint64, gi, ci uint32, withXid bool) {
	d.Lock()
	d.st.eccUncorrectedVolatile += n
	d.st.eccUncorrectedAggregate += n
	d.Unlock()
	d.emit(nvml.EventTypeDoubleBitEccError, 0, gi, ci)
	if withXid {
		d.emit(nvml.EventTypeXidCriticalError, xidDBE, gi, ci)
	}
}
