package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/reservation"
)

// connCounter is a dialer that counts the connections open at once.
type connCounter struct {
	mu               sync.Mutex
	open, max, total int
}

func (c *connCounter) dial(ctx context.Context, network, addr string, own func(context.Context, string, string) (net.Conn, error)) (net.Conn, error) {
	conn, err := own(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.open++
	c.total++
	c.max = max(c.max, c.open)
	c.mu.Unlock()
	return &countedConn{Conn: conn, c: c}, nil
}

func (c *connCounter) stats() (open, maxOpen, total int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.max, c.total
}

type countedConn struct {
	net.Conn
	c    *connCounter
	once sync.Once
}

func (cc *countedConn) Close() error {
	cc.once.Do(func() { cc.c.mu.Lock(); cc.c.open--; cc.c.mu.Unlock() })
	return cc.Conn.Close()
}

// 200 concurrent guarded writes (180 bookings and 20 quota moves) on one
// broker's Consul store, while it holds the leader lock and checks it
// every few milliseconds (issue 16): every write succeeds (no 503 from
// Consul's 429, no guard conflict: the write queue runs them one at a
// time), the lock check never fails nor waits on the callers, and the
// connections to Consul stay within the three transports' bounds.
func TestConsul200ConcurrentWritesBoundedConnections(t *testing.T) {
	addr := consulAddr(t)
	var cc connCounter
	s, err := newConsul(ConsulConfig{Address: addr, Prefix: uniquePrefix(t)}, cc.dial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx := ctxT(t, 120*time.Second)
	r := fire200(ctx, t, s, &cc)
	t.Logf("%d writes in %s; connections to Consul: at most %d open at once, %d dialed; %d lock checks, slowest %s",
		r.n, r.elapsed.Round(time.Millisecond), r.maxOpen, r.total, r.verifies, r.slowest.Round(time.Millisecond))
	if len(r.failed) > 0 {
		t.Errorf("failed writes by kind: %v", r.failed)
	}
	if r.verifyFails > 0 {
		t.Errorf("%d of %d lock checks failed, the first: %v", r.verifyFails, r.verifies, r.firstFail)
	}
	if bound := ConsulMaxConns + ConsulWatchConns + ConsulLockConns; r.maxOpen > bound {
		t.Errorf("%d connections to Consul open at once, more than %d", r.maxOpen, bound)
	}
	const n = 200
	st, err := s.ReadGuarded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(st.Reservations), n-n/10; got != want {
		t.Errorf("%d bookings stored, want %d", got, want)
	}
	if got := st.Tree.Root.Find("Quota1.1").GPUs.Of(quota.ImplicitFlavor); got != 256+n/10 {
		t.Errorf("Quota1.1 has %d GPUs after %d moves of 1, want %d", got, n/10, 256+n/10)
	}
	tr, _ := reservation.NewTree(st.Tree.Root)
	if err := tr.Fits(st.Reservations); err != nil {
		t.Errorf("over nominal: %v", err)
	}
}

// burst is what fire200 saw.
type burst struct {
	n                     int
	elapsed, slowest      time.Duration
	failed                map[string]int
	verifies, verifyFails int
	firstFail             any
	maxOpen, total        int
}

// fire200 stores a tree of 512 GPUs, takes the lock, and fires 180
// bookings and 20 quota moves at once while verifying the lock every 5 ms.
func fire200(ctx context.Context, t *testing.T, s *KV, cc *connCounter) burst {
	t.Helper()
	putTree(ctx, t, s, TreeRecord{
		Root: &quota.Node{Name: "Quota1", GPUs: quota.Plain(512), Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: quota.Plain(256), Namespaces: []string{"workspace-b"}},
			{Name: "Quota1.2", GPUs: quota.Plain(256), Namespaces: []string{"workspace-a"}},
		}},
		Settings: quota.DefaultSettings(), ChangedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
	})
	lock, err := s.Lock(ctx, "leader")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Release(context.Background()) })

	// The leader's check before each act, every 5 ms, with the agent's
	// 5 s bound (storeTimeout): before the bounded clients it failed with
	// Consul's 429, not by time.
	stop := make(chan struct{})
	var verifies, verifyFails atomic.Int32
	var slowest atomic.Int64
	var firstFail atomic.Value
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			start := time.Now()
			err := lock.Verify(vctx)
			cancel()
			verifies.Add(1)
			if d := time.Since(start); int64(d) > slowest.Load() {
				slowest.Store(int64(d))
			}
			if err != nil {
				verifyFails.Add(1)
				firstFail.CompareAndSwap(nil, err.Error())
			}
		}
	}()

	const n = 200
	errs := make([]error, n)
	var wg sync.WaitGroup
	release := make(chan struct{})
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-release
			fn := bookFn(booking(fmt.Sprintf("r-%03d", i), 1, 7))
			if i%10 == 9 {
				fn = moveFn("Quota1.2", "Quota1.1", 1)
			}
			_, errs[i] = s.Guarded(ctx, fn)
		}()
	}
	close(release)
	wg.Wait()
	elapsed := time.Since(start)
	time.Sleep(50 * time.Millisecond) // a few more lock checks after the burst
	close(stop)
	<-done

	failed := map[string]int{}
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, ErrBusy):
			failed["busy"]++
		case errors.Is(err, ErrConflict):
			failed["conflict"]++
		case errors.Is(err, ErrUnavailable):
			failed["unavailable"]++
		default:
			failed[err.Error()]++
		}
	}
	_, maxOpen, total := cc.stats()
	return burst{n: n, elapsed: elapsed, slowest: time.Duration(slowest.Load()), failed: failed, verifies: int(verifies.Load()),
		verifyFails: int(verifyFails.Load()), firstFail: firstFail.Load(), maxOpen: maxOpen, total: total}
}

