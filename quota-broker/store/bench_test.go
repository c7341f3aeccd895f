package store

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// benchBooking measures the guarded booking round trip (one consistent
// read of guard, tree and reservations; the L10 check; the transaction
// with the guard CAS) with 100 bookings in the store, and reports the
// median and p99 of the bookings (each booking is cancelled again, out of
// the timing).
func benchBooking(b *testing.B, s *KV) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := s.Guarded(ctx, func(*Guarded) ([]Change, error) { return []Change{PutTree(treeRec())}, nil }); err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		bk := booking(fmt.Sprint("base-", i), 1, 7)
		bk.Start = bk.Start.Add(time.Duration(i) * time.Hour)
		bk.End = bk.Start.Add(2 * time.Hour)
		if _, err := s.Guarded(ctx, bookFn(bk)); err != nil {
			b.Fatal(err)
		}
	}
	var took []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		bk := booking(fmt.Sprint("r-", i), 8, 8)
		start := time.Now()
		if _, err := s.Guarded(ctx, bookFn(bk)); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		if _, err := s.Guarded(ctx, cancelFn(bk.ID, time.Now())); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "median-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkGuardedBookingConsul: the CAS booking round trip on loopback.
func BenchmarkGuardedBookingConsul(b *testing.B) {
	benchBooking(b, newConsulStore(b, consulAddr(b)))
}

// BenchmarkGuardedBookingMemory: the same on the memory store.
func BenchmarkGuardedBookingMemory(b *testing.B) { benchBooking(b, NewMemory()) }
