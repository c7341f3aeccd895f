package schedule

import (
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"
	_ "time/tzdata" // the tests do not depend on the host's zone files
)

// Calendar used below (2026): Mon 2 Mar; Fri 6 Mar; Sat 7 Mar; Sun 29 Mar is
// the EU spring-forward day (Berlin 02:00 CET -> 03:00 CEST at 01:00Z); Sun 25
// Oct is the EU fall-back day (Berlin 03:00 CEST -> 02:00 CET at 01:00Z, so
// 02:00-03:00 local happens twice: 00:00Z-01:00Z and 01:00Z-02:00Z); Sun 8 Mar
// is the US spring-forward day (Los Angeles 02:00 PST -> 03:00 PDT at 10:00Z);
// Sun 1 Nov is the US fall-back day (02:00 PDT -> 01:00 PST at 09:00Z); Fri 25
// Dec.

func mustParse(t testing.TB, cfg map[string]string) *Schedule {
	t.Helper()
	s, err := Parse(cfg)
	if err != nil {
		t.Fatalf("Parse(%v): %v", cfg, err)
	}
	return s
}

// instant parses "2006-01-02 15:04:05" in zone tz, or an RFC 3339 time when
// tz is "".
func instant(t testing.TB, tz, v string) time.Time {
	t.Helper()
	if tz == "" {
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.ParseInLocation(time.DateTime, v, loc)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

const berlin = "Europe/Berlin"

func TestCountAt(t *testing.T) {
	day := map[string]string{"window_day": "mon-fri 08:00-22:00 24", "default": "2", "time_zone": berlin}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{"default": "2", "time_zone": berlin}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name string
		cfg  map[string]string
		tz   string // zone of at; "" = RFC 3339
		at   string
		want int
	}{
		{"a weekday window holds from its start", day, berlin, "2026-03-02 08:00:00", 24},
		{"the default holds one second before a window starts", day, berlin, "2026-03-02 07:59:59", 2},
		{"a window holds one second before its end", day, berlin, "2026-03-02 21:59:59", 24},
		{"a window's end is exclusive", day, berlin, "2026-03-02 22:00:00", 2},
		{"a saturday is outside a mon-fri window", day, berlin, "2026-03-07 12:00:00", 2},
		{"local time is Berlin time, not UTC (08:00 CET is 07:00Z)", day, "", "2026-03-02T07:00:00Z", 24},
		{"06:59Z is 07:59 in Berlin, before the window", day, "", "2026-03-02T06:59:59Z", 2},
		{"the zone is UTC when time_zone is absent",
			map[string]string{"window_day": "mon 08:00-09:00 3", "default": "1"}, "", "2026-03-02T08:30:00Z", 3},

		{"an overnight window holds past midnight on the next day",
			with(map[string]string{"window_night": "fri 22:00-06:00 5"}), berlin, "2026-03-07 03:00:00", 5},
		{"an overnight window holds from its start on the day it starts",
			with(map[string]string{"window_night": "fri 22:00-06:00 5"}), berlin, "2026-03-06 22:00:00", 5},
		{"an overnight window belongs to the day it starts, not the day it ends",
			with(map[string]string{"window_night": "fri 22:00-06:00 5"}), berlin, "2026-03-06 03:00:00", 2},
		{"an overnight window's end on the next day is exclusive",
			with(map[string]string{"window_night": "fri 22:00-06:00 5"}), berlin, "2026-03-07 06:00:00", 2},
		{"an end of 24:00 holds until the last second of the day",
			with(map[string]string{"window_eve": "sat 20:00-24:00 3"}), berlin, "2026-03-07 23:59:59", 3},
		{"an end of 24:00 stops at midnight",
			with(map[string]string{"window_eve": "sat 20:00-24:00 3"}), berlin, "2026-03-08 00:00:00", 2},
		{"an end of 00:00 is the same midnight as 24:00",
			with(map[string]string{"window_eve": "sat 20:00-00:00 3"}), berlin, "2026-03-07 23:59:59", 3},

		{"a wrap-around range fri-mon holds on sunday",
			with(map[string]string{"window_w": "fri-mon 10:00-12:00 7"}), berlin, "2026-03-08 11:00:00", 7},
		{"a wrap-around range fri-mon holds on monday",
			with(map[string]string{"window_w": "fri-mon 10:00-12:00 7"}), berlin, "2026-03-02 11:00:00", 7},
		{"a wrap-around range fri-mon does not hold on tuesday",
			with(map[string]string{"window_w": "fri-mon 10:00-12:00 7"}), berlin, "2026-03-03 11:00:00", 2},
		{"a comma list mon,wed-fri skips tuesday",
			with(map[string]string{"window_w": "mon,wed-fri 10:00-12:00 7"}), berlin, "2026-03-03 11:00:00", 2},
		{"a comma list mon,wed-fri holds on thursday",
			with(map[string]string{"window_w": "mon,wed-fri 10:00-12:00 7"}), berlin, "2026-03-05 11:00:00", 7},
		{"a comma list sat,sun holds on sunday",
			with(map[string]string{"window_w": "sat,sun 10:00-12:00 7"}), berlin, "2026-03-08 11:00:00", 7},

		{"overlapping windows take the larger count (the later, higher one)",
			with(map[string]string{"window_day": "mon-fri 08:00-22:00 24", "window_peak": "mon 12:00-14:00 30"}), berlin, "2026-03-02 13:00:00", 30},
		{"overlapping windows take the larger count (the lower one is ignored)",
			with(map[string]string{"window_day": "mon-fri 08:00-22:00 24", "window_low": "mon 12:00-14:00 10"}), berlin, "2026-03-02 13:00:00", 24},
		{"a window's count applies even below the default",
			with(map[string]string{"window_night": "mon-sun 22:00-06:00 0"}), berlin, "2026-03-02 23:00:00", 0},
		{"back-to-back windows do not dip at the seam",
			with(map[string]string{"window_a": "mon 08:00-12:00 10", "window_b": "mon 12:00-18:00 10"}), berlin, "2026-03-02 12:00:00", 10},
		{"back-to-back windows switch straight to the second count",
			with(map[string]string{"window_a": "mon 08:00-12:00 10", "window_b": "mon 12:00-18:00 12"}), berlin, "2026-03-02 12:00:00", 12},

		{"no window starts on a holiday",
			with(map[string]string{"window_day": "mon-fri 08:00-22:00 24", "holidays": "2026-12-25"}), berlin, "2026-12-25 12:00:00", 2},
		{"the day before a holiday is a normal day",
			with(map[string]string{"window_day": "mon-fri 08:00-22:00 24", "holidays": "2026-12-25"}), berlin, "2026-12-24 12:00:00", 24},
		{"a window that started the day before a holiday runs through it",
			with(map[string]string{"window_night": "thu 22:00-06:00 5", "holidays": "2026-12-25"}), berlin, "2026-12-25 03:00:00", 5},
		{"an overnight window does not start on a holiday",
			with(map[string]string{"window_night": "fri 22:00-06:00 5", "holidays": "2026-12-25"}), berlin, "2026-12-26 03:00:00", 2},
		{"holidays are a comma list (second entry)",
			with(map[string]string{"window_day": "mon-fri 08:00-22:00 24", "holidays": "2026-12-24, 2026-12-31"}), berlin, "2026-12-31 12:00:00", 2},

		// Spring forward in Berlin: 02:00-03:00 local does not exist on 29 Mar.
		{"spring forward: a start at 02:30 is not in effect before the gap",
			with(map[string]string{"window_s": "sun 02:30-05:00 10"}), "", "2026-03-29T00:59:59Z", 2},
		{"spring forward: a start at 02:30 takes effect at the first instant after the gap (03:00 CEST)",
			with(map[string]string{"window_s": "sun 02:30-05:00 10"}), "", "2026-03-29T01:00:00Z", 10},
		{"spring forward: an end at 02:30 holds until the gap",
			with(map[string]string{"window_n": "sat 22:00-02:30 6"}), "", "2026-03-29T00:59:59Z", 6},
		{"spring forward: an end at 02:30 takes effect at the first instant after the gap",
			with(map[string]string{"window_n": "sat 22:00-02:30 6"}), "", "2026-03-29T01:00:00Z", 2},
		{"spring forward: a window wholly inside the gap never holds",
			with(map[string]string{"window_g": "sun 02:10-02:50 9"}), "", "2026-03-29T01:00:00Z", 2},
		{"spring forward: the rest of the day keeps local time (05:00 CEST is 03:00Z)",
			with(map[string]string{"window_s": "sun 02:30-05:00 10"}), "", "2026-03-29T03:00:00Z", 2},

		// Fall back in Berlin: 02:00-03:00 local happens twice on 25 Oct.
		{"fall back: a start at 02:30 is not in effect before its first occurrence",
			with(map[string]string{"window_s": "sun 02:30-04:00 10"}), "", "2026-10-25T00:29:59Z", 2},
		{"fall back: a start at 02:30 takes effect at its first occurrence (02:30 CEST)",
			with(map[string]string{"window_s": "sun 02:30-04:00 10"}), "", "2026-10-25T00:30:00Z", 10},
		{"fall back: the window still holds at the second 02:30 (CET)",
			with(map[string]string{"window_s": "sun 02:30-04:00 10"}), "", "2026-10-25T01:30:00Z", 10},
		{"fall back: the end at 04:00 CET (03:00Z) is exclusive",
			with(map[string]string{"window_s": "sun 02:30-04:00 10"}), "", "2026-10-25T03:00:00Z", 2},
		{"fall back: an end at 02:30 takes effect at its first occurrence",
			with(map[string]string{"window_n": "sat 20:00-02:30 6"}), "", "2026-10-25T00:30:00Z", 2},
		{"fall back: a window that ended at the first 02:30 does not come back in the repeated hour",
			with(map[string]string{"window_n": "sat 20:00-02:30 6"}), "", "2026-10-25T01:15:00Z", 2},

		// Los Angeles: gap 02:00-03:00 on 8 Mar, 01:00-02:00 twice on 1 Nov.
		{"Los Angeles spring forward: a start at 02:30 takes effect at 03:00 PDT (10:00Z)",
			map[string]string{"window_s": "sun 02:30-06:00 4", "default": "1", "time_zone": "America/Los_Angeles"}, "", "2026-03-08T10:00:00Z", 4},
		{"Los Angeles spring forward: not before 10:00Z",
			map[string]string{"window_s": "sun 02:30-06:00 4", "default": "1", "time_zone": "America/Los_Angeles"}, "", "2026-03-08T09:59:59Z", 1},
		{"Los Angeles fall back: a start at 01:30 takes effect at 01:30 PDT (08:30Z)",
			map[string]string{"window_s": "sun 01:30-03:00 4", "default": "1", "time_zone": "America/Los_Angeles"}, "", "2026-11-01T08:30:00Z", 4},
		{"Los Angeles fall back: an end at 01:30 takes effect at 01:30 PDT, once",
			map[string]string{"window_n": "sat 22:00-01:30 4", "default": "1", "time_zone": "America/Los_Angeles"}, "", "2026-11-01T09:15:00Z", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.cfg)
			if got := s.CountAt(instant(t, tt.tz, tt.at)); got != tt.want {
				t.Errorf("CountAt(%s) = %d, want %d", tt.at, got, tt.want)
			}
		})
	}
}

