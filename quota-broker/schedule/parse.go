package schedule

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Keys of the flat string map that the Nomad Autoscaler gives a strategy as its
// config (DESIGN §8). See Parse.
const (
	KeyWindowPrefix = "window_"       // window_<name> = "DAYS HH:MM-HH:MM COUNT"
	KeyDefaultCount = "default_count" // count outside all windows
	KeyDefault      = "default"       // alias of default_count
	KeyTimezone     = "timezone"      // IANA zone name; UTC when absent
	KeyTimeZone     = "time_zone"     // alias of timezone
	KeyHolidays     = "holidays"      // comma list of local dates, 2006-01-02
	KeyRamp         = "ramp"          // Go duration, e.g. "15m"; no ramp when absent
)

// MaxCount is the largest count a window or the default may have.
const MaxCount = 1<<31 - 1

// ConfigError is the error Parse and New return for a bad setting. Key names the
// setting as the operator wrote it (a map key such as "window_day" for Parse, or
// `window "day"` for New), Value is the value as given, and Error() reads
// "<Key>: <Reason>", e.g.
//
//	window_day: invalid time "25:00" in "mon-fri 25:00-22:00 24"
type ConfigError struct {
	Key    string
	Value  string
	Reason string
}

func (e *ConfigError) Error() string { return e.Key + ": " + e.Reason }

// WindowConfig is one window in typed form (for the simulator's HCL config and
// for callers that build schedules in code). A window holds on each of Days from
// Start to End in local time, with Count replicas (DESIGN §8).
type WindowConfig struct {
	// Name identifies the window in error messages; required, unique.
	Name string
	// Days: "mon".."sun", ranges ("mon-fri", wrapping "fri-mon") and comma lists
	// of both ("sat,sun", "mon,wed-fri"). Case-insensitive.
	Days string
	// Start: "HH:MM" (or "H:MM"), 00:00..23:59, local time, inclusive.
	Start string
	// End: "HH:MM", 00:00..24:00, local time, exclusive. An End at or before
	// Start (other than equal, which is rejected) runs past midnight into the
	// next day; "24:00" and "00:00" both mean the midnight that ends the day.
	End string
	// Count: the count while the window holds, 0..MaxCount.
	Count int
}

// Config is a schedule in typed form; New validates it. The zero value of each
// optional field means: TimeZone "" = UTC, Holidays nil = none, Ramp 0 = none.
type Config struct {
	// TimeZone is an IANA zone name such as "Europe/Berlin"; "" means UTC.
	// "Local" is refused: it would make the schedule depend on the host.
	TimeZone string
	// Default is the count outside all windows, 0..MaxCount.
	Default int
	// Windows are the day/night windows; at least one.
	Windows []WindowConfig
	// Holidays are local dates "2006-01-02" on which no window starts.
	Holidays []string
	// Ramp, when positive, spreads each count change linearly over this
	// duration (see Schedule.CountAt).
	Ramp time.Duration
}

// ParseWindow parses a window string "DAYS HH:MM-HH:MM COUNT" (the value of a
// window_<name> key, DESIGN §8), e.g. "mon-fri 08:00-22:00 24", into a
// WindowConfig with an empty Name. Fields are separated by white space.
func ParseWindow(spec string) (WindowConfig, error) {
	_, wc, reason := parseWindowSpec(spec)
	if reason != "" {
		return WindowConfig{}, fmt.Errorf("%s in %q", reason, spec)
	}
	return wc, nil
}

