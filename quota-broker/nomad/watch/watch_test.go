package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/nomad/api"
)

func everything(string) bool { return true }

func listRecorded(t *testing.T) (*fakeNomad, *State) {
	t.Helper()
	f := newFakeNomad(t)
	s, err := ListAll(context.Background(), f.Client(), everything)
	if err != nil {
		t.Fatalf("ListAll: %v", err)
	}
	return f, s
}

func TestListAllReadsNodesAllocationsJobsAndSummaries(t *testing.T) {
	_, s := listRecorded(t)
	if len(s.nodes) != 1 {
		t.Fatalf("nodes = %d, want 1", len(s.nodes))
	}
	n := s.nodes[node]
	if n == nil || len(n.GPUs) != 8 || !n.Schedulable || n.NodePool != "default" || n.Datacenter != "dc1" {
		t.Fatalf("node = %+v, want 8 GPUs, schedulable, pool default, dc1", n)
	}
	if n.GPUs[0].ID != "GPU-eae7470d-921e-5869-a414-ef3357f38e60" || n.GPUs[0].Model != "Mock NVIDIA A100-SXM4-40GB" || !n.GPUs[0].Healthy {
		t.Fatalf("first GPU = %+v", n.GPUs[0])
	}
	// The complete (stopped) allocation of workspace-b/training is not live.
	got := s.GPUsByAlloc()
	want := map[string]int{allocC1: 2, allocC2: 2, allocA: 4}
	if len(got) != len(want) {
		t.Fatalf("live GPU allocations = %v, want %v", got, want)
	}
	for id, g := range want {
		if got[id] != g {
			t.Fatalf("alloc %s GPUs = %d, want %d", id, got[id], g)
		}
	}
	if len(s.jobs) != 5 {
		t.Fatalf("jobs = %d, want 5", len(s.jobs))
	}
	if j := s.jobs[plan.JobKey{Namespace: "workspace-b", Job: "training"}]; str(j.NodePool) != "gputide-queue" {
		t.Fatalf("workspace-b/training pool = %q, want the holding pool", str(j.NodePool))
	}
	if sum := s.summaries[plan.JobKey{Namespace: "workspace-b", Job: "training"}]; sum == nil || sum.Summary["worker"].Queued != 1 {
		t.Fatalf("workspace-b/training summary = %+v, want 1 queued", sum)
	}
	if len(s.blocked) != 3 {
		t.Fatalf("blocked evaluations = %d, want 3 (training, bad-idle, bad-maxrun)", len(s.blocked))
	}
	if diff := cmp.Diff(queuedJobs(s), []string{"workspace-b/training", "workspace-c/bad-idle", "workspace-c/bad-maxrun"}); diff != "" {
		t.Fatalf("queued jobs (-got +want):\n%s", diff)
	}
	if s.Index() == 0 {
		t.Fatal("index not tracked")
	}
	if ns := s.Namespaces(); strings.Join(ns, ",") != "default,workspace-a,workspace-b,workspace-c" {
		t.Fatalf("namespaces = %v", ns)
	}
}

func TestEventsRebuildTheLedgerTheListGives(t *testing.T) {
	_, listed := listRecorded(t)
	s := NewState()
	log, _ := testLogger(t)
	for _, l := range eventLines(t) {
		var evs api.Events
		if err := jsonUnmarshal(l, &evs); err != nil {
			t.Fatal(err)
		}
		s.Apply(&evs, log)
	}
	if d := LedgerDiff(listed.GPUsByAlloc(), s.GPUsByAlloc()); len(d) != 0 {
		t.Fatalf("ledger from events differs from the list (L2): %+v", d)
	}
	if j := s.jobs[plan.JobKey{Namespace: "workspace-b", Job: "training"}]; j == nil || str(j.NodePool) != "gputide-queue" {
		t.Fatal("the job events lost the node pool")
	}
	if j := s.jobs[plan.JobKey{Namespace: "workspace-a", Job: "inference"}]; j == nil || str(j.NodePool) != "default" {
		t.Fatal("inference is not in its pool after the events")
	}
	if len(s.nodes[node].GPUs) != 8 {
		t.Fatalf("node GPUs from events = %d", len(s.nodes[node].GPUs))
	}
	if s.Index() != 66 {
		t.Fatalf("index = %d, want 66 (the last event)", s.Index())
	}
}

