// Package device reads what Nomad device requests ask for, against the
// quota tree's GPU flavors (DESIGN L13): whether a request name asks for
// governed GPUs (GPURequest), which flavors a set of requests can use
// (AllowedFlavors), and the constraints that pin a chosen flavor on
// admission (Pin, PinJob). It is pure: Nomad API structs in, names and
// constraints out.
package device

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/hashicorp/nomad/api"

	"github.com/gputide/gputide/quota-broker/quota"
)

// GPURequest reports whether a device request name asks for GPUs the
// broker counts, reading the name as Nomad does (structs.RequestedDevice.ID:
// "<type>", "<vendor>/<type>" or "<vendor>/<type>/<model>", split on the
// first two "/", the model keeping any further ones) and matching it as
// Nomad matches a device (DeviceIdTuple.Matches: an empty vendor, type or
// model matches any). So "gpu" (any vendor's GPU: the broker counts it as
// NVIDIA's, the only GPUs it governs), "nvidia/gpu", "nvidia/gpu/<model>",
// and the wildcards "/gpu", "nvidia/" and "/" that Nomad places on NVIDIA
// GPUs too, all count. The model is the device group name as the device
// plugin gives it, a MIG group's name included ("NVIDIA A100-SXM4-40GB MIG
// 1g.5gb"); "" when the name gives none. Other vendors and types do not
// count, nor does "" (Nomad matches no device to it).
func GPURequest(name string) (model string, ok bool) {
	if name == "" {
		return "", false
	}
	// strings.Cut, not SplitN: a build reads every group's devices of
	// every job, and Cut does not allocate.
	vendor, rest, cut := strings.Cut(name, "/")
	typ := vendor
	if cut {
		typ, model, _ = strings.Cut(rest, "/")
	} else {
		vendor = ""
	}
	if (vendor != "" && vendor != "nvidia") || (typ != "" && typ != "gpu") {
		return "", false
	}
	return model, true
}

// deviceKind is one kind of device a flavor takes: a device group name
// (Nomad's ${device.model}) and its MIG profile. anyModel stands for the
// implicit flavor's "every whole GPU", whose model is not known.
type deviceKind struct {
	name     string
	profile  string
	anyModel bool
}

// kindsOf lists the device kinds of flavor f: for a declared flavor, one
// per model, named as the device plugin names the group ("<model>" or
// "<model> MIG <profile>").
func kindsOf(f *quota.Flavor) []deviceKind {
	if f.Implicit() {
		return []deviceKind{{anyModel: true}}
	}
	out := make([]deviceKind, 0, len(f.Models))
	for _, m := range f.Models {
		name := m
		if f.MIGProfile != "" {
			name = m + quota.MIGSuffix + f.MIGProfile
		}
		out = append(out, deviceKind{name: name, profile: f.MIGProfile})
	}
	return out
}

// TreeFlavors is flavors, or the implicit flavor when the tree declares
// none.
func TreeFlavors(flavors []quota.Flavor) []quota.Flavor {
	if len(flavors) == 0 {
		return []quota.Flavor{{Name: quota.ImplicitFlavor}}
	}
	return flavors
}

