package act

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/build"

	"github.com/gputide/gputide/quota-broker/nomad/watch"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/hashicorp/nomad/api"
)

// writesFor returns the writes that touch workspace-c/training: its
// register and deregister calls and its allocations' stops (the recording's
// jobs with a bad meta value get their error written by every Execute).
func writesFor(t *testing.T, f *fakeNomad) []request {
	t.Helper()
	var out []request
	for _, r := range f.Writes() {
		if r.Path == "/v1/jobs" {
			if j, _, _ := registered(t, r); str(j.Namespace) != "workspace-c" || str(j.ID) != "training" {
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

func buildFor(t *testing.T, s *watch.State, now time.Time, forRes map[string]string) *build.Build {
	t.Helper()
	return build.From(s, build.Input{Now: now, Quota: claimTree(), Settings: quota.DefaultSettings(),
		StoppingForReservation: forRes, Accepted: func(plan.JobKey) bool { return true }})
}

// memFence is a Fence that keeps what the broker's store keeps of the
// Actor's acts beyond the intents: the status still to write on the jobs
// stopped whole, and since when idle groups have had allocations
// unplaced; input gives them back to the next build, as the agent's memory
// does with its store records (issue 18: the Actor keeps none of them).
type memFence struct {
	recordingFence
	mu       sync.Mutex
	stopped  map[plan.JobKey]build.StopStatus
	unplaced map[plan.GroupKey]time.Time
}

func newMemFence(f *fakeNomad) *memFence {
	return &memFence{recordingFence: recordingFence{f: f, allow: -1}, stopped: map[plan.JobKey]build.StopStatus{},
		unplaced: map[plan.GroupKey]time.Time{}}
}

func (m *memFence) BeforeStopJob(ctx context.Context, key plan.JobKey, st build.StopStatus) error {
	m.mu.Lock()
	m.stopped[key] = st
	m.mu.Unlock()
	return m.recordingFence.BeforeStopJob(ctx, key, st)
}

func (m *memFence) ForgetStop(ctx context.Context, key plan.JobKey) {
	m.mu.Lock()
	delete(m.stopped, key)
	m.mu.Unlock()
	m.recordingFence.ForgetStop(ctx, key)
}

func (m *memFence) BeforeScale(ctx context.Context, group plan.GroupKey) error {
	m.mu.Lock()
	delete(m.unplaced, group)
	m.mu.Unlock()
	return m.recordingFence.BeforeScale(ctx, group)
}

// input gives the kept facts to a build.
func (m *memFence) input(in *build.Input) {
	in.Record = func(k plan.JobKey) build.JobRecord {
		m.mu.Lock()
		defer m.mu.Unlock()
		return build.JobRecord{Recorded: true, Stopped: m.stopped[k]}
	}
	in.UnplacedSince = func(g plan.GroupKey) time.Time {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.unplaced[g]
	}
}

// build is buildFor with the kept facts.
func (m *memFence) build(t *testing.T, s *watch.State, now time.Time) *build.Build {
	t.Helper()
	in := build.Input{Now: now, Quota: claimTree(), Settings: quota.DefaultSettings(), Accepted: func(plan.JobKey) bool { return true }}
	m.input(&in)
	return build.From(s, in)
}

// A stop_job (L11.max_run) deregisters the job once, without purge, after
// recording the status to write through the Fence; once its allocations
// are gone the broker (here a new Actor: a successor, given the recorded
// status back in its build) writes gputide_status = stopped with the rule
// as the reason, once, and forgets it.
func TestExecuteStopsAJobWholeThenWritesItsStatus(t *testing.T) {
	f, s := listRecorded(t)
	a, _ := newActor(f, s)
	mf := newMemFence(f)
	a.Fence = mf
	b := mf.build(t, s, at(t))
	p := &plan.Plan{Actions: []plan.Action{
		{Action: plan.ActionStopJob, Namespace: "workspace-c", Job: "training", Rule: plan.RuleFlexMaxRun, Reason: "ran 1h of max_run 1h"},
		{Action: plan.ActionStopJob, Namespace: "workspace-c", Job: "training", Rule: plan.RuleFlexMaxRun, Reason: "ran 1h of max_run 1h"},
	}}
	out := a.Execute(context.Background(), p, b)
	if out.JobsStopped != 1 || len(out.Errors) != 0 {
		t.Fatalf("outcome = %+v", out)
	}
	w := writesFor(t, f)
	if len(w) != 1 || w[0].Method != "DELETE" || w[0].Path != "/v1/job/training" || strings.Contains(w[0].Query, "purge=true") ||
		!strings.Contains(w[0].Query, "namespace=workspace-c") {
		t.Fatalf("writes = %v (%q)", w, w[0].Query)
	}
	reason := "L11.max_run: ran 1h of max_run 1h"
	if diff := cmp.Diff(map[plan.JobKey]build.StopStatus{jobC: {Reason: reason, JobModifyIndex: 22}}, mf.stopped); diff != "" {
		t.Fatalf("recorded (-want +got):\n%s", diff)
	}
	if i := slices.IndexFunc(mf.log, func(l string) bool { return strings.HasSuffix(l, "stop job workspace-c/training: "+reason) }); i < 0 ||
		!strings.HasPrefix(mf.log[i], "0 ") {
		t.Fatalf("fence log %v: want the stop recorded before the deregister", mf.log)
	}
	// The next plan (Nomad's state not yet updated) stops nothing again.
	if out := a.Execute(context.Background(), p, mf.build(t, s, at(t))); out.JobsStopped != 0 || len(writesFor(t, f)) != 1 {
		t.Fatalf("stopped twice: %+v, writes %v", out, writesFor(t, f))
	}
	// Nor does a successor, though Nomad's job still runs.
	a, _ = newActor(f, s)
	a.Fence = mf
	if out := a.Execute(context.Background(), p, mf.build(t, s, at(t))); out.JobsStopped != 0 || len(writesFor(t, f)) != 1 {
		t.Fatalf("a successor stopped it again: %+v, writes %v", out, writesFor(t, f))
	}
	// Nomad stopped the job and its allocations ended.
	stopped := *raw(s).Jobs[jobC]
	yes := true
	stopped.Stop = &yes
	raw(s).Jobs[jobC] = &stopped
	for _, id := range []string{allocC1, allocC2} {
		c := *raw(s).Allocs[id]
		c.ClientStatus = api.AllocClientStatusComplete
		raw(s).Allocs[id] = &c
	}
	out = a.Execute(context.Background(), &plan.Plan{}, mf.build(t, s, at(t)))
	w = writesFor(t, f)
	if len(w) != 2 || len(out.Errors) != 0 {
		t.Fatalf("outcome = %+v, writes %v", out, w)
	}
	j, enforce, _ := registered(t, w[1])
	got := map[string]string{"status": j.Meta[jobmeta.MetaStatus], "reason": j.Meta[jobmeta.MetaReason]}
	want := map[string]string{"status": StatusStopped, "reason": reason}
	if diff := cmp.Diff(want, got); diff != "" || !enforce || str(j.ID) != "training" || j.Stop == nil || !*j.Stop {
		t.Fatalf("status write (-want +got):\n%s", diff)
	}
	if len(mf.stopped) != 0 {
		t.Fatalf("still recorded after the status write: %v", mf.stopped)
	}
	if out := a.Execute(context.Background(), &plan.Plan{}, mf.build(t, s, at(t))); len(writesFor(t, f)) != 2 || len(out.Errors) != 0 {
		t.Fatalf("wrote again: %+v, writes %v", out, writesFor(t, f))
	}
}

// A job the broker stopped whole that its user registers again (at another
// modify index) is forgotten: no status is written on it.
func TestExecuteForgetsAStoppedJobRunAgain(t *testing.T) {
	f, s := listRecorded(t)
	a, _ := newActor(f, s)
	mf := newMemFence(f)
	a.Fence = mf
	mf.stopped[jobC] = build.StopStatus{Reason: "L10.end: r-1 ended", JobModifyIndex: 21}
	out := a.Execute(context.Background(), &plan.Plan{}, mf.build(t, s, at(t)))
	if len(out.Errors) != 0 || len(writesFor(t, f)) != 0 || len(mf.stopped) != 0 {
		t.Fatalf("outcome %+v, writes %v, recorded %v: want it forgotten", out, writesFor(t, f), mf.stopped)
	}
}

// A suspend (L11.settle) moves the job to the holding pool, then stops its
// live allocations, and notes when it was queued again.
func TestExecuteSuspendsAFlexJobWhole(t *testing.T) {
	f, s := listRecorded(t)
	a, _ := newActor(f, s)
	b := buildFor(t, s, at(t), nil)
	p := &plan.Plan{Actions: []plan.Action{{Action: plan.ActionSuspend, Namespace: "workspace-c", Job: "training", Rule: plan.RuleFlexSettle, Reason: "1 of 2 allocations placed after settle 30s"}}}
	out := a.Execute(context.Background(), p, b)
	if out.JobsSuspended != 1 || len(out.Errors) != 0 {
		t.Fatalf("outcome = %+v", out)
	}
	if diff := cmp.Diff([]Move{{Namespace: "workspace-c", Job: "training", Pool: build.DefaultHoldingPool}}, out.Moves); diff != "" {
		t.Errorf("moves (-want +got):\n%s", diff)
	}
	var got []string
	for _, r := range writesFor(t, f) {
		got = append(got, r.String())
	}
	want := []string{"PUT /v1/jobs", "PUT /v1/allocation/" + allocC1 + "/stop", "PUT /v1/allocation/" + allocC2 + "/stop"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("writes (-want +got):\n%s", diff)
	}
	if j, _, _ := registered(t, f.Writes()[0]); str(j.NodePool) != build.DefaultHoldingPool {
		t.Fatalf("moved to %q", str(j.NodePool))
	}
	// Back in the holding pool, its pending groups are queued since the
	// queued_at the broker records through its Fence (WriteRequeue).
	stopped := *raw(s).Jobs[jobC]
	pool := build.DefaultHoldingPool
	stopped.NodePool = &pool
	raw(s).Jobs[jobC] = &stopped
	for _, id := range []string{allocC1, allocC2} {
		c := *raw(s).Allocs[id]
		c.ClientStatus = api.AllocClientStatusComplete
		raw(s).Allocs[id] = &c
	}
	delete(raw(s).Summaries, jobC) // not evaluated yet: every allocation is pending
	later := at(t).Add(time.Minute)
	b = build.From(s, build.Input{Now: later, Quota: claimTree(), Settings: quota.DefaultSettings(),
		Record: func(k plan.JobKey) build.JobRecord {
			if k == jobC {
				return build.JobRecord{Recorded: true, QueuedAt: at(t)}
			}
			return build.JobRecord{}
		}, Accepted: func(plan.JobKey) bool { return true }})
	var queued []time.Time
	for _, pg := range b.Snapshot.Pending {
		if pg.JobKey() == jobC {
			queued = append(queued, pg.QueuedAt)
		}
	}
	if len(queued) == 0 || !queued[0].Equal(at(t)) {
		t.Fatalf("queued at %v, want %v", queued, at(t))
	}
}

// Hold actions are counted and make no Nomad call: the broker records them
// in its store before Execute (plan.MergeHold), and the Actor keeps none.
func TestExecuteCountsHoldsAndCallsNothing(t *testing.T) {
	f, s := listRecorded(t)
	a, _ := newActor(f, s)
	b := buildFor(t, s, at(t), nil)
	node := b.Snapshot.Nodes[0]
	owner := plan.GroupKey{Namespace: "workspace-b", Job: "training", Group: "train"}
	p := &plan.Plan{Actions: []plan.Action{
		{Action: plan.ActionHold, Node: node.ID, For: owner, GPUIDs: []string{node.GPUs[1].ID}, Until: at(t).Add(time.Hour), Rule: plan.RuleReservation},
		{Action: plan.ActionHold, Node: node.ID, Reservation: "r-1", GPUIDs: []string{node.GPUs[0].ID}, Until: at(t).Add(time.Hour), Rule: plan.RuleReservation},
		{Action: plan.ActionHold, Node: node.ID, GPUIDs: []string{node.GPUs[0].ID}, Until: at(t).Add(time.Hour)}, // no owner: not a hold
	}}
	if out := a.Execute(context.Background(), p, b); out.Held != 2 || len(writesFor(t, f)) != 0 {
		t.Fatalf("outcome = %+v, writes %v", out, writesFor(t, f))
	}
}

// An allocation stopped for a reservation (L10.drain) is reported with its
// reservation (the broker's intent names it too); the next snapshot, given
// that intent back, carries it as stopping for the reservation, not for an
// unknown claimant, so no stop is deferred and it is not chosen again.
func TestExecuteRemembersStopsForAReservation(t *testing.T) {
	f, s := listRecorded(t)
	a, _ := newActor(f, s)
	b := buildFor(t, s, at(t), nil)
	p := &plan.Plan{Actions: []plan.Action{{Action: plan.ActionStop, Alloc: allocC1, Namespace: "workspace-c", Job: "training",
		Group: "train", GPUs: 2, Reservation: "r-1", Rule: plan.RuleDrain, Reason: "drain for r-1"}}}
	out := a.Execute(context.Background(), p, b)
	if out.Stopped != 1 || len(out.Errors) != 0 {
		t.Fatalf("outcome = %+v", out)
	}
	if len(out.Preempted) != 1 || out.Preempted[0].Reservation != "r-1" || !out.Preempted[0].Claimant.IsZero() || out.Preempted[0].Rule != plan.RuleDrain {
		t.Fatalf("preempted = %+v", out.Preempted)
	}
	if al, ok := s.Alloc(allocC1); !ok || !al.Stopping() {
		t.Fatalf("allocation %s not marked stopping in the state", allocC1)
	}
	b = buildFor(t, s, at(t), map[string]string{allocC1: "r-1"})
	if len(b.UnknownStopping) != 0 {
		t.Fatalf("unknown stopping = %v", b.UnknownStopping)
	}
	var got *plan.Allocation
	for i := range b.Snapshot.Allocations {
		if b.Snapshot.Allocations[i].ID == allocC1 {
			got = &b.Snapshot.Allocations[i]
		}
	}
	if got == nil || got.StoppingForReservation != "r-1" || !got.StoppingFor.IsZero() {
		t.Fatalf("allocation = %+v", got)
	}
}

// The allocations of a flex request carry its max_run, kill_timeout and
// admission time, and the core's L11.max_run stop (replacing the adapter's
// EnforceMaxRun) is carried out at admitted + max_run - kill_timeout.
func TestCoreStopsAFlexRequestAtItsMaxRun(t *testing.T) {
	f, s := listRecorded(t)
	a, _ := newActor(f, s)
	j := *raw(s).Jobs[jobC]
	j.Meta = map[string]string{jobmeta.MetaPool: "default", jobmeta.MetaFlexMaxRun: "1h"}
	raw(s).Jobs[jobC] = &j
	admitted := at(t).Add(-time.Hour)
	record := func(k plan.JobKey) build.JobRecord { // the broker's record
		if k == jobC {
			return build.JobRecord{Recorded: true, AdmittedAt: admitted}
		}
		return build.JobRecord{}
	}
	build := func(now time.Time) *build.Build {
		b := build.From(s, build.Input{Now: now, Quota: e2eTree(), Settings: quota.DefaultSettings(),
			Record: record, Accepted: func(plan.JobKey) bool { return true }})
		if b.Invalid != nil || len(b.Left) != 0 {
			t.Fatalf("build: %v, left %v", b.Invalid, b.Left)
		}
		return b
	}
	b := build(at(t))
	var got []plan.Allocation
	for _, al := range b.Snapshot.Allocations {
		if al.JobKey() == jobC {
			got = append(got, plan.Allocation{ID: al.ID, KillTimeout: al.KillTimeout, MaxRun: al.MaxRun, AdmittedAt: al.AdmittedAt})
		}
	}
	want := []plan.Allocation{
		{ID: allocC1, KillTimeout: 2 * time.Minute, MaxRun: time.Hour, AdmittedAt: admitted},
		{ID: allocC2, KillTimeout: 2 * time.Minute, MaxRun: time.Hour, AdmittedAt: admitted},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("allocations (-want +got):\n%s", diff)
	}
	stopAt := admitted.Add(time.Hour - 2*time.Minute)
	for _, c := range []struct {
		now  time.Time
		stop bool
	}{{stopAt.Add(-time.Second), false}, {stopAt, true}} {
		b := build(c.now)
		p, err := plan.Compute(b.Snapshot)
		if err != nil {
			t.Fatal(err)
		}
		var stops []plan.Action
		for _, act := range p.Actions {
			if act.Action == plan.ActionStopJob {
				stops = append(stops, act)
			}
		}
		if !c.stop {
			if len(stops) != 0 || !p.WakeAt.Equal(stopAt) {
				t.Fatalf("at %v: stops %+v, wake_at %v (want %v)", c.now, stops, p.WakeAt, stopAt)
			}
			continue
		}
		if len(stops) != 1 || stops[0].Rule != plan.RuleFlexMaxRun || stops[0].Job != "training" {
			t.Fatalf("at %v: stops %+v", c.now, stops)
		}
		out := a.Execute(context.Background(), p, b)
		w := writesFor(t, f)
		if out.JobsStopped != 1 || len(w) != 1 || w[0].Method != "DELETE" || w[0].Path != "/v1/job/training" {
			t.Fatalf("outcome %+v, writes %v", out, w)
		}
	}
}
