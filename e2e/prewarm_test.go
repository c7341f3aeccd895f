package e2e

// Pre-warm end to end (DESIGN L5 "Pre-warm", §8; issue 11 item 5): a Nomad
// dev agent with 8 mock GPUs (NOMAD_BIN, the device plugin's mock backend),
// the broker in-process on the memory store (its tree sets drain_horizon =
// 2m, drain_margin = 20s), and the real Nomad Autoscaler v0.5.0
// (NOMAD_AUTOSCALER_BIN) with our three plugins in its plugin_dir and the
// Nomad policy source, so that the autoscaler and the broker's
// PolicyWatcher read the same job-embedded scaling blocks:
//
//   - team A's inference (workspace-a, service, 2 GPUs per allocation, count
//     1) with a gputide-schedule check whose window (Europe/Berlin) opens at
//     the boundary B, 2m30s-3m30s ahead, and raises the count to 3 for 2
//     minutes; evaluation_interval = cooldown = 30s;
//   - team B's idle elastic training (workspace-b, 6 allocations of 1 GPU,
//     gputide_idle, gputide_elastic) with a gputide-idle check on idle_fit:
//     it borrows every GPU the inference does not use.
//
// The broker turns the schedule into a pre-warm entry (at B, 2 allocations,
// until B + 30s + settle), stops 4 idle workers (rule L5.prewarm) at B -
// (kill_timeout + drain_margin) = B - 30s, holds their GPUs and lowers the
// idle group's count to 2; nothing else is placed on the held GPUs; the
// autoscaler's scale-up to 3 finds them free: inference runs within
// evaluation_interval + 5 s of B. At the window's end E the autoscaler
// scales inference back to 1 and the idle group grows by the broker's
// idle_fit (4) and runs 6 workers again within two evaluation intervals of
// E. Every instant is logged relative to B or E. Needs NOMAD_BIN and
// NOMAD_AUTOSCALER_BIN; without them it skips (fails under CI).

import (
	"bufio"
	stdcmp "cmp"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	brokerapi "github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/snapshot"
	"github.com/hashicorp/nomad/api"
)

// Settings and bounds of the pre-warm e2e test.
const (
	prewarmLead     = 150 * time.Second // B is the first whole minute at least this far ahead
	prewarmWindow   = 2 * time.Minute   // the window's length: E = B + this
	prewarmEval     = 30 * time.Second  // the inference policy's evaluation_interval and cooldown
	prewarmKill     = 10 * time.Second  // kill_timeout of every job
	prewarmMargin   = 20 * time.Second  // the tree's drain_margin
	prewarmHorizon  = 2 * time.Minute   // the tree's drain_horizon
	prewarmSettle   = 30 * time.Second  // the tree's settle (the default)
	prewarmIdleEval = 5 * time.Second   // the idle policy's evaluation_interval and cooldown
	prewarmSlack    = 5 * time.Second   // issue 11: inference runs within evaluation_interval + 5 s of B
	prewarmZone     = "Europe/Berlin"
)

// The jobs of the test: team A's inference and team B's idle training.
var (
	prewarmInference = plan.GroupKey{Namespace: "workspace-a", Job: "inference", Group: "main"}
	prewarmIdle      = plan.GroupKey{Namespace: "workspace-b", Job: "train-idle", Group: "main"}
)

