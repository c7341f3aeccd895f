package build

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

var memoSteps = flag.Int("memo.steps", 150, "random changes TestMemoPropertyRandomChanges makes")

// A Memo changes nothing a build returns: after each of a random sequence
// of changes (jobs registered, changed, moved to the holding pool or
// gone, allocations stopping or gone, job records, acceptance, stops for
// claimants and bookings, admit pools), through the watcher's own event
// handling and the build's inputs, the build with a Memo equals the build
// without, in its snapshot, its views and its lists. -memo.steps sets the
// length (150 in CI).
func TestMemoPropertyRandomChanges(t *testing.T) {
	s, in := scaleState(t, 50)
	r := rand.New(rand.NewPCG(18, 2026))
	recs := map[plan.JobKey]JobRecord{}
	var accepted map[plan.JobKey]bool // nil: Input.Accepted nil
	record := func(k plan.JobKey) JobRecord {
		if rec, ok := recs[k]; ok {
			return rec
		}
		return JobRecord{Recorded: true, AdmittedAt: in.Now.Add(-time.Hour)}
	}
	accept := func(k plan.JobKey) bool { return !accepted[k] }
	in.Record, in.Accepted = record, nil
	kept := in
	kept.Memo = &Memo{}
	apply := func(topic api.Topic, typ string, payload map[string]any) {
		s.Apply(&api.Events{Index: s.Index() + 1, Events: []api.Event{{Topic: topic, Type: typ, Payload: payload}}}, hclog.NewNullLogger())
	}
	pick := func() (plan.JobKey, *api.Job, *watch.Alloc) {
		var keys []plan.JobKey
		var ids []string
		var job *api.Job
		var alloc *watch.Alloc
		s.Read(func(v watch.View) {
			for k := range v.Jobs {
				keys = append(keys, k)
			}
			for id := range v.Allocs {
				ids = append(ids, id)
			}
			slices.SortFunc(keys, plan.JobKey.Compare)
			slices.Sort(ids)
			job = v.Jobs[keys[r.IntN(len(keys))]]
			if len(ids) > 0 {
				a := *v.Allocs[ids[r.IntN(len(ids))]]
				alloc = &a
			}
		})
		return plan.JobKey{Namespace: *job.Namespace, Job: *job.ID}, job, alloc
	}
	for step := 0; step < *memoSteps; step++ {
		k, job, alloc := pick()
		var what string
		switch n := r.IntN(11); n {
		case 0: // a new job in the holding pool
			c := *job
			id := fmt.Sprintf("new-%04d", step)
			c.ID, c.Name, c.NodePool = &id, &id, ptr(DefaultHoldingPool)
			apply(api.TopicJob, "JobRegistered", map[string]any{"Job": &c})
			what = "registered " + id
		case 1: // a job changed: another priority
			c := *job
			c.Priority = ptr(1 + r.IntN(100))
			apply(api.TopicJob, "JobRegistered", map[string]any{"Job": &c})
			what = "priority of " + k.String()
		case 2: // a job moved to the holding pool
			c := *job
			c.NodePool = ptr(DefaultHoldingPool)
			apply(api.TopicJob, "JobRegistered", map[string]any{"Job": &c})
			what = "suspended " + k.String()
		case 3:
			apply(api.TopicJob, "JobDeregistered", map[string]any{"Job": job, "Deleted": true})
			what = "deleted " + k.String()
		case 4, 5: // an allocation stopping, or gone
			if alloc == nil {
				continue
			}
			status := api.AllocClientStatusRunning
			if n == 5 {
				status = api.AllocClientStatusComplete
			}
			apply(api.TopicAllocation, "AllocationUpdated", map[string]any{"Allocation": &api.Allocation{ID: alloc.ID,
				Namespace: alloc.Namespace, JobID: alloc.JobID, TaskGroup: alloc.Group, NodeID: alloc.NodeID,
				ClientStatus: status, DesiredStatus: api.AllocDesiredStatusStop, ModifyIndex: alloc.ModifyIndex + 1}})
			what = status + " " + alloc.ID
		case 6: // the job's record
			switch r.IntN(4) {
			case 0:
				recs[k] = JobRecord{}
			case 1:
				recs[k] = JobRecord{Recorded: true, FirstSeen: in.Now.Add(-time.Duration(r.IntN(100)) * time.Minute)}
			case 2:
				recs[k] = JobRecord{Recorded: true, AdmittedAt: in.Now.Add(-time.Minute), Stopped: StopStatus{Reason: "max_run", JobModifyIndex: 3}}
			default:
				delete(recs, k)
			}
			what = "record of " + k.String()
		case 7: // acceptance decided by the caller, or by the records
			if accepted == nil {
				accepted = map[plan.JobKey]bool{k: true}
				in.Accepted, kept.Accepted = accept, accept
			} else {
				accepted = nil
				in.Accepted, kept.Accepted = nil, nil
			}
			what = "acceptance"
		case 8: // a stop for a claimant
			if alloc == nil {
				continue
			}
			st := map[string]plan.GroupKey{alloc.ID: {Namespace: k.Namespace, Job: k.Job, Group: "main"}}
			in.Stopping, kept.Stopping = st, st
			what = "claimant for " + alloc.ID
		case 9: // a stop for a booking
			if alloc == nil {
				continue
			}
			st := map[string]string{alloc.ID: "r-1"}
			in.StoppingForReservation, kept.StoppingForReservation = st, st
			what = "booking stop for " + alloc.ID
		default: // the admit pools
			pools := [][]string{nil, {"default"}, {"default", "other"}, {"other"}}[r.IntN(4)]
			in.AdmitPools, kept.AdmitPools = pools, pools
			what = fmt.Sprintf("admit pools %q", pools)
		}
		want, got := bothBuilds(t, fmt.Sprintf("step %d (%s)", step, what), s, in, kept)
		for name, l := range map[string][2][]plan.JobKey{"unrecorded": {want.Unrecorded, got.Unrecorded},
			"no GPU": {want.NoGPU, got.NoGPU}, "ungoverned": {want.Ungoverned, got.Ungoverned}} {
			if diff := cmp.Diff(l[0], l[1]); diff != "" {
				t.Fatalf("step %d (%s): %s jobs with a Memo (-without +with):\n%s", step, what, name, diff)
			}
		}
		if diff := cmp.Diff(want.UnknownStopping, got.UnknownStopping); diff != "" {
			t.Fatalf("step %d (%s): unknown stops with a Memo (-without +with):\n%s", step, what, diff)
		}
	}
}
