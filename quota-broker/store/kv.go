package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/reservation"
)

// entry is one key of a backend, relative to the store's prefix.
type entry struct {
	Key         Key
	Value       []byte
	ModifyIndex uint64
	Session     string // the session holding the key's lock, or ""
}

// opKind is what one write operation of a transaction does.
type opKind int

const (
	opSet          opKind = iota // write value
	opCAS                        // write value if the key's ModifyIndex is index (0: absent)
	opDelete                     // delete the key
	opCheckSession               // fail unless the key is locked by session
)

type op struct {
	kind    opKind
	key     Key
	value   []byte
	index   uint64
	session string
}

// backend is a key/value store with Consul's semantics: modify indexes,
// atomic transactions, blocking reads, sessions and locks. Keys are
// relative to the store prefix; the backend adds its own.
type backend interface {
	// get returns the entry at key (nil when absent) and the index to
	// block on; waitIndex > 0 blocks until the key changes past it (or a
	// backend-chosen timeout). Errors are *Error.
	get(ctx context.Context, key Key, waitIndex uint64) (*entry, uint64, error)
	// list returns the entries under prefix sorted by key, and the index.
	list(ctx context.Context, prefix Key, waitIndex uint64) ([]entry, uint64, error)
	// read returns the entries under each prefix in one consistent view.
	read(ctx context.Context, prefixes []Key) ([]entry, error)
	// write applies ops atomically. When a CAS or check fails it writes
	// nothing and returns failed = the index of the failed op; else -1.
	write(ctx context.Context, ops []op) (results []entry, failed int, err error)

	createSession(ctx context.Context, name string, ttl, lockDelay time.Duration) (string, error)
	// renewSession returns ErrNotFound (in an *Error) once the session is gone.
	renewSession(ctx context.Context, id string) error
	destroySession(ctx context.Context, id string) error
	acquire(ctx context.Context, key Key, value []byte, session string) (bool, error)
	release(ctx context.Context, key Key, session string) (bool, error)
	close()
}

// KV is the store over one backend. It is safe for concurrent use.
type KV struct {
	b backend
	// writes queues the guarded writes (queue.go).
	writes *writeQueue
	// peer opens another client on the same data (tests, two brokers).
	peer func() (*KV, error)
}

// Peer returns another client on the same data: a new Consul client for
// the same agent, or the same memory backend. Tests use it for a second
// broker.
func (s *KV) Peer() (*KV, error) { return s.peer() }

// Close releases the client's resources.
func (s *KV) Close() { s.b.close() }

func encode(k Key, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, newErr("encode", k, ErrInvalid, err)
	}
	if len(data) > MaxValueSize {
		return nil, newErr("encode", k, ErrInvalid, fmt.Errorf("value is %d bytes, more than %d", len(data), MaxValueSize))
	}
	return data, nil
}

func decode(e entry, v any) error {
	d := json.NewDecoder(bytes.NewReader(e.Value))
	if err := d.Decode(v); err != nil {
		return newErr("decode", e.Key, ErrInvalid, err)
	}
	return nil
}

// ReadGuarded implements Store.
func (s *KV) ReadGuarded(ctx context.Context) (*Guarded, error) {
	es, err := s.b.read(ctx, []Key{KeyGuard, KeyTree, dirReservations})
	if err != nil {
		return nil, err
	}
	return guardedFrom(es)
}

func guardedFrom(es []entry) (*Guarded, error) {
	g := &Guarded{}
	for _, e := range es {
		switch {
		case e.Key == KeyGuard:
			n, err := strconv.ParseUint(string(e.Value), 10, 64)
			if err != nil {
				return nil, newErr("decode", e.Key, ErrInvalid, err)
			}
			g.Index, g.Counter = e.ModifyIndex, n
		case e.Key == KeyTree:
			var t TreeRecord
			if err := decode(e, &t); err != nil {
				return nil, err
			}
			g.Tree = &t
		case strings.HasPrefix(string(e.Key), string(dirReservations)):
			var b reservation.Booking
			if err := decode(e, &b); err != nil {
				return nil, err
			}
			g.Reservations = append(g.Reservations, b)
		}
	}
	slices.SortFunc(g.Reservations, func(a, b reservation.Booking) int { return strings.Compare(a.ID, b.ID) })
	return g, nil
}

