package e2e

// The broker on GPU flavors (issue 17 item 3, DESIGN L13): two client
// agents, one of 8 H100 and one of 8 A100 of which 2 are cut into 7 x
// 1g.5gb slices (6 whole A100, 14 slices), and a tree with the flavors
// h100, a100 and a100-1g; points (a)-(d) of the e2e, (d) in
// flavor_figures_test.go.

import (
	"fmt"
	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/hashicorp/nomad/api"
	"os"
	"strings"
	"testing"
	"time"
)

// flavorQuota is the tree of the flavor e2e: per flavor, the children's
// nominals add up to at most the root's (L1).
const flavorQuota = `
flavor "h100" {
  models = ["NVIDIA H100 80GB HBM3"]
}
flavor "a100" {
  models = ["NVIDIA A100-SXM4-40GB"]
}
flavor "a100-1g" {
  models      = ["NVIDIA A100-SXM4-40GB"]
  mig_profile = "1g.5gb"
}

quota "Quota1" {
  gpus             = { h100 = 8, a100 = 6, a100-1g = 14 }
  child_preemption = true
  namespaces       = ["workspace-a"]
  quota "Quota1.1" {
    gpus       = { h100 = 4, a100 = 6 }
    namespaces = ["workspace-b"]
  }
  quota "Quota1.2" {
    gpus       = { h100 = 4, a100-1g = 7 }
    namespaces = ["workspace-c"]
  }
}
`

