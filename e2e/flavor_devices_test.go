package e2e

// End-to-end test of the GPU flavors' device side (issue 17, items 7 and
// 3, DESIGN L13) on real Nomad agents: a dev agent whose client has the
// mock plugin's 8 H100s and a second client agent joined to it with 8
// A100s named as real ones, GPUs 6 and 7 cut into 7 x 1g.5gb each. Each
// node's device resources give the groups, models and mig/mig_profile
// attributes expected; the broker's watcher reads them as GPUs of a model
// and a MIG profile, which fall into the flavors h100, a100 and a100-1g;
// and a job pinned to a flavor with device.Pin is placed only on
// that flavor's devices (or not at all when they cannot hold it, though
// other GPUs are free).

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"

	"github.com/gputide/gputide/quota-broker/nomad/device"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/quota"
)

const (
	h100Model = "NVIDIA H100 80GB HBM3"
	a100Model = "NVIDIA A100-SXM4-40GB"
	a100MIG   = a100Model + " MIG 1g.5gb"
)

// The flavors of the issue 17 e2e, in tree order.
var e2eFlavors = []quota.Flavor{
	{Name: "h100", Models: []string{h100Model}},
	{Name: "a100", Models: []string{a100Model}},
	{Name: "a100-1g", Models: []string{a100Model}, MIGProfile: "1g.5gb"},
}

// mockPluginBlock is the plugin block of a client with the mock backend
// and the given extra options.
func mockPluginBlock(options string) string {
	return fmt.Sprintf(`
plugin %q {
  config {
    backend            = "mock"
    fingerprint_period = "10s"
%s
  }
}
`, pluginFile, options)
}

// deviceGroup is what the flavors read of a node's device group.
type deviceGroup struct {
	Vendor, Type, Name string
	Instances, Healthy int
	MIG                string // the mig attribute as Nomad prints it
	MIGProfile         string
}

