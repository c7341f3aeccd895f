package act

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/nomad/api"
)

var jobB = plan.JobKey{Namespace: "workspace-b", Job: "training"}

// jobReads counts the reads of one job's spec (GET /v1/job/<id>).
func jobReads(f *fakeNomad, key plan.JobKey) int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	n := 0
	for _, r := range f.Requests {
		if r.Method == http.MethodGet && r.Path == "/v1/job/"+key.Job && strings.Contains(r.Query, "namespace="+key.Namespace) {
			n++
		}
	}
	return n
}

func forgetRequests(f *fakeNomad) {
	f.Mu.Lock()
	f.Requests = nil
	f.Mu.Unlock()
}

// registersOf returns the enforced index of each register of one job.
func registersOf(t *testing.T, f *fakeNomad, key plan.JobKey) []uint64 {
	t.Helper()
	var out []uint64
	for _, r := range f.Writes() {
		if r.Path != "/v1/jobs" {
			continue
		}
		j, enforce, idx := registered(t, r)
		if str(j.Namespace) == key.Namespace && str(j.ID) == key.Job {
			if !enforce {
				t.Fatalf("register of %s without the job modify index enforced", key)
			}
			out = append(out, idx)
		}
	}
	return out
}

// Every register of a plan (the victim's move, the admission, the status
// writes) is made from the spec the State holds, with that spec's job
// modify index enforced: no job is read before it is registered.
func TestRegisterUsesTheStatesSpecWithoutAReadAndEnforcesItsIndex(t *testing.T) {
	f, s := listRecorded(t)
	a, _ := newActor(f, s)
	p, b := planFor(t, s, a, claimTree())
	want := map[string]uint64{}
	for k := range b.Jobs {
		want[k.String()] = *s.Job(k.Namespace, k.Job).JobModifyIndex
	}
	forgetRequests(f)
	out := a.Execute(context.Background(), p, b)
	if len(out.Errors) != 0 || out.Admitted != 1 || out.Stopped != 2 || out.MetaWrites != 2 {
		t.Fatalf("outcome = %+v", out)
	}
	f.Mu.Lock()
	for _, r := range f.Requests {
		if r.Method == http.MethodGet && strings.HasPrefix(r.Path, "/v1/job/") {
			t.Errorf("read before a register: %s?%s", r, r.Query)
		}
	}
	f.Mu.Unlock()
	n := 0
	for _, r := range f.Writes() {
		if r.Path != "/v1/jobs" {
			continue
		}
		n++
		j, enforce, idx := registered(t, r)
		k := plan.JobKey{Namespace: str(j.Namespace), Job: str(j.ID)}
		if !enforce || idx != want[k.String()] || idx == 0 {
			t.Errorf("register of %s: enforce %v index %d, want the State's %d", k, enforce, idx, want[k.String()])
		}
	}
	if n != 4 {
		t.Fatalf("%d registers, want 4 (victim, admission, two status writes)", n)
	}
	// The State has the broker's writes at once, with Nomad's new index:
	// a second write to the same job enforces that one.
	if got := s.Job(jobB.Namespace, jobB.Job); str(got.NodePool) != "default" || *got.JobModifyIndex != 500 {
		t.Fatalf("State's copy after the admission: pool %s index %d", str(got.NodePool), *got.JobModifyIndex)
	}
}

// staleCopy makes the State's copy of key older than Nomad's (a user
// changed the job since) and returns Nomad's index.
func staleCopy(s *watch.State, key plan.JobKey) uint64 {
	cur := s.Job(key.Namespace, key.Job)
	c := *cur
	old := *cur.JobModifyIndex - 1
	c.JobModifyIndex, c.ModifyIndex = &old, &old
	raw(s).Jobs[key] = &c
	return *cur.JobModifyIndex
}