// AllowedFlavors returns the names of the flavors, in tree order, that
// every GPU request among devices can use (DESIGN L13): a flavor is
// allowed when, for each request, some device kind of the flavor passes
// the request's name (GPURequest: a model in the name must be the kind's
// group name; under the implicit flavor, any name but a MIG group's) and
// each of its constraints. With no flavors declared (flavors empty), the
// implicit flavor "gpu" is the only candidate. Requests for other devices
// are ignored; without any GPU request the result is nil. An empty
// non-nil result means the GPUs asked for are of no flavor (ungoverned
// devices, such as MIG instances under the implicit flavor).
//
// Constraints are evaluated as Nomad does on the device (constraint and
// device docs): attributes ${device.model} (the group name),
// ${device.vendor} ("nvidia"), ${device.type} ("gpu"),
// ${device.attr.mig_profile} (set only on MIG groups) and
// ${device.attr.mig} (bool); operators "=" (also "==", "is" and the empty
// operator), "!=" (also "not"; true when the attribute is not set),
// "regexp" (RE2, unanchored), "set_contains" and "set_contains_any" (the
// attribute and the value split on commas, items trimmed), "is_set" and
// "is_not_set". A constraint the broker cannot decide on a flavor keeps
// the flavor: a target Nomad does not resolve as written (" ${device.model}"
// is a literal string there), another attribute (${device.attr.memory}), another operator
// (">=", "version"), a value that is itself an interpolation, a regexp
// that does not compile or is longer than maxConstraintRegexp (1 KiB),
// or ${device.model} under the implicit flavor,
// whose models are unknown. Nomad then narrows the devices further within
// the flavor; affinities never exclude a flavor.
func AllowedFlavors(flavors []quota.Flavor, devices []*api.RequestedDevice) []string {
	var reqs []*api.RequestedDevice
	for _, d := range devices {
		if d == nil {
			continue
		}
		if _, ok := GPURequest(d.Name); ok {
			reqs = append(reqs, d)
		}
	}
	if len(reqs) == 0 {
		return nil
	}
	out := []string{}
	all := TreeFlavors(flavors)
	res := regexps{}
	for i := range all {
		f := &all[i]
		ok := true
		for _, r := range reqs {
			if !requestTakes(r, f, res) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, f.Name)
		}
	}
	return out
}

// requestTakes reports whether request r can use some device of flavor f.
func requestTakes(r *api.RequestedDevice, f *quota.Flavor, res regexps) bool {
	model, _ := GPURequest(r.Name)
	for _, k := range kindsOf(f) {
		if model != "" {
			if k.anyModel {
				if _, profile := quota.SplitMIGName(model); profile != "" {
					continue // a MIG group: not a whole GPU
				}
				k = deviceKind{name: model} // the request names the model
			} else if model != k.name {
				continue
			}
		}
		if constraintsPass(r.Constraints, k, res) {
			return true
		}
	}
	return false
}

func constraintsPass(cs []*api.Constraint, k deviceKind, res regexps) bool {
	for _, c := range cs {
		if c != nil && evalConstraint(c, k, res) == verdictNo {
			return false
		}
	}
	return true
}

type verdict int

const (
	verdictUnknown verdict = iota // the broker cannot tell: keep the flavor
	verdictYes
	verdictNo
)

func verdictOf(b bool) verdict {
	if b {
		return verdictYes
	}
	return verdictNo
}

// attr gives the value of a device attribute target for kind k: set false
// when the device does not have it, known false when the broker cannot
// tell.
func (k deviceKind) attr(target string) (value string, set, known bool) {
	// As Nomad (resolveDeviceTarget): the target exactly, not trimmed; "
	// ${device.model}" is a literal string there, not the model.
	switch target {
	case "${device.model}":
		if k.anyModel {
			return "", false, false
		}
		return k.name, true, true
	case "${device.vendor}":
		return "nvidia", true, true
	case "${device.type}":
		return "gpu", true, true
	case "${device.attr.mig_profile}":
		return k.profile, k.profile != "", true
	case "${device.attr.mig}":
		if k.profile != "" {
			return "true", true, true
		}
		return "false", true, true
	}
	return "", false, false
}

// maxConstraintRegexp is the longest regexp constraint the broker
// compiles (bytes). A job's regexp is Nomad's to run; a chain such as
// ".{1000}.{1000}..." compiles to a program of millions of instructions
// within RE2's limits, so one longer than this is left undecided (the
// flavors stay; the pin and Nomad decide). Real device regexps are a few
// dozen bytes.
const maxConstraintRegexp = 1024

// regexps holds the regexp constraints compiled during one AllowedFlavors
// call, each once: nil for one too long or that does not compile.
type regexps map[string]*regexp.Regexp

