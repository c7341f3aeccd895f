package quota

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

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

// Nominal is a quota node's nominal GPUs per flavor (DESIGN L13): flavor
// name -> devices of that flavor the node is guaranteed. A flavor left out
// is 0. A tree without flavor blocks keys every nominal by ImplicitFlavor
// (Plain); the HCL file's and the snapshot's plain number `gpus = N` is
// read, in a tree of one flavor, as that flavor's nominal. Nominals are
// never shared between nodes: Node.Clone copies them.
type Nominal map[string]int

// Plain returns the nominal of gpus devices of the implicit flavor, the
// nominal of a tree without flavor blocks.
func Plain(gpus int) Nominal { return Nominal{ImplicitFlavor: gpus} }

// Of returns the nominal of the given flavor (0 when left out).
func (n Nominal) Of(flavor string) int { return n[flavor] }

// Total returns the sum over the flavors, for figures that do not tell
// flavors apart (a one-flavor tree's nominal). It saturates at MaxGPUs
// per flavor, as Validate bounds each.
func (n Nominal) Total() int {
	t := 0
	for _, v := range n {
		t += min(max(v, 0), MaxGPUs)
	}
	return t
}

// Clone returns a copy of n (nil for nil).
func (n Nominal) Clone() Nominal {
	if n == nil {
		return nil
	}
	return maps.Clone(n)
}

// Set returns n with flavor's nominal set to gpus, n itself when it is
// not nil.
func (n Nominal) Set(flavor string, gpus int) Nominal {
	if n == nil {
		n = Nominal{}
	}
	n[flavor] = gpus
	return n
}

// String writes the nominal as the quota file does: "48" for the
// implicit flavor's alone, else "{a100 = 32, h100 = 16}" in name order.
func (n Nominal) String() string {
	if len(n) == 1 {
		if v, ok := n[ImplicitFlavor]; ok {
			return strconv.Itoa(v)
		}
	}
	parts := make([]string, 0, len(n))
	for _, k := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s = %d", k, n[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// MarshalJSON writes the nominal as an object by flavor (the store's tree
// record, TreeRecord; the snapshot codec writes its own form).
func (n Nominal) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]int(n))
}

// UnmarshalJSON reads an object by flavor, or a plain number, which is
// the implicit flavor's nominal: tree records stored before flavors
// existed wrote "GPUs": 48.
func (n *Nominal) UnmarshalJSON(data []byte) error {
	var v int
	if err := json.Unmarshal(data, &v); err == nil {
		*n = Plain(v)
		return nil
	}
	var m map[string]int
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("nominal gpus: want a number or an object by flavor: %w", err)
	}
	*n = m
	return nil
}

// TreeFlavors returns the flavors of the tree rooted at root: its
// declared ones (root.Flavors) in file order, or the implicit flavor
// alone when it declares none. A nil root has the implicit flavor.
func TreeFlavors(root *Node) []Flavor {
	if root == nil || len(root.Flavors) == 0 {
		return []Flavor{{Name: ImplicitFlavor}}
	}
	return root.Flavors
}

// FlavorNames returns the names of TreeFlavors(root), in order.
func FlavorNames(root *Node) []string {
	fl := TreeFlavors(root)
	out := make([]string, len(fl))
	for i := range fl {
		out[i] = fl[i].Name
	}
	return out
}

// OnlyFlavor returns the name of the tree's one flavor, and false when it
// declares several: the flavor a plain `gpus = N`, a quota move without
// -flavor or a figure without a flavor label stands for.
func OnlyFlavor(root *Node) (string, bool) {
	fl := TreeFlavors(root)
	if len(fl) != 1 {
		return "", false
	}
	return fl[0].Name, true
}

// FlavorChoice returns the flavor a request names, or, when it names none
// (""), the tree's only flavor. A tree of several flavors needs one named;
// the error lists them, and an unknown name is an error naming the
// choices too.
func FlavorChoice(root *Node, flavor string) (string, error) {
	names := FlavorNames(root)
	if flavor == "" {
		if len(names) == 1 {
			return names[0], nil
		}
		return "", fmt.Errorf("the tree has %d flavors (%s): name one (flavor)", len(names), strings.Join(names, ", "))
	}
	if !slices.Contains(names, flavor) {
		return "", fmt.Errorf("flavor %q is not a flavor of the tree (%s)", flavor, strings.Join(names, ", "))
	}
	return flavor, nil
}

// checkFlavors checks a tree's declared flavors (DESIGN L13): valid and
// unique names, models given, a model (with its MIG profile) in one
// flavor only.
func checkFlavors(flavors []Flavor) error {
	names := map[string]int{}
	owner := map[[2]string]int{}
	for i := range flavors {
		f := &flavors[i]
		bad := func(format string, args ...any) error {
			return &ValidationError{Pos: f.Pos, Node: f.Name, Flavor: true, Message: fmt.Sprintf(format, args...)}
		}
		if !ValidName(f.Name) {
			return bad("is not a flavor name: want 1 to %d letters, digits, '.', '_' or '-'", MaxNameLen)
		}
		if j, dup := names[f.Name]; dup {
			return bad("declared twice (first at %s)", flavors[j].Pos)
		}
		names[f.Name] = i
		if len(f.Models) == 0 {
			if f.MIGProfile != "" {
				return bad("mig_profile = %q without models: a MIG flavor names the models of the GPUs it cuts", f.MIGProfile)
			}
			return bad("has no models: a flavor names the device models it takes (models = [\"NVIDIA H100 80GB HBM3\"])")
		}
		for _, m := range f.Models {
			if m == "" || strings.TrimSpace(m) != m {
				return bad("models: %q is not a device model name", m)
			}
			k := [2]string{m, f.MIGProfile}
			if j, dup := owner[k]; dup {
				what := fmt.Sprintf("model %q", m)
				if f.MIGProfile != "" {
					what += fmt.Sprintf(" with mig_profile %q", f.MIGProfile)
				}
				return bad("%s is already in flavor %q (%s): a device belongs to one flavor", what, flavors[j].Name, flavors[j].Pos)
			}
			owner[k] = i
		}
	}
	return nil
}

// SameFlavors reports whether two trees declare the same flavors in the
// same order (positions aside).
func SameFlavors(a, b []Flavor) bool {
	return slices.EqualFunc(a, b, func(x, y Flavor) bool {
		return x.Name == y.Name && x.MIGProfile == y.MIGProfile && slices.Equal(x.Models, y.Models)
	})
}
