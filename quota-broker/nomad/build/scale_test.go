package build

import (
	"context"
	"fmt"
	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"maps"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/internal/scalegen"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

// scaleState lists a generated cluster of nodes nodes (scalegen) through
// the watcher's own list code, and returns it with the Input of a broker
// that admitted every running job.
func scaleState(tb testing.TB, nodes int) (*watch.State, Input) {
	tb.Helper()
	size := scalegen.Size{Nodes: nodes}
	c, err := scalegen.New(size, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	cfg := api.DefaultConfig()
	cfg.Address = srv.URL
	client, err := api.NewClient(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := watch.ListAll(context.Background(), client, func(string) bool { return true })
	if err != nil {
		tb.Fatal(err)
	}
	tree, settings, err := quota.Parse([]byte(scalegen.QuotaHCL(size)), "quota.hcl")
	if err != nil {
		tb.Fatal(err)
	}
	return s, Input{Now: c.Now, Quota: tree, Settings: settings, Accepted: func(plan.JobKey) bool { return true }}
}

// The snapshot of a generated cluster has every node, every allocation and
// no pending job; nothing is left out.
func TestFromScale(t *testing.T) {
	s, in := scaleState(t, 50)
	b := From(s, in)
	if b.Invalid != nil || len(b.Left) != 0 {
		t.Fatalf("invalid %v, left %v", b.Invalid, b.Left)
	}
	got := [4]int{len(b.Snapshot.Nodes), len(b.Snapshot.Allocations), len(b.Jobs), len(b.Snapshot.Pending)}
	if want := [4]int{50, 200, 100, 0}; got != want {
		t.Fatalf("nodes, allocations, jobs, pending = %v, want %v", got, want)
	}
}

// BenchmarkFromScale is build.From alone on a generated cluster of
// GPUTIDE_SCALE_NODES nodes (default 5,000: 10,000 jobs, 20,000
// allocations), the build step of the agent's BenchmarkCycleScale,
// without Specs and with Specs kept from an earlier build (the agent's).
func BenchmarkFromScale(b *testing.B) {
	nodes := 5000
	if v := os.Getenv("GPUTIDE_SCALE_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("GPUTIDE_SCALE_NODES=%q: not one node count", v)
		}
		nodes = n
	}
	s, in := scaleState(b, nodes)
	for _, specs := range []bool{false, true} {
		b.Run(fmt.Sprintf("specs=%v", specs), func(b *testing.B) {
			in := in
			if specs { // the agent's: kept across builds
				in.Memo = &Memo{}
				From(s, in)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if bd := From(s, in); len(bd.Snapshot.Allocations) != 4*nodes {
					b.Fatalf("%d allocations, want %d", len(bd.Snapshot.Allocations), 4*nodes)
				}
			}
		})
	}
}

// BenchmarkComputeScale is plan.Compute on the snapshot of
// BenchmarkFromScale with one pending 4-GPU job of team-00 that fits on
// free GPUs: the plan step of the agent's BenchmarkCycleScale.
func BenchmarkComputeScale(b *testing.B) {
	nodes := 5000
	if v := os.Getenv("GPUTIDE_SCALE_NODES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("GPUTIDE_SCALE_NODES=%q: not one node count", v)
		}
		nodes = n
	}
	s, in := scaleState(b, nodes)
	snap := From(s, in).Snapshot
	snap.Pending = append(snap.Pending, plan.Pending{Namespace: scalegen.Team(0), Job: "new", Group: "worker",
		Type: plan.JobBatch, Priority: 50, Count: 1, GPUs: 4, NodePool: "default", SubmittedAt: in.Now})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		p, err := plan.Compute(snap)
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Actions) != 1 || p.Actions[0].Action != plan.ActionAdmit {
			b.Fatalf("actions %+v, want one admit", p.Actions)
		}
	}
}

