package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gputide/gputide/quota-broker/store"
)

// A cycle that preempts feeds DESIGN L14's metrics: each stop it carries
// out adds its GPUs to gputide_evicted_gpus_total under the quota node of
// the victim's namespace and the stop's rule (L5.2: workspace-b, bound to
// Root with child-level preemption, claims workspace-c's GPUs), and the
// plan sets gputide_borrowed_share per node (flavor "gpu").
func TestCycleFeedsTheFairLendingMetrics(t *testing.T) {
	f := newFakeNomad(t)
	f.dynamic = true
	st := store.NewMemory()
	ctx := context.Background()
	clock := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	a, _ := cycleAgent(t, f, st, claimQuota, &clock, hclog.NewNullLogger())
	lock, err := st.Lock(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	a.takeLock(lock)
	c := a.runCycle(ctx, &cycleRun{})
	if c.run.step != "account" || len(c.out.Errors) != 0 {
		t.Fatalf("the cycle stopped in step %q, errors %v", c.run.step, c.out.Errors)
	}
	// Two allocations of workspace-c (quota C) of 2 GPUs each; no node
	// borrows after the plan.
	want := `
# HELP gputide_evicted_gpus_total GPUs stopped as victims under a rule eviction budgets count (L14), by the victim's quota node.
# TYPE gputide_evicted_gpus_total counter
gputide_evicted_gpus_total{quota="C",rule="L5.2"} 4
# HELP gputide_borrowed_share Borrowed GPUs of the quota node's subtree divided by its weight (L14); +Inf for a weight-0 node that borrows.
# TYPE gputide_borrowed_share gauge
gputide_borrowed_share{flavor="gpu",quota="A"} 0
gputide_borrowed_share{flavor="gpu",quota="C"} 0
gputide_borrowed_share{flavor="gpu",quota="Root"} 0
`
	if len(c.out.Preempted) != 2 {
		t.Fatalf("preempted %+v, want two stops", c.out.Preempted)
	}
	if err := testutil.GatherAndCompare(a.registry, strings.NewReader(want), "gputide_evicted_gpus_total", "gputide_borrowed_share"); err != nil {
		t.Fatal(err)
	}
}
