package scalingpolicy

import (
	"errors"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/schedule"
)

// FuzzPreviewInput runs arbitrary files through what `gputide schedule
// preview` does with them (but the Nomad call): no panic, errors of this
// package or the schedule's, and a parsed schedule previews a day.
func FuzzPreviewInput(f *testing.F) {
	f.Add([]byte("scaling \"a\" {\n max = 1\n policy {\n  check \"c\" {\n   strategy \"gputide-schedule\" {\n    window_d = \"mon-fri 08:00-22:00 24\"\n    default_count = 2\n    timezone = \"Europe/Berlin\"\n    ramp = \"10m\"\n   }\n  }\n }\n}\n"))
	f.Add([]byte(`{"Job": {"ID": "j", "TaskGroups": [{"Name": "g", "Scaling": {"Policy": {"check": [{"c": [{"strategy": [{"gputide-schedule": [{"window_d": "sat,sun 22:00-02:00 3", "default": 1}]}]}]}]}}}]}}`))
	f.Add([]byte("job \"x\" {\n}\n"))
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, src []byte) {
		var checks []Check
		var err error
		switch Sniff("f.hcl", src) {
		case KindJSONJob:
			checks, err = FromJSONJob("f.hcl", src)
		case KindHCLJob:
			return
		default:
			checks, err = FromPolicyFile("f.hcl", src)
		}
		var pe *Error
		if err != nil {
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not an *Error", err)
			}
			return
		}
		c, err := Select("f.hcl", checks, ScheduleStrategy, "")
		if err != nil {
			return
		}
		s, err := schedule.Parse(c.Config)
		var ce *schedule.ConfigError
		if err != nil {
			if !errors.As(err, &ce) {
				t.Fatalf("schedule error %v is not a *ConfigError", err)
			}
			return
		}
		if ch := s.Changes(from, 24*time.Hour); len(ch) == 0 || !ch[0].At.Equal(from) {
			t.Fatalf("Changes = %v: want the count at from first", ch)
		}
	})
}