// The write queue answers ErrBusy, nothing written, when MaxQueuedWrites
// are waiting (at once) or a write waits WriteQueueWait for its turn; a
// write whose context ends while waiting is ErrUnavailable.
func TestWriteQueueFullAndWaitBound(t *testing.T) {
	s := NewMemory()
	ctx := ctxT(t, 10*time.Second)
	putTree(ctx, t, s, treeRec())
	s.writes.max, s.writes.wait = 2, 200*time.Millisecond
	base, _ := s.ReadGuarded(ctx)

	holding := make(chan struct{})
	letGo := make(chan struct{})
	go func() {
		_, _ = s.Guarded(ctx, func(*Guarded) ([]Change, error) {
			close(holding)
			<-letGo
			return nil, errors.New("nothing to write")
		})
	}()
	<-holding
	// Two wait (the queue's bound); the third is refused at once.
	waitErrs := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := s.Guarded(ctx, bookFn(booking(fmt.Sprint("w-", i), 1, 7)))
			waitErrs <- err
		}()
	}
	for s.writes.waiting.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	_, err := s.Guarded(ctx, bookFn(booking("third", 1, 7)))
	if !errors.Is(err, ErrBusy) || time.Since(start) > 50*time.Millisecond {
		t.Errorf("third write: %v after %s, want ErrBusy at once", err, time.Since(start))
	}
	for range 2 {
		if err := <-waitErrs; !errors.Is(err, ErrBusy) || err.Error() != "store: queue: busy: too many writes are waiting for the store: no turn within 200ms" {
			t.Errorf("waiting write: %v, want ErrBusy after 200ms", err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Guarded(cctx, bookFn(booking("gone", 1, 7))); !errors.Is(err, ErrUnavailable) {
		t.Errorf("cancelled caller: %v, want ErrUnavailable", err)
	}
	close(letGo)
	if st, _ := s.ReadGuarded(ctx); st.Counter != base.Counter || len(st.Reservations) != 0 {
		t.Errorf("refused writes wrote: guard %d -> %d, %d bookings", base.Counter, st.Counter, len(st.Reservations))
	}
}
