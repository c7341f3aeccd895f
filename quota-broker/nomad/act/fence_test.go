package act

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/plan"
)

// recordingFence logs every call with the number of Nomad writes made
// before it, and refuses every Check after the first allow of them.
type recordingFence struct {
	f     *fakeNomad
	mu    sync.Mutex
	log   []string
	allow int // Check calls allowed; -1: all
}

var errLost = errors.New("leader lock lost")

func (r *recordingFence) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, fmt.Sprintf("%d %s", len(r.f.Writes()), s))
}

func (r *recordingFence) Check(context.Context) error {
	r.mu.Lock()
	ok := r.allow != 0
	if r.allow > 0 {
		r.allow--
	}
	r.mu.Unlock()
	if !ok {
		r.add("check refused")
		return errLost
	}
	return nil
}

func (r *recordingFence) BeforeStop(_ context.Context, act plan.Action) error {
	r.add("intent stop " + act.Alloc + " for " + act.For.String())
	return nil
}

func (r *recordingFence) BeforeJob(_ context.Context, key plan.JobKey, w JobWrite) error {
	r.add("job " + w.String() + " " + key.String())
	return nil
}

func (r *recordingFence) Withdraw(_ context.Context, alloc string) {
	r.add("withdraw " + alloc)
}

func (r *recordingFence) Registered(_ context.Context, key plan.JobKey, index uint64) {
	r.add("registered " + key.String())
}

// L12: every intent is recorded before the Nomad call it announces, and
// every stop of a claimant before the first of them.
func TestExecuteRecordsEachIntentBeforeItsCall(t *testing.T) {
	f, s := listRecorded(t)
	a, _ := newActor(f, s)
	fence := &recordingFence{f: f, allow: -1}
	a.Fence = fence
	p, b := planFor(t, s, a, claimTree())
	out := a.Execute(context.Background(), p, b)
	if len(out.Errors) != 0 || out.Stopped != 2 || out.Admitted != 1 {
		t.Fatalf("outcome = %+v", out)
	}
	claimant := "workspace-b/training/worker"
	want := []string{
		"0 intent stop " + allocC1 + " for " + claimant,
		"0 intent stop " + allocC2 + " for " + claimant,
		"0 job requeue workspace-c/training",
		"1 registered workspace-c/training", // the move to the holding pool
		"3 job admit workspace-b/training",
		"4 registered workspace-b/training",
		// the two jobs with bad meta get their status (step 6, one worker)
	}
	if len(fence.log) < len(want) {
		t.Fatalf("fence log = %q", fence.log)
	}
	if diff := cmp.Diff(want, fence.log[:len(want)]); diff != "" {
		t.Errorf("fence log (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"4 job status workspace-c/bad-idle", "5 registered workspace-c/bad-idle",
		"5 job status workspace-c/bad-maxrun", "6 registered workspace-c/bad-maxrun"}, fence.log[len(want):]); diff != "" {
		t.Errorf("status writes (-want +got):\n%s", diff)
	}
}

// L12: a broker that loses the lock mid-plan stops acting at its next act:
// no further call reaches Nomad, and the claimant is not admitted.
func TestExecuteStopsActingWhenTheLockIsLostMidPlan(t *testing.T) {
	f, s := listRecorded(t)
	a, _ := newActor(f, s)
	// The two intents (two checks) and the first stop (before the stop,
	// before the move of its job, before the call) pass; the lock is lost
	// before the second stop, whose intent is withdrawn.
	fence := &recordingFence{f: f, allow: 5}
	a.Fence = fence
	p, b := planFor(t, s, a, claimTree())
	out := a.Execute(context.Background(), p, b)
	w := f.Writes()
	if len(w) != 2 || w[1].String() != "PUT /v1/allocation/"+allocC1+"/stop" {
		t.Fatalf("writes = %v, want the move of the victim's job and the first stop only", w)
	}
	if out.Stopped != 1 || out.Admitted != 0 || out.MetaWrites != 0 {
		t.Fatalf("outcome = %+v", out)
	}
	for _, err := range out.Errors {
		if !errors.Is(err, ErrNotActing) || !errors.Is(err, errLost) {
			t.Errorf("error %v is not ErrNotActing wrapping the fence's error", err)
		}
	}
	if len(out.Errors) == 0 {
		t.Fatal("no error reported for the acts skipped")
	}
	if !slices.Contains(fence.log, "2 withdraw "+allocC2) {
		t.Errorf("fence log %q: the second stop's intent is not withdrawn", fence.log)
	}
	var stopping []string
	for _, id := range []string{allocC1, allocC2} {
		if al, ok := s.Alloc(id); ok && al.Stopping() {
			stopping = append(stopping, id)
		}
	}
	if diff := cmp.Diff([]string{allocC1}, stopping); diff != "" {
		t.Fatalf("allocations marked stopping in the state (-want +got):\n%s", diff)
	}
}
