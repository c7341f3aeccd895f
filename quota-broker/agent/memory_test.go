package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/store"
	"github.com/hashicorp/go-hclog"
)

// readCountingStore counts the store reads the agent makes itself (the
// watches' own reads happen inside the store and are not counted).
type readCountingStore struct {
	store.Store
	mu    sync.Mutex
	reads map[string]int
}

func (s *readCountingStore) count(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads[name]++
}

func (s *readCountingStore) counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.reads {
		out[k] = v
	}
	return out
}

func (s *readCountingStore) ReadRecords(ctx context.Context) (*store.Records, error) {
	s.count("ReadRecords")
	return s.Store.ReadRecords(ctx)
}

func (s *readCountingStore) Jobs(ctx context.Context) (map[store.JobID]store.JobRecord, error) {
	s.count("Jobs")
	return s.Store.Jobs(ctx)
}

func (s *readCountingStore) Intents(ctx context.Context) ([]store.Intent, error) {
	s.count("Intents")
	return s.Store.Intents(ctx)
}

func (s *readCountingStore) Holds(ctx context.Context) ([]store.Hold, error) {
	s.count("Holds")
	return s.Store.Holds(ctx)
}

func (s *readCountingStore) Leader(ctx context.Context) (string, error) {
	s.count("Leader")
	return s.Store.Leader(ctx)
}

func (s *readCountingStore) ReadGuarded(ctx context.Context) (*store.Guarded, error) {
	s.count("ReadGuarded")
	return s.Store.ReadGuarded(ctx)
}

// Issue 18 item 1: the leader reads the store's records once, when its term
// begins; its cycles plan on its memory and read the store no more (before
// the memory, each cycle read jobs/, intents/, holds/, the leader key and
// the guarded state: five reads a cycle, every job record each time).
func TestLeaderReadsTheStoreOncePerTerm(t *testing.T) {
	f := newFakeNomad(t)
	st := &readCountingStore{Store: store.NewMemory(), reads: map[string]int{}}
	ctx := context.Background()
	clock := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	a, _ := cycleAgent(t, f, st, e2eQuota, &clock, hclog.NewNullLogger())
	lock, err := st.Lock(ctx, "leader")
	if err != nil {
		t.Fatal(err)
	}
	before := st.counts()
	a.takeLock(lock)
	for i := range 5 {
		clock = clock.Add(time.Second)
		if c := a.runCycle(ctx, &cycleRun{}); c.run.step != "account" {
			t.Fatalf("cycle %d stopped in step %q: %s", i, c.run.step, a.Health().Why)
		}
	}
	got := st.counts()
	for k, v := range before {
		got[k] -= v
		if got[k] == 0 {
			delete(got, k)
		}
	}
	if diff := cmp.Diff(map[string]int{"ReadRecords": 1}, got); diff != "" {
		t.Fatalf("store reads of 5 leader cycles (-want +got):\n%s", diff)
	}
	if v, err := a.mem.view(ctx); err != nil || len(v.jobs) == 0 {
		t.Fatalf("the memory after 5 cycles: %v, %v; want the job records", v, err)
	}
}
