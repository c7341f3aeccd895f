package e2e

// End-to-end test of the device plugin (issue 4) on a real Nomad dev agent:
// the agent loads the built nomad-device-gputide from its plugin_dir with the
// mock backend (8 x A100); the node shows 8 healthy devices with their
// attributes (API and `nomad node status -verbose`); the example jobspec
// asking for 2 GPUs gets NVIDIA_VISIBLE_DEVICES with 2 UUIDs; an Xid 79
// injected through the fault file leaves 7 healthy GPUs, a 7-GPU job is
// placed on the healthy ones only and an 8-GPU job cannot be placed; after
// recovery all 8 are healthy and the 8-GPU job runs once re-evaluated.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

const (
	gpuModel    = "Mock NVIDIA A100-SXM4-40GB"
	pluginFile  = "nomad-device-gputide"
	pluginPkg   = "github.com/gputide/gputide/device-plugin/cmd/nomad-device-gputide"
	smokeJob    = "../examples/reference/jobs/gpu-smoke.nomad.hcl"
	smokeTask   = "show-gpus"
	healthEvery = time.Second
)

// gpuDevices returns the node's nvidia/gpu instances of gpuModel.
func gpuDevices(t *testing.T, c *api.Client, nodeID string) (*api.NodeDeviceResource, error) {
	t.Helper()
	node, _, err := c.Nodes().Info(nodeID, nil)
	if err != nil {
		return nil, err
	}
	if node.NodeResources == nil {
		return nil, fmt.Errorf("node has no resources yet")
	}
	for _, d := range node.NodeResources.Devices {
		if d.Vendor == "nvidia" && d.Type == "gpu" && d.Name == gpuModel {
			return d, nil
		}
	}
	return nil, fmt.Errorf("node has no %s devices yet", gpuModel)
}