// A build with Specs makes the snapshot a build without makes, reads a
// spec again only once the State holds a new one for its job, and keeps
// one spec per governed job.
func TestSpecsKeepOneReadPerSpec(t *testing.T) {
	s, in := scaleState(t, 50)
	want := From(s, in)
	cached := in
	cached.Memo = &Memo{}
	for range 2 {
		got := From(s, cached)
		if diff := cmp.Diff(want.Snapshot, got.Snapshot); diff != "" {
			t.Fatalf("snapshot with Specs (-without +with):\n%s", diff)
		}
	}
	if n := cached.Memo.Len(); n != 100 {
		t.Fatalf("Specs keeps %d specs, want 100 (one per job)", n)
	}
	// A new spec of train-00000 (team-00) in place of the old, as an
	// event brings it: now an idle job.
	key := plan.JobKey{Namespace: scalegen.Team(0), Job: "train-00000"}
	s.Edit(func(v watch.View) {
		c := *v.Jobs[key]
		c.Meta = map[string]string{"gputide_idle": "true"}
		v.Jobs[key] = &c
	})
	want = From(s, in)
	got := From(s, cached)
	if diff := cmp.Diff(want.Snapshot, got.Snapshot); diff != "" {
		t.Fatalf("snapshot with Specs after the job changed (-without +with):\n%s", diff)
	}
	if !got.Jobs[key].Options.Idle {
		t.Fatalf("job %s: options %+v, want idle (its new spec)", key, got.Jobs[key].Options)
	}
	if n := cached.Memo.Len(); n != 100 {
		t.Fatalf("Specs keeps %d specs after the change, want 100 (the old one forgotten)", n)
	}
}

// A build with a Memo makes the snapshot a build without makes after each
// kind of change the watcher's events bring (a new job, a job gone, an
// allocation stopping, an allocation gone, a node drained), and keeps a
// part whose generation did not change: the nodes' slice is the same
// while only jobs and allocations change.
func TestMemoFollowsEvents(t *testing.T) {
	s, in := scaleState(t, 50)
	kept := in
	kept.Memo = &Memo{}
	check := func(step string) *Build {
		t.Helper()
		want, got := From(s, in), From(s, kept)
		if diff := cmp.Diff(want.Snapshot, got.Snapshot); diff != "" {
			t.Fatalf("%s: snapshot with a Memo (-without +with):\n%s", step, diff)
		}
		if diff := cmp.Diff(want.UngovernedGPUs, got.UngovernedGPUs); diff != "" {
			t.Fatalf("%s: ungoverned GPUs with a Memo (-without +with):\n%s", step, diff)
		}
		if len(want.Jobs) != len(got.Jobs) {
			t.Fatalf("%s: %d jobs with a Memo, want %d", step, len(got.Jobs), len(want.Jobs))
		}
		return got
	}
	first := check("first build")
	apply := func(topic api.Topic, typ string, payload map[string]any) {
		s.Apply(&api.Events{Index: s.Index() + 1, Events: []api.Event{{Topic: topic, Type: typ, Payload: payload}}}, hclog.NewNullLogger())
	}
	var job *api.Job
	var alloc watch.Alloc
	s.Read(func(v watch.View) {
		job = v.Jobs[plan.JobKey{Namespace: scalegen.Team(2), Job: "train-00002"}]
		for _, a := range v.Allocs {
			if alloc.ID == "" || a.ID < alloc.ID {
				alloc = *a
			}
		}
	})
	added := *job
	added.ID, added.Name = ptr("aaa-new"), ptr("aaa-new")
	added.NodePool = ptr(DefaultHoldingPool)
	apply(api.TopicJob, "JobRegistered", map[string]any{"Job": &added})
	got := check("a job added")
	if len(got.Snapshot.Pending) != len(first.Snapshot.Pending)+1 {
		t.Fatalf("a job added: %d pending groups, want %d", len(got.Snapshot.Pending), len(first.Snapshot.Pending)+1)
	}
	if &got.Snapshot.Nodes[0] != &first.Snapshot.Nodes[0] {
		t.Fatalf("a job added: the nodes were derived again, want them kept (their generation did not change)")
	}
	apply(api.TopicJob, "JobDeregistered", map[string]any{"Job": job, "Deleted": true})
	check("a job gone")
	apply(api.TopicAllocation, "AllocationUpdated", map[string]any{"Allocation": &api.Allocation{ID: alloc.ID,
		Namespace: alloc.Namespace, JobID: alloc.JobID, TaskGroup: alloc.Group, NodeID: alloc.NodeID,
		ClientStatus: api.AllocClientStatusRunning, DesiredStatus: api.AllocDesiredStatusStop, ModifyIndex: alloc.ModifyIndex + 1}})
	got = check("an allocation stopping")
	if i := slices.IndexFunc(got.Snapshot.Allocations, func(a plan.Allocation) bool { return a.ID == alloc.ID }); i < 0 ||
		got.Snapshot.Allocations[i].StoppingFor != UnknownClaimant {
		t.Fatalf("an allocation stopping: %s not stopping in the snapshot", alloc.ID)
	}
	apply(api.TopicAllocation, "AllocationUpdated", map[string]any{"Allocation": &api.Allocation{ID: alloc.ID,
		Namespace: alloc.Namespace, JobID: alloc.JobID, TaskGroup: alloc.Group, NodeID: alloc.NodeID,
		ClientStatus: api.AllocClientStatusComplete, DesiredStatus: api.AllocDesiredStatusStop, ModifyIndex: alloc.ModifyIndex + 2}})
	got = check("an allocation gone")
	if len(got.Snapshot.Allocations) != len(first.Snapshot.Allocations)-1 {
		t.Fatalf("an allocation gone: %d allocations, want %d", len(got.Snapshot.Allocations), len(first.Snapshot.Allocations)-1)
	}
	var node *api.Node
	s.Read(func(v watch.View) {
		n := v.Nodes[first.Snapshot.Nodes[0].ID]
		node = &api.Node{ID: n.ID, Name: n.Name, Datacenter: n.Datacenter, NodePool: n.NodePool, Status: api.NodeStatusReady,
			SchedulingEligibility: api.NodeSchedulingIneligible, DrainStrategy: &api.DrainStrategy{}}
	})
	apply(api.TopicNode, "NodeDrain", map[string]any{"Node": node})
	got = check("a node drained")
	if &got.Snapshot.Nodes[0] == &first.Snapshot.Nodes[0] {
		t.Fatalf("a node drained: the nodes were kept, want them derived again")
	}
}

