package snapshot

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/plan"
)

// A GPU's mig_profile (DESIGN L13): a MIG instance carries its GPU's model
// and its profile; a whole GPU has none, and Marshal leaves the key out
// for it, so snapshots without MIG read and write as before.
func TestAGPUsMIGProfileSurvivesTheRoundTrip(t *testing.T) {
	doc := `{
  "time": "2026-12-01T08:00:00Z",
  "quota": {"name": "Quota1", "gpus": 1, "namespaces": ["workspace-a"]},
  "nodes": [{"id": "node-01", "datacenter": "dc1", "node_pool": "default",
             "gpus": [{"id": "GPU-01-0", "model": "NVIDIA A100-SXM4-40GB", "healthy": true},
                      {"id": "MIG-01-1", "model": "NVIDIA A100-SXM4-40GB", "mig_profile": "1g.5gb", "healthy": true}]}],
  "allocations": [], "pending": [], "reservations": []
}`
	s, err := Unmarshal([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []plan.GPU{
		{ID: "GPU-01-0", Model: "NVIDIA A100-SXM4-40GB", Healthy: true},
		{ID: "MIG-01-1", Model: "NVIDIA A100-SXM4-40GB", Healthy: true, MIGProfile: "1g.5gb"},
	}
	if diff := cmp.Diff(want, s.Nodes[0].GPUs); diff != "" {
		t.Fatalf("GPUs (-want +got):\n%s", diff)
	}
	out, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), `"mig_profile"`); n != 1 || !strings.Contains(string(out), `"mig_profile": "1g.5gb"`) {
		t.Fatalf("Marshal wrote mig_profile %d times, want once with 1g.5gb:\n%s", n, out)
	}
	back, err := Unmarshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, back.Nodes[0].GPUs); diff != "" {
		t.Fatalf("GPUs after the round trip (-want +got):\n%s", diff)
	}
}
