package watch

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"

	"github.com/gputide/gputide/quota-broker/plan"
)

func boolAttr(v bool) *api.Attribute     { return &api.Attribute{BoolVal: &v} }
func stringAttr(v string) *api.Attribute { return &api.Attribute{StringVal: &v} }
func ptrInt(v int64) *int64              { return &v }

func instances(ids ...string) []*api.NodeDevice {
	var out []*api.NodeDevice
	for _, id := range ids {
		out = append(out, &api.NodeDevice{ID: id, Healthy: id != "MIG-3"})
	}
	return out
}

// DESIGN L13: each GPU's model and MIG profile come from the node's device
// groups as the device plugin names them: a MIG group "<GPU name> MIG
// <profile>" with mig = true and mig_profile gives its GPU's model and
// the profile; whole GPUs (mig = false, or another plugin's groups with
// neither attribute nor suffix) keep their name and no profile. The node
// event of a real agent with the mixed A100 layout, abridged.
func TestNodeGPUsCarryTheirModelAndMIGProfile(t *testing.T) {
	node := &api.Node{ID: "n1", Name: "a100", Datacenter: "dc1", NodePool: "default", Status: api.NodeStatusReady,
		SchedulingEligibility: api.NodeSchedulingEligible,
		NodeResources: &api.NodeResources{Devices: []*api.NodeDeviceResource{
			{Vendor: "nvidia", Type: "gpu", Name: "NVIDIA A100-SXM4-40GB", Instances: instances("GPU-1", "GPU-2"),
				Attributes: map[string]*api.Attribute{"mig": boolAttr(false)}},
			{Vendor: "nvidia", Type: "gpu", Name: "NVIDIA A100-SXM4-40GB MIG 1g.5gb", Instances: instances("MIG-1", "MIG-2", "MIG-3"),
				Attributes: map[string]*api.Attribute{"mig": boolAttr(true), "mig_profile": stringAttr("1g.5gb")}},
			// Another plugin: no attributes, the suffix alone names the profile.
			{Vendor: "nvidia", Type: "gpu", Name: "NVIDIA H100 80GB HBM3 MIG 3g.40gb", Instances: instances("MIG-4")},
			// No mig attribute and no suffix: a whole GPU.
			{Vendor: "nvidia", Type: "gpu", Name: "Tesla T4", Instances: instances("GPU-3")},
			// mig_profile with a name that does not end in it: the name is kept whole.
			{Vendor: "nvidia", Type: "gpu", Name: "Custom Slice", Instances: instances("MIG-5"),
				Attributes: map[string]*api.Attribute{"mig": boolAttr(true), "mig_profile": stringAttr("2g.10gb")}},
			// mig = false wins over a name that looks like a MIG group.
			{Vendor: "nvidia", Type: "gpu", Name: "Odd MIG Name", Instances: instances("GPU-4"),
				Attributes: map[string]*api.Attribute{"mig": boolAttr(false)}},
			// A suffix with no profile after it: not a whole H100 (Nomad's
			// ${device.model} is the whole name), the name is kept whole.
			{Vendor: "nvidia", Type: "gpu", Name: "NVIDIA H100 80GB HBM3 MIG ", Instances: instances("MIG-6"),
				Attributes: map[string]*api.Attribute{"mig": boolAttr(true)}},
			{Vendor: "nvidia", Type: "gpu", Name: "NVIDIA H100 80GB HBM3 MIG ", Instances: instances("MIG-7"),
				Attributes: map[string]*api.Attribute{"mig": boolAttr(true), "mig_profile": stringAttr("")}},
			// A mig_profile that is not a string is not read; the suffix names the profile.
			{Vendor: "nvidia", Type: "gpu", Name: "NVIDIA H100 80GB HBM3 MIG 1g.10gb", Instances: instances("MIG-8"),
				Attributes: map[string]*api.Attribute{"mig": boolAttr(true), "mig_profile": {IntVal: ptrInt(1)}}},
			{Vendor: "amd", Type: "gpu", Name: "MI300X", Instances: instances("AMD-1")},
		}},
	}
	s := NewState()
	ev := api.Events{Index: 5, Events: []api.Event{{Topic: api.TopicNode, Type: "NodeRegistration", Key: "n1", Index: 5,
		Payload: map[string]any{"Node": node}}}}
	s.Apply(&ev, hclog.NewNullLogger())
	want := []plan.GPU{
		{ID: "GPU-1", Model: "NVIDIA A100-SXM4-40GB", Healthy: true},
		{ID: "GPU-2", Model: "NVIDIA A100-SXM4-40GB", Healthy: true},
		{ID: "MIG-1", Model: "NVIDIA A100-SXM4-40GB", Healthy: true, MIGProfile: "1g.5gb"},
		{ID: "MIG-2", Model: "NVIDIA A100-SXM4-40GB", Healthy: true, MIGProfile: "1g.5gb"},
		{ID: "MIG-3", Model: "NVIDIA A100-SXM4-40GB", Healthy: false, MIGProfile: "1g.5gb"},
		{ID: "MIG-4", Model: "NVIDIA H100 80GB HBM3", Healthy: true, MIGProfile: "3g.40gb"},
		{ID: "GPU-3", Model: "Tesla T4", Healthy: true},
		{ID: "MIG-5", Model: "Custom Slice", Healthy: true, MIGProfile: "2g.10gb"},
		{ID: "GPU-4", Model: "Odd MIG Name", Healthy: true},
		{ID: "MIG-6", Model: "NVIDIA H100 80GB HBM3 MIG ", Healthy: true},
		{ID: "MIG-7", Model: "NVIDIA H100 80GB HBM3 MIG ", Healthy: true},
		{ID: "MIG-8", Model: "NVIDIA H100 80GB HBM3", Healthy: true, MIGProfile: "1g.10gb"},
	}
	var got []plan.GPU
	s.Read(func(v View) {
		if n := v.Nodes["n1"]; n != nil {
			got = n.GPUs
		}
	})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GPUs (-want +got):\n%s", diff)
	}
}