// A tree write (a live move, a flavor declared) meets the Memo: what the
// Memo keeps by the tree (each spec's flavors, the nodes' ungoverned
// GPUs) is read again under the new tree, and the snapshot equals a build
// without a Memo at each step: the scale tree, the same tree with one
// flavor of the cluster's model, then one whose flavor names no model of
// the cluster (every GPU ungoverned), then the first again.
func TestMemoFollowsTreeWrites(t *testing.T) {
	s, in := scaleState(t, 50)
	first := From(s, in)
	model := first.Snapshot.Nodes[0].GPUs[0].Model
	plain := scalegen.QuotaHCL(scalegen.Size{Nodes: 50})
	tree := func(flavorModel string) *quota.Node {
		t.Helper()
		src := fmt.Sprintf("flavor \"f\" {\n  models = [%q]\n}\n", flavorModel) + plain
		q, _, err := quota.Parse([]byte(src), "quota.hcl")
		if err != nil {
			t.Fatalf("tree with flavor model %q: %v", flavorModel, err)
		}
		return q
	}
	// One new pending job, so that the pending groups carry flavors.
	s.Edit(func(v watch.View) {
		c := *v.Jobs[plan.JobKey{Namespace: scalegen.Team(0), Job: "train-00000"}]
		c.ID, c.Name, c.NodePool = ptr("aaa-new"), ptr("aaa-new"), ptr(DefaultHoldingPool)
		v.Jobs[plan.JobKey{Namespace: *c.Namespace, Job: "aaa-new"}] = &c
	})
	kept := in
	kept.Memo = &Memo{}
	for _, step := range []struct {
		name       string
		tree       *quota.Node
		ungoverned int
		flavors    []string
	}{
		{"the scale tree", in.Quota, 0, []string{quota.ImplicitFlavor}},
		{"a flavor of the cluster's model", tree(model), 0, []string{"f"}},
		{"a flavor of no model here", tree("NVIDIA B200"), 400, []string{"f"}},
		{"the scale tree again", in.Quota, 0, []string{quota.ImplicitFlavor}},
	} {
		in.Quota, kept.Quota = step.tree, step.tree
		want, got := From(s, in), From(s, kept)
		if diff := cmp.Diff(want.Snapshot, got.Snapshot); diff != "" {
			t.Fatalf("%s: snapshot with a Memo (-without +with):\n%s", step.name, diff)
		}
		if diff := cmp.Diff(want.UngovernedGPUs, got.UngovernedGPUs); diff != "" {
			t.Fatalf("%s: ungoverned GPUs with a Memo (-without +with):\n%s", step.name, diff)
		}
		if len(got.UngovernedGPUs) != step.ungoverned {
			t.Fatalf("%s: %d ungoverned GPUs, want %d", step.name, len(got.UngovernedGPUs), step.ungoverned)
		}
		v := got.Jobs[plan.JobKey{Namespace: scalegen.Team(0), Job: "aaa-new"}]
		if v == nil {
			t.Fatalf("%s: no view of the new job", step.name)
		}
		if diff := cmp.Diff(step.flavors, v.Flavors); diff != "" {
			t.Fatalf("%s: the new job's flavors (-want +got):\n%s", step.name, diff)
		}
	}
}

