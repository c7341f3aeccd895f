package schedule

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestIssue11Tables pins the count and the window named at fixed UTC instants
// for the cases issue 11 lists: Europe/Berlin and America/New_York daylight
// saving days, Asia/Tokyo, Mon-Fri 06:30-22:10, back-to-back windows,
// holidays, ramp values at fixed minutes, and both zone keys.
//
// 2026: Berlin springs forward on Sun 29 Mar at 01:00Z (02:00 CET -> 03:00
// CEST) and falls back on Sun 25 Oct at 01:00Z (03:00 CEST -> 02:00 CET); New
// York springs forward on Sun 8 Mar at 07:00Z (02:00 EST -> 03:00 EDT) and falls
// back on Sun 1 Nov at 06:00Z (02:00 EDT -> 01:00 EST). Mon 2 Mar, Fri 6 Mar,
// Thu 24 Dec, Fri 25 Dec.
func TestIssue11Tables(t *testing.T) {
	const ny, tokyo = "America/New_York", "Asia/Tokyo"
	berlinSun := map[string]string{"window_w": "sun 02:30-05:00 10", "default_count": "2", "timezone": berlin}
	berlinFallEnd := map[string]string{"window_w": "sun 01:00-02:30 7", "default_count": "2", "timezone": berlin}
	nySpring := map[string]string{"window_w": "sun 02:30-06:00 4", "default_count": "1", "timezone": ny}
	nyFall := map[string]string{"window_w": "sun 01:30-03:00 4", "default_count": "1", "timezone": ny}
	tokyoDay := map[string]string{"window_office": "mon-fri 09:00-18:00 8", "default_count": "0", "timezone": tokyo}
	weekday := map[string]string{"window_day": "mon-fri 06:30-22:10 24", "default_count": "2", "timezone": berlin}
	backToBack := map[string]string{"window_a": "mon 08:00-12:00 5", "window_b": "mon 12:00-18:00 7", "default_count": "0"}
	holiday := map[string]string{"window_day": "mon-fri 08:00-22:00 24", "window_night": "mon-fri 22:00-06:00 4", "default_count": "2", "holidays": "2026-12-25"}
	ramp := map[string]string{"window_day": "mon 08:00-20:00 10", "default_count": "0", "ramp": "10m"}
	rampCut := map[string]string{"window_blip": "mon 08:00-08:05 10", "default_count": "0", "ramp": "10m"}
	berlinOld := map[string]string{"window_day": "mon-fri 08:00-22:00 24", "default": "2", "time_zone": berlin}
	berlinNew := map[string]string{"window_day": "mon-fri 08:00-22:00 24", "default_count": "2", "timezone": berlin}

	type want struct {
		Count  int
		Window string // "" outside all windows
	}
	tests := []struct {
		name string
		cfg  map[string]string
		at   string // RFC 3339, UTC
		want want
	}{
		{"Berlin spring forward: before the gap, the default", berlinSun, "2026-03-29T00:59:59Z", want{2, ""}},
		{"Berlin spring forward: 02:30 is skipped, the window starts at 03:00 CEST", berlinSun, "2026-03-29T01:00:00Z", want{10, "w"}},
		{"Berlin spring forward: 04:59:59 CEST still in", berlinSun, "2026-03-29T02:59:59Z", want{10, "w"}},
		{"Berlin spring forward: 05:00 CEST out", berlinSun, "2026-03-29T03:00:00Z", want{2, ""}},
		{"Berlin fall back: 02:29:59 CEST (first pass) out", berlinSun, "2026-10-25T00:29:59Z", want{2, ""}},
		{"Berlin fall back: 02:30 CEST, the first occurrence, starts it", berlinSun, "2026-10-25T00:30:00Z", want{10, "w"}},
		{"Berlin fall back: 02:30 CET (second pass) still in", berlinSun, "2026-10-25T01:30:00Z", want{10, "w"}},
		{"Berlin fall back: 04:59:59 CET in", berlinSun, "2026-10-25T03:59:59Z", want{10, "w"}},
		{"Berlin fall back: 05:00 CET out", berlinSun, "2026-10-25T04:00:00Z", want{2, ""}},
		{"Berlin fall back: an end at 02:30 takes effect once, at 02:30 CEST", berlinFallEnd, "2026-10-25T00:30:00Z", want{2, ""}},
		{"Berlin fall back: 02:30 CET does not reopen the window", berlinFallEnd, "2026-10-25T01:30:00Z", want{2, ""}},
		{"Berlin fall back: 02:29 CEST in", berlinFallEnd, "2026-10-25T00:29:00Z", want{7, "w"}},
		{"New York spring forward: 01:59:59 EST out", nySpring, "2026-03-08T06:59:59Z", want{1, ""}},
		{"New York spring forward: 02:30 skipped, starts at 03:00 EDT", nySpring, "2026-03-08T07:00:00Z", want{4, "w"}},
		{"New York spring forward: 05:59:59 EDT in", nySpring, "2026-03-08T09:59:59Z", want{4, "w"}},
		{"New York spring forward: 06:00 EDT out", nySpring, "2026-03-08T10:00:00Z", want{1, ""}},
		{"New York fall back: 01:29:59 EDT out", nyFall, "2026-11-01T05:29:59Z", want{1, ""}},
		{"New York fall back: 01:30 EDT in", nyFall, "2026-11-01T05:30:00Z", want{4, "w"}},
		{"New York fall back: 01:30 EST (repeated) still in", nyFall, "2026-11-01T06:30:00Z", want{4, "w"}},
		{"New York fall back: 02:59:59 EST in", nyFall, "2026-11-01T07:59:59Z", want{4, "w"}},
		{"New York fall back: 03:00 EST out", nyFall, "2026-11-01T08:00:00Z", want{1, ""}},
		{"Tokyo: Mon 08:59:59 JST out", tokyoDay, "2026-03-01T23:59:59Z", want{0, ""}},
		{"Tokyo: Mon 09:00 JST in", tokyoDay, "2026-03-02T00:00:00Z", want{8, "office"}},
		{"Tokyo: Mon 18:00 JST out", tokyoDay, "2026-03-02T09:00:00Z", want{0, ""}},
		{"Tokyo: Sat 12:00 JST out", tokyoDay, "2026-03-07T03:00:00Z", want{0, ""}},
		{"Mon-Fri 06:30-22:10: Mon 06:29 CET out", weekday, "2026-03-02T05:29:00Z", want{2, ""}},
		{"Mon-Fri 06:30-22:10: Mon 06:30 CET in", weekday, "2026-03-02T05:30:00Z", want{24, "day"}},
		{"Mon-Fri 06:30-22:10: Fri 22:09:59 CET in", weekday, "2026-03-06T21:09:59Z", want{24, "day"}},
		{"Mon-Fri 06:30-22:10: Fri 22:10 CET out", weekday, "2026-03-06T21:10:00Z", want{2, ""}},
		{"Mon-Fri 06:30-22:10: Fri 23:00 CET out", weekday, "2026-03-06T22:00:00Z", want{2, ""}},
		{"Mon-Fri 06:30-22:10: Sat 12:00 CET out", weekday, "2026-03-07T11:00:00Z", want{2, ""}},
		{"back-to-back: last second of a", backToBack, "2026-03-02T11:59:59Z", want{5, "a"}},
		{"back-to-back: b at the shared boundary", backToBack, "2026-03-02T12:00:00Z", want{7, "b"}},
		{"holidays: the night window begun on Thursday runs into the holiday", holiday, "2026-12-25T03:00:00Z", want{4, "night"}},
		{"holidays: no day window on the holiday", holiday, "2026-12-25T10:00:00Z", want{2, ""}},
		{"holidays: no night window starts on the holiday", holiday, "2026-12-25T23:00:00Z", want{2, ""}},
		{"holidays: Thursday's day window as usual", holiday, "2026-12-24T10:00:00Z", want{24, "day"}},
		{"ramp up: 07:59 the default", ramp, "2026-03-02T07:59:00Z", want{0, ""}},
		{"ramp up: the first step at the boundary", ramp, "2026-03-02T08:00:00Z", want{1, "day"}},
		{"ramp up: 08:01", ramp, "2026-03-02T08:01:00Z", want{2, "day"}},
		{"ramp up: 08:05", ramp, "2026-03-02T08:05:00Z", want{6, "day"}},
		{"ramp up: 08:09", ramp, "2026-03-02T08:09:00Z", want{10, "day"}},
		{"ramp up: 08:10 done", ramp, "2026-03-02T08:10:00Z", want{10, "day"}},
		{"ramp down: 20:00 the first step down", ramp, "2026-03-02T20:00:00Z", want{9, ""}},
		{"ramp down: 20:05", ramp, "2026-03-02T20:05:00Z", want{4, ""}},
		{"ramp down: 20:10 done", ramp, "2026-03-02T20:10:00Z", want{0, ""}},
		{"a boundary inside a ramp: 08:04:59 reached 5", rampCut, "2026-03-02T08:04:59Z", want{5, "blip"}},
		{"a boundary inside a ramp: ramps down from 5, not from 10", rampCut, "2026-03-02T08:05:00Z", want{4, ""}},
		{"a boundary inside a ramp: 08:07", rampCut, "2026-03-02T08:07:00Z", want{3, ""}},
		{"a boundary inside a ramp: 08:15 settled", rampCut, "2026-03-02T08:15:00Z", want{0, ""}},
		{"zone key time_zone: Mon 08:00 CET", berlinOld, "2026-03-02T07:00:00Z", want{24, "day"}},
		{"zone key timezone: Mon 08:00 CET", berlinNew, "2026-03-02T07:00:00Z", want{24, "day"}},
		{"zone key timezone: Mon 07:59 CET", berlinNew, "2026-03-02T06:59:00Z", want{2, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.cfg)
			at := instant(t, "", tt.at)
			name, _, _ := s.WindowAt(at)
			got := want{Count: s.CountAt(at), Window: name}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("at %s (-want +got):\n%s", tt.at, diff)
			}
		})
	}
}

