package schedulestrategy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad-autoscaler/sdk"

	"github.com/gputide/gputide/quota-broker/schedule"
)

// FuzzRun gives Run strategy blocks built from fuzzed keys and values: no
// panic; an error is a *schedule.ConfigError naming a key of the block (or the
// missing window/default); a success gives a count >= 0 and a reason naming
// the zone.
func FuzzRun(f *testing.F) {
	f.Add("window_day", "mon-fri 08:00-22:00 24", "timezone", "Europe/Berlin", "2", "10m", int64(1772438400))
	f.Add("window_n", "fri-mon 22:00-06:00 3", "time_zone", "America/New_York", "0", "0", int64(1788000000))
	f.Add("window_x", "sat,sun 25:00-01:00 1", "holidays", "2026-12-25", "x", "-1m", int64(0))
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, def, ramp string, unix int64) {
		cfg := map[string]string{k1: v1, k2: v2, "default_count": def, "ramp": ramp}
		now := time.Unix(unix%(1<<40), 0)
		s := New(nil, func() time.Time { return now })
		ev, err := s.Run(&sdk.ScalingCheckEvaluation{Check: &sdk.ScalingPolicyCheck{Strategy: &sdk.ScalingPolicyStrategy{Name: Name, Config: cfg}}}, 1)
		if err != nil {
			var ce *schedule.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Run error %v is not a *schedule.ConfigError", err)
			}
			if _, ok := cfg[ce.Key]; !ok && ce.Key != "window_<name>" && ce.Key != "default_count" {
				t.Fatalf("error %v names key %q, not in the block", err, ce.Key)
			}
			return
		}
		if ev.Action.Count < 0 || !strings.Contains(ev.Action.Reason, " in ") {
			t.Fatalf("Run = %+v", ev.Action)
		}
	})
}