// An index conflict (the job changed since the broker's copy) leads to one
// read of that job and one more register, with the fresh index.
func TestRegisterRereadsAndRetriesOnceOnAnIndexConflict(t *testing.T) {
	f, s := listRecorded(t)
	a, log := newActor(f, s)
	_, b := planFor(t, s, a, claimTree())
	nomadIndex := staleCopy(s, jobB)
	f.Mu.Lock()
	f.Reject = func(ns, id string, index uint64) string {
		if index != nomadIndex {
			return "Enforcing job modify index " + itoa(index) + ": job exists with conflicting job modify index: " + itoa(nomadIndex)
		}
		return ""
	}
	f.Mu.Unlock()
	forgetRequests(f)
	if err := a.admit(context.Background(), b.Jobs[jobB], nil); err != nil {
		t.Fatalf("admit: %v\n%s", err, log)
	}
	if got := registersOf(t, f, jobB); len(got) != 2 || got[0] != nomadIndex-1 || got[1] != nomadIndex {
		t.Fatalf("registers enforced %v, want [%d %d]", got, nomadIndex-1, nomadIndex)
	}
	if n := jobReads(f, jobB); n != 1 {
		t.Fatalf("%d reads of the job, want 1", n)
	}
	j, _, _ := registered(t, f.Writes()[1])
	if str(j.NodePool) != "default" {
		t.Fatalf("retry registered into %q", str(j.NodePool))
	}
}

// A second conflict gives up: no third register, an error naming the job,
// left for the next plan.
func TestRegisterGivesUpAfterASecondConflict(t *testing.T) {
	f, s := listRecorded(t)
	a, _ := newActor(f, s)
	_, b := planFor(t, s, a, claimTree())
	f.Mu.Lock()
	f.Reject = func(ns, id string, index uint64) string {
		return "Enforcing job modify index " + itoa(index) + ": job exists with conflicting job modify index: 9999"
	}
	f.Mu.Unlock()
	forgetRequests(f)
	err := a.admit(context.Background(), b.Jobs[jobB], nil)
	if err == nil || !strings.Contains(err.Error(), "job workspace-b/training changed again") ||
		!strings.Contains(err.Error(), api.RegisterEnforceIndexErrPrefix) {
		t.Fatalf("admit: %v", err)
	}
	if got := registersOf(t, f, jobB); len(got) != 2 {
		t.Fatalf("%d registers, want 2", len(got))
	}
	if n := jobReads(f, jobB); n != 1 {
		t.Fatalf("%d reads of the job, want 1", n)
	}
}

// Another error is no conflict: no read, no retry.
func TestRegisterDoesNotRetryOtherErrors(t *testing.T) {
	f, s := listRecorded(t)
	a, _ := newActor(f, s)
	_, b := planFor(t, s, a, claimTree())
	f.Mu.Lock()
	f.Reject = func(string, string, uint64) string { return "Permission denied" }
	f.Mu.Unlock()
	forgetRequests(f)
	if err := a.admit(context.Background(), b.Jobs[jobB], nil); err == nil {
		t.Fatal("admit succeeded")
	}
	if got, n := registersOf(t, f, jobB), jobReads(f, jobB); len(got) != 1 || n != 0 {
		t.Fatalf("%d registers and %d reads, want 1 and 0", len(got), n)
	}
}

// A spec the broker lacks is read once and kept: the next write to the
// job reads nothing.
func TestRegisterReadsAMissingSpecOnceAndKeepsIt(t *testing.T) {
	f, s := listRecorded(t)
	a, _ := newActor(f, s)
	delete(raw(s).Jobs, jobB)
	v := &build.JobView{Key: jobB, Options: jobmeta.JobOptions{Pool: "default"}}
	forgetRequests(f)
	if _, err := a.register(context.Background(), v, build.DefaultHoldingPool, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.register(context.Background(), v, "default", nil, false); err != nil {
		t.Fatal(err)
	}
	if n := jobReads(f, jobB); n != 1 {
		t.Fatalf("%d reads of the job, want 1", n)
	}
	got := registersOf(t, f, jobB)
	if len(got) != 2 || got[0] == 0 || got[1] != 500 {
		t.Fatalf("registers enforced %v, want [the read's index, 500]", got)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
