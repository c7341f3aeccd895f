// Package schedule evaluates day/night count schedules in an IANA time zone:
// the "schedule strategy" of DESIGN §8. It is pure: the only I/O is loading the
// time zone with time.LoadLocation when a schedule is built. The simulator uses
// it to drive the inference service's replica count; the autoscaler strategy
// plugin serves the same package.
//
// A schedule is a default count, a list of windows, optional holidays and an
// optional ramp, all in one time zone. The rules (DESIGN §8, with the choices
// this package makes where the design is silent marked "here"):
//
//   - A window "DAYS HH:MM-HH:MM COUNT" holds on each listed day from its start
//     (inclusive) to its end (exclusive), in local wall-clock time. Days are
//     mon..sun, ranges (mon-fri, wrapping fri-mon) and comma lists (sat,sun,
//     mon,wed-fri).
//   - An end before the start runs past midnight; the window belongs to the day
//     it starts on: "fri 22:00-06:00" holds on Saturday at 03:00. Here: an end
//     of 24:00 or 00:00 is the midnight that ends the start day; a start equal
//     to the end is refused (write 00:00-24:00 for a whole day); a start of
//     24:00 is refused.
//   - Where windows overlap, the larger count applies; back-to-back windows do
//     not dip to the default between them (a window's end and the next one's
//     start are the same instant). Outside all windows the default applies.
//     Here: inside a window its count applies even when it is below the default
//     (a "night" window with count 0 under a default of 2 gives 0).
//   - On a holiday (a local date) no window starts; a window that started the
//     day before still runs to its end.
//   - Daylight saving: a boundary (a window's start or end) whose wall time is
//     skipped (spring forward) takes effect at the first instant after the gap;
//     one whose wall time occurs twice (fall back) takes effect once, at its
//     first occurrence. Here: a window whose start and end both fall in one gap
//     holds for no time at all.
//   - Ramp R > 0: after each boundary the count moves linearly from the count
//     in effect just before the boundary to the new count over R, rounded toward
//     the new count. Here: the ramp is a right-continuous staircase of |Δ|
//     steps, the first taken at the boundary itself (as a window's start is
//     inclusive), step k (k = 1..|Δ|) at boundary + ⌈(k-1)·R/|Δ|⌉ ns, so the new
//     count is reached at boundary + ⌈(|Δ|-1)·R/|Δ|⌉ ≤ R. This is the linear
//     value rounded toward the new count (up when rising, down when falling),
//     except at the instants where the linear value is whole, where the next
//     step is already taken. A boundary that falls inside a ramp starts a new
//     ramp from the count reached. A ramp must fit, with 2h to spare, in the
//     longest stretch between window edges of the week, so that it completes at
//     least once a week; Parse and New refuse a longer one.
//
// Counts are replica counts: whole numbers 0..MaxCount. Instants are time.Time
// at any location; results are given in the schedule's location.
//
// Zone rules come from the host's zone files, or from the copy in the binary
// when it imports time/tzdata; a binary that must give the same counts on every
// host (the plugin, the simulator) should import time/tzdata.
//
// Evaluation is cached per local week (lock-free, safe for concurrent use), so
// CountAt in a week already seen costs a few tens of nanoseconds and does not
// allocate; see docs/benchmarks.md.
package schedule

import (
	"math/bits"
	"slices"
	"sort"
	"sync/atomic"
	"time"
)

// Schedule is a parsed, validated schedule. Build it with Parse or New. It is
// immutable apart from an internal cache, and safe for concurrent use.
type Schedule struct {
	loc      *time.Location
	def      int
	windows  []window
	holidays []int64 // sorted civil day numbers
	ramp     time.Duration

	rampSec  int64 // ⌈ramp / 1s⌉: a ramp is over once this many whole seconds have passed
	rampDays int64 // ⌈ramp / 24h⌉

	last  atomic.Pointer[chunk]    // the chunk most recently used
	slots [4]atomic.Pointer[chunk] // chunk k lives in slots[k&3]
}

// Step is one change of the count: from At on (inclusive) the count is Count.
type Step struct {
	At    time.Time // in the schedule's location
	Count int
}

type window struct {
	name  string
	days  uint8 // bit i set: the window starts on time.Weekday(i)
	start int   // minutes after local midnight, 0..1439
	end   int   // minutes, 1..1440; end <= start: on the next day
	count int
}

