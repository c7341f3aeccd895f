package scalegen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gputide/gputide/quota-broker/reservation"
	"github.com/gputide/gputide/quota-broker/store"
)

// Filled counts what Fill wrote.
type Filled struct {
	Records, Bookings, Preemptions, EndedBookings int
}

// Fill writes the broker's store for the cluster through the store's own
// API (so keys and values have their real shape): a job record per running
// job (first_seen = queued_at = its submission, admitted_at = its start:
// every running job was admitted by the broker), Size.Bookings future
// bookings (8 GPUs of one team each, one day long, spread over the next 8
// weeks from 2 h ahead: outside the drain horizon, and fitting every
// nominal at every instant, DESIGN L10) written by guarded transactions,
// and Size.History history entries: one ended booking per booking, the
// rest preemptions, all within the default 90-day retention. Writes go
// through workers goroutines at once (at least 1).
func (c *Cluster) Fill(ctx context.Context, st store.Store, workers int) (Filled, error) {
	var f Filled
	workers = max(workers, 1)
	now := c.Now
	bookings := make([]reservation.Booking, c.Size.Bookings())
	span := 8*7*24*time.Hour - 2*time.Hour - 24*time.Hour
	for i := range bookings {
		team := i % Teams
		start := now.Add(2*time.Hour + time.Duration(int64(span)*int64(i)/int64(max(len(bookings), 1)))).Truncate(time.Minute).UTC()
		bookings[i] = reservation.Booking{ID: fmt.Sprintf("r-%05d", i), Namespace: Team(team), Node: QuotaNode(team),
			GPUs: 8, AllocGPUs: 8, Start: start, End: start.Add(24 * time.Hour)}
	}
	// Bookings and their ended twins, in guarded transactions.
	const batch = store.MaxOps - 2
	for lo := 0; lo < len(bookings); lo += batch {
		hi := min(lo+batch, len(bookings))
		changes := make([]store.Change, 0, hi-lo)
		for _, b := range bookings[lo:hi] {
			changes = append(changes, store.PutReservation(b))
		}
		if _, err := st.Guarded(ctx, func(*store.Guarded) ([]store.Change, error) { return changes, nil }); err != nil {
			return f, fmt.Errorf("scalegen: bookings: %w", err)
		}
		f.Bookings += hi - lo
	}
	ended := min(len(bookings), c.Size.History())
	for lo := 0; lo < ended; lo += batch {
		hi := min(lo+batch, ended)
		changes := make([]store.Change, 0, hi-lo)
		for i := lo; i < hi; i++ {
			b := bookings[i]
			b.ID = fmt.Sprintf("h-%05d", i)
			b.Start = now.Add(-time.Duration(i+2) * 24 * time.Hour).UTC().Truncate(time.Minute)
			b.End = b.Start.Add(24 * time.Hour)
			changes = append(changes, store.PutReservationHistory(store.ReservationHistory{Booking: b, EndedAt: b.End, Outcome: "ended"}))
		}
		if _, err := st.Guarded(ctx, func(*store.Guarded) ([]store.Change, error) { return changes, nil }); err != nil {
			return f, fmt.Errorf("scalegen: ended bookings: %w", err)
		}
		f.EndedBookings += hi - lo
	}
	// Job records and preemptions, one write each as the leader makes them.
	preemptions := c.Size.History() - ended
	total := len(c.jobs) + preemptions
	next := make(chan int)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if errs[w] != nil {
					continue
				}
				errs[w] = c.fillOne(ctx, st, i)
			}
		}()
	}
	for i := range total {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return f, err
	}
	f.Records, f.Preemptions = len(c.jobs), preemptions
	return f, nil
}

// fillOne writes item i of Fill's writes: job record i, then preemption
// i - len(jobs).
func (c *Cluster) fillOne(ctx context.Context, st store.Store, i int) error {
	if i < len(c.jobs) {
		j := c.jobs[i]
		rec := store.JobRecord{FirstSeen: j.submit, QueuedAt: j.submit, AdmittedAt: j.started, JobModifyIndex: j.index}
		if err := st.PutJob(ctx, nil, store.JobID{Namespace: j.ns, Job: j.id}, rec); err != nil {
			return fmt.Errorf("scalegen: job record %s/%s: %w", j.ns, j.id, err)
		}
		return nil
	}
	k := i - len(c.jobs)
	j := c.jobs[k%len(c.jobs)]
	p := store.Preemption{At: c.Now.Add(-time.Duration(k+1) * time.Minute).UTC(), Alloc: fmt.Sprintf("%08x-0000-4000-8000-00000000cccc", k),
		Namespace: j.ns, Job: j.id, GPUs: j.gpus, For: Team((k+1)%Teams) + "/claimant/worker", Rule: "L5.1",
		Node: NodeID(k % len(c.nodes)), Reason: "idle allocation reclaimed for an entitled claimant"}
	if err := st.AddPreemption(ctx, nil, p); err != nil {
		return fmt.Errorf("scalegen: preemption %d: %w", k, err)
	}
	return nil
}