func TestPrewarmDrainsBorrowersBeforeAScheduledScaleUp(t *testing.T) {
	needNomad(t)
	asBin := autoscalerBinary(t)
	a := startGPUNomad(t)
	c := a.Client
	b := startPrewarmBroker(t, a.Addr)
	as := startPrewarmAutoscaler(t, asBin, a.Addr, b.Addr)

	// The window: from B (a whole minute, 2m30s-3m30s ahead) for 2 minutes,
	// in local time.
	loc, err := time.LoadLocation(prewarmZone)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	boundary := now.Add(prewarmLead).Truncate(time.Minute)
	if boundary.Before(now.Add(prewarmLead)) {
		boundary = boundary.Add(time.Minute)
	}
	end := boundary.Add(prewarmWindow)
	local := boundary.In(loc)
	window := fmt.Sprintf("%s %s-%s 3", weekdayNames[local.Weekday()], local.Format("15:04"), end.In(loc).Format("15:04"))
	t.Logf("window %q (%s): boundary B = %s, %s ahead; end E = %s", window, prewarmZone,
		boundary.UTC().Format(time.RFC3339), time.Until(boundary).Round(time.Second), end.UTC().Format(time.RFC3339))
	rel := func(at, ref time.Time) string { return fmt.Sprintf("%+.1fs", at.Sub(ref).Seconds()) }

	// Inference first (2 GPUs), then the idle group fills the other 6.
	registerJobIn(t, c, prewarmInferenceJob(window))
	waitRunning(t, c, prewarmInference.Namespace, prewarmInference.Job, 1, 60*time.Second)
	registerJobIn(t, c, prewarmIdleJob())
	idleBefore := waitRunning(t, c, prewarmIdle.Namespace, prewarmIdle.Job, 6, 60*time.Second)
	if left := time.Until(boundary.Add(-(prewarmKill + prewarmMargin))); left < 20*time.Second {
		t.Fatalf("setup too slow: %s left before the pre-warm's stops are due", left)
	}

	// The broker's snapshot gets the pre-warm entry once B is within
	// drain_horizon.
	var entry plan.Prewarm
	err = waitFor(time.Until(boundary.Add(-prewarmHorizon))+30*time.Second, 500*time.Millisecond, func() error {
		s, err := readBrokerSnapshot(b)
		if err != nil {
			return err
		}
		for _, w := range s.Prewarm {
			if w.Key() == prewarmInference {
				entry = w
				return nil
			}
		}
		return fmt.Errorf("no pre-warm entry in the snapshot (%d entries)", len(s.Prewarm))
	})
	if err != nil {
		t.Fatal(err)
	}
	entrySeen := time.Now()
	// Datacenters ["*"] is any datacenter: none listed. Flavors: the
	// job's allowed flavors as the adapter derives them (DESIGN L13), in a
	// tree without flavor blocks the implicit one.
	want := plan.Prewarm{Namespace: "workspace-a", Job: "inference", Group: "main", Type: plan.JobService, Priority: 80,
		GPUs: 2, NodePool: "default", At: boundary.UTC(), Count: 2, Until: boundary.Add(prewarmEval + prewarmSettle).UTC(),
		Flavors: []string{"gpu"}}
	if d := cmp.Diff(want, entry, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("pre-warm entry (-want +got):\n%s", d)
	}
	t.Logf("pre-warm entry in the snapshot at B%s (drain_horizon %s)", rel(entrySeen, boundary), prewarmHorizon)

	// Until inference runs 3 allocations: the idle workers are stopped,
	// their GPUs held, and nothing else is placed on them.
	tl := watchPrewarm(t, c, b, idleBefore, boundary.Add(prewarmEval+prewarmSlack+15*time.Second))
	due := boundary.Add(-(prewarmKill + prewarmMargin))
	t.Logf("stops due at B%s; broker stopped %d idle workers at B%s..B%s (rule L5.prewarm); last one gone at B%s; "+
		"GPUs %v held at B%s until %s; inference scaled to 3 at B%s, 3 running (Nomad) at B%s, last task started at B%s",
		rel(due, boundary), len(tl.stops), rel(tl.firstStop(), boundary), rel(tl.lastStop(), boundary), rel(tl.victimsGone, boundary),
		tl.held, rel(tl.heldSeen, boundary), tl.holdUntil.Format(time.RFC3339), rel(tl.scaledUp, boundary), rel(tl.infRunning, boundary),
		rel(tl.infStarted, boundary))
	if len(tl.stops) != 4 {
		t.Fatalf("%d pre-warm stops, want 4 idle workers: %+v", len(tl.stops), tl.stops)
	}
	for _, p := range tl.stops {
		if p.Namespace != prewarmIdle.Namespace || p.Job != prewarmIdle.Job || p.GPUs != 1 || !slices.Contains(idleBefore, p.Alloc) ||
			p.For != prewarmInference.String() {
			t.Errorf("pre-warm stop %+v: want an idle worker of %s (1 GPU) stopped for %s", p, prewarmIdle.JobKey(), prewarmInference)
		}
	}
	if first := tl.firstStop(); first.Before(due.Add(-time.Second)) {
		t.Errorf("first stop at B%s, before it was due (B%s)", rel(first, boundary), rel(due, boundary))
	}
	if tl.victimsGone.IsZero() || !tl.victimsGone.Before(boundary) {
		t.Errorf("victims gone at B%s, want before the boundary", rel(tl.victimsGone, boundary))
	}
	if len(tl.held) != 4 || !tl.holdUntil.Equal(want.Until) {
		t.Errorf("broker held GPUs %v until %s, want 4 until %s", tl.held, tl.holdUntil, want.Until)
	}
	for _, v := range tl.onHeld {
		t.Errorf("between the stops and the scale-up, %s", v)
	}
	if tl.maxIdleLive != 2 {
		t.Errorf("idle workers live after the stops: at most %d, want 2", tl.maxIdleLive)
	}
	if tl.scaledUp.Before(boundary) {
		t.Errorf("inference scaled to 3 at B%s, before the boundary", rel(tl.scaledUp, boundary))
	}
	if tl.infRunning.IsZero() || tl.infRunning.Sub(boundary) > prewarmEval+prewarmSlack {
		t.Fatalf("inference ran 3 allocations at B%s, want within evaluation_interval + %s (%s)", rel(tl.infRunning, boundary),
			prewarmSlack, prewarmEval+prewarmSlack)
	}
	if n := gpusOf(t, c, running(t, c, prewarmInference.Namespace, prewarmInference.Job)); len(n) != 6 {
		t.Errorf("inference holds GPUs %v, want 6", n)
	}
	if got, err := readBrokerMetric(b, `gputide_preemptions_total{claimant_namespace="workspace-a",namespace="workspace-b",rule="L5.prewarm"}`); err != nil || got != 4 {
		t.Errorf("gputide_preemptions_total for L5.prewarm = %v (%v), want 4", got, err)
	}
	if j := jobInfo(t, c, prewarmIdle.Namespace, prewarmIdle.Job); *j.TaskGroups[0].Count != 2 {
		t.Errorf("idle group count %d after the stops, want 2 (the broker lowers it to its live allocations, L7)", *j.TaskGroups[0].Count)
	}
	if t.Failed() {
		return
	}

	// The window's end: inference back to 1, the idle group takes the 4
	// GPUs within two evaluation intervals.
	back := watchWindowEnd(t, c, end, end.Add(2*prewarmEval+15*time.Second))
	var steps []string
	for _, e := range back.idleSteps {
		steps = append(steps, fmt.Sprintf("%d at E%s", *e.Count, rel(time.Unix(0, int64(e.Time)), end)))
	}
	t.Logf("inference scaled to 1 at E%s (1 running at E%s); idle group scaled to %s; 6 workers running at E%s",
		rel(back.scaledDown, end), rel(back.infDown, end), strings.Join(steps, ", then "), rel(back.idleRunning, end))
	for _, l := range autoscalerIdleFitLines(as.log.String(), now) {
		t.Logf("autoscaler: %s", l)
	}
	// The idle group's count, from the stops to the end: 2, set by the
	// broker; nothing raises it while its GPUs are held or used.
	for _, e := range groupScaleEvents(t, c, prewarmIdle) {
		at := time.Unix(0, int64(e.Time))
		t.Logf("idle group scale event at B%s: count %d, %q", rel(at, boundary), *e.Count, e.Message)
		if at.After(tl.firstStop()) && at.Before(end) && *e.Count != 2 {
			t.Errorf("idle group scaled to %d at B%s, inside the window (its GPUs were held or used)", *e.Count, rel(at, boundary))
		}
	}
	if back.scaledDown.IsZero() || back.scaledDown.Before(end) || back.scaledDown.Sub(end) > prewarmEval+prewarmSlack {
		t.Errorf("inference scaled down at E%s, want within evaluation_interval + %s after the end", rel(back.scaledDown, end), prewarmSlack)
	}
	if back.idleRunning.IsZero() || back.idleRunning.Sub(end) > 2*prewarmEval {
		t.Errorf("idle group ran 6 workers at E%s, want within two evaluation intervals (%s)", rel(back.idleRunning, end), 2*prewarmEval)
	}
	// The idle group grows by idle_fit, in one step or, when the autoscaler
	// reads the fit while inference is still stopping, in more steps (each
	// after cooldown_on_scale_up), to 2 + 4. The Autoscaler's current count
	// is the nomad-target's cached Running of the job's scale status, which
	// lag: seen as 3 and as 4 while 2 ran (4 + 4 = 8); the broker
	// lowers such a count to the live allocations after settle (L7).
	if n := len(back.idleSteps); n == 0 || *back.idleSteps[n-1].Count < 6 {
		t.Errorf("idle group scaled to %s, want 6 at last (2 + idle_fit 4)", strings.Join(steps, ", then "))
	} else if last := *back.idleSteps[n-1].Count; last > 6 {
		t.Logf("idle group scaled to %d, above 2 + idle_fit 4: the Autoscaler's current count was not the 2 running", last)
	}
	if got := gpusOf(t, c, running(t, c, prewarmIdle.Namespace, prewarmIdle.Job)); len(got) != 6 {
		t.Errorf("idle group holds GPUs %v, want 6", got)
	}
}

