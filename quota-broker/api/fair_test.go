package api

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// fairState is a night on 8 GPUs (DESIGN L14): Quota1 (8, budget 16 GPUs
// per 5m) lends to Quota1.1 (nominal 2, weight 1, budget 4 per 10m), which
// holds 5 idle GPUs and asks for 2 more, and Quota1.2 (nominal 2, weight
// 0), which holds 3 idle GPUs:
//
//	base(1.1) = max(0, min(2, 5 + 2)) = 2, wants 5
//	base(1.2) = max(0, min(2, 3))     = 2, wants 1
//	lent(Quota1) = 8 - 0 - (2 + 2) = 4: all to Quota1.1 (the only wanting
//	child of positive weight, wants 5): shares 6 and 2
//	borrowed share: Quota1 0 / 8 = 0, Quota1.1 3 / 1 = 3, Quota1.2 1 / 0 = +Inf
//
// Evictions: Quota1.1 2 GPUs 1m ago and 1 GPU 7m ago, Quota1.2 1 GPU 2m
// ago and 4 GPUs 11m ago: Quota1 has 2 + 1 = 3 of 16 in 5m, Quota1.1 2 + 1
// = 3 of 4 in 10m.
func fairState(now time.Time) (*plan.Snapshot, *plan.Plan) {
	root := &quota.Node{Name: "Quota1", GPUs: quota.Plain(8), Namespaces: []string{"workspace-a"},
		MaxEvict: &quota.EvictBudget{GPUs: 16, Per: 5 * time.Minute}, Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: quota.Plain(2), Weight: quota.Plain(1), Namespaces: []string{"workspace-b"},
				MaxEvict: &quota.EvictBudget{GPUs: 4, Per: 10 * time.Minute}},
			{Name: "Quota1.2", GPUs: quota.Plain(2), Weight: quota.Plain(0), Namespaces: []string{"workspace-c"}},
		}}
	snap := &plan.Snapshot{Quota: root,
		Pending: []plan.Pending{{Namespace: "workspace-b", Job: "sweep", Group: "g", Count: 1, GPUs: 2, Idle: true}},
		Evictions: []plan.Eviction{
			{Quota: "Quota1.1", GPUs: 2, Time: now.Add(-time.Minute)},
			{Quota: "Quota1.1", GPUs: 1, Time: now.Add(-7 * time.Minute)},
			{Quota: "Quota1.2", GPUs: 1, Time: now.Add(-2 * time.Minute)},
			{Quota: "Quota1.2", GPUs: 4, Time: now.Add(-11 * time.Minute)},
		}}
	p := &plan.Plan{Usage: []plan.Usage{
		{Quota: "Quota1", Nominal: 8, Used: 8},
		{Quota: "Quota1.1", Nominal: 2, Used: 5, Borrowed: 3},
		{Quota: "Quota1.2", Nominal: 2, Used: 3, Borrowed: 1},
	}}
	return snap, p
}

// TestQuotaFiguresFairLending: /v1/quotas' L14 figures per node: weight
// (explicit or the nominal), fair share (none for the root), borrowed
// share (+Inf for a weight-0 node that borrows) and budget use.
func TestQuotaFiguresFairLending(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	snap, p := fairState(now)
	type fig struct {
		Name           string
		Weight         int
		WeightExplicit bool
		FairShare      *float64
		BorrowedShare  float64
		MaxEvict       *EvictBudget
	}
	share := func(x float64) *float64 { return &x }
	want := []fig{
		{"Quota1", 8, false, nil, 0, &EvictBudget{GPUs: 16, Per: "5m", PerSeconds: 300, EvictedGPUs: 3}},
		{"Quota1.1", 1, true, share(6), 3, &EvictBudget{GPUs: 4, Per: "10m", PerSeconds: 600, EvictedGPUs: 3}},
		{"Quota1.2", 0, true, share(2), math.Inf(1), nil},
	}
	var got []fig
	for _, q := range QuotaFigures(snap, p, now) {
		got = append(got, fig{q.Name, q.Weight, q.WeightExplicit, q.FairShare, float64(q.BorrowedShare), q.MaxEvict})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("L14 figures (-want +got):\n%s", diff)
	}
	// A plan that admits the sweep counts it in its usage (5 GPUs held by
	// Quota1.1 then), not in the demand twice: base(1.1) 2, wants 3, of
	// the 4 lent; the GPU left goes to Quota1.2 (weight 0, wants 1).
	p.Actions = []plan.Action{{Action: plan.ActionAdmit, Namespace: "workspace-b", Job: "sweep", Group: "g", Count: 1, GPUs: 2}}
	var shares []float64
	for _, q := range QuotaFigures(snap, p, now)[1:] {
		shares = append(shares, *q.FairShare)
	}
	if diff := cmp.Diff([]float64{5, 3}, shares); diff != "" {
		t.Errorf("fair shares with the sweep admitted (-want +got):\n%s", diff)
	}
}

