package watch

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

// allocEvent is an Allocation event of the event stream for a, at index.
func allocEvent(a *api.Allocation, index uint64) api.Events {
	a.ModifyIndex = index
	return api.Events{Index: index, Events: []api.Event{{
		Topic: api.TopicAllocation, Type: "AllocationUpdated", Key: a.ID, Index: index,
		Payload: map[string]any{"Allocation": a},
	}}}
}

// L2: an allocation's GPUs are the device instances of type gpu, vendor
// nvidia, assigned to its tasks: other vendors and device types do not
// count.
func TestL2GPUsAreTheNvidiaGPUInstancesAssigned(t *testing.T) {
	s := NewState()
	a := &api.Allocation{ID: "a1", Namespace: "workspace-b", JobID: "train", TaskGroup: "worker", NodeID: "n1",
		ClientStatus: api.AllocClientStatusRunning, DesiredStatus: api.AllocDesiredStatusRun,
		AllocatedResources: &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
			"main": {Devices: []*api.AllocatedDeviceResource{
				{Vendor: "nvidia", Type: "gpu", Name: "H100", DeviceIDs: []string{"GPU-1", "GPU-2"}},
				{Vendor: "amd", Type: "gpu", Name: "MI300X", DeviceIDs: []string{"AMD-1"}},
				{Vendor: "nvidia", Type: "nic", Name: "CX7", DeviceIDs: []string{"NIC-1"}},
			}},
			"sidecar": {Devices: []*api.AllocatedDeviceResource{
				{Vendor: "nvidia", Type: "gpu", Name: "H100", DeviceIDs: []string{"GPU-3"}},
			}},
		}},
	}
	ev := allocEvent(a, 10)
	s.Apply(&ev, hclog.NewNullLogger())
	if diff := cmp.Diff(map[string]int{"a1": 3}, s.GPUsByAlloc()); diff != "" {
		t.Errorf("ledger (-want +got):\n%s", diff)
	}
	got, _ := s.Alloc("a1")
	if diff := cmp.Diff([]string{"GPU-1", "GPU-2", "GPU-3"}, got.GPUIDs); diff != "" {
		t.Errorf("GPU IDs (-want +got):\n%s", diff)
	}
}

// L2: an allocation counts from placement (client status pending, no task
// started) until the client reports it terminal; being asked to stop does
// not end it.
func TestL2AnAllocationCountsFromPlacementUntilTerminal(t *testing.T) {
	s := NewState()
	log := hclog.NewNullLogger()
	res := &api.AllocatedResources{Tasks: map[string]*api.AllocatedTaskResources{
		"main": {Devices: []*api.AllocatedDeviceResource{{Vendor: "nvidia", Type: "gpu", DeviceIDs: []string{"GPU-1", "GPU-2"}}}},
	}}
	steps := []struct {
		client, desired string
		want            map[string]int
	}{
		{api.AllocClientStatusPending, api.AllocDesiredStatusRun, map[string]int{"a1": 2}},
		{api.AllocClientStatusRunning, api.AllocDesiredStatusRun, map[string]int{"a1": 2}},
		{api.AllocClientStatusRunning, api.AllocDesiredStatusStop, map[string]int{"a1": 2}},
		{api.AllocClientStatusComplete, api.AllocDesiredStatusStop, map[string]int{}},
	}
	for i, st := range steps {
		a := &api.Allocation{ID: "a1", Namespace: "workspace-b", JobID: "train", TaskGroup: "worker", NodeID: "n1",
			ClientStatus: st.client, DesiredStatus: st.desired, AllocatedResources: res}
		ev := allocEvent(a, uint64(10+i))
		s.Apply(&ev, log)
		if diff := cmp.Diff(st.want, s.GPUsByAlloc()); diff != "" {
			t.Errorf("client %s, desired %s: ledger (-want +got):\n%s", st.client, st.desired, diff)
		}
	}
}

// LiveAllocs follows the allocation events (its count per job is made
// once per generation of the allocations): a placement counts, a client's
// terminal status does not, a stop asked (still holding its GPUs) does.
func TestLiveAllocsFollowsEvents(t *testing.T) {
	s := NewState()
	key := plan.JobKey{Namespace: "workspace-b", Job: "train"}
	alloc := func(id, client, desired string, index uint64) {
		ev := allocEvent(&api.Allocation{ID: id, Namespace: key.Namespace, JobID: key.Job, TaskGroup: "worker", NodeID: "n1",
			ClientStatus: client, DesiredStatus: desired}, index)
		s.Apply(&ev, hclog.NewNullLogger())
	}
	steps := []struct {
		name string
		do   func()
		want int
	}{
		{"none", func() {}, 0},
		{"a1 placed", func() { alloc("a1", api.AllocClientStatusPending, api.AllocDesiredStatusRun, 10) }, 1},
		{"a2 running", func() { alloc("a2", api.AllocClientStatusRunning, api.AllocDesiredStatusRun, 11) }, 2},
		{"a1 asked to stop", func() { alloc("a1", api.AllocClientStatusRunning, api.AllocDesiredStatusStop, 12) }, 2},
		{"a1 complete", func() { alloc("a1", api.AllocClientStatusComplete, api.AllocDesiredStatusStop, 13) }, 1},
		{"a2 failed", func() { alloc("a2", api.AllocClientStatusFailed, api.AllocDesiredStatusRun, 14) }, 0},
	}
	for _, st := range steps {
		st.do()
		if got := s.LiveAllocs(key); got != st.want {
			t.Fatalf("%s: LiveAllocs = %d, want %d", st.name, got, st.want)
		}
		if got := s.LiveAllocs(plan.JobKey{Namespace: key.Namespace, Job: "other"}); got != 0 {
			t.Fatalf("%s: LiveAllocs of another job = %d, want 0", st.name, got)
		}
	}
}
