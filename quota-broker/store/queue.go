package store

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// The write queue of one store client (issue 16): guarded writes (a
// booking, a cancel, a quota move or scale, a tree write, the leader's
// ended bookings) run one at a time in arrival order. Concurrent guarded
// writes of one broker would all read the same guard and all but one lose
// the CAS and retry (ErrConflict after Retries), and each would hold a
// Consul connection; queued, they never conflict with each other (only
// with another broker's) and use one connection.
const (
	// MaxQueuedWrites is the most guarded writes waiting at once; one more
	// is refused at once with ErrBusy (HTTP 429), nothing written.
	MaxQueuedWrites = 256
	// WriteQueueWait is the longest a guarded write waits for its turn;
	// then ErrBusy, nothing written.
	WriteQueueWait = 10 * time.Second
)

// ErrBusy: the write queue is full, or a write waited WriteQueueWait for
// its turn; nothing was written (HTTP 429 with Retry-After).
var ErrBusy = errors.New("busy: too many writes are waiting for the store")

// writeQueue is a FIFO semaphore of one slot with a bounded queue.
type writeQueue struct {
	slot    chan struct{} // holds a token while a write runs
	waiting atomic.Int32
	// max and wait are MaxQueuedWrites and WriteQueueWait (tests lower them).
	max  int32
	wait time.Duration
}

func newWriteQueue() *writeQueue {
	return &writeQueue{slot: make(chan struct{}, 1), max: MaxQueuedWrites, wait: WriteQueueWait}
}

// enter waits for the slot: nil once it is this write's turn (call the
// returned release after), ErrBusy when the queue is full or the wait runs
// out, ErrUnavailable when ctx ends first. Go's channel senders wake in
// arrival order, so writes run first come, first served.
func (q *writeQueue) enter(ctx context.Context) (release func(), err error) {
	if q == nil {
		return func() {}, nil
	}
	if n := q.waiting.Add(1); n > q.max {
		q.waiting.Add(-1)
		return nil, newErr("queue", "", ErrBusy, fmt.Errorf("%d guarded writes are waiting, at most %d", n-1, q.max))
	}
	defer q.waiting.Add(-1)
	t := time.NewTimer(q.wait)
	defer t.Stop()
	select {
	case q.slot <- struct{}{}:
		return func() { <-q.slot }, nil
	case <-t.C:
		return nil, newErr("queue", "", ErrBusy, fmt.Errorf("no turn within %s", q.wait))
	case <-ctx.Done():
		return nil, newErr("queue", "", ErrUnavailable, ctx.Err())
	}
}