// TestQuotasFairLendingJSON: GET /v1/quotas writes the L14 figures (an
// infinite borrowed share as "+Inf", no fair_share where it is undefined,
// max_evict only where set), and the Go client reads them back.
func TestQuotasFairLendingJSON(t *testing.T) {
	h := newHarness(t, options{})
	snap, p := fairState(clock)
	h.backend.mu.Lock()
	h.backend.st.Snapshot, h.backend.st.Plan = snap, p
	h.backend.mu.Unlock()
	code, body := h.do(t, "GET", "/v1/quotas", tokTeamB, "")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var raw struct {
		Quotas []map[string]json.RawMessage `json:"quotas"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	var got []map[string]string
	for _, q := range raw.Quotas {
		m := map[string]string{}
		for _, k := range []string{"name", "weight", "weight_explicit", "fair_share", "borrowed_share", "max_evict"} {
			if v, ok := q[k]; ok {
				var b bytes.Buffer
				if err := json.Compact(&b, v); err != nil {
					t.Fatal(err)
				}
				m[k] = b.String()
			}
		}
		got = append(got, m)
	}
	want := []map[string]string{
		{"name": `"Quota1"`, "weight": "8", "borrowed_share": "0", "max_evict": `{"gpus":16,"per":"5m","per_seconds":300,"evicted_gpus":3}`},
		{"name": `"Quota1.1"`, "weight": "1", "weight_explicit": "true", "fair_share": "6", "borrowed_share": "3",
			"max_evict": `{"gpus":4,"per":"10m","per_seconds":600,"evicted_gpus":3}`},
		{"name": `"Quota1.2"`, "weight": "0", "weight_explicit": "true", "fair_share": "2", "borrowed_share": `"+Inf"`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
	c, _ := NewClient(h.url, tokTeamB, time.Second)
	cr, err := c.Quotas(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(QuotaFigures(snap, p, clock), cr.Quotas); diff != "" {
		t.Errorf("client quotas (-want +got):\n%s", diff)
	}
}

// TestShareJSON: a borrowed share is a number or "+Inf"; anything else
// is an error, not a panic.
func TestShareJSON(t *testing.T) {
	for in, want := range map[string]float64{"0": 0, "0.75": 0.75, `"+Inf"`: math.Inf(1)} {
		var s Share
		if err := json.Unmarshal([]byte(in), &s); err != nil || float64(s) != want {
			t.Errorf("%s: got %v, %v; want %v", in, s, err, want)
		}
		b, err := json.Marshal(s)
		if err != nil || string(b) != in {
			t.Errorf("%v: wrote %s, %v; want %s", want, b, err, in)
		}
	}
	for _, in := range []string{`"inf"`, "-1", `"x"`, "null1"} {
		var s Share
		if err := json.Unmarshal([]byte(in), &s); err == nil {
			t.Errorf("%s: read %v, want an error", in, s)
		}
	}
	if _, err := json.Marshal(Share(math.NaN())); err == nil {
		t.Error("NaN: no error")
	}
}

// TestUIPageFairLending: the page's tree shows DESIGN L14's figures as
// quota status writes them: weight, fair share ("-" for the root),
// borrowed share ("inf" for a weight-0 node that borrows) and budget use.
func TestUIPageFairLending(t *testing.T) {
	h := newUIHarness(t, false)
	snap, p := fairState(h.clock.Now())
	h.be.mu.Lock()
	h.be.st.Snapshot, h.be.st.Plan = snap, p
	h.be.mu.Unlock()
	c := h.browser(t, nil)
	h.login(t, c, tokTeamB)
	resp, page := send(t, c, "GET", h.ts.URL+"/ui/", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("page: %d\n%s", resp.StatusCode, page)
	}
	cells := regexp.MustCompile(`<td class="n weight">([^<]*)</td><td class="n fair-share">([^<]*)</td><td class="n borrowed-share">([^<]*)</td><td class="evicted">([^<]*)</td>`)
	var got [][]string
	for _, m := range cells.FindAllStringSubmatch(page, -1) {
		got = append(got, m[1:])
	}
	want := [][]string{
		{"8 (nominal)", "-", "0", "3 of 16 GPUs in 5m"},
		{"1", "6", "3", "3 of 4 GPUs in 10m"},
		{"0", "2", "inf", "-"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("page L14 cells (-want +got):\n%s", diff)
	}
	for _, s := range []string{`<th class="n" title="L14: the explicit weight, or the nominal">weight</th>`, `borrowed share</th>`} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
}
