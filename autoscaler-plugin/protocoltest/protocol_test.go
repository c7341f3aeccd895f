package protocoltest

import (
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/nomad-autoscaler/plugins"
	"github.com/hashicorp/nomad-autoscaler/plugins/apm"
	"github.com/hashicorp/nomad-autoscaler/plugins/base"
	"github.com/hashicorp/nomad-autoscaler/plugins/strategy"
	"github.com/hashicorp/nomad-autoscaler/sdk"
)

// binDir holds the plugin binaries, built once by TestMain.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gputide-plugins-")
	if err != nil {
		panic(err)
	}
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "../cmd/...")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		panic("building the plugins: " + err.Error())
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// dispense starts the plugin binary name as the autoscaler's plugin manager
// does (plugins/manager: same handshake, plugin map and protocol) and returns
// the dispensed plugin of type ptype.
func dispense(t *testing.T, name, ptype string) any {
	t.Helper()
	pm := map[string]plugin.Plugin{sdk.PluginTypeBase: &base.PluginBase{}}
	switch ptype {
	case sdk.PluginTypeStrategy:
		pm[ptype] = &strategy.PluginStrategy{}
	case sdk.PluginTypeAPM:
		pm[ptype] = &apm.PluginAPM{}
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  plugins.Handshake,
		Plugins:          pm,
		Cmd:              exec.Command(filepath.Join(binDir, name)),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	raw, err := rpc.Dispense(ptype)
	if err != nil {
		t.Fatalf("dispensing %s as %s: %v", name, ptype, err)
	}
	return raw
}

// checkBase checks PluginInfo and SetConfig as the agent calls them.
func checkBase(t *testing.T, b base.Base, name, ptype string, good map[string]string, unknownKey string) {
	t.Helper()
	info, err := b.PluginInfo()
	if err != nil || info.Name != name || info.PluginType != ptype {
		t.Errorf("PluginInfo = %+v, %v; want %s %s", info, err, name, ptype)
	}
	// The agent merges its nomad_* settings into every plugin block.
	cfg := map[string]string{"nomad_address": "http://127.0.0.1:4646", "nomad_token": "agent-token", "nomad_region": "global", "nomad_config_inherit": "true"}
	for k, v := range good {
		cfg[k] = v
	}
	if err := b.SetConfig(cfg); err != nil {
		t.Errorf("SetConfig(%v): %v", cfg, err)
	}
	err = b.SetConfig(map[string]string{"nomad_token": "t", unknownKey: "x"})
	if err == nil || !strings.Contains(err.Error(), `config key "`+unknownKey+`": unknown key`) {
		t.Errorf("SetConfig with %s = %v, want it refused by name", unknownKey, err)
	}
	// A refused config must not break the plugin for a good one after it.
	if err := b.SetConfig(cfg); err != nil {
		t.Errorf("SetConfig after a refused one: %v", err)
	}
}

func check(strategyName string, cfg map[string]string, metrics ...float64) *sdk.ScalingCheckEvaluation {
	ev := &sdk.ScalingCheckEvaluation{Check: &sdk.ScalingPolicyCheck{
		Name: "c", Source: "gputide-apm", Query: "schedule",
		Strategy: &sdk.ScalingPolicyStrategy{Name: strategyName, Config: cfg},
	}}
	for i, v := range metrics {
		ev.Metrics = append(ev.Metrics, sdk.TimestampedMetric{Timestamp: time.Unix(int64(i), 0), Value: v})
	}
	return ev
}

func TestScheduleStrategyOverGRPC(t *testing.T) {
	s := dispense(t, "gputide-schedule", sdk.PluginTypeStrategy).(strategy.Strategy)
	checkBase(t, s, "gputide-schedule", sdk.PluginTypeStrategy, nil, "timezone")

	// A window holding all week: the count is 7 whatever the clock says.
	ev, err := s.Run(check("gputide-schedule", map[string]string{
		"window_all": "mon-sun 00:00-24:00 7", "default_count": "1", "timezone": "Asia/Tokyo",
	}, 500), 3)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Action.Count != 7 || ev.Action.Direction != sdk.ScaleDirectionUp || ev.Action.Reason != `window "all" in Asia/Tokyo: count 7` {
		t.Errorf("Run = %+v; want count 7 up, reason naming window and zone", ev.Action)
	}
	// The same count against a larger current one: direction down.
	ev, err = s.Run(check("gputide-schedule", map[string]string{
		"window_all": "mon-sun 00:00-24:00 7", "default_count": "1",
	}), 9)
	if err != nil || ev.Action.Count != 7 || ev.Action.Direction != sdk.ScaleDirectionDown {
		t.Errorf("Run = %+v, %v; want count 7 down", ev.Action, err)
	}

	// The aliases and the optional keys, all given: still count 7.
	ev, err = s.Run(check("gputide-schedule", map[string]string{
		"window_all": "mon-sun 00:00-24:00 7", "default": "1", "time_zone": "Asia/Tokyo", "holidays": "2020-01-01", "ramp": "0",
	}), 1)
	if err != nil || ev.Action.Count != 7 || ev.Action.Direction != sdk.ScaleDirectionUp {
		t.Errorf("Run with default, time_zone, holidays, ramp = %+v, %v; want count 7 up", ev.Action, err)
	}

	for cfg, want := range map[string]map[string]string{
		`window_day: invalid time "25:00" in "mon-fri 25:00-22:00 24"`: {"window_day": "mon-fri 25:00-22:00 24", "default_count": "2"},
		`timezone: give either timezone or time_zone, not both`:        {"window_day": "mon-fri 08:00-22:00 24", "default_count": "2", "timezone": "UTC", "time_zone": "UTC"},
		`timezone: unknown time zone "Mars/Base"`:                      {"window_day": "mon-fri 08:00-22:00 24", "default_count": "2", "timezone": "Mars/Base"},
		`zone: unknown key`:                   {"window_day": "mon-fri 08:00-22:00 24", "default_count": "2", "zone": "UTC"},
		`default_count: missing`:              {"window_day": "mon-fri 08:00-22:00 24"},
		`ramp: invalid duration "fast"`:       {"window_day": "mon-fri 08:00-22:00 24", "default_count": "2", "ramp": "fast"},
		`holidays: invalid date "2026-13-01"`: {"window_day": "mon-fri 08:00-22:00 24", "default_count": "2", "holidays": "2026-13-01"},
		`window_<name>: no window`:            {},
	} {
		_, err := s.Run(check("gputide-schedule", want), 1)
		if err == nil || !strings.Contains(err.Error(), cfg) {
			t.Errorf("Run(%v) = %v, want an error containing %q", want, err, cfg)
		}
	}
}

func TestIdleStrategyOverGRPC(t *testing.T) {
	s := dispense(t, "gputide-idle", sdk.PluginTypeStrategy).(strategy.Strategy)
	checkBase(t, s, "gputide-idle", sdk.PluginTypeStrategy, nil, "max")
	ev, err := s.Run(check("gputide-idle", nil, 16, 8), 2)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Action.Count != 10 || ev.Action.Direction != sdk.ScaleDirectionUp {
		t.Errorf("Run = %+v; want 2 + the latest point 8 = 10, up", ev.Action)
	}
	if _, err := s.Run(check("gputide-idle", nil), 2); err == nil || !strings.Contains(err.Error(), "no metric point") {
		t.Errorf("Run without points = %v, want an error", err)
	}
	if _, err := s.Run(check("gputide-idle", map[string]string{"target": "3"}, 1), 2); err == nil || !strings.Contains(err.Error(), `config key "target"`) {
		t.Errorf("Run with a strategy key = %v, want it refused by name", err)
	}
	// A negative figure adds nothing (count stays, direction none); NaN
	// crosses gRPC as NaN and is refused.
	if ev, err := s.Run(check("gputide-idle", nil, -3), 2); err != nil || ev.Action.Count != 2 || ev.Action.Direction != sdk.ScaleDirectionNone {
		t.Errorf("Run with point -3 = %+v, %v; want count 2, direction none", ev.Action, err)
	}
	if _, err := s.Run(check("gputide-idle", nil, math.NaN()), 2); err == nil || !strings.Contains(err.Error(), "bad metric point") {
		t.Errorf("Run with a NaN point = %v, want a bad metric point error", err)
	}
}

func TestAPMOverGRPC(t *testing.T) {
	var calls atomic.Int32
	var stale atomic.Bool
	broker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("X-Nomad-Token") != "agent-token" {
			w.WriteHeader(403)
			_, _ = w.Write([]byte(`{"error": "permission denied: a valid Nomad ACL token is needed"}`))
			return
		}
		age := "1"
		if stale.Load() {
			age = "30"
		}
		switch r.URL.Path {
		case "/v1/quotas":
			_, _ = w.Write([]byte(`{"state_age_seconds": ` + age + `, "staleness_seconds": 15, "quotas": [{"name": "Quota1.2", "lendable_gpus": 24}]}`))
		case "/v1/idle-fit":
			_, _ = w.Write([]byte(`{"state_age_seconds": ` + age + `, "staleness_seconds": 15, "idle_fit": 16}`))
		}
	}))
	defer broker.Close()

	a := dispense(t, "gputide-apm", sdk.PluginTypeAPM).(apm.APM)
	checkBase(t, a, "gputide-apm", sdk.PluginTypeAPM, map[string]string{"address": broker.URL, "timeout": "2s"}, "adress")
	// Bad values of known keys are refused by key, and leave the good
	// config in force.
	for key, cfg := range map[string]map[string]string{
		"timeout": {"address": broker.URL, "timeout": "soon"},
		"address": {"address": "127.0.0.1:4780"},
	} {
		if err := a.SetConfig(cfg); err == nil || !strings.Contains(err.Error(), `config key "`+key+`"`) {
			t.Errorf("SetConfig(%v) = %v, want it refused naming %q", cfg, err, key)
		}
	}

	for q, want := range map[string]float64{
		"schedule":                                    1,
		`lendable_gpus{quota="Quota1.2"}`:             24,
		`idle_fit{namespace="n", job="j", group="g"}`: 16,
	} {
		got, err := a.Query(q, sdk.TimeRange{From: time.Now().Add(-time.Minute), To: time.Now()})
		if err != nil || len(got) != 1 || got[0].Value != want {
			t.Errorf("Query(%s) = %v, %v; want one point %v", q, got, err, want)
		}
	}
	before := calls.Load()
	if _, err := a.Query("schedule", sdk.TimeRange{}); err != nil || calls.Load() != before {
		t.Errorf("Query(schedule): %v, %d broker calls; want none", err, calls.Load()-before)
	}
	multi, err := a.QueryMultiple(`idle_fit{namespace="n", job="j", group="g"}`, sdk.TimeRange{})
	if err != nil || len(multi) != 1 || len(multi[0]) != 1 || multi[0][0].Value != 16 {
		t.Errorf("QueryMultiple(idle_fit) = %v, %v; want one series of one point 16", multi, err)
	}
	for q, want := range map[string]string{
		`used_gpus{quota=Quota1}`:              `query "used_gpus{quota=Quota1}": offset 16`,
		`foo_gpus{quota="Q"}`:                  `query "foo_gpus{quota=\"Q\"}": offset 0: unknown metric "foo_gpus"`,
		`idle_fit{namespace="n",job="j"}`:      `offset 30: missing label "group"`,
		``:                                     `query "": offset 0: want a metric name`,
		`lendable_gpus{quota="Nope"}`:          `quota "Nope" not found at broker ` + broker.URL,
		`schedule{}`:                           `query "schedule{}": offset 8`,
		`idle_fit{namespace="n",job="j",g=""}`: `query "idle_fit{namespace=\"n\",job=\"j\",g=\"\"}": offset`,
	} {
		if got, err := a.Query(q, sdk.TimeRange{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Query(%s) = %v, %v; want an error containing %s", q, got, err, want)
		}
	}

	// The broker's state past its staleness bound reads as unreachable;
	// a refused token does not.
	stale.Store(true)
	if _, err := a.Query(`idle_fit{namespace="n", job="j", group="g"}`, sdk.TimeRange{}); err == nil ||
		!strings.Contains(err.Error(), "broker unreachable at "+broker.URL) || !strings.Contains(err.Error(), "past its staleness bound of 15s") {
		t.Errorf("stale broker = %v, want broker unreachable at %s naming the staleness bound", err, broker.URL)
	}
	stale.Store(false)
	if err := a.SetConfig(map[string]string{"address": broker.URL, "token": "other"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Query(`lendable_gpus{quota="Quota1.2"}`, sdk.TimeRange{}); err == nil ||
		!strings.Contains(err.Error(), "HTTP 403") || strings.Contains(err.Error(), "unreachable") {
		t.Errorf("refused token = %v, want the broker's 403, not unreachable", err)
	}

	broker.Close()
	// As the agent reads it over gRPC: the broker named, and neither phrase
	// the agent takes for a lost Nomad connection (it would restart all its
	// policies, schedule ones included).
	if _, err := a.Query(`used_gpus{quota="Quota1.2"}`, sdk.TimeRange{}); err == nil || !strings.Contains(err.Error(), "broker unreachable at "+broker.URL) ||
		strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "EOF") {
		t.Errorf("broker down = %v, want broker unreachable at %s without \"connection refused\" or \"EOF\"", err, broker.URL)
	}
	if got, err := a.Query("schedule", sdk.TimeRange{}); err != nil || len(got) != 1 {
		t.Errorf("schedule with the broker down = %v, %v; want one point", got, err)
	}
}
