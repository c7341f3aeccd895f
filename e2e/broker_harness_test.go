package e2e

// Helpers of the broker's end-to-end tests (broker_test.go): a Nomad dev
// agent with the device plugin's mock backend (one node, 8 mock A100s), the
// broker in-process or as a subprocess, GPU-holding raw_exec jobs, and a
// loopback TCP proxy that can cut the broker off from Nomad.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/agent"
	brokerapi "github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

// workspaces are the reference scenario's namespaces.
var workspaces = []string{"workspace-a", "workspace-b", "workspace-c"}

// e2eQuota is the reference tree scaled to the 8 GPUs of one mock node.
const e2eQuota = `
quota "Quota1" {
  gpus             = 8
  child_preemption = true
  namespaces       = ["workspace-a"]
  quota "Quota1.1" {
    gpus       = %d
    namespaces = ["workspace-b"]
  }
  quota "Quota1.2" {
    gpus       = %d
    namespaces = ["workspace-c"]
  }
}
`

// startGPUNomad starts a dev agent with the gputide device plugin (mock
// backend) and the three workspaces, and waits for its 8 GPUs.
func startGPUNomad(t *testing.T) *nomadAgent {
	t.Helper()
	return startGPUNomadACL(t, false)
}

// startGPUNomadACL is startGPUNomad, with Nomad's ACLs enabled and
// bootstrapped when acl is set (the agent's Client then carries the
// management token).
func startGPUNomadACL(t *testing.T, acl bool) *nomadAgent {
	t.Helper()
	nomadBinary(t)
	bin := goBuild(t, pluginPkg, t.TempDir(), pluginFile)
	a := newNomadAgent(t, nomadOptions{
		ACL:     acl,
		Plugins: map[string]string{pluginFile: bin},
		ExtraConfig: fmt.Sprintf(`
plugin %q {
  config {
    backend        = "mock"
    mock_profile   = "dgxa100"
    mock_uuid_seed = "broker-e2e"
  }
}
`, pluginFile),
	})
	for _, ns := range workspaces {
		if _, err := a.Client.Namespaces().Register(&api.Namespace{Name: ns}, nil); err != nil {
			t.Fatal(err)
		}
	}
	err := waitFor(60*time.Second, 250*time.Millisecond, func() error {
		n, _, err := a.Client.Nodes().Info(a.NodeID, nil)
		if err != nil {
			return err
		}
		healthy := 0
		if n.NodeResources != nil {
			for _, d := range n.NodeResources.Devices {
				for _, in := range d.Instances {
					if d.Type == "gpu" && in.Healthy {
						healthy++
					}
				}
			}
		}
		if healthy != 8 {
			return fmt.Errorf("%d healthy GPUs", healthy)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("GPUs not fingerprinted: %v", err)
	}
	return a
}

// broker is a gputide agent under test.
type broker struct {
	Addr      string // HTTP address of its reads
	Log       *lockedBuffer
	QuotaFile string
	stop      func()
}

// brokerConfig writes a quota file and a broker config into a new folder
// and returns the config's path.
func brokerConfig(t *testing.T, nomadAddr string, b11, b12 int) (cfg, quotaFile string) {
	t.Helper()
	dir := t.TempDir()
	quotaFile = filepath.Join(dir, "quota.hcl")
	writeQuota(t, quotaFile, b11, b12)
	port := freePorts(t, 1)[0]
	cfg = filepath.Join(dir, "broker.hcl")
	src := fmt.Sprintf(`
nomad {
  address = %q
}
quota_file = "quota.hcl"
interval   = "2s"
staleness  = "3s"
http_bind  = "127.0.0.1:%d"
log_level  = "debug"
# The test Nomad runs without ACLs: reads need no token (DESIGN §9).
open_reads_without_acl = true
`, nomadAddr, port)
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, quotaFile
}

func writeQuota(t *testing.T, path string, b11, b12 int) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf(e2eQuota, b11, b12)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// startBroker runs the broker in-process on nomadAddr (Quota1.1 = b11 and
// Quota1.2 = b12 GPUs) until the test ends or stop is called.
func startBroker(t *testing.T, nomadAddr string, b11, b12 int) *broker {
	t.Helper()
	cfgPath, quotaFile := brokerConfig(t, nomadAddr, b11, b12)
	return runBroker(t, cfgPath, quotaFile)
}

// runBroker runs the broker in-process with the config file cfgPath (its
// quota file is quotaFile) until the test ends or stop is called, and
// waits until it acts.
func runBroker(t *testing.T, cfgPath, quotaFile string) *broker {
	t.Helper()
	cfg, err := agent.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	buf := &lockedBuffer{}
	log := hclog.New(&hclog.LoggerOptions{Name: "gputide", Level: hclog.Debug, Output: buf})
	ag, err := agent.New(cfg, agent.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ag.Run(ctx) }()
	var once sync.Once
	b := &broker{Addr: cfg.HTTPBind, Log: buf, QuotaFile: quotaFile, stop: func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("broker: %v", err)
			}
		})
	}}
	t.Cleanup(func() {
		b.stop()
		if t.Failed() {
			t.Logf("broker log:\n%s", tail(buf.String(), 12000))
		}
	})
	b.waitActing(t, 30*time.Second)
	return b
}

