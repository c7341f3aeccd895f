package e2e

// End-to-end test of the broker's scaling policy watcher (issue 11 item 5)
// on a real Nomad dev agent (NOMAD_BIN): policies written in jobspecs are
// read by the blocking list and GetPolicy, parsed as the Autoscaler reads
// them, and a change ends the blocking query. Also checks on the real agent
// that the Scale API refuses a stale JobModifyIndex, which the broker's
// scale-down relies on.

import (
	"context"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/act"
	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/gputide/gputide/quota-broker/nomad/policies"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

func TestPolicyWatcherReadsPoliciesFromNomad(t *testing.T) {
	needNomad(t)
	a := newNomadAgent(t, nomadOptions{})
	c := a.Client
	idleCheck := map[string]any{"check": []any{map[string]any{"fit": []any{map[string]any{
		"source": "gputide-apm", "query": `idle_fit{namespace="default",job="e2e-pol",group="train"}`,
		"strategy": []any{map[string]any{"gputide-idle": []any{map[string]any{}}}}}}}},
		"evaluation_interval": "1m", "cooldown_on_scale_up": "2m"}
	schedCheck := func(count int) map[string]any {
		return map[string]any{"check": []any{map[string]any{"day-night": []any{map[string]any{
			"source": "gputide-apm", "query": "schedule",
			"strategy": []any{map[string]any{"gputide-schedule": []any{map[string]any{
				"window_day": "mon-fri 08:00-22:00 " + strconv.Itoa(count), "default_count": 1, "timezone": "Europe/Berlin"}}}}}}}},
			"evaluation_interval": "1m"}
	}
	task := func() []*api.Task {
		return []*api.Task{{Name: "sleep", Driver: "raw_exec",
			Config:    map[string]any{"command": "/bin/sleep", "args": []string{"3600"}},
			Resources: &api.Resources{CPU: ptr(10), MemoryMB: ptr(10)}}}
	}
	job := func(count int) *api.Job {
		return &api.Job{ID: ptr("e2e-pol"), Name: ptr("e2e-pol"), Type: ptr("batch"), Datacenters: []string{"dc1"},
			TaskGroups: []*api.TaskGroup{
				{Name: ptr("train"), Count: ptr(1), Tasks: task(),
					Scaling: &api.ScalingPolicy{Min: ptr(int64(1)), Max: ptr(int64(12)), Enabled: ptr(true), Policy: idleCheck}},
				{Name: ptr("serve"), Count: ptr(1), Tasks: task(),
					Scaling: &api.ScalingPolicy{Min: ptr(int64(1)), Max: ptr(int64(8)), Enabled: ptr(true), Policy: schedCheck(count)}},
			}}
	}
	if _, _, err := c.Jobs().Register(job(4), nil); err != nil {
		t.Fatal(err)
	}
	pols := policies.NewPolicies()
	w := &policies.PolicyWatcher{Client: c, Policies: pols, Logger: hclog.New(&hclog.LoggerOptions{Output: io.Discard}), Wait: 20 * time.Second}
	ctx := context.Background()
	index, err := w.Sync(ctx, 0)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	idle := pols.IdlePolicies()
	if len(idle) != 1 || idle[0].Group.Group != "train" || idle[0].Group.Namespace != "default" || idle[0].Max != 12 ||
		idle[0].Min != 1 || idle[0].EvaluationInterval != time.Minute || len(idle[0].Checks) != 1 || idle[0].Checks[0].Name != "fit" {
		t.Fatalf("IdlePolicies = %+v", idle)
	}
	sched := pols.SchedulePolicies()
	if len(sched) != 1 || sched[0].Group.Group != "serve" || sched[0].Checks[0].Config["window_day"] != "mon-fri 08:00-22:00 4" ||
		sched[0].Checks[0].Config["default_count"] != "1" || sched[0].Checks[0].Config["timezone"] != "Europe/Berlin" {
		t.Fatalf("SchedulePolicies = %+v", sched)
	}

	// A blocking query from the list's index returns when a policy changes.
	done := make(chan error, 1)
	start := time.Now()
	go func() { _, err := w.Sync(ctx, index); done <- err }()
	time.Sleep(500 * time.Millisecond)
	if _, _, err := c.Jobs().Register(job(6), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the blocking query did not return after the change")
	}
	if got := pols.SchedulePolicies(); len(got) != 1 || got[0].Checks[0].Config["window_day"] != "mon-fri 08:00-22:00 6" {
		t.Fatalf("after the change: %+v (blocked %s)", got, time.Since(start))
	}

	// The Scale API enforces JobModifyIndex: a stale one is refused.
	j, _, err := c.Jobs().Info("e2e-pol", nil)
	if err != nil {
		t.Fatal(err)
	}
	scale := func(index uint64) error {
		_, _, err := c.Jobs().ScaleWithRequest("e2e-pol", &api.ScalingRequest{Count: ptr(int64(1)),
			Target: map[string]string{"Namespace": "default", "Job": "e2e-pol", "Group": "train"}, JobModifyIndex: index}, nil)
		return err
	}
	if err := scale(*j.JobModifyIndex - 1); err == nil {
		t.Fatal("Scale with a stale JobModifyIndex succeeded; the broker's scale-down relies on it being refused")
	}
	if err := scale(*j.JobModifyIndex); err != nil {
		t.Fatalf("Scale with the current JobModifyIndex: %v", err)
	}
}

// An idle group whose allocations stay unplaced (it asks for GPUs the dev
// agent does not have) for settle is scaled down by the broker's Actor to
// its live allocations, never below 1: the count read back from Nomad.
func TestActorScalesAnUnplacedIdleGroupDown(t *testing.T) {
	needNomad(t)
	a := newNomadAgent(t, nomadOptions{})
	c := a.Client
	job := &api.Job{ID: ptr("e2e-idle-down"), Name: ptr("e2e-idle-down"), Type: ptr("batch"), Datacenters: []string{"dc1"},
		Meta: map[string]string{"gputide_idle": "true", "gputide_elastic": "true"},
		TaskGroups: []*api.TaskGroup{{Name: ptr("train"), Count: ptr(3),
			Tasks: []*api.Task{{Name: "sleep", Driver: "raw_exec",
				Config: map[string]any{"command": "/bin/sleep", "args": []string{"3600"}},
				Resources: &api.Resources{CPU: ptr(10), MemoryMB: ptr(10),
					Devices: []*api.RequestedDevice{{Name: "nvidia/gpu", Count: ptr(uint64(1))}}}}},
			Scaling: &api.ScalingPolicy{Min: ptr(int64(1)), Max: ptr(int64(12)), Enabled: ptr(true), Policy: map[string]any{
				"check": []any{map[string]any{"fit": []any{map[string]any{"source": "gputide-apm",
					"strategy": []any{map[string]any{"gputide-idle": []any{map[string]any{}}}}}}}}}}}}}
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	log := hclog.New(&hclog.LoggerOptions{Output: io.Discard})
	pols := policies.NewPolicies()
	if _, err := (&policies.PolicyWatcher{Client: c, Policies: pols, Logger: log}).Sync(ctx, 0); err != nil {
		t.Fatal(err)
	}
	tree := &quota.Node{Name: "Root", GPUs: quota.Plain(8), Namespaces: []string{"default"}}
	now := time.Now()
	actor := &act.Actor{Client: c, Logger: log, Now: func() time.Time { return now }}
	// since is the broker's record of when the group was first seen
	// unplaced (the agent's record step writes it; the Actor keeps none).
	var since time.Time
	execute := func() act.Outcome {
		t.Helper()
		s, err := watch.ListAll(ctx, c, func(string) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		actor.State = s
		b := build.From(s, build.Input{Now: now, Quota: tree, Settings: quota.DefaultSettings(), Policies: pols,
			Accepted: func(plan.JobKey) bool { return true }, UnplacedSince: func(plan.GroupKey) time.Time { return since }})
		if len(b.Snapshot.IdleGroups) != 1 || b.Snapshot.IdleGroups[0].Count != 3 {
			t.Fatalf("idle groups %+v; want e2e-idle-down/train at count 3", b.Snapshot.IdleGroups)
		}
		return actor.Execute(ctx, &plan.Plan{}, b)
	}
	if out := execute(); out.ScaledDown != 0 {
		t.Fatalf("scaled down at once: %+v", out)
	}
	since = now // recorded by that first cycle
	now = now.Add(act.DefaultSettle)
	if out := execute(); out.ScaledDown != 1 || len(out.Errors) != 0 {
		t.Fatalf("after settle: %+v; want one scale-down", out)
	}
	j, _, err := c.Jobs().Info("e2e-idle-down", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := *j.TaskGroups[0].Count; got != 1 {
		t.Fatalf("count in Nomad = %d; want 1 (no live allocation, never below 1)", got)
	}
}