func TestRefreshFetchesTheSummariesEventsTouched(t *testing.T) {
	f, s := listRecorded(t)
	s.dirty[plan.JobKey{Namespace: "workspace-b", Job: "training"}] = true
	s.dirty[plan.JobKey{Namespace: "workspace-c", Job: "gone"}] = true
	s.summaries[plan.JobKey{Namespace: "workspace-c", Job: "gone"}] = s.summaries[plan.JobKey{Namespace: "workspace-c", Job: "training"}]
	// An event that was applied before the summary said so: the job is read.
	delete(s.jobs, plan.JobKey{Namespace: "workspace-a", Job: "inference"})
	s.dirty[plan.JobKey{Namespace: "workspace-a", Job: "inference"}] = true
	if err := s.Refresh(context.Background(), f.Client()); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.summaries[plan.JobKey{Namespace: "workspace-c", Job: "gone"}]; ok {
		t.Fatal("the summary of a job Nomad no longer knows was kept")
	}
	if j := s.jobs[plan.JobKey{Namespace: "workspace-a", Job: "inference"}]; j == nil || str(j.ID) != "inference" {
		t.Fatal("a job the state lacked was not read")
	}
	if f.Count("GET", "/v1/job/training/summary") != 1 || len(s.dirty) != 0 {
		t.Fatalf("summary reads = %d, dirty = %v", f.Count("GET", "/v1/job/training/summary"), s.dirty)
	}
}

// A job Nomad no longer knows (purged) leaves the state on a 404.
func TestRefreshDropsAPurgedJob(t *testing.T) {
	f, s := listRecorded(t)
	s.jobs[plan.JobKey{Namespace: "workspace-c", Job: "gone"}] = s.jobs[plan.JobKey{Namespace: "workspace-c", Job: "training"}]
	s.dirty[plan.JobKey{Namespace: "workspace-c", Job: "gone"}] = true
	if err := s.Refresh(context.Background(), f.Client()); err != nil {
		t.Fatal(err)
	}
	if s.jobs[plan.JobKey{Namespace: "workspace-c", Job: "gone"}] != nil {
		t.Fatal("a purged job was kept")
	}
}

