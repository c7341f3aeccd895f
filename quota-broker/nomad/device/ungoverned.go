package device

import (
	"fmt"
	"strings"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// This file lists the GPUs of no flavor (DESIGN L13): the broker leaves
// them to Nomad.

// UngovernedGPU is a GPU of no flavor of the tree (DESIGN L13), left to
// Nomad: never counted, free, admitted through or stopped by the broker.
type UngovernedGPU struct {
	Node       string `json:"node"`
	ID         string `json:"id"`
	Model      string `json:"model"`
	MIGProfile string `json:"mig_profile,omitempty"`
	Reason     string `json:"reason"`
}

// Ungoverned lists the GPUs of nodes that are of no flavor of
// flavors (the tree's; empty: the implicit flavor), in node order, with
// the reason each is ungoverned.
func Ungoverned(nodes []plan.Node, flavors []quota.Flavor) []UngovernedGPU {
	var out []UngovernedGPU
	for _, n := range nodes {
		for _, g := range n.GPUs {
			if _, ok := quota.FlavorOf(flavors, g.Model, g.MIGProfile); ok {
				continue
			}
			out = append(out, UngovernedGPU{Node: n.ID, ID: g.ID, Model: g.Model, MIGProfile: g.MIGProfile,
				Reason: ungovernedReason(flavors, g)})
		}
	}
	return out
}

func ungovernedReason(flavors []quota.Flavor, g plan.GPU) string {
	switch {
	case len(flavors) == 0:
		return fmt.Sprintf("a MIG instance (profile %s): the tree declares no flavor, and the implicit flavor %q counts whole GPUs only",
			g.MIGProfile, quota.ImplicitFlavor)
	case g.MIGProfile != "":
		return fmt.Sprintf("no flavor of the tree (%s) has model %q with mig_profile %q", FlavorNames(flavors), g.Model, g.MIGProfile)
	default:
		return fmt.Sprintf("no flavor of the tree (%s) has model %q as whole GPUs", FlavorNames(flavors), g.Model)
	}
}

// FlavorNames lists the names of fs, joined with ", ".
func FlavorNames(fs []quota.Flavor) string {
	names := make([]string, len(fs))
	for i := range fs {
		names[i] = fs[i].Name
	}
	return strings.Join(names, ", ")
}
