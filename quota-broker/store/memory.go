package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"
)

// memoryWait bounds one blocking read of the memory backend, like
// Consul's wait time: the caller sees the same index and asks again.
const memoryWait = 5 * time.Minute

// memory is the in-memory backend: Consul's KV semantics (modify indexes,
// atomic transactions, blocking reads, sessions with TTL and lock-delay)
// in one process. Reservations and history live as long as the process
// (DESIGN §6).
type memory struct {
	mu       sync.Mutex
	index    uint64
	kv       map[Key]*entry
	deleted  map[Key]uint64 // the index at which a key was last deleted, for blocking reads
	changed  chan struct{}  // closed and replaced on every write
	sessions map[string]*memSession
	delayed  map[Key]time.Time // lock-delay: key -> until
	now      func() time.Time
}

type memSession struct {
	ttl, lockDelay time.Duration
	timer          *time.Timer
}

// NewMemory returns a store kept in this process. Its Peer is another
// client on the same data (two brokers in one test).
func NewMemory() *KV {
	m := &memory{
		index: 1, kv: map[Key]*entry{}, deleted: map[Key]uint64{}, changed: make(chan struct{}),
		sessions: map[string]*memSession{}, delayed: map[Key]time.Time{}, now: time.Now,
	}
	var open func() (*KV, error)
	open = func() (*KV, error) { return &KV{b: m, writes: newWriteQueue(), peer: open}, nil }
	kv, _ := open()
	return kv
}

// bump advances the index and wakes blocked readers; m.mu is held.
func (m *memory) bump() uint64 {
	m.index++
	close(m.changed)
	m.changed = make(chan struct{})
	return m.index
}

// indexOf is the index of the last change under prefix (exact key when
// exact); m.mu is held.
func (m *memory) indexOf(prefix Key, exact bool) uint64 {
	var idx uint64
	match := func(k Key) bool {
		if exact {
			return k == prefix
		}
		return strings.HasPrefix(string(k), string(prefix))
	}
	for k, e := range m.kv {
		if match(k) {
			idx = max(idx, e.ModifyIndex)
		}
	}
	for k, i := range m.deleted {
		if match(k) {
			idx = max(idx, i)
		}
	}
	return max(idx, 1)
}

// wait blocks until the index of prefix passes waitIndex, memoryWait
// passes or ctx ends; it returns with m.mu held.
func (m *memory) wait(ctx context.Context, prefix Key, exact bool, waitIndex uint64) error {
	m.mu.Lock()
	if waitIndex == 0 {
		return nil
	}
	deadline := time.NewTimer(memoryWait)
	defer deadline.Stop()
	for m.indexOf(prefix, exact) <= waitIndex {
		ch := m.changed
		m.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			m.mu.Lock()
			return nil
		case <-ctx.Done():
			return newErr("get", prefix, ErrUnavailable, ctx.Err())
		}
		m.mu.Lock()
	}
	return nil
}

func (m *memory) get(ctx context.Context, key Key, waitIndex uint64) (*entry, uint64, error) {
	if err := m.wait(ctx, key, true, waitIndex); err != nil {
		return nil, 0, err
	}
	defer m.mu.Unlock()
	idx := m.indexOf(key, true)
	e, ok := m.kv[key]
	if !ok {
		return nil, idx, nil
	}
	c := *e
	return &c, idx, nil
}

func (m *memory) list(ctx context.Context, prefix Key, waitIndex uint64) ([]entry, uint64, error) {
	if err := m.wait(ctx, prefix, false, waitIndex); err != nil {
		return nil, 0, err
	}
	defer m.mu.Unlock()
	return m.collect(prefix), m.indexOf(prefix, false), nil
}

func (m *memory) collect(prefix Key) []entry {
	var out []entry
	for k, e := range m.kv {
		if strings.HasPrefix(string(k), string(prefix)) {
			out = append(out, *e)
		}
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(string(a.Key), string(b.Key)) })
	return out
}

func (m *memory) read(ctx context.Context, prefixes []Key) ([]entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, newErr("read", "", ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []entry
	for _, p := range prefixes {
		for _, e := range m.collect(p) {
			if strings.HasSuffix(string(p), "/") || e.Key == p {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

func (m *memory) write(ctx context.Context, ops []op) ([]entry, int, error) {
	if err := ctx.Err(); err != nil {
		return nil, -1, newErr("txn", "", ErrUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, o := range ops {
		e, ok := m.kv[o.key]
		switch o.kind {
		case opCAS:
			if (o.index == 0 && ok) || (o.index != 0 && (!ok || e.ModifyIndex != o.index)) {
				return nil, i, nil
			}
		case opCheckSession:
			if !ok || e.Session != o.session {
				return nil, i, nil
			}
		}
	}
	idx := m.bump()
	var results []entry
	for _, o := range ops {
		switch o.kind {
		case opSet, opCAS:
			e := &entry{Key: o.key, Value: append([]byte(nil), o.value...), ModifyIndex: idx}
			if old, ok := m.kv[o.key]; ok {
				e.Session = old.Session
			}
			m.kv[o.key] = e
			delete(m.deleted, o.key)
			results = append(results, *e)
		case opDelete:
			if _, ok := m.kv[o.key]; ok {
				delete(m.kv, o.key)
				m.deleted[o.key] = idx
			}
		}
	}
	return results, -1, nil
}

func (m *memory) createSession(ctx context.Context, name string, ttl, lockDelay time.Duration) (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", newErr("session", "", ErrUnavailable, err)
	}
	id := hex.EncodeToString(b[:])
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &memSession{ttl: ttl, lockDelay: lockDelay}
	s.timer = time.AfterFunc(ttl, func() { m.invalidate(id) })
	m.sessions[id] = s
	return id, nil
}

func (m *memory) renewSession(ctx context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return newErr("session", "", ErrNotFound, errors.New("session "+id+" is gone"))
	}
	s.timer.Reset(s.ttl)
	return nil
}

func (m *memory) destroySession(ctx context.Context, id string) error {
	m.invalidate(id)
	return nil
}

// invalidate ends a session as Consul does: its locks are released
// (behavior release) and lock-delay applies to them.
func (m *memory) invalidate(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return
	}
	s.timer.Stop()
	delete(m.sessions, id)
	var held []Key
	for k, e := range m.kv {
		if e.Session == id {
			held = append(held, k)
		}
	}
	if len(held) == 0 {
		return
	}
	idx := m.bump()
	for _, k := range held {
		e := m.kv[k]
		e.Session, e.ModifyIndex = "", idx
		m.delayed[k] = m.now().Add(s.lockDelay)
	}
}

func (m *memory) acquire(ctx context.Context, key Key, value []byte, session string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.sessions[session]; !ok {
		return false, newErr("acquire", key, ErrNotFound, errors.New("session "+session+" is gone"))
	}
	if until, ok := m.delayed[key]; ok && m.now().Before(until) {
		return false, nil
	}
	if e, ok := m.kv[key]; ok && e.Session != "" && e.Session != session {
		return false, nil
	}
	idx := m.bump()
	m.kv[key] = &entry{Key: key, Value: append([]byte(nil), value...), ModifyIndex: idx, Session: session}
	delete(m.deleted, key)
	return true, nil
}

func (m *memory) release(ctx context.Context, key Key, session string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.kv[key]
	if !ok || e.Session != session {
		return false, nil
	}
	e.Session, e.ModifyIndex = "", m.bump()
	return true, nil
}

func (m *memory) close() {}
