package build

import (
	"bytes"
	"testing"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/snapshot"
)

// The snapshots the agent dumps (dump_dir) are valid snapshot documents, so
// "gputide plan" replays them and gets the agent's plan.
func TestBuiltSnapshotsReplayWithGputidePlan(t *testing.T) {
	_, s := listRecorded(t)
	s.MarkStopping(allocC2)
	b := From(s, Input{Now: at(t), Quota: e2eTree(), Settings: quota.DefaultSettings(),
		Stopping: map[string]plan.GroupKey{}, Accepted: func(plan.JobKey) bool { return true }})
	var buf bytes.Buffer
	if err := snapshot.Encode(&buf, b.Snapshot); err != nil {
		t.Fatal(err)
	}
	back, err := snapshot.Decode(&buf)
	if err != nil {
		t.Fatalf("the dumped snapshot does not decode: %v", err)
	}
	p1, err := plan.Compute(b.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := plan.Compute(back)
	if err != nil {
		t.Fatal(err)
	}
	var o1, o2 bytes.Buffer
	_ = snapshot.EncodePlan(&o1, p1)
	_ = snapshot.EncodePlan(&o2, p2)
	if o1.String() != o2.String() {
		t.Fatalf("replayed plan differs:\n%s\n---\n%s", o1.String(), o2.String())
	}
}
