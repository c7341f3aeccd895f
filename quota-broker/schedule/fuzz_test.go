package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// fuzzZones are the zones the fuzzer picks from (by index), so that it does
// not spend its time probing the file system with random zone names.
var fuzzZones = []string{"", "UTC", "Europe/Berlin", "America/Los_Angeles", "Australia/Lord_Howe", "Asia/Kolkata", "Pacific/Apia", "Nope/Nowhere"}

// FuzzParse checks that Parse never panics, that every error is a *ConfigError
// naming a key of the map (or the missing window_<name>/default), and that a
// schedule it accepts evaluates without panicking to a count it could give.
func FuzzParse(f *testing.F) {
	f.Add("day", "mon-fri 08:00-22:00 24", "night", "fri-mon 22:00-06:00 3", "2", "2026-12-25", "15m", uint8(2), int64(0))
	f.Add("a", "sat,sun 00:00-24:00 1", "b", "mon,wed-fri 02:30-02:45 9", "0", "", "", uint8(3), int64(1e15))
	f.Add("x", "mon 25:00-22:00 24", "", "", "", "2026-13-01", "-1h", uint8(7), int64(-5e17))
	f.Add("s", "sun 02:30-04:00 10", "t", "sat 20:00-02:30 6", "2", "2026-10-25,2026-03-29", "1h", uint8(2), int64(1.7925e18))
	f.Fuzz(func(t *testing.T, n1, w1, n2, w2, def, hol, ramp string, zone uint8, at int64) {
		cfg := map[string]string{}
		if n1 != "" || w1 != "" {
			cfg["window_"+n1] = w1
		}
		if n2 != "" {
			cfg["window_"+n2] = w2
		}
		if def != "" {
			cfg["default"] = def
		}
		if hol != "" {
			cfg["holidays"] = hol
		}
		if ramp != "" {
			cfg["ramp"] = ramp
		}
		if z := fuzzZones[int(zone)%len(fuzzZones)]; z != "" {
			cfg["time_zone"] = z
		}
		s, err := Parse(cfg)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is %T, not *ConfigError", err, err)
			}
			if _, inMap := cfg[ce.Key]; !inMap && ce.Key != "window_<name>" && ce.Key != "default" {
				t.Fatalf("error %q names key %q, which is not in %v", err, ce.Key, cfg)
			}
			if !strings.HasPrefix(err.Error(), ce.Key+": ") {
				t.Fatalf("error %q does not start with its key %q", err, ce.Key)
			}
			return
		}
		allowed := map[int]bool{s.def: true}
		lo, hi := s.def, s.def
		for _, w := range s.windows {
			allowed[w.count] = true
			lo, hi = min(lo, w.count), max(hi, w.count)
		}
		// Keep the instant within ±150 years of 2026 so that the cache's week
		// arithmetic is exercised without overflowing time.Time.
		const span = int64(150 * 365 * 24 * time.Hour / time.Second)
		tm := time.Unix(1_767_225_600+at%span, at%1e9)
		n := s.CountAt(tm)
		if n < lo || n > hi || (s.ramp == 0 && !allowed[n]) {
			t.Fatalf("CountAt(%v) = %d, not a count of %v", tm, n, cfg)
		}
		if next, c, ok := s.NextBoundary(tm); ok {
			if !next.After(tm) {
				t.Fatalf("NextBoundary(%v) = %v, not after", tm, next)
			}
			if got := s.CountAt(next); got != c {
				t.Fatalf("NextBoundary(%v) says %d at %v, CountAt says %d", tm, c, next, got)
			}
			if got := s.CountAt(next.Add(-time.Nanosecond)); got == c {
				t.Fatalf("NextBoundary(%v) = %v, %d, but the count is already %d just before", tm, next, c, got)
			}
		}
	})
}
