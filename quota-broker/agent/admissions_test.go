package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	nomadact "github.com/gputide/gputide/quota-broker/nomad/act"
	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/store"
)

// The record step writes the admission of each job its plan admits from
// the holding pool (admitted_at, issue 18 item 2: job times in the one
// fenced batch), once per job however many of its groups are admitted,
// keeping what the record had, and leaves a direct registration's
// acceptance to the Fence; the Fence then writes nothing more before the
// register, while an admission the record step did not write (another
// cycle's, a direct registration's) is still written before its call.
func TestRecordStepWritesTheAdmissionsTheFenceFinds(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	lock, err := st.Lock(ctx, "leader")
	if err != nil {
		t.Fatal(err)
	}
	seen := time.Date(2026, 12, 7, 7, 0, 0, 0, time.UTC)
	at := seen.Add(time.Hour)
	known := store.JobID{Namespace: "workspace-a", Job: "train"}
	known2 := store.JobID{Namespace: "workspace-a", Job: "eval"}
	fresh := store.JobID{Namespace: "workspace-b", Job: "serve"}
	for _, id := range []store.JobID{known, known2} {
		if err := st.WriteRecords(ctx, lock, []store.RecordWrite{store.PutJobRecord(id, store.JobRecord{FirstSeen: seen, QueuedAt: seen})}); err != nil {
			t.Fatal(err)
		}
	}
	cs := &countingStore{Store: st, prefix: "jobs/"}
	mem := newMemory(cs, true)
	mem.lead()
	mem.guarded(&store.Guarded{}, nil)
	v, err := mem.view(ctx)
	if err != nil {
		t.Fatal(err)
	}
	direct := store.JobID{Namespace: "workspace-b", Job: "direct"}
	p := &plan.Plan{Actions: []plan.Action{
		{Action: plan.ActionAdmit, Namespace: known.Namespace, Job: known.Job, Group: "a"},
		{Action: plan.ActionAdmit, Namespace: known.Namespace, Job: known.Job, Group: "b"},
		{Action: plan.ActionAdmit, Namespace: fresh.Namespace, Job: fresh.Job, Group: "web"},
		{Action: plan.ActionAdmit, Namespace: direct.Namespace, Job: direct.Job, Group: "web"},
	}}
	views := map[plan.JobKey]*build.JobView{}
	for _, id := range []store.JobID{known, fresh, direct} {
		k := plan.JobKey{Namespace: id.Namespace, Job: id.Job}
		views[k] = &build.JobView{Key: k, Holding: id != direct, Direct: id == direct}
	}
	b := &batch{}
	recordAdmissions(b, &cycleState{view: v, p: p, b: &build.Build{Jobs: views}}, at)
	if err := mem.commit(ctx, lock, b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]store.Key{store.JobKey(known), store.JobKey(fresh)}, cs.puts); diff != "" {
		t.Fatalf("job records written by the record step (-want +got):\n%s", diff)
	}
	for id, want := range map[store.JobID]store.JobRecord{
		known: {FirstSeen: seen, QueuedAt: seen, AdmittedAt: at},
		fresh: {FirstSeen: at, QueuedAt: at, AdmittedAt: at},
	} {
		if got, _ := mem.job(id); !cmp.Equal(want, got) {
			t.Errorf("%s: record %+v, want %+v", id, got, want)
		}
	}
	cs.puts = nil
	f := &fence{a: &Agent{mem: mem}, lock: lock, now: func() time.Time { return at.Add(time.Second) }, admittedAt: at}
	for _, id := range []store.JobID{known, fresh} {
		if err := f.BeforeJob(ctx, plan.JobKey{Namespace: id.Namespace, Job: id.Job}, nomadact.WriteAdmit); err != nil {
			t.Fatal(err)
		}
	}
	if len(cs.puts) != 0 {
		t.Fatalf("the Fence wrote %v before registers the record step had recorded, want nothing", cs.puts)
	}
	// Admissions the record step did not write: written now.
	for _, id := range []store.JobID{known2, direct} {
		if err := f.BeforeJob(ctx, plan.JobKey{Namespace: id.Namespace, Job: id.Job}, nomadact.WriteAdmit); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]store.Key{store.JobKey(known2), store.JobKey(direct)}, cs.puts); diff != "" {
		t.Fatalf("job records written by the Fence (-want +got):\n%s", diff)
	}
	if got, _ := mem.job(known2); !got.AdmittedAt.Equal(at.Add(time.Second)) {
		t.Fatalf("%s admitted at %v, want the Fence's now %v", known2, got.AdmittedAt, at.Add(time.Second))
	}
}

// Before the acts the record step makes sure the lock is held (L12): a
// batch that goes to the store is its own proof (the fenced transaction
// fails for a deposed leader), an empty batch is checked by a consistent
// read of the lock. Either way a broker that lost the lock neither
// records nor acts.
func TestRecordStepVerifiesTheLockOnceEitherWay(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	lock, err := st.Lock(ctx, "leader")
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{mem: newMemory(st, true)}
	a.mem.lead()
	write := &batch{}
	write.putJob(store.JobID{Namespace: "workspace-a", Job: "train"}, store.JobRecord{})
	for name, b := range map[string]*batch{"empty": {}, "a write": write} {
		if err := a.verifyLock(ctx, lock, b); err != nil {
			t.Fatalf("%s batch, lock held: %v", name, err)
		}
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.verifyLock(ctx, lock, &batch{}); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("empty batch, lock released: %v, want ErrNotLeader", err)
	}
	// A batch to write leaves the proof to its fenced transaction.
	if err := a.verifyLock(ctx, lock, write); err != nil {
		t.Fatalf("a write, lock released: verifyLock %v, want nil (the write is fenced)", err)
	}
	if err := a.mem.commit(ctx, lock, write); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("a write, lock released: commit %v, want ErrNotLeader", err)
	}
	// A memory that does not persist is no proof: the lock is read.
	a.mem.persist = false
	if err := a.verifyLock(ctx, lock, write); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("a write not persisted, lock released: %v, want ErrNotLeader", err)
	}
}