func TestRamp(t *testing.T) {
	type check struct {
		at   string // RFC 3339
		want int
	}
	tests := []struct {
		name   string
		cfg    map[string]string
		checks []check
	}{
		{"a ramp up of 4 over 1h takes one step at the boundary and one every 15m",
			map[string]string{"window_day": "mon 08:00-20:00 4", "default": "0", "ramp": "1h"},
			[]check{
				{"2026-03-02T07:59:59Z", 0},
				{"2026-03-02T08:00:00Z", 1},
				{"2026-03-02T08:14:59.999999999Z", 1},
				{"2026-03-02T08:15:00Z", 2},
				{"2026-03-02T08:30:00Z", 3},
				{"2026-03-02T08:44:59Z", 3},
				{"2026-03-02T08:45:00Z", 4},
				{"2026-03-02T09:00:00Z", 4},
			}},
		{"a ramp down of 4 over 1h rounds toward the lower new count",
			map[string]string{"window_day": "mon 08:00-20:00 4", "default": "0", "ramp": "1h"},
			[]check{
				{"2026-03-02T19:59:59Z", 4},
				{"2026-03-02T20:00:00Z", 3},
				{"2026-03-02T20:14:59Z", 3},
				{"2026-03-02T20:15:00Z", 2},
				{"2026-03-02T20:30:00Z", 1},
				{"2026-03-02T20:45:00Z", 0},
				{"2026-03-02T21:00:00Z", 0},
			}},
		{"a ramp of 7 over 1h rounds the linear value up (0.999 -> 1, 1.0014 -> 2)",
			map[string]string{"window_day": "mon 08:00-20:00 7", "default": "0", "ramp": "1h"},
			[]check{
				{"2026-03-02T08:08:34Z", 1}, // 7*514/3600 = 0.9994
				{"2026-03-02T08:08:35Z", 2}, // 7*515/3600 = 1.0014
				{"2026-03-02T08:51:25Z", 6}, // 7*3085/3600 = 5.9986
				{"2026-03-02T08:51:26Z", 7}, // 7*3086/3600 = 6.0006
			}},
		{"a ramp from a non-zero default climbs from the default",
			map[string]string{"window_day": "mon 08:00-20:00 24", "default": "2", "ramp": "22m"},
			[]check{
				{"2026-03-02T08:00:00Z", 3},
				{"2026-03-02T08:01:00Z", 4},
				{"2026-03-02T08:10:30Z", 13},
				{"2026-03-02T08:21:00Z", 24},
			}},
		{"a boundary inside a ramp ramps down from the count reached, not from the window's count",
			map[string]string{"window_short": "mon 08:00-08:30 8", "default": "0", "ramp": "1h"},
			[]check{
				{"2026-03-02T08:29:59Z", 4}, // 8 steps in 1h: one every 7m30s
				{"2026-03-02T08:30:00Z", 3}, // 4 -> 0 over 1h: one step every 15m
				{"2026-03-02T08:45:00Z", 2},
				{"2026-03-02T09:00:00Z", 1},
				{"2026-03-02T09:15:00Z", 0},
			}},
		{"ramps chain across midnight, where the evaluation cache starts a new week (Thu 00:00)",
			map[string]string{"window_a": "mon-sun 23:50-00:10 10", "window_b": "mon-sun 00:10-00:20 3", "default": "0", "ramp": "30m", "time_zone": berlin},
			[]check{
				{"2026-03-04T23:53:00+01:00", 2}, // 0 -> 10: a step every 3m
				{"2026-03-05T00:05:00+01:00", 6}, // the first Thursday second of the week
				{"2026-03-05T00:09:59+01:00", 7}, // reached when window_b takes over
				{"2026-03-05T00:10:00+01:00", 6}, // 7 -> 3: a step every 7m30s
				{"2026-03-05T00:17:30+01:00", 5}, //
				{"2026-03-05T00:20:00+01:00", 4}, // 5 -> 0: a step every 6m
				{"2026-03-05T00:26:00+01:00", 3}, //
				{"2026-03-05T00:43:59+01:00", 1}, //
				{"2026-03-05T00:44:00+01:00", 0}, //
				{"2026-03-04T23:49:59+01:00", 0}, // the previous night settled
			}},
		{"back-to-back windows with one count do not restart the ramp",
			map[string]string{"window_a": "mon 08:00-08:30 4", "window_b": "mon 08:30-12:00 4", "default": "0", "ramp": "1h"},
			[]check{
				{"2026-03-02T08:29:59Z", 2},
				{"2026-03-02T08:30:00Z", 3},
				{"2026-03-02T08:45:00Z", 4},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.cfg)
			for _, c := range tt.checks {
				if got := s.CountAt(instant(t, "", c.at)); got != c.want {
					t.Errorf("CountAt(%s) = %d, want %d", c.at, got, c.want)
				}
			}
		})
	}
}

