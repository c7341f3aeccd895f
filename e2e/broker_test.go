package e2e

// End-to-end tests of the quota broker on a real Nomad dev agent (DESIGN
// §1 use cases 1-3, restart, Nomad unreachable, bad meta). The node has 8
// mock A100s from the gputide device plugin; the quota tree is the
// reference tree scaled to them: Quota1 = 8 (child-level preemption,
// workspace-a), Quota1.1 = 3 (workspace-b), Quota1.2 = 5 (workspace-c).

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/hashicorp/nomad/api"
)

func TestBroker(t *testing.T) {
	a := startGPUNomad(t)
	c := a.Client
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, a *nomadAgent)
	}{
		{"use case 1: inference preempts training", useCase1Preemption},
		{"use case 2: quota moves live", useCase2QuotaMove},
		{"use case 3: isolation between teams", useCase3Isolation},
		{"bad meta is reported and the job left unadmitted", badMeta},
		{"a job registered straight into a real pool is checked", straightRegistration},
		{"nomad unreachable for 30s", nomadUnreachable},
		{"restart in the middle of a preemption", restartMidPreemption},
	} {
		ok := t.Run(tc.name, func(t *testing.T) {
			defer cleanJobs(t, c)
			tc.fn(t, a)
		})
		if !ok && testing.Short() {
			return
		}
	}
}

// fill starts team B's and team C's training and team C's notebook, 8 of 8
// GPUs, and returns their running allocations.
func fill(t *testing.T, c *api.Client) (bTrain, cTrain, cNote []string) {
	t.Helper()
	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "training", Type: "batch", Priority: 50, Count: 2, GPUs: 2})
	cTrain = waitRunning(t, c, "workspace-c", "training", 2, 30*time.Second)
	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "notebook", Type: "service", Priority: 60, Count: 1, GPUs: 1})
	cNote = waitRunning(t, c, "workspace-c", "notebook", 1, 30*time.Second)
	submit(t, c, jobSpec{Namespace: "workspace-b", ID: "training", Type: "batch", Priority: 50, Count: 1, GPUs: 3})
	bTrain = waitRunning(t, c, "workspace-b", "training", 1, 30*time.Second)
	return
}

// Use case 1: team A's inference needs 4 GPUs on a full node. Quota1's
// child-level preemption lets it take them from team B's and team C's
// training (L5 step 2); the core chooses team C's training (one batch unit
// of exactly 4 GPUs, L6). Exactly its two allocations stop, gracefully
// (L8); inference runs on the very GPUs they held; the training waits in
// the holding pool and is not placed back (L7); nothing else is touched.
func useCase1Preemption(t *testing.T, a *nomadAgent) {
	c := a.Client
	b := startBroker(t, a.Addr, 3, 5)
	bTrain, cTrain, cNote := fill(t, c)
	cGPUs := gpusOf(t, c, cTrain)
	before := stoppedAllocs(t, c)

	submit(t, c, jobSpec{Namespace: "workspace-a", ID: "inference", Type: "service", Priority: 80, Count: 1, GPUs: 4})
	inf := waitRunning(t, c, "workspace-a", "inference", 1, 60*time.Second)

	stopped := stoppedAllocs(t, c)
	newly := minus(stopped, before)
	if !same(newly, cTrain) {
		t.Fatalf("stopped %v, want exactly team C's training %v", newly, cTrain)
	}
	if got := gpusOf(t, c, inf); !same(got, cGPUs) {
		t.Fatalf("inference holds %v, want the GPUs freed for it %v (L7)", got, cGPUs)
	}
	if got := running(t, c, "workspace-b", "training"); !same(got, bTrain) {
		t.Fatalf("team B's training changed: %v, was %v", got, bTrain)
	}
	if got := running(t, c, "workspace-c", "notebook"); !same(got, cNote) {
		t.Fatalf("team C's notebook changed: %v, was %v", got, cNote)
	}
	// The victim checkpointed: SIGINT, then exit 0 within its kill_timeout.
	for _, id := range cTrain {
		victimCheckpointed(t, c, id)
	}
	// The training waits in the holding pool: not placed back (L7).
	j := jobInfo(t, c, "workspace-c", "training")
	if *j.NodePool != build.DefaultHoldingPool {
		t.Fatalf("victim job pool = %q", *j.NodePool)
	}
	time.Sleep(3 * time.Second)
	if got := running(t, c, "workspace-c", "training"); len(got) != 0 {
		t.Fatalf("the victim's replacement runs: %v", got)
	}
	if got := running(t, c, "workspace-a", "inference"); !same(got, inf) {
		t.Fatalf("inference changed: %v", got)
	}
	// Each preemption is recorded (L8).
	rec := b.preemptions(t)
	if len(rec) != 2 {
		t.Fatalf("preemptions = %+v", rec)
	}
	for _, p := range rec {
		if p.For != "workspace-a/inference/main" || p.Namespace != "workspace-c" || p.Job != "training" ||
			p.GPUs != 2 || p.Rule != "L5.2" {
			t.Fatalf("preemption record %+v", p)
		}
	}
}

