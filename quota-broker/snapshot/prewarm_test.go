package snapshot

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/plan"
)

// withPrewarm is base with prewarm: one full entry, one with defaults.
var withPrewarm = strings.TrimSuffix(strings.TrimSpace(base), "}") + `,
  "prewarm": [{"namespace": "workspace-a", "job": "inference", "group": "web", "type": "service", "priority": 70,
               "gpus": 2, "model": "NVIDIA A100-SXM4-40GB", "datacenters": ["dc2"], "node_pool": "gpu",
               "flavors": ["gpu"], "at": "2026-12-01T09:00:00Z", "count": 3, "until": "2026-12-01T09:01:30Z"},
              {"namespace": "workspace-b", "job": "api", "group": "srv", "type": "batch", "priority": 50,
               "gpus": 1, "at": "2026-12-01T09:30:00+01:00", "count": 1, "until": "2026-12-01T08:31:00Z"}]
}`

func TestPrewarmDecodeAndRoundTrip(t *testing.T) {
	s, err := Unmarshal([]byte(withPrewarm))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	at2 := time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC)
	want := []plan.Prewarm{
		{Namespace: "workspace-a", Job: "inference", Group: "web", Type: plan.JobService, Priority: 70, GPUs: 2,
			Model: "NVIDIA A100-SXM4-40GB", Datacenters: []string{"dc2"}, NodePool: "gpu", Flavors: []string{"gpu"},
			At: at, Count: 3, Until: at.Add(90 * time.Second)},
		{Namespace: "workspace-b", Job: "api", Group: "srv", Type: plan.JobBatch, Priority: 50, GPUs: 1,
			At: at2, Count: 1, Until: at2.Add(time.Minute)},
	}
	opt := cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })
	if diff := cmp.Diff(want, s.Prewarm, opt); diff != "" {
		t.Fatalf("prewarm (-want +got):\n%s", diff)
	}
	var buf bytes.Buffer
	if err := Encode(&buf, s); err != nil {
		t.Fatal(err)
	}
	back, err := Decode(&buf)
	if err != nil {
		t.Fatalf("decoding Encode's output: %v\n%s", err, buf.String())
	}
	if diff := cmp.Diff(want, back.Prewarm, opt); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	// Without pre-warms the key is not written (older readers).
	s.Prewarm = nil
	buf.Reset()
	if err := Encode(&buf, s); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "prewarm") {
		t.Fatalf("Encode wrote prewarm for none:\n%s", buf.String())
	}
}

func TestPrewarmRejected(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{`"count": 3`, `"count": 0`, `prewarm[0].count: must be at least 1, not 0`},
		{`"priority": 70`, `"priority": 300`, `prewarm[0].priority: 300 is outside 1-100`},
		{`"gpus": 1, "at"`, `"gpus": 0, "at"`, `prewarm[1].gpus: must be at least 1, not 0`},
		{`"group": "srv", "type": "batch"`, `"group": "srv", "type": "system"`, `prewarm[1].type: "system": only service and batch groups are pre-warmed`},
		{`"at": "2026-12-01T09:00:00Z"`, `"at": "9am"`, `prewarm[0].at: `},
		{`"until": "2026-12-01T09:01:30Z"`, `"until": "2026-12-01T09:00:00Z"`,
			`prewarm[0].until: 2026-12-01T09:00:00Z is not after at 2026-12-01T09:00:00Z`},
		{`"namespace": "workspace-b", "job": "api", "group": "srv"`, `"namespace": "workspace-a", "job": "inference", "group": "web"`,
			`prewarm[1]: group "workspace-a/inference/web" is listed twice (also prewarm[0])`},
		{`"count": 1, "until"`, `"until"`, `prewarm[1].count: missing required key "count"`},
	} {
		doc := strings.Replace(withPrewarm, tc.from, tc.to, 1)
		if doc == withPrewarm {
			t.Fatalf("%q not in the document", tc.from)
		}
		_, err := Unmarshal([]byte(doc))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s -> %s: got %v, want %s", tc.from, tc.to, err, tc.want)
		}
	}
}