// seg is a piece of the count function starting at a base boundary: from at on
// the scheduled count is `to`, and the effective count ramps from `from` (the
// effective count just before at) to `to`.
type seg struct {
	at   int64 // Unix seconds
	from int
	to   int
}

// chunk is the count function over the instants [lo, hi) of local week k
// (civil days 7k..7k+6; weeks start on Thursdays, the weekday of day 0, which
// matters to nothing but the cache). segs[0].at <= lo < segs[i].at < hi, i > 0.
type chunk struct {
	k      int64
	lo, hi int64 // Unix seconds
	segs   []seg
}

func (s *Schedule) init() {
	if s.ramp > 0 {
		s.rampSec = int64((s.ramp + time.Second - 1) / time.Second)
		s.rampDays = int64((s.ramp + 24*time.Hour - 1) / (24 * time.Hour))
	}
}

// Location returns the schedule's time zone.
func (s *Schedule) Location() *time.Location { return s.loc }

// Default returns the count outside all windows.
func (s *Schedule) Default() int { return s.def }

// Ramp returns the ramp duration (0: none).
func (s *Schedule) Ramp() time.Duration { return s.ramp }

// CountAt returns the count in effect at instant t (DESIGN §8 rules, see the
// package documentation). It is deterministic: the same schedule and instant
// always give the same count, whatever was evaluated before.
func (s *Schedule) CountAt(t time.Time) int {
	sec, ns := t.Unix(), int64(t.Nanosecond())
	c := s.chunkAt(t, sec)
	return s.value(c.segs[c.find(sec)], sec, ns)
}

// NextBoundary returns the first instant strictly after `after` at which the
// count changes, and the count from that instant on. With a ramp each step of
// the ramp is such an instant. ok is false when the count never changes again
// (a schedule whose windows cover all time with one count, past its last
// holiday).
//
// The simulator uses it to pre-warm: to drain borrowers kill_timeout plus one
// interval before a scale-up (issue 3).
func (s *Schedule) NextBoundary(after time.Time) (at time.Time, count int, ok bool) {
	psec, pns := after.Unix(), int64(after.Nanosecond())
	c := s.chunkAt(after, psec)
	i := c.find(psec)
	// horizon: once a stretch this long without holidays shows no change, the
	// count is steady until the next holiday.
	steady := int64(8*secondsPerDay) + s.rampSec
	horizon := psec + steady
	for {
		for j := i; j < len(c.segs); j++ {
			limit := c.hi
			if j+1 < len(c.segs) {
				limit = c.segs[j+1].at
			}
			if a, an, n, found := s.nextChange(c.segs[j], psec, pns); found && a < limit {
				return time.Unix(a, an).In(s.loc), n, true
			}
		}
		// Nothing in this chunk: continue with the next one, from its start
		// (one nanosecond before it, so that a change at its very start counts).
		if s.holidayIn(7*c.k-1, 7*c.k+7) {
			horizon = max(horizon, c.hi+steady)
		}
		k := c.k + 1
		if c.hi > horizon {
			h, found := s.nextHoliday(7*k - 1)
			if !found {
				return time.Time{}, 0, false
			}
			k = max(k, floorDiv(h, 7))
			horizon = resolveWall(s.loc, h+1, 0) + steady
		}
		c = s.chunk(k)
		psec, pns = c.lo-1, 999_999_999
		i = 0
	}
}

// Preview lists the count at `from` followed by every change of the count in
// (from, from+d): the "preview of the counts for the next days" of DESIGN §8.
// The first Step is always {from, CountAt(from)}; d <= 0 gives just that one.
func (s *Schedule) Preview(from time.Time, d time.Duration) []Step {
	steps := []Step{{At: from.In(s.loc), Count: s.CountAt(from)}}
	end := from.Add(d)
	for t := from; ; {
		at, n, ok := s.NextBoundary(t)
		if !ok || !at.Before(end) {
			return steps
		}
		steps = append(steps, Step{At: at, Count: n})
		t = at
	}
}

// value is the count of seg g at instant (sec, ns), which must not be before g.at.
func (s *Schedule) value(g seg, sec, ns int64) int {
	if g.from == g.to || s.ramp <= 0 {
		return g.to
	}
	es := sec - g.at
	if es >= s.rampSec {
		return g.to
	}
	e := es*int64(time.Second) + ns
	if e >= int64(s.ramp) {
		return g.to
	}
	d := g.to - g.from
	if d < 0 {
		d = -d
	}
	k := mulDiv(uint64(d), uint64(e), uint64(s.ramp)) + 1
	if k >= uint64(d) {
		return g.to
	}
	if g.to > g.from {
		return g.from + int(k)
	}
	return g.from - int(k)
}

// nextChange returns the first instant strictly after (psec, pns) at which the
// count of seg g changes, were g to run forever, and the count from then on.
func (s *Schedule) nextChange(g seg, psec, pns int64) (int64, int64, int, bool) {
	if g.from == g.to {
		return 0, 0, 0, false
	}
	if g.at > psec {
		return g.at, 0, s.value(g, g.at, 0), true
	}
	if s.ramp <= 0 {
		return 0, 0, 0, false
	}
	es := psec - g.at
	if es >= s.rampSec {
		return 0, 0, 0, false
	}
	e := es*int64(time.Second) + pns
	if e >= int64(s.ramp) {
		return 0, 0, 0, false
	}
	d := g.to - g.from
	if d < 0 {
		d = -d
	}
	k := mulDiv(uint64(d), uint64(e), uint64(s.ramp)) + 1 // steps taken at e
	if k >= uint64(d) {
		return 0, 0, 0, false
	}
	// Step k+1 is taken at the first e' with ⌊d·e'/R⌋ >= k: e' = ⌈k·R/d⌉.
	next := int64(mulDivCeil(k, uint64(s.ramp), uint64(d)))
	a := g.at + next/int64(time.Second)
	an := next % int64(time.Second)
	return a, an, s.value(g, a, an), true
}

// mulDiv returns ⌊a·b/c⌋ for a·b < c·2^64.
func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	q, _ := bits.Div64(hi, lo, c)
	return q
}

// mulDivCeil returns ⌈a·b/c⌉ for a·b < c·2^64.
func mulDivCeil(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	q, r := bits.Div64(hi, lo, c)
	if r != 0 {
		q++
	}
	return q
}

// find returns the index of the last seg that starts at or before sec.
func (c *chunk) find(sec int64) int {
	lo, hi := 0, len(c.segs)
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1)
		if c.segs[m].at <= sec {
			lo = m
		} else {
			hi = m
		}
	}
	return lo
}

// chunkAt returns the chunk whose instants hold Unix second sec (t's second).
func (s *Schedule) chunkAt(t time.Time, sec int64) *chunk {
	if c := s.last.Load(); c != nil && c.lo <= sec && sec < c.hi {
		return c
	}
	y, m, d := t.In(s.loc).Date()
	k := floorDiv(civilDay(y, m, d), 7)
	for {
		c := s.chunk(k)
		switch {
		case sec < c.lo:
			k--
		case sec >= c.hi:
			k++
		default:
			s.last.Store(c)
			return c
		}
	}
}

// chunk returns week k's chunk, from the cache or freshly computed.
func (s *Schedule) chunk(k int64) *chunk {
	slot := &s.slots[k&3]
	if c := slot.Load(); c != nil && c.k == k {
		return c
	}
	c := s.compute(k)
	slot.Store(c)
	return c
}

type interval struct {
	s, e  int64 // Unix seconds, s < e
	count int
}

// compute evaluates the count function over week k. It looks back far enough
// (8 days plus the ramp) that the ramp chain has settled before the week starts
// (guaranteed by checkRamp), so the result does not depend on anything before.
func (s *Schedule) compute(k int64) *chunk {
	day0 := 7 * k
	c := &chunk{k: k, lo: resolveWall(s.loc, day0, 0), hi: resolveWall(s.loc, day0+7, 0)}

	first := day0 - 9 - s.rampDays
	// From exact on, every window occurrence that covers an instant started on
	// day `first` or later, so the scheduled count is exact.
	exact := resolveWall(s.loc, first+1, 0)

	var ivs []interval
	for d := first; d < day0+7; d++ {
		if s.isHoliday(d) {
			continue
		}
		wd := weekdayOf(d)
		for _, w := range s.windows {
			if w.days&(1<<wd) == 0 {
				continue
			}
			st := resolveWall(s.loc, d, w.start)
			endDay := d
			if w.end <= w.start {
				endDay++
			}
			en := resolveWall(s.loc, endDay, w.end)
			if en > st && en > exact && st < c.hi {
				ivs = append(ivs, interval{st, en, w.count})
			}
		}
	}

	points := make([]int64, 0, 2*len(ivs)+1)
	points = append(points, exact)
	for _, iv := range ivs {
		if iv.s > exact && iv.s < c.hi {
			points = append(points, iv.s)
		}
		if iv.e > exact && iv.e < c.hi {
			points = append(points, iv.e)
		}
	}
	slices.Sort(points)

	// Walk the points in order, keeping the scheduled count and the effective
	// (ramped) one. The first point is a pseudo-boundary at which the count is
	// taken as settled; checkRamp guarantees a settled stretch before lo.
	segs := make([]seg, 0, 16)
	var cur seg
	for i, p := range points {
		if i > 0 && p == points[i-1] {
			continue
		}
		n := s.scheduled(ivs, p)
		if i == 0 {
			cur = seg{at: p, from: n, to: n}
			continue
		}
		if n == cur.to {
			continue
		}
		next := seg{at: p, from: s.value(cur, p-1, 999_999_999), to: n}
		if p > c.lo && len(segs) == 0 {
			segs = append(segs, cur) // the seg in effect at lo
		}
		if p > c.lo {
			segs = append(segs, next)
		}
		cur = next
	}
	if len(segs) == 0 {
		segs = append(segs, cur)
	}
	c.segs = segs
	return c
}

// scheduled returns the scheduled (un-ramped) count at instant p: the largest
// count of the windows holding at p, or the default outside all windows.
func (s *Schedule) scheduled(ivs []interval, p int64) int {
	n, in := s.def, false
	for _, iv := range ivs {
		if iv.s <= p && p < iv.e {
			if !in || iv.count > n {
				n, in = iv.count, true
			}
		}
	}
	return n
}

func (s *Schedule) isHoliday(d int64) bool {
	i := sort.Search(len(s.holidays), func(i int) bool { return s.holidays[i] >= d })
	return i < len(s.holidays) && s.holidays[i] == d
}

// holidayIn reports whether a holiday falls on a civil day in [from, to).
func (s *Schedule) holidayIn(from, to int64) bool {
	h, ok := s.nextHoliday(from)
	return ok && h < to
}

// nextHoliday returns the first holiday on or after civil day d.
func (s *Schedule) nextHoliday(d int64) (int64, bool) {
	i := sort.Search(len(s.holidays), func(i int) bool { return s.holidays[i] >= d })
	if i == len(s.holidays) {
		return 0, false
	}
	return s.holidays[i], true
}

// WindowAt returns the window whose count is scheduled at instant t: of the
// windows holding at t (DESIGN §8: a window started on a holiday does not hold),
// the one with the largest count, ties going to the first name in byte order.
// It ignores the ramp, so during a ramp it names the window being ramped to.
// ok is false outside all windows, where the default count applies.
//
// The autoscaler strategy names this window in its reason and `gputide
// schedule preview` in each change (issue 11).
func (s *Schedule) WindowAt(t time.Time) (name string, count int, ok bool) {
	sec := t.Unix()
	y, m, d := t.In(s.loc).Date()
	today := civilDay(y, m, d)
	// A window lasts under 24 wall-clock hours, and a daylight-saving shift moves
	// its instants by at most dstSlack, so only windows begun on the last two
	// local days (and today) can hold at t.
	for day := today - 2; day <= today; day++ {
		if s.isHoliday(day) {
			continue
		}
		wd := weekdayOf(day)
		for _, w := range s.windows {
			if w.days&(1<<wd) == 0 {
				continue
			}
			endDay := day
			if w.end <= w.start {
				endDay++
			}
			st, en := resolveWall(s.loc, day, w.start), resolveWall(s.loc, endDay, w.end)
			if sec < st || sec >= en {
				continue
			}
			if !ok || w.count > count || (w.count == count && w.name < name) {
				name, count, ok = w.name, w.count, true
			}
		}
	}
	return name, count, ok
}

// Change is one step of Changes: from At on the count is Count, under the
// window Window ("" outside all windows).
type Change struct {
	At     time.Time // in the schedule's location
	Count  int
	Window string
}

// Changes is Preview with the window in force at each step named (see
// WindowAt): the count at `from`, then every change in (from, from+d), each
// ramp step one change. `gputide schedule preview` prints it (issue 11 item 2).
func (s *Schedule) Changes(from time.Time, d time.Duration) []Change {
	steps := s.Preview(from, d)
	out := make([]Change, len(steps))
	for i, st := range steps {
		name, _, _ := s.WindowAt(st.At)
		out[i] = Change{At: st.At, Count: st.Count, Window: name}
	}
	return out
}
