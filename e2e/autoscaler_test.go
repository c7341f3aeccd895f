package e2e

// End-to-end test of the autoscaler plugins (issue 11): a real Nomad dev agent
// (NOMAD_BIN), the real Nomad Autoscaler v0.5.0 (NOMAD_AUTOSCALER_BIN, built by
// e2e/tools/autoscaler/build.sh) with our plugins in its plugin_dir and file
// policies, scaling batch jobs through the builtin nomad-target, and the
// broker's real API handler in-process on figures the test sets
// (figurebroker_test.go). Without the binaries the tests skip; under CI (env
// CI set) they fail instead.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	brokerapi "github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/plan"
)

// autoscalerBinary finds the Nomad Autoscaler binary, or skips (fails under CI).
func autoscalerBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("NOMAD_AUTOSCALER_BIN")
	if p == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but NOMAD_AUTOSCALER_BIN is not: .ci/run builds it with e2e/tools/autoscaler/build.sh")
		}
		t.Skip("no Nomad Autoscaler: set NOMAD_AUTOSCALER_BIN (e2e/tools/autoscaler/build.sh prints it) to run this test")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("NOMAD_AUTOSCALER_BIN=%s: %v", p, err)
	}
	return p
}

// needNomad is nomadBinary, failing instead of skipping under CI.
func needNomad(t *testing.T) {
	t.Helper()
	if os.Getenv("NOMAD_BIN") == "" && os.Getenv("CI") != "" {
		if _, err := exec.LookPath("nomad"); err != nil {
			t.Fatal("CI is set but NOMAD_BIN is not: set it from ../shared/nomad/nomad-bin")
		}
	}
	nomadBinary(t)
}

// autoscalerAgent is a running nomad-autoscaler.
type autoscalerAgent struct {
	cmd    *exec.Cmd
	log    *lockedBuffer
	exited chan struct{}
}

// startAutoscaler writes the agent config and starts the agent.
func startAutoscaler(t *testing.T, bin, dir, config string) *autoscalerAgent {
	t.Helper()
	cfg := filepath.Join(dir, "autoscaler.hcl")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	a := &autoscalerAgent{log: &lockedBuffer{}, exited: make(chan struct{})}
	a.cmd = exec.Command(bin, "agent", "-config", cfg)
	a.cmd.Dir = dir
	a.cmd.Env = agentEnv()
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	rp, err := startGuarded(a.cmd, dir)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = a.cmd.Wait(); close(a.exited) }()
	t.Cleanup(func() {
		defer rp.done()
		defer killGroup(a.cmd) // its plugins, also when it exited early
		select {
		case <-a.exited:
			return
		default:
		}
		_ = a.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-a.exited:
		case <-time.After(15 * time.Second):
			_ = a.cmd.Process.Kill()
			<-a.exited
		}
		if t.Failed() {
			t.Logf("autoscaler log:\n%s", tail(a.log.String(), 6000))
		}
	})
	return a
}

