package gpu

import (
	"fmt"
	"math"
)

// MIGNameSep joins a GPU's name and a MIG profile into the name of the
// MIG instance's device group, "<GPU name> MIG <profile>" (e.g. "NVIDIA
// A100-SXM4-40GB MIG 1g.5gb"); the quota broker splits group names on it
// (quota.SplitMIGName, DESIGN L13), so a GPU name never contains it.
const MIGNameSep = " MIG "

// MIGProfileName gives the MIG profile name that nvidia-smi and NVIDIA's
// Kubernetes device plugin use, e.g. "1g.5gb", "3g.20gb" or, when the compute
// instance uses fewer slices than its GPU instance, "1c.3g.20gb".
//
// giSlices and ciSlices are the GPU and compute instance slice counts,
// sliceMiB the instance's memory in MiB and gpuTotalMiB the whole GPU's
// memory in MiB. The memory is rounded the way go-nvlib's mig profile code
// does it: the slice's share of the GPU is rounded up to eighths and scaled
// by the GPU's size in whole GiB (rounded up), so 4864 MiB of a 40 GiB A100
// is "5gb" and 40192 MiB is "40gb".
func MIGProfileName(giSlices, ciSlices uint32, sliceMiB, gpuTotalMiB uint64) string {
	gb := migMemoryGB(sliceMiB, gpuTotalMiB)
	name := fmt.Sprintf("%dg.%dgb", giSlices, gb)
	if ciSlices != 0 && ciSlices != giSlices {
		name = fmt.Sprintf("%dc.%s", ciSlices, name)
	}
	return name
}

func migMemoryGB(sliceMiB, gpuTotalMiB uint64) uint64 {
	if gpuTotalMiB == 0 {
		return (sliceMiB + 1023) / 1024
	}
	const eighths = 8
	frac := float64(sliceMiB) / float64(gpuTotalMiB)
	frac = math.Ceil(frac*eighths) / eighths
	totalGB := float64((gpuTotalMiB + 1023) / 1024)
	return uint64(math.Round(frac * totalGB))
}