// health reads the broker's health.
func (b *broker) health() (agent.Health, error) {
	var h agent.Health
	err := getJSON("http://"+b.Addr+"/v1/agent/health", &h)
	return h, err
}

func (b *broker) waitActing(t *testing.T, timeout time.Duration) {
	t.Helper()
	err := waitFor(timeout, 100*time.Millisecond, func() error {
		h, err := b.health()
		if err != nil {
			return err
		}
		if !h.Acting {
			return fmt.Errorf("not acting: %s", h.Why)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("broker not acting: %v", err)
	}
}

func (b *broker) preemptions(t *testing.T) []brokerapi.PreemptionEntry {
	t.Helper()
	var out brokerapi.PreemptionsResponse
	if err := getJSON("http://"+b.Addr+"/v1/preemptions", &out); err != nil {
		t.Fatal(err)
	}
	return out.Preemptions
}

func getJSON(url string, v any) error {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// jobSpec describes a GPU-holding raw_exec job.
type jobSpec struct {
	Namespace, ID, Type string
	Priority            int
	Count, GPUs         int
	Meta                map[string]string
	Pool                string        // default: the holding pool
	KillTimeout         time.Duration // default 10s
	// Checkpoint is how long the task takes to exit after SIGINT (default 0.5s).
	Checkpoint string
	// Prompt: the task's shell waits for each of its 0.2 s sleeps in the
	// background, so that its SIGINT trap starts the checkpoint at once
	// instead of after the sleep under way (0-0.2 s later): the speed
	// test's victims, whose checkpoint would otherwise add that much noise.
	Prompt bool
}

// job builds the Nomad job: a shell loop that holds its GPUs and, on
// SIGINT, "checkpoints" for Checkpoint and exits 0.
func (s jobSpec) job() *api.Job {
	if s.Pool == "" {
		s.Pool = build.DefaultHoldingPool
	}
	if s.KillTimeout == 0 {
		s.KillTimeout = 10 * time.Second
	}
	if s.Checkpoint == "" {
		s.Checkpoint = "0.5"
	}
	meta := map[string]string{"gputide_pool": "default"}
	for k, v := range s.Meta {
		meta[k] = v
	}
	j := api.NewServiceJob(s.ID, s.ID, "global", s.Priority)
	if s.Type == "batch" {
		j = api.NewBatchJob(s.ID, s.ID, "global", s.Priority)
	}
	j.Namespace = &s.Namespace
	j.NodePool = &s.Pool
	j.Datacenters = []string{"*"}
	j.Meta = meta
	count := s.Count
	gpus := uint64(s.GPUs)
	hold := "sleep 0.2"
	if s.Prompt {
		hold = "sleep 0.2 & wait $!"
	}
	script := fmt.Sprintf("trap 'echo checkpointing; sleep %s; echo checkpoint saved; exit 0' INT TERM; echo holding $NVIDIA_VISIBLE_DEVICES; while :; do %s; done", s.Checkpoint, hold)
	task := api.NewTask("work", "raw_exec").
		SetConfig("command", "/bin/sh").
		SetConfig("args", []string{"-c", script})
	task.KillSignal = "SIGINT"
	task.KillTimeout = &s.KillTimeout
	cpu, mem := 20, 32
	task.Resources = &api.Resources{CPU: &cpu, MemoryMB: &mem,
		Devices: []*api.RequestedDevice{{Name: "nvidia/gpu", Count: &gpus}}}
	tg := api.NewTaskGroup("main", count).AddTask(task)
	attempts := 0
	tg.RestartPolicy = &api.RestartPolicy{Attempts: &attempts}
	if s.Type == "batch" {
		tg.ReschedulePolicy = &api.ReschedulePolicy{Attempts: &attempts, Unlimited: new(bool)}
	}
	j.AddTaskGroup(tg)
	return j
}

func submit(t *testing.T, c *api.Client, s jobSpec) {
	t.Helper()
	if _, _, err := c.Jobs().Register(s.job(), &api.WriteOptions{Namespace: s.Namespace}); err != nil {
		t.Fatalf("register %s/%s: %v", s.Namespace, s.ID, err)
	}
}

// allocs lists a job's allocations.
func allocs(t *testing.T, c *api.Client, ns, id string) []*api.AllocationListStub {
	t.Helper()
	out, _, err := c.Jobs().Allocations(id, true, &api.QueryOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// running returns the IDs of a job's running allocations, sorted.
func running(t *testing.T, c *api.Client, ns, id string) []string {
	var out []string
	for _, a := range allocs(t, c, ns, id) {
		if a.ClientStatus == api.AllocClientStatusRunning && a.DesiredStatus == api.AllocDesiredStatusRun {
			out = append(out, a.ID)
		}
	}
	sort.Strings(out)
	return out
}

// waitRunning waits until a job has n running allocations and returns them.
func waitRunning(t *testing.T, c *api.Client, ns, id string, n int, timeout time.Duration) []string {
	t.Helper()
	var got []string
	err := waitFor(timeout, 100*time.Millisecond, func() error {
		got = running(t, c, ns, id)
		if len(got) != n {
			return fmt.Errorf("%s/%s: %d running, want %d", ns, id, len(got), n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// gpusOf returns the GPU device IDs held by the allocations.
func gpusOf(t *testing.T, c *api.Client, ids []string) []string {
	t.Helper()
	var out []string
	for _, id := range ids {
		a, _, err := c.Allocations().Info(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range a.AllocatedResources.Tasks {
			for _, d := range tr.Devices {
				out = append(out, d.DeviceIDs...)
			}
		}
	}
	sort.Strings(out)
	return out
}

// liveGPUAllocs returns every live allocation holding GPUs, by ID, with its GPUs.
func liveGPUAllocs(t *testing.T, c *api.Client) map[string]int {
	t.Helper()
	list, _, err := c.Allocations().List(&api.QueryOptions{Namespace: "*", Params: map[string]string{"resources": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, a := range list {
		if a.ClientStatus != api.AllocClientStatusRunning && a.ClientStatus != api.AllocClientStatusPending {
			continue
		}
		n := 0
		if a.AllocatedResources != nil {
			for _, tr := range a.AllocatedResources.Tasks {
				for _, d := range tr.Devices {
					n += len(d.DeviceIDs)
				}
			}
		}
		if n > 0 {
			out[a.ID] = n
		}
	}
	return out
}

// stoppedAllocs returns the allocations Nomad was asked to stop (desired
// stop or evict), over all namespaces, sorted.
func stoppedAllocs(t *testing.T, c *api.Client) []string {
	t.Helper()
	list, _, err := c.Allocations().List(&api.QueryOptions{Namespace: "*"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range list {
		if a.DesiredStatus == api.AllocDesiredStatusStop || a.DesiredStatus == api.AllocDesiredStatusEvict {
			out = append(out, a.ID)
		}
	}
	sort.Strings(out)
	return out
}

// jobInfo reads a job.
func jobInfo(t *testing.T, c *api.Client, ns, id string) *api.Job {
	t.Helper()
	j, _, err := c.Jobs().Info(id, &api.QueryOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// cleanJobs stops every job of the workspaces, waits until their
// allocations are terminal, then purges the jobs, so the next test starts
// on an empty node (purging first would hide allocations still running).
func cleanJobs(t *testing.T, c *api.Client) {
	t.Helper()
	var all []*api.JobListStub
	for _, ns := range workspaces {
		jobs, _, err := c.Jobs().List(&api.QueryOptions{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			_, _, _ = c.Jobs().Deregister(j.ID, false, &api.WriteOptions{Namespace: ns})
		}
		all = append(all, jobs...)
	}
	err := waitFor(90*time.Second, 200*time.Millisecond, func() error {
		list, _, err := c.Allocations().List(&api.QueryOptions{Namespace: "*"})
		if err != nil {
			return err
		}
		for _, a := range list {
			if a.ClientStatus == api.AllocClientStatusRunning || a.ClientStatus == api.AllocClientStatusPending {
				return fmt.Errorf("allocation %s of %s/%s still %s", a.ID, a.Namespace, a.JobID, a.ClientStatus)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range all {
		_, _, _ = c.Jobs().Deregister(j.ID, true, &api.WriteOptions{Namespace: j.Namespace})
	}
}

func same(a, b []string) bool {
	return strings.Join(a, ",") == strings.Join(b, ",")
}

// tcpProxy forwards a loopback port to Nomad and can cut the connection.
type tcpProxy struct {
	Addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
}

func newTCPProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	p := &tcpProxy{target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Cut)
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns[in], p.conns[out] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
}

// Cut closes the listener and every open connection: Nomad is unreachable.
func (p *tcpProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// Restore listens again on the same address.
func (p *tcpProxy) Restore(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	p.serve(ln)
}
