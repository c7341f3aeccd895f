package schedulestrategy

import (
	"errors"
	"testing"
	"time"
	_ "time/tzdata"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad-autoscaler/sdk"

	"github.com/gputide/gputide/autoscaler-plugin/pluginconf"
	"github.com/gputide/gputide/quota-broker/schedule"
)

func at(t *testing.T, v string) time.Time {
	t.Helper()
	tt, err := time.Parse(time.RFC3339, v)
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

func evalWith(cfg map[string]string) *sdk.ScalingCheckEvaluation {
	return &sdk.ScalingCheckEvaluation{
		Check: &sdk.ScalingPolicyCheck{Name: "day-night", Strategy: &sdk.ScalingPolicyStrategy{Name: Name, Config: cfg}},
		// Metrics are ignored: a value that a metric-driven strategy would act on.
		Metrics: sdk.TimestampedMetrics{{Timestamp: time.Unix(0, 0), Value: 1000}},
	}
}

var dayNight = map[string]string{
	"window_day": "mon-fri 08:00-22:00 24", "default_count": "2", "timezone": "Europe/Berlin", "ramp": "10m",
}

func TestRun(t *testing.T) {
	tests := []struct {
		name    string
		now     string
		current int64
		want    Action
	}{
		{"in the day window, up from the night count", "2026-03-02T09:00:00Z", 2,
			Action{24, sdk.ScaleDirectionUp, `window "day" in Europe/Berlin: count 24`}},
		{"in the day window at its count", "2026-03-02T09:00:00Z", 24,
			Action{24, sdk.ScaleDirectionNone, `window "day" in Europe/Berlin: count 24`}},
		{"at night, down to the default", "2026-03-02T22:00:00Z", 24,
			Action{2, sdk.ScaleDirectionDown, `no window in Europe/Berlin: default count 2`}},
		{"mid-ramp: from the schedule's count, not the job's", "2026-03-02T07:05:00Z", 0,
			Action{14, sdk.ScaleDirectionUp, `window "day" in Europe/Berlin: count 14, ramping to 24`}},
		{"ramping down at 22:00 CET", "2026-03-02T21:00:00Z", 24,
			Action{23, sdk.ScaleDirectionDown, `no window in Europe/Berlin: count 23, ramping to the default count 2`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := at(t, tt.now)
			s := New(nil, func() time.Time { return now })
			ev, err := s.Run(evalWith(dayNight), tt.current)
			if err != nil {
				t.Fatal(err)
			}
			got := Action{ev.Action.Count, ev.Action.Direction, ev.Action.Reason}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Run (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	s := New(nil, func() time.Time { return time.Unix(0, 0) })
	tests := []struct {
		name string
		eval *sdk.ScalingCheckEvaluation
		want string
	}{
		{"a bad time names key and value",
			evalWith(map[string]string{"window_day": "mon-fri 25:00-22:00 24", "default_count": "2"}),
			`gputide-schedule: window_day: invalid time "25:00" in "mon-fri 25:00-22:00 24"`},
		{"both zone keys",
			evalWith(map[string]string{"window_day": "mon-fri 08:00-22:00 24", "default_count": "2", "timezone": "UTC", "time_zone": "UTC"}),
			`gputide-schedule: timezone: give either timezone or time_zone, not both`},
		{"an unknown key",
			evalWith(map[string]string{"window_day": "mon-fri 08:00-22:00 24", "default_count": "2", "tz": "UTC"}),
			`gputide-schedule: tz: unknown key; known keys are window_<name>, default_count (alias default), timezone (alias time_zone), holidays, ramp`},
		{"no strategy block",
			&sdk.ScalingCheckEvaluation{Check: &sdk.ScalingPolicyCheck{Name: "x"}},
			`gputide-schedule: no strategy config: the check needs a strategy "gputide-schedule" block with window_<name> and default_count`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Twice: the second answer comes from the cache and must be the same.
			for range 2 {
				_, err := s.Run(tt.eval, 1)
				if err == nil || err.Error() != tt.want {
					t.Fatalf("Run error\n got: %v\nwant: %s", err, tt.want)
				}
			}
		})
	}
	var ce *schedule.ConfigError
	_, err := s.Run(evalWith(map[string]string{"window_day": "mon 08:00-09:00 x", "default_count": "2"}), 1)
	if !errors.As(err, &ce) || ce.Key != "window_day" || ce.Value != "mon 08:00-09:00 x" {
		t.Errorf("Run error %v: want a *schedule.ConfigError for window_day", err)
	}
}

func TestCacheKeyedByContent(t *testing.T) {
	now := at(t, "2026-03-02T09:00:00Z")
	s := New(nil, func() time.Time { return now })
	a := map[string]string{"window_day": "mon-fri 08:00-22:00 24", "default_count": "2"}
	b := map[string]string{"window_day": "mon-fri 08:00-22:00 12", "default_count": "2"}
	for _, c := range []struct {
		cfg  map[string]string
		want int64
	}{{a, 24}, {b, 12}, {a, 24}} {
		ev, err := s.Run(evalWith(c.cfg), 0)
		if err != nil || ev.Action.Count != c.want {
			t.Fatalf("Run(%v) = %v, %v; want count %d", c.cfg, ev.Action, err, c.want)
		}
	}
	if len(s.cache) != 2 {
		t.Errorf("cache holds %d schedules, want 2", len(s.cache))
	}
	// Keys and values are length-prefixed: shifting a character between key
	// and value changes the hash.
	if hashConfig(map[string]string{"ab": "c"}) == hashConfig(map[string]string{"a": "bc"}) {
		t.Error("hashConfig confuses key/value boundaries")
	}
}

func TestSetConfig(t *testing.T) {
	s := New(nil, nil)
	if err := s.SetConfig(map[string]string{"nomad_address": "http://127.0.0.1:4646", "nomad_token": "secret"}); err != nil {
		t.Errorf("SetConfig with the agent's nomad_* keys: %v", err)
	}
	err := s.SetConfig(map[string]string{"nomad_token": "secret", "timezone": "UTC"})
	if !errors.Is(err, pluginconf.ErrUnknownKey) || err.Error() != `gputide-schedule: config key "timezone": unknown key; this plugin takes no keys here (the schedule goes in the check's strategy block)` {
		t.Errorf("SetConfig with timezone = %v, want ErrUnknownKey naming it", err)
	}
}

// BenchmarkRun is Run with the schedule already parsed (the cache hit of every
// evaluation after the first; issue 11: under 1 ms).
func BenchmarkRun(b *testing.B) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	s := New(nil, func() time.Time { now = now.Add(time.Minute); return now })
	cfg := map[string]string{
		"window_day": "mon-fri 08:00-22:00 24", "window_sat": "sat 10:00-14:00 8", "default_count": "2",
		"timezone": "Europe/Berlin", "holidays": "2026-12-25,2026-12-26", "ramp": "10m",
	}
	ev := evalWith(cfg)
	for b.Loop() {
		if _, err := s.Run(ev, 2); err != nil {
			b.Fatal(err)
		}
	}
}