// registerJobIn registers a job in its namespace.
func registerJobIn(t *testing.T, c *api.Client, j *api.Job) {
	t.Helper()
	if _, _, err := c.Jobs().Register(j, &api.WriteOptions{Namespace: *j.Namespace}); err != nil {
		t.Fatalf("register %s/%s: %v", *j.Namespace, *j.ID, err)
	}
}

// prewarmInferenceJob is team A's inference: 1 allocation of 2 GPUs and a
// scaling block whose gputide-schedule check raises it to 3 in window.
func prewarmInferenceJob(window string) *api.Job {
	j := jobSpec{Namespace: prewarmInference.Namespace, ID: prewarmInference.Job, Type: "service", Priority: 80,
		Count: 1, GPUs: 2, KillTimeout: prewarmKill}.job()
	j.TaskGroups[0].Scaling = &api.ScalingPolicy{Min: ptr(int64(1)), Max: ptr(int64(3)), Enabled: ptr(true), Policy: map[string]any{
		"evaluation_interval": prewarmEval.String(), "cooldown": prewarmEval.String(), "on_check_error": "fail",
		"check": []any{map[string]any{"day-night": []any{map[string]any{"source": "gputide-apm", "query": "schedule",
			"strategy": []any{map[string]any{"gputide-schedule": []any{map[string]any{
				"window_morning": window, "default_count": 1, "timezone": prewarmZone}}}}}}}}}}
	return j
}

