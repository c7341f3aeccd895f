package snapshot

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/plan"
)

// withIdle is base with idle_groups: one full entry, one with defaults.
var withIdle = strings.TrimSuffix(strings.TrimSpace(base), "}") + `,
  "idle_groups": [{"namespace": "workspace-c", "job": "training", "group": "train", "priority": 30,
                   "gpus": 2, "model": "NVIDIA A100-SXM4-40GB", "datacenters": ["dc2"], "node_pool": "gpu",
                   "flavors": ["gpu"], "max": 8, "count": 1},
                  {"namespace": "workspace-b", "job": "sweep", "group": "trial", "priority": 20,
                   "gpus": 1, "max": 4, "count": 0}]
}`

func TestIdleGroupsDecodeAndRoundTrip(t *testing.T) {
	s, err := Unmarshal([]byte(withIdle))
	if err != nil {
		t.Fatal(err)
	}
	want := []plan.IdleGroup{
		{Namespace: "workspace-c", Job: "training", Group: "train", Priority: 30, GPUs: 2, Model: "NVIDIA A100-SXM4-40GB",
			Datacenters: []string{"dc2"}, NodePool: "gpu", Max: 8, Count: 1, Flavors: []string{"gpu"}},
		{Namespace: "workspace-b", Job: "sweep", Group: "trial", Priority: 20, GPUs: 1, Max: 4},
	}
	if diff := cmp.Diff(want, s.IdleGroups); diff != "" {
		t.Fatalf("idle_groups (-want +got):\n%s", diff)
	}
	var buf bytes.Buffer
	if err := Encode(&buf, s); err != nil {
		t.Fatal(err)
	}
	back, err := Decode(&buf)
	if err != nil {
		t.Fatalf("decoding Encode's output: %v\n%s", err, buf.String())
	}
	if diff := cmp.Diff(want, back.IdleGroups); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	// Without idle groups the key is not written (older readers).
	s.IdleGroups = nil
	buf.Reset()
	if err := Encode(&buf, s); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "idle_groups") {
		t.Fatalf("Encode wrote idle_groups for none:\n%s", buf.String())
	}
}

func TestIdleGroupsRejected(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{`"max": 8`, `"max": 0`, `idle_groups[0].max: must be at least 1, not 0`},
		{`"count": 0}`, `"count": -2}`, `idle_groups[1].count: must be in 0-2147483647, not -2`},
		{`"priority": 30`, `"priority": 300`, `idle_groups[0].priority: 300 is outside 1-100`},
		{`"gpus": 1, "max": 4`, `"gpus": 0, "max": 4`, `idle_groups[1].gpus: must be at least 1, not 0`},
		{`"namespace": "workspace-b", "job": "sweep", "group": "trial"`, `"namespace": "workspace-c", "job": "training", "group": "train"`,
			`idle_groups[1]: group "workspace-c/training/train" is listed twice (also idle_groups[0])`},
		{`"max": 8, "count": 1}`, `"count": 1}`, `idle_groups[0].max: missing required key "max"`},
	} {
		doc := strings.Replace(withIdle, tc.from, tc.to, 1)
		if doc == withIdle {
			t.Fatalf("%q not in the document", tc.from)
		}
		_, err := Unmarshal([]byte(doc))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s -> %s: got %v, want %s", tc.from, tc.to, err, tc.want)
		}
	}
}