func TestNextBoundary(t *testing.T) {
	day := map[string]string{"window_day": "mon-fri 08:00-22:00 24", "default": "2", "time_zone": berlin}
	tests := []struct {
		name      string
		cfg       map[string]string
		after     string // RFC 3339
		wantAt    string // RFC 3339; "" = none
		wantCount int
	}{
		{"from midday the next boundary is the evening end", day,
			"2026-03-02T11:00:00Z", "2026-03-02T22:00:00+01:00", 2},
		{"from friday night the next boundary is monday morning", day,
			"2026-03-06T21:00:00Z", "2026-03-09T08:00:00+01:00", 24},
		{"a boundary is strictly after the given instant", day,
			"2026-03-02T08:00:00+01:00", "2026-03-02T22:00:00+01:00", 2},
		{"one nanosecond before a boundary finds it", day,
			"2026-03-02T07:59:59.999999999+01:00", "2026-03-02T08:00:00+01:00", 24},
		{"back-to-back windows with one count give no boundary at the seam",
			map[string]string{"window_a": "mon 08:00-12:00 10", "window_b": "mon 12:00-18:00 10", "default": "0"},
			"2026-03-02T09:00:00Z", "2026-03-02T18:00:00Z", 0},
		{"spring forward: a boundary at 02:30 is found at 03:00 CEST",
			map[string]string{"window_s": "sun 02:30-05:00 10", "default": "2", "time_zone": berlin},
			"2026-03-29T00:00:00Z", "2026-03-29T03:00:00+02:00", 10},
		{"fall back: a boundary at 02:30 is found once, at 02:30 CEST, then the end",
			map[string]string{"window_s": "sun 02:30-04:00 10", "default": "2", "time_zone": berlin},
			"2026-10-25T00:30:00Z", "2026-10-25T04:00:00+01:00", 2},
		{"a window wholly inside the spring-forward gap gives no boundary that day",
			map[string]string{"window_g": "sun 02:10-02:50 9", "default": "2", "time_zone": berlin},
			"2026-03-28T12:00:00Z", "2026-04-05T02:10:00+02:00", 9},
		{"a ramp's next step is a boundary",
			map[string]string{"window_day": "mon 08:00-20:00 4", "default": "0", "ramp": "1h"},
			"2026-03-02T08:00:00Z", "2026-03-02T08:15:00Z", 2},
		{"a ramp step that is not on a whole second is found exactly",
			map[string]string{"window_day": "mon 08:00-20:00 7", "default": "0", "ramp": "1h"},
			"2026-03-02T08:00:00Z", "2026-03-02T08:08:34.285714286Z", 2},
		{"a schedule covering all time with one count never changes",
			map[string]string{"window_all": "mon-sun 00:00-24:00 5", "default": "0"},
			"2026-03-02T09:00:00Z", "", 0},
		{"a window with the default's count never changes the count",
			map[string]string{"window_same": "mon 08:00-10:00 2", "default": "2"},
			"2026-03-02T09:00:00Z", "", 0},
		{"a holiday months ahead is found in a schedule that is otherwise constant",
			map[string]string{"window_all": "mon-sun 00:00-24:00 5", "default": "0", "holidays": "2026-12-25", "time_zone": berlin},
			"2026-03-02T09:00:00Z", "2026-12-25T00:00:00+01:00", 0},
		{"the end of a holiday is found",
			map[string]string{"window_all": "mon-sun 00:00-24:00 5", "default": "0", "holidays": "2026-12-25", "time_zone": berlin},
			"2026-12-25T00:00:00+01:00", "2026-12-26T00:00:00+01:00", 5},
		{"after the last holiday a constant schedule never changes",
			map[string]string{"window_all": "mon-sun 00:00-24:00 5", "default": "0", "holidays": "2026-12-25", "time_zone": berlin},
			"2026-12-26T00:00:00+01:00", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.cfg)
			at, n, ok := s.NextBoundary(instant(t, "", tt.after))
			if tt.wantAt == "" {
				if ok {
					t.Fatalf("NextBoundary = %v, %d, true; want none", at, n)
				}
				return
			}
			want := instant(t, "", tt.wantAt)
			if !ok || !at.Equal(want) || n != tt.wantCount {
				t.Fatalf("NextBoundary = %v, %d, %v; want %v, %d, true", at, n, ok, want, tt.wantCount)
			}
			if at.Location() != s.Location() {
				t.Errorf("NextBoundary location = %v, want %v", at.Location(), s.Location())
			}
		})
	}
}

