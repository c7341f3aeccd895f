package reservation

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// cpuTime is the process's user+system CPU time: on a shared machine the
// wall-clock ns/op includes waiting for a core, the CPU time per op does
// not (reported as cpu-ns/op).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs fn b.N times and reports the CPU time per op.
func loop(b *testing.B, fn func()) {
	b.ReportAllocs()
	c0, n := cpuTime(), 0
	for b.Loop() {
		fn()
		n++
	}
	b.ReportMetric(float64((cpuTime()-c0).Nanoseconds())/float64(n), "cpu-ns/op")
}

// benchTree is a 3-level tree: a root of 10,000 GPUs, 10 children of
// 1,000, each with 10 leaves of 100 (111 nodes, one namespace per leaf).
func benchTree(b *testing.B) *Tree {
	root := &quota.Node{Name: "root", GPUs: quota.Plain(10000)}
	for i := range 10 {
		c := &quota.Node{Name: fmt.Sprint("q", i), GPUs: quota.Plain(1000)}
		for j := range 10 {
			c.Children = append(c.Children, &quota.Node{Name: fmt.Sprintf("q%d.%d", i, j), GPUs: quota.Plain(100), Namespaces: []string{fmt.Sprintf("ns-%d-%d", i, j)}})
		}
		root.Children = append(root.Children, c)
	}
	t, err := NewTree(root)
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// benchBookings spreads n bookings over the 8 weeks after base on the 100
// leaves: 1 to 8 GPUs each, 1 hour to 3 days long, so no leaf is full.
func benchBookings(n int, base time.Time) []Booking {
	seed := uint64(1)
	rnd := func(m int) int {
		seed = seed*6364136223846793005 + 1442695040888963407
		return int(seed>>33) % m
	}
	out := make([]Booking, 0, n)
	for i := range n {
		s := base.Add(time.Duration(rnd(8*7*24)) * time.Hour)
		out = append(out, Booking{
			ID: fmt.Sprint("r-", i), Node: fmt.Sprintf("q%d.%d", rnd(10), rnd(10)), GPUs: 1 + rnd(8),
			Start: s, End: s.Add(time.Duration(1+rnd(72)) * time.Hour),
		})
	}
	return out
}

// BenchmarkCheck10000: the L10 check of a one-week booking of 8 GPUs
// against 10,000 existing bookings (target: under 1 ms).
func BenchmarkCheck10000(b *testing.B) {
	tr := benchTree(b)
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	existing := benchBookings(10000, base)
	nb := Booking{ID: "new", Node: "q3.4", GPUs: 8, Start: base.Add(21 * 24 * time.Hour), End: base.Add(28 * 24 * time.Hour)}
	if err := tr.Check(existing, nb, base.Add(DefaultMaxAhead)); err != nil {
		b.Fatal(err)
	}
	loop(b, func() { _ = tr.Check(existing, nb, base.Add(DefaultMaxAhead)) })
}

// BenchmarkEarliest8Weeks: the earliest start of a 1-week booking of 64
// GPUs (leaves of 100) searched over 8 weeks of 10,000 bookings, where the
// leaf is first free only late (target: under 10 ms). The refusal path of
// Check runs the same search.
func BenchmarkEarliest8Weeks(b *testing.B) {
	tr := benchTree(b)
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	existing := benchBookings(10000, base)
	// Fill q3.4 with 40 GPUs for 6 weeks so the search runs past them.
	existing = append(existing, Booking{ID: "fill", Node: "q3.4", GPUs: 40, Start: base, End: base.Add(6 * 7 * 24 * time.Hour)})
	nb := Booking{ID: "new", Node: "q3.4", GPUs: 64, Start: base.Add(time.Hour), End: base.Add(time.Hour + 7*24*time.Hour)}
	s, ok, err := tr.Earliest(existing, nb, base.Add(DefaultMaxAhead))
	if err != nil || !ok || s.Before(base.Add(6*7*24*time.Hour)) {
		b.Fatalf("earliest %v %v %v", s, ok, err)
	}
	loop(b, func() { _, _, _ = tr.Earliest(existing, nb, base.Add(DefaultMaxAhead)) })
}

// BenchmarkFits10000: the whole-calendar L10 check of a quota move or tree
// write over 10,000 bookings.
func BenchmarkFits10000(b *testing.B) {
	tr := benchTree(b)
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	existing := benchBookings(10000, base)
	if err := tr.Fits(existing); err != nil {
		b.Fatal(err)
	}
	loop(b, func() { _ = tr.Fits(existing) })
}