// TestBackToBackPreviewNoDip checks that the preview of two back-to-back
// windows shows no step to the default at their shared boundary.
func TestBackToBackPreviewNoDip(t *testing.T) {
	s := mustParse(t, map[string]string{"window_a": "mon 08:00-12:00 5", "window_b": "mon 12:00-18:00 7", "default_count": "0"})
	from := instant(t, "", "2026-03-02T07:00:00Z")
	got := s.Preview(from, 12*time.Hour)
	want := []Step{
		{At: instant(t, "", "2026-03-02T07:00:00Z"), Count: 0},
		{At: instant(t, "", "2026-03-02T08:00:00Z"), Count: 5},
		{At: instant(t, "", "2026-03-02T12:00:00Z"), Count: 7},
		{At: instant(t, "", "2026-03-02T18:00:00Z"), Count: 0},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("Preview (-want +got):\n%s", diff)
	}
}

// TestWindowAtOverlap checks that of two overlapping windows WindowAt names
// the one with the larger count, and the first name on a tie.
func TestWindowAtOverlap(t *testing.T) {
	s := mustParse(t, map[string]string{"window_day": "mon 08:00-20:00 10", "window_peak": "mon 12:00-14:00 30", "window_same": "mon 12:00-14:00 10", "window_twin": "mon 08:00-20:00 10", "default_count": "0"})
	type got struct {
		Name  string
		Count int
		OK    bool
	}
	for at, want := range map[string]got{
		"2026-03-02T09:00:00Z": {"day", 10, true},
		"2026-03-02T13:00:00Z": {"peak", 30, true},
		"2026-03-02T21:00:00Z": {"", 0, false},
	} {
		n, c, ok := s.WindowAt(instant(t, "", at))
		if diff := cmp.Diff(want, got{n, c, ok}); diff != "" {
			t.Errorf("WindowAt(%s) (-want +got):\n%s", at, diff)
		}
	}
}