// Parse reads a schedule from the flat string map that the Nomad Autoscaler
// gives a strategy (DESIGN §8):
//
//	window_<name> = "DAYS HH:MM-HH:MM COUNT"   one or more, e.g. window_day = "mon-fri 08:00-22:00 24"
//	default_count = "COUNT"                    required (alias default): the count outside all windows
//	timezone      = "Europe/Berlin"            optional (alias time_zone) IANA zone, UTC when absent
//	holidays      = "2026-12-25,2026-12-26"    optional local dates on which no window starts
//	ramp          = "15m"                      optional Go duration
//
// A key and its alias together are refused (issue 11). Unknown keys are refused,
// so that a misspelt setting is not silently ignored.
// Keys are checked in sorted order, so the error for a given map is always the
// same. Every error is a *ConfigError naming the key and the value.
func Parse(cfg map[string]string) (*Schedule, error) {
	keys := slices.Sorted(maps.Keys(cfg))

	var (
		s           = &Schedule{loc: time.UTC}
		haveDefault bool
		haveZone    bool
	)
	for _, k := range keys {
		v := cfg[k]
		switch {
		case strings.HasPrefix(k, KeyWindowPrefix):
			name := k[len(KeyWindowPrefix):]
			if name == "" {
				return nil, &ConfigError{Key: k, Value: v, Reason: "window name is empty; write window_<name>"}
			}
			w, _, reason := parseWindowSpec(v)
			if reason != "" {
				return nil, &ConfigError{Key: k, Value: v, Reason: fmt.Sprintf("%s in %q", reason, v)}
			}
			w.name = name
			s.windows = append(s.windows, w)
		case k == KeyDefault || k == KeyDefaultCount:
			if haveDefault {
				return nil, &ConfigError{Key: k, Value: v, Reason: "give either default or default_count, not both"}
			}
			n, ok := parseCount(v)
			if !ok {
				return nil, &ConfigError{Key: k, Value: v, Reason: fmt.Sprintf("invalid count %q: want a whole number 0..%d", v, MaxCount)}
			}
			s.def, haveDefault = n, true
		case k == KeyTimezone || k == KeyTimeZone:
			if haveZone {
				return nil, &ConfigError{Key: k, Value: v, Reason: "give either timezone or time_zone, not both"}
			}
			haveZone = true
			loc, reason := loadZone(v)
			if reason != "" {
				return nil, &ConfigError{Key: k, Value: v, Reason: reason}
			}
			s.loc = loc
		case k == KeyHolidays:
			var items []string
			if strings.TrimSpace(v) != "" {
				items = strings.Split(v, ",")
			}
			days, reason := parseHolidays(items)
			if reason != "" {
				return nil, &ConfigError{Key: k, Value: v, Reason: reason}
			}
			s.holidays = days
		case k == KeyRamp:
			d, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil || d < 0 {
				return nil, &ConfigError{Key: k, Value: v, Reason: fmt.Sprintf("invalid duration %q: want a Go duration such as \"15m\", 0 for none", v)}
			}
			s.ramp = d
		default:
			return nil, &ConfigError{Key: k, Value: v, Reason: "unknown key; known keys are window_<name>, default_count (alias default), timezone (alias time_zone), holidays, ramp"}
		}
	}
	if len(s.windows) == 0 {
		return nil, &ConfigError{Key: KeyWindowPrefix + "<name>", Reason: "no window: give at least one window_<name> = \"DAYS HH:MM-HH:MM COUNT\""}
	}
	if !haveDefault {
		return nil, &ConfigError{Key: KeyDefaultCount, Reason: "missing: give the count outside all windows, e.g. default_count = \"0\""}
	}
	if reason := checkRamp(s.ramp, s.windows); reason != "" {
		return nil, &ConfigError{Key: KeyRamp, Value: cfg[KeyRamp], Reason: reason}
	}
	s.init()
	return s, nil
}