// The allocations a Memo keeps (steps 5-5b) follow what the broker gives
// the build besides Nomad's state: with the same state, a claimant, a
// booking stop, an admission time and a direct registration each change
// the snapshot exactly as a build without a Memo does; with nothing
// changed the snapshot has the very slice the build before made (and its
// check is the one kept).
func TestMemoFollowsTheStops(t *testing.T) {
	s, in := scaleState(t, 50)
	var ids []string // the first two allocations, by ID
	var job plan.JobKey
	s.Read(func(v watch.View) {
		for _, a := range v.Allocs {
			ids = append(ids, a.ID)
		}
		slices.Sort(ids)
		a := v.Allocs[ids[0]]
		job = a.JobKey()
	})
	ids = ids[:2]
	kept := in
	kept.Memo = &Memo{}
	var last *Build
	step := func(name string, edit func(in *Input)) *Build {
		t.Helper()
		edit(&in)
		edit(&kept)
		want, got := bothBuilds(t, name, s, in, kept)
		if diff := cmp.Diff(want.UnknownStopping, got.UnknownStopping); diff != "" {
			t.Fatalf("%s: unknown stops with a Memo (-without +with):\n%s", name, diff)
		}
		last = got
		return got
	}
	first := step("first build", func(*Input) {})
	if again := step("nothing changed", func(*Input) {}); &again.Snapshot.Allocations[0] != &first.Snapshot.Allocations[0] {
		t.Fatalf("nothing changed: the allocations were made again, want the slice kept")
	}
	claimant := plan.GroupKey{Namespace: scalegen.Team(1), Job: "infer", Group: "main"}
	step("a claimant", func(in *Input) { in.Stopping = map[string]plan.GroupKey{ids[0]: claimant} })
	if a := last.Snapshot.Allocations[0]; a.ID != ids[0] || a.StoppingFor != claimant {
		t.Fatalf("a claimant: %s stops for %v, want %v", a.ID, a.StoppingFor, claimant)
	}
	step("a booking stop", func(in *Input) { in.StoppingForReservation = map[string]string{ids[1]: "r-1"} })
	if a := last.Snapshot.Allocations[1]; a.ID != ids[1] || a.StoppingForReservation != "r-1" {
		t.Fatalf("a booking stop: %s stops for booking %q, want r-1", a.ID, a.StoppingForReservation)
	}
	at := in.Now.Add(-time.Hour)
	step("an admission time", func(in *Input) {
		in.Record = func(k plan.JobKey) JobRecord {
			if k == job {
				return JobRecord{Recorded: true, AdmittedAt: at}
			}
			return JobRecord{Recorded: true}
		}
	})
	if a := last.Snapshot.Allocations[0]; !a.AdmittedAt.Equal(at) {
		t.Fatalf("an admission time: %s admitted at %v, want %v", a.ID, a.AdmittedAt, at)
	}
	n := len(last.Snapshot.Allocations)
	step("a direct registration", func(in *Input) { in.Accepted = func(k plan.JobKey) bool { return k != job } })
	if len(last.Snapshot.Allocations) >= n {
		t.Fatalf("a direct registration: %d allocations, want fewer than %d (its allocations left out)", len(last.Snapshot.Allocations), n)
	}
	step("no stop, all accepted", func(in *Input) {
		in.Stopping, in.StoppingForReservation = nil, nil
		in.Accepted = func(plan.JobKey) bool { return true }
	})
}