// startFlavorNomad starts the two client agents (the first is the server)
// with the mock plugin, registers the workspaces and waits until both
// nodes' GPUs are healthy.
func startFlavorNomad(t *testing.T) (h100, a100 *nomadAgent) {
	t.Helper()
	nomadBinary(t)
	bin := goBuild(t, pluginPkg, t.TempDir(), pluginFile)
	h100 = newNomadAgent(t, nomadOptions{
		Plugins:     map[string]string{pluginFile: bin},
		ExtraConfig: mockPluginBlock(`    mock_profile   = "dgxh100"` + "\n" + `    mock_uuid_seed = "broker-h100"`),
	})
	a100 = newNomadClient(t, h100, "gpu-a100", nomadOptions{
		Plugins: map[string]string{pluginFile: bin},
		ExtraConfig: mockPluginBlock(`    mock_profile   = "dgxa100"
    mock_gpu_name  = "NVIDIA A100-SXM4-40GB"
    mock_mig       = ["6-7:7x1g.5gb"]
    mock_uuid_seed = "broker-a100"`),
	})
	c := h100.Client
	for _, ns := range workspaces {
		if _, err := c.Namespaces().Register(&api.Namespace{Name: ns}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for node, want := range map[string]int{h100.NodeID: 8, a100.NodeID: 20} {
		err := waitFor(60*time.Second, 250*time.Millisecond, func() error {
			groups, err := nodeDeviceGroups(c, node)
			if err != nil {
				return err
			}
			healthy := 0
			for _, g := range groups {
				healthy += g.Healthy
			}
			if healthy != want {
				return fmt.Errorf("node %s: %d healthy GPUs, want %d", node, healthy, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return h100, a100
}

// placedGroups returns the node and device group of each allocation.
func placedGroups(t *testing.T, c *api.Client, ids []string) map[string]placement {
	t.Helper()
	out := map[string]placement{}
	for _, id := range ids {
		a, _, err := c.Allocations().Info(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := placement{Node: a.NodeID}
		for _, tr := range a.AllocatedResources.Tasks {
			for _, d := range tr.Devices {
				p.Group = d.Name
				p.Devices += len(d.DeviceIDs)
			}
		}
		out[id] = p
	}
	return out
}

func TestBrokerOnFlavors(t *testing.T) {
	began := time.Now()
	h100, a100 := startFlavorNomad(t)
	c := h100.Client
	cfg, quotaFile := brokerConfig(t, h100.Addr, 0, 0)
	if err := os.WriteFile(quotaFile, []byte(flavorQuota), 0o644); err != nil {
		t.Fatal(err)
	}
	br := runBroker(t, cfg, quotaFile)
	t.Logf("agents and broker ready %s after start", time.Since(began).Round(10*time.Millisecond))
	defer cleanJobs(t, c)

	// H100 full: team C's and team B's training, 4 H100 each (their
	// nominals), pinned there by gputide_flavors.
	onH100 := map[string]string{"gputide_flavors": "h100"}
	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "training", Type: "batch", Priority: 50, Count: 2, GPUs: 2, Meta: onH100})
	cTrain := waitRunning(t, c, "workspace-c", "training", 2, 30*time.Second)
	submit(t, c, jobSpec{Namespace: "workspace-b", ID: "training", Type: "batch", Priority: 50, Count: 1, GPUs: 4, Meta: onH100})
	bTrain := waitRunning(t, c, "workspace-b", "training", 1, 30*time.Second)
	for id, p := range placedGroups(t, c, append(append([]string(nil), cTrain...), bTrain...)) {
		if p.Node != h100.NodeID || p.Group != h100Model {
			t.Fatalf("training allocation %s placed on %+v, want the H100 node's H100s", id, p)
		}
	}

	// (a) Team B's job allowed h100,a100 lands on A100, with no
	// preemption, and Nomad placed it on the A100 node: the admission
	// pinned a100.
	before := stoppedAllocs(t, c)
	submit(t, c, jobSpec{Namespace: "workspace-b", ID: "either", Type: "batch", Priority: 50, Count: 1, GPUs: 4,
		Meta: map[string]string{"gputide_flavors": "h100,a100"}})
	either := waitRunning(t, c, "workspace-b", "either", 1, 30*time.Second)
	if got := placedGroups(t, c, either)[either[0]]; got != (placement{Node: a100.NodeID, Group: a100Model, Devices: 4}) {
		t.Fatalf("(a) team B's h100,a100 job placed on %+v, want 4 whole A100s of node %s", got, a100.NodeID)
	}
	if newly := minus(stoppedAllocs(t, c), before); len(newly) != 0 {
		t.Fatalf("(a) stopped %v, want no preemption", newly)
	}
	pinned := false
	for _, cons := range jobInfo(t, c, "workspace-b", "either").TaskGroups[0].Tasks[0].Resources.Devices[0].Constraints {
		pinned = pinned || cons.LTarget == "${device.model}" && cons.RTarget == a100Model
	}
	if !pinned {
		t.Fatalf("(a) the admitted job is not pinned to a100: %+v",
			jobInfo(t, c, "workspace-b", "either").TaskGroups[0].Tasks[0].Resources.Devices[0].Constraints)
	}

	// (b) Team A's H100 inference preempts only H100 allocations.
	submit(t, c, jobSpec{Namespace: "workspace-a", ID: "inference", Type: "service", Priority: 80, Count: 1, GPUs: 4, Meta: onH100})
	inf := waitRunning(t, c, "workspace-a", "inference", 1, 60*time.Second)
	if got := placedGroups(t, c, inf)[inf[0]]; got.Node != h100.NodeID || got.Group != h100Model {
		t.Fatalf("(b) inference placed on %+v, want the H100 node", got)
	}
	newly := minus(stoppedAllocs(t, c), before)
	if len(newly) == 0 {
		t.Fatal("(b) nothing was preempted")
	}
	h100Allocs := append(append([]string(nil), cTrain...), bTrain...)
	for _, id := range newly {
		if !contains(h100Allocs, id) {
			t.Fatalf("(b) stopped %s, not an H100 allocation (the H100 ones: %v)", id, h100Allocs)
		}
	}
	if got := running(t, c, "workspace-b", "either"); !same(got, either) {
		t.Fatalf("(b) team B's A100 job changed: %v, was %v", got, either)
	}

	// (c) Team C's 8th 1g notebook on a 7-slice quota waits, the reason
	// naming a100-1g and 7 of 7.
	onMIG := map[string]string{"gputide_flavors": "a100-1g"}
	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "notebooks", Type: "service", Priority: 60, Count: 7, GPUs: 1, Meta: onMIG})
	notes := waitRunning(t, c, "workspace-c", "notebooks", 7, 30*time.Second)
	for id, p := range placedGroups(t, c, notes) {
		if p != (placement{Node: a100.NodeID, Group: a100MIG, Devices: 1}) {
			t.Fatalf("(c) notebook %s placed on %+v, want one 1g.5gb slice", id, p)
		}
	}
	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "notebook-8", Type: "service", Priority: 60, Count: 1, GPUs: 1, Meta: onMIG})
	var reason string
	err := waitFor(20*time.Second, 250*time.Millisecond, func() error {
		j := jobInfo(t, c, "workspace-c", "notebook-8")
		reason = j.Meta[jobmeta.MetaReason]
		if j.Meta[jobmeta.MetaStatus] != "waiting" || !strings.Contains(reason, "a100-1g") || !strings.Contains(reason, "7 of 7") {
			return fmt.Errorf("status %q, reason %q", j.Meta[jobmeta.MetaStatus], reason)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("(c) the 8th notebook: %v", err)
	}
	if got := running(t, c, "workspace-c", "notebook-8"); len(got) != 0 {
		t.Fatalf("(c) the 8th notebook runs: %v", got)
	}
	// The pinned job's gputide_flavors, which lists h100 the pin now
	// excludes, is no meta error.
	if log := br.Log.String(); strings.Contains(log, "job=workspace-b/either rule=meta") {
		t.Errorf("the pinned job got a meta error:\n%s", tail(log, 4000))
	}
	t.Logf("(c) reason: %s", reason)

	// (d) quota status, its -json and /metrics show each flavor apart.
	checkFlavorFigures(t, br)
	t.Logf("test body took %s", time.Since(began).Round(10*time.Millisecond))
}
