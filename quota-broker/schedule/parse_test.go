package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseErrors(t *testing.T) {
	ok := func(extra map[string]string) map[string]string {
		m := map[string]string{"window_day": "mon-fri 08:00-22:00 24", "default": "2"}
		for k, v := range extra {
			if v == "\x00delete" {
				delete(m, k)
				continue
			}
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name string
		cfg  map[string]string
		want string
	}{
		{"an hour past 23 is an invalid time", ok(map[string]string{"window_day": "mon-fri 25:00-22:00 24"}),
			`window_day: invalid time "25:00" in "mon-fri 25:00-22:00 24"`},
		{"minutes past 59 are an invalid time", ok(map[string]string{"window_day": "mon-fri 08:60-22:00 24"}),
			`window_day: invalid time "08:60" in "mon-fri 08:60-22:00 24"`},
		{"24:30 is an invalid end", ok(map[string]string{"window_day": "mon-fri 08:00-24:30 24"}),
			`window_day: invalid time "24:30" in "mon-fri 08:00-24:30 24"`},
		{"a time without a colon is invalid", ok(map[string]string{"window_day": "mon-fri 0800-22:00 24"}),
			`window_day: invalid time "0800" in "mon-fri 0800-22:00 24"`},
		{"a window cannot start at 24:00", ok(map[string]string{"window_day": "mon 24:00-06:00 24"}),
			`window_day: invalid start "24:00": a window starts at 23:59 at the latest in "mon 24:00-06:00 24"`},
		{"a start equal to the end is refused", ok(map[string]string{"window_day": "mon 08:00-08:00 24"}),
			`window_day: start equals end (08:00-08:00): use 00:00-24:00 for a whole day in "mon 08:00-08:00 24"`},
		{"times without a dash are refused", ok(map[string]string{"window_day": "mon 08:00 24"}),
			`window_day: invalid times "08:00": want HH:MM-HH:MM in "mon 08:00 24"`},
		{"a window needs three fields", ok(map[string]string{"window_day": "mon-fri 08:00-22:00"}),
			`window_day: want 3 fields "DAYS HH:MM-HH:MM COUNT", got 2 in "mon-fri 08:00-22:00"`},
		{"an unknown day name is refused", ok(map[string]string{"window_day": "mon-fry 08:00-22:00 24"}),
			`window_day: invalid day "fry": want mon, tue, wed, thu, fri, sat or sun in "mon-fry 08:00-22:00 24"`},
		{"a full day name is refused", ok(map[string]string{"window_day": "monday 08:00-22:00 24"}),
			`window_day: invalid day "monday": want mon, tue, wed, thu, fri, sat or sun in "monday 08:00-22:00 24"`},
		{"an empty item in a day list is refused", ok(map[string]string{"window_day": "mon,,fri 08:00-22:00 24"}),
			`window_day: invalid day "": want mon, tue, wed, thu, fri, sat or sun in "mon,,fri 08:00-22:00 24"`},
		{"a range from a day to itself is refused", ok(map[string]string{"window_day": "mon-mon 08:00-22:00 24"}),
			`window_day: invalid day range "mon-mon": first and last day are the same; write "mon" in "mon-mon 08:00-22:00 24"`},
		{"a negative window count is refused", ok(map[string]string{"window_day": "mon 08:00-22:00 -1"}),
			`window_day: invalid count "-1": want a whole number 0..2147483647 in "mon 08:00-22:00 -1"`},
		{"a fractional window count is refused", ok(map[string]string{"window_day": "mon 08:00-22:00 2.5"}),
			`window_day: invalid count "2.5": want a whole number 0..2147483647 in "mon 08:00-22:00 2.5"`},
		{"a window count above MaxCount is refused", ok(map[string]string{"window_day": "mon 08:00-22:00 2147483648"}),
			`window_day: invalid count "2147483648": want a whole number 0..2147483647 in "mon 08:00-22:00 2147483648"`},
		{"an empty window name is refused", ok(map[string]string{"window_": "mon 08:00-22:00 3"}),
			`window_: window name is empty; write window_<name>`},
		{"a schedule needs a window", map[string]string{"default": "2"},
			`window_<name>: no window: give at least one window_<name> = "DAYS HH:MM-HH:MM COUNT"`},
		{"a schedule needs a default", ok(map[string]string{"default": "\x00delete"}),
			`default_count: missing: give the count outside all windows, e.g. default_count = "0"`},
		{"a non-numeric default is refused", ok(map[string]string{"default": "two"}),
			`default: invalid count "two": want a whole number 0..2147483647`},
		{"a negative default_count is refused", ok(map[string]string{"default": "\x00delete", "default_count": "-3"}),
			`default_count: invalid count "-3": want a whole number 0..2147483647`},
		{"default and default_count together are refused", ok(map[string]string{"default_count": "2"}),
			`default_count: give either default or default_count, not both`},
		{"an unknown time zone is refused", ok(map[string]string{"time_zone": "Mars/Olympus_Mons"}),
			`time_zone: unknown time zone "Mars/Olympus_Mons": want an IANA name such as "Europe/Berlin"`},
		{"the host's Local zone is refused", ok(map[string]string{"time_zone": "Local"}),
			`time_zone: "Local" depends on the host: give an IANA zone name such as "Europe/Berlin"`},
		{"an impossible holiday date is refused", ok(map[string]string{"holidays": "2026-12-25,2026-13-01"}),
			`holidays: invalid date "2026-13-01": want YYYY-MM-DD`},
		{"a holiday in another format is refused", ok(map[string]string{"holidays": "25.12.2026"}),
			`holidays: invalid date "25.12.2026": want YYYY-MM-DD`},
		{"an empty holiday item is refused", ok(map[string]string{"holidays": "2026-12-25,"}),
			`holidays: invalid date "": want YYYY-MM-DD`},
		{"a ramp that is not a duration is refused", ok(map[string]string{"ramp": "fast"}),
			`ramp: invalid duration "fast": want a Go duration such as "15m", 0 for none`},
		{"a negative ramp is refused", ok(map[string]string{"ramp": "-5m"}),
			`ramp: invalid duration "-5m": want a Go duration such as "15m", 0 for none`},
		{"a ramp longer than the longest quiet stretch less 2h is refused",
			map[string]string{"window_day": "mon-sun 08:00-22:00 24", "default": "2", "ramp": "12h1m"},
			`ramp: ramp 12h1m0s is too long: the longest stretch between two window edges in a week is 14h0m0s, and a ramp must fit in it with 2h0m0s to spare for daylight saving`},
		{"a misspelt key is refused, not ignored", ok(map[string]string{"time-zone": "Europe/Berlin"}),
			`time-zone: unknown key; known keys are window_<name>, default_count (alias default), timezone (alias time_zone), holidays, ramp`},
		{"timezone and time_zone together are refused", ok(map[string]string{"timezone": "Europe/Berlin", "time_zone": "Europe/Berlin"}),
			`timezone: give either timezone or time_zone, not both`},
		{"an unknown zone under timezone names that key", ok(map[string]string{"timezone": "Mars/Olympus_Mons"}),
			`timezone: unknown time zone "Mars/Olympus_Mons": want an IANA name such as "Europe/Berlin"`},
		{"errors are reported in key order, so the first bad key wins", ok(map[string]string{"window_a": "mon 9-10 1", "window_b": "tue 9-10 1"}),
			`window_a: invalid time "9" in "mon 9-10 1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.cfg)
			if err == nil {
				t.Fatalf("Parse(%v) = %v, want error %q", tt.cfg, s, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("Parse error\n got: %s\nwant: %s", err, tt.want)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.HasPrefix(tt.want, ce.Key+": ") {
				t.Errorf("error %#v is not a *ConfigError keyed as in %q", err, tt.want)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name string
		cfg  map[string]string
		at   string // RFC 3339
		want int
	}{
		{"default_count is an alias of default",
			map[string]string{"window_day": "mon 08:00-09:00 5", "default_count": "3"}, "2026-03-02T10:00:00Z", 3},
		{"an hour may have one digit",
			map[string]string{"window_day": "mon 8:00-9:00 5", "default": "0"}, "2026-03-02T08:30:00Z", 5},
		{"day names are case-insensitive",
			map[string]string{"window_day": "MON-Fri 08:00-09:00 5", "default": "0"}, "2026-03-06T08:30:00Z", 5},
		{"fields may be separated by several spaces and tabs",
			map[string]string{"window_day": "  mon \t 08:00-09:00   5 ", "default": "0"}, "2026-03-02T08:30:00Z", 5},
		{"a whole day is 00:00-24:00",
			map[string]string{"window_day": "mon 00:00-24:00 5", "default": "0"}, "2026-03-02T23:59:59Z", 5},
		{"an explicit UTC zone is UTC",
			map[string]string{"window_day": "mon 08:00-09:00 5", "default": "0", "time_zone": "UTC"}, "2026-03-02T08:30:00Z", 5},
		{"an empty holiday list means none",
			map[string]string{"window_day": "mon 08:00-09:00 5", "default": "0", "holidays": ""}, "2026-03-02T08:30:00Z", 5},
		{"a ramp of 0 means none",
			map[string]string{"window_day": "mon 08:00-09:00 5", "default": "0", "ramp": "0"}, "2026-03-02T08:00:00Z", 5},
		{"a ramp as long as the quiet stretch less 2h is accepted",
			map[string]string{"window_day": "mon-sun 08:00-22:00 24", "default": "2", "ramp": "12h"}, "2026-03-02T20:00:00Z", 24},
		{"a count of zero is allowed",
			map[string]string{"window_day": "mon 08:00-09:00 0", "default": "4"}, "2026-03-02T08:30:00Z", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.cfg)
			if got := s.CountAt(instant(t, "", tt.at)); got != tt.want {
				t.Errorf("CountAt(%s) = %d, want %d", tt.at, got, tt.want)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	day := WindowConfig{Name: "day", Days: "mon-fri", Start: "08:00", End: "22:00", Count: 24}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"a bad window time names the window", Config{Windows: []WindowConfig{{Name: "day", Days: "mon", Start: "25:00", End: "22:00", Count: 1}}},
			`window "day": invalid time "25:00"`},
		{"a negative window count names the window", Config{Windows: []WindowConfig{{Name: "day", Days: "mon", Start: "08:00", End: "22:00", Count: -1}}},
			`window "day": invalid count -1: want 0..2147483647`},
		{"two windows may not share a name", Config{Windows: []WindowConfig{day, day}},
			`window "day": duplicate window name`},
		{"a window needs a name", Config{Windows: []WindowConfig{day, {Days: "mon", Start: "08:00", End: "09:00"}}},
			`window #2: name is empty`},
		{"a schedule needs a window", Config{},
			`window: no window: give at least one`},
		{"a negative default is refused", Config{Default: -1, Windows: []WindowConfig{day}},
			`default: invalid count -1: want 0..2147483647`},
		{"an unknown zone is refused", Config{TimeZone: "Europe/Atlantis", Windows: []WindowConfig{day}},
			`time_zone: unknown time zone "Europe/Atlantis": want an IANA name such as "Europe/Berlin"`},
		{"a bad holiday is refused", Config{Windows: []WindowConfig{day}, Holidays: []string{"2026-02-30"}},
			`holidays: invalid date "2026-02-30": want YYYY-MM-DD`},
		{"a negative ramp is refused", Config{Windows: []WindowConfig{day}, Ramp: -time.Minute},
			`ramp: negative duration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("New error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestParseWindow(t *testing.T) {
	got, err := ParseWindow("sat,sun 22:00-06:00 3")
	if err != nil {
		t.Fatal(err)
	}
	want := WindowConfig{Days: "sat,sun", Start: "22:00", End: "06:00", Count: 3}
	if got != want {
		t.Errorf("ParseWindow = %+v, want %+v", got, want)
	}
	_, err = ParseWindow("sat 22:00-06:00 x")
	if err == nil || err.Error() != `invalid count "x": want a whole number 0..2147483647 in "sat 22:00-06:00 x"` {
		t.Errorf("ParseWindow error = %v", err)
	}
}
