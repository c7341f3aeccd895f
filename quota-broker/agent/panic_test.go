package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Issue 16, item 5: a panic in the planner does not kill the acting broker.
// The cycle recovers, logs the panic once with its stack, dumps the
// snapshot and the panic into dump_dir, counts it in
// gputide_cycle_panics_total, stops acting (no Nomad write) and keeps
// serving reads; it acts again once a plan succeeds.
func TestAgentSurvivesAPanickingPlanner(t *testing.T) {
	f := newFakeNomad(t)
	f.dynamic = true // a meta write is served back: the jobs then need none
	dir := t.TempDir()
	dumps := filepath.Join(dir, "dumps")
	if err := os.WriteFile(filepath.Join(dir, "quota.hcl"), []byte(e2eQuota), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(fmt.Sprintf(`
nomad { address = %q }
quota_file  = "quota.hcl"
http_bind   = "127.0.0.1:0"
admin_token = "adm"
dump_dir    = "dumps"
`, f.srv.URL)), filepath.Join(dir, "broker.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Interval, cfg.Staleness = 50*time.Millisecond, 300*time.Millisecond
	var panicking atomic.Bool
	var plans atomic.Int64
	planner := func(s *plan.Snapshot) (*plan.Plan, error) {
		if panicking.Load() {
			panic("stopReason: no unit for the stop") // as the planner's nil-pointer bug would
		}
		plans.Add(1)
		return plan.Compute(s)
	}
	var logs syncBuffer
	a, err := New(cfg, Options{Planner: planner, Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &logs})})
	if err != nil {
		t.Fatal(err)
	}
	panicking.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	panics := func() float64 { return testutil.ToFloat64(a.metrics.CyclePanics) }

	// Several cycles panic: each is counted, none acts.
	until(t, "three panicking cycles", 10*time.Second, func() bool { return panics() >= 3 })
	if h := a.Health(); h.Acting || !strings.Contains(h.Why, `panic in step "plan" of the cycle: stopReason: no unit for the stop`) {
		t.Errorf("health = %+v, want not acting because of the panic", h)
	}
	if n := f.writeCount(); n != 0 {
		f.mu.Lock()
		t.Errorf("%d Nomad writes while the planner panicked: %v", n, f.writes)
		f.mu.Unlock()
	}
	// Logged once, with the stack, although it panicked again and again.
	out := logs.String()
	if n := strings.Count(out, "recovered from a panic in the cycle"); n != 1 {
		t.Errorf("the panic is logged %d times, want once:\n%s", n, out)
	}
	for _, want := range []string{`step=plan`, `panic="stopReason: no unit for the stop"`, "runtime/debug.Stack", "TestAgentSurvivesAPanickingPlanner"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	// The snapshot it panicked on, and the panic, are in dump_dir.
	snaps, _ := filepath.Glob(filepath.Join(dumps, "snapshot-*.json"))
	pans, _ := filepath.Glob(filepath.Join(dumps, "panic-*.json"))
	if len(snaps) != 1 || len(pans) != 1 {
		t.Fatalf("dump_dir has snapshots %v and panics %v, want one of each", snaps, pans)
	}
	data, err := os.ReadFile(pans[0])
	if err != nil {
		t.Fatal(err)
	}
	var pd panicDump
	if err := json.Unmarshal(data, &pd); err != nil || pd.Step != "plan" || pd.Panic != "stopReason: no unit for the stop" ||
		!strings.Contains(pd.Stack, "TestAgentSurvivesAPanickingPlanner") {
		t.Errorf("panic dump = %+v (%v)", pd, err)
	}
	if data, err := os.ReadFile(snaps[0]); err != nil || !strings.Contains(string(data), `"workspace-c"`) {
		t.Errorf("snapshot dump: %v\n%s", err, data)
	}
	// Health is served meanwhile (the reads of a plan wait for one).
	if code := getStatus(t, a.Addr(), "/v1/agent/health", ""); code != http.StatusOK {
		t.Errorf("GET /v1/agent/health: %d", code)
	}

	// A good plan: the broker acts again (the meta errors of the two bad
	// jobs are written), and reads the plan.
	panicking.Store(false)
	until(t, "acting again", 10*time.Second, func() bool { return a.Health().Acting })
	until(t, "the meta writes", 10*time.Second, func() bool { return f.writeCount() >= 2 })
	if code := getStatus(t, a.Addr(), "/v1/plan", "adm"); code != http.StatusOK {
		t.Errorf("GET /v1/plan after a good plan: %d", code)
	}
	if !strings.Contains(logs.String(), "planning succeeds again after a panic") {
		t.Errorf("no log of the recovery:\n%s", logs.String())
	}

	// A second panic after a good plan stops acting again, with the
	// last plan still served, and is logged again (a new streak).
	before := panics()
	n := f.writeCount()
	panicking.Store(true)
	until(t, "a new panic", 10*time.Second, func() bool { return panics() >= before+2 })
	if h := a.Health(); h.Acting {
		t.Errorf("health = %+v, want not acting", h)
	}
	for _, path := range []string{"/v1/plan", "/v1/quotas", "/v1/queue"} {
		if code := getStatus(t, a.Addr(), path, "adm"); code != http.StatusOK {
			t.Errorf("GET %s while panicking: %d, want the last plan's answer", path, code)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if got := f.writeCount(); got != n {
		t.Errorf("Nomad writes went from %d to %d while the planner panicked", n, got)
	}
	if c := strings.Count(logs.String(), "recovered from a panic in the cycle"); c != 2 {
		t.Errorf("the panic is logged %d times over two streaks, want 2", c)
	}
}
