package e2e

// Fair lending on real Nomad (issue 19's e2e, DESIGN L14): 8 mock GPUs on
// one client; Quota1 (8) with children Quota1.1 (team B) and Quota1.2
// (team C) of nominal 2 and 2, weights 1:1, min_runtime 0. Team B's
// elastic idle job runs on all 8 GPUs; team C submits an elastic idle job
// of 4 x 1 GPU. With both wanting more than their nominal, Quota1 lends
// 8 - 2 - 2 = 4 GPUs, shared 2:2, so each child's fair share is 4: rule
// L14.fair stops exactly 4 of B's allocations for C (after that B's
// borrowed share, 4 - 2 = 2, equals C's). With max_evict = { gpus = 2,
// per = "10m" } on Quota1.1 the budget lets only 2 go, and C's other 2
// wait with the budget's reason before settle (when an elastic idle group
// would have its count lowered to its live allocations, L7).
//
// One Nomad agent serves both parts; each part has its own broker (on the
// memory store, so the second starts with no evictions in its history)
// and its own quota file.

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"

	brokerapi "github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/plan"
)

// fairSettle is the tree's settle setting in this test (the default, 30 s,
// written out): C's budget wait must show before it.
const fairSettle = 30 * time.Second

// fairQuota is the tree of the fair-lending e2e; %s is Quota1.1's
// eviction budget line ("" for none).
const fairQuota = `
settings {
  min_runtime = "0s"
  settle      = %q
}
quota "Quota1" {
  gpus             = 8
  child_preemption = true
  namespaces       = ["workspace-a"]
  quota "Quota1.1" {
    gpus       = 2
    weight     = 1
    namespaces = ["workspace-b"]
    %s
  }
  quota "Quota1.2" {
    gpus       = 2
    weight     = 1
    namespaces = ["workspace-c"]
  }
}
`

// idleMeta marks a job idle and elastic (DESIGN L4, L5).
var idleMeta = map[string]string{jobmeta.MetaIdle: "true", jobmeta.MetaElastic: "true"}

// startFairBroker starts a broker on a with the fair-lending tree, Quota1.1
// with the budget line maxEvict ("" for none).
func startFairBroker(t *testing.T, a *nomadAgent, maxEvict string) *broker {
	t.Helper()
	cfg, quotaFile := brokerConfig(t, a.Addr, 2, 2)
	if err := os.WriteFile(quotaFile, []byte(fmt.Sprintf(fairQuota, fairSettle.String(), maxEvict)), 0o644); err != nil {
		t.Fatal(err)
	}
	return runBroker(t, cfg, quotaFile)
}

// fillWithB runs team B's elastic idle job on all 8 GPUs (it borrows 6
// beyond its nominal 2, L4) and returns its allocations.
func fillWithB(t *testing.T, c *api.Client) []string {
	t.Helper()
	submit(t, c, jobSpec{Namespace: "workspace-b", ID: "idle", Type: "batch", Priority: 40, Count: 8, GPUs: 1, Meta: idleMeta})
	return waitRunning(t, c, "workspace-b", "idle", 8, 30*time.Second)
}

// fairStops checks that the broker's preemption record holds exactly the
// allocations stopped, each one GPU of team B's idle job stopped for team
// C's under rule L14.fair.
func fairStops(t *testing.T, b *broker, stopped []string) {
	t.Helper()
	type stop struct {
		Alloc, Namespace, Job, For, Rule string
		GPUs                             int
	}
	var want, got []stop
	for _, id := range stopped {
		want = append(want, stop{id, "workspace-b", "idle", "workspace-c/idle/main", string(plan.RuleFair), 1})
	}
	for _, p := range b.preemptions(t) {
		got = append(got, stop{p.Alloc, p.Namespace, p.Job, p.For, p.Rule, p.GPUs})
	}
	order := func(x, y stop) int { return strings.Compare(x.Alloc, y.Alloc) }
	slices.SortFunc(want, order)
	slices.SortFunc(got, order)
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("GET /v1/preemptions (-want +got):\n%s", d)
	}
}

// holdSteady checks, for d (a few plans), that nothing more is stopped
// and that B and C keep exactly the allocations they run: no ping-pong
// (DESIGN L7, L14).
func holdSteady(t *testing.T, c *api.Client, d time.Duration, stopped, bLeft, cRun []string) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		time.Sleep(500 * time.Millisecond)
		now := stoppedAllocs(t, c)
		for _, id := range stopped {
			if !contains(now, id) {
				t.Fatalf("stopped allocation %s is no longer stopped", id)
			}
		}
		if got := running(t, c, "workspace-b", "idle"); !same(got, bLeft) {
			t.Fatalf("team B's idle job runs %v, want the %d left %v", got, len(bLeft), bLeft)
		}
		if got := running(t, c, "workspace-c", "idle"); !same(got, cRun) {
			t.Fatalf("team C's idle job runs %v, want %v", got, cRun)
		}
	}
}

// waitReason returns, from the broker's API, why team C's idle job waits:
// the last plan's wait for workspace-c/idle/main in GET /v1/queue (its
// reason) or in GET /v1/plan (its reason, or each flavor's), or else the
// job's gputide_reason meta, joined by " | ", with any read that failed.
// "" when nothing says it waits.
func waitReason(t *testing.T, c *api.Client, b *broker) string {
	t.Helper()
	var reasons []string
	var q brokerapi.QueueResponse
	if err := getJSON("http://"+b.Addr+"/v1/queue?namespace="+url.QueryEscape("workspace-c"), &q); err != nil {
		reasons = append(reasons, err.Error())
	} else {
		for _, e := range q.Queue {
			if e.Job == "idle" && e.Action == string(plan.ActionWait) {
				reasons = append(reasons, e.Reason)
			}
		}
	}
	var p struct {
		Actions []plan.Action `json:"actions"`
	}
	if err := getJSON("http://"+b.Addr+"/v1/plan", &p); err != nil {
		reasons = append(reasons, err.Error())
	} else {
		for _, a := range p.Actions {
			if a.Action == plan.ActionWait && a.Namespace == "workspace-c" && a.Job == "idle" {
				reasons = append(reasons, a.Reason)
				for _, r := range a.Reasons {
					reasons = append(reasons, r.Reason)
				}
			}
		}
	}
	if j := jobInfo(t, c, "workspace-c", "idle"); j.Meta[jobmeta.MetaStatus] == "waiting" {
		reasons = append(reasons, j.Meta[jobmeta.MetaReason])
	}
	return strings.Join(reasons, " | ")
}

