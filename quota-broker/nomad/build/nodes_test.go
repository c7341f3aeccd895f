package build

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
)

// The snapshot's GPUs keep the model and MIG profile the watcher read
// (DESIGN L13: a GPU's mig_profile); a node that is not schedulable still
// gives unhealthy GPUs.
func TestSnapshotNodesKeepEachGPUsMIGProfile(t *testing.T) {
	nodes := map[string]*watch.Node{
		"n1": {ID: "n1", Datacenter: "dc1", NodePool: "default", Schedulable: true, GPUs: []plan.GPU{
			{ID: "GPU-1", Model: "NVIDIA A100-SXM4-40GB", Healthy: true},
			{ID: "MIG-1", Model: "NVIDIA A100-SXM4-40GB", Healthy: true, MIGProfile: "1g.5gb"},
		}},
		"n2": {ID: "n2", Datacenter: "dc1", NodePool: "default", GPUs: []plan.GPU{
			{ID: "MIG-2", Model: "NVIDIA A100-SXM4-40GB", Healthy: true, MIGProfile: "1g.5gb"},
		}},
	}
	want := []plan.Node{
		{ID: "n1", Datacenter: "dc1", NodePool: "default", GPUs: []plan.GPU{
			{ID: "GPU-1", Model: "NVIDIA A100-SXM4-40GB", Healthy: true},
			{ID: "MIG-1", Model: "NVIDIA A100-SXM4-40GB", Healthy: true, MIGProfile: "1g.5gb"},
		}},
		{ID: "n2", Datacenter: "dc1", NodePool: "default", GPUs: []plan.GPU{
			{ID: "MIG-2", Model: "NVIDIA A100-SXM4-40GB", Healthy: false, MIGProfile: "1g.5gb"},
		}},
	}
	if diff := cmp.Diff(want, snapshotNodes(nodes)); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
}

func ptr[T any](v T) *T { return &v }
