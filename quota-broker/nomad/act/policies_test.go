package act

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/gputide/gputide/quota-broker/nomad/policies"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/hashicorp/nomad/api"
)

// scaleRequests decodes the Scale calls the fake received.
func scaleRequests(t *testing.T, f *fakeNomad) []api.ScalingRequest {
	t.Helper()
	var out []api.ScalingRequest
	for _, r := range f.Writes() {
		if r.Path != "/v1/job/training/scale" {
			continue
		}
		var req api.ScalingRequest
		if err := json.Unmarshal(r.Body, &req); err != nil {
			t.Fatal(err)
		}
		if r.Query != "namespace=workspace-c" {
			t.Fatalf("scale query %q", r.Query)
		}
		out = append(out, req)
	}
	return out
}

func TestExecuteScalesAnIdleGroupDownAfterStoppingItsAllocation(t *testing.T) {
	f, s, pols := idleState(t, 2)
	a, _ := newActor(f, s)
	b := idleBuild(t, s, pols, claimTree(), at(t), nil)
	p, err := plan.Compute(b.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	out := a.Execute(context.Background(), p, b)
	if len(out.Errors) != 0 || len(out.Preempted) == 0 {
		t.Fatalf("Execute: errors %v, preempted %v; want a stop of workspace-c/training", out.Errors, out.Preempted)
	}
	stopped := 0
	for _, st := range out.Preempted {
		if st.Namespace == "workspace-c" && st.Job == "training" {
			stopped++
		}
	}
	want := int64(max(2-stopped, 1))
	got := scaleRequests(t, f)
	if len(got) != 1 || out.ScaledDown != 1 {
		t.Fatalf("scale calls %+v, ScaledDown %d; want one", got, out.ScaledDown)
	}
	// The victim's job was moved to the holding pool first (index 500 from
	// the fake's register): the Scale call enforces that index.
	if *got[0].Count != want || got[0].JobModifyIndex != 500 || got[0].Target["Group"] != "worker" || got[0].Target["Job"] != "training" {
		t.Fatalf("scale request %+v (count %d); want count %d at index 500", got[0], *got[0].Count, want)
	}
}

// An idle group unplaced since T (the broker's record, given back in the
// build) is scaled down at T + Settle, not before; the Fence drops the
// record before the Scale call, so a group still seen unplaced waits
// Settle again.
func TestExecuteScalesAnIdleGroupDownAfterSettle(t *testing.T) {
	f, s, pols := idleState(t, 5) // 2 live, 3 unplaced
	a, _ := newActor(f, s)
	mf := newMemFence(f)
	a.Fence = mf
	since := at(t)
	group := plan.GroupKey{Namespace: "workspace-c", Job: "training", Group: "worker"}
	mf.unplaced[group] = since
	now := since
	a.Now = func() time.Time { return now }
	run := func() Outcome {
		b := idleBuild(t, s, pols, claimTree(), now, mf)
		return a.Execute(context.Background(), &plan.Plan{}, b)
	}
	for _, step := range []time.Duration{0, 10 * time.Second, 19 * time.Second} {
		now = now.Add(step)
		if out := run(); out.ScaledDown != 0 || len(scaleRequests(t, f)) != 0 {
			t.Fatalf("after %s: scaled %d; want nothing before settle", step, out.ScaledDown)
		}
	}
	now = now.Add(time.Second) // 30 s unplaced
	if out := run(); out.ScaledDown != 1 || len(out.Errors) != 0 {
		t.Fatalf("at settle: scaled %d, errors %v; want one", out.ScaledDown, out.Errors)
	}
	got := scaleRequests(t, f)
	if len(got) != 1 || *got[0].Count != 2 || got[0].JobModifyIndex != 22 {
		t.Fatalf("scale requests %+v; want one to count 2 at index 22", got)
	}
	if len(mf.unplaced) != 0 {
		t.Fatalf("unplaced since still recorded: %v", mf.unplaced)
	}
	// Nomad's count not yet seen lowered: nothing is scaled again.
	now = now.Add(time.Minute)
	if out := run(); out.ScaledDown != 0 || len(scaleRequests(t, f)) != 1 {
		t.Fatalf("scaled again: %+v", out)
	}
}

func TestScaleDownNeverGoesBelowOne(t *testing.T) {
	f, s, pols := idleState(t, 3)
	// Both allocations of the group are stopping already (by someone
	// else): live and not stopping is 0, the count goes to 1.
	for _, id := range []string{allocC1, allocC2} {
		s.MarkStopping(id)
	}
	a, _ := newActor(f, s)
	a.Settle = time.Second
	mf := newMemFence(f)
	a.Fence = mf
	now := at(t)
	mf.unplaced[plan.GroupKey{Namespace: "workspace-c", Job: "training", Group: "worker"}] = now
	a.Now = func() time.Time { return now }
	for range 2 {
		b := idleBuild(t, s, pols, claimTree(), now, mf)
		b.UnknownStopping = nil
		a.Execute(context.Background(), &plan.Plan{}, b)
		now = now.Add(time.Second)
	}
	got := scaleRequests(t, f)
	if len(got) != 1 || *got[0].Count != 1 {
		t.Fatalf("scale requests %+v; want one to count 1", got)
	}
}

// idleState is the recording with workspace-c/training marked idle and
// elastic, its count set, and its idle policy read.
func idleState(t *testing.T, count int) (*fakeNomad, *watch.State, *policies.Policies) {
	f, s := listRecorded(t)
	servePolicies(f, 20)
	log, _ := testLogger(t)
	pols := policies.NewPolicies()
	if _, err := (&policies.PolicyWatcher{Client: f.Client(), Governed: governedABC, Policies: pols, Logger: log}).Sync(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	k := trainingC.JobKey()
	j := *raw(s).Jobs[k]
	j.Meta = map[string]string{"gputide_pool": "default", "gputide_idle": "true", "gputide_elastic": "true"}
	tg := *j.TaskGroups[0]
	tg.Count = &count
	j.TaskGroups = []*api.TaskGroup{&tg}
	raw(s).Jobs[k] = &j
	return f, s, pols
}

// idleBuild builds s with pols (and, with mf, the facts it keeps).
func idleBuild(t *testing.T, s *watch.State, pols *policies.Policies, tree *quota.Node, now time.Time, mf *memFence) *build.Build {
	t.Helper()
	in := build.Input{Now: now, Quota: tree, Settings: quota.DefaultSettings(),
		Accepted: func(plan.JobKey) bool { return true }, Policies: pols}
	if mf != nil {
		mf.input(&in)
	}
	b := build.From(s, in)
	if b.Invalid != nil || len(b.Left) != 0 {
		t.Fatalf("Build: invalid %v, left %v", b.Invalid, b.Left)
	}
	return b
}