// Guarded implements Store: read the state, let validate check the laws and
// name the changes, then write them in one transaction whose first
// operation is a CAS of the guard at the index read (create-only when
// absent) to its value plus one. A lost CAS re-reads and retries, Retries
// times, then ErrConflict. validate's error is returned as it is. The
// guarded writes of one client run one at a time (the write queue,
// queue.go): ErrBusy when MaxQueuedWrites wait or the turn takes longer
// than WriteQueueWait.
func (s *KV) Guarded(ctx context.Context, validate ValidateFunc) (*Guarded, error) {
	return s.guarded(ctx, nil, validate)
}

// GuardedFenced implements Store: Guarded, with the transaction also fenced
// by lock (L12: a check that lock's session still holds the leader key
// comes first; a lost lock writes nothing and returns ErrNotLeader, not
// retried). validate may then return at most MaxOps-2 changes.
func (s *KV) GuardedFenced(ctx context.Context, lock *Lock, validate ValidateFunc) (*Guarded, error) {
	if lock == nil {
		return nil, newErr("guarded", KeyLeader, ErrNotLeader, errors.New("no leader lock"))
	}
	return s.guarded(ctx, lock, validate)
}

// guarded is Guarded, fenced by lock when it is not nil.
func (s *KV) guarded(ctx context.Context, lock *Lock, validate ValidateFunc) (*Guarded, error) {
	release, err := s.writes.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	var fence []op
	if lock != nil {
		fence = []op{{kind: opCheckSession, key: KeyLeader, session: lock.session}}
	}
	for attempt := 0; attempt <= Retries; attempt++ {
		if lock != nil && !lock.IsLeader() {
			return nil, newErr("guarded", KeyLeader, ErrNotLeader, nil)
		}
		state, err := s.ReadGuarded(ctx)
		if err != nil {
			return nil, err
		}
		changes, err := validate(state)
		if err != nil {
			return nil, err
		}
		if limit := MaxOps - 1 - len(fence); len(changes) > limit {
			return nil, newErr("guarded", "", ErrInvalid, fmt.Errorf("%d changes, more than %d in one transaction", len(changes), limit))
		}
		ops := append(slices.Clone(fence), op{kind: opCAS, key: KeyGuard, index: state.Index, value: []byte(strconv.FormatUint(state.Counter+1, 10))})
		for _, c := range changes {
			if c.del {
				ops = append(ops, op{kind: opDelete, key: c.key})
				continue
			}
			data, err := encode(c.key, c.value)
			if err != nil {
				return nil, err
			}
			ops = append(ops, op{kind: opSet, key: c.key, value: data})
		}
		results, failed, err := s.b.write(ctx, ops)
		if err != nil {
			return nil, err
		}
		if failed < 0 {
			return applied(state, changes, results), nil
		}
		if failed < len(fence) {
			return nil, newErr("guarded", KeyLeader, ErrNotLeader, nil)
		}
		if failed != len(fence) {
			return nil, newErr("guarded", ops[failed].key, ErrInvalid, errors.New("operation refused by the backend"))
		}
		// The guard moved: someone else wrote; re-read and validate again.
		if err := ctx.Err(); err != nil {
			return nil, newErr("guarded", KeyGuard, ErrUnavailable, err)
		}
	}
	return nil, newErr("guarded", KeyGuard, ErrConflict, nil)
}