// prewarmIdleJob is team B's idle elastic training: 6 workers of 1 GPU and
// a gputide-idle policy on the broker's idle_fit (min 1, max 8).
func prewarmIdleJob() *api.Job {
	k := prewarmIdle
	j := jobSpec{Namespace: k.Namespace, ID: k.Job, Type: "batch", Priority: 40, Count: 6, GPUs: 1, KillTimeout: prewarmKill,
		Meta: map[string]string{"gputide_idle": "true", "gputide_elastic": "true"}}.job()
	j.TaskGroups[0].Scaling = &api.ScalingPolicy{Min: ptr(int64(1)), Max: ptr(int64(8)), Enabled: ptr(true), Policy: map[string]any{
		"evaluation_interval": prewarmIdleEval.String(), "cooldown": prewarmIdleEval.String(), "cooldown_on_scale_up": "20s",
		"on_check_error": "fail",
		"check": []any{map[string]any{"fit": []any{map[string]any{"source": "gputide-apm",
			"query":    fmt.Sprintf(`idle_fit{namespace=%q,job=%q,group=%q}`, k.Namespace, k.Job, k.Group),
			"strategy": []any{map[string]any{"gputide-idle": []any{map[string]any{}}}}}}}}}}
	return j
}

// startPrewarmBroker runs the broker in-process on nomadAddr with the
// memory store; its tree (Quota1 = 8 with child preemption, Quota1.1 =
// Quota1.2 = 4) sets drain_horizon and drain_margin short enough for the
// pre-warm to happen within the test.
func startPrewarmBroker(t *testing.T, nomadAddr string) *broker {
	t.Helper()
	dir := t.TempDir()
	quotaFile := filepath.Join(dir, "quota.hcl")
	tree := fmt.Sprintf(e2eQuota, 4, 4) + fmt.Sprintf(`
settings {
  drain_horizon = %q
  drain_margin  = %q
  settle        = %q
}
`, prewarmHorizon, prewarmMargin, prewarmSettle)
	if err := os.WriteFile(quotaFile, []byte(tree), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "broker.hcl")
	src := fmt.Sprintf(`
nomad {
  address = %q
}
quota_file = "quota.hcl"
interval   = "2s"
staleness  = "5s"
http_bind  = "127.0.0.1:%d"
log_level  = "debug"
open_reads_without_acl = true
`, nomadAddr, freePorts(t, 1)[0])
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return runBroker(t, cfg, quotaFile)
}