func TestPreview(t *testing.T) {
	type step struct {
		at    string // RFC 3339
		count int
	}
	tests := []struct {
		name string
		cfg  map[string]string
		from string
		d    time.Duration
		want []step
	}{
		{"a long weekend: friday's day window, then nothing until monday", map[string]string{"window_day": "mon-fri 08:00-22:00 24", "default": "2", "time_zone": berlin},
			"2026-03-06T00:00:00+01:00", 4 * 24 * time.Hour,
			[]step{
				{"2026-03-06T00:00:00+01:00", 2},
				{"2026-03-06T08:00:00+01:00", 24},
				{"2026-03-06T22:00:00+01:00", 2},
				{"2026-03-09T08:00:00+01:00", 24},
				{"2026-03-09T22:00:00+01:00", 2},
			}},
		{"the end of the preview is exclusive", map[string]string{"window_day": "mon-fri 08:00-22:00 24", "default": "2", "time_zone": berlin},
			"2026-03-06T00:00:00+01:00", 8 * time.Hour,
			[]step{{"2026-03-06T00:00:00+01:00", 2}}},
		{"the spring-forward week: the night window starts in the gap and keeps local time after",
			map[string]string{"window_night": "sat-sun 02:30-06:00 3", "default": "1", "time_zone": berlin},
			"2026-03-28T00:00:00+01:00", 2 * 24 * time.Hour,
			[]step{
				{"2026-03-28T00:00:00+01:00", 1},
				{"2026-03-28T02:30:00+01:00", 3},
				{"2026-03-28T06:00:00+01:00", 1},
				{"2026-03-29T03:00:00+02:00", 3},
				{"2026-03-29T06:00:00+02:00", 1},
			}},
		{"a ramp lists each step",
			map[string]string{"window_day": "mon 08:00-20:00 3", "default": "0", "ramp": "30m"},
			"2026-03-02T07:00:00Z", 3 * time.Hour,
			[]step{
				{"2026-03-02T07:00:00Z", 0},
				{"2026-03-02T08:00:00Z", 1},
				{"2026-03-02T08:10:00Z", 2},
				{"2026-03-02T08:20:00Z", 3},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.cfg)
			got := s.Preview(instant(t, "", tt.from), tt.d)
			var want []Step
			for _, w := range tt.want {
				want = append(want, Step{At: instant(t, "", w.at), Count: w.count})
			}
			if len(got) != len(want) {
				t.Fatalf("Preview = %v, want %v", got, want)
			}
			for i := range got {
				if !got[i].At.Equal(want[i].At) || got[i].Count != want[i].Count {
					t.Fatalf("Preview[%d] = %v %d, want %v %d (all: %v)", i, got[i].At, got[i].Count, want[i].At, want[i].Count, got)
				}
			}
		})
	}
}