// nodeDeviceGroups lists a node's device groups as Nomad holds them.
func nodeDeviceGroups(c *api.Client, nodeID string) ([]deviceGroup, error) {
	node, _, err := c.Nodes().Info(nodeID, nil)
	if err != nil {
		return nil, err
	}
	if node.NodeResources == nil {
		return nil, fmt.Errorf("node %s has no resources yet", nodeID)
	}
	var out []deviceGroup
	for _, d := range node.NodeResources.Devices {
		g := deviceGroup{Vendor: d.Vendor, Type: d.Type, Name: d.Name, Instances: len(d.Instances)}
		for _, in := range d.Instances {
			if in.Healthy {
				g.Healthy++
			}
		}
		if a := d.Attributes["mig"]; a != nil {
			g.MIG = a.String()
		}
		if a := d.Attributes["mig_profile"]; a != nil {
			g.MIGProfile = a.String()
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b deviceGroup) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// pinnedJob is a batch job of one raw_exec task asking for count
// nvidia/gpu devices, pinned to flavor f (nil: not pinned).
func pinnedJob(id string, count uint64, f *quota.Flavor) *api.Job {
	dev := &api.RequestedDevice{Name: "nvidia/gpu", Count: &count}
	if f != nil {
		dev.Constraints = device.Pin(*f, dev)
	}
	task := api.NewTask("t", "raw_exec").SetConfig("command", "/bin/true")
	task.Require(&api.Resources{CPU: ptrTo(20), MemoryMB: ptrTo(16), Devices: []*api.RequestedDevice{dev}})
	tg := api.NewTaskGroup("g", 1).AddTask(task)
	tg.RestartPolicy = &api.RestartPolicy{Attempts: ptrTo(0), Mode: ptrTo("fail")}
	tg.ReschedulePolicy = &api.ReschedulePolicy{Attempts: ptrTo(0), Unlimited: ptrTo(false)}
	return api.NewBatchJob(id, id, "global", 50).AddTaskGroup(tg)
}

func ptrTo[T any](v T) *T { return &v }

// placement is where Nomad put a job's allocation and which device group
// and how many of its instances it got.
type placement struct {
	Node, Group string
	Devices     int
}

// placedOn registers job and waits for its allocation to be placed.
func placedOn(t *testing.T, c *api.Client, job *api.Job) placement {
	t.Helper()
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatalf("register %s: %v", *job.ID, err)
	}
	var got placement
	err := waitFor(30*time.Second, 100*time.Millisecond, func() error {
		a, err := firstAlloc(c, *job.ID)
		if err != nil {
			return err
		}
		tr := a.AllocatedResources.Tasks["t"]
		if tr == nil || len(tr.Devices) != 1 {
			return errStop{fmt.Errorf("allocation %s has task resources %+v", a.ID, tr)}
		}
		got = placement{Node: a.NodeID, Group: tr.Devices[0].Name, Devices: len(tr.Devices[0].DeviceIDs)}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// notPlaced registers job and checks that Nomad cannot place it.
func notPlaced(t *testing.T, c *api.Client, job *api.Job) {
	t.Helper()
	resp, _, err := c.Jobs().Register(job, nil)
	if err != nil {
		t.Fatalf("register %s: %v", *job.ID, err)
	}
	ev, err := waitEval(c, resp.EvalID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.FailedTGAllocs) == 0 {
		stubs, _, _ := c.Jobs().Allocations(*job.ID, false, nil)
		t.Fatalf("job %s was placed: eval %+v, allocations %v", *job.ID, ev, stubs)
	}
	if _, _, err := c.Jobs().Deregister(*job.ID, true, nil); err != nil {
		t.Fatal(err)
	}
}

func TestFlavorDevicesOnTwoNomadClients(t *testing.T) {
	nomadBinary(t) // skip before building anything when there is no Nomad
	bin := goBuild(t, pluginPkg, t.TempDir(), pluginFile)
	began := time.Now()
	h100 := newNomadAgent(t, nomadOptions{
		Plugins:     map[string]string{pluginFile: bin},
		ExtraConfig: mockPluginBlock(`    mock_profile   = "dgxh100"` + "\n" + `    mock_uuid_seed = "e2e-h100"`),
	})
	a100 := newNomadClient(t, h100, "gpu-a100", nomadOptions{
		Plugins: map[string]string{pluginFile: bin},
		ExtraConfig: mockPluginBlock(`    mock_profile   = "dgxa100"
    mock_gpu_name  = "NVIDIA A100-SXM4-40GB"
    mock_mig       = ["6-7:7x1g.5gb"]
    mock_uuid_seed = "e2e-a100"`),
	})
	c := h100.Client
	t.Logf("two client agents ready %s after start", time.Since(began).Round(10*time.Millisecond))

	// 1. Each node's device groups: models and mig/mig_profile attributes.
	want := map[string][]deviceGroup{
		h100.NodeID: {{Vendor: "nvidia", Type: "gpu", Name: h100Model, Instances: 8, Healthy: 8, MIG: "false"}},
		a100.NodeID: {
			{Vendor: "nvidia", Type: "gpu", Name: a100Model, Instances: 6, Healthy: 6, MIG: "false"},
			{Vendor: "nvidia", Type: "gpu", Name: a100MIG, Instances: 14, Healthy: 14, MIG: "true", MIGProfile: "1g.5gb"},
		},
	}
	for node, groups := range want {
		err := waitFor(30*time.Second, 200*time.Millisecond, func() error {
			got, err := nodeDeviceGroups(c, node)
			if err != nil {
				return err
			}
			if diff := cmp.Diff(groups, got); diff != "" {
				return fmt.Errorf("node %s device groups (-want +got):\n%s", node, diff)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	// 2. The broker reads them as GPUs of a model and a MIG profile, and
	// each GPU falls into its flavor.
	st, err := watch.ListAll(context.Background(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	type kind struct{ Model, MIGProfile, Flavor string }
	byNode := map[string]map[kind]int{}
	st.Read(func(v watch.View) {
		for id, n := range v.Nodes {
			byNode[id] = map[kind]int{}
			for _, g := range n.GPUs {
				f, _ := quota.FlavorOf(e2eFlavors, g.Model, g.MIGProfile)
				byNode[id][kind{g.Model, g.MIGProfile, f}]++
			}
		}
	})
	wantKinds := map[string]map[kind]int{
		h100.NodeID: {{h100Model, "", "h100"}: 8},
		a100.NodeID: {{a100Model, "", "a100"}: 6, {a100Model, "1g.5gb", "a100-1g"}: 14},
	}
	if diff := cmp.Diff(wantKinds, byNode); diff != "" {
		t.Fatalf("GPUs by node, model, profile and flavor (-want +got):\n%s", diff)
	}

	// 3. A pinned job lands only on its flavor's devices. Seven whole
	// A100s do not exist (6 whole, the H100 node's 8 and the 14 slices
	// are of other flavors), and ten GPUs of the implicit flavor (whole
	// GPUs) neither, though unpinned the ten find the 14 slices.
	flavor := func(name string) *quota.Flavor {
		for i := range e2eFlavors {
			if e2eFlavors[i].Name == name {
				return &e2eFlavors[i]
			}
		}
		t.Fatalf("no flavor %s", name)
		return nil
	}
	notPlaced(t, c, pinnedJob("a100-x7", 7, flavor("a100")))
	notPlaced(t, c, pinnedJob("whole-x10", 10, &quota.Flavor{Name: quota.ImplicitFlavor}))
	jobs := []struct {
		job  *api.Job
		want placement
	}{
		{pinnedJob("any-x10", 10, nil), placement{a100.NodeID, a100MIG, 10}},
		{pinnedJob("h100-x2", 2, flavor("h100")), placement{h100.NodeID, h100Model, 2}},
		{pinnedJob("a100-x6", 6, flavor("a100")), placement{a100.NodeID, a100Model, 6}},
		{pinnedJob("a100-1g-x3", 3, flavor("a100-1g")), placement{a100.NodeID, a100MIG, 3}},
	}
	got := map[string]placement{}
	for _, j := range jobs {
		got[*j.job.ID] = placedOn(t, c, j.job)
	}
	for _, j := range jobs {
		if diff := cmp.Diff(j.want, got[*j.job.ID]); diff != "" {
			t.Errorf("job %s placed (-want +got):\n%s", *j.job.ID, diff)
		}
	}
	t.Logf("test body took %s (nodes: %v)", time.Since(began).Round(10*time.Millisecond), slices.Sorted(maps.Keys(byNode)))
}