// New builds a schedule from its typed form (the simulator's HCL config). It
// applies the same rules as Parse; errors are *ConfigError with Key "time_zone",
// "default", "holidays", "ramp" or `window "<name>"`.
func New(cfg Config) (*Schedule, error) {
	s := &Schedule{loc: time.UTC}
	if cfg.TimeZone != "" {
		loc, reason := loadZone(cfg.TimeZone)
		if reason != "" {
			return nil, &ConfigError{Key: KeyTimeZone, Value: cfg.TimeZone, Reason: reason}
		}
		s.loc = loc
	}
	if cfg.Default < 0 || cfg.Default > MaxCount {
		v := strconv.Itoa(cfg.Default)
		return nil, &ConfigError{Key: KeyDefault, Value: v, Reason: fmt.Sprintf("invalid count %s: want 0..%d", v, MaxCount)}
	}
	s.def = cfg.Default
	if len(cfg.Windows) == 0 {
		return nil, &ConfigError{Key: "window", Reason: "no window: give at least one"}
	}
	seen := make(map[string]bool, len(cfg.Windows))
	for i, wc := range cfg.Windows {
		key := fmt.Sprintf("window %q", wc.Name)
		if wc.Name == "" {
			return nil, &ConfigError{Key: fmt.Sprintf("window #%d", i+1), Reason: "name is empty"}
		}
		if seen[wc.Name] {
			return nil, &ConfigError{Key: key, Value: wc.Name, Reason: "duplicate window name"}
		}
		seen[wc.Name] = true
		w, reason := buildWindow(wc)
		if reason != "" {
			return nil, &ConfigError{Key: key, Value: fmt.Sprintf("%s %s-%s %d", wc.Days, wc.Start, wc.End, wc.Count), Reason: reason}
		}
		s.windows = append(s.windows, w)
	}
	days, reason := parseHolidays(cfg.Holidays)
	if reason != "" {
		return nil, &ConfigError{Key: KeyHolidays, Value: strings.Join(cfg.Holidays, ","), Reason: reason}
	}
	s.holidays = days
	if cfg.Ramp < 0 {
		return nil, &ConfigError{Key: KeyRamp, Value: cfg.Ramp.String(), Reason: "negative duration"}
	}
	s.ramp = cfg.Ramp
	if reason := checkRamp(s.ramp, s.windows); reason != "" {
		return nil, &ConfigError{Key: KeyRamp, Value: cfg.Ramp.String(), Reason: reason}
	}
	s.init()
	return s, nil
}

// parseWindowSpec parses "DAYS HH:MM-HH:MM COUNT". On failure reason says what
// is wrong (without the spec itself).
func parseWindowSpec(spec string) (window, WindowConfig, string) {
	f := strings.Fields(spec)
	if len(f) != 3 {
		return window{}, WindowConfig{}, fmt.Sprintf(`want 3 fields "DAYS HH:MM-HH:MM COUNT", got %d`, len(f))
	}
	start, end, ok := strings.Cut(f[1], "-")
	if !ok {
		return window{}, WindowConfig{}, fmt.Sprintf("invalid times %q: want HH:MM-HH:MM", f[1])
	}
	wc := WindowConfig{Days: f[0], Start: start, End: end}
	n, ok := parseCount(f[2])
	if !ok {
		return window{}, WindowConfig{}, fmt.Sprintf("invalid count %q: want a whole number 0..%d", f[2], MaxCount)
	}
	wc.Count = n
	w, reason := buildWindow(wc)
	if reason != "" {
		return window{}, WindowConfig{}, reason
	}
	return w, wc, ""
}

// buildWindow validates a typed window.
func buildWindow(wc WindowConfig) (window, string) {
	w := window{name: wc.Name, count: wc.Count}
	if wc.Count < 0 || wc.Count > MaxCount {
		return w, fmt.Sprintf("invalid count %d: want 0..%d", wc.Count, MaxCount)
	}
	days, reason := parseDays(wc.Days)
	if reason != "" {
		return w, reason
	}
	w.days = days
	start, ok := parseClock(wc.Start)
	if !ok {
		return w, fmt.Sprintf("invalid time %q", wc.Start)
	}
	if start == minutesPerDay {
		return w, fmt.Sprintf("invalid start %q: a window starts at 23:59 at the latest", wc.Start)
	}
	end, ok := parseClock(wc.End)
	if !ok {
		return w, fmt.Sprintf("invalid time %q", wc.End)
	}
	if end == 0 {
		end = minutesPerDay // 00:00 as an end is the midnight that ends the day
	}
	if end == start {
		return w, fmt.Sprintf("start equals end (%s-%s): use 00:00-24:00 for a whole day", wc.Start, wc.End)
	}
	w.start, w.end = start, end
	return w, ""
}

var dayNames = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

