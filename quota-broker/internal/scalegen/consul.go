package scalegen

import (
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

// Consul returns the address (host:port) of a Consul server for the
// benchmark: GPUTIDE_CONSUL_ADDR when set (CI's, e2e/tools/consul/ci-agent.sh),
// else a server started from CONSUL_BIN on loopback, the way CI starts its
// own (-server -bootstrap-expect=1, free ports, DNS and gRPC off), stopped
// when tb ends; "" when neither is set.
func Consul(tb testing.TB) string {
	tb.Helper()
	if addr := os.Getenv("GPUTIDE_CONSUL_ADDR"); addr != "" {
		return addr
	}
	bin := os.Getenv("CONSUL_BIN")
	if bin == "" {
		return ""
	}
	return startConsul(tb, bin)
}

func startConsul(tb testing.TB, bin string) string {
	tb.Helper()
	dir := tb.TempDir()
	ports := freePorts(tb, 4)
	logPath := filepath.Join(dir, "consul.log")
	logf, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "agent", "-server", "-bootstrap-expect=1", "-data-dir", filepath.Join(dir, "data"),
		"-node", "gputide-scale", "-bind", "127.0.0.1", "-client", "127.0.0.1", "-advertise", "127.0.0.1",
		"-http-port", fmt.Sprint(ports[0]), "-serf-lan-port", fmt.Sprint(ports[1]), "-serf-wan-port", fmt.Sprint(ports[2]),
		"-server-port", fmt.Sprint(ports[3]), "-dns-port", "-1", "-grpc-port", "-1", "-grpc-tls-port", "-1", "-log-level", "warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "CONSUL_HTTP_ADDR=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", bin, err)
	}
	tb.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	hc := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := hc.Get("http://" + addr + "/v1/status/leader")
		if err != nil {
			continue
		}
		var body [128]byte
		n, _ := resp.Body.Read(body[:])
		resp.Body.Close()
		if leader := strings.Trim(strings.TrimSpace(string(body[:n])), `"`); leader != "" {
			return addr
		}
	}
	log, _ := os.ReadFile(logPath)
	tb.Fatalf("consul at %s elected no leader within 60 s; its log:\n%s", addr, log)
	return ""
}

func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}