// Use case 2: an admin moves a GPU from Quota1.2 to Quota1.1 (3 -> 4, 5 ->
// 4) by editing the quota file; the broker reloads it without a restart and
// team B's waiting job, which L3 held back at "3 of 3", is admitted onto
// the free GPU. Nothing is stopped.
func useCase2QuotaMove(t *testing.T, a *nomadAgent) {
	c := a.Client
	b := startBroker(t, a.Addr, 3, 5)
	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "training", Type: "batch", Priority: 50, Count: 2, GPUs: 2})
	cTrain := waitRunning(t, c, "workspace-c", "training", 2, 30*time.Second)
	submit(t, c, jobSpec{Namespace: "workspace-b", ID: "training", Type: "batch", Priority: 50, Count: 1, GPUs: 3})
	bTrain := waitRunning(t, c, "workspace-b", "training", 1, 30*time.Second)
	before := stoppedAllocs(t, c)

	submit(t, c, jobSpec{Namespace: "workspace-b", ID: "extra", Type: "batch", Priority: 50, Count: 1, GPUs: 1})
	// It waits, and says why in its meta (it has no running allocation).
	var reason string
	err := waitFor(20*time.Second, 100*time.Millisecond, func() error {
		j := jobInfo(t, c, "workspace-b", "extra")
		if j.Meta["gputide_status"] != "waiting" {
			return fmt.Errorf("status %q", j.Meta["gputide_status"])
		}
		reason = j.Meta["gputide_reason"]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reason, "Quota1.1") || !strings.Contains(reason, "3 of 3") {
		t.Fatalf("wait reason %q does not name the quota and the numbers", reason)
	}
	if got := running(t, c, "workspace-b", "extra"); len(got) != 0 {
		t.Fatalf("extra runs before the quota move: %v", got)
	}

	writeQuota(t, b.QuotaFile, 4, 4)
	waitRunning(t, c, "workspace-b", "extra", 1, 30*time.Second)
	if j := jobInfo(t, c, "workspace-b", "extra"); j.Meta["gputide_status"] != "" {
		t.Fatalf("status left after admission: %v", j.Meta)
	}
	if got := minus(stoppedAllocs(t, c), before); len(got) != 0 {
		t.Fatalf("the quota move stopped %v", got)
	}
	if !same(running(t, c, "workspace-c", "training"), cTrain) || !same(running(t, c, "workspace-b", "training"), bTrain) {
		t.Fatal("running training changed")
	}
	if !strings.Contains(b.Log.String(), `quota changed: quota=Quota1.1 old_gpus=3 new_gpus=4`) {
		t.Fatalf("the quota change is not logged")
	}
}