// parseDays parses "mon-fri", "fri-mon", "sat,sun", "mon,wed-fri" into a bit set
// (bit i = time.Weekday i).
func parseDays(s string) (uint8, string) {
	if s == "" {
		return 0, `no days: want e.g. "mon-fri" or "sat,sun"`
	}
	var set uint8
	for _, item := range strings.Split(s, ",") {
		a, b, isRange := strings.Cut(item, "-")
		from, ok := dayNames[strings.ToLower(a)]
		if !ok {
			return 0, fmt.Sprintf("invalid day %q: want mon, tue, wed, thu, fri, sat or sun", a)
		}
		if !isRange {
			set |= 1 << from
			continue
		}
		to, ok := dayNames[strings.ToLower(b)]
		if !ok {
			return 0, fmt.Sprintf("invalid day %q: want mon, tue, wed, thu, fri, sat or sun", b)
		}
		if from == to {
			return 0, fmt.Sprintf("invalid day range %q: first and last day are the same; write %q", item, a)
		}
		for d := from; ; d = (d + 1) % 7 {
			set |= 1 << d
			if d == to {
				break
			}
		}
	}
	return set, ""
}

// parseClock parses "HH:MM" or "H:MM" into minutes after midnight, 0..1440;
// 24:00 is the only time with hour 24.
func parseClock(s string) (int, bool) {
	h, m, ok := strings.Cut(s, ":")
	if !ok || len(h) < 1 || len(h) > 2 || len(m) != 2 {
		return 0, false
	}
	hh, ok1 := atoiDigits(h)
	mm, ok2 := atoiDigits(m)
	if !ok1 || !ok2 || mm > 59 || hh > 24 || (hh == 24 && mm != 0) {
		return 0, false
	}
	return hh*60 + mm, true
}

// parseCount parses a non-negative decimal count (digits only, no sign).
func parseCount(s string) (int, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 10 {
		return 0, false
	}
	n, ok := atoiDigits(s)
	if !ok || n > MaxCount {
		return 0, false
	}
	return n, true
}

func atoiDigits(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func loadZone(name string) (*time.Location, string) {
	name = strings.TrimSpace(name)
	if name == "" || name == "UTC" {
		return time.UTC, ""
	}
	if name == "Local" {
		return nil, `"Local" depends on the host: give an IANA zone name such as "Europe/Berlin"`
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Sprintf("unknown time zone %q: want an IANA name such as \"Europe/Berlin\"", name)
	}
	return loc, ""
}

// parseHolidays parses local dates "2006-01-02" into sorted, distinct civil day
// numbers.
func parseHolidays(items []string) ([]int64, string) {
	var days []int64
	for _, it := range items {
		it = strings.TrimSpace(it)
		d, err := time.Parse(time.DateOnly, it)
		if err != nil {
			return nil, fmt.Sprintf("invalid date %q: want YYYY-MM-DD", it)
		}
		days = append(days, civilDay(d.Date()))
	}
	slices.Sort(days)
	out := days[:0]
	for i, d := range days {
		if i == 0 || d != days[i-1] {
			out = append(out, d)
		}
	}
	return out, ""
}

// dstSlack is how much a daylight-saving transition may shorten the real time
// between two wall-clock instants (one hour almost everywhere; two for the
// historical double summer time).
const dstSlack = 2 * time.Hour

// checkRamp refuses a ramp so long that the count might never settle: a
// ramp interrupted by the next boundary continues from the count reached, so
// each week must hold a stretch without any window edge at least ramp+dstSlack
// long. Then the count at any instant depends only on the last week and a
// half, and CountAt stays exact and cheap.
func checkRamp(ramp time.Duration, ws []window) string {
	if ramp <= 0 || len(ws) == 0 {
		return ""
	}
	const week = 7 * minutesPerDay
	var edges []int
	for _, w := range ws {
		for d := 0; d < 7; d++ {
			if w.days&(1<<d) == 0 {
				continue
			}
			base := d * minutesPerDay
			end := w.end
			if end <= w.start {
				end += minutesPerDay
			}
			edges = append(edges, (base+w.start)%week, (base+end)%week)
		}
	}
	sort.Ints(edges)
	longest := 0
	for i, e := range edges {
		next := edges[(i+1)%len(edges)]
		if i == len(edges)-1 {
			next += week
		}
		if g := next - e; g > longest {
			longest = g
		}
	}
	gap := time.Duration(longest) * time.Minute
	if ramp+dstSlack > gap {
		return fmt.Sprintf("ramp %s is too long: the longest stretch between two window edges in a week is %s, and a ramp must fit in it with %s to spare for daylight saving",
			ramp, gap, dstSlack)
	}
	return ""
}
