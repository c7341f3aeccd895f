package e2e

// Leader failover of two brokers on one Consul store (DESIGN L12, §6):
// both watch one Nomad dev agent, only the holder of the Consul session
// lock acts. kill -9 of the leader mid-preemption: the standby acts within
// 25 s and no victim is stopped twice; a graceful stop: the standby takes
// over within 3 s. Needs NOMAD_BIN and CONSUL_BIN (.ci/run builds Consul
// with e2e/tools/consul/ci-agent.sh); without them it skips (fails under CI).

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	brokerapi "github.com/gputide/gputide/quota-broker/api"
	"github.com/hashicorp/nomad/api"
)

// Failover bounds of DESIGN L12.
const (
	crashTakeover    = 25 * time.Second
	gracefulTakeover = 3 * time.Second
)

// consulBinary is CONSUL_BIN; without it the test skips (fails under CI).
func consulBinary(t testing.TB) string {
	t.Helper()
	p := os.Getenv("CONSUL_BIN")
	if p == "" {
		needAgent(t, "no Consul binary: set CONSUL_BIN (bash e2e/tools/consul/build.sh builds it) to run the failover tests")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("CONSUL_BIN=%s: %v", p, err)
	}
	return p
}

// startConsul starts a private Consul server on loopback (free ports, DNS
// and gRPC off, as ci-agent.sh does) and returns its HTTP address.
func startConsul(t *testing.T) string {
	t.Helper()
	bin := consulBinary(t)
	dir := t.TempDir()
	p := freePorts(t, 5)
	log := &lockedBuffer{}
	cmd := exec.Command(bin, "agent", "-server", "-bootstrap-expect=1", "-data-dir", filepath.Join(dir, "data"),
		"-node", "gputide-e2e", "-bind", "127.0.0.1", "-client", "127.0.0.1", "-advertise", "127.0.0.1",
		"-http-port", strconv.Itoa(p[0]), "-dns-port", "-1", "-grpc-port", "-1", "-grpc-tls-port", "-1",
		"-serf-lan-port", strconv.Itoa(p[1]), "-serf-wan-port", strconv.Itoa(p[2]), "-server-port", strconv.Itoa(p[3]),
		"-log-level", "warn")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = agentEnv()
	rp, err := startGuarded(cmd, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		killGroup(cmd)
		rp.done()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", p[0])
	err = waitFor(60*time.Second, 100*time.Millisecond, func() error {
		var leader string
		if err := getJSON("http://"+addr+"/v1/status/leader", &leader); err != nil {
			return err
		}
		if leader == "" {
			return fmt.Errorf("no leader yet")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("consul did not start: %v\n%s", err, tail(log.String(), 4000))
	}
	return addr
}

// procBroker is a gputide agent subprocess on the shared Consul store.
type procBroker struct {
	name string
	bin  string
	cfg  string
	log  string
	addr string
	cmd  *exec.Cmd
}

// newProcBroker writes a broker configuration on consulAddr under prefix
// (Quota1.1 = 3, Quota1.2 = 5 GPUs).
func newProcBroker(t *testing.T, name, bin, nomadAddr, consulAddr, prefix string) *procBroker {
	t.Helper()
	dir := t.TempDir()
	writeQuota(t, filepath.Join(dir, "quota.hcl"), 3, 5)
	port := freePorts(t, 1)[0]
	cfg := filepath.Join(dir, "broker.hcl")
	src := fmt.Sprintf(`
nomad {
  address = %q
}
consul {
  address = %q
  prefix  = %q
}
quota_file = "quota.hcl"
interval   = "2s"
staleness  = "3s"
http_bind  = "127.0.0.1:%d"
log_level  = "debug"
# The test Nomad runs without ACLs: reads need no token (DESIGN §9).
open_reads_without_acl = true
`, nomadAddr, consulAddr, prefix, port)
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &procBroker{name: name, bin: bin, cfg: cfg, log: filepath.Join(dir, "broker.log"), addr: fmt.Sprintf("127.0.0.1:%d", port)}
	t.Cleanup(func() {
		b.signal(syscall.SIGTERM)
		if t.Failed() {
			out, _ := os.ReadFile(b.log)
			t.Logf("broker %s log:\n%s", b.name, tail(string(out), 8000))
		}
	})
	return b
}

func (b *procBroker) start(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(b.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b.cmd = exec.Command(b.bin, "agent", "-config", b.cfg)
	b.cmd.Stdout, b.cmd.Stderr = f, f
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

// signal sends sig and waits for the process to exit (SIGKILL after 30 s).
func (b *procBroker) signal(sig syscall.Signal) {
	if b.cmd == nil || b.cmd.ProcessState != nil {
		return
	}
	_ = b.cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
}

func (b *procBroker) health() (h struct {
	Acting   bool   `json:"acting"`
	Why      string `json:"why"`
	Leader   string `json:"leader"`
	IsLeader bool   `json:"is_leader"`
	Store    string `json:"store"`
}, err error) {
	err = getJSON("http://"+b.addr+"/v1/agent/health", &h)
	return h, err
}

// leading reports whether b holds the lock and its last cycle acted.
func (b *procBroker) leading() bool {
	h, err := b.health()
	return err == nil && h.IsLeader && h.Acting
}

// standing reports whether b is up as a standby that plans.
func (b *procBroker) standing() bool {
	h, err := b.health()
	return err == nil && !h.IsLeader && h.Leader != "" && h.Store == "consul"
}

// waitTakeover polls b every 20 ms until it leads and acts, and returns
// how long that took from since.
func waitTakeover(t *testing.T, b *procBroker, since time.Time, bound time.Duration) time.Duration {
	t.Helper()
	for !b.leading() {
		if time.Since(since) > bound+10*time.Second {
			h, err := b.health()
			t.Fatalf("broker %s did not take over within %s: health %+v %v", b.name, time.Since(since), h, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(since)
}

// stopGate is a reverse proxy to Nomad that passes the first allocation
// stop and holds every later one unanswered (never forwarded), so that a
// broker behind it is caught between the stops of one preemption.
type stopGate struct {
	URL   string
	mu    sync.Mutex
	stops int
	held  chan struct{} // closed when a stop is held
	once  sync.Once
}

func newStopGate(t *testing.T, nomadAddr string) *stopGate {
	t.Helper()
	target, err := url.Parse(nomadAddr)
	if err != nil {
		t.Fatal(err)
	}
	g := &stopGate{held: make(chan struct{})}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // the event stream
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/allocation/") && strings.HasSuffix(r.URL.Path, "/stop") {
			g.mu.Lock()
			g.stops++
			n := g.stops
			g.mu.Unlock()
			if n > 1 {
				g.once.Do(func() { close(g.held) })
				<-r.Context().Done() // held until the broker dies
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(srv.CloseClientConnections) // first: a held stop ends with its connection
	g.URL = srv.URL
	return g
}

// pair starts two brokers and returns (leader, standby) once both are up;
// the leader reaches Nomad at leaderNomad, the standby at nomadAddr.
func pair(t *testing.T, bin, nomadAddr, consulAddr, prefix string, leaderNomad ...string) (*procBroker, *procBroker) {
	t.Helper()
	xNomad := nomadAddr
	if len(leaderNomad) > 0 {
		xNomad = leaderNomad[0]
	}
	x := newProcBroker(t, "x", bin, xNomad, consulAddr, prefix)
	y := newProcBroker(t, "y", bin, nomadAddr, consulAddr, prefix)
	x.start(t)
	if err := waitFor(60*time.Second, 100*time.Millisecond, func() error {
		if !x.leading() {
			return fmt.Errorf("x not leading")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	y.start(t)
	if err := waitFor(60*time.Second, 100*time.Millisecond, func() error {
		if !y.standing() {
			h, err := y.health()
			return fmt.Errorf("y not standing by: %+v %v", h, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return x, y
}

func TestBrokerLeaderFailover(t *testing.T) {
	consulAddr := startConsul(t)
	a := startGPUNomad(t)
	bin := goBuild(t, "github.com/gputide/gputide/quota-broker/cmd/gputide", t.TempDir(), "gputide")
	var n int
	prefix := func() string { n++; return fmt.Sprintf("gputide-e2e-%d/", n) }

	t.Run("kill -9 of the leader mid-preemption", func(t *testing.T) {
		defer cleanJobs(t, a.Client)
		killMidPreemption(t, a, bin, consulAddr, prefix())
	})
	t.Run("graceful stop", func(t *testing.T) {
		defer cleanJobs(t, a.Client)
		leader, standby := pair(t, bin, a.Addr, consulAddr, prefix())
		t0 := time.Now()
		leader.signal(syscall.SIGTERM)
		took := waitTakeover(t, standby, t0, gracefulTakeover)
		t.Logf("graceful takeover: %s", took.Round(time.Millisecond))
		if took > gracefulTakeover {
			t.Fatalf("takeover after a graceful stop took %s, want within %s (L12)", took, gracefulTakeover)
		}
	})
	// GPUTIDE_FAILOVER_RUNS kill -9 runs (default 2) for docs/benchmarks.md.
	runs := 2
	if v, err := strconv.Atoi(os.Getenv("GPUTIDE_FAILOVER_RUNS")); err == nil && v > 0 {
		runs = v
	}
	t.Run("failover time", func(t *testing.T) {
		x, y := pair(t, bin, a.Addr, consulAddr, prefix())
		leader, standby := x, y
		var times []time.Duration
		for i := 0; i < runs; i++ {
			t0 := time.Now()
			leader.signal(syscall.SIGKILL)
			took := waitTakeover(t, standby, t0, crashTakeover)
			times = append(times, took)
			t.Logf("kill -9 run %d: %s leads after %s", i+1, standby.name, took.Round(time.Millisecond))
			if took > crashTakeover {
				t.Errorf("takeover after kill -9 took %s, want within %s (L12)", took, crashTakeover)
			}
			leader.start(t) // back as the standby
			if err := waitFor(60*time.Second, 100*time.Millisecond, func() error {
				if !leader.standing() {
					return fmt.Errorf("%s not standing by", leader.name)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			leader, standby = standby, leader
		}
		t.Logf("failover times over %d kill -9 runs: %v", runs, times)
	})
}

// killMidPreemption: inference preempts team C's training (two
// allocations, 15 s to checkpoint). The leader reaches Nomad through a gate
// that passes its first stop and holds the second: it is killed between
// the two stops of the preemption. The standby acts within 25 s, finishes
// that preemption (the second victim, not another one), the inference
// runs, and each victim was stopped once.
func killMidPreemption(t *testing.T, a *nomadAgent, bin, consulAddr, prefix string) {
	c := a.Client
	gate := newStopGate(t, a.Addr)
	leader, standby := pair(t, bin, a.Addr, consulAddr, prefix, gate.URL)
	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "training-f", Type: "batch", Priority: 50, Count: 2, GPUs: 2,
		Checkpoint: "15", KillTimeout: 40 * time.Second})
	cTrain := waitRunning(t, c, "workspace-c", "training-f", 2, 30*time.Second)
	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "notebook", Type: "service", Priority: 60, Count: 1, GPUs: 1})
	cNote := waitRunning(t, c, "workspace-c", "notebook", 1, 30*time.Second)
	submit(t, c, jobSpec{Namespace: "workspace-b", ID: "training", Type: "batch", Priority: 50, Count: 1, GPUs: 3})
	bTrain := waitRunning(t, c, "workspace-b", "training", 1, 30*time.Second)
	before := stoppedAllocs(t, c)

	submit(t, c, jobSpec{Namespace: "workspace-a", ID: "inference", Type: "service", Priority: 80, Count: 1, GPUs: 4})
	select {
	case <-gate.held:
	case <-time.After(60 * time.Second):
		t.Fatal("the leader made no second stop")
	}
	// Nomad marks the first victim stopped once its evaluation ran.
	if err := waitFor(20*time.Second, 20*time.Millisecond, func() error {
		if n := len(minus(stoppedAllocs(t, c), before)); n != 1 {
			return fmt.Errorf("%d allocations stopped before the kill, want 1", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	leader.signal(syscall.SIGKILL) // between the two stops of one preemption
	took := waitTakeover(t, standby, t0, crashTakeover)
	t.Logf("takeover after kill -9 mid-preemption: %s", took.Round(time.Millisecond))
	if took > crashTakeover {
		t.Fatalf("takeover after kill -9 took %s, want within %s (L12)", took, crashTakeover)
	}
	inf := waitRunning(t, c, "workspace-a", "inference", 1, 60*time.Second)
	if stopped := minus(stoppedAllocs(t, c), before); !same(stopped, cTrain) {
		t.Fatalf("stopped %v, want exactly %v", stopped, cTrain)
	}
	// Stopped once each: one alloc-stop evaluation per victim.
	evals, _, err := c.Jobs().Evaluations("training-f", &api.QueryOptions{Namespace: "workspace-c"})
	if err != nil {
		t.Fatal(err)
	}
	stops := 0
	for _, e := range evals {
		if e.TriggeredBy == "alloc-stop" {
			stops++
		}
	}
	if stops != 2 {
		t.Fatalf("alloc-stop evaluations = %d, want 2 (no allocation stopped twice)", stops)
	}
	if !same(running(t, c, "workspace-c", "notebook"), cNote) || !same(running(t, c, "workspace-b", "training"), bTrain) {
		t.Fatal("an allocation outside the plan was touched")
	}
	if got := gpusOf(t, c, inf); len(got) != 4 {
		t.Fatalf("inference GPUs %v", got)
	}
	// The history in Consul has each preemption once, read by the new leader.
	var rec brokerapi.PreemptionsResponse
	if err := getJSON("http://"+standby.addr+"/v1/preemptions", &rec); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, p := range rec.Preemptions {
		seen[p.Alloc]++
	}
	for _, id := range cTrain {
		if seen[id] > 1 {
			t.Fatalf("preemption of %s recorded %d times", id, seen[id])
		}
	}
}