// Use case 3: team B borrows team C's idle GPUs with an idle, elastic job
// (L4) and cannot go beyond its own quota with non-idle work: its extra job
// waits and stops nothing of team C's. When team C claims its quota, exactly
// enough of team B's idle workers are stopped (L5 step 1, one by one since
// the job is elastic), team B's own training is untouched, and its waiting
// job still waits.
func useCase3Isolation(t *testing.T, a *nomadAgent) {
	c := a.Client
	startBroker(t, a.Addr, 3, 5)
	submit(t, c, jobSpec{Namespace: "workspace-b", ID: "training", Type: "batch", Priority: 50, Count: 1, GPUs: 3})
	bTrain := waitRunning(t, c, "workspace-b", "training", 1, 30*time.Second)
	submit(t, c, jobSpec{Namespace: "workspace-b", ID: "borrow", Type: "batch", Priority: 40, Count: 5, GPUs: 1,
		Meta: map[string]string{"gputide_idle": "true", "gputide_elastic": "true"}})
	borrow := waitRunning(t, c, "workspace-b", "borrow", 5, 30*time.Second)
	before := stoppedAllocs(t, c)

	submit(t, c, jobSpec{Namespace: "workspace-b", ID: "more", Type: "batch", Priority: 90, Count: 1, GPUs: 1})
	err := waitFor(20*time.Second, 100*time.Millisecond, func() error {
		if s := jobInfo(t, c, "workspace-b", "more").Meta["gputide_status"]; s != "waiting" {
			return fmt.Errorf("status %q", s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := minus(stoppedAllocs(t, c), before); len(got) != 0 {
		t.Fatalf("team B's over-quota job stopped %v", got)
	}

	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "training", Type: "batch", Priority: 50, Count: 2, GPUs: 2})
	cTrain := waitRunning(t, c, "workspace-c", "training", 2, 60*time.Second)
	stopped := minus(stoppedAllocs(t, c), before)
	if len(stopped) != 4 {
		t.Fatalf("stopped %v, want 4 of team B's idle workers", stopped)
	}
	for _, id := range stopped {
		if !contains(borrow, id) {
			t.Fatalf("stopped %s, which is not an idle worker of team B", id)
		}
	}
	if got := running(t, c, "workspace-b", "borrow"); len(got) != 1 || !contains(borrow, got[0]) {
		t.Fatalf("idle workers left running: %v", got)
	}
	if !same(running(t, c, "workspace-b", "training"), bTrain) {
		t.Fatal("team B's own training was touched")
	}
	if got := running(t, c, "workspace-b", "more"); len(got) != 0 {
		t.Fatalf("team B's over-quota job runs: %v", got)
	}
	if got := gpusOf(t, c, cTrain); len(got) != 4 {
		t.Fatalf("team C's training holds %v", got)
	}
}

// badMeta: a job with gputide_idle = "maybe" and one with a negative
// gputide_flex_max_run are left in the holding pool, with the error, naming
// the key and the value, in the broker's log and in the job's meta.
func badMeta(t *testing.T, a *nomadAgent) {
	c := a.Client
	b := startBroker(t, a.Addr, 3, 5)
	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "bad-idle", Type: "service", Priority: 50, Count: 1, GPUs: 1,
		Meta: map[string]string{"gputide_idle": "maybe"}})
	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "bad-maxrun", Type: "batch", Priority: 50, Count: 1, GPUs: 1,
		Meta: map[string]string{"gputide_flex_max_run": "-1h"}})
	want := map[string]string{
		"bad-idle":   `job meta gputide_idle = "maybe": want "true" or "false"`,
		"bad-maxrun": `job meta gputide_flex_max_run = "-1h": must be more than 0`,
	}
	for id, reason := range want {
		err := waitFor(20*time.Second, 100*time.Millisecond, func() error {
			j := jobInfo(t, c, "workspace-c", id)
			if j.Meta["gputide_status"] != "error" || j.Meta["gputide_reason"] != reason {
				return fmt.Errorf("%s meta %v", id, j.Meta)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.Log.String(), strings.ReplaceAll(reason, `"`, `\"`)) {
			t.Fatalf("the broker log lacks %q", reason)
		}
	}
	time.Sleep(2 * time.Second)
	for id := range want {
		if j := jobInfo(t, c, "workspace-c", id); *j.NodePool != build.DefaultHoldingPool {
			t.Fatalf("%s moved to %q", id, *j.NodePool)
		}
		if got := allocs(t, c, "workspace-c", id); len(got) != 0 {
			t.Fatalf("%s has allocations %d", id, len(got))
		}
	}
}

// straightRegistration: team B registers training straight into "default"
// (not the holding pool) beyond its quota. Nomad places it at once; the
// broker checks it against L3, suspends it (moves it to the holding pool and
// stops its allocation) and, once nothing of it runs, writes why it waits.
// A job within quota registered the same way is left running.
func straightRegistration(t *testing.T, a *nomadAgent) {
	c := a.Client
	startBroker(t, a.Addr, 3, 5)
	submit(t, c, jobSpec{Namespace: "workspace-b", ID: "fits", Type: "batch", Priority: 50, Count: 1, GPUs: 2, Pool: "default"})
	fits := waitRunning(t, c, "workspace-b", "fits", 1, 30*time.Second)
	before := stoppedAllocs(t, c)
	submit(t, c, jobSpec{Namespace: "workspace-b", ID: "over", Type: "batch", Priority: 50, Count: 1, GPUs: 2, Pool: "default"})
	err := waitFor(30*time.Second, 100*time.Millisecond, func() error {
		j := jobInfo(t, c, "workspace-b", "over")
		if *j.NodePool != build.DefaultHoldingPool || j.Meta["gputide_status"] != "waiting" {
			return fmt.Errorf("pool %s meta %v", *j.NodePool, j.Meta)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := running(t, c, "workspace-b", "over"); len(got) != 0 {
		t.Fatalf("the over-quota job still runs: %v", got)
	}
	for _, id := range minus(stoppedAllocs(t, c), before) {
		if al, _, _ := c.Allocations().Info(id, nil); al.JobID != "over" {
			t.Fatalf("stopped %s of %s", id, al.JobID)
		}
	}
	if reason := jobInfo(t, c, "workspace-b", "over").Meta["gputide_reason"]; !strings.Contains(reason, "Quota1.1") {
		t.Fatalf("reason %q", reason)
	}
	time.Sleep(2 * time.Second)
	if !same(running(t, c, "workspace-b", "fits"), fits) {
		t.Fatal("the job within quota was touched")
	}
}

// nomadUnreachable: the broker reaches Nomad through a proxy that is cut
// for 30 s. It stops acting (a job that fits stays in the holding pool),
// keeps serving its reads, and admits the job once Nomad is back (L12).
func nomadUnreachable(t *testing.T, a *nomadAgent) {
	c := a.Client
	proxy := newTCPProxy(t, strings.TrimPrefix(a.Addr, "http://"))
	b := startBroker(t, "http://"+proxy.Addr, 3, 5)
	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "before", Type: "batch", Priority: 50, Count: 1, GPUs: 1})
	waitRunning(t, c, "workspace-c", "before", 1, 30*time.Second)

	proxy.Cut()
	cut := time.Now()
	err := waitFor(10*time.Second, 100*time.Millisecond, func() error {
		h, err := b.health()
		if err != nil {
			return err
		}
		if h.Acting {
			return fmt.Errorf("still acting")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "during", Type: "batch", Priority: 50, Count: 1, GPUs: 1})
	for time.Since(cut) < 30*time.Second {
		if got := allocs(t, c, "workspace-c", "during"); len(got) != 0 {
			t.Fatalf("acted during the outage: %d allocations after %s", len(got), time.Since(cut))
		}
		if j := jobInfo(t, c, "workspace-c", "during"); *j.NodePool != build.DefaultHoldingPool {
			t.Fatalf("moved during the outage to %q", *j.NodePool)
		}
		// Reads keep working.
		h, err := b.health()
		if err != nil || h.Acting || h.Why == "" {
			t.Fatalf("health during the outage: %+v, %v", h, err)
		}
		// State reads are refused once the state is past the staleness
		// bound, or while Nomad cannot check the caller (DESIGN §9, fail
		// closed): never a stale answer.
		var plan map[string]any
		if err := getJSON("http://"+b.Addr+"/v1/plan", &plan); time.Since(cut) > 5*time.Second && (err == nil || !(strings.Contains(err.Error(), "503") || strings.Contains(err.Error(), "403"))) {
			t.Fatalf("plan read %s into the outage: %v, want 503 or 403", time.Since(cut), err)
		}
		time.Sleep(time.Second)
	}
	proxy.Restore(t)
	restored := time.Now()
	waitRunning(t, c, "workspace-c", "during", 1, 30*time.Second)
	t.Logf("admitted %s after Nomad came back", time.Since(restored).Round(time.Millisecond))
	b.waitActing(t, 10*time.Second)
	if h, _ := b.health(); h.Relists < 2 {
		t.Fatalf("relists = %d, want a full list after reconnecting", h.Relists)
	}
}

// restartMidPreemption: the broker runs as a process and is killed with
// SIGKILL right after it stopped its victims, which take 15 s to
// checkpoint; a new broker process starts. It stops nothing twice and
// nothing else, inference runs, and its ledger matches Nomad's.
func restartMidPreemption(t *testing.T, a *nomadAgent) {
	c := a.Client
	bin := goBuild(t, "github.com/gputide/gputide/quota-broker/cmd/gputide", t.TempDir(), "gputide")
	cfg, _ := brokerConfig(t, a.Addr, 3, 5)
	logPath := filepath.Join(filepath.Dir(cfg), "broker.log")
	start := func() *exec.Cmd {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "agent", "-config", cfg)
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				_ = cmd.Wait()
			}
		})
		return cmd
	}
	cmd := start()
	sub := &broker{Addr: brokerAddr(t, cfg)}
	sub.waitActing(t, 30*time.Second)
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("broker log:\n%s", tail(string(b), 12000))
		}
	}()

	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "training-r", Type: "batch", Priority: 50, Count: 2, GPUs: 2,
		Checkpoint: "15", KillTimeout: 40 * time.Second})
	cTrain := waitRunning(t, c, "workspace-c", "training-r", 2, 30*time.Second)
	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "notebook", Type: "service", Priority: 60, Count: 1, GPUs: 1})
	cNote := waitRunning(t, c, "workspace-c", "notebook", 1, 30*time.Second)
	submit(t, c, jobSpec{Namespace: "workspace-b", ID: "training", Type: "batch", Priority: 50, Count: 1, GPUs: 3})
	bTrain := waitRunning(t, c, "workspace-b", "training", 1, 30*time.Second)
	before := stoppedAllocs(t, c)

	submit(t, c, jobSpec{Namespace: "workspace-a", ID: "inference", Type: "service", Priority: 80, Count: 1, GPUs: 4})
	err := waitFor(30*time.Second, 20*time.Millisecond, func() error {
		if n := len(minus(stoppedAllocs(t, c), before)); n < 2 {
			return fmt.Errorf("%d stopped", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Kill() // SIGKILL, mid-preemption: the victims are still checkpointing
	_ = cmd.Wait()
	if got := running(t, c, "workspace-c", "training-r"); len(got) != 0 {
		t.Logf("victims still running while checkpointing: %v", got)
	}
	start()

	inf := waitRunning(t, c, "workspace-a", "inference", 1, 60*time.Second)
	stopped := minus(stoppedAllocs(t, c), before)
	if !same(stopped, cTrain) {
		t.Fatalf("stopped %v, want exactly %v", stopped, cTrain)
	}
	// Stopped once each: one alloc-stop evaluation per victim.
	evals, _, err := c.Jobs().Evaluations("training-r", &api.QueryOptions{Namespace: "workspace-c"})
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
	// The restarted broker's ledger matches Nomad's live allocations (L2).
	err = waitFor(20*time.Second, 200*time.Millisecond, func() error {
		var snap struct {
			Allocations []struct {
				ID   string   `json:"id"`
				GPUs []string `json:"gpu_ids"`
			} `json:"allocations"`
		}
		addr := brokerAddr(t, cfg)
		if err := getJSON("http://"+addr+"/v1/snapshot", &snap); err != nil {
			return err
		}
		got := map[string]int{}
		for _, al := range snap.Allocations {
			got[al.ID] = len(al.GPUs)
		}
		want := liveGPUAllocs(t, c)
		if len(watch.LedgerDiff(got, want)) != 0 {
			return fmt.Errorf("broker %v, nomad %v", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func brokerAddr(t *testing.T, cfg string) string {
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && strings.TrimSpace(k) == "http_bind" {
			return strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	t.Fatal("no http_bind")
	return ""
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// victimCheckpointed asserts that a preempted allocation stopped gracefully
// (L8): its task is dead and not failed, its stdout ends with the line the
// job's SIGINT trap prints just before "exit 0", and the exit code Nomad
// recorded, where it recorded one, is 0. Nomad's task runner emits no
// Terminated event when its wait on the driver fails (task_runner.go, Run's
// WAIT block), so a missing event alone is no evidence either way; the
// events are printed when the check fails.
func victimCheckpointed(t *testing.T, c *api.Client, id string) {
	t.Helper()
	al, _, err := c.Allocations().Info(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := al.TaskStates["work"]
	if ts == nil || ts.State != "dead" || ts.Failed {
		t.Fatalf("victim %s task state %+v", id, ts)
	}
	var events []string
	for _, e := range ts.Events {
		events = append(events, fmt.Sprintf("%s (exit %d, signal %d): %s", e.Type, e.ExitCode, e.Signal, e.DisplayMessage))
		if e.Type == api.TaskTerminated && e.ExitCode != 0 {
			t.Fatalf("victim %s exit code %d, want 0 (checkpointed on SIGINT); events:\n%s", id, e.ExitCode, strings.Join(events, "\n"))
		}
	}
	// logmon copies the task's output on its own; give it a moment.
	var out string
	err = waitFor(5*time.Second, 100*time.Millisecond, func() error {
		out = taskStdout(t, c, al, "work")
		if !strings.HasSuffix(strings.TrimSpace(out), "checkpoint saved") {
			return fmt.Errorf("stdout does not end with the checkpoint")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("victim %s: %v:\n%s\nevents:\n%s", id, err, out, strings.Join(events, "\n"))
	}
}

// taskStdout reads a task's stdout through Nomad's file system API.
func taskStdout(t *testing.T, c *api.Client, al *api.Allocation, task string) string {
	t.Helper()
	r, err := c.AllocFS().Cat(al, "alloc/logs/"+task+".stdout.0", nil)
	if err != nil {
		t.Fatalf("read %s's stdout: %v", al.ID, err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		t.Fatalf("read %s's stdout: %v", al.ID, err)
	}
	return string(b)
}