func TestFairLending(t *testing.T) {
	began := time.Now()
	a := startGPUNomad(t)
	c := a.Client
	t.Logf("agent ready %s after start", time.Since(began).Round(10*time.Millisecond))
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, a *nomadAgent)
	}{
		{"L14.fair gives team C its fair share", fairGiveBack},
		{"an eviction budget stops 2 and says why C waits", fairBudget},
	} {
		ok := t.Run(tc.name, func(t *testing.T) {
			defer cleanJobs(t, c)
			tc.fn(t, a)
		})
		if !ok && testing.Short() {
			return
		}
	}
	t.Logf("whole test %s", time.Since(began).Round(10*time.Millisecond))
}

// fairGiveBack: within 60 s of its submission team C's idle job runs its 4
// allocations, on exactly the GPUs of the 4 of team B's allocations that
// were stopped, each under rule L14.fair; B keeps the other 4 and nothing
// moves after that.
func fairGiveBack(t *testing.T, a *nomadAgent) {
	c := a.Client
	b := startFairBroker(t, a, "")
	bIdle := fillWithB(t, c)
	before := stoppedAllocs(t, c)

	submitted := time.Now()
	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "idle", Type: "batch", Priority: 40, Count: 4, GPUs: 1, Meta: idleMeta})
	cRun := waitRunning(t, c, "workspace-c", "idle", 4, 60*time.Second)
	t.Logf("team C runs 4 %s after its submission", time.Since(submitted).Round(10*time.Millisecond))

	stopped := minus(stoppedAllocs(t, c), before)
	if len(stopped) != 4 {
		t.Fatalf("stopped %v, want 4 of team B's idle allocations", stopped)
	}
	for _, id := range stopped {
		if !contains(bIdle, id) {
			t.Fatalf("stopped %s, which is not one of team B's idle allocations %v", id, bIdle)
		}
	}
	bLeft := minus(bIdle, stopped)
	if got := running(t, c, "workspace-b", "idle"); !same(got, bLeft) {
		t.Fatalf("team B's idle job runs %v, want the 4 not stopped %v", got, bLeft)
	}
	if got, want := gpusOf(t, c, cRun), gpusOf(t, c, stopped); !same(got, want) {
		t.Fatalf("team C holds %v, want the GPUs freed for it %v (L7)", got, want)
	}
	fairStops(t, b, stopped)
	// Fair shares reached (4 and 4): L14.fair stops cease.
	holdSteady(t, c, 5*time.Second, stopped, bLeft, cRun)
	fairStops(t, b, stopped)
}

// fairBudget: with max_evict = { gpus = 2, per = "10m" } on Quota1.1, only
// 2 of B's allocations are stopped (under L14.fair), C runs 2 on their
// GPUs, and before settle has passed since C's submission the broker says
// C waits for the budget, naming the node and the numbers.
func fairBudget(t *testing.T, a *nomadAgent) {
	c := a.Client
	b := startFairBroker(t, a, `max_evict = { gpus = 2, per = "10m" }`)
	bIdle := fillWithB(t, c)
	before := stoppedAllocs(t, c)

	submitted := time.Now()
	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "idle", Type: "batch", Priority: 40, Count: 4, GPUs: 1, Meta: idleMeta})
	const budgetReason = "Quota1.1: 2 of 2 GPUs evicted in the last 10m"
	var reason string
	err := waitFor(fairSettle-time.Since(submitted), 250*time.Millisecond, func() error {
		reason = waitReason(t, c, b)
		if !strings.Contains(reason, budgetReason) {
			return fmt.Errorf("team C's wait: %q, want one naming %q", reason, budgetReason)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("before settle (%s): %v", fairSettle, err)
	}
	t.Logf("team C's wait %s after its submission: %s", time.Since(submitted).Round(10*time.Millisecond), reason)

	cRun := waitRunning(t, c, "workspace-c", "idle", 2, 30*time.Second)
	stopped := minus(stoppedAllocs(t, c), before)
	if len(stopped) != 2 {
		t.Fatalf("stopped %v, want 2 of team B's idle allocations (the budget)", stopped)
	}
	for _, id := range stopped {
		if !contains(bIdle, id) {
			t.Fatalf("stopped %s, which is not one of team B's idle allocations %v", id, bIdle)
		}
	}
	bLeft := minus(bIdle, stopped)
	if got := running(t, c, "workspace-b", "idle"); !same(got, bLeft) {
		t.Fatalf("team B's idle job runs %v, want the 6 not stopped %v", got, bLeft)
	}
	if got, want := gpusOf(t, c, cRun), gpusOf(t, c, stopped); !same(got, want) {
		t.Fatalf("team C holds %v, want the GPUs freed for it %v (L7)", got, want)
	}
	fairStops(t, b, stopped)
	// The budget holds for its 10 minutes: no third stop.
	holdSteady(t, c, 5*time.Second, stopped, bLeft, cRun)
	fairStops(t, b, stopped)
}
