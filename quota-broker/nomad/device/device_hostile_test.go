package device

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"

	"github.com/gputide/gputide/quota-broker/quota"
)

// The flavors of the issue 17 e2e, in tree order.
var tree = []quota.Flavor{
	{Name: "h100", Models: []string{"NVIDIA H100 80GB HBM3"}},
	{Name: "a100", Models: []string{"NVIDIA A100-SXM4-40GB"}},
	{Name: "a100-1g", Models: []string{"NVIDIA A100-SXM4-40GB"}, MIGProfile: "1g.5gb"},
}

// Nomad resolves a constraint's target only when it is exactly
// "${device.model}" (or another interpolation): " ${device.model}" is the
// literal string, which != any model, so Nomad places such a request on
// every GPU. Read as the model, the constraints below excluded every
// flavor: the job was of no flavor, moved to its pool uncounted and
// unpinned, and Nomad put it on governed GPUs. The broker cannot decide
// such a target: the flavors stay.
func TestConstraintTargetsAreReadAsNomadReadsThem(t *testing.T) {
	var cs []*api.Constraint
	for _, f := range tree {
		for _, k := range kindsOf(&f) {
			cs = append(cs, &api.Constraint{LTarget: " ${device.model}", Operand: "!=", RTarget: k.name})
		}
	}
	req := &api.RequestedDevice{Name: "nvidia/gpu", Constraints: cs}
	if diff := cmp.Diff([]string{"h100", "a100", "a100-1g"}, AllowedFlavors(tree, []*api.RequestedDevice{req})); diff != "" {
		t.Errorf("flavors (-want +got):\n%s", diff)
	}
	// The exact target is decided.
	for _, c := range cs {
		c.LTarget = "${device.model}"
	}
	if got := AllowedFlavors(tree, []*api.RequestedDevice{req}); len(got) != 0 {
		t.Errorf("flavors %v, want none", got)
	}
}
