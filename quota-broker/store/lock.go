package store

import (
	"context"
	"errors"
	"sync"
	"time"
)

// The leader lock's session (DESIGN L12).
const (
	// SessionTTL: a holder that stops renewing loses the lock once the
	// backend invalidates its session (Consul: within 2 x TTL).
	SessionTTL = 10 * time.Second
	// LockDelay: after a session is invalidated, nobody may take its locks
	// for this long (the old holder's last acts drain meanwhile).
	LockDelay = time.Second
	// lockRetry is how often a waiter retries while a lock-delay runs: a
	// fraction of LockDelay, so a takeover follows the delay closely.
	lockRetry = 200 * time.Millisecond
)

// Lock is the held leader lock. Its Lost channel closes when the lock is
// lost (session invalidated, key taken, renewal failing for SessionTTL) or
// released; IsLeader is the check before each act (L12). Writes fenced with
// it (PutIntent, PutJob, ...) also check the lock inside their transaction.
type Lock struct {
	kv      *KV
	session string
	holder  string

	lost     chan struct{}
	lostOnce sync.Once
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// Lock implements Store: it creates a session (TTL SessionTTL, lock-delay
// LockDelay, behavior release) and blocks until it acquires KeyLeader with
// it, or ctx ends (the session is then destroyed). holder is written as the
// key's value (who leads, for reads).
func (s *KV) Lock(ctx context.Context, holder string) (*Lock, error) {
	id, err := s.b.createSession(ctx, "gputide-broker "+holder, SessionTTL, LockDelay)
	if err != nil {
		return nil, err
	}
	l := &Lock{kv: s, session: id, holder: holder, lost: make(chan struct{}), stop: make(chan struct{})}
	l.wg.Add(1)
	go l.renew()
	if err := l.acquire(ctx); err != nil {
		l.halt()
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.b.destroySession(dctx, id)
		return nil, err
	}
	l.wg.Add(1)
	go l.monitor()
	return l, nil
}

// acquire loops until the key is ours: it blocks on the key while another
// session holds it, and polls every lockRetry while a lock-delay runs.
func (l *Lock) acquire(ctx context.Context) error {
	backoff := lockRetry
	for {
		ok, err := l.kv.b.acquire(ctx, KeyLeader, []byte(l.holder), l.session)
		if err == nil && ok {
			return nil
		}
		if ctx.Err() != nil {
			return newErr("lock", KeyLeader, ErrUnavailable, ctx.Err())
		}
		if l.closed() {
			return newErr("lock", KeyLeader, ErrNotLeader, errors.New("the session ended while waiting"))
		}
		if err != nil {
			if !sleep(ctx, backoff) {
				return newErr("lock", KeyLeader, ErrUnavailable, ctx.Err())
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = lockRetry
		e, index, err := l.kv.b.get(ctx, KeyLeader, 0)
		if err == nil && e != nil && e.Session != "" && e.Session != l.session {
			// Held by another: wait for the key to change.
			_, _, _ = l.kv.b.get(ctx, KeyLeader, index)
			continue
		}
		// Free but refused: a lock-delay is running.
		if !sleep(ctx, lockRetry) {
			return newErr("lock", KeyLeader, ErrUnavailable, ctx.Err())
		}
	}
}

// renew keeps the session alive every SessionTTL/3; the lock is lost when
// the session is gone, or when no renewal succeeded for SessionTTL (the
// backend may have invalidated it: L12 never acts on unsure leadership).
func (l *Lock) renew() {
	defer l.wg.Done()
	last := time.Now()
	t := time.NewTicker(SessionTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), SessionTTL/3)
		err := l.kv.b.renewSession(ctx, l.session)
		cancel()
		switch {
		case err == nil:
			last = time.Now()
		case errors.Is(err, ErrNotFound) || time.Since(last) >= SessionTTL:
			l.markLost()
			return
		}
	}
}

// monitor watches the key with blocking reads and marks the lock lost when
// the key is no longer held by this session, or is unreadable for
// SessionTTL.
func (l *Lock) monitor() {
	defer l.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-l.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var index uint64
	last := time.Now()
	for {
		e, next, err := l.kv.b.get(ctx, KeyLeader, index)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if time.Since(last) >= SessionTTL {
				l.markLost()
				return
			}
			sleep(ctx, lockRetry)
			continue
		}
		last = time.Now()
		if e == nil || e.Session != l.session {
			l.markLost()
			return
		}
		index = next
	}
}

func (l *Lock) markLost() { l.lostOnce.Do(func() { close(l.lost) }) }

func (l *Lock) closed() bool {
	select {
	case <-l.lost:
		return true
	default:
		return false
	}
}

func (l *Lock) halt() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// Lost is closed when the lock is lost or released.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// IsLeader reports whether the lock is still held, as far as this client
// knows (the check before each act; fenced writes check again in the
// backend).
func (l *Lock) IsLeader() bool { return !l.closed() }

// Session is the lock's session ID.
func (l *Lock) Session() string { return l.session }

// Verify reads the key consistently and returns nil only if this session
// holds it (ErrNotLeader otherwise, and the lock is marked lost).
func (l *Lock) Verify(ctx context.Context) error {
	if l.closed() {
		return newErr("verify", KeyLeader, ErrNotLeader, nil)
	}
	e, _, err := l.kv.b.get(ctx, KeyLeader, 0)
	if err != nil {
		return err
	}
	if e == nil || e.Session != l.session {
		l.markLost()
		return newErr("verify", KeyLeader, ErrNotLeader, nil)
	}
	return nil
}

// Release gives the lock up gracefully: it releases the key (no
// lock-delay, so a standby takes over at once) and destroys the session.
func (l *Lock) Release(ctx context.Context) error {
	l.markLost()
	l.halt()
	_, err := l.kv.b.release(ctx, KeyLeader, l.session)
	if derr := l.kv.b.destroySession(ctx, l.session); err == nil {
		err = derr
	}
	return err
}

// Abandon stops renewing and watching without releasing anything, as a
// crashed holder would (tests: the session then expires on its own).
func (l *Lock) Abandon() {
	l.markLost()
	l.halt()
}