func (r regexps) get(pattern string) *regexp.Regexp {
	if re, ok := r[pattern]; ok {
		return re
	}
	var re *regexp.Regexp
	if len(pattern) <= maxConstraintRegexp {
		re, _ = regexp.Compile(pattern)
	}
	r[pattern] = re
	return re
}

// evalConstraint decides one device constraint on kind k (see
// AllowedFlavors for what it knows).
func evalConstraint(c *api.Constraint, k deviceKind, res regexps) verdict {
	value, set, known := k.attr(c.LTarget)
	if !known {
		return verdictUnknown
	}
	op := strings.TrimSpace(c.Operand)
	switch op {
	case "is_set":
		return verdictOf(set)
	case "is_not_set":
		return verdictOf(!set)
	}
	want := c.RTarget
	if strings.Contains(want, "${") {
		return verdictUnknown
	}
	if c.LTarget == "${device.attr.mig}" && want != "true" && want != "false" {
		// A bool attribute: Nomad reads "False", "T" ... as bools
		// (psstructs.ParseAttribute), and "0" as a number.
		return verdictUnknown
	}
	switch op {
	case "", "=", "==", "is":
		return verdictOf(set && value == want)
	case "!=", "not":
		return verdictOf(!set || value != want)
	case "regexp":
		re := res.get(want)
		if re == nil {
			return verdictUnknown
		}
		return verdictOf(set && re.MatchString(value))
	case "set_contains", "set_contains_any":
		if !set {
			return verdictNo
		}
		have := map[string]bool{}
		for _, v := range strings.Split(value, ",") {
			have[strings.TrimSpace(v)] = true
		}
		anyOf := op == "set_contains_any"
		for _, v := range strings.Split(want, ",") {
			if in := have[strings.TrimSpace(v)]; in == anyOf {
				return verdictOf(anyOf)
			}
		}
		return verdictOf(!anyOf)
	}
	return verdictUnknown
}

// Device constraint targets and operators the pin uses.
const (
	targetModel      = "${device.model}"
	targetMIGProfile = "${device.attr.mig_profile}"
)

// Pin returns the constraints that admission adds to a GPU
// device request so that Nomad places it only on devices of flavor f
// (DESIGN L13: admission pins the chosen flavor in the register that moves
// the job out of the holding pool), less those req already carries (equal
// attribute, operator and value; req may be nil). The pin of
//
//   - a whole-GPU flavor: ${device.model} = the model, or a regexp
//     "^(?:<model>|<model>)$" when the flavor has several (the names
//     quoted), which MIG groups, named "<model> MIG <profile>", never match;
//   - a MIG flavor: ${device.model} regexp "^(?:<model>|...) MIG
//     <profile>$" and ${device.attr.mig_profile} = the profile;
//   - the implicit flavor (every whole GPU): ${device.attr.mig_profile}
//     is_not_set, which keeps the job off MIG instances (ungoverned under
//     it).
//
// A model or profile that Nomad would not read as a plain string on the
// right of "=" (a number such as "80GB", a bool, a "${" interpolation:
// nomadLiteral) is pinned with regexp "^<quoted>$" instead.
//
// A request that already carries the whole pin gets nil: a job that
// pinned its flavor itself is left as it is. The caller adds the result
// to every GPU request of the job (GPURequest), and never re-registers a
// job with running allocations to do so (DESIGN §5).
func Pin(f quota.Flavor, req *api.RequestedDevice) []*api.Constraint {
	var pin []*api.Constraint
	switch {
	case f.Implicit():
		pin = []*api.Constraint{{LTarget: targetMIGProfile, Operand: "is_not_set"}}
	case f.MIGProfile != "":
		pin = []*api.Constraint{
			{LTarget: targetModel, Operand: "regexp", RTarget: "^" + modelAlternation(f.Models) + regexp.QuoteMeta(quota.MIGSuffix+f.MIGProfile) + "$"},
			equalPin(targetMIGProfile, f.MIGProfile),
		}
	case len(f.Models) == 1 && nomadLiteral(f.Models[0]):
		pin = []*api.Constraint{{LTarget: targetModel, Operand: "=", RTarget: f.Models[0]}}
	default:
		pin = []*api.Constraint{{LTarget: targetModel, Operand: "regexp", RTarget: "^" + modelAlternation(f.Models) + "$"}}
	}
	var out []*api.Constraint
	for _, c := range pin {
		if !hasConstraint(req, c) {
			out = append(out, c)
		}
	}
	return out
}