// startPrewarmAutoscaler builds the three plugins into a plugin_dir and
// starts the autoscaler on Nomad's scaling policies of the two workspaces,
// its gputide-apm pointed at the broker.
func startPrewarmAutoscaler(t *testing.T, bin, nomadAddr, brokerAddr string) *autoscalerAgent {
	t.Helper()
	dir := t.TempDir()
	pluginDir := filepath.Join(dir, "plugins")
	if err := os.MkdirAll(pluginDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"gputide-schedule", "gputide-apm", "gputide-idle"} {
		goBuild(t, "github.com/gputide/gputide/autoscaler-plugin/cmd/"+p, pluginDir, p)
	}
	as := startAutoscaler(t, bin, dir, fmt.Sprintf(`
log_level  = "DEBUG"
plugin_dir = %q

nomad {
  address   = %q
  namespace = ["workspace-a", "workspace-b"]
}

http {
  bind_address = "127.0.0.1"
  bind_port    = %d
}

apm "gputide-apm" {
  driver = "gputide-apm"
  config = {
    address = "http://%s"
    timeout = "2s"
  }
}

strategy "gputide-schedule" {
  driver = "gputide-schedule"
}

strategy "gputide-idle" {
  driver = "gputide-idle"
}
`, pluginDir, nomadAddr, freePorts(t, 1)[0], brokerAddr))
	err := waitFor(60*time.Second, 500*time.Millisecond, func() error {
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
	return as
}

// readBrokerSnapshot reads the snapshot of the broker's last plan.
func readBrokerSnapshot(b *broker) (*plan.Snapshot, error) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + b.Addr + "/v1/snapshot")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/snapshot: %s", resp.Status)
	}
	return snapshot.Decode(resp.Body)
}

// readBrokerMetric reads one sample of the broker's /metrics by its full name
// with labels (Prometheus text format, labels in sorted order).
func readBrokerMetric(b *broker, series string) (float64, error) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + b.Addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no sample %s", series)
}

// prewarmTimeline is what watchPrewarm saw until inference ran 3
// allocations.
type prewarmTimeline struct {
	stops       []brokerapi.PreemptionEntry // the broker's stops of rule L5.prewarm
	victimsGone time.Time                   // the last victim's terminal time (Nomad's ModifyTime)
	held        []string                    // GPU IDs of the broker's holds for the inference group (snapshot)
	holdUntil   time.Time
	heldSeen    time.Time // first snapshot with the holds
	maxIdleLive int       // most idle workers live (pending or running) once the victims were gone
	onHeld      []string  // allocations of other jobs seen on the held GPUs
	scaledUp    time.Time // the autoscaler's scale event to 3
	infRunning  time.Time // first poll with 3 inference allocations running
	infStarted  time.Time // the latest task start of those
}

