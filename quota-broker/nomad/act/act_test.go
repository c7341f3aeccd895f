package act

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gputide/gputide/quota-broker/nomad/build"

	"github.com/gputide/gputide/quota-broker/nomad/watch"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/hashicorp/nomad/api"
)

func newActor(f *fakeNomad, s *watch.State) (*Actor, *syncBuffer) {
	log, buf := testLogger(f.T)
	return &Actor{Client: f.Client(), State: s, Logger: log, Workers: 1}, buf
}

func planFor(t *testing.T, s *watch.State, a *Actor, tree *quota.Node) (*plan.Plan, *build.Build) {
	t.Helper()
	return planStopping(t, s, tree, nil)
}

// planStopping plans s with stopping, the claimants of allocations being
// stopped, as the broker reads them back from its intents.
func planStopping(t *testing.T, s *watch.State, tree *quota.Node, stopping map[string]plan.GroupKey) (*plan.Plan, *build.Build) {
	t.Helper()
	b := build.From(s, build.Input{Now: at(t), Quota: tree, Settings: quota.DefaultSettings(), Stopping: stopping,
		Accepted: func(plan.JobKey) bool { return true }})
	p, err := plan.Compute(b.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	return p, b
}

func TestExecuteMovesTheVictimToTheHoldingPoolBeforeStoppingIt(t *testing.T) {
	f, s := listRecorded(t)
	a, log := newActor(f, s)
	p, b := planFor(t, s, a, claimTree())
	// The core's plan: workspace-c/training (priority 50, below inference's
	// 80) is the victim, whole, then workspace-b/training is admitted.
	var kinds []string
	for _, act := range p.Actions {
		kinds = append(kinds, string(act.Action)+" "+act.Namespace+"/"+act.Job+" "+act.Alloc)
	}
	wantPlan := []string{"stop workspace-c/training " + allocC1, "stop workspace-c/training " + allocC2, "admit workspace-b/training "}
	if strings.Join(kinds, "|") != strings.Join(wantPlan, "|") {
		t.Fatalf("plan = %q, want %q", kinds, wantPlan)
	}
	out := a.Execute(context.Background(), p, b)
	if len(out.Errors) != 0 || out.Stopped != 2 || out.Admitted != 1 || out.MetaWrites != 2 {
		t.Fatalf("outcome = %+v", out)
	}
	w := f.Writes()
	if len(w) != 6 {
		t.Fatalf("writes = %v, want 6", w)
	}
	// 1. the victim's job goes to the holding pool, with the index enforced.
	j, enforce, idx := registered(t, w[0])
	if w[0].Path != "/v1/jobs" || str(j.Namespace) != "workspace-c" || str(j.ID) != "training" ||
		str(j.NodePool) != build.DefaultHoldingPool || !enforce || idx != *j.JobModifyIndex {
		t.Fatalf("first write = %s job %s/%s pool %s enforce %v", w[0], str(j.Namespace), str(j.ID), str(j.NodePool), enforce)
	}
	if _, changed := j.Meta[jobmeta.MetaStatus]; changed {
		t.Fatal("the victim's meta was changed while it has running allocations")
	}
	// 2, 3. then its allocations are stopped.
	if w[1].String() != "PUT /v1/allocation/"+allocC1+"/stop" || w[2].String() != "PUT /v1/allocation/"+allocC2+"/stop" {
		t.Fatalf("stops = %s, %s", w[1], w[2])
	}
	// 4. the claimant moves to its pool, its wait reason cleared.
	j, _, _ = registered(t, w[3])
	if str(j.Namespace) != "workspace-b" || str(j.NodePool) != "default" || j.Meta[jobmeta.MetaStatus] != "" || j.Meta[jobmeta.MetaPool] != "default" {
		t.Fatalf("admission = %s/%s pool %s meta %v", str(j.Namespace), str(j.ID), str(j.NodePool), j.Meta)
	}
	// 5, 6. the jobs with bad meta get the error in their meta, in the holding pool.
	var errs []string
	for _, r := range w[4:] {
		j, _, _ := registered(t, r)
		if str(j.NodePool) != build.DefaultHoldingPool || j.Meta[jobmeta.MetaStatus] != StatusError {
			t.Fatalf("meta write = %s pool %s meta %v", str(j.ID), str(j.NodePool), j.Meta)
		}
		errs = append(errs, str(j.ID)+": "+j.Meta[jobmeta.MetaReason])
	}
	sort.Strings(errs)
	want := []string{`bad-idle: job meta gputide_idle = "maybe": want "true" or "false"`,
		`bad-maxrun: job meta gputide_flex_max_run = "-1h": must be more than 0`}
	if strings.Join(errs, "|") != strings.Join(want, "|") {
		t.Fatalf("meta errors = %q", errs)
	}
	if !strings.Contains(log.String(), `gputide_idle = \"maybe\"`) {
		t.Fatalf("the meta error is not in the log:\n%s", log.String())
	}
	// Every preemption and every move is reported, for the broker to count
	// and record (L8).
	wantStops := []Stop{
		{Claimant: plan.GroupKey{Namespace: "workspace-b", Job: "training", Group: "worker"}, Namespace: "workspace-c", Job: "training", Alloc: allocC1, Node: p.Actions[0].Node,
			GPUs: 2, Rule: plan.RuleChild, Reason: p.Actions[0].Reason},
		{Claimant: plan.GroupKey{Namespace: "workspace-b", Job: "training", Group: "worker"}, Namespace: "workspace-c", Job: "training", Alloc: allocC2, Node: p.Actions[1].Node,
			GPUs: p.Actions[1].GPUs, Rule: plan.RuleChild, Reason: p.Actions[1].Reason},
	}
	if diff := cmp.Diff(wantStops, out.Preempted, cmpopts.IgnoreFields(Stop{}, "Time")); diff != "" {
		t.Errorf("preempted (-want +got):\n%s", diff)
	}
	wantMoves := []Move{{Namespace: "workspace-c", Job: "training", Pool: build.DefaultHoldingPool},
		{Namespace: "workspace-b", Job: "training", Pool: "default", Admission: true}}
	if diff := cmp.Diff(wantMoves, out.Moves); diff != "" {
		t.Errorf("moves (-want +got):\n%s", diff)
	}
	if len(out.Failed) != 0 {
		t.Errorf("failed = %v", out.Failed)
	}
	// The next plan, given the stops back as the broker's intents give
	// them, does not stop them again, and keeps their GPUs for the claimant.
	stopping := map[string]plan.GroupKey{}
	for _, st := range out.Preempted {
		stopping[st.Alloc] = st.Claimant
	}
	p2, b2 := planStopping(t, s, claimTree(), stopping)
	for _, act := range p2.Actions {
		if act.Action == plan.ActionStop {
			t.Fatalf("second plan stops again: %+v", act)
		}
	}
	if v := b2.Jobs[plan.JobKey{Namespace: "workspace-c", Job: "training"}]; !v.Holding {
		t.Fatal("the victim's job is not in the holding pool in the broker's state")
	}
}

func TestExecuteDefersStopsWhileAllocationsStopForAnUnknownClaimant(t *testing.T) {
	f, s := listRecorded(t)
	a, log := newActor(f, s)
	// After a restart: inference is being stopped, for whom the broker
	// cannot tell.
	s.MarkStopping(allocA)
	p, b := planFor(t, s, a, claimTree())
	out := a.Execute(context.Background(), p, b)
	if out.Deferred == 0 || out.Stopped != 0 || out.Admitted != 0 {
		t.Fatalf("outcome = %+v, plan = %+v", out, p.Actions)
	}
	for _, r := range f.Writes() {
		if strings.HasSuffix(r.Path, "/stop") {
			t.Fatalf("stopped while deferring: %s", r)
		}
		if j, _, _ := registered(t, r); str(j.ID) == "training" {
			t.Fatalf("moved a training job while deferring: %s/%s", str(j.Namespace), str(j.ID))
		}
	}
	if !strings.Contains(log.String(), "deferring preemption") {
		t.Fatalf("no log:\n%s", log.String())
	}
}

func TestDryRunCallsNothing(t *testing.T) {
	f, s := listRecorded(t)
	a, log := newActor(f, s)
	a.DryRun = true
	p, b := planFor(t, s, a, claimTree())
	a.Execute(context.Background(), p, b)
	if w := f.Writes(); len(w) != 0 {
		t.Fatalf("dry run wrote: %v", w)
	}
	if !strings.Contains(log.String(), "dry run: would preempt") || !strings.Contains(log.String(), "dry run: would admit") {
		t.Fatalf("dry run did not log the plan:\n%s", log.String())
	}
}

func TestExecuteSuspendsAStraightRegistrationL3DoesNotAdmit(t *testing.T) {
	f, s := listRecorded(t)
	a, _ := newActor(f, s)
	// workspace-c/training was registered straight into "default"; its
	// quota (C) is now 1 GPU, so L3 does not admit its 4.
	tree := claimTree()
	tree.Children[0].GPUs = quota.Plain(1)
	b := build.From(s, build.Input{Now: at(t), Quota: tree, Accepted: func(k plan.JobKey) bool { return k != (plan.JobKey{Namespace: "workspace-c", Job: "training"}) }})
	p, err := plan.Compute(b.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	out := a.Execute(context.Background(), p, b)
	if out.Suspended != 1 {
		t.Fatalf("outcome = %+v, plan = %+v", out, p.Actions)
	}
	moved := -1
	stops := map[string]bool{}
	for i, r := range f.Writes() {
		if strings.HasSuffix(r.Path, "/stop") {
			if moved < 0 {
				t.Fatalf("stop %s before the job moved to the holding pool", r.Path)
			}
			stops[r.Path] = true
			continue
		}
		if j, _, _ := registered(t, r); str(j.Namespace) == "workspace-c" && str(j.ID) == "training" {
			if str(j.NodePool) != build.DefaultHoldingPool {
				t.Fatalf("suspension moved it to %q", str(j.NodePool))
			}
			moved = i
		}
	}
	if len(stops) != 2 || !stops["/v1/allocation/"+allocC1+"/stop"] || !stops["/v1/allocation/"+allocC2+"/stop"] {
		t.Fatalf("stops = %v", stops)
	}
}

func TestRegisterRefusesMetaOnAJobWithLiveAllocations(t *testing.T) {
	f, s := listRecorded(t)
	a, _ := newActor(f, s)
	v := &build.JobView{Key: plan.JobKey{Namespace: "workspace-a", Job: "inference"}}
	status := "x"
	_, err := a.register(context.Background(), v, "", map[string]*string{jobmeta.MetaStatus: &status}, false)
	if err == nil || !strings.Contains(err.Error(), "1 live allocations") {
		t.Fatalf("err = %v", err)
	}
	if len(f.Writes()) != 0 {
		t.Fatal("wrote meta on a running job")
	}
}

func TestExecuteAdmitsAJobThatAsksForNoGPUAtOnce(t *testing.T) {
	f, s := listRecorded(t)
	data, err := os.ReadFile(filepath.Join(recorded, "job-workspace-b-training.json"))
	if err != nil {
		t.Fatal(err)
	}
	var j api.Job
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	id := "web"
	j.ID, j.Name = &id, &id
	j.Meta = map[string]string{jobmeta.MetaPool: "default"}
	j.TaskGroups[0].Tasks[0].Resources.Devices = nil
	raw(s).Jobs[plan.JobKey{Namespace: "workspace-b", Job: "web"}] = &j
	a, _ := newActor(f, s)
	p, b := planFor(t, s, a, e2eTree())
	if len(b.NoGPU) != 1 || b.NoGPU[0] != (plan.JobKey{Namespace: "workspace-b", Job: "web"}) {
		t.Fatalf("NoGPU = %v", b.NoGPU)
	}
	f.Files["/v1/job/web?namespace=workspace-b"] = "job-workspace-b-training.json"
	out := a.Execute(context.Background(), p, b)
	if out.Admitted != 1 {
		t.Fatalf("outcome = %+v", out)
	}
	got, _, _ := registered(t, f.Writes()[0])
	if str(got.NodePool) != "default" {
		t.Fatalf("admitted into %q", str(got.NodePool))
	}
}

// A failed call is reported by its action; the claimant of a failed stop is
// not admitted and nothing is reported preempted or moved for it.
func TestExecuteReportsAFailedStopAndSkipsItsClaimant(t *testing.T) {
	f, s := listRecorded(t)
	a, _ := newActor(f, s)
	p, b := planFor(t, s, a, claimTree())
	f.Mu.Lock()
	f.Reject = func(ns, id string, _ uint64) string { // the victim's job cannot be moved
		if ns == "workspace-c" && id == "training" {
			return "Permission denied"
		}
		return ""
	}
	f.Mu.Unlock()
	out := a.Execute(context.Background(), p, b)
	if diff := cmp.Diff([]string{"stop"}, out.Failed); diff != "" {
		t.Errorf("failed (-want +got):\n%s", diff)
	}
	if len(out.Errors) != 1 || !strings.Contains(out.Errors[0].Error(), "failed to move victim job workspace-c/training to the holding pool") {
		t.Errorf("errors = %v", out.Errors)
	}
	if out.Stopped != 0 || out.Admitted != 0 || len(out.Preempted) != 0 || len(out.Moves) != 0 || out.MetaWrites != 2 {
		t.Fatalf("outcome = %+v", out)
	}
}
