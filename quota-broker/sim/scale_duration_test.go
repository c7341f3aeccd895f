package sim

import (
	"math"
	"testing"
	"time"
)

// A trace's duration over time_scale saturates instead of wrapping: 100
// years over 0.001 is past the largest Duration (the Philly and openb
// replays share the rule).
func TestScaleDurationSaturates(t *testing.T) {
	year := 365 * 24 * time.Hour
	for _, c := range []struct {
		d     time.Duration
		scale float64
		want  time.Duration
	}{
		{time.Hour, 1, time.Hour},
		{time.Hour, 60, time.Minute},
		{time.Second, 3, 333333333},
		{time.Minute, 0.001, 1000 * time.Minute},
		{100 * year, 0.001, math.MaxInt64},
		{-100 * year, 0.001, math.MinInt64},
		{math.MaxInt64, 0.5, math.MaxInt64},
	} {
		if got := scaleDuration(c.d, c.scale); got != c.want {
			t.Errorf("scaleDuration(%v, %g) = %v, want %v", c.d, c.scale, got, c.want)
		}
	}
}
