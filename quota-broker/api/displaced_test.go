package api

import (
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// displaced_gpus is the core's per-node figure (plan.Usage.Displaced, L10).
func TestQuotaFiguresDisplacedFromThePlan(t *testing.T) {
	root := &quota.Node{Name: "Quota1", GPUs: quota.Plain(8), Namespaces: []string{"workspace-a"}, Children: []*quota.Node{
		{Name: "Quota1.1", GPUs: quota.Plain(3), Namespaces: []string{"workspace-b"}},
		{Name: "Quota1.2", GPUs: quota.Plain(5), Namespaces: []string{"workspace-c"}},
	}}
	p := &plan.Plan{Usage: []plan.Usage{
		{Quota: "Quota1", Nominal: 8, Used: 6},
		{Quota: "Quota1.1", Nominal: 3, Used: 5, Displaced: 2},
		{Quota: "Quota1.2", Nominal: 5, Used: 1},
	}}
	got := map[string]int{}
	for _, q := range QuotaFigures(&plan.Snapshot{Quota: root}, p, time.Now()) {
		got[q.Name] = q.DisplacedGPUs
	}
	if got["Quota1"] != 0 || got["Quota1.1"] != 2 || got["Quota1.2"] != 0 {
		t.Fatalf("displaced_gpus %v, want Quota1.1 2 and the others 0", got)
	}
}
