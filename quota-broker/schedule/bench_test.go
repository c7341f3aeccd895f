package schedule

import (
	"math/rand"
	"testing"
	"time"
)

// benchConfig is the reference scenario's inference schedule (issue 3) with a
// weekend window, holidays and, optionally, a ramp.
func benchConfig(ramp string) map[string]string {
	cfg := map[string]string{
		"window_day":     "mon-fri 08:00-22:00 24",
		"window_weekend": "sat,sun 10:00-18:00 8",
		"default":        "2",
		"time_zone":      "Europe/Berlin",
		"holidays":       "2026-04-03,2026-04-06,2026-05-01,2026-12-25,2026-12-26",
	}
	if ramp != "" {
		cfg["ramp"] = ramp
	}
	return cfg
}

// BenchmarkCountAt evaluates the count as the simulator does: every 30
// simulated seconds, moving forward through 3.5 months (the Philly trace's
// span), then starting over.
func BenchmarkCountAt(b *testing.B) {
	for _, bc := range []struct{ name, ramp string }{{"every-30s", ""}, {"every-30s-ramp-15m", "15m"}} {
		b.Run(bc.name, func(b *testing.B) {
			s := mustParse(b, benchConfig(bc.ramp))
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			const steps = 105 * 24 * 60 * 2 // 3.5 months of 30 s intervals
			b.ReportAllocs()
			b.ResetTimer()
			sum := 0
			for i := 0; i < b.N; i++ {
				sum += s.CountAt(start.Add(time.Duration(i%steps) * 30 * time.Second))
			}
			_ = sum
		})
	}
	b.Run("random-instants-over-2-years", func(b *testing.B) {
		s := mustParse(b, benchConfig(""))
		rng := rand.New(rand.NewSource(1))
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		times := make([]time.Time, 4096)
		for i := range times {
			times[i] = start.Add(time.Duration(rng.Int63n(int64(2 * 365 * 24 * time.Hour))))
		}
		b.ReportAllocs()
		b.ResetTimer()
		sum := 0
		for i := 0; i < b.N; i++ {
			sum += s.CountAt(times[i%len(times)])
		}
		_ = sum
	})
}

// BenchmarkNextBoundary walks from boundary to boundary, as the simulator's
// pre-warm does.
func BenchmarkNextBoundary(b *testing.B) {
	s := mustParse(b, benchConfig(""))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t := start
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		next, _, ok := s.NextBoundary(t)
		if !ok {
			b.Fatal("no boundary")
		}
		t = next
		if i%1000 == 999 {
			t = start
		}
	}
}

func BenchmarkParse(b *testing.B) {
	cfg := benchConfig("15m")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Parse(cfg); err != nil {
			b.Fatal(err)
		}
	}
}