func TestWatcherRelistsOnEveryReconnect(t *testing.T) {
	f := newFakeNomad(t)
	lines := eventLines(t)
	f.Streams = [][]string{lines[:3], lines[3:]}
	f.HoldStream = false
	log, buf := testLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &Watcher{Client: f.Client(), Governed: everything, Logger: log, Backoff: 10 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for w.Status().Relists < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if w.Status().Relists < 3 {
		t.Fatalf("relists = %d, want >= 3", w.Status().Relists)
	}
	// Each reconnect lists everything again (L2).
	if n := f.Count("GET", "/v1/allocations"); n < 3 {
		t.Fatalf("allocation lists = %d, want one per connection", n)
	}
	if !strings.Contains(buf.String(), "lost the Nomad event stream") {
		t.Fatalf("no reconnect log:\n%s", buf.String())
	}
}

func TestWatcherLogsLedgerMismatchesOnRelist(t *testing.T) {
	f := newFakeNomad(t)
	log, buf := testLogger(t)
	w := &Watcher{Client: f.Client(), Governed: everything, Logger: log}
	s1, err := ListAll(context.Background(), f.Client(), everything)
	if err != nil {
		t.Fatal(err)
	}
	// The broker believed a fourth allocation held 8 GPUs; Nomad says no.
	s1.allocs["ghost"] = &Alloc{ID: "ghost", Namespace: "workspace-b", GPUIDs: make([]string, 8), ClientStatus: "running"}
	w.replace(s1)
	s2, err := ListAll(context.Background(), f.Client(), everything)
	if err != nil {
		t.Fatal(err)
	}
	w.replace(s2)
	if !strings.Contains(buf.String(), "L2: ledger re-derived from Nomad differs") || !strings.Contains(buf.String(), "alloc=ghost had_gpus=8 live_gpus=0") {
		t.Fatalf("mismatch not logged:\n%s", buf.String())
	}
	if _, ok := w.State().Alloc("ghost"); ok {
		t.Fatal("the live state did not win")
	}
}

func TestLedgerDiff(t *testing.T) {
	got := LedgerDiff(map[string]int{"a": 1, "b": 2}, map[string]int{"b": 3, "c": 4})
	want := []Mismatch{{"a", 1, 0}, {"b", 2, 3}, {"c", 0, 4}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
}

func TestIsNotFound(t *testing.T) {
	f := newFakeNomad(t)
	_, _, err := f.Client().Jobs().Info("nope", nil)
	if !isNotFound(err) {
		t.Fatalf("isNotFound(%v) = false", err)
	}
	if isNotFound(errors.New("x")) {
		t.Fatal("plain error taken for 404")
	}
}

func TestNextBackoff(t *testing.T) {
	const limit = 30 * time.Second
	d := time.Second
	var got []time.Duration
	for i := 0; i < 8; i++ {
		got = append(got, d)
		d = NextBackoff(d, limit)
	}
	want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("backoff sequence %v, want %v", got, want)
	}
	if got := NextBackoff(20*time.Second, limit); got != limit {
		t.Fatalf("NextBackoff(20s) = %s, want the cap", got)
	}
}

// While Nomad cannot be reached the watcher backs off exponentially to
// the cap, logging the first failure at WARN and the rest at DEBUG; a
// successful list resets the backoff and the next run of failures is
// logged at WARN again.
func TestWatcherBacksOffWhileNomadIsUnreachable(t *testing.T) {
	f := newFakeNomad(t)
	f.HoldStream = false
	f.Down = true
	setDown := func(down bool) {
		f.Mu.Lock()
		f.Down = down
		f.Mu.Unlock()
	}
	log, buf := testLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waits []time.Duration
	w := &Watcher{Client: f.Client(), Governed: everything, Logger: log}
	w.sleep = func(ctx context.Context, d time.Duration) bool {
		waits = append(waits, d)
		switch len(waits) {
		case 7: // Nomad comes up; its stream closes at once
			setDown(false)
		case 8:
			setDown(true)
		case 10:
			cancel()
			return false
		}
		return true
	}
	if err := w.Run(ctx); err != context.Canceled {
		t.Fatalf("Run = %v", err)
	}
	s := time.Second
	want := []time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s, 1 * s, 2 * s, 4 * s}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
	if n := w.Status().Relists; n != 1 {
		t.Fatalf("relists = %d, want 1", n)
	}
	var warnUnreachable, debugUnreachable, lost int
	for _, line := range strings.Split(buf.String(), "\n") {
		switch {
		case strings.Contains(line, "[WARN]") && strings.Contains(line, "cannot reach Nomad at "+f.Srv.URL+";"):
			warnUnreachable++
		case strings.Contains(line, "[DEBUG]") && strings.Contains(line, "Nomad still unreachable"):
			debugUnreachable++
		case strings.Contains(line, "[WARN]") && strings.Contains(line, "lost the Nomad event stream"):
			lost++
		}
	}
	if warnUnreachable != 2 || debugUnreachable != 7 || lost != 1 {
		t.Fatalf("WARN unreachable %d (want 2), DEBUG unreachable %d (want 7), lost %d (want 1):\n%s",
			warnUnreachable, debugUnreachable, lost, buf.String())
	}
}

// A successful probe (Touch) while the watcher waits out its backoff makes
// it list again at once: a Nomad that comes back is not left waiting for
// the backoff, which here is an hour.
func TestWatcherListsAtOnceWhenTouchedDuringBackoff(t *testing.T) {
	f := newFakeNomad(t)
	f.Down = true
	log, _ := testLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{Client: f.Client(), Governed: everything, Logger: log, Backoff: time.Hour}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; status %+v", what, w.Status())
			}
			w.Touch() // as the agent's probe does, until the watcher lists
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitUntil("the first failure", func() bool { return f.Count("GET", "/v1/acl/token/self") >= 1 && w.Status().LastError != "" })
	f.Mu.Lock()
	f.Down = false
	f.Mu.Unlock()
	waitUntil("a list after Touch", func() bool { return w.Status().Relists == 1 && w.Status().Connected })
}

// queuedJobs is the State's index of the jobs with queued allocations,
// sorted, checked against the summaries it indexes.
func queuedJobs(s *State) []string {
	var out []string
	s.Read(func(v View) {
		for k := range v.Queued {
			out = append(out, k.String())
		}
		for k, sum := range v.Summaries {
			if _, ok := v.Queued[k]; ok != hasQueued(sum) {
				out = append(out, "MISMATCH "+k.String())
			}
		}
	})
	slices.Sort(out)
	return out
}