// PinJob adds Pin(f, ...) to every GPU device request of job j
// (GPURequest: gpu, nvidia/gpu, nvidia/gpu/<model>) and reports whether it
// added any: false for a job that pinned f itself, or asks for no GPU. It
// changes j: pass the copy that admission registers, and never a job
// with running allocations (DESIGN §5: a changed device request is a
// destructive update).
func PinJob(j *api.Job, f quota.Flavor) bool {
	changed := false
	for _, tg := range j.TaskGroups {
		for _, d := range Requests(tg) {
			if d == nil {
				continue
			}
			if _, ok := GPURequest(d.Name); !ok {
				continue
			}
			if add := Pin(f, d); len(add) > 0 {
				d.Constraints = append(d.Constraints, add...)
				changed = true
			}
		}
	}
	return changed
}

// equalPin is target = value, or target regexp "^<value quoted>$" when
// Nomad would not read value as that string (nomadLiteral).
func equalPin(target, value string) *api.Constraint {
	if nomadLiteral(value) {
		return &api.Constraint{LTarget: target, Operand: "=", RTarget: value}
	}
	return &api.Constraint{LTarget: target, Operand: "regexp", RTarget: "^" + regexp.QuoteMeta(value) + "$"}
}

// nomadLiteral reports whether Nomad reads s, a constraint's RTarget, as
// the string s. Nomad takes an RTarget that starts with "${" as an
// interpolation (${device.model} equals every device), and parses one
// that reads as a number, with or without a unit ("80GB", "1e3", "Inf"), or
// as a bool ("1", "T", "false") into that type, which never equals a
// string attribute such as a device group's name
// (psstructs.ParseAttribute). This errs on the side of "no": every letter
// (and "/", as in "MB/s") at the end is taken for a unit. The regexp operand compares strings, so
// the pin uses it for the rest.
func nomadLiteral(s string) bool {
	if strings.HasPrefix(s, "${") {
		return false
	}
	if _, err := strconv.ParseBool(s); err == nil {
		return false
	}
	for _, v := range []string{s, strings.TrimSpace(strings.TrimRightFunc(s, unitRune))} {
		if _, err := strconv.ParseFloat(v, 64); err == nil {
			return false
		}
	}
	return true
}

// unitRune reports a rune of a Nomad unit ("GiB", "MB/s", "MHz").
func unitRune(r rune) bool { return unicode.IsLetter(r) || r == '/' }

// modelAlternation is "(?:A|B)" of the quoted model names.
func modelAlternation(models []string) string {
	quoted := make([]string, len(models))
	for i, m := range models {
		quoted[i] = regexp.QuoteMeta(m)
	}
	return "(?:" + strings.Join(quoted, "|") + ")"
}

func hasConstraint(req *api.RequestedDevice, c *api.Constraint) bool {
	if req == nil {
		return false
	}
	for _, have := range req.Constraints {
		if have != nil && strings.TrimSpace(have.LTarget) == c.LTarget && strings.TrimSpace(have.Operand) == c.Operand && have.RTarget == c.RTarget {
			return true
		}
	}
	return false
}

// Requests lists the device requests of tg's tasks.
func Requests(tg *api.TaskGroup) []*api.RequestedDevice {
	if tg == nil {
		return nil
	}
	var out []*api.RequestedDevice
	for _, t := range tg.Tasks {
		if t != nil && t.Resources != nil {
			out = append(out, t.Resources.Devices...)
		}
	}
	return out
}
