package quota

import "strings"

// ImplicitFlavor is the name of the one flavor of a tree that declares
// none: every whole GPU (DESIGN L13). MIG instances are of no flavor in
// such a tree (ungoverned).
const ImplicitFlavor = "gpu"

// Flavor is a named kind of GPU device that quotas count apart (DESIGN
// L13), declared in the quota file as
//
//	flavor "a100-1g" {
//	  models      = ["NVIDIA A100-SXM4-40GB"]
//	  mig_profile = "1g.5gb"
//	}
//
// A device instance belongs to the first flavor of the tree (file order)
// whose Models hold its model (for a MIG instance, its GPU's model: the
// device group's name less " MIG <profile>") and whose MIGProfile equals
// its profile ("" matches whole GPUs only).
type Flavor struct {
	// Name is unique in the tree and follows ValidName; it is the key of
	// per-flavor nominals (gpus = { h100 = 16 }), of the meta
	// gputide_flavors and of the metrics label flavor.
	Name string
	// Models are Nomad device names of whole GPUs, e.g. "NVIDIA H100 80GB
	// HBM3" (the name the device plugin gives a device group). Never empty
	// in a declared flavor; nil for the implicit flavor, which takes every
	// model.
	Models []string
	// MIGProfile is the MIG profile of the flavor's devices, e.g.
	// "1g.10gb", or "" for whole GPUs.
	MIGProfile string
	// Pos is where the flavor was declared ("quota.hcl:3"), for errors.
	Pos string
}

// Implicit reports whether f is the implicit flavor of a tree without
// flavor blocks.
func (f *Flavor) Implicit() bool { return f.Name == ImplicitFlavor && f.Models == nil }

// Matches reports whether a device of the given model and MIG profile
// ("" for a whole GPU) is of this flavor on its own terms: the implicit
// flavor takes every whole GPU; a declared flavor takes its models with
// its profile. Which flavor a device belongs to is the first of the tree
// that matches (FlavorOf).
func (f *Flavor) Matches(model, migProfile string) bool {
	if f.Implicit() {
		return migProfile == ""
	}
	if migProfile != f.MIGProfile {
		return false
	}
	for _, m := range f.Models {
		if m == model {
			return true
		}
	}
	return false
}

// FlavorOf returns the name of the first flavor in flavors that a device
// of the given model and MIG profile belongs to, and false when it
// belongs to none (an ungoverned device, DESIGN L13). With no flavors
// (nil), the implicit flavor applies.
func FlavorOf(flavors []Flavor, model, migProfile string) (string, bool) {
	if len(flavors) == 0 {
		implicit := Flavor{Name: ImplicitFlavor}
		return ImplicitFlavor, implicit.Matches(model, migProfile)
	}
	for i := range flavors {
		if flavors[i].Matches(model, migProfile) {
			return flavors[i].Name, true
		}
	}
	return "", false
}

// MIGSuffix is what the device plugin appends to a GPU's name to name a
// MIG device group: "<GPU name> MIG <profile>" (DESIGN §7).
const MIGSuffix = " MIG "

// SplitMIGName splits a device group name of the device plugin into the
// GPU model and the MIG profile: "NVIDIA A100-SXM4-40GB MIG 1g.5gb" gives
// ("NVIDIA A100-SXM4-40GB", "1g.5gb"); a whole GPU's name gives (name, "").
func SplitMIGName(name string) (model, profile string) {
	if i := strings.LastIndex(name, MIGSuffix); i > 0 {
		return name[:i], name[i+len(MIGSuffix):]
	}
	return name, ""
}
