package jobmeta

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/gputide/gputide/quota-broker/nomad/device"
	"github.com/gputide/gputide/quota-broker/quota"
)

// This file reads a job's GPU flavors (DESIGN L13): the flavors its
// device requests can use (package device), in the order of its meta
// gputide_flavors.

// GroupFlavors returns the allowed flavors of task group tg in the order
// the core tries them (DESIGN L13): AllowedFlavors of the group's device
// requests (over all its tasks), in the order of the job meta
// gputide_flavors when meta sets it (which then also narrows the job to
// the flavors it lists), else in tree order. The meta may list only
// flavors the group is allowed: a name that is not a flavor of the tree,
// or a flavor the device requests cannot use, is a *MetaError naming
// gputide_flavors, its value and both lists (the tree's or the allowed
// flavors). nil, nil for a group without GPU requests; an empty list for
// one whose GPUs are of no flavor (see AllowedFlavors).
func GroupFlavors(flavors []quota.Flavor, meta map[string]string, tg *api.TaskGroup) ([]string, error) {
	allowed := device.AllowedFlavors(flavors, device.Requests(tg))
	if allowed == nil {
		return nil, nil
	}
	return orderFlavors(flavors, meta, allowed)
}

// JobFlavors returns the flavors all GPU groups of job j can use, in the
// order GroupFlavors gives: all GPU groups of a job take one flavor
// (DESIGN L13), so a job's flavors are those every group allows. nil,
// nil for a job without GPU requests.
func JobFlavors(flavors []quota.Flavor, j *api.Job) ([]string, error) {
	var devices []*api.RequestedDevice
	for _, tg := range j.TaskGroups {
		devices = append(devices, device.Requests(tg)...)
	}
	allowed := device.AllowedFlavors(flavors, devices)
	if allowed == nil {
		return nil, nil
	}
	return orderFlavors(flavors, j.Meta, allowed)
}

// PinnedFlavor returns the flavor job j is pinned to: the first flavor of
// the tree (flavors; empty: the implicit one) whose whole pin
// (device.Pin) every GPU request of j already carries, as admission
// leaves it (DESIGN L13), and which the requests allow. Build gives a
// pinned job whose gputide_flavors lists that flavor and others (which
// the pin now excludes) that flavor alone, not a meta error. false for a
// job without GPU requests or pinned to none.
func PinnedFlavor(flavors []quota.Flavor, j *api.Job) (string, bool) {
	var reqs []*api.RequestedDevice
	for _, tg := range j.TaskGroups {
		for _, d := range device.Requests(tg) {
			if d == nil {
				continue
			}
			if _, ok := device.GPURequest(d.Name); ok {
				reqs = append(reqs, d)
			}
		}
	}
	if len(reqs) == 0 {
		return "", false
	}
	for _, f := range device.TreeFlavors(flavors) {
		all := true
		for _, r := range reqs {
			if device.Pin(f, r) != nil {
				all = false
				break
			}
		}
		if all && slices.Contains(device.AllowedFlavors(flavors, reqs), f.Name) {
			return f.Name, true
		}
	}
	return "", false
}

// ListsFlavor reports whether meta's gputide_flavors is a good list that
// names flavor f.
func ListsFlavor(meta map[string]string, f string) bool {
	raw, set := meta[MetaFlavors]
	if !set {
		return false
	}
	names, problem := parseFlavorList(raw)
	return problem == "" && slices.Contains(names, f)
}

// orderFlavors applies gputide_flavors to the allowed flavors (see
// GroupFlavors).
func orderFlavors(flavors []quota.Flavor, meta map[string]string, allowed []string) ([]string, error) {
	raw, set := meta[MetaFlavors]
	if !set {
		return allowed, nil
	}
	names, problem := parseFlavorList(raw)
	if problem != "" {
		return nil, &MetaError{MetaFlavors, raw, problem}
	}
	all := device.TreeFlavors(flavors)
	for _, n := range names {
		known := false
		for i := range all {
			known = known || all[i].Name == n
		}
		if !known {
			return nil, &MetaError{MetaFlavors, raw, fmt.Sprintf("unknown flavor %q (the tree's flavors: %s)", n, device.FlavorNames(all))}
		}
		ok := false
		for _, a := range allowed {
			ok = ok || a == n
		}
		if !ok {
			return nil, &MetaError{MetaFlavors, raw, fmt.Sprintf("flavor %q is not one the job's device requests can use (allowed: %s)", n, orNone(allowed))}
		}
	}
	return names, nil
}

// parseFlavorList parses gputide_flavors, "h100, a100": names as
// quota.ValidName takes them, separated by commas, none empty or listed
// twice. The problem is "" when the list is good.
func parseFlavorList(v string) ([]string, string) {
	var out []string
	seen := map[string]bool{}
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
			return nil, `want flavor names separated by commas, e.g. "h100,a100", with none empty`
		case !quota.ValidName(n):
			return nil, fmt.Sprintf("%q is not a flavor name (letters, digits, '.', '_', '-')", n)
		case seen[n]:
			return nil, fmt.Sprintf("flavor %q listed twice", n)
		}
		seen[n] = true
		out = append(out, n)
	}
	return out, ""
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