func (tl *prewarmTimeline) firstStop() time.Time {
	if len(tl.stops) == 0 {
		return time.Time{}
	}
	return *tl.stops[0].At
}

func (tl *prewarmTimeline) lastStop() time.Time {
	if len(tl.stops) == 0 {
		return time.Time{}
	}
	return *tl.stops[len(tl.stops)-1].At
}

// allocWithGPUs is a live allocation with its GPU IDs.
type allocWithGPUs struct {
	ID, Namespace, Job, Status string
	GPUs                       []string
	Modified                   time.Time
}

// allocsWithGPUs lists every allocation (all namespaces) with its GPU IDs.
func allocsWithGPUs(t *testing.T, c *api.Client) []allocWithGPUs {
	t.Helper()
	list, _, err := c.Allocations().List(&api.QueryOptions{Namespace: "*", Params: map[string]string{"resources": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	var out []allocWithGPUs
	for _, a := range list {
		g := allocWithGPUs{ID: a.ID, Namespace: a.Namespace, Job: a.JobID, Status: a.ClientStatus, Modified: time.Unix(0, a.ModifyTime)}
		if a.AllocatedResources != nil {
			for _, tr := range a.AllocatedResources.Tasks {
				for _, d := range tr.Devices {
					g.GPUs = append(g.GPUs, d.DeviceIDs...)
				}
			}
		}
		sort.Strings(g.GPUs)
		out = append(out, g)
	}
	return out
}

func (g allocWithGPUs) live() bool {
	return g.Status == api.AllocClientStatusPending || g.Status == api.AllocClientStatusRunning
}

// watchPrewarm polls Nomad and the broker until inference runs 3
// allocations or deadline: the broker's L5.prewarm stops, the victims'
// end, the plan's holds, the idle workers and anything else placed on the
// held GPUs, and the inference's scale-up.
func watchPrewarm(t *testing.T, c *api.Client, b *broker, idleBefore []string, deadline time.Time) *prewarmTimeline {
	t.Helper()
	tl := &prewarmTimeline{}
	for time.Now().Before(deadline) {
		now := time.Now()
		tl.stops = tl.stops[:0]
		for _, p := range b.preemptions(t) {
			if p.Rule == string(plan.RulePrewarm) {
				tl.stops = append(tl.stops, p)
			}
		}
		if tl.held == nil {
			if snap, err := readBrokerSnapshot(b); err == nil {
				var held []string
				for _, h := range snap.Holds {
					if h.For.Group == prewarmInference {
						held = append(held, h.GPUIDs...)
						tl.holdUntil = h.Until
					}
				}
				if len(held) > 0 {
					sort.Strings(held)
					tl.held, tl.heldSeen = held, now
				}
			}
		}
		all := allocsWithGPUs(t, c)
		if len(tl.stops) > 0 && tl.victimsGone.IsZero() {
			gone, last := 0, time.Time{}
			for _, a := range all {
				if slices.ContainsFunc(tl.stops, func(p brokerapi.PreemptionEntry) bool { return p.Alloc == a.ID }) && !a.live() {
					gone++
					last = latestOf(last, a.Modified)
				}
			}
			if gone == len(tl.stops) && gone == 4 {
				tl.victimsGone = last
			}
		}
		infRunning := 0
		idleLive := 0
		for _, a := range all {
			if !a.live() {
				continue
			}
			isInf := a.Namespace == prewarmInference.Namespace && a.Job == prewarmInference.Job
			if a.Namespace == prewarmIdle.Namespace && a.Job == prewarmIdle.Job {
				idleLive++
			}
			if isInf && a.Status == api.AllocClientStatusRunning {
				infRunning++
			}
			if !isInf && tl.held != nil && !tl.victimsGone.IsZero() &&
				slices.ContainsFunc(a.GPUs, func(g string) bool { return slices.Contains(tl.held, g) }) {
				v := fmt.Sprintf("allocation %s of %s/%s (%s) holds GPUs %v of the held %v", a.ID, a.Namespace, a.Job, a.Status, a.GPUs, tl.held)
				if !slices.Contains(tl.onHeld, v) {
					tl.onHeld = append(tl.onHeld, v)
				}
			}
		}
		if !tl.victimsGone.IsZero() {
			tl.maxIdleLive = max(tl.maxIdleLive, idleLive)
		}
		if tl.scaledUp.IsZero() {
			for _, e := range groupScaleEvents(t, c, prewarmInference) {
				if e.Count != nil && *e.Count == 3 {
					tl.scaledUp = time.Unix(0, int64(e.Time))
				}
			}
		}
		if infRunning >= 3 {
			tl.infRunning = now
			for _, id := range running(t, c, prewarmInference.Namespace, prewarmInference.Job) {
				al, _, err := c.Allocations().Info(id, &api.QueryOptions{Namespace: prewarmInference.Namespace})
				if err != nil {
					t.Fatal(err)
				}
				if ts := al.TaskStates["work"]; ts != nil {
					tl.infStarted = latestOf(tl.infStarted, ts.StartedAt)
				}
			}
			return tl
		}
		time.Sleep(250 * time.Millisecond)
	}
	return tl
}

// prewarmEnd is what watchWindowEnd saw after the window's end.
type prewarmEnd struct {
	scaledDown  time.Time          // the autoscaler's scale event of inference to 1
	infDown     time.Time          // first poll with 1 inference allocation running
	idleSteps   []api.ScalingEvent // the idle group's scale-ups after the end
	idleRunning time.Time          // first poll with 6 idle workers running
}

// watchWindowEnd polls until the idle group runs 6 workers or deadline.
func watchWindowEnd(t *testing.T, c *api.Client, end, deadline time.Time) *prewarmEnd {
	t.Helper()
	w := &prewarmEnd{}
	for time.Now().Before(deadline) {
		now := time.Now()
		if w.scaledDown.IsZero() {
			for _, e := range groupScaleEvents(t, c, prewarmInference) {
				if at := time.Unix(0, int64(e.Time)); e.Count != nil && *e.Count == 1 && !at.Before(end.Add(-prewarmEval)) {
					w.scaledDown = at
				}
			}
		}
		if w.infDown.IsZero() && len(running(t, c, prewarmInference.Namespace, prewarmInference.Job)) == 1 {
			w.infDown = now
		}
		w.idleSteps = w.idleSteps[:0]
		for _, e := range groupScaleEvents(t, c, prewarmIdle) {
			if at := time.Unix(0, int64(e.Time)); *e.Count > 2 && at.After(end.Add(-prewarmEval)) {
				w.idleSteps = append(w.idleSteps, e)
			}
		}
		if len(running(t, c, prewarmIdle.Namespace, prewarmIdle.Job)) == 6 && !w.infDown.IsZero() {
			w.idleRunning = now
			return w
		}
		time.Sleep(250 * time.Millisecond)
	}
	return w
}

// autoscalerIdleFitLines returns the autoscaler's log lines, from instant from on,
// that computed an idle group's count from a non-zero idle_fit: their
// time and reason.
func autoscalerIdleFitLines(log string, from time.Time) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		i := strings.Index(line, `reason="idle_fit `)
		if i < 0 || strings.Contains(line, `reason="idle_fit 0:`) {
			continue
		}
		ts, _, _ := strings.Cut(line, " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || at.Before(from) {
			continue
		}
		out = append(out, ts+" "+line[i:])
	}
	return out
}

// groupScaleEvents returns the scaling events of group k that set a count,
// oldest first.
func groupScaleEvents(t *testing.T, c *api.Client, k plan.GroupKey) []api.ScalingEvent {
	t.Helper()
	st, _, err := c.Jobs().ScaleStatus(k.Job, &api.QueryOptions{Namespace: k.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	var out []api.ScalingEvent
	for _, e := range st.TaskGroups[k.Group].Events {
		if e.Count != nil {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b api.ScalingEvent) int { return stdcmp.Compare(a.Time, b.Time) })
	return out
}

func latestOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