// The step function Preview lists agrees with CountAt everywhere: at each step,
// just before it, and on a grid in between. Checked over a year, including both
// DST transitions, holidays and ramps, with the cache filled in different orders.
func TestPreviewAgreesWithCountAt(t *testing.T) {
	cfgs := []map[string]string{
		{"window_day": "mon-fri 08:00-22:00 24", "window_sat": "sat 10:00-14:00 8", "default": "2", "time_zone": berlin, "holidays": "2026-12-25,2026-12-26,2026-04-03"},
		{"window_night": "fri-mon 22:00-02:30 6", "window_peak": "wed 02:15-03:30 9", "default": "1", "time_zone": berlin},
		{"window_day": "mon-fri 08:00-22:00 24", "window_peak": "tue,thu 12:00-14:00 30", "default": "2", "time_zone": "America/Los_Angeles", "ramp": "20m", "holidays": "2026-11-26"},
		{"window_a": "mon-sun 01:30-02:30 5", "window_b": "sun 02:30-08:00 7", "default": "0", "time_zone": "America/Los_Angeles", "ramp": "7m"},
		{"window_a": "mon-sun 23:50-00:10 10", "window_b": "mon-sun 00:10-00:20 3", "default": "0", "ramp": "30m", "time_zone": berlin, "holidays": "2026-03-04,2026-10-24"},
	}
	from := instant(t, "", "2026-01-01T00:00:00Z")
	const span = 365 * 24 * time.Hour
	for i, cfg := range cfgs {
		t.Run(fmt.Sprintf("config %d", i), func(t *testing.T) {
			steps := mustParse(t, cfg).Preview(from, span)
			fresh := mustParse(t, cfg) // its cache fills in the order of the checks below
			if len(steps) < 50 {
				t.Fatalf("only %d steps in a year", len(steps))
			}
			for j, st := range steps {
				if got := fresh.CountAt(st.At); got != st.Count {
					t.Fatalf("step %d %v: CountAt = %d, Preview says %d", j, st.At, got, st.Count)
				}
				if j > 0 {
					before := st.At.Add(-time.Nanosecond)
					if got := fresh.CountAt(before); got != steps[j-1].Count {
						t.Fatalf("step %d %v: CountAt 1ns before = %d, want the previous step's %d", j, st.At, got, steps[j-1].Count)
					}
				}
			}
			// A grid every 7m13s, walked backwards so the cache fills the other way.
			random := mustParse(t, cfg)
			j := len(steps) - 1
			for at := from.Add(span - time.Second); !at.Before(from); at = at.Add(-(7*time.Minute + 13*time.Second)) {
				for steps[j].At.After(at) {
					j--
				}
				if got := random.CountAt(at); got != steps[j].Count {
					t.Fatalf("%v: CountAt = %d, Preview says %d", at, got, steps[j].Count)
				}
			}
		})
	}
}

