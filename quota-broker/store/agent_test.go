package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// consulAgent is a Consul server started from CONSUL_BIN on loopback with
// its own data directory (so a restart keeps the data).
type consulAgent struct {
	bin, dataDir, logPath string
	ports                 [4]int // http, serf lan, serf wan, server
	cmd                   *exec.Cmd
}

func (a *consulAgent) addr() string { return fmt.Sprintf("127.0.0.1:%d", a.ports[0]) }

// needAgent skips (or fails under CI) a test that needs a real agent.
func needAgent(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s; CI must provide it (.ci/run exports CONSUL_BIN and GPUTIDE_CONSUL_ADDR)", why)
	}
	t.Skipf("%s; skipping (set CONSUL_BIN, see e2e/tools/consul/build.sh)", why)
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// startConsul starts a private server (-server -bootstrap-expect=1) from
// CONSUL_BIN and stops it when the test ends.
func startConsul(t testing.TB) *consulAgent {
	t.Helper()
	bin := os.Getenv("CONSUL_BIN")
	if bin == "" {
		needAgent(t, "CONSUL_BIN is not set")
	}
	dir := t.TempDir()
	a := &consulAgent{bin: bin, dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "consul.log")}
	copy(a.ports[:], freePorts(t, 4))
	a.start(t)
	t.Cleanup(func() { a.stop(t) })
	return a
}

func (a *consulAgent) start(t testing.TB) {
	t.Helper()
	logf, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	a.cmd = exec.Command(a.bin, "agent", "-server", "-bootstrap-expect=1", "-data-dir", a.dataDir,
		"-node", "gputide-test", "-bind", "127.0.0.1", "-client", "127.0.0.1", "-advertise", "127.0.0.1",
		"-http-port", fmt.Sprint(a.ports[0]), "-serf-lan-port", fmt.Sprint(a.ports[1]),
		"-serf-wan-port", fmt.Sprint(a.ports[2]), "-server-port", fmt.Sprint(a.ports[3]),
		"-dns-port", "-1", "-grpc-port", "-1", "-grpc-tls-port", "-1", "-log-level", "warn")
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	a.cmd.Env = append(os.Environ(), "CONSUL_HTTP_ADDR=")
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", a.bin, err)
	}
	waitLeader(t, a.addr(), 60*time.Second, a.logPath)
}

// stop kills the agent (SIGKILL with kill9, else SIGTERM) and waits.
func (a *consulAgent) kill(kill9 bool) {
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	sig := syscall.SIGTERM
	if kill9 {
		sig = syscall.SIGKILL
	}
	_ = a.cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { _ = a.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = a.cmd.Process.Kill()
		<-done
	}
	a.cmd = nil
}

func (a *consulAgent) stop(t testing.TB) { a.kill(false) }

// waitLeader polls /v1/status/leader until the cluster has a leader.
func waitLeader(t testing.TB, addr string, within time.Duration, logPath string) {
	t.Helper()
	deadline := time.Now().Add(within)
	c := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		resp, err := c.Get("http://" + addr + "/v1/status/leader")
		if err == nil {
			var b [128]byte
			n, _ := resp.Body.Read(b[:])
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.Trim(strings.TrimSpace(string(b[:n])), `"`) != "" {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	logTail := ""
	if data, err := os.ReadFile(logPath); err == nil {
		logTail = string(data[max(0, len(data)-2000):])
	}
	t.Fatalf("consul at %s has no leader after %s\n%s", addr, within, logTail)
}

// uniquePrefix keeps tests apart on a shared agent.
func uniquePrefix(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return "gputide-test/" + name + "-" + hex.EncodeToString(b[:]) + "/"
}

// consulAddr returns GPUTIDE_CONSUL_ADDR, or a private agent's address.
func consulAddr(t testing.TB) string {
	t.Helper()
	if a := consulAddrFromEnv(); a != "" {
		return a
	}
	return startConsul(t).addr()
}

// newConsulStore is a store under a fresh prefix of a real agent.
func newConsulStore(t testing.TB, addr string) *KV {
	t.Helper()
	kv, err := NewConsul(ConsulConfig{Address: addr, Prefix: uniquePrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kv.ReadGuarded(ctx); err != nil {
		t.Fatalf("consul at %s: %v", addr, err)
	}
	return kv
}
