package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
)

// KeyRecords moves with every WriteRecords transaction (its value is the
// number of writes in it): standbys block on it (WatchRecords) instead of
// on the folders, which hold every job record.
const KeyRecords Key = "records"

// Records is the leader's memory between cycles (DESIGN §6, L11, L12): the
// job records (jobs/), the intents (intents/, by allocation ID), the holds
// (holds/, by owner) and the leader lock's holder ("" when none), read in
// one consistent read.
type Records struct {
	Jobs    map[JobID]JobRecord
	Intents map[string]Intent
	Holds   map[plan.HoldOwner]Hold
	Leader  string
}

// ReadRecords implements Store: jobs/, intents/, holds/ and the leader key
// in one consistent read.
func (s *KV) ReadRecords(ctx context.Context) (*Records, error) {
	es, err := s.b.read(ctx, []Key{dirJobs, dirIntents, dirHolds, KeyLeader})
	if err != nil {
		return nil, err
	}
	r := &Records{Jobs: map[JobID]JobRecord{}, Intents: map[string]Intent{}, Holds: map[plan.HoldOwner]Hold{}}
	for _, e := range es {
		if err := r.add(e); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// add decodes one entry of ReadRecords into r.
func (r *Records) add(e entry) error {
	switch {
	case e.Key == KeyLeader:
		if e.Session != "" {
			r.Leader = string(e.Value)
		}
	case hasDir(e.Key, dirJobs):
		id, err := parseJobKey(e.Key)
		if err != nil {
			return newErr("read", e.Key, ErrInvalid, err)
		}
		var rec JobRecord
		if err := decode(e, &rec); err != nil {
			return err
		}
		r.Jobs[id] = rec
	case hasDir(e.Key, dirIntents):
		var in Intent
		if err := decode(e, &in); err != nil {
			return err
		}
		r.Intents[in.Alloc] = in
	case hasDir(e.Key, dirHolds):
		owner, err := parseHoldKey(e.Key)
		if err != nil {
			return newErr("read", e.Key, ErrInvalid, err)
		}
		var h Hold
		if err := decode(e, &h); err != nil {
			return err
		}
		if h.For != owner {
			return newErr("read", e.Key, ErrInvalid, fmt.Errorf("the value's owner %s is not the key's %s", h.For, owner))
		}
		r.Holds[owner] = h
	}
	return nil
}

func hasDir(k, dir Key) bool { return len(k) > len(dir) && k[:len(dir)] == dir }

// RecordWrite is one write of a WriteRecords batch: build it with
// PutJobRecord, DeleteJobRecord, PutIntentRecord, DeleteIntentRecord,
// PutHoldRecord or DeleteHoldRecord.
type RecordWrite struct {
	key   Key
	del   bool
	value any
	err   error // a write refused before anything is sent
}

// Key is the key the write changes.
func (w RecordWrite) Key() Key { return w.key }

// IsDelete reports whether the write deletes its key.
func (w RecordWrite) IsDelete() bool { return w.del }

// PutJobRecord writes jobs/<ns>/<job>.
func PutJobRecord(id JobID, rec JobRecord) RecordWrite {
	if id.Namespace == "" || id.Job == "" {
		return RecordWrite{key: dirJobs, err: fmt.Errorf("job %q in namespace %q: both must be set", id.Job, id.Namespace)}
	}
	return RecordWrite{key: JobKey(id), value: rec}
}

// DeleteJobRecord deletes jobs/<ns>/<job>.
func DeleteJobRecord(id JobID) RecordWrite { return RecordWrite{key: JobKey(id), del: true} }

// PutIntentRecord writes intents/<alloc>.
func PutIntentRecord(in Intent) RecordWrite {
	if in.Alloc == "" {
		return RecordWrite{key: dirIntents, err: errors.New("intent without an allocation ID")}
	}
	return RecordWrite{key: IntentKey(in.Alloc), value: in}
}

// DeleteIntentRecord deletes intents/<alloc>.
func DeleteIntentRecord(alloc string) RecordWrite {
	return RecordWrite{key: IntentKey(alloc), del: true}
}

// PutHoldRecord writes holds/<owner>, checked as PutHold checks it.
func PutHoldRecord(h Hold) RecordWrite {
	k := HoldKey(h.For)
	if err := checkHold(k, h); err != nil {
		return RecordWrite{key: k, err: err}
	}
	return RecordWrite{key: k, value: h}
}

// DeleteHoldRecord deletes holds/<owner>.
func DeleteHoldRecord(owner plan.HoldOwner) RecordWrite {
	k := HoldKey(owner)
	if k == "" {
		return RecordWrite{key: dirHolds, err: fmt.Errorf("hold owner %+v: want a reservation ID or a namespace, job and group, not both", owner)}
	}
	return RecordWrite{key: k, del: true}
}

// checkHold is the check of a hold record before it is written: an owner
// with a key, at least one node, each with a node ID, GPUs and an end.
func checkHold(k Key, h Hold) error {
	if k == "" {
		return fmt.Errorf("hold owner %+v: want a reservation ID or a namespace, job and group, not both", h.For)
	}
	if len(h.Nodes) == 0 {
		return errors.New("hold without a node")
	}
	for i, n := range h.Nodes {
		if n.Node == "" || len(n.GPUIDs) == 0 || n.Until.IsZero() {
			return fmt.Errorf("nodes[%d] = {node %q, %d GPUs, until %v}: want a node, GPUs and an end", i, n.Node, len(n.GPUIDs), n.Until)
		}
	}
	return nil
}

// recordBatch is the most writes of one WriteRecords transaction: MaxOps
// less the lock check and KeyRecords.
const recordBatch = MaxOps - 2

// WriteRecords implements Store: the writes, in order, fenced by lock
// (when non-nil), in as few transactions as Consul's MaxOps allows
// (recordBatch writes each, with the lock check and KeyRecords). A write
// refused before sending (ErrInvalid) writes nothing; a later transaction
// that fails leaves the earlier ones written, and the error says how many
// writes were made.
func (s *KV) WriteRecords(ctx context.Context, lock *Lock, writes []RecordWrite) error {
	ops := make([]op, 0, len(writes))
	for _, w := range writes {
		if w.err != nil {
			return newErr("put", w.key, ErrInvalid, w.err)
		}
		if w.del {
			ops = append(ops, op{kind: opDelete, key: w.key})
			continue
		}
		data, err := encode(w.key, w.value)
		if err != nil {
			return err
		}
		ops = append(ops, op{kind: opSet, key: w.key, value: data})
	}
	for done := 0; done < len(ops); done += recordBatch {
		part := ops[done:min(done+recordBatch, len(ops))]
		part = append(part[:len(part):len(part)], op{kind: opSet, key: KeyRecords, value: []byte(strconv.Itoa(len(part)))})
		if err := s.fenced(ctx, "records", lock, part); err != nil {
			if done > 0 {
				return fmt.Errorf("%d of %d writes made: %w", done, len(ops), err)
			}
			return err
		}
	}
	return nil
}

// WatchRecords implements Store with blocking queries on KeyRecords and
// on the leader key: fn is called first with the current records, then
// after WriteRecords transactions and changes of leader (those within
// recordsWatchGap of the last call fold into one), and with an *Error while the store is
// unavailable (then it retries with back-off), until ctx ends. Calls of fn
// do not overlap.
func (s *KV) WatchRecords(ctx context.Context, fn func(*Records, error)) error {
	changed := make(chan struct{}, 1)
	var wg sync.WaitGroup
	var mu sync.Mutex // fn's calls do not overlap
	report := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		fn(nil, err)
	}
	for _, k := range []Key{KeyRecords, KeyLeader} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.blockOn(ctx, k, changed, report)
		}()
	}
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
		r, err := s.ReadRecords(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		mu.Lock()
		fn(r, err)
		mu.Unlock()
		if !sleep(ctx, recordsWatchGap) {
			return ctx.Err()
		}
	}
}

// recordsWatchGap is the least time between two reads of WatchRecords: a
// leader writing a record per admission would otherwise make each standby
// read every job record after each of them (a standby's memory only feeds
// its plans and reads; it loads the store again when it takes the lock).
const recordsWatchGap = 250 * time.Millisecond

// blockOn signals changed first and then each time key's index moves,
// until ctx ends; errors go to report, with back-off.
func (s *KV) blockOn(ctx context.Context, key Key, changed chan<- struct{}, report func(error)) {
	var index uint64
	first := true
	backoff := 100 * time.Millisecond
	for {
		_, next, err := s.b.get(ctx, key, index)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			report(err)
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		if next < index {
			next = 0 // the index went back (a restored store): start over
		}
		if next != index || first {
			first = false
			select {
			case changed <- struct{}{}:
			default:
			}
		}
		index = next
	}
}
