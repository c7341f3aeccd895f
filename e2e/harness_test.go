package e2e

// The harness starts real agents for end-to-end tests. Nomad: a dev agent
// (server and client in one process) from NOMAD_BIN, or `nomad` on PATH,
// bound to 127.0.0.1 on free ports, with a temporary data dir and
// plugin_dir, raw_exec enabled, AWS_CA_BUNDLE removed from its environment
// (the client's AWS fingerprinter exits the agent when it is set), and any
// extra agent config the test gives. Stopping purges the jobs first, then
// interrupts the agent and waits for it, kills what is left of its process
// group and of its task executors' sessions, then checks that no mount
// under the data dir is left behind. Each agent (Nomad, the Autoscaler,
// Consul) runs in its own process group watched by a reaper process
// (startGuarded): if the test process dies without running its cleanups
// (a `go test -timeout` panic, a SIGKILL, Ctrl-C), the reaper kills the
// group and the executors' sessions, so that no `nomad logmon`, executor or
// task outlives the test.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// nomadBinary finds the Nomad binary: NOMAD_BIN, else `nomad` on PATH.
// Without one the test skips with a message, or fails when the CI
// environment variable is set (CI must run every end-to-end test).
func nomadBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("NOMAD_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("NOMAD_BIN=%s: %v", p, err)
		}
		return p
	}
	p, err := exec.LookPath("nomad")
	if err != nil {
		needAgent(t, "no Nomad binary: set NOMAD_BIN to a nomad executable (or put nomad on PATH) to run the end-to-end tests")
	}
	return p
}

// needAgent stops a test that needs a real agent and has none: under CI
// (the environment variable CI set to anything but "" or "false") it
// fails, elsewhere it skips with the same message.
func needAgent(t testing.TB, msg string) {
	t.Helper()
	if inCI() {
		t.Fatalf("CI=%s: %s", os.Getenv("CI"), msg)
	} else {
		t.Skip(msg)
	}
}

// inCI reports whether the CI environment variable asks for a CI run.
func inCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false" && v != "0"
}

// nomadOptions configure startNomad.
type nomadOptions struct {
	// ExtraConfig is HCL appended to the agent config, e.g. plugin blocks
	// or client settings.
	ExtraConfig string
	// Plugins maps file names in plugin_dir to binaries copied there.
	Plugins map[string]string
	// ReadyTimeout bounds the wait for a ready client node (default 60s).
	ReadyTimeout time.Duration
	// ACL runs the agent with acl { enabled = true } and bootstraps the
	// ACL system through the API; the agent's Client then carries the
	// bootstrap (management) token, also in nomadAgent.ManagementToken.
	ACL bool
}

