package build

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/nomad/policies"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// TestBuildMakesPrewarmFromSchedulePolicies: the schedule policy of
// workspace-a/inference/server ("mon-fri 08:00-22:00 4", default 1, UTC,
// evaluation_interval 1m) becomes a pre-warm entry when its 08:00 boundary
// is within drain_horizon (1h) of now: 3 more allocations of 4 GPUs at
// 08:00, held until 08:00 + 1m + settle 30s. Further ahead, or with the
// policies not synced, there is none.
func TestBuildMakesPrewarmFromSchedulePolicies(t *testing.T) {
	f, s := listRecorded(t)
	servePolicies(f, 20)
	log, _ := testLogger(t)
	pols := policies.NewPolicies()
	if _, err := (&policies.PolicyWatcher{Client: f.Client(), Governed: governedABC, Policies: pols, Logger: log}).Sync(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	boundary := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC) // a Monday
	b := idleBuild(t, s, pols, claimTree(), boundary.Add(-30*time.Minute))
	want := []plan.Prewarm{{Namespace: "workspace-a", Job: "inference", Group: "server", Type: plan.JobService,
		Priority: 80, GPUs: 4, NodePool: "default", At: boundary, Count: 3,
		Until: boundary.Add(time.Minute + 30*time.Second), Flavors: []string{"gpu"}}}
	if diff := cmp.Diff(want, b.Snapshot.Prewarm); diff != "" {
		t.Fatalf("prewarm (-want +got):\n%s", diff)
	}
	if b := idleBuild(t, s, pols, claimTree(), boundary.Add(-61*time.Minute)); len(b.Snapshot.Prewarm) != 0 {
		t.Fatalf("61m ahead: prewarm %+v, want none (beyond drain_horizon)", b.Snapshot.Prewarm)
	}
	if b := idleBuild(t, s, pols, claimTree(), boundary); len(b.Snapshot.Prewarm) != 0 {
		t.Fatalf("at the boundary: prewarm %+v, want none (the next one, 22:00, lowers the count)", b.Snapshot.Prewarm)
	}
	pols.Unsynced()
	if b := idleBuild(t, s, pols, claimTree(), boundary.Add(-30*time.Minute)); len(b.Snapshot.Prewarm) != 0 {
		t.Fatalf("policies not synced: prewarm %+v, want none", b.Snapshot.Prewarm)
	}
}

// TestPrewarmCountIsCappedAtThePolicyMax: the Autoscaler clamps the
// schedule's count to the policy's max before it scales, so pre-warm
// drains for no more: window count 4, max 2, current 1 gives 1 allocation
// (not 3); max 1, the current count, gives no pre-warm at all.
func TestPrewarmCountIsCappedAtThePolicyMax(t *testing.T) {
	boundary := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC) // a Monday
	for _, tc := range []struct {
		max  string
		want []plan.Prewarm
	}{
		{"2", []plan.Prewarm{{Namespace: "workspace-a", Job: "inference", Group: "server", Type: plan.JobService,
			Priority: 80, GPUs: 4, NodePool: "default", At: boundary, Count: 1,
			Until: boundary.Add(time.Minute + 30*time.Second), Flavors: []string{"gpu"}}}},
		{"1", nil},
	} {
		f, s := listRecorded(t)
		servePolicies(f, 20)
		f.Mu.Lock()
		path := "/v1/scaling/policy/pol-sched"
		body := strings.Replace(f.Bodies[path], `"Max": 8`, `"Max": `+tc.max, 1)
		if body == f.Bodies[path] {
			t.Fatalf("the fixture of %s has no \"Max\": 8", path)
		}
		f.Bodies[path] = body
		f.Mu.Unlock()
		log, _ := testLogger(t)
		pols := policies.NewPolicies()
		if _, err := (&policies.PolicyWatcher{Client: f.Client(), Governed: governedABC, Policies: pols, Logger: log}).Sync(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		b := idleBuild(t, s, pols, claimTree(), boundary.Add(-30*time.Minute))
		if diff := cmp.Diff(tc.want, b.Snapshot.Prewarm); diff != "" {
			t.Errorf("max %s: prewarm (-want +got):\n%s", tc.max, diff)
		}
	}
}

// TestPrewarmHoldWithoutIntervalLastsTheAgentsDefault: a schedule policy
// that sets no evaluation_interval is evaluated at the Autoscaler agent's
// default_evaluation_interval, which the tree's settings give as
// autoscaler_evaluation_interval; the hold lasts at + that + settle (30s),
// and the Autoscaler's own 10s default when the setting is absent (zero).
func TestPrewarmHoldWithoutIntervalLastsTheAgentsDefault(t *testing.T) {
	boundary := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC) // a Monday
	for _, tc := range []struct {
		setting time.Duration
		want    time.Time
	}{
		{time.Minute, boundary.Add(time.Minute + 30*time.Second)},
		{0, boundary.Add(10*time.Second + 30*time.Second)},
	} {
		f, s := listRecorded(t)
		servePolicies(f, 20)
		f.Mu.Lock()
		path := "/v1/scaling/policy/pol-sched"
		body := strings.Replace(f.Bodies[path], `"evaluation_interval": "1m",`, ``, 1)
		if body == f.Bodies[path] {
			t.Fatalf("the fixture of %s has no evaluation_interval", path)
		}
		f.Bodies[path] = body
		f.Mu.Unlock()
		log, _ := testLogger(t)
		pols := policies.NewPolicies()
		if _, err := (&policies.PolicyWatcher{Client: f.Client(), Governed: governedABC, Policies: pols, Logger: log}).Sync(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		set := quota.DefaultSettings()
		set.AutoscalerEvaluationInterval = tc.setting
		b := From(s, Input{Now: boundary.Add(-30 * time.Minute), Quota: claimTree(), Settings: set,
			Accepted: func(plan.JobKey) bool { return true }, Policies: pols})
		if b.Invalid != nil || len(b.Left) != 0 {
			t.Fatalf("Build: invalid %v, left %v", b.Invalid, b.Left)
		}
		if len(b.Snapshot.Prewarm) != 1 || !b.Snapshot.Prewarm[0].Until.Equal(tc.want) {
			t.Errorf("autoscaler_evaluation_interval %v: prewarm %+v, want one held until %v", tc.setting, b.Snapshot.Prewarm, tc.want)
		}
	}
}
