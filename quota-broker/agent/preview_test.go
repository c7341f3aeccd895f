package agent

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	nomadapi "github.com/hashicorp/nomad/api"

	brokerapi "github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/plan"
)

// The plan preview reads a job's gputide meta by the adapter's rules: a
// job naming no unended booking of its namespace is a 400 naming the meta
// key and the ID, as the broker's meta error; a valid one previews with
// the booking, flex and pool options the adapter would use.
func TestPreviewOptionsReadsMetaAsTheAdapter(t *testing.T) {
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	res := []plan.Reservation{
		{ID: "r-1", Namespace: "workspace-b", Quota: "Quota1.1", GPUs: 2, Start: now.Add(-time.Hour), End: now.Add(time.Hour)},
		{ID: "r-2", Namespace: "workspace-a", Quota: "Quota1.2", GPUs: 2, Start: now.Add(-time.Hour), End: now.Add(time.Hour)},
		{ID: "r-3", Namespace: "workspace-b", Quota: "Quota1.1", GPUs: 2, Start: now.Add(-time.Hour), End: now},
	}
	job := func(meta map[string]string) (*nomadapi.Job, []plan.Pending) {
		ns, id := "workspace-b", "train"
		j := &nomadapi.Job{Namespace: &ns, ID: &id, Meta: meta}
		return j, []plan.Pending{{Namespace: ns, Job: id, Group: "g", Type: plan.JobBatch, Priority: 50, Count: 1, GPUs: 2,
			NodePool: "gputide-queue", Reservation: meta["gputide_reservation"], SubmittedAt: now}}
	}
	qpools := previewPools{holding: "gputide-queue", admit: []string{"default"}, nomad: map[string]bool{"default": true, "gputide-queue": true, "spare": true}}
	for _, tt := range []struct {
		id, field, msg string
	}{
		{"r-1234abcd", "Job.Meta.gputide_reservation", `job meta gputide_reservation = "r-1234abcd": no unended booking of namespace "workspace-b" has this ID`},
		{"r-2", "Job.Meta.gputide_reservation", `job meta gputide_reservation = "r-2": no unended booking of namespace "workspace-b" has this ID`},
		{"r-3", "Job.Meta.gputide_reservation", `job meta gputide_reservation = "r-3": the booking of namespace "workspace-b" ended at 2026-12-07T08:00:00Z; name an unended booking`},
	} {
		j, groups := job(map[string]string{"gputide_reservation": tt.id})
		_, err := previewOptions(j, groups, qpools, res, now)
		var p *brokerapi.Problem
		if !errors.As(err, &p) {
			t.Fatalf("%s: error %v, want a *api.Problem", tt.id, err)
		}
		if diff := cmp.Diff(brokerapi.Problem{Status: http.StatusBadRequest, Field: tt.field, Msg: tt.msg}, *p); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.id, diff)
		}
	}
	j, groups := job(map[string]string{"gputide_flex_max_run": "4h", "gputide_reservation": "r-1"})
	if _, err := previewOptions(j, groups, qpools, res, now); err == nil ||
		err.Error() != `job meta gputide_reservation = "r-1": cannot be combined with gputide_flex_max_run = "4h": a flex request cannot name a reservation (L11)` {
		t.Errorf("flex plus reservation: %v", err)
	}

	j, groups = job(map[string]string{"gputide_reservation": "r-1"})
	got, err := previewOptions(j, groups, qpools, res, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []plan.Pending{{Namespace: "workspace-b", Job: "train", Group: "g", Type: plan.JobBatch, Priority: 50, Count: 1, GPUs: 2,
		NodePool: "default", Reservation: "r-1", SubmittedAt: now}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("valid booking (-want +got):\n%s", diff)
	}
	j, groups = job(map[string]string{"gputide_flex_max_run": "4h"})
	got, err = previewOptions(j, groups, qpools, res, now)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Flex == nil || *got[0].Flex != (plan.Flex{MaxWait: plan.DefaultFlexWait, MaxRun: 4 * time.Hour}) {
		t.Errorf("flex = %v, want max_wait 168h, max_run 4h", got[0].Flex)
	}
}

// A job whose gputide_pool the broker would mark a meta error (not in
// admit_pools, or no such pool in Nomad) previews as that meta error, a 400
// naming Job.Meta.gputide_pool, never as a wait (issue 16).
func TestPreviewRefusesAPoolTheBrokerRefuses(t *testing.T) {
	now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	pools := previewPools{holding: "gputide-queue", admit: []string{"default", "spare"}, nomad: map[string]bool{"default": true, "gputide-queue": true, "spare": true}}
	ns, id := "workspace-b", "train"
	for _, tt := range []struct{ pool, msg string }{
		{"nope", `job meta gputide_pool = "nope": not one of the broker's admit_pools ["default" "spare"]`},
		{"other", `job meta gputide_pool = "other": not one of the broker's admit_pools ["default" "spare"]`},
	} {
		j := &nomadapi.Job{Namespace: &ns, ID: &id, Meta: map[string]string{"gputide_pool": tt.pool}}
		_, err := previewOptions(j, []plan.Pending{{Namespace: ns, Job: id, Group: "g", Type: plan.JobBatch, Priority: 50, Count: 1, GPUs: 2}}, pools, nil, now)
		var p *brokerapi.Problem
		if !errors.As(err, &p) {
			t.Fatalf("%s: error %v, want a *api.Problem", tt.pool, err)
		}
		if diff := cmp.Diff(brokerapi.Problem{Status: http.StatusBadRequest, Field: "Job.Meta.gputide_pool", Msg: tt.msg}, *p); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.pool, diff)
		}
	}
	// Admitted by the broker but gone from Nomad: the same meta error.
	pools.nomad = map[string]bool{"default": true, "gputide-queue": true}
	j := &nomadapi.Job{Namespace: &ns, ID: &id, Meta: map[string]string{"gputide_pool": "spare"}}
	if _, err := previewOptions(j, []plan.Pending{{Namespace: ns, Job: id, Group: "g", GPUs: 2, Count: 1}}, pools, nil, now); err == nil ||
		err.Error() != `job meta gputide_pool = "spare": no such node pool in Nomad` {
		t.Errorf("pool unknown to Nomad: %v", err)
	}
	// A pool in both previews in it.
	j.Meta["gputide_pool"] = "default"
	got, err := previewOptions(j, []plan.Pending{{Namespace: ns, Job: id, Group: "g", GPUs: 2, Count: 1}}, pools, nil, now)
	if err != nil || got[0].NodePool != "default" {
		t.Errorf("pool default: %v %+v", err, got)
	}
}