// The same schedule gives the same counts whether evaluated in order, in random
// order or from many goroutines at once (the cache is shared).
func TestCountAtIsDeterministicAndSafeForConcurrentUse(t *testing.T) {
	cfg := map[string]string{"window_day": "mon-fri 08:00-22:00 24", "window_night": "sat,sun 20:00-04:00 4", "default": "2", "time_zone": berlin, "ramp": "10m"}
	ref := mustParse(t, cfg)
	rng := rand.New(rand.NewSource(1))
	base := instant(t, "", "2026-01-01T00:00:00Z")
	times := make([]time.Time, 2000)
	want := make([]int, len(times))
	for i := range times {
		times[i] = base.Add(time.Duration(rng.Int63n(int64(400 * 24 * time.Hour))))
	}
	for i, at := range times {
		want[i] = mustParse(t, cfg).CountAt(at) // fresh cache each time
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < len(times)*2; i++ {
				k := (i * 7919) % len(times)
				if got := ref.CountAt(times[k]); got != want[k] {
					t.Errorf("goroutine %d: CountAt(%v) = %d, want %d", g, times[k], got, want[k])
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

func TestNewMatchesParse(t *testing.T) {
	typed, err := New(Config{
		TimeZone: berlin,
		Default:  2,
		Windows: []WindowConfig{
			{Name: "day", Days: "mon-fri", Start: "08:00", End: "22:00", Count: 24},
			{Name: "night", Days: "fri", Start: "22:00", End: "06:00", Count: 5},
		},
		Holidays: []string{"2026-12-25"},
		Ramp:     5 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	flat := mustParse(t, map[string]string{
		"window_day": "mon-fri 08:00-22:00 24", "window_night": "fri 22:00-06:00 5",
		"default": "2", "time_zone": berlin, "holidays": "2026-12-25", "ramp": "5m",
	})
	from := instant(t, "", "2026-12-01T00:00:00Z")
	a, b := typed.Preview(from, 40*24*time.Hour), flat.Preview(from, 40*24*time.Hour)
	if len(a) != len(b) || len(a) < 20 {
		t.Fatalf("New gives %d steps, Parse %d", len(a), len(b))
	}
	for i := range a {
		if !a[i].At.Equal(b[i].At) || a[i].Count != b[i].Count {
			t.Fatalf("step %d: New %v %d, Parse %v %d", i, a[i].At, a[i].Count, b[i].At, b[i].Count)
		}
	}
	if typed.Default() != 2 || typed.Ramp() != 5*time.Minute || typed.Location().String() != berlin {
		t.Errorf("accessors = %d, %v, %v", typed.Default(), typed.Ramp(), typed.Location())
	}
}

func TestResolveWall(t *testing.T) {
	tests := []struct {
		name   string
		tz     string
		date   string // local date
		minute int
		want   string // RFC 3339
	}{
		{"an ordinary wall time maps to its one instant", berlin, "2026-03-02", 8 * 60, "2026-03-02T07:00:00Z"},
		{"a skipped wall time maps to the end of the gap", berlin, "2026-03-29", 2*60 + 30, "2026-03-29T01:00:00Z"},
		{"the first skipped minute maps to the end of the gap", berlin, "2026-03-29", 2 * 60, "2026-03-29T01:00:00Z"},
		{"the wall time just after the gap maps to the same instant", berlin, "2026-03-29", 3 * 60, "2026-03-29T01:00:00Z"},
		{"a repeated wall time maps to its first occurrence", berlin, "2026-10-25", 2*60 + 30, "2026-10-25T00:30:00Z"},
		{"the first repeated minute maps to its first occurrence", berlin, "2026-10-25", 2 * 60, "2026-10-25T00:00:00Z"},
		{"the wall time after the repeated hour maps to its one instant", berlin, "2026-10-25", 3 * 60, "2026-10-25T02:00:00Z"},
		{"24:00 is the next day's midnight", berlin, "2026-03-02", 24 * 60, "2026-03-02T23:00:00Z"},
		{"Los Angeles repeated 01:30 maps to PDT", "America/Los_Angeles", "2026-11-01", 90, "2026-11-01T08:30:00Z"},
		{"a zone without DST maps directly", "Asia/Tokyo", "2026-03-29", 150, "2026-03-28T17:30:00Z"},
		{"UTC maps directly", "UTC", "2026-03-29", 150, "2026-03-29T02:30:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc, err := time.LoadLocation(tt.tz)
			if err != nil {
				t.Fatal(err)
			}
			d, _ := time.Parse(time.DateOnly, tt.date)
			got := time.Unix(resolveWall(loc, civilDay(d.Date()), tt.minute), 0).UTC()
			if want := instant(t, "", tt.want); !got.Equal(want) {
				t.Errorf("resolveWall = %v, want %v", got, want)
			}
		})
	}
}