// applied returns state with changes applied and the guard advanced.
func applied(state *Guarded, changes []Change, results []entry) *Guarded {
	g := &Guarded{Counter: state.Counter + 1, Tree: state.Tree}
	for _, r := range results {
		if r.Key == KeyGuard {
			g.Index = r.ModifyIndex
		}
	}
	byID := map[string]reservation.Booking{}
	for _, r := range state.Reservations {
		byID[r.ID] = r
	}
	for _, c := range changes {
		switch {
		case c.tree != nil:
			g.Tree = c.tree
		case c.booked != nil && c.del:
			delete(byID, c.booked.ID)
		case c.booked != nil:
			byID[c.booked.ID] = *c.booked
		}
	}
	for _, r := range byID {
		g.Reservations = append(g.Reservations, r)
	}
	slices.SortFunc(g.Reservations, func(a, b reservation.Booking) int { return strings.Compare(a.ID, b.ID) })
	return g
}

// WatchGuarded implements Store with blocking queries on the guard key:
// every guarded write moves it. fn is called first with the current state,
// then once per change of the guard's index (several guarded writes may
// fold into one call), and with an *Error while the store is unavailable.
func (s *KV) WatchGuarded(ctx context.Context, fn func(*Guarded, error)) error {
	var index, last uint64
	delivered := false
	backoff := 100 * time.Millisecond
	for {
		_, next, err := s.b.get(ctx, KeyGuard, index)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			fn(nil, err)
			if !sleep(ctx, backoff) {
				return ctx.Err()
			}
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		if next == index {
			continue // timed out with no change
		}
		if next < index {
			next = 0 // the index went back (a restored store): start over
		}
		state, err := s.ReadGuarded(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		index = next
		if err == nil && delivered && state.Index == last {
			continue // woken by another key (Consul's index is the KV table's)
		}
		if err == nil {
			delivered, last = true, state.Index
		}
		fn(state, err)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// fenced writes ops, preceded by a check that lock still holds the leader
// key when lock is non-nil (L12: only the leader acts; a write of a lost
// leader fails with ErrNotLeader and writes nothing).
func (s *KV) fenced(ctx context.Context, opName string, lock *Lock, ops []op) error {
	if lock != nil {
		if !lock.IsLeader() {
			return newErr(opName, KeyLeader, ErrNotLeader, nil)
		}
		ops = append([]op{{kind: opCheckSession, key: KeyLeader, session: lock.session}}, ops...)
	}
	if len(ops) > MaxOps {
		return newErr(opName, "", ErrInvalid, fmt.Errorf("%d operations, more than %d", len(ops), MaxOps))
	}
	_, failed, err := s.b.write(ctx, ops)
	if err != nil {
		return err
	}
	if failed == 0 && lock != nil {
		return newErr(opName, KeyLeader, ErrNotLeader, nil)
	}
	if failed >= 0 {
		return newErr(opName, ops[failed].key, ErrInvalid, errors.New("operation refused by the backend"))
	}
	return nil
}

func (s *KV) put(ctx context.Context, opName string, lock *Lock, k Key, v any) error {
	data, err := encode(k, v)
	if err != nil {
		return err
	}
	return s.fenced(ctx, opName, lock, []op{{kind: opSet, key: k, value: data}})
}

func (s *KV) del(ctx context.Context, opName string, lock *Lock, k Key) error {
	return s.fenced(ctx, opName, lock, []op{{kind: opDelete, key: k}})
}

// Job implements Store; ErrNotFound when the job has no record.
func (s *KV) Job(ctx context.Context, id JobID) (JobRecord, error) {
	k := JobKey(id)
	e, _, err := s.b.get(ctx, k, 0)
	if err != nil {
		return JobRecord{}, err
	}
	if e == nil {
		return JobRecord{}, newErr("get", k, ErrNotFound, nil)
	}
	var r JobRecord
	return r, decode(*e, &r)
}

// Jobs implements Store.
func (s *KV) Jobs(ctx context.Context) (map[JobID]JobRecord, error) {
	es, _, err := s.b.list(ctx, dirJobs, 0)
	if err != nil {
		return nil, err
	}
	out := make(map[JobID]JobRecord, len(es))
	for _, e := range es {
		id, err := parseJobKey(e.Key)
		if err != nil {
			return nil, newErr("list", e.Key, ErrInvalid, err)
		}
		var r JobRecord
		if err := decode(e, &r); err != nil {
			return nil, err
		}
		out[id] = r
	}
	return out, nil
}

// PutJob implements Store (fenced by lock when non-nil).
func (s *KV) PutJob(ctx context.Context, lock *Lock, id JobID, rec JobRecord) error {
	if id.Namespace == "" || id.Job == "" {
		return newErr("put", dirJobs, ErrInvalid, fmt.Errorf("job %q in namespace %q: both must be set", id.Job, id.Namespace))
	}
	return s.put(ctx, "put", lock, JobKey(id), rec)
}

// DeleteJob implements Store.
func (s *KV) DeleteJob(ctx context.Context, lock *Lock, id JobID) error {
	return s.del(ctx, "delete", lock, JobKey(id))
}

func listDecode[T any](ctx context.Context, s *KV, dir Key) ([]T, error) {
	es, _, err := s.b.list(ctx, dir, 0)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(es))
	for _, e := range es {
		var v T
		if err := decode(e, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Intents implements Store: every intent, in key order.
func (s *KV) Intents(ctx context.Context) ([]Intent, error) {
	return listDecode[Intent](ctx, s, dirIntents)
}

// PutIntent implements Store.
func (s *KV) PutIntent(ctx context.Context, lock *Lock, in Intent) error {
	if in.Alloc == "" {
		return newErr("put", dirIntents, ErrInvalid, errors.New("intent without an allocation ID"))
	}
	return s.put(ctx, "put", lock, IntentKey(in.Alloc), in)
}

// DeleteIntent implements Store.
func (s *KV) DeleteIntent(ctx context.Context, lock *Lock, alloc string) error {
	return s.del(ctx, "delete", lock, IntentKey(alloc))
}

// Holds implements Store: every hold, in key order (reservations first,
// then groups). A value whose owner is not its key's is ErrInvalid.
func (s *KV) Holds(ctx context.Context) ([]Hold, error) {
	es, _, err := s.b.list(ctx, dirHolds, 0)
	if err != nil {
		return nil, err
	}
	out := make([]Hold, 0, len(es))
	for _, e := range es {
		owner, err := parseHoldKey(e.Key)
		if err != nil {
			return nil, newErr("list", e.Key, ErrInvalid, err)
		}
		var h Hold
		if err := decode(e, &h); err != nil {
			return nil, err
		}
		if h.For != owner {
			return nil, newErr("list", e.Key, ErrInvalid, fmt.Errorf("the value's owner %s is not the key's %s", h.For, owner))
		}
		out = append(out, h)
	}
	return out, nil
}

// PutHold implements Store: it writes holds/<owner> (fenced by lock when
// non-nil). The owner is a reservation or a whole group key, never both;
// each node entry names its node, at least one GPU and its end.
func (s *KV) PutHold(ctx context.Context, lock *Lock, h Hold) error {
	k := HoldKey(h.For)
	if err := checkHold(k, h); err != nil {
		if k == "" {
			k = dirHolds
		}
		return newErr("put", k, ErrInvalid, err)
	}
	return s.put(ctx, "put", lock, k, h)
}

// DeleteHold implements Store.
func (s *KV) DeleteHold(ctx context.Context, lock *Lock, owner plan.HoldOwner) error {
	k := HoldKey(owner)
	if k == "" {
		return newErr("delete", dirHolds, ErrInvalid, fmt.Errorf("hold owner %+v: want a reservation ID or a namespace, job and group, not both", owner))
	}
	return s.del(ctx, "delete", lock, k)
}

// ReservationHistory implements Store.
func (s *KV) ReservationHistory(ctx context.Context) ([]ReservationHistory, error) {
	return listDecode[ReservationHistory](ctx, s, dirHistoryReservations)
}

// ReservationHistoryOf implements Store: the history entry of booking id,
// ErrNotFound when it has none.
func (s *KV) ReservationHistoryOf(ctx context.Context, id string) (ReservationHistory, error) {
	k := HistoryReservationKey(id)
	e, _, err := s.b.get(ctx, k, 0)
	if err != nil {
		return ReservationHistory{}, err
	}
	if e == nil {
		return ReservationHistory{}, newErr("get", k, ErrNotFound, nil)
	}
	var h ReservationHistory
	return h, decode(*e, &h)
}

// Preemptions implements Store: oldest first.
func (s *KV) Preemptions(ctx context.Context) ([]Preemption, error) {
	return listDecode[Preemption](ctx, s, dirHistoryPreemptions)
}

// AddPreemption implements Store.
func (s *KV) AddPreemption(ctx context.Context, lock *Lock, p Preemption) error {
	if p.Alloc == "" || p.At.IsZero() {
		return newErr("put", dirHistoryPreemptions, ErrInvalid, errors.New("preemption without an allocation ID or time"))
	}
	return s.put(ctx, "put", lock, HistoryPreemptionKey(p.At, p.Alloc), p)
}

// PruneHistory implements Store: it deletes the history entries (each
// folder on its own) that ended before now - retention, then the oldest
// beyond maxEntries, in transactions of at most MaxOps-1 deletes fenced by
// lock. It returns how many it deleted.
func (s *KV) PruneHistory(ctx context.Context, lock *Lock, now time.Time, retention time.Duration, maxEntries int) (int, error) {
	cutoff := now.Add(-retention)
	type dated struct {
		key Key
		at  time.Time
	}
	var doomed []Key
	pick := func(items []dated) {
		slices.SortFunc(items, func(a, b dated) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return strings.Compare(string(a.key), string(b.key))
		})
		for i, it := range items {
			if it.at.Before(cutoff) || len(items)-i > maxEntries {
				doomed = append(doomed, it.key)
			}
		}
	}

	es, _, err := s.b.list(ctx, dirHistoryPreemptions, 0)
	if err != nil {
		return 0, err
	}
	items := make([]dated, 0, len(es))
	for _, e := range es {
		t, err := parsePreemptionTime(e.Key)
		if err != nil {
			return 0, newErr("prune", e.Key, ErrInvalid, err)
		}
		items = append(items, dated{e.Key, t})
	}
	pick(items)

	es, _, err = s.b.list(ctx, dirHistoryReservations, 0)
	if err != nil {
		return 0, err
	}
	items = items[:0]
	for _, e := range es {
		var h ReservationHistory
		if err := decode(e, &h); err != nil {
			return 0, err
		}
		items = append(items, dated{e.Key, h.EndedAt})
	}
	pick(items)

	deleted := 0
	for len(doomed) > 0 {
		n := min(len(doomed), MaxOps-1)
		ops := make([]op, 0, n)
		for _, k := range doomed[:n] {
			ops = append(ops, op{kind: opDelete, key: k})
		}
		if err := s.fenced(ctx, "prune", lock, ops); err != nil {
			return deleted, err
		}
		deleted += n
		doomed = doomed[n:]
	}
	return deleted, nil
}

// SeedTree writes rec as the tree only when the store has none (the
// agent's quota_file seeds an absent tree and never overwrites it, DESIGN
// §6). It reports whether it wrote, and returns the tree in force.
func (s *KV) SeedTree(ctx context.Context, rec TreeRecord) (*TreeRecord, bool, error) {
	seeded := false
	st, err := s.Guarded(ctx, func(st *Guarded) ([]Change, error) {
		seeded = st.Tree == nil
		if !seeded {
			return nil, errTreePresent
		}
		return []Change{PutTree(rec)}, nil
	})
	if errors.Is(err, errTreePresent) {
		st, err = s.ReadGuarded(ctx)
	}
	if err != nil {
		return nil, false, err
	}
	return st.Tree, seeded, nil
}

// errTreePresent ends SeedTree's guarded write without writing.
var errTreePresent = errors.New("tree present")

// Leader returns the name of the lock's holder, or "" when nobody holds it.
func (s *KV) Leader(ctx context.Context) (string, error) {
	e, _, err := s.b.get(ctx, KeyLeader, 0)
	if err != nil || e == nil || e.Session == "" {
		return "", err
	}
	return string(e.Value), nil
}
