package build

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// A flex request the broker did not admit in this process (running when it
// started) counts max_run from its earliest allocation start; a job that is
// not flex gets no admission time it does not know.
func TestTimedAllocationsFallBackToTheFirstStartForFlex(t *testing.T) {
	_, s := listRecorded(t)
	j := *raw(s).Jobs[jobC]
	j.Meta = map[string]string{jobmeta.MetaPool: "default", jobmeta.MetaFlexMaxRun: "1h"}
	raw(s).Jobs[jobC] = &j
	b := From(s, Input{Now: at(t), Quota: e2eTree(), Settings: quota.DefaultSettings(), Accepted: func(plan.JobKey) bool { return true }})
	first := time.Time{}
	for _, id := range []string{allocC1, allocC2} {
		if st := raw(s).Allocs[id].StartedAt; first.IsZero() || st.Before(first) {
			first = st
		}
	}
	for _, al := range b.Snapshot.Allocations {
		switch {
		case al.JobKey() == jobC && (!al.AdmittedAt.Equal(first) || first.IsZero()):
			t.Errorf("%s admitted at %v, want the first start %v", al.ID, al.AdmittedAt, first)
		case al.JobKey() != jobC && (!al.AdmittedAt.IsZero() || al.MaxRun != 0 || al.KillTimeout <= 0):
			t.Errorf("%s: admitted %v, max_run %v, kill_timeout %v", al.ID, al.AdmittedAt, al.MaxRun, al.KillTimeout)
		}
	}
}

// A pending group's place in the order of L3 comes from the broker's
// first_seen (FirstSeen), not Nomad's SubmitTime, and its queue time from
// queued_at (Requeued) when the broker queued it again after first seeing
// it (DESIGN L11); a queued_at not after first_seen leaves QueuedAt zero.
func TestBuildOrdersPendingByFirstSeenAndQueuesFromQueuedAt(t *testing.T) {
	_, s := listRecorded(t)
	jobB := plan.JobKey{Namespace: "workspace-b", Job: "training"}
	seen, queued := at(t).Add(-3*time.Hour), at(t).Add(-time.Hour)
	build := func(first, requeued time.Time) plan.Pending {
		b := From(s, Input{Now: at(t), Quota: claimTree(), Settings: quota.DefaultSettings(),
			Accepted: func(plan.JobKey) bool { return true },
			Record: func(k plan.JobKey) JobRecord {
				if k != jobB {
					return JobRecord{}
				}
				return JobRecord{Recorded: true, FirstSeen: first, QueuedAt: requeued}
			}})
		for _, pg := range b.Snapshot.Pending {
			if pg.JobKey() == jobB {
				return plan.Pending{SubmittedAt: pg.SubmittedAt, QueuedAt: pg.QueuedAt}
			}
		}
		t.Fatalf("workspace-b/training is not pending: %+v", b.Snapshot.Pending)
		return plan.Pending{}
	}
	submittedB := jobmeta.Submitted(s.Job("workspace-b", "training"))
	if submittedB.IsZero() || submittedB.Equal(seen) {
		t.Fatalf("recorded submission %v", submittedB)
	}
	for _, c := range []struct {
		name            string
		first, requeued time.Time
		want            plan.Pending
	}{
		{"no record", time.Time{}, time.Time{}, plan.Pending{SubmittedAt: submittedB}},
		{"first seen", seen, seen, plan.Pending{SubmittedAt: seen}},
		{"requeued", seen, queued, plan.Pending{SubmittedAt: seen, QueuedAt: queued}},
	} {
		if diff := cmp.Diff(c.want, build(c.first, c.requeued)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}
