package snapshot

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// withBudgets is base with eviction budgets on Quota1 and Quota1.2 and
// two recent evictions (DESIGN L14).
var withBudgets = strings.TrimSuffix(strings.TrimSpace(strings.NewReplacer(
	`"quota": {"name": "Quota1", "gpus": 8,`, `"quota": {"name": "Quota1", "gpus": 8, "max_evict": {"gpus": 16, "per": "5m"},`,
	`{"name": "Quota1.2", "gpus": 4,`, `{"name": "Quota1.2", "gpus": 4, "max_evict": {"per": "1h30m", "gpus": 0},`,
).Replace(base)), "}") + `,
  "evictions": [{"quota": "Quota1.1", "gpus": 4, "time": "2026-12-01T07:57:00Z"},
                {"quota": "Quota1", "gpus": 1, "time": "2026-12-01T08:59:30+01:00"}]
}`

func TestEvictionsDecodeAndRoundTrip(t *testing.T) {
	if withBudgets == base || !strings.Contains(withBudgets, `"per": "1h30m"`) {
		t.Fatal("the budgets were not put into the document")
	}
	s, err := Unmarshal([]byte(withBudgets))
	if err != nil {
		t.Fatal(err)
	}
	budgets := map[string]*quota.EvictBudget{}
	s.Quota.Walk(func(n *quota.Node) { budgets[n.Name] = n.MaxEvict })
	wantBudgets := map[string]*quota.EvictBudget{"Quota1": {GPUs: 16, Per: 5 * time.Minute}, "Quota1.1": nil,
		"Quota1.2": {GPUs: 0, Per: 90 * time.Minute}}
	if diff := cmp.Diff(wantBudgets, budgets); diff != "" {
		t.Fatalf("max_evict (-want +got):\n%s", diff)
	}
	want := []plan.Eviction{{Quota: "Quota1.1", GPUs: 4, Time: time.Date(2026, 12, 1, 7, 57, 0, 0, time.UTC)},
		{Quota: "Quota1", GPUs: 1, Time: time.Date(2026, 12, 1, 7, 59, 30, 0, time.UTC)}}
	opt := cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })
	if diff := cmp.Diff(want, s.Evictions, opt); diff != "" {
		t.Fatalf("evictions (-want +got):\n%s", diff)
	}
	var buf bytes.Buffer
	if err := Encode(&buf, s); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"max_evict": {`, `"per": "5m0s"`, `"per": "1h30m0s"`, `"evictions": [`, `"time": "2026-12-01T07:57:00Z"`} {
		if !strings.Contains(buf.String(), key) {
			t.Errorf("Encode's output lacks %s:\n%s", key, buf.String())
		}
	}
	back, err := Decode(&buf)
	if err != nil {
		t.Fatalf("decoding Encode's output: %v\n%s", err, buf.String())
	}
	if diff := cmp.Diff(want, back.Evictions, opt); diff != "" {
		t.Errorf("round trip evictions (-want +got):\n%s", diff)
	}
	budgets = map[string]*quota.EvictBudget{}
	back.Quota.Walk(func(n *quota.Node) { budgets[n.Name] = n.MaxEvict })
	if diff := cmp.Diff(wantBudgets, budgets); diff != "" {
		t.Errorf("round trip max_evict (-want +got):\n%s", diff)
	}
	// Without them neither key is written (older readers).
	s.Evictions = nil
	s.Quota.Walk(func(n *quota.Node) { n.MaxEvict = nil })
	buf.Reset()
	if err := Encode(&buf, s); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "evict") {
		t.Errorf("Encode wrote max_evict or evictions for none:\n%s", buf.String())
	}
	// A quota object standing alone (the API's tree documents) carries it.
	root, err := UnmarshalQuota(mustMarshalQuota(t, back.Quota))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantBudgets["Quota1"], root.MaxEvict); diff != "" {
		t.Errorf("MarshalQuota/UnmarshalQuota (-want +got):\n%s", diff)
	}
}

func mustMarshalQuota(t *testing.T, n *quota.Node) []byte {
	t.Helper()
	data, err := MarshalQuota(n)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestEvictionsRejected(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{`"max_evict": {"gpus": 16,`, `"max_evict": {"gpus": -1,`, `quota.max_evict.gpus: -1 is negative`},
		{`"max_evict": {"gpus": 16,`, `"max_evict": {"gpus": 2147483648,`, `quota.max_evict.gpus: 2147483648 is too large (at most 2147483647)`},
		{`"max_evict": {"gpus": 16,`, `"max_evict": {"gpus": 1.5,`, `quota.max_evict.gpus: `},
		{`"per": "5m"`, `"per": "0s"`, `quota.max_evict.per: "0s" is not above 0: a budget needs a window (DESIGN L14)`},
		{`"per": "5m"`, `"per": "-5m"`, `quota.max_evict.per: "-5m" is negative`},
		{`"per": "5m"`, `"per": "five"`, `quota.max_evict.per: "five" is not a Go duration`},
		{`"per": "5m"`, `"per": 300`, `quota.max_evict.per: `},
		{`"per": "1h30m"`, `"per": "25h"`, `quota.children[1].max_evict.per: "25h" is more than 24h0m0s (DESIGN L14)`},
		{`"per": "1h30m", "gpus": 0`, `"per": "1h30m"`, `quota.children[1].max_evict.gpus: missing required key "gpus"`},
		{`"per": "1h30m", "gpus": 0`, `"per": "1h30m", "gpus": 0, "every": 1`, `quota.children[1].max_evict.every: `},
		{`{"quota": "Quota1.1", "gpus": 4,`, `{"quota": "Quota9", "gpus": 4,`, `evictions[0].quota: "Quota9" is not a node of the quota tree`},
		{`{"quota": "Quota1.1", "gpus": 4,`, `{"quota": "Quota1.1", "gpus": 0,`, `evictions[0].gpus: must be at least 1, not 0`},
		{`"time": "2026-12-01T08:59:30+01:00"`, `"time": "yesterday"`, `evictions[1].time: "yesterday" is not an RFC 3339 time`},
		{`"gpus": 1, "time"`, `"time"`, `evictions[1].gpus: missing required key "gpus"`},
	} {
		doc := strings.Replace(withBudgets, tc.from, tc.to, 1)
		if doc == withBudgets {
			t.Fatalf("%q not in the document", tc.from)
		}
		s, err := Unmarshal([]byte(doc))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s -> %s: err = %v, want %s...", tc.from, tc.to, err, tc.want)
		}
		if s != nil {
			t.Errorf("%s -> %s: a snapshot came back with the error", tc.from, tc.to)
		}
	}
}

// TestDecodeTreeMaxEvict: a tree document (PUT /v1/quotas) carries
// max_evict as a snapshot's quota object does; errors name its path.
func TestDecodeTreeMaxEvict(t *testing.T) {
	root, _, err := DecodeTree([]byte(`{"root": {"name": "Q", "gpus": 8, "max_evict": {"gpus": 2, "per": "10m"},
		"children": [{"name": "Q.1", "gpus": 2}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&quota.EvictBudget{GPUs: 2, Per: 10 * time.Minute}, root.MaxEvict); diff != "" || root.Children[0].MaxEvict != nil {
		t.Errorf("max_evict (-want +got):\n%s; child %+v", diff, root.Children[0].MaxEvict)
	}
	_, _, err = DecodeTree([]byte(`{"root": {"name": "Q", "gpus": 8, "children": [{"name": "Q.1", "gpus": 2, "max_evict": {"gpus": 2, "per": "0s"}}]}}`))
	if want := `root.children[0].max_evict.per: "0s" is not above 0: a budget needs a window (DESIGN L14)`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}