var weekdayNames = [...]string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// TestAutoscalerScheduleWindowScalesOnce: the real autoscaler loads each of
// our three plugins exactly once; gputide-apm reads the broker's real API
// handler (in-process, figures set by the test). A side job's gputide-idle
// policy scales once on idle_fit = 2 (1 -> 3); then the broker is stopped,
// before the boundary. A gputide-schedule window opening 60-120 s ahead (in
// Asia/Kolkata, UTC+05:30) still gives exactly one Scale call, to the
// window's count, within two evaluation intervals after the boundary and
// none before it (`schedule` is answered locally, so day/night scaling
// outlives a broker outage), while the idle policy, out of its cooldown many
// times over, does not scale again: its check fails with "broker
// unreachable at <address>". Counts are read back from Nomad.
func TestAutoscalerScheduleWindowScalesOnce(t *testing.T) {
	needNomad(t)
	asBin := autoscalerBinary(t)
	nomad := newNomadAgent(t, nomadOptions{})
	dir := t.TempDir()
	pluginDir := filepath.Join(dir, "plugins")
	policyDir := filepath.Join(dir, "policies")
	for _, d := range []string{pluginDir, policyDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"gputide-schedule", "gputide-apm", "gputide-idle"} {
		goBuild(t, "github.com/gputide/gputide/autoscaler-plugin/cmd/"+p, pluginDir, p)
	}

	const jobID, group, interval = "e2e-day-night", "work", 10 * time.Second
	const sideJob, sideGroup = "e2e-side-idle", "train"
	for _, id := range []string{jobID, sideJob} {
		g := group
		if id == sideJob {
			g = sideGroup
		}
		job := &api.Job{
			ID: ptr(id), Name: ptr(id), Type: ptr("batch"), Datacenters: []string{"dc1"},
			TaskGroups: []*api.TaskGroup{{
				Name: ptr(g), Count: ptr(1),
				Tasks: []*api.Task{{
					Name: "sleep", Driver: "raw_exec",
					Config:    map[string]any{"command": "/bin/sleep", "args": []string{"3600"}},
					Resources: &api.Resources{CPU: ptr(20), MemoryMB: ptr(16)},
				}},
			}},
		}
		if _, _, err := nomad.Client.Jobs().Register(job, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Nomad's ACLs are off: the broker serves reads without a token
	// (open_reads_without_acl), after asking Nomad.
	broker := startFigureBroker(t, nomad.Addr, figureBrokerOptions{OpenReads: true})
	broker.SetIdleFit(plan.GroupKey{Namespace: "default", Job: sideJob, Group: sideGroup}, 2)

	// The boundary: the first whole minute at least 60 s ahead (60-120 s).
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	boundary := time.Now().Add(time.Minute).Truncate(time.Minute).Add(time.Minute)
	local := boundary.In(kolkata)
	window := fmt.Sprintf("%s %s-%s 3", weekdayNames[local.Weekday()], local.Format("15:04"), local.Add(30*time.Minute).Format("15:04"))
	policy := fmt.Sprintf(`
scaling "day-night" {
  enabled = true
  min     = 0
  max     = 10
  policy {
    evaluation_interval = "%s"
    cooldown            = "%s"
    on_check_error      = "fail"
    check "day-night" {
      source = "gputide-apm"
      query  = "schedule"
      strategy "gputide-schedule" {
        window_e2e    = %q
        default_count = 1
        timezone      = "Asia/Kolkata"
      }
    }
    target "nomad-target" {
      Job       = %q
      Group     = %q
      Namespace = "default"
    }
  }
}

scaling "side-idle" {
  enabled = true
  min     = 1
  max     = 40
  policy {
    evaluation_interval  = "%s"
    cooldown             = "%s"
    cooldown_on_scale_up = "%s"
    on_check_error       = "fail"
    check "idle" {
      source = "gputide-apm"
      query  = "idle_fit{namespace=\"default\", job=\"%s\", group=\"%s\"}"
      strategy "gputide-idle" {}
    }
    target "nomad-target" {
      Job       = %q
      Group     = %q
      Namespace = "default"
    }
  }
}
`, interval, interval, window, jobID, group, interval, interval, interval, sideJob, sideGroup, sideJob, sideGroup)
	if err := os.WriteFile(filepath.Join(policyDir, "day-night.hcl"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePorts(t, 1)[0]
	as := startAutoscaler(t, asBin, dir, fmt.Sprintf(`
log_level  = "DEBUG"
plugin_dir = %q

nomad {
  address = %q
}

http {
  bind_address = "127.0.0.1"
  bind_port    = %d
}

policy {
  dir                         = %q
  default_evaluation_interval = "%s"
  source "nomad" {
    enabled = false
  }
}

apm "gputide-apm" {
  driver = "gputide-apm"
  config = {
    address = %q
    timeout = "1s"
  }
}

strategy "gputide-schedule" {
  driver = "gputide-schedule"
}

strategy "gputide-idle" {
  driver = "gputide-idle"
}
`, pluginDir, nomad.Addr, port, policyDir, interval, broker.URL))
	t.Logf("window %q (Asia/Kolkata), boundary %s, %s ahead", window, boundary.UTC().Format(time.RFC3339), time.Until(boundary).Round(time.Second))

	// Each plugin is loaded exactly once.
	plugins := []string{"gputide-apm", "gputide-schedule", "gputide-idle"}
	err = waitFor(60*time.Second, 500*time.Millisecond, func() error {
		select {
		case <-as.exited:
			return errStop{fmt.Errorf("autoscaler exited:\n%s", tail(as.log.String(), 4000))}
		default:
		}
		for _, p := range plugins {
			if n := loadedCount(as.log.String(), p); n != 1 {
				return fmt.Errorf("plugin %s loaded %d times", p, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The idle policy scales once through the broker (1 + 2 = 3); then the
	// broker stops, before the boundary.
	err = waitFor(time.Until(boundary), 250*time.Millisecond, func() error {
		ev := scaleEvents(t, nomad.Client, sideJob, sideGroup)
		if len(ev) == 0 {
			return fmt.Errorf("the idle policy has not scaled %s yet", sideJob)
		}
		if len(ev) != 1 || ev[0].Count == nil || *ev[0].Count != 3 {
			return errStop{fmt.Errorf("scale events of %s: %+v, want one to 3", sideJob, ev)}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("before the boundary: %v\nautoscaler log:\n%s", err, tail(as.log.String(), 4000))
	}
	broker.Stop()
	stoppedAt := time.Now()
	t.Logf("idle policy scaled %s to 3 through the broker; broker stopped %s before the boundary", sideJob, boundary.Sub(stoppedAt).Round(time.Millisecond))
	if served := broker.Served(); len(served) == 0 || served[0].Path != "/v1/idle-fit" || served[0].Status != http.StatusOK {
		t.Errorf("broker requests %+v, want idle-fit reads answered 200", served)
	} else {
		for _, s := range served {
			if s.Path != "/v1/idle-fit" {
				t.Errorf("broker request %+v: only the idle policy reads the broker (schedule is answered locally)", s)
			}
		}
	}

	// Watch the scale events until two intervals after the boundary, then
	// one more interval to catch a second call.
	deadline := boundary.Add(3 * interval)
	var events []api.ScalingEvent
	for time.Now().Before(deadline) {
		events = scaleEvents(t, nomad.Client, jobID, group)
		for _, e := range events {
			if at := time.Unix(0, int64(e.Time)); at.Before(boundary) {
				t.Fatalf("scaled at %s, before the boundary %s: %+v", at.UTC(), boundary.UTC(), e)
			}
		}
		time.Sleep(time.Second)
	}
	if len(events) != 1 {
		t.Fatalf("%d scale events, want exactly 1: %+v", len(events), events)
	}
	e := events[0]
	at := time.Unix(0, int64(e.Time))
	if e.Count == nil || *e.Count != 3 {
		t.Errorf("scale event count %v, want 3: %+v", e.Count, e)
	}
	if lag := at.Sub(boundary); lag < 0 || lag > 2*interval {
		t.Errorf("scaled %s after the boundary, want within two evaluation intervals (%s)", lag, 2*interval)
	} else {
		t.Logf("scaled to 3 %s after the boundary, with the broker stopped: %s", lag.Round(time.Millisecond), e.Message)
	}
	if want := `window "e2e" in Asia/Kolkata: count 3`; e.Message != want {
		t.Errorf("scale event message %q, want the strategy's reason %q", e.Message, want)
	}

	// The idle policy has been out of its cooldown since long before, but
	// with the broker stopped its check fails and it does not scale.
	if ev := scaleEvents(t, nomad.Client, sideJob, sideGroup); len(ev) != 1 {
		t.Errorf("%d scale events of the idle job, want still 1 (broker stopped %s ago): %+v", len(ev), time.Since(stoppedAt).Round(time.Second), ev)
	}
	log := as.log.String()
	if n := strings.Count(log, "broker unreachable at "+broker.URL); n < 2 {
		t.Errorf("the autoscaler log shows %q %d times, want the idle check failing each interval", "broker unreachable at "+broker.URL, n)
	}
	// The idle check's failures are not taken for a lost Nomad connection:
	// the agent never restarts its policies (which would stall the schedule).
	if n := strings.Count(log, "re-starting policy manager"); n != 0 {
		t.Errorf("the autoscaler restarted its policy manager %d times while the broker was down", n)
	}
	for id, want := range map[string]int{jobID: 3, sideJob: 3} {
		got, _, err := nomad.Client.Jobs().Info(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c := *got.TaskGroups[0].Count; c != want {
			t.Errorf("job %s count read back from Nomad = %d, want %d", id, c, want)
		}
	}
	// Still one launch per plugin: none crashed and was launched again.
	for _, p := range plugins {
		if n := loadedCount(log, p); n != 1 {
			t.Errorf("plugin %s loaded %d times by the end, want 1", p, n)
		}
	}
}

// TestPreviewHCLJobspecThroughNomad: `gputide schedule preview` on an HCL
// jobspec has Nomad's /v1/jobs/parse turn it into JSON, and reads the check's
// strategy block from the shape a real Nomad gives (lists of one-key maps).
func TestPreviewHCLJobspecThroughNomad(t *testing.T) {
	needNomad(t)
	nomad := newNomadAgent(t, nomadOptions{})
	dir := t.TempDir()
	gputide := goBuild(t, "github.com/gputide/gputide/quota-broker/cmd/gputide", dir, "gputide")
	spec := filepath.Join(dir, "inference.nomad.hcl")
	if err := os.WriteFile(spec, []byte(`
job "inference" {
  group "serve" {
    count = 2
    scaling {
      min = 0
      max = 32
      policy {
        evaluation_interval = "1m"
        check "day-night" {
          source = "gputide-apm"
          query  = "schedule"
          strategy "gputide-schedule" {
            window_day    = "mon-fri 08:00-22:00 24"
            default_count = 2
            timezone      = "Europe/Berlin"
          }
        }
      }
    }
    task "serve" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gputide, "schedule", "preview", "-policy", spec, "-from", "2026-03-02T00:00:00Z", "-days", "1", "-json")
	cmd.Env = append(agentEnv(), "NOMAD_ADDR="+nomad.Addr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("preview: %v\n%s", err, out)
	}
	want := `{
  "timezone": "Europe/Berlin",
  "changes": [
    {
      "at": "2026-03-02T00:00:00Z",
      "local": "2026-03-02T01:00:00+01:00",
      "count": 2,
      "window": "default"
    },
    {
      "at": "2026-03-02T07:00:00Z",
      "local": "2026-03-02T08:00:00+01:00",
      "count": 24,
      "window": "day"
    },
    {
      "at": "2026-03-02T21:00:00Z",
      "local": "2026-03-02T22:00:00+01:00",
      "count": 2,
      "window": "default"
    }
  ]
}
`
	if string(out) != want {
		t.Errorf("preview output\n got: %s\nwant: %s", out, want)
	}

	// Nomad gone: the error says to give the job as JSON.
	cmd = exec.Command(gputide, "schedule", "preview", "-policy", spec)
	cmd.Env = append(agentEnv(), "NOMAD_ADDR=http://127.0.0.1:1")
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "give the job as JSON instead") {
		t.Errorf("preview without Nomad: %v\n%s; want an error saying to use JSON", err, out)
	}
}

// TestAutoscalerIdleFitScalesOncePerCooldown: a gputide-idle policy reading
// idle_fit through gputide-apm from the broker's real API handler
// (in-process, figures set by the test). Nomad runs with ACLs: the
// autoscaler's token carries the reference ACL policy
// (examples/reference/autoscaler/autoscaler-acl.hcl) and reaches the broker
// as the APM's default token (the agent's nomad_token), which the broker
// checks with Nomad (read-job on workspace-b). The figure going 16 -> 8 ->
// 16 within cooldown_on_scale_up gives one Scale call (1 + 16 = 17). Then,
// from before the cooldown ends, the broker's state is past its staleness
// bound (503, L12), and then the broker is stopped: the idle policy does not
// scale, and its check fails with "broker unreachable at <address>".
func TestAutoscalerIdleFitScalesOncePerCooldown(t *testing.T) {
	needNomad(t)
	asBin := autoscalerBinary(t)
	nomad := newNomadAgent(t, nomadOptions{ACL: true})
	dir := t.TempDir()
	pluginDir := filepath.Join(dir, "plugins")
	policyDir := filepath.Join(dir, "policies")
	for _, d := range []string{pluginDir, policyDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"gputide-apm", "gputide-idle"} {
		goBuild(t, "github.com/gputide/gputide/autoscaler-plugin/cmd/"+p, pluginDir, p)
	}

	const ns, jobID, group = "workspace-b", "e2e-idle", "train"
	const interval, cooldownUp = 5 * time.Second, 45 * time.Second
	asToken, otherToken := autoscalerTokens(t, nomad.Client, ns)
	nc, err := api.NewClient(&api.Config{Address: nomad.Addr, SecretID: nomad.ManagementToken, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	job := &api.Job{
		ID: ptr(jobID), Name: ptr(jobID), Namespace: ptr(ns), Type: ptr("batch"), Datacenters: []string{"dc1"},
		TaskGroups: []*api.TaskGroup{{
			Name: ptr(group), Count: ptr(1),
			Tasks: []*api.Task{{
				Name: "sleep", Driver: "raw_exec",
				Config:    map[string]any{"command": "/bin/sleep", "args": []string{"3600"}},
				Resources: &api.Resources{CPU: ptr(10), MemoryMB: ptr(10)},
			}},
		}},
	}
	if _, _, err := nc.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	broker := startFigureBroker(t, nomad.Addr, figureBrokerOptions{Staleness: 15 * time.Second})
	key := plan.GroupKey{Namespace: ns, Job: jobID, Group: group}
	broker.SetIdleFit(key, 16)
	checkBrokerAuth(t, broker.URL, key, asToken, otherToken)
	authReads := len(broker.Served())

	policy := fmt.Sprintf(`
scaling "idle" {
  enabled = true
  min     = 1
  max     = 40
  policy {
    evaluation_interval  = "%s"
    cooldown             = "%s"
    cooldown_on_scale_up = "%s"
    on_check_error       = "fail"
    check "idle" {
      source = "gputide-apm"
      query  = "idle_fit{namespace=\"%s\", job=\"%s\", group=\"%s\"}"
      strategy "gputide-idle" {}
    }
    target "nomad-target" {
      Job       = %q
      Group     = %q
      Namespace = %q
    }
  }
}
`, interval, interval, cooldownUp, ns, jobID, group, jobID, group, ns)
	if err := os.WriteFile(filepath.Join(policyDir, "idle.hcl"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePorts(t, 1)[0]
	as := startAutoscaler(t, asBin, dir, fmt.Sprintf(`
log_level  = "DEBUG"
plugin_dir = %q

nomad {
  address = %q
  token   = %q
}

http {
  bind_address = "127.0.0.1"
  bind_port    = %d
}

policy {
  dir = %q
  source "nomad" {
    enabled = false
  }
}

apm "gputide-apm" {
  driver = "gputide-apm"
  config = {
    address = %q
    timeout = "1s"
  }
}

strategy "gputide-idle" {
  driver = "gputide-idle"
}
`, pluginDir, nomad.Addr, asToken, port, policyDir, broker.URL))

	// The first scale: 1 + 16 = 17.
	var first time.Time
	err = waitFor(90*time.Second, 500*time.Millisecond, func() error {
		select {
		case <-as.exited:
			return errStop{fmt.Errorf("autoscaler exited:\n%s", tail(as.log.String(), 4000))}
		default:
		}
		ev := scaleEvents(t, nc, jobID, group)
		if len(ev) == 0 {
			return fmt.Errorf("no scale event yet")
		}
		if ev[0].Count == nil || *ev[0].Count != 17 {
			return errStop{fmt.Errorf("first scale event %+v, want count 17", ev[0])}
		}
		first = time.Unix(0, int64(ev[0].Time))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"gputide-apm", "gputide-idle"} {
		if n := loadedCount(as.log.String(), p); n != 1 {
			t.Errorf("plugin %s loaded %d times, want 1", p, n)
		}
	}

	// Within the cooldown the figure drops to 8 and comes back to 16; the
	// autoscaler reads both (200 from the broker) and scales no more.
	broker.SetIdleFit(key, 8)
	time.Sleep(3 * interval)
	broker.SetIdleFit(key, 16)
	time.Sleep(time.Until(first.Add(cooldownUp - interval)))
	if ev := scaleEvents(t, nc, jobID, group); len(ev) != 1 {
		t.Fatalf("%d scale events within cooldown_on_scale_up, want 1: %+v", len(ev), ev)
	}
	var read8, read16After int
	for _, s := range broker.Served()[authReads:] {
		switch {
		case s.Path != "/v1/idle-fit" || s.Status != http.StatusOK:
			t.Errorf("broker request %+v, want idle-fit reads answered 200", s)
		case s.Fit == 8:
			read8++
		case s.Fit == 16 && read8 > 0:
			read16After++
		}
	}
	if read8 == 0 || read16After == 0 {
		t.Errorf("within the cooldown the autoscaler read idle_fit 8 %d times and 16 again %d times, want both", read8, read16After)
	} else {
		t.Logf("within cooldown_on_scale_up the autoscaler read idle_fit 8 %d times, then 16 %d times: one Scale call (to 17)", read8, read16After)
	}
	if !strings.Contains(as.log.String(), "skipping scaling, policy still on cooldown") {
		t.Errorf("the autoscaler log does not show the policy skipping a scale-up in its cooldown")
	}

	// The broker's state goes stale before the cooldown ends: reads answer
	// 503 (L12) and past the cooldown the idle policy does not scale.
	broker.SetStale(true)
	time.Sleep(time.Until(first.Add(cooldownUp + 3*interval)))
	if ev := scaleEvents(t, nc, jobID, group); len(ev) != 1 {
		t.Fatalf("%d scale events with the broker's state stale, want still 1: %+v", len(ev), ev)
	}
	stale := 0
	for _, s := range broker.Served() {
		if s.Status == http.StatusServiceUnavailable {
			stale++
		}
	}
	log := as.log.String()
	if stale < 2 || !strings.Contains(log, "broker unreachable at "+broker.URL) || !strings.Contains(log, "past its staleness bound") {
		t.Errorf("stale state: %d answers 503; want the check failing each interval with %q naming the staleness bound", stale, "broker unreachable at "+broker.URL)
	}

	// The broker stops: the idle policy still does not scale.
	before := strings.Count(log, "broker unreachable at "+broker.URL)
	broker.Stop()
	time.Sleep(3 * interval)
	if ev := scaleEvents(t, nc, jobID, group); len(ev) != 1 {
		t.Fatalf("%d scale events after the broker stopped, want still 1: %+v", len(ev), ev)
	}
	if n := strings.Count(as.log.String(), "broker unreachable at "+broker.URL); n <= before {
		t.Errorf("the autoscaler log shows %q %d times, as many as before the broker stopped", "broker unreachable at "+broker.URL, n)
	}
	if n := strings.Count(as.log.String(), "re-starting policy manager"); n != 0 {
		t.Errorf("the autoscaler restarted its policy manager %d times on the broker's errors", n)
	}
	got, _, err := nc.Jobs().Info(jobID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := *got.TaskGroups[0].Count; c != 17 {
		t.Errorf("job count read back from Nomad = %d, want 17", c)
	}
}

// autoscalerTokens creates namespace ns, the reference autoscaler ACL policy
// (examples/reference/autoscaler/autoscaler-acl.hcl, which names ns) with a
// client token for it, and a client token whose policy reads only
// workspace-a; it returns both secrets.
func autoscalerTokens(t *testing.T, c *api.Client, ns string) (autoscaler, other string) {
	t.Helper()
	if _, err := c.Namespaces().Register(&api.Namespace{Name: ns}, nil); err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile(filepath.FromSlash("../examples/reference/autoscaler/autoscaler-acl.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []api.ACLPolicy{
		{Name: "gputide-autoscaler", Rules: string(rules)},
		{Name: "reads-workspace-a", Rules: `namespace "workspace-a" { capabilities = ["read-job"] }`},
	} {
		if _, err := c.ACLPolicies().Upsert(&p, nil); err != nil {
			t.Fatalf("ACL policy %s: %v", p.Name, err)
		}
		tok, _, err := c.ACLTokens().Create(&api.ACLToken{Name: p.Name, Type: "client", Policies: []string{p.Name}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if autoscaler == "" {
			autoscaler = tok.SecretID
		} else {
			other = tok.SecretID
		}
	}
	return autoscaler, other
}

// checkBrokerAuth reads the idle fit of k from the broker with the Go client
// the APM uses: the autoscaler's token reads it; a token without read-job on
// k's namespace gets 404, no token 403 (the broker's token checks against
// Nomad, DESIGN §9).
func checkBrokerAuth(t *testing.T, url string, k plan.GroupKey, token, other string) {
	t.Helper()
	for _, tc := range []struct {
		token string
		want  error
	}{{token, nil}, {other, brokerapi.ErrNotFound}, {"", brokerapi.ErrForbidden}} {
		c, err := brokerapi.NewClient(url, tc.token, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.IdleFit(context.Background(), k.Namespace, k.Job, k.Group)
		if (tc.want == nil && err != nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("idle fit of %s with token %.8s...: %v, want %v", k, tc.token, err, tc.want)
		}
	}
}

// loadedCount counts the autoscaler's "successfully launched and dispensed
// plugin" log lines for plugin name.
func loadedCount(log, name string) int {
	re := regexp.MustCompile(`successfully launched and dispensed plugin.*plugin_name=` + regexp.QuoteMeta(name) + `(\s|$)`)
	return len(re.FindAllString(log, -1))
}

// scaleEvents returns the scaling events of the group that changed its count.
func scaleEvents(t *testing.T, c *api.Client, jobID, group string) []api.ScalingEvent {
	t.Helper()
	st, _, err := c.Jobs().ScaleStatus(jobID, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []api.ScalingEvent
	for _, e := range st.TaskGroups[group].Events {
		if e.Count != nil {
			out = append(out, e)
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }
