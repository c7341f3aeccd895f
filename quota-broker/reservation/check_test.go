package reservation

import (
	"errors"
	"fmt"
	"testing"
	"time"
	_ "time/tzdata" // the DST tests need zone data on machines without it

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/quota"
)

// testTree is the reference scenario's shape: Quota1 (96) with Quota1.1
// (48: workspace-b, and Quota1.1.1 16: workspace-c) and Quota1.2 (48:
// workspace-a).
func testTree(t testing.TB) *Tree {
	t.Helper()
	root := &quota.Node{Name: "Quota1", GPUs: quota.Plain(96), Children: []*quota.Node{
		{Name: "Quota1.1", GPUs: quota.Plain(48), Namespaces: []string{"workspace-b"}, Children: []*quota.Node{
			{Name: "Quota1.1.1", GPUs: quota.Plain(16), Namespaces: []string{"workspace-c"}},
		}},
		{Name: "Quota1.2", GPUs: quota.Plain(48), Namespaces: []string{"workspace-a"}},
	}}
	tr, err := NewTree(root)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

var tokyo = time.FixedZone("JST", 9*3600)

func at(day, hour int) time.Time { return time.Date(2026, 12, day, hour, 0, 0, 0, tokyo) }

func bk(id, node string, gpus int, start, end time.Time) Booking {
	return Booking{ID: id, Node: node, Namespace: "ns-" + id, GPUs: gpus, AllocGPUs: DefaultAllocGPUs(gpus), Start: start, End: end}
}

// refusal is the comparable part of a refusal.
type refusal struct {
	Node                   string
	At, Earliest           string
	Booked, Nominal, Asked int
	Message                string
}

func asRefusal(t *testing.T, err error) refusal {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrRefused) {
		t.Fatalf("want a refusal, got %v", err)
	}
	r := refusal{Node: e.Node, At: FormatInstant(e.At), Booked: e.Booked, Nominal: e.Nominal, Asked: e.Asked, Message: e.Error()}
	if !e.Earliest.IsZero() {
		r.Earliest = FormatInstant(e.Earliest)
	}
	return r
}

func TestCheckAcceptsFittingOverlaps(t *testing.T) {
	tr := testTree(t)
	existing := []Booking{
		bk("a", "Quota1.1", 16, at(7, 8), at(14, 8)),
		bk("b", "Quota1.1.1", 16, at(8, 9), at(9, 9)), // in Quota1.1's subtree
		bk("c", "Quota1.2", 48, at(1, 0), at(30, 0)),  // sibling: counts only at the root
	}
	// 16 + 16 + 16 = 48 at Quota1.1, 96 at the root: fits exactly.
	if err := tr.Check(existing, bk("new", "Quota1.1", 16, at(8, 0), at(10, 0)), at(30, 0)); err != nil {
		t.Fatalf("a booking that fits exactly was refused: %v", err)
	}
	// Back to back: [start, end) windows do not overlap at the shared instant.
	full := []Booking{bk("x", "Quota1.1", 48, at(7, 8), at(8, 8))}
	if err := tr.Check(full, bk("new", "Quota1.1", 48, at(8, 8), at(9, 8)), at(30, 0)); err != nil {
		t.Fatalf("a booking starting at another's end was refused: %v", err)
	}
	if err := tr.Check(full, bk("new", "Quota1.1", 48, at(6, 8), at(7, 8)), at(30, 0)); err != nil {
		t.Fatalf("a booking ending at another's start was refused: %v", err)
	}
	// Re-checking a booking against a set that contains it leaves it out.
	if err := tr.Check(full, full[0], at(30, 0)); err != nil {
		t.Fatalf("re-check of an existing booking: %v", err)
	}
}

func TestCheckRefusesExcessWithInstantAndNumbers(t *testing.T) {
	tr := testTree(t)
	existing := []Booking{
		bk("a", "Quota1.1", 24, at(7, 8), at(14, 8)),
		bk("b", "Quota1.1.1", 16, at(8, 9), at(9, 9)),
		bk("c", "Quota1.1", 8, at(10, 0), at(11, 0)),
	}
	// 24 from the 7th, 40 from the 8th 09:00 to the 9th 09:00: 16 more do
	// not fit from the 8th 09:00; they fit from the 9th 09:00 (24 + 8 + 16).
	err := tr.Check(existing, bk("new", "Quota1.1", 16, at(8, 0), at(10, 0)), at(30, 0))
	got := asRefusal(t, err)
	want := refusal{
		Node: "Quota1.1", At: "2026-12-08T09:00+09:00", Booked: 40, Nominal: 48, Asked: 16,
		Earliest: "2026-12-09T09:00+09:00",
		Message:  "Quota1.1 at 2026-12-08T09:00+09:00: 40 of 48 GPUs booked, 16 asked; earliest start that fits: 2026-12-09T09:00+09:00",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("refusal (-want +got):\n%s", d)
	}

	// At the root: the sibling's 48 and Quota1.1's 40 leave 8 of 96.
	existing = append(existing, bk("d", "Quota1.2", 48, at(1, 0), at(20, 0)))
	got = asRefusal(t, tr.Check(existing, bk("new", "Quota1.2", 1, at(8, 0), at(9, 0)), at(30, 0)))
	want = refusal{Node: "Quota1.2", At: "2026-12-08T00:00+09:00", Booked: 48, Nominal: 48, Asked: 1,
		Earliest: "2026-12-20T00:00+09:00",
		Message:  "Quota1.2 at 2026-12-08T00:00+09:00: 48 of 48 GPUs booked, 1 asked; earliest start that fits: 2026-12-20T00:00+09:00"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("refusal (-want +got):\n%s", d)
	}

	// Deepest node first: Quota1.1.1 (16) is full before Quota1.1 is.
	got = asRefusal(t, tr.Check(existing, bk("new", "Quota1.1.1", 8, at(8, 10), at(8, 12)), at(30, 0)))
	if got.Node != "Quota1.1.1" || got.Booked != 16 || got.Nominal != 16 || got.Earliest != "2026-12-09T09:00+09:00" {
		t.Fatalf("refusal at the deepest node: %+v", got)
	}
}

func TestCheckNoStartFits(t *testing.T) {
	tr := testTree(t)
	existing := []Booking{bk("a", "Quota1.1", 48, at(1, 0), at(31, 0))}
	got := asRefusal(t, tr.Check(existing, bk("new", "Quota1.1", 1, at(8, 0), at(9, 0)), at(20, 0)))
	if got.Earliest != "" || got.Message != "Quota1.1 at 2026-12-08T00:00+09:00: 48 of 48 GPUs booked, 1 asked; no start up to 2026-12-20T00:00+09:00 fits" {
		t.Fatalf("refusal: %+v", got)
	}
	// More than the node's nominal never fits, even with nothing booked.
	got = asRefusal(t, tr.Check(nil, bk("new", "Quota1.1", 49, at(8, 0), at(9, 0)), at(20, 0)))
	if got.Booked != 0 || got.Earliest != "" {
		t.Fatalf("refusal of 49 > 48: %+v", got)
	}
}

func TestEarliestStart(t *testing.T) {
	tr := testTree(t)
	// Quota1.1 (48): 32 over [8th, 10th), 40 over [12th, 13th), 48 over
	// [13th, 14th). A 2-day booking of 16 fits from the 10th to the 12th
	// (a gap of exactly 2 days), so the earliest start from the 8th is the 10th.
	existing := []Booking{
		bk("a", "Quota1.1", 32, at(8, 0), at(10, 0)),
		bk("b", "Quota1.1", 40, at(12, 0), at(13, 0)),
		bk("c", "Quota1.1", 48, at(13, 0), at(14, 0)),
	}
	cases := []struct {
		name      string
		gpus      int
		start     time.Time
		dur       time.Duration
		latest    time.Time
		want      string
		wantFound bool
	}{
		{"fits at once", 16, at(8, 0), 48 * time.Hour, at(30, 0), "2026-12-08T00:00+09:00", true},
		{"gap of exactly the duration", 17, at(8, 0), 48 * time.Hour, at(30, 0), "2026-12-10T00:00+09:00", true},
		{"gap too short", 17, at(8, 0), 49 * time.Hour, at(30, 0), "2026-12-14T00:00+09:00", true},
		{"after the full day", 1, at(13, 6), time.Hour, at(30, 0), "2026-12-14T00:00+09:00", true},
		{"latest too early", 1, at(13, 6), time.Hour, at(13, 23), "", false},
		{"latest exactly at the fit", 1, at(13, 6), time.Hour, at(14, 0), "2026-12-14T00:00+09:00", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := bk("new", "Quota1.1", c.gpus, c.start, c.start.Add(c.dur))
			s, ok, err := tr.Earliest(existing, b, c.latest)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if ok {
				got = FormatInstant(s)
			}
			if ok != c.wantFound || got != c.want {
				t.Fatalf("earliest = %q (found %v), want %q (found %v)", got, ok, c.want, c.wantFound)
			}
			// Whatever Earliest answers must pass Check, and one second
			// earlier (when later than the asked start) must not.
			if ok {
				moved := bk("new", "Quota1.1", c.gpus, s, s.Add(c.dur))
				if err := tr.Check(existing, moved, c.latest); err != nil {
					t.Fatalf("the earliest start is refused: %v", err)
				}
				if s.After(c.start) {
					early := bk("new", "Quota1.1", c.gpus, s.Add(-time.Second), s.Add(c.dur-time.Second))
					if tr.Check(existing, early, c.latest) == nil {
						t.Fatalf("a start 1 s before the earliest fits too")
					}
				}
			}
		})
	}
}

// TestEarliestMatchesBruteForce compares the sweep with a minute-by-minute
// search on small random calendars.
func TestEarliestMatchesBruteForce(t *testing.T) {
	tr := testTree(t)
	nodes := []string{"Quota1.1", "Quota1.1.1", "Quota1.2"}
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	seed := uint64(7)
	rnd := func(n int) int {
		seed = seed*6364136223846793005 + 1442695040888963407
		return int(seed>>33) % n
	}
	for round := 0; round < 200; round++ {
		var existing []Booking
		for i := 0; i < 6; i++ {
			s := base.Add(time.Duration(rnd(48)) * 10 * time.Minute)
			existing = append(existing, bk(fmt.Sprint("e", i), nodes[rnd(3)], 1+rnd(24), s, s.Add(time.Duration(1+rnd(12))*10*time.Minute)))
		}
		b := bk("new", nodes[rnd(3)], 1+rnd(24), base, base.Add(time.Duration(1+rnd(6))*10*time.Minute))
		latest := base.Add(10 * time.Hour)
		s, ok, err := tr.Earliest(existing, b, latest)
		if err != nil {
			t.Fatal(err)
		}
		var want time.Time
		found := false
		for m := base; !m.After(latest); m = m.Add(10 * time.Minute) {
			if tr.Check(existing, bk("new", b.Node, b.GPUs, m, m.Add(b.Duration())), latest) == nil {
				want, found = m, true
				break
			}
		}
		if ok != found || !s.Equal(want) {
			t.Fatalf("round %d: earliest %v (%v), brute force %v (%v)\nbookings %+v\nnew %+v", round, s, ok, want, found, existing, b)
		}
	}
}

// TestDSTInstantsKept books across the end of daylight saving time in New
// York (2026-11-01 02:00 EDT -> 01:00 EST): durations are absolute, and a
// refusal prints its instant in the booking's zone with the offset of that
// instant.
func TestDSTInstantsKept(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	tr := testTree(t)
	start := time.Date(2026, 10, 31, 12, 0, 0, 0, ny) // EDT, -04:00
	now := start.Add(-24 * time.Hour)
	b, err := Prepare(tr, Booking{ID: "dst", Namespace: "workspace-b", GPUs: 48, Start: start, End: start.Add(48 * time.Hour)}, now, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	// 48 hours later on the wall clock is 11:00, not 12:00: the hour of
	// the DST change is inside the window.
	if got := FormatInstant(b.End); got != "2026-11-02T11:00-05:00" {
		t.Fatalf("end = %s", got)
	}
	// A booking made in UTC that starts at the EST end instant fits; one
	// an hour earlier overlaps and is refused at its own instant, printed
	// in its own zone.
	endUTC := b.End.UTC()
	if err := tr.Check([]Booking{b}, bk("utc", "Quota1.1", 8, endUTC, endUTC.Add(time.Hour)), now.Add(DefaultMaxAhead)); err != nil {
		t.Fatalf("booking at the end instant: %v", err)
	}
	nyEarly := time.Date(2026, 11, 2, 10, 0, 0, 0, ny)
	got := asRefusal(t, tr.Check([]Booking{b}, bk("early", "Quota1.1", 8, nyEarly, nyEarly.Add(2*time.Hour)), now.Add(DefaultMaxAhead)))
	want := refusal{Node: "Quota1.1", At: "2026-11-02T10:00-05:00", Booked: 48, Nominal: 48, Asked: 8,
		Earliest: "2026-11-02T11:00-05:00",
		Message:  "Quota1.1 at 2026-11-02T10:00-05:00: 48 of 48 GPUs booked, 8 asked; earliest start that fits: 2026-11-02T11:00-05:00"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("refusal (-want +got):\n%s", d)
	}
	// A booking ending inside the repeated hour (01:00-02:00 happens twice):
	// the instants, not the wall clock, decide. 01:30 EDT is an hour before
	// 01:30 EST.
	edt := time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC).In(ny) // 01:30 EDT
	est := edt.Add(time.Hour)                                   // 01:30 EST
	if FormatInstant(edt) != "2026-11-01T01:30-04:00" || FormatInstant(est) != "2026-11-01T01:30-05:00" {
		t.Fatalf("zone data: %s %s", FormatInstant(edt), FormatInstant(est))
	}
	first := bk("first", "Quota1.2", 48, edt.Add(-time.Hour), edt)
	if err := tr.Check([]Booking{first}, bk("second", "Quota1.2", 48, edt, est), now.Add(DefaultMaxAhead)); err != nil {
		t.Fatalf("a booking from 01:30 EDT right after one ending then: %v", err)
	}
}

func TestFits(t *testing.T) {
	tr := testTree(t)
	ok := []Booking{
		bk("a", "Quota1.1", 32, at(7, 0), at(9, 0)),
		bk("b", "Quota1.1.1", 16, at(8, 0), at(10, 0)),
		bk("c", "Quota1.2", 48, at(1, 0), at(20, 0)),
	}
	if err := tr.Fits(ok); err != nil {
		t.Fatalf("fitting set refused: %v", err)
	}
	// The same bookings under a move of 16 GPUs from Quota1.1 to Quota1.2:
	// Quota1.1 (32) holds 48 on the 8th.
	moved := &quota.Node{Name: "Quota1", GPUs: quota.Plain(96), Children: []*quota.Node{
		{Name: "Quota1.1", GPUs: quota.Plain(32), Namespaces: []string{"workspace-b"}, Children: []*quota.Node{
			{Name: "Quota1.1.1", GPUs: quota.Plain(16), Namespaces: []string{"workspace-c"}},
		}},
		{Name: "Quota1.2", GPUs: quota.Plain(64), Namespaces: []string{"workspace-a"}},
	}}
	mt, err := NewTree(moved)
	if err != nil {
		t.Fatal(err)
	}
	got := asRefusal(t, mt.Fits(ok))
	want := refusal{Node: "Quota1.1", At: "2026-12-08T00:00+09:00", Booked: 48, Nominal: 32,
		Message: "Quota1.1 at 2026-12-08T00:00+09:00: 48 of 32 GPUs booked"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("refusal (-want +got):\n%s", d)
	}
	var e *Error
	if err := tr.Fits([]Booking{bk("z", "Nowhere", 1, at(1, 0), at(2, 0))}); !errors.As(err, &e) || e.Kind != ErrInvalid || e.Field != "node" {
		t.Fatalf("unknown node: %v", err)
	}
}
