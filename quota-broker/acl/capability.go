package acl

import (
	"regexp"
	"slices"
)

// Capability is one fine-grained namespace capability, e.g. "read-job".
// Unknown names (from a newer Nomad) are kept as they are and simply never
// asked for.
type Capability string

// Namespace capabilities the broker asks about (DESIGN §9 rights table),
// plus those the dispositions expand to.
const (
	CapDeny                 Capability = "deny"
	CapListJobs             Capability = "list-jobs"
	CapParseJob             Capability = "parse-job"
	CapReadJob              Capability = "read-job"
	CapSubmitJob            Capability = "submit-job"
	CapDispatchJob          Capability = "dispatch-job"
	CapReadLogs             Capability = "read-logs"
	CapReadFS               Capability = "read-fs"
	CapAllocExec            Capability = "alloc-exec"
	CapAllocLifecycle       Capability = "alloc-lifecycle"
	CapCSIListVolume        Capability = "csi-list-volume"
	CapCSIReadVolume        Capability = "csi-read-volume"
	CapCSIMountVolume       Capability = "csi-mount-volume"
	CapCSIWriteVolume       Capability = "csi-write-volume"
	CapListScalingPolicies  Capability = "list-scaling-policies"
	CapReadScalingPolicy    Capability = "read-scaling-policy"
	CapReadJobScaling       Capability = "read-job-scaling"
	CapScaleJob             Capability = "scale-job"
	CapSubmitRecommendation Capability = "submit-recommendation"
	CapHostVolumeRead       Capability = "host-volume-read"
	CapHostVolumeCreate     Capability = "host-volume-create"
)

// Disposition is the coarse "policy" value of a namespace rule.
type Disposition string

// The namespace dispositions Nomad documents; "" means the rule gives
// capabilities only.
const (
	DispositionNone  Disposition = ""
	DispositionRead  Disposition = "read"
	DispositionWrite Disposition = "write"
	DispositionScale Disposition = "scale"
	DispositionDeny  Disposition = "deny"
)

// readCapabilities is what policy = "read" grants: the list the Nomad
// documentation gives for read, as Nomad v1.11.3's policy API expands it
// (RulesJSON of GET /v1/acl/policy/<name>, recorded in testdata).
var readCapabilities = []Capability{
	CapListJobs, CapParseJob, CapReadJob, CapCSIListVolume, CapCSIReadVolume,
	CapReadJobScaling, CapListScalingPolicies, CapReadScalingPolicy, CapHostVolumeRead,
}

// writeCapabilities is what policy = "write" grants: read plus the
// documented write capabilities, as Nomad v1.11.3 expands it.
var writeCapabilities = append(slices.Clone(readCapabilities),
	CapScaleJob, CapSubmitJob, CapDispatchJob, CapReadLogs, CapReadFS,
	CapAllocExec, CapAllocLifecycle, CapCSIMountVolume, CapCSIWriteVolume,
	CapSubmitRecommendation, CapHostVolumeCreate,
)

// scaleCapabilities is what policy = "scale" grants. The documentation
// lists the four scaling capabilities; Nomad v1.11.3's policy API also
// expands scale to read-job and submit-recommendation, and the conformance
// test confirms a scale token reads jobs, so both are here.
var scaleCapabilities = []Capability{
	CapListScalingPolicies, CapReadScalingPolicy, CapReadJobScaling, CapScaleJob,
	CapReadJob, CapSubmitRecommendation,
}

// Expand gives the capabilities a disposition grants (nil for none and for
// deny, which the caller handles as a denial), or false for a value Nomad
// does not accept in a namespace rule.
func (d Disposition) Expand() ([]Capability, bool) {
	switch d {
	case DispositionNone, DispositionDeny:
		return nil, true
	case DispositionRead:
		return readCapabilities, true
	case DispositionWrite:
		return writeCapabilities, true
	case DispositionScale:
		return scaleCapabilities, true
	}
	return nil, false
}

// validCapability bounds what a capability name may look like: Nomad's
// names are lower-case words joined by "-".
var validCapability = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)

// validLabel is what Nomad accepts as a namespace rule label: letters,
// digits, "-" and the glob "*", 1 to 128 characters.
var validLabel = regexp.MustCompile(`^[a-zA-Z0-9*-]{1,128}$`)