// nomadAgent is one running dev agent.
type nomadAgent struct {
	Client    *api.Client
	Addr      string
	Dir       string
	DataDir   string
	PluginDir string
	NodeID    string
	Bin       string
	// ManagementToken is the bootstrap token's secret (nomadOptions.ACL).
	ManagementToken string
	// RPCAddr is the agent's RPC address, "127.0.0.1:port": the server
	// that newNomadClient joins client agents to.
	RPCAddr string

	t        testing.TB
	cmd      *exec.Cmd
	reaper   *reaper
	log      *lockedBuffer
	exited   chan struct{}
	stopOnce sync.Once
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for i := 0; i < n; i++ {
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

// startNomad starts a dev agent and waits until its client node is ready.
// It returns the API client and a stop function (also registered with
// t.Cleanup; calling it twice is fine).
func startNomad(t testing.TB, opts nomadOptions) (*api.Client, func()) {
	a := newNomadAgent(t, opts)
	return a.Client, a.Stop
}

// newNomadAgent is startNomad returning the whole agent.
func newNomadAgent(t testing.TB, opts nomadOptions) *nomadAgent {
	t.Helper()
	a := prepareAgent(t, opts.Plugins)
	ports := freePorts(t, 3)
	extra := opts.ExtraConfig
	if opts.ACL {
		extra += "\nacl {\n  enabled = true\n}\n"
	}
	a.Addr = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	a.RPCAddr = fmt.Sprintf("127.0.0.1:%d", ports[1])
	a.launch(agentConfig(a, ports, extra), "-dev", "-bind", "127.0.0.1")
	client := a.Client
	timeout := opts.ReadyTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	if opts.ACL {
		a.bootstrapACL(timeout)
	}
	err := waitFor(timeout, 250*time.Millisecond, func() error {
		if err := a.exitedEarly(); err != nil {
			return err
		}
		nodes, _, err := client.Nodes().List(nil)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.Status == api.NodeStatusReady {
				a.NodeID = n.ID
				return nil
			}
		}
		return errors.New("no ready node yet")
	})
	if err != nil {
		t.Fatalf("nomad agent not ready: %v\n%s", err, tail(a.log.String(), 4000))
	}
	return a
}

// prepareAgent makes an agent's folders under a new temporary dir (data
// dir, plugin_dir with plugins copied in: file name -> binary).
func prepareAgent(t testing.TB, plugins map[string]string) *nomadAgent {
	t.Helper()
	dir := t.TempDir()
	a := &nomadAgent{
		Dir:       dir,
		DataDir:   filepath.Join(dir, "data"),
		PluginDir: filepath.Join(dir, "plugins"),
		Bin:       nomadBinary(t),
		t:         t,
		log:       &lockedBuffer{},
		exited:    make(chan struct{}),
	}
	for _, d := range []string{a.DataDir, a.PluginDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, src := range plugins {
		if err := copyFile(src, filepath.Join(a.PluginDir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// agentConfig is the agent config every test agent shares: its folders,
// loopback, the given HTTP, RPC and Serf ports, raw_exec, and extra.
func agentConfig(a *nomadAgent, ports []int, extra string) string {
	return fmt.Sprintf(`
data_dir   = %q
plugin_dir = %q
bind_addr  = "127.0.0.1"
log_level  = "DEBUG"

ports {
  http = %d
  rpc  = %d
  serf = %d
}

plugin "raw_exec" {
  config {
    enabled = true
  }
}
%s
`, a.DataDir, a.PluginDir, ports[0], ports[1], ports[2], extra)
}

// launch writes config to the agent's agent.hcl and starts `nomad agent
// <args> -config agent.hcl` in its own process group, with its output in
// the agent's log, Stop registered as cleanup and a.Client on a.Addr.
func (a *nomadAgent) launch(config string, args ...string) {
	a.t.Helper()
	cfgPath := filepath.Join(a.Dir, "agent.hcl")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		a.t.Fatal(err)
	}
	cmd := exec.Command(a.Bin, append(append([]string{"agent"}, args...), "-config", cfgPath)...)
	cmd.Dir = a.Dir
	cmd.Env = agentEnv()
	cmd.Stdout, cmd.Stderr = a.log, a.log
	rp, err := startGuarded(cmd, a.Dir)
	if err != nil {
		a.t.Fatalf("failed to start nomad: %v", err)
	}
	a.cmd, a.reaper = cmd, rp
	go func() {
		_ = cmd.Wait()
		close(a.exited)
	}()
	a.t.Cleanup(a.Stop)
	client, err := api.NewClient(&api.Config{Address: a.Addr})
	if err != nil {
		a.t.Fatal(err)
	}
	a.Client = client
}

// exitedEarly returns, as an errStop for waitFor, that the agent exited
// (with its log), or nil while it runs.
func (a *nomadAgent) exitedEarly() error {
	select {
	case <-a.exited:
		return errStop{fmt.Errorf("nomad exited early:\n%s", a.log)}
	default:
		return nil
	}
}

// bootstrapACL bootstraps the agent's ACL system through the API
// (retrying until a leader is elected) and sets the management token on
// a.Client.
func (a *nomadAgent) bootstrapACL(timeout time.Duration) {
	a.t.Helper()
	err := waitFor(timeout, 250*time.Millisecond, func() error {
		if err := a.exitedEarly(); err != nil {
			return err
		}
		tok, _, err := a.Client.ACLTokens().Bootstrap(nil)
		if err != nil {
			return err
		}
		a.ManagementToken = tok.SecretID
		return nil
	})
	if err != nil {
		a.t.Fatalf("ACL bootstrap: %v\n%s", err, tail(a.log.String(), 4000))
	}
	a.Client.SetSecretID(a.ManagementToken)
}

// agentEnv is this process's environment without AWS_CA_BUNDLE and
// NOMAD_* variables that would point the agent elsewhere.
func agentEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "AWS_CA_BUNDLE" || k == "NOMAD_ADDR" || k == "NOMAD_TOKEN" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// Logs returns the agent's output so far.
func (a *nomadAgent) Logs() string { return a.log.String() }

// Stop purges every job, interrupts the agent and waits for it to exit,
// kills what is left of its process group (a task's logmon or executor,
// also when the agent exited early or failed to start), then fails the
// test if mounts under the data dir remain (and unmounts them).
func (a *nomadAgent) Stop() {
	a.stopOnce.Do(func() {
		if a.cmd == nil || a.cmd.Process == nil {
			return
		}
		select {
		case <-a.exited:
		default:
			a.purgeJobs()
			_ = a.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-a.exited:
			case <-time.After(30 * time.Second):
				_ = a.cmd.Process.Kill()
				<-a.exited
			}
		}
		killGroup(a.cmd)
		killSessionsUnder(a.Dir)
		a.reaper.done()
		if left := mountsUnder(a.DataDir); len(left) > 0 {
			for _, m := range left {
				_ = syscall.Unmount(m, syscall.MNT_DETACH)
			}
			a.t.Errorf("nomad left mounts under %s: %v", a.DataDir, left)
		}
	})
}

// ownGroup makes cmd the leader of a new process group, so that killGroup
// reaches the processes it starts (Nomad's logmon and executors, an
// autoscaler's plugins) after it is gone.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// killGroup sends SIGKILL to the process group of cmd (started with
// ownGroup): what its leader left behind. The leader has been waited for.
func killGroup(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil || cmd.Process.Pid <= 0 {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// reaperEnv, set in the environment of this test binary run again by
// startGuarded, makes TestMain a reaper for the agents under that folder.
const reaperEnv = "GPUTIDE_E2E_REAPER_DIR"

// TestMain runs the tests, or, in a process startGuarded started, the
// reaper.
func TestMain(m *testing.M) {
	if dir := os.Getenv(reaperEnv); dir != "" {
		reap(dir, os.Stdin)
		return
	}
	os.Exit(m.Run())
}

// reaper is the process that kills an agent's process group and the
// sessions of its executors if this test process dies first.
type reaper struct {
	cmd *exec.Cmd
	w   io.WriteCloser
}

// startGuarded starts cmd as the leader of its own process group (ownGroup)
// under the watch of a reaper: this test binary run again, in its own
// process group, ignoring interrupts, reading a pipe only this process
// holds. The reaper is told the group before cmd runs anything, and
// "done" by reaper.done once the harness has stopped the agent itself;
// if the pipe closes without "done" (this process died without running
// its cleanups), it kills the group and every session led by a process
// whose command line names a path under dir (killSessionsUnder), then
// unmounts what is left mounted under dir and removes dir. Without
// a reaper (it failed to start) the agent still starts.
func startGuarded(cmd *exec.Cmd, dir string) (*reaper, error) {
	rp := &reaper{cmd: exec.Command(os.Args[0])}
	rp.cmd.Env = append(os.Environ(), reaperEnv+"="+dir)
	ownGroup(rp.cmd) // not reached by the terminal's Ctrl-C with this process
	w, err := rp.cmd.StdinPipe()
	if err == nil {
		err = rp.cmd.Start()
	}
	if err != nil {
		rp = nil
	} else {
		rp.w = w
		go func() { _ = rp.cmd.Wait() }()
	}
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		rp.done()
		return nil, err
	}
	if rp != nil {
		// The group's ID is its leader's PID.
		_, _ = fmt.Fprintf(rp.w, "group %d\n", cmd.Process.Pid)
	}
	return rp, nil
}

// done tells the reaper that the agent was stopped, and lets it exit.
func (r *reaper) done() {
	if r == nil {
		return
	}
	_, _ = io.WriteString(r.w, "done\n")
	_ = r.w.Close()
}

// reap is the reaper's life (startGuarded): it reads "group <pgid>" and
// "done" lines from in; at the end of in without "done", it kills each
// group and the sessions under dir, unmounts what is mounted under dir and
// removes dir. It ignores interrupts and hang-ups, which are meant for the
// test process.
func reap(dir string, in io.Reader) {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	var groups []int
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if line == "done" {
			return
		}
		if g, ok := strings.CutPrefix(line, "group "); ok {
			if pgid, err := strconv.Atoi(g); err == nil && pgid > 1 {
				groups = append(groups, pgid)
			}
		}
	}
	for _, pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	killSessionsUnder(dir)
	// The test's own cleanups (unmount, remove its temporary folder) did
	// not run either: the tasks' secrets and private tmpfs stay mounted.
	time.Sleep(200 * time.Millisecond) // the killed release their mounts
	for _, m := range mountsUnder(dir) {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
	_ = os.RemoveAll(dir)
	_ = os.Remove(filepath.Dir(dir)) // the test's temporary root, when that was all
}

// killSessionsUnder sends SIGKILL to every session led by a process whose
// command line names a path under dir, and to every process of those sessions: the
// task executors of a Nomad agent under dir (each leads its own session,
// its task in a process group of that session), which outlive an agent
// that crashed or was killed and escape its process group.
func killSessionsUnder(dir string) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	type proc struct{ pid, sid int }
	var all []proc
	leaders := map[int]bool{}
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...; comm may hold spaces.
		i := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[i+1:]))
		if i < 0 || len(f) < 4 {
			continue
		}
		sid, _ := strconv.Atoi(f[3])
		all = append(all, proc{pid, sid})
		if sid != pid {
			continue
		}
		if cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Contains(cmd, []byte(dir+"/")) {
			leaders[sid] = true
		}
	}
	for _, p := range all {
		if leaders[p.sid] {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
}

// purgeJobs stops every job, waits for their allocations to finish, then
// purges them (stopping first is faster than purging running jobs).
func (a *nomadAgent) purgeJobs() {
	jobs, _, err := a.Client.Jobs().List(&api.QueryOptions{Namespace: "*"})
	if err != nil {
		return
	}
	for _, j := range jobs {
		_, _, _ = a.Client.Jobs().Deregister(j.ID, false, &api.WriteOptions{Namespace: j.Namespace})
	}
	_ = waitFor(30*time.Second, 200*time.Millisecond, func() error {
		allocs, _, err := a.Client.Allocations().List(&api.QueryOptions{Namespace: "*"})
		if err != nil {
			return err
		}
		for _, al := range allocs {
			if al.ClientStatus == api.AllocClientStatusPending || al.ClientStatus == api.AllocClientStatusRunning {
				return fmt.Errorf("allocation %s still %s", al.ID, al.ClientStatus)
			}
		}
		return nil
	})
	for _, j := range jobs {
		_, _, _ = a.Client.Jobs().Deregister(j.ID, true, &api.WriteOptions{Namespace: j.Namespace})
	}
	_ = a.Client.System().GarbageCollect()
	// A client destroys the allocations the servers collected, and
	// unmounts their secrets and private folders, on its next sync: wait
	// for it (seconds on a loaded machine), so that the agent's stop finds
	// no mount of its own left.
	_ = waitFor(15*time.Second, 200*time.Millisecond, func() error {
		if left := mountsUnder(a.DataDir); len(left) > 0 {
			return fmt.Errorf("%d mounts left", len(left))
		}
		return nil
	})
}

// mountsUnder lists mount points below dir.
func mountsUnder(dir string) []string {
	raw, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			out = append(out, f[1])
		}
	}
	return out
}

// errStop makes waitFor give up at once.
type errStop struct{ error }

// waitFor calls f every interval until it returns nil, an errStop, or
// timeout passes; it returns f's last error.
func waitFor(timeout, interval time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		var stop errStop
		if errors.As(err, &stop) {
			return stop.error
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		time.Sleep(interval)
	}
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// goBuild builds a main package of this module into dir and returns the
// binary's path.
func goBuild(t testing.TB, pkg, dir, name string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}
