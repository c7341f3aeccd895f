package e2e

// End-to-end test of the autoscaler plugins (issue 11): a real Nomad dev agent
// (NOMAD_BIN), the real Nomad Autoscaler v0.5.0 (NOMAD_AUTOSCALER_BIN, built by
// e2e/tools/autoscaler/build.sh) with our plugins in its plugin_dir and a file
// policy, scaling a batch job through the builtin nomad-target. Without the
// binaries the test skips; under CI (env CI set) it fails instead.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
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
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = a.cmd.Wait(); close(a.exited) }()
	t.Cleanup(func() {
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
// our plugins once; a gputide-schedule window opening 60-120 s ahead (in
// Asia/Kolkata, UTC+05:30) gives exactly one Scale call, to the window's count,
// within two evaluation intervals after the boundary, and none before it. The
// APM points at a broker that does not exist: `schedule` is answered locally,
// so day/night scaling outlives a broker outage.
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
	job := &api.Job{
		ID: ptr(jobID), Name: ptr(jobID), Type: ptr("batch"), Datacenters: []string{"dc1"},
		TaskGroups: []*api.TaskGroup{{
			Name: ptr(group), Count: ptr(1),
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
`, interval, interval, window, jobID, group)
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
    address = "http://127.0.0.1:1"
    timeout = "1s"
  }
}

strategy "gputide-schedule" {
  driver = "gputide-schedule"
}

strategy "gputide-idle" {
  driver = "gputide-idle"
}
`, pluginDir, nomad.Addr, port, policyDir, interval))
	t.Logf("window %q (Asia/Kolkata), boundary %s, %s ahead", window, boundary.UTC().Format(time.RFC3339), time.Until(boundary).Round(time.Second))

	// Each plugin is loaded exactly once.
	err = waitFor(60*time.Second, 500*time.Millisecond, func() error {
		select {
		case <-as.exited:
			return errStop{fmt.Errorf("autoscaler exited:\n%s", tail(as.log.String(), 4000))}
		default:
		}
		for _, p := range []string{"gputide-apm", "gputide-schedule", "gputide-idle"} {
			if n := loadedCount(as.log.String(), p); n != 1 {
				return fmt.Errorf("plugin %s loaded %d times", p, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
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
		t.Logf("scaled to 3 %s after the boundary: %s", lag.Round(time.Millisecond), e.Message)
	}
	got, _, err := nomad.Client.Jobs().Info(jobID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := *got.TaskGroups[0].Count; c != 3 {
		t.Errorf("job count read back from Nomad = %d, want 3", c)
	}
	if want := `window "e2e" in Asia/Kolkata: count 3`; e.Message != want {
		t.Errorf("scale event message %q, want the strategy's reason %q", e.Message, want)
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
// idle_fit through gputide-apm from a broker stand-in (an httptest server
// giving the figures the test sets, in the JSON shape of quota-broker/api:
// the broker's own handler comes with issues 10 and 11's server side). The
// figure going 16 -> 8 -> 16 within cooldown_on_scale_up gives one Scale call
// (1 + 16 = 17); with the broker stopped, the idle policy does not scale.
func TestAutoscalerIdleFitScalesOncePerCooldown(t *testing.T) {
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
	for _, p := range []string{"gputide-apm", "gputide-idle"} {
		goBuild(t, "github.com/gputide/gputide/autoscaler-plugin/cmd/"+p, pluginDir, p)
	}
	var figure atomic.Int64
	figure.Store(16)
	broker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/v1/idle-fit" || q.Get("namespace") != "default" || q.Get("job") != "e2e-idle" || q.Get("group") != "train" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error": "no such idle group"}`))
			return
		}
		fmt.Fprintf(w, `{"state_age_seconds": 0.5, "staleness_seconds": 15, "namespace": "default", "job": "e2e-idle", "group": "train", "idle_fit": %d}`, figure.Load())
	}))
	defer broker.Close()

	const jobID, group = "e2e-idle", "train"
	const interval, cooldownUp = 5 * time.Second, 45 * time.Second
	job := &api.Job{
		ID: ptr(jobID), Name: ptr(jobID), Type: ptr("batch"), Datacenters: []string{"dc1"},
		TaskGroups: []*api.TaskGroup{{
			Name: ptr(group), Count: ptr(1),
			Tasks: []*api.Task{{
				Name: "sleep", Driver: "raw_exec",
				Config:    map[string]any{"command": "/bin/sleep", "args": []string{"3600"}},
				Resources: &api.Resources{CPU: ptr(10), MemoryMB: ptr(10)},
			}},
		}},
	}
	if _, _, err := nomad.Client.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
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
`, interval, interval, cooldownUp, jobID, group, jobID, group)
	if err := os.WriteFile(filepath.Join(policyDir, "idle.hcl"), []byte(policy), 0o644); err != nil {
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
`, pluginDir, nomad.Addr, port, policyDir, broker.URL))

	// The first scale: 1 + 16 = 17.
	var first time.Time
	err := waitFor(90*time.Second, 500*time.Millisecond, func() error {
		select {
		case <-as.exited:
			return errStop{fmt.Errorf("autoscaler exited:\n%s", tail(as.log.String(), 4000))}
		default:
		}
		ev := scaleEvents(t, nomad.Client, jobID, group)
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
	// Within the cooldown the figure drops to 8 and comes back to 16.
	figure.Store(8)
	time.Sleep(3 * interval)
	figure.Store(16)
	time.Sleep(time.Until(first.Add(cooldownUp - interval)))
	if ev := scaleEvents(t, nomad.Client, jobID, group); len(ev) != 1 {
		t.Fatalf("%d scale events within cooldown_on_scale_up, want 1: %+v", len(ev), ev)
	}
	// The broker stops: past the cooldown the idle policy does not scale.
	broker.Close()
	time.Sleep(time.Until(first.Add(cooldownUp + 3*interval)))
	if ev := scaleEvents(t, nomad.Client, jobID, group); len(ev) != 1 {
		t.Fatalf("%d scale events after the broker stopped, want still 1: %+v", len(ev), ev)
	}
	if !strings.Contains(as.log.String(), "broker unreachable at "+broker.URL) {
		t.Errorf("the autoscaler log does not show %q", "broker unreachable at "+broker.URL)
	}
	got, _, err := nomad.Client.Jobs().Info(jobID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := *got.TaskGroups[0].Count; c != 17 {
		t.Errorf("job count read back from Nomad = %d, want 17", c)
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
