package e2e

// The local stack (examples/local, issue 20 item 1) as a user runs it:
// `examples/local/up.sh -acl` starts Consul, Nomad with the mock GPUs, the
// broker and the Autoscaler from NOMAD_BIN, CONSUL_BIN and
// NOMAD_AUTOSCALER_BIN (what .ci/run exports; without them the test skips,
// and fails under CI), with the gputide binaries built by `make build` into
// a temporary folder, its state in another, on free ports. With the tokens
// up.sh prints, the teams submit the example jobs with `nomad job run`; team
// A's inference takes its GPUs back from team C's training (use case 1: the
// two stopped allocations are exactly the training's, as `gputide
// preemptions -json` and Nomad both say); a team token may not move quota,
// the admin token may (`gputide quota move`). Then `down.sh`: no process of
// the stack, no process running from the state folder and no mount under it
// is left, and the folder is gone.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	brokerapi "github.com/gputide/gputide/quota-broker/api"
)

func TestLocalStack(t *testing.T) {
	start := time.Now()
	nomadBin := nomadBinary(t)
	consulBin := consulBinary(t)
	autoscalerBin := autoscalerBinary(t)
	for _, tool := range []string{"curl", "jq", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			needAgent(t, fmt.Sprintf("examples/local/up.sh needs %s on PATH", tool))
		}
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	state := filepath.Join(t.TempDir(), "local")

	// The gputide binaries, as a user's `make build` makes them.
	build := exec.Command("make", "-s", "build", "BIN="+bin)
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	t.Logf("make build: %s", time.Since(start).Round(time.Second))

	p := freePorts(t, 9)
	env := append(agentEnv(),
		"NOMAD_BIN="+nomadBin, "CONSUL_BIN="+consulBin, "NOMAD_AUTOSCALER_BIN="+autoscalerBin,
		"GPUTIDE_LOCAL_DIR="+state, "GPUTIDE_LOCAL_BIN="+bin,
		"GPUTIDE_LOCAL_NOMAD_HTTP="+strconv.Itoa(p[0]), "GPUTIDE_LOCAL_NOMAD_RPC="+strconv.Itoa(p[1]),
		"GPUTIDE_LOCAL_NOMAD_SERF="+strconv.Itoa(p[2]), "GPUTIDE_LOCAL_CONSUL_HTTP="+strconv.Itoa(p[3]),
		"GPUTIDE_LOCAL_CONSUL_SERVER="+strconv.Itoa(p[4]), "GPUTIDE_LOCAL_CONSUL_SERF_LAN="+strconv.Itoa(p[5]),
		"GPUTIDE_LOCAL_CONSUL_SERF_WAN="+strconv.Itoa(p[6]), "GPUTIDE_LOCAL_BROKER_HTTP="+strconv.Itoa(p[7]),
		"GPUTIDE_LOCAL_AUTOSCALER_HTTP="+strconv.Itoa(p[8]))
	env = slices.DeleteFunc(env, func(kv string) bool {
		return strings.HasPrefix(kv, "NOMAD_TOKEN=") || strings.HasPrefix(kv, "NOMAD_ADDR=") ||
			strings.HasPrefix(kv, "NOMAD_NAMESPACE=") || strings.HasPrefix(kv, "GPUTIDE_ADDR=")
	})
	script := func(timeout time.Duration, name string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(repo, "examples", "local", name), args...)
		cmd.Dir = repo
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}

	// up.sh -acl; down.sh at the end whatever happens.
	down := false
	t.Cleanup(func() {
		if !down {
			if out, err := script(3*time.Minute, "down.sh"); err != nil {
				t.Errorf("down.sh: %v\n%s", err, out)
			}
		}
	})
	upAt := time.Now()
	out, err := script(5*time.Minute, "up.sh", "-acl")
	if err != nil {
		t.Fatalf("up.sh -acl: %v\n%s", err, out)
	}
	t.Logf("up.sh -acl: ready in %s", time.Since(upAt).Round(time.Second))
	nomadURL := fmt.Sprintf("http://127.0.0.1:%d", p[0])
	brokerURL := fmt.Sprintf("http://127.0.0.1:%d", p[7])
	for _, u := range []string{nomadURL, fmt.Sprintf("http://127.0.0.1:%d", p[3]), brokerURL, fmt.Sprintf("http://127.0.0.1:%d", p[8])} {
		if !strings.Contains(out, u) {
			t.Errorf("up.sh does not print %s:\n%s", u, out)
		}
	}
	tokens := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(admin|team A|team B|team C)\s+([0-9a-f]{8}-[0-9a-f-]{27})\b`).FindAllStringSubmatch(out, -1) {
		tokens[m[1]] = m[2]
	}
	if len(tokens) != 4 {
		t.Fatalf("up.sh printed the tokens %v, want admin, team A, team B and team C:\n%s", tokens, out)
	}
	file, err := os.ReadFile(filepath.Join(state, "tokens.env"))
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range tokens {
		if !strings.Contains(string(file), "="+tok+"\n") {
			t.Errorf("the %s token is not in tokens.env", name)
		}
	}
	mgmt := regexp.MustCompile(`(?m)^GPUTIDE_LOCAL_TOKEN_MANAGEMENT=(\S+)$`).FindSubmatch(file)
	if mgmt == nil {
		t.Fatalf("no management token in tokens.env")
	}
	pids := statePIDs(t, state)
	cfg := api.DefaultConfig()
	cfg.Address, cfg.SecretID = nomadURL, string(mgmt[1])
	c, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}

	cli := func(token string, name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.Dir = repo
		cmd.Env = append(slices.Clone(env), "NOMAD_ADDR="+nomadURL, "GPUTIDE_ADDR="+brokerURL, "NOMAD_TOKEN="+token)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	run := func(team, file string) {
		t.Helper()
		if out, err := cli(tokens[team], nomadBin, "job", "run", "-detach", "examples/local/jobs/"+file); err != nil {
			t.Fatalf("%s: nomad job run %s: %v\n%s", team, file, err, out)
		}
	}

	// Use case 1: the node full of team B's and team C's work, team A's
	// inference takes exactly team C's training (2 x 2 GPUs) back.
	run("team C", "team-c-training.nomad.hcl")
	cTrain := waitRunning(t, c, "workspace-c", "training", 2, 60*time.Second)
	run("team C", "team-c-notebook.nomad.hcl")
	cNote := waitRunning(t, c, "workspace-c", "notebook", 1, 60*time.Second)
	run("team B", "team-b-training.nomad.hcl")
	bTrain := waitRunning(t, c, "workspace-b", "training", 1, 60*time.Second)
	before := stoppedAllocs(t, c)
	run("team A", "team-a-inference.nomad.hcl")
	waitRunning(t, c, "workspace-a", "inference", 1, 90*time.Second)
	if got := minus(stoppedAllocs(t, c), before); !same(got, cTrain) {
		t.Fatalf("Nomad stopped %v, want exactly team C's training %v", got, cTrain)
	}
	if got := running(t, c, "workspace-b", "training"); !same(got, bTrain) {
		t.Fatalf("team B's training changed: %v, was %v", got, bTrain)
	}
	if got := running(t, c, "workspace-c", "notebook"); !same(got, cNote) {
		t.Fatalf("team C's notebook changed: %v, was %v", got, cNote)
	}
	out, err = cli(tokens["admin"], filepath.Join(bin, "gputide"), "preemptions", "-json")
	if err != nil {
		t.Fatalf("gputide preemptions -json: %v\n%s", err, out)
	}
	var pre brokerapi.PreemptionsResponse
	if err := json.Unmarshal([]byte(out), &pre); err != nil {
		t.Fatalf("gputide preemptions -json: %v\n%s", err, out)
	}
	var victims []string
	for _, e := range pre.Preemptions {
		if e.Namespace != "workspace-c" || e.Job != "training" || e.For != "workspace-a/inference/server" || e.GPUs != 2 || e.Rule != "L5.2" {
			t.Errorf("preemption %+v, want team C's training for workspace-a/inference/server by L5.2", e)
		}
		victims = append(victims, e.Alloc)
	}
	if !same(victims, cTrain) {
		t.Fatalf("gputide preemptions names %v, want team C's training %v", victims, cTrain)
	}

	// Use case 2 through the CLI: a team may not move quota, the admin may.
	if out, err := cli(tokens["team B"], filepath.Join(bin, "gputide"), "quota", "move", "-from", "Quota1.2", "-to", "Quota1.1", "-gpus", "1"); err == nil || !strings.Contains(out, "403") {
		t.Fatalf("team B moved quota: %v\n%s", err, out)
	}
	if out, err := cli(tokens["admin"], filepath.Join(bin, "gputide"), "quota", "move", "-from", "Quota1.2", "-to", "Quota1.1", "-gpus", "1"); err != nil || !strings.Contains(out, "Quota1.2 now 4, Quota1.1 now 4") {
		t.Fatalf("gputide quota move: %v\n%s", err, out)
	}
	err = waitFor(20*time.Second, 250*time.Millisecond, func() error {
		out, err := cli(tokens["team B"], filepath.Join(bin, "gputide"), "quota", "status", "-json")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		var q brokerapi.QuotasResponse
		if err := json.Unmarshal([]byte(out), &q); err != nil {
			return err
		}
		got := map[string]int{}
		for _, n := range q.Quotas {
			got[n.Name] = n.NominalGPUs
		}
		if got["Quota1"] != 8 || got["Quota1.1"] != 4 || got["Quota1.2"] != 4 {
			return fmt.Errorf("nominal GPUs %v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after the move: %v", err)
	}

	// down.sh leaves nothing behind.
	downAt := time.Now()
	out, err = script(3*time.Minute, "down.sh")
	down = true
	if err != nil {
		t.Fatalf("down.sh: %v\n%s", err, out)
	}
	t.Logf("down.sh: %s", time.Since(downAt).Round(time.Second))
	if strings.Contains(out, "killed") || strings.Contains(out, "unmounting") {
		t.Errorf("down.sh had to force its way:\n%s", out)
	}
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("%s (pid %d) still runs after down.sh", name, pid)
		}
	}
	if left := processesUnder(state); len(left) > 0 {
		t.Errorf("processes left running from %s: %v", state, left)
	}
	if m := mountsUnder(state); len(m) > 0 {
		t.Errorf("mounts left under %s: %v", state, m)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("%s is left after down.sh (%v)", state, err)
	}
	t.Logf("whole test: %s", time.Since(start).Round(time.Second))
}

// statePIDs reads the pids up.sh wrote under state/pids.
func statePIDs(t *testing.T, state string) map[string]int {
	t.Helper()
	pids := map[string]int{}
	for _, part := range []string{"consul", "nomad", "broker", "autoscaler"} {
		b, err := os.ReadFile(filepath.Join(state, "pids", part+".pid"))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s.pid: %v", part, err)
		}
		pids[part] = pid
	}
	return pids
}

// processesUnder lists the processes whose working directory or command
// line is under dir.
func processesUnder(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cl := string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		if strings.HasPrefix(cwd, dir+"/") || cwd == dir || strings.Contains(cl, dir+"/") {
			out = append(out, fmt.Sprintf("%d %s", pid, cl))
		}
	}
	return out
}