// The jobs are read in no order; the lists made of them are in the order
// of their jobs, a job's groups in its own order, and every build gives
// the same lists.
func TestFromListsInJobOrder(t *testing.T) {
	s, in := scaleState(t, 50)
	s.Edit(func(v watch.View) {
		base := *v.Jobs[plan.JobKey{Namespace: scalegen.Team(0), Job: "train-00000"}]
		for _, ns := range []string{scalegen.Team(3), scalegen.Team(0), scalegen.Team(2), scalegen.Team(1)} {
			for _, id := range []string{"zz-new", "aa-new", "mm-new"} {
				c := base
				c.ID, c.Name, c.Namespace, c.NodePool = ptr(id), ptr(id), ptr(ns), ptr(DefaultHoldingPool)
				tg := *base.TaskGroups[0]
				tg2 := tg
				tg.Name, tg2.Name = ptr("b-second"), ptr("a-first") // groups kept in the job's order, not sorted
				c.TaskGroups = []*api.TaskGroup{&tg, &tg2}
				v.Jobs[plan.JobKey{Namespace: ns, Job: id}] = &c
			}
		}
	})
	first := From(s, in)
	var got []string
	for _, p := range first.Snapshot.Pending {
		got = append(got, p.Namespace+"/"+p.Job+"/"+p.Group)
	}
	var want []string
	for _, ns := range []string{scalegen.Team(0), scalegen.Team(1), scalegen.Team(2), scalegen.Team(3)} {
		for _, id := range []string{"aa-new", "mm-new", "zz-new"} {
			want = append(want, ns+"/"+id+"/b-second", ns+"/"+id+"/a-first")
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("pending groups (-want +got):\n%s", diff)
	}
	for i := 0; i < 5; i++ {
		if diff := cmp.Diff(first.Snapshot, From(s, in).Snapshot); diff != "" {
			t.Fatalf("build %d differs from the first (-first +now):\n%s", i+2, diff)
		}
	}
}

// Input.Record is the broker's record of each job: the jobs without one
// are listed in Unrecorded, in order; without Accepted, a job in its pool
// whose record has no admission time was registered straight into it
// (Direct), and a record's stop status is the view's.
func TestFromReadsEachJobsRecord(t *testing.T) {
	s, in := scaleState(t, 50)
	in.Accepted = nil
	var keys []plan.JobKey
	s.Read(func(v watch.View) {
		for k := range v.Jobs {
			keys = append(keys, k)
		}
	})
	slices.SortFunc(keys, plan.JobKey.Compare)
	unrecorded := []plan.JobKey{keys[7], keys[3]} // no record
	direct := keys[5]                             // a record without admitted_at
	stopped := StopStatus{Reason: "max_run", JobModifyIndex: 9}
	in.Record = func(k plan.JobKey) JobRecord {
		switch k {
		case unrecorded[0], unrecorded[1]:
			return JobRecord{}
		case direct:
			return JobRecord{Recorded: true, FirstSeen: in.Now}
		case keys[1]:
			return JobRecord{Recorded: true, AdmittedAt: in.Now, Stopped: stopped}
		}
		return JobRecord{Recorded: true, AdmittedAt: in.Now}
	}
	b := From(s, in)
	slices.SortFunc(unrecorded, plan.JobKey.Compare)
	if diff := cmp.Diff(unrecorded, b.Unrecorded); diff != "" {
		t.Fatalf("unrecorded jobs (-want +got):\n%s", diff)
	}
	for _, k := range keys {
		v := b.Jobs[k]
		if v == nil {
			t.Fatalf("no view of %s", k)
		}
		// A job without a record has no admission time either.
		wantDirect := k == direct || k == unrecorded[0] || k == unrecorded[1]
		if v.Direct != wantDirect {
			t.Errorf("%s: Direct = %v, want %v", k, v.Direct, wantDirect)
		}
		if want := map[bool]StopStatus{true: stopped}[k == keys[1]]; v.Stopped != want {
			t.Errorf("%s: Stopped = %+v, want %+v", k, v.Stopped, want)
		}
	}
}

// viewOf is what a test compares of a job view.
type viewOf struct {
	Pool                     string
	Holding, Direct          bool
	Live, GPUGroups, Pending int
	MetaErr                  string
	Flavors                  []string
	Stopped                  StopStatus
}

func viewsOf(b *Build) map[plan.JobKey]viewOf {
	out := make(map[plan.JobKey]viewOf, len(b.Jobs))
	for k, v := range b.Jobs {
		o := viewOf{Pool: v.Pool, Holding: v.Holding, Direct: v.Direct, Live: v.Live, GPUGroups: v.GPUGroups,
			Pending: v.Pending, Flavors: v.Flavors, Stopped: v.Stopped}
		if v.MetaErr != nil {
			o.MetaErr = v.MetaErr.Error()
		}
		out[k] = o
	}
	return out
}

// A Memo's build reuses the view of each job whose view it would make
// the same (its spec, live count, record and acceptance, the admit pools
// and Nomad's pools), and makes again those that change: every build
// equals one without a Memo, and the views reused are the very views of
// the build before.
func TestMemoReusesTheViewsThatDidNotChange(t *testing.T) {
	s, in := scaleState(t, 50)
	in.Accepted = nil
	recs := map[plan.JobKey]JobRecord{}
	in.Record = func(k plan.JobKey) JobRecord {
		if r, ok := recs[k]; ok {
			return r
		}
		return JobRecord{Recorded: true, AdmittedAt: in.Now}
	}
	var keys []plan.JobKey
	s.Read(func(v watch.View) {
		for k := range v.Jobs {
			keys = append(keys, k)
		}
	})
	slices.SortFunc(keys, plan.JobKey.Compare)
	kept := in
	kept.Memo = &Memo{}
	var last *Build
	step := func(name string, edit func(in *Input), remade ...plan.JobKey) {
		t.Helper()
		edit(&in)
		edit(&kept)
		_, got := bothBuilds(t, name, s, in, kept)
		if last != nil {
			var again []plan.JobKey
			for k, v := range got.Jobs {
				if last.Jobs[k] != v {
					again = append(again, k)
				}
			}
			slices.SortFunc(again, plan.JobKey.Compare)
			switch {
			case len(remade) == 1 && remade[0] == (plan.JobKey{}): // every view
				remade = keys
			case remade == nil:
				remade = []plan.JobKey{}
			}
			if again == nil {
				again = []plan.JobKey{}
			}
			if diff := cmp.Diff(remade, again); diff != "" {
				t.Fatalf("%s: views made again (-want +got):\n%s", name, diff)
			}
		}
		last = got
	}
	step("first build", func(*Input) {})
	step("nothing changed", func(*Input) {})
	stop := StopStatus{Reason: "max_run", JobModifyIndex: 7}
	step("a record changed", func(*Input) { recs[keys[4]] = JobRecord{Recorded: true, AdmittedAt: in.Now, Stopped: stop} }, keys[4])
	step("an admission unrecorded", func(*Input) { recs[keys[9]] = JobRecord{Recorded: true} }, keys[9])
	if !last.Jobs[keys[9]].Direct {
		t.Fatalf("%s: a job in its pool without admitted_at is not a direct registration", keys[9])
	}
	step("the admit pools changed", func(in *Input) { in.AdmitPools = []string{"default", "other"} }, plan.JobKey{})
	step("the admit pools changed again", func(in *Input) { in.AdmitPools = []string{"other"} }, plan.JobKey{})
	if last.Jobs[keys[0]].MetaErr == nil {
		t.Fatalf("%s: no meta error for a pool not among the admit pools", keys[0])
	}
	step("the admit pools as before", func(in *Input) { in.AdmitPools = nil }, plan.JobKey{})
	s.Edit(func(v watch.View) {
		sum := *v.Summaries[keys[2]]
		sum.Summary = maps.Clone(sum.Summary)
		for g, tg := range sum.Summary {
			tg.Queued = 2
			sum.Summary[g] = tg
		}
		v.Summaries[keys[2]] = &sum
		j := *v.Jobs[keys[2]] // two more allocations wanted: the queued ones
		j.TaskGroups = slices.Clone(j.TaskGroups)
		for i, tg := range j.TaskGroups {
			c := *tg
			n := *c.Count + 2
			c.Count = &n
			j.TaskGroups[i] = &c
		}
		v.Jobs[keys[2]] = &j
	})
	// Edit counts every part as changed: the nodes and pools too.
	step("a job queued", func(*Input) {}, plan.JobKey{})
	if v := last.Jobs[keys[2]]; v.Pending == 0 {
		t.Fatalf("%s: queued, but no allocation pending", keys[2])
	}
	// A job with allocations pending, and a direct registration, are made
	// again each build.
	step("nothing changed since", func(*Input) {}, keys[2], keys[9])
}

// bothBuilds builds s with in and with kept (in with a Memo) and fails
// when their snapshots or job views differ; it returns both builds.
func bothBuilds(t *testing.T, name string, s *watch.State, in, kept Input) (want, got *Build) {
	t.Helper()
	want, got = From(s, in), From(s, kept)
	if diff := cmp.Diff(want.Snapshot, got.Snapshot); diff != "" {
		t.Fatalf("%s: snapshot with a Memo (-without +with):\n%s", name, diff)
	}
	if diff := cmp.Diff(viewsOf(want), viewsOf(got)); diff != "" {
		t.Fatalf("%s: views with a Memo (-without +with):\n%s", name, diff)
	}
	return want, got
}

// A job naming a booking meets the Memo (bookings x kept views): its view
// is made again each build, so the booking's end, reached by the clock
// alone, gives it its meta error with a Memo as without one.
func TestMemoRemakesTheViewOfABookingsJob(t *testing.T) {
	s, in := scaleState(t, 50)
	var k plan.JobKey
	s.Read(func(v watch.View) {
		for key := range v.Jobs {
			if key.Namespace == scalegen.Team(1) && (k.Job == "" || key.Job < k.Job) {
				k = key
			}
		}
	})
	s.Edit(func(v watch.View) {
		j := *v.Jobs[k]
		j.Meta = maps.Clone(j.Meta)
		if j.Meta == nil {
			j.Meta = map[string]string{}
		}
		j.Meta[jobmeta.MetaReservation] = "r-1"
		v.Jobs[k] = &j
	})
	in.Reservations = []plan.Reservation{{ID: "r-1", Namespace: k.Namespace, Quota: "team-01", GPUs: 2,
		Start: in.Now.Add(-time.Hour), End: in.Now.Add(time.Hour)}}
	kept := in
	kept.Memo = &Memo{}
	_, first := bothBuilds(t, "booking under way", s, in, kept)
	if v := first.Jobs[k]; v == nil || v.MetaErr != nil {
		t.Fatalf("booking under way: view %+v, want one without a meta error", v)
	}
	in.Now, kept.Now = in.Now.Add(2*time.Hour), in.Now.Add(2*time.Hour)
	_, ended := bothBuilds(t, "booking ended", s, in, kept)
	if v := ended.Jobs[k]; v == nil || v.MetaErr == nil || v == first.Jobs[k] {
		t.Fatalf("booking ended: view %+v, want a new view with the booking's meta error", v)
	}
}
