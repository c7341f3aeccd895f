package idlestrategy

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad-autoscaler/sdk"

	"github.com/gputide/gputide/autoscaler-plugin/pluginconf"
)

func evalWith(cfg map[string]string, points ...sdk.TimestampedMetric) *sdk.ScalingCheckEvaluation {
	return &sdk.ScalingCheckEvaluation{
		Check:   &sdk.ScalingPolicyCheck{Name: "idle", Strategy: &sdk.ScalingPolicyStrategy{Name: Name, Config: cfg}},
		Metrics: points,
	}
}

func TestRun(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	pt := func(sec int, v float64) sdk.TimestampedMetric {
		return sdk.TimestampedMetric{Timestamp: t0.Add(time.Duration(sec) * time.Second), Value: v}
	}
	type out struct {
		Count     int64
		Direction sdk.ScaleDirection
		Reason    string
	}
	tests := []struct {
		name    string
		points  []sdk.TimestampedMetric
		current int64
		want    out
	}{
		{"grows by the figure", []sdk.TimestampedMetric{pt(0, 8)}, 2, out{10, sdk.ScaleDirectionUp, "idle_fit 8: count 2 + 8 = 10"}},
		{"the latest point wins, whatever the order", []sdk.TimestampedMetric{pt(10, 3), pt(0, 16), pt(5, 7)}, 1, out{4, sdk.ScaleDirectionUp, "idle_fit 3: count 1 + 3 = 4"}},
		{"zero keeps the count", []sdk.TimestampedMetric{pt(0, 0)}, 5, out{5, sdk.ScaleDirectionNone, "idle_fit 0: count 5 + 0 = 5"}},
		{"a negative point counts as zero", []sdk.TimestampedMetric{pt(0, -4)}, 5, out{5, sdk.ScaleDirectionNone, "idle_fit 0: count 5 + 0 = 5"}},
		{"a fraction is rounded down", []sdk.TimestampedMetric{pt(0, 2.9)}, 1, out{3, sdk.ScaleDirectionUp, "idle_fit 2: count 1 + 2 = 3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := New(nil).Run(evalWith(nil, tt.points...), tt.current)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, out{ev.Action.Count, ev.Action.Direction, ev.Action.Reason}); diff != "" {
				t.Errorf("Run (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	s := New(nil)
	if _, err := s.Run(evalWith(nil), 1); !errors.Is(err, ErrNoPoint) {
		t.Errorf("no points: %v, want ErrNoPoint", err)
	}
	if _, err := s.Run(evalWith(nil, sdk.TimestampedMetric{Value: math.NaN()}), 1); !errors.Is(err, ErrBadPoint) {
		t.Errorf("NaN: %v, want ErrBadPoint", err)
	}
	_, err := s.Run(evalWith(map[string]string{"max": "4"}, sdk.TimestampedMetric{Value: 1}), 1)
	if !errors.Is(err, pluginconf.ErrUnknownKey) || err.Error() != `gputide-idle: config key "max": unknown key; this plugin takes no keys here` {
		t.Errorf("a strategy key: %v", err)
	}
	if err := s.SetConfig(map[string]string{"nomad_token": "x"}); err != nil {
		t.Errorf("SetConfig with nomad_*: %v", err)
	}
	if err := s.SetConfig(map[string]string{"x": "1"}); !errors.Is(err, pluginconf.ErrUnknownKey) {
		t.Errorf("SetConfig with x: %v", err)
	}
}

// BenchmarkRun is one Run (issue 11: under 1 ms).
func BenchmarkRun(b *testing.B) {
	s := New(nil)
	ev := evalWith(nil, sdk.TimestampedMetric{Timestamp: time.Unix(0, 0), Value: 8})
	for b.Loop() {
		if _, err := s.Run(ev, 2); err != nil {
			b.Fatal(err)
		}
	}
}