// waitHealthy waits until the node shows want healthy of 8 instances.
func waitHealthy(t *testing.T, c *api.Client, nodeID string, want int, within time.Duration) *api.NodeDeviceResource {
	t.Helper()
	var dev *api.NodeDeviceResource
	err := waitFor(within, 200*time.Millisecond, func() error {
		d, err := gpuDevices(t, c, nodeID)
		if err != nil {
			return err
		}
		healthy := 0
		for _, in := range d.Instances {
			if in.Healthy {
				healthy++
			}
		}
		if len(d.Instances) != 8 || healthy != want {
			return fmt.Errorf("%d of %d instances healthy, want %d of 8", healthy, len(d.Instances), want)
		}
		dev = d
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

// loadSmokeJob parses the example jobspec with the agent, as `nomad job
// run` does, and renames it.
func loadSmokeJob(t *testing.T, c *api.Client, id string, gpus int) *api.Job {
	t.Helper()
	text, err := os.ReadFile(smokeJob)
	if err != nil {
		t.Fatal(err)
	}
	job, err := c.Jobs().ParseHCL(string(text), true)
	if err != nil {
		t.Fatalf("the agent cannot parse %s: %v", smokeJob, err)
	}
	job.ID, job.Name = &id, &id
	dev := job.TaskGroups[0].Tasks[0].Resources.Devices[0]
	if dev.Name != "nvidia/gpu" {
		t.Fatalf("example asks for %q, want nvidia/gpu", dev.Name)
	}
	n := uint64(gpus)
	dev.Count = &n
	return job
}

// runJob registers job and waits for its first allocation to reach a
// terminal client status.
func runJob(t *testing.T, c *api.Client, job *api.Job) *api.Allocation {
	t.Helper()
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatalf("register %s: %v", *job.ID, err)
	}
	var alloc *api.Allocation
	err := waitFor(60*time.Second, 200*time.Millisecond, func() error {
		a, err := firstAlloc(c, *job.ID)
		if err != nil {
			return err
		}
		switch a.ClientStatus {
		case api.AllocClientStatusComplete:
			alloc = a
			return nil
		case api.AllocClientStatusFailed, api.AllocClientStatusLost:
			return errStop{fmt.Errorf("allocation %s %s: %v", a.ID, a.ClientStatus, a.TaskStates)}
		}
		return fmt.Errorf("allocation %s is %s", a.ID, a.ClientStatus)
	})
	if err != nil {
		t.Fatal(err)
	}
	return alloc
}

// firstAlloc reads the first allocation of job id (default namespace).
func firstAlloc(c *api.Client, id string) (*api.Allocation, error) {
	stubs, _, err := c.Jobs().Allocations(id, false, nil)
	if err != nil {
		return nil, err
	}
	if len(stubs) == 0 {
		return nil, fmt.Errorf("job %s has no allocation", id)
	}
	a, _, err := c.Allocations().Info(stubs[0].ID, nil)
	return a, err
}

// allocGPUs returns the device IDs Nomad assigned to the smoke task.
func allocGPUs(t *testing.T, a *api.Allocation) []string {
	t.Helper()
	tr := a.AllocatedResources.Tasks[smokeTask]
	if tr == nil || len(tr.Devices) != 1 {
		t.Fatalf("allocation %s: task resources %+v", a.ID, tr)
	}
	ids := append([]string(nil), tr.Devices[0].DeviceIDs...)
	sort.Strings(ids)
	return ids
}

// taskEnv reads the env.txt the smoke task wrote into its alloc dir.
func taskEnv(t *testing.T, c *api.Client, a *api.Allocation) map[string]string {
	t.Helper()
	rc, err := c.AllocFS().Cat(a, "alloc/env.txt", nil)
	if err != nil {
		t.Fatalf("read alloc/env.txt: %v", err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	return env
}

func TestDevicePluginOnNomad(t *testing.T) {
	nomadBinary(t) // skip before building anything when there is no Nomad
	bin := goBuild(t, pluginPkg, t.TempDir(), pluginFile)
	faults := filepath.Join(t.TempDir(), "faults")
	a := newNomadAgent(t, nomadOptions{
		Plugins: map[string]string{pluginFile: bin},
		ExtraConfig: fmt.Sprintf(`
plugin %q {
  config {
    backend             = "mock"
    mock_profile        = "dgxa100"
    mock_uuid_seed      = "e2e"
    mock_fault_file     = %q
    health_check_period = %q
    fingerprint_period  = "10s"
  }
}
`, pluginFile, faults, healthEvery),
	})
	c := a.Client

	// 1. Eight healthy GPUs with their attributes.
	dev := waitHealthy(t, c, a.NodeID, 8, 30*time.Second)
	ids := map[string]bool{}
	for _, in := range dev.Instances {
		if !strings.HasPrefix(in.ID, "GPU-") || in.Locality == nil || !regexp.MustCompile(`^00000000:[0-9a-f]{2}:00\.0$`).MatchString(in.Locality.PciBusID) {
			t.Errorf("instance %+v (locality %+v)", in, in.Locality)
		}
		ids[in.ID] = true
	}
	intAttr := func(k string, v int64, unit string) {
		t.Helper()
		at := dev.Attributes[k]
		if at == nil || at.IntVal == nil || *at.IntVal != v || at.Unit != unit {
			t.Errorf("attribute %s = %+v, want %d %s", k, at, v, unit)
		}
	}
	intAttr("memory", 40960, "MiB")
	intAttr("power", 400, "W")
	intAttr("bar1", 65536, "MiB")
	intAttr("cores_clock", 1410, "MHz")
	intAttr("pci_bandwidth", 31504, "MB/s")
	intAttr("nvlink_bandwidth", 600, "GB/s")
	if at := dev.Attributes["driver_version"]; at == nil || at.StringVal == nil || *at.StringVal != "550.54.15" {
		t.Errorf("driver_version = %+v", at)
	}

	// The same through the CLI an operator uses.
	out, err := exec.Command(a.Bin, "node", "status", "-verbose", "-address", a.Addr, a.NodeID).CombinedOutput()
	if err != nil {
		t.Fatalf("nomad node status: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "nvidia/gpu/"+gpuModel+"[GPU-"); n != 8 {
		t.Errorf("node status -verbose lists %d GPUs, want 8:\n%s", n, out)
	}
	for _, re := range []string{`memory\s+= 40960 MiB`, `power\s+= 400 W`, `cuda_version\s+= 12\.4`, `compute_capability\s+= 8\.0`} {
		if !regexp.MustCompile(re).Match(out) {
			t.Errorf("node status -verbose lacks %s:\n%s", re, out)
		}
	}

	// The 8-GPU example parses on this Nomad and asks for what it says.
	trainText, err := os.ReadFile("../examples/reference/jobs/gpu-train-8.nomad.hcl")
	if err != nil {
		t.Fatal(err)
	}
	train, err := c.Jobs().ParseHCL(string(trainText), true)
	if err != nil {
		t.Fatalf("gpu-train-8.nomad.hcl: %v", err)
	}
	if d := train.TaskGroups[0].Tasks[0].Resources.Devices[0]; d.Name != "nvidia/gpu" || *d.Count != 8 || len(d.Constraints) != 3 || len(d.Affinities) != 1 {
		t.Fatalf("gpu-train-8 asks for %+v", d)
	}

	// 2. The example job asking for 2 GPUs gets 2 UUIDs.
	alloc := runJob(t, c, loadSmokeJob(t, c, "gpu-smoke", 2))
	got := allocGPUs(t, alloc)
	env := taskEnv(t, c, alloc)
	visible := strings.Split(env["NVIDIA_VISIBLE_DEVICES"], ",")
	sort.Strings(visible)
	if len(visible) != 2 || strings.Join(visible, ",") != strings.Join(got, ",") {
		t.Fatalf("NVIDIA_VISIBLE_DEVICES=%q, allocated %v", env["NVIDIA_VISIBLE_DEVICES"], got)
	}
	for _, id := range visible {
		if !ids[id] {
			t.Errorf("task got %s, not a node GPU", id)
		}
	}

	// 3. GPU 3 raises Xid 79: 7 healthy, and nothing lands on it.
	if err := os.WriteFile(faults, []byte("3 xid 79\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	injected := time.Now()
	dev = waitHealthy(t, c, a.NodeID, 7, 15*time.Second)
	t.Logf("node showed 7 healthy GPUs %s after the fault was written (health period %s)", time.Since(injected).Round(10*time.Millisecond), healthEvery)
	var bad string
	for _, in := range dev.Instances {
		if !in.Healthy {
			bad = in.ID
			if in.Locality.PciBusID != "00000000:4e:00.0" || !strings.Contains(in.HealthDescription, "Xid 79") {
				t.Errorf("unhealthy instance %+v, want GPU 3 (bus 4e) with Xid 79", in)
			}
		}
	}

	seven := runJob(t, c, loadSmokeJob(t, c, "gpu-seven", 7))
	for _, id := range allocGPUs(t, seven) {
		if id == bad {
			t.Fatalf("a job was placed on the unhealthy GPU %s", bad)
		}
	}
	if n := len(allocGPUs(t, seven)); n != 7 {
		t.Fatalf("7-GPU job got %d GPUs", n)
	}

	eight := loadSmokeJob(t, c, "gpu-eight", 8)
	resp, _, err := c.Jobs().Register(eight, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := waitEval(c, resp.EvalID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.FailedTGAllocs) == 0 || ev.BlockedEval == "" {
		t.Fatalf("an 8-GPU job was placed with one GPU unhealthy: eval %+v", ev)
	}
	if stubs, _, _ := c.Jobs().Allocations("gpu-eight", false, nil); len(stubs) != 0 {
		t.Fatalf("8-GPU job has allocations %v", stubs)
	}

	// 4. Recovery: 8 healthy again, and the 8-GPU job runs. Nomad does not
	// unblock a blocked evaluation when a device turns healthy (only on
	// freed capacity or node changes it tracks), so re-evaluate the job as
	// an operator (or the gputide broker) would.
	if err := os.WriteFile(faults, []byte("3 xid 79\n3 recover\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, c, a.NodeID, 8, 15*time.Second)
	if _, _, err := c.Jobs().ForceEvaluate("gpu-eight", nil); err != nil {
		t.Fatal(err)
	}
	err = waitFor(60*time.Second, 250*time.Millisecond, func() error {
		stubs, _, err := c.Jobs().Allocations("gpu-eight", false, nil)
		if err != nil {
			return err
		}
		for _, s := range stubs {
			if s.ClientStatus == api.AllocClientStatusComplete {
				return nil
			}
		}
		return fmt.Errorf("8-GPU job allocations: %d", len(stubs))
	})
	if err != nil {
		t.Fatalf("the 8-GPU job did not run after recovery: %v", err)
	}
}

// waitEval waits for an evaluation to finish processing.
func waitEval(c *api.Client, id string) (*api.Evaluation, error) {
	var ev *api.Evaluation
	err := waitFor(30*time.Second, 100*time.Millisecond, func() error {
		e, _, err := c.Evaluations().Info(id, nil)
		if err != nil {
			return err
		}
		if e.Status != api.EvalStatusComplete {
			return fmt.Errorf("evaluation %s is %s", id, e.Status)
		}
		ev = e
		return nil
	})
	return ev, err
}
