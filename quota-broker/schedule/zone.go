package schedule

import "time"

// Local calendar arithmetic. A local date is a civil day number: days since
// 1970-01-01 in the proleptic Gregorian calendar, independent of any zone. A
// wall-clock time is that day number and a number of minutes after local
// midnight (0..1440), and is turned into an instant by resolveWall, which
// applies the DST rules of DESIGN §8.

const (
	secondsPerDay = 24 * 60 * 60
	minutesPerDay = 24 * 60
)

// civilDay returns the civil day number of the local date (y, m, d).
func civilDay(y int, m time.Month, d int) int64 {
	// The Unix time of midnight UTC is an exact multiple of a day, so the
	// division is exact also before 1970.
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / secondsPerDay
}

// weekdayOf returns the day of the week of civil day n (1970-01-01 was a
// Thursday).
func weekdayOf(n int64) time.Weekday {
	return time.Weekday(floorMod(n+4, 7))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 {
	return a - floorDiv(a, b)*b
}

// resolveWall returns the Unix second at which the local wall-clock time
// "civil day `day`, `minute` minutes after midnight" takes effect in loc
// (minute may be 1440: midnight at the end of the day).
//
// Rules (DESIGN §8):
//   - a wall time that occurs once maps to that instant;
//   - a wall time that occurs twice (fall back, repeated hour) maps to its first
//     occurrence;
//   - a wall time that never occurs (spring forward, skipped hour) maps to the
//     first instant after the gap, the instant of the transition itself.
//
// time.Date is not used for this: for a skipped or repeated wall time it
// guarantees neither choice.
func resolveWall(loc *time.Location, day int64, minute int) int64 {
	w := day*secondsPerDay + int64(minute)*60 // the wall time read as if it were UTC
	// Real UTC offsets lie within ±14h (Go accepts up to ±24h in a zone file),
	// so the instant lies within [w-24h, w+24h]. Walk the zone periods that
	// cover that span, earliest first: the first period in which w occurs
	// holds the first occurrence; a gap between two periods that contains w
	// means it is skipped.
	const span = secondsPerDay
	t := time.Unix(w-span, 0).In(loc)
	for {
		_, off := t.Zone()
		start, end := t.ZoneBounds()
		c := w - int64(off)
		if (start.IsZero() || c >= start.Unix()) && (end.IsZero() || c < end.Unix()) {
			return c
		}
		if end.IsZero() || end.Unix() > w+span {
			// No period holds w: can only happen with malformed zone data.
			// Fall back to the offset of the last period seen.
			return c
		}
		next := end.In(loc)
		_, off2 := next.Zone()
		T := end.Unix()
		if T+int64(off) <= w && w < T+int64(off2) {
			return T // w lies in the skipped span between the two periods
		}
		t = next
	}
}
