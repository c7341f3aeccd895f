package health

import (
	"fmt"
	"sort"
)

// XidInfo describes one Xid error number.
type XidInfo struct {
	// Xid is the error number the driver logs ("NVRM: Xid (PCI:...): 79, ...").
	Xid uint64
	// Summary is NVIDIA's short name for the error.
	Summary string
}

// criticalXids are the Xids that make a GPU unusable until it is reset (or
// replaced). Sources:
//
//   - NVIDIA's "Xid Errors" catalogue (docs.nvidia.com/deploy/xid-errors),
//     whose recommended action for each of these is a GPU reset, a node
//     reboot, or a check of the hardware;
//   - NVIDIA's GPU memory error management guide (row remapping, contained
//     and uncontained ECC errors: Xids 63, 64, 94, 95);
//   - cross-checked against NVIDIA's Kubernetes device plugin, which treats
//     every Xid except the application errors 13, 31, 43, 45, 68 and 109 as
//     fatal (those six are never in this list).
//
// Xids not in the list are logged and do not change health; operators add
// or remove numbers with the extra_critical_xids and ignored_xids options.
var criticalXids = map[uint64]string{
	48:  "double-bit ECC error",
	62:  "internal micro-controller halt",
	63:  "ECC page retirement or row remapping recorded, reset required",
	64:  "ECC page retirement or row remapping failure",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error",
	95:  "uncontained ECC error",
	119: "GSP RPC timeout",
	120: "GSP error",
	140: "unrecovered ECC error",
	154: "GPU recovery action changed",
}

// knownXids names some non-critical Xids for log lines.
var knownXids = map[uint64]string{
	13:  "graphics engine exception",
	31:  "GPU memory page fault",
	43:  "GPU stopped processing",
	45:  "preemptive cleanup",
	68:  "video processor exception",
	109: "context switch timeout",
}

// DefaultCriticalXids lists the built-in critical Xids in ascending order.
func DefaultCriticalXids() []XidInfo {
	out := make([]XidInfo, 0, len(criticalXids))
	for x, s := range criticalXids {
		out = append(out, XidInfo{Xid: x, Summary: s})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Xid < out[j].Xid })
	return out
}

// XidPolicy decides which Xids are critical: the built-in list plus Extra,
// minus Ignored (Ignored wins).
type XidPolicy struct {
	// Extra are Xids treated as critical in addition to the built-in list.
	Extra []uint64
	// Ignored are Xids never treated as critical.
	Ignored []uint64
}

// Critical reports whether the Xid marks a GPU unhealthy.
func (p XidPolicy) Critical(xid uint64) bool {
	for _, x := range p.Ignored {
		if x == xid {
			return false
		}
	}
	if _, ok := criticalXids[xid]; ok {
		return true
	}
	for _, x := range p.Extra {
		if x == xid {
			return true
		}
	}
	return false
}

// DescribeXid gives "Xid 79 (GPU has fallen off the bus)", or "Xid N" for
// numbers without a known name.
func DescribeXid(xid uint64) string {
	if s, ok := criticalXids[xid]; ok {
		return fmt.Sprintf("Xid %d (%s)", xid, s)
	}
	if s, ok := knownXids[xid]; ok {
		return fmt.Sprintf("Xid %d (%s)", xid, s)
	}
	return fmt.Sprintf("Xid %d", xid)
}
