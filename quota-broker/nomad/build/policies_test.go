package build

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/watch"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/nomad/policies"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/hashicorp/nomad/api"
)

const (
	idlePolicyID  = "pol-idle"
	schedPolicyID = "pol-sched"
	otherPolicyID = "pol-other"
)

func TestPolicyWatcherReadsGovernedPoliciesAndOnlyChangedOnes(t *testing.T) {
	f := newFakeNomad(t)
	servePolicies(f, 20)
	log, _ := testLogger(t)
	pols := policies.NewPolicies()
	changes := 0
	w := &policies.PolicyWatcher{Client: f.Client(), Governed: governedABC, Policies: pols, Logger: log, OnChange: func() { changes++ }}
	idx, err := w.Sync(context.Background(), 0)
	if err != nil || idx != 100 || !pols.Synced() {
		t.Fatalf("Sync = %d, %v (synced %v); want 100, nil, synced", idx, err, pols.Synced())
	}
	idle := pols.IdlePolicies()
	if len(idle) != 1 || idle[0].Group != trainingC || idle[0].Max != 6 || idle[0].Min != 1 || idle[0].EvaluationInterval != time.Minute {
		t.Fatalf("IdlePolicies = %+v; want workspace-c/training/worker, min 1, max 6, 1m", idle)
	}
	sched := pols.SchedulePolicies()
	if len(sched) != 1 || sched[0].Group.Job != "inference" || len(sched[0].Checks) != 1 ||
		sched[0].Checks[0].Config["window_day"] != "mon-fri 08:00-22:00 4" || sched[0].Checks[0].Name != "day-night" {
		t.Fatalf("SchedulePolicies = %+v; want inference's day-night check", sched)
	}
	if got := f.Count(http.MethodGet, "/v1/scaling/policy/"+otherPolicyID); got != 0 {
		t.Fatalf("read the ungoverned policy %d times", got)
	}
	// A blocking query that ends without a change reads nothing; a list
	// from 0 with nothing changed reads no policy again. Then the idle one
	// changes.
	if idx, err := w.Sync(context.Background(), 100); err != nil || idx != 100 {
		t.Fatalf("blocking Sync = %d, %v", idx, err)
	}
	if _, err := w.Sync(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if got := f.Count(http.MethodGet, "/v1/scaling/policy/"+idlePolicyID); got != 1 {
		t.Fatalf("idle policy read %d times; want 1 (unchanged)", got)
	}
	servePolicies(f, 21)
	if _, err := w.Sync(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if got, want := [2]int{f.Count(http.MethodGet, "/v1/scaling/policy/"+idlePolicyID), f.Count(http.MethodGet, "/v1/scaling/policy/"+schedPolicyID)}, [2]int{2, 1}; got != want {
		t.Fatalf("policy reads (idle, schedule) = %v; want %v", got, want)
	}
	if changes != 2 {
		t.Fatalf("OnChange called %d times; want 2 (first read, idle change)", changes)
	}
	// The list query is a blocking query on every namespace.
	var lists []string
	for _, r := range f.Requests {
		if r.Path == "/v1/scaling/policies" {
			lists = append(lists, r.Query)
		}
	}
	wantLists := []string{"namespace=%2A&wait=300000ms", "index=100&namespace=%2A&wait=300000ms",
		"namespace=%2A&wait=300000ms", "namespace=%2A&wait=300000ms"}
	if diff := cmp.Diff(wantLists, lists); diff != "" {
		t.Fatalf("list queries (-want +got):\n%s", diff)
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

// idleBuild builds s with pols as a fresh Actor would have it build (it
// stops nothing yet).
func idleBuild(t *testing.T, s *watch.State, pols *policies.Policies, tree *quota.Node, now time.Time) *Build {
	t.Helper()
	b := From(s, Input{Now: now, Quota: tree, Settings: quota.DefaultSettings(),
		Accepted: func(plan.JobKey) bool { return true }, Policies: pols})
	if b.Invalid != nil || len(b.Left) != 0 {
		t.Fatalf("Build: invalid %v, left %v", b.Invalid, b.Left)
	}
	return b
}

func TestBuildMakesIdleGroupsFromIdlePolicies(t *testing.T) {
	_, s, pols := idleState(t, 2)
	b := idleBuild(t, s, pols, claimTree(), at(t))
	want := []plan.IdleGroup{{Namespace: "workspace-c", Job: "training", Group: "worker", Priority: 50, GPUs: 2,
		NodePool: "default", Max: 6, Count: 2, Flavors: []string{"gpu"}}} // datacenters ["*"]: any; the implicit flavor
	if diff := cmp.Diff(want, b.Snapshot.IdleGroups); diff != "" {
		t.Fatalf("idle groups (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[plan.GroupKey]*policies.IdleView{trainingC: {Group: trainingC, Count: 2, Live: 2, JobModifyIndex: 22}}, b.Idle); diff != "" {
		t.Fatalf("idle views (-want +got):\n%s", diff)
	}
	p, err := plan.Compute(b.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	// The plan stops both allocations of the group for workspace-b/training
	// (3 GPUs): their GPUs are freed for that claimant, not for idle fit.
	if n, ok := p.IdleFitOf(trainingC); !ok || n != 0 || len(p.Actions) != 3 {
		t.Fatalf("IdleFitOf = %d, %v after %d actions; want 0, true after 2 stops and an admit", n, ok, len(p.Actions))
	}
	// Without a synced policy set there are no idle groups.
	b = From(s, Input{Now: at(t), Quota: claimTree(), Settings: quota.DefaultSettings(), Policies: policies.NewPolicies()})
	if len(b.Snapshot.IdleGroups) != 0 {
		t.Fatalf("idle groups without policies: %+v", b.Snapshot.IdleGroups)
	}
}

// Run retries after a failure: while Nomad cannot answer the set is not
// synced (no idle group is planned), and it is again once Nomad answers.
func TestPolicyWatcherRunRecoversAfterAFailure(t *testing.T) {
	f := newFakeNomad(t)
	servePolicies(f, 20)
	f.Mu.Lock()
	f.Down = true
	f.Mu.Unlock()
	log, buf := testLogger(t)
	pols := policies.NewPolicies()
	w := &policies.PolicyWatcher{Client: f.Client(), Governed: governedABC, Policies: pols, Logger: log,
		Backoff: 10 * time.Millisecond, Wait: 50 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("a failed list", func() bool { return f.Count(http.MethodGet, "/v1/scaling/policies") >= 2 })
	if pols.Synced() || len(pols.IdlePolicies()) != 0 {
		t.Fatalf("synced %v with %d idle policies while Nomad is down", pols.Synced(), len(pols.IdlePolicies()))
	}
	f.Mu.Lock()
	f.Down = false
	f.Mu.Unlock()
	waitFor("the policies", func() bool { return pols.Synced() && len(pols.IdlePolicies()) == 1 })
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run = %v; want context.Canceled", err)
	}
	if n := strings.Count(buf.String(), "cannot read the scaling policies"); n != 1 {
		t.Fatalf("%d warnings for one failure in a row; want 1:\n%s", n, buf.String())
	}
	if err := (&policies.PolicyWatcher{}).Run(context.Background()); err == nil {
		t.Fatal("Run without Policies: no error")
	}
}

// TestBuildIdleGroupCarriesItsJobsFlavors (DESIGN L13): in a tree of
// flavors h100 and a100, an idle group allows the flavors its job does
// (jobmeta.JobFlavors: its device requests, in the order of gputide_flavors), as
// its pending groups would, so that the core looks for its fit there.
func TestBuildIdleGroupCarriesItsJobsFlavors(t *testing.T) {
	_, s, pols := idleState(t, 2)
	k := trainingC.JobKey()
	j := raw(s).Jobs[k]
	j.Meta["gputide_flavors"] = "a100,h100"
	tree := claimTree()
	tree.Flavors = []quota.Flavor{
		{Name: "h100", Models: []string{"NVIDIA H100 80GB HBM3"}},
		{Name: "a100", Models: []string{"NVIDIA A100-SXM4-40GB"}},
	}
	tree.Walk(func(n *quota.Node) { n.GPUs = quota.Nominal{"h100": n.GPUs.Total()} })
	b := idleBuild(t, s, pols, tree, at(t))
	if len(b.Snapshot.IdleGroups) != 1 {
		t.Fatalf("idle groups: %+v, want one", b.Snapshot.IdleGroups)
	}
	if diff := cmp.Diff([]string{"a100", "h100"}, b.Snapshot.IdleGroups[0].Flavors); diff != "" {
		t.Errorf("idle group flavors (-want +got):\n%s", diff)
	}
}