// The index of queued jobs follows the summaries: a refreshed summary
// with nothing queued leaves it, a deleted job leaves it, and Edit
// indexes the summaries it was given again.
func TestQueuedJobsFollowTheSummaries(t *testing.T) {
	f, s := listRecorded(t)
	training := plan.JobKey{Namespace: "workspace-b", Job: "training"}
	s.Refresh(context.Background(), f.Client()) //nolint:errcheck // nothing dirty: no read
	log, _ := testLogger(t)
	s.Apply(&api.Events{Index: s.Index() + 1, Events: []api.Event{{Topic: api.TopicJob, Type: "JobDeregistered",
		Payload: map[string]any{"Job": s.Job("workspace-c", "bad-idle"), "Deleted": true}}}}, log)
	if diff := cmp.Diff(queuedJobs(s), []string{"workspace-b/training", "workspace-c/bad-maxrun"}); diff != "" {
		t.Fatalf("after a job deleted: queued jobs (-got +want):\n%s", diff)
	}
	s.Edit(func(v View) {
		sum := *v.Summaries[training]
		sum.Summary = map[string]api.TaskGroupSummary{"worker": {Running: 1}}
		v.Summaries[training] = &sum
	})
	if diff := cmp.Diff(queuedJobs(s), []string{"workspace-c/bad-maxrun"}); diff != "" {
		t.Fatalf("after an Edit: queued jobs (-got +want):\n%s", diff)
	}
	s.dirty[training] = true
	if err := s.Refresh(context.Background(), f.Client()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(queuedJobs(s), []string{"workspace-b/training", "workspace-c/bad-maxrun"}); diff != "" {
		t.Fatalf("after a refresh: queued jobs (-got +want):\n%s", diff)
	}
}

// An allocation's node ID and job ID are the very strings of its node and
// job in the State (the same bytes: a lookup compares them without reading
// them), after a list and after an allocation event; a string of a node
// or job the State lacks is kept.
func TestAllocationsShareTheirNodeAndJobIDs(t *testing.T) {
	_, s := listRecorded(t)
	shared := func(step, id string) {
		t.Helper()
		s.Read(func(v View) {
			a := v.Allocs[id]
			if a == nil {
				t.Fatalf("%s: no allocation %s", step, id)
			}
			n, j := v.Nodes[a.NodeID], v.Jobs[a.JobKey()]
			if n == nil || j == nil {
				t.Fatalf("%s: allocation %s has no node or job in the state", step, id)
			}
			if unsafe.StringData(a.NodeID) != unsafe.StringData(n.ID) {
				t.Errorf("%s: allocation %s's node ID is a copy of its node's", step, id)
			}
			if unsafe.StringData(a.JobID) != unsafe.StringData(*j.ID) {
				t.Errorf("%s: allocation %s's job ID is a copy of its job's", step, id)
			}
		})
	}
	shared("listed", allocC1)
	var a Alloc
	s.Read(func(v View) { a = *v.Allocs[allocC1] })
	log, _ := testLogger(t)
	copyOf := func(v string) string { return string([]byte(v)) }
	s.Apply(&api.Events{Index: s.Index() + 1, Events: []api.Event{{Topic: api.TopicAllocation, Type: "AllocationUpdated",
		Payload: map[string]any{"Allocation": &api.Allocation{ID: a.ID, Namespace: a.Namespace, JobID: copyOf(a.JobID),
			TaskGroup: a.Group, NodeID: copyOf(a.NodeID), ClientStatus: api.AllocClientStatusRunning,
			DesiredStatus: api.AllocDesiredStatusRun, ModifyIndex: a.ModifyIndex + 1}}}}}, log)
	shared("after an event", allocC1)
	other := &Alloc{ID: "x", Namespace: "nowhere", JobID: "nothing", NodeID: "no-node"}
	s.mu.Lock()
	s.share(other)
	s.mu.Unlock()
	if other.NodeID != "no-node" || other.JobID != "nothing" {
		t.Fatalf("an allocation of no known node or job became %+v", other)
	}
}
