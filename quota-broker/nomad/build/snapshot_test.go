package build

import (
	"strings"
	"testing"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

func TestBuildMakesTheSnapshotOfTheRecording(t *testing.T) {
	_, s := listRecorded(t)
	b := From(s, Input{Now: at(t), Quota: e2eTree(), Settings: quota.DefaultSettings(),
		Accepted: func(plan.JobKey) bool { return true }})
	snap := b.Snapshot
	if len(snap.Nodes) != 1 || len(snap.Nodes[0].GPUs) != 8 {
		t.Fatalf("nodes = %+v", snap.Nodes)
	}
	if len(snap.Allocations) != 3 {
		t.Fatalf("allocations = %+v, want 3", snap.Allocations)
	}
	byID := map[string]plan.Allocation{}
	for _, a := range snap.Allocations {
		byID[a.ID] = a
	}
	a := byID[allocA]
	if a.Namespace != "workspace-a" || a.Job != "inference" || a.Group != "server" || a.Type != plan.JobService ||
		a.Priority != 80 || a.GPUs() != 4 || a.Node != node || !a.StoppingFor.IsZero() || a.Idle {
		t.Fatalf("inference allocation = %+v", a)
	}
	c := byID[allocC1]
	if c.Type != plan.JobBatch || c.Priority != 50 || c.GPUs() != 2 || c.StartedAt.IsZero() {
		t.Fatalf("training allocation = %+v", c)
	}
	// Only workspace-b/training is pending: the bad-meta jobs are left out.
	if len(snap.Pending) != 1 {
		t.Fatalf("pending = %+v, want only workspace-b/training", snap.Pending)
	}
	p := snap.Pending[0]
	if p.Namespace != "workspace-b" || p.Job != "training" || p.Group != "worker" || p.Count != 1 || p.GPUs != 3 ||
		p.Type != plan.JobBatch || p.Priority != 50 || p.NodePool != "default" || p.Datacenters != nil || p.Flex != nil {
		t.Fatalf("pending = %+v", p)
	}
	// The broker wrote gputide_submitted when it wrote the wait reason.
	if p.SubmittedAt.IsZero() || p.SubmittedAt.After(at(t)) {
		t.Fatalf("submitted = %v", p.SubmittedAt)
	}
	for _, k := range []plan.JobKey{{Namespace: "workspace-c", Job: "bad-idle"}, {Namespace: "workspace-c", Job: "bad-maxrun"}} {
		if b.Jobs[k].MetaErr == nil {
			t.Fatalf("%s: no meta error", k)
		}
	}
	if got := b.Jobs[plan.JobKey{Namespace: "workspace-c", Job: "bad-idle"}].MetaErr.Error(); got != `job meta gputide_idle = "maybe": want "true" or "false"` {
		t.Fatalf("bad-idle error = %q", got)
	}
	if got := b.Jobs[plan.JobKey{Namespace: "workspace-c", Job: "bad-maxrun"}].MetaErr.Error(); got != `job meta gputide_flex_max_run = "-1h": must be more than 0` {
		t.Fatalf("bad-maxrun error = %q", got)
	}
	// The core agrees: workspace-b/training waits, naming the quota and numbers.
	pl, err := plan.Compute(snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Actions) != 1 || pl.Actions[0].Action != plan.ActionWait || !strings.Contains(pl.Actions[0].Reason, "8 of 8 GPUs") {
		t.Fatalf("plan = %+v", pl.Actions)
	}
}

func TestBuildMarksStoppingAllocations(t *testing.T) {
	_, s := listRecorded(t)
	s.MarkStopping(allocC1)
	s.MarkStopping(allocC2)
	b := From(s, Input{Now: at(t), Quota: e2eTree(), Stopping: map[string]plan.GroupKey{allocC1: (plan.GroupKey{Namespace: "workspace-a", Job: "inference", Group: "server"})},
		Accepted: func(plan.JobKey) bool { return true }})
	for _, a := range b.Snapshot.Allocations {
		switch a.ID {
		case allocC1:
			if a.StoppingFor != (plan.GroupKey{Namespace: "workspace-a", Job: "inference", Group: "server"}) {
				t.Fatalf("known stop: StoppingFor = %v", a.StoppingFor)
			}
		case allocC2:
			if a.StoppingFor != UnknownClaimant {
				t.Fatalf("unknown stop: StoppingFor = %v", a.StoppingFor)
			}
		}
	}
	if len(b.UnknownStopping) != 1 || b.UnknownStopping[0] != allocC2 {
		t.Fatalf("UnknownStopping = %v", b.UnknownStopping)
	}
}

func TestBuildTreatsAStraightRegistrationAsPending(t *testing.T) {
	_, s := listRecorded(t)
	b := From(s, Input{Now: at(t), Quota: e2eTree(),
		Accepted: func(k plan.JobKey) bool { return k != (plan.JobKey{Namespace: "workspace-c", Job: "training"}) }})
	v := b.Jobs[plan.JobKey{Namespace: "workspace-c", Job: "training"}]
	if !v.Direct || v.Pending != 2 {
		t.Fatalf("view = %+v, want direct with 2 pending", v)
	}
	for _, a := range b.Snapshot.Allocations {
		if a.Namespace == "workspace-c" {
			t.Fatalf("allocation %s of the direct job is in the snapshot", a.ID)
		}
	}
}
