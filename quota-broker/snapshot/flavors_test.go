package snapshot

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/quota"
)

// flavorDoc is a snapshot of a tree with flavors (DESIGN L13): top-level
// flavors, nominals by flavor, a MIG instance, a pending group's allowed
// flavors and a booking's flavor.
const flavorDoc = `{
  "time": "2026-12-01T08:00:00Z",
  "flavors": [
    {"name": "h100", "models": ["NVIDIA H100 80GB HBM3"]},
    {"name": "a100-1g", "models": ["NVIDIA A100-SXM4-40GB"], "mig_profile": "1g.5gb"},
    {"name": "a100", "models": ["NVIDIA A100-SXM4-40GB"]}
  ],
  "quota": {"name": "Quota1", "gpus": {"h100": 8, "a100": 8, "a100-1g": 7}, "namespaces": ["workspace-a"],
    "children": [{"name": "Quota1.1", "gpus": {"a100": 4}, "namespaces": ["workspace-b"]}]},
  "nodes": [{"id": "node-01", "datacenter": "dc1", "node_pool": "default", "gpus": [
    {"id": "GPU-0", "model": "NVIDIA A100-SXM4-40GB", "healthy": true},
    {"id": "MIG-0", "model": "NVIDIA A100-SXM4-40GB", "healthy": true, "mig_profile": "1g.5gb"}]}],
  "allocations": [],
  "pending": [{"namespace": "workspace-b", "job": "train", "group": "w", "type": "batch", "priority": 50,
    "count": 1, "gpus": 1, "flavors": ["a100", "h100"], "submitted_at": "2026-12-01T07:00:00Z"}],
  "reservations": [{"id": "r-1", "namespace": "workspace-b", "quota": "Quota1.1", "gpus": 2, "flavor": "a100",
    "start": "2026-12-02T00:00:00Z", "end": "2026-12-03T00:00:00Z"}]
}`

func TestUnmarshalFlavors(t *testing.T) {
	s, err := Unmarshal([]byte(flavorDoc))
	if err != nil {
		t.Fatal(err)
	}
	wantFlavors := []quota.Flavor{
		{Name: "h100", Models: []string{"NVIDIA H100 80GB HBM3"}, Pos: "flavors[0]"},
		{Name: "a100-1g", Models: []string{"NVIDIA A100-SXM4-40GB"}, MIGProfile: "1g.5gb", Pos: "flavors[1]"},
		{Name: "a100", Models: []string{"NVIDIA A100-SXM4-40GB"}, Pos: "flavors[2]"},
	}
	if diff := cmp.Diff(wantFlavors, s.Quota.Flavors); diff != "" {
		t.Errorf("flavors (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(quota.Nominal{"h100": 8, "a100": 8, "a100-1g": 7}, s.Quota.GPUs); diff != "" {
		t.Errorf("root gpus (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(quota.Nominal{"a100": 4}, s.Quota.Children[0].GPUs); diff != "" {
		t.Errorf("child gpus (-want +got):\n%s", diff)
	}
	if g := s.Nodes[0].GPUs[1]; g.MIGProfile != "1g.5gb" || s.Nodes[0].GPUs[0].MIGProfile != "" {
		t.Errorf("mig_profile: %+v", s.Nodes[0].GPUs)
	}
	if diff := cmp.Diff([]string{"a100", "h100"}, s.Pending[0].Flavors); diff != "" {
		t.Errorf("pending flavors (-want +got):\n%s", diff)
	}
	if s.Reservations[0].Flavor != "a100" {
		t.Errorf("reservation flavor = %q", s.Reservations[0].Flavor)
	}
	// The encoder writes what the decoder reads.
	data, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if diff := cmp.Diff(s, back); diff != "" {
		t.Errorf("round trip (-first +second):\n%s", diff)
	}
	for _, want := range []string{`"gpus": {`, `"h100": 8`, `"mig_profile": "1g.5gb"`, `"flavor": "a100"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("Marshal lacks %s:\n%s", want, data)
		}
	}
}

func TestUnmarshalPlainGPUsOfOneFlavor(t *testing.T) {
	doc := strings.Replace(flavorDoc, `{"name": "a100-1g", "models": ["NVIDIA A100-SXM4-40GB"], "mig_profile": "1g.5gb"},
    {"name": "a100", "models": ["NVIDIA A100-SXM4-40GB"]}`, `{"name": "a100", "models": ["NVIDIA A100-SXM4-40GB"]}`, 1)
	doc = strings.Replace(doc, `{"h100": 8, "a100": 8, "a100-1g": 7}`, `{"h100": 8, "a100": 8}`, 1)
	doc = strings.Replace(doc, `"flavors": [{"name": "h100", "models": ["NVIDIA H100 80GB HBM3"]},`, ``, 1)
	doc = strings.Replace(doc, `"flavors": [
    {"name": "h100", "models": ["NVIDIA H100 80GB HBM3"]},
    {"name": "a100"`, `"flavors": [
    {"name": "a100"`, 1)
	doc = strings.Replace(doc, `{"h100": 8, "a100": 8}`, `8`, 1)
	doc = strings.Replace(doc, `{"a100": 4}`, `4`, 1)
	doc = strings.Replace(doc, `["a100", "h100"]`, `["a100"]`, 1)
	s, err := Unmarshal([]byte(doc))
	if err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	if diff := cmp.Diff(quota.Nominal{"a100": 8}, s.Quota.GPUs); diff != "" {
		t.Errorf("a plain number is the only flavor's (-want +got):\n%s", diff)
	}
}

func TestUnmarshalRejectsBadFlavors(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"a plain number in a tree of several flavors", `{"a100": 4}`, `4`,
			`quota.children[0].gpus: 4 is a plain number, but the tree declares 3 flavors (h100, a100-1g, a100): give an object by flavor, {"h100": 4}`},
		{"an unknown flavor in gpus", `{"a100": 4}`, `{"b200": 4}`,
			`quota.children[0].gpus.b200: flavor "b200" is not a flavor of the tree (h100, a100-1g, a100)`},
		{"a flavor given twice in gpus", `{"a100": 4}`, `{"a100": 4, "a100": 2}`,
			`quota.children[0].gpus.a100: key "a100" is given twice`},
		{"a string nominal", `{"a100": 4}`, `{"a100": "4"}`,
			`quota.children[0].gpus.a100: want a whole number, not the string "4"`},
		{"an unknown flavor in a pending group", `["a100", "h100"]`, `["a100", "b200"]`,
			`pending[0].flavors[1]: "b200" is not a flavor of the tree (h100, a100-1g, a100)`},
		{"a booking without its flavor", `"flavor": "a100",`, ``,
			`reservations[0].flavor: is missing: the tree declares flavors (h100, a100-1g, a100), and a booking names one`},
		{"a booking with flavor and model", `"flavor": "a100",`, `"flavor": "a100", "model": "NVIDIA A100-SXM4-40GB",`,
			`reservations[0].model: "NVIDIA A100-SXM4-40GB" with flavor "a100": a booking gives flavor or model, not both`},
		{"a model in two flavors", `{"name": "a100", "models": ["NVIDIA A100-SXM4-40GB"]}`, `{"name": "a100", "models": ["NVIDIA H100 80GB HBM3"]}`,
			`flavors[2]: flavor "a100": model "NVIDIA H100 80GB HBM3" is already in flavor "h100" (flavors[0]): a device belongs to one flavor`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(flavorDoc, tc.from, tc.to, 1)
			if doc == flavorDoc {
				t.Fatalf("%q is not in the document", tc.from)
			}
			s, err := Unmarshal([]byte(doc))
			if err == nil {
				t.Fatalf("no error; snapshot %+v", s)
			}
			if err.Error() != tc.want {
				t.Errorf("err =\n%s\nwant\n%s", err, tc.want)
			}
		})
	}
}

func TestDecodeTreeWithFlavors(t *testing.T) {
	root, _, err := DecodeTree([]byte(`{"flavors": [{"name": "h100", "models": ["H"]}, {"name": "a100", "models": ["A"]}],
		"root": {"name": "r", "gpus": {"h100": 2, "a100": 3}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(quota.Nominal{"h100": 2, "a100": 3}, root.GPUs); diff != "" {
		t.Errorf("gpus (-want +got):\n%s", diff)
	}
	// A quota object standing alone (a write's answer) carries the flavors.
	data, err := MarshalQuota(root)
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalQuota(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if !quota.SameFlavors(root.Flavors, back.Flavors) || back.GPUs.Of("a100") != 3 {
		t.Errorf("MarshalQuota round trip: %s -> %+v", data, back)
	}
}

// TestWeightRoundTrip: a quota node's weight (DESIGN L14) is read like
// gpus, an explicit 0 kept apart from the default (absent), and written
// back as read.
func TestWeightRoundTrip(t *testing.T) {
	doc := strings.Replace(flavorDoc, `"gpus": {"a100": 4},`, `"gpus": {"a100": 4}, "weight": {"a100": 3, "h100": 0},`, 1)
	s, err := Unmarshal([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(quota.Nominal{"a100": 3, "h100": 0}, s.Quota.Children[0].Weight); diff != "" {
		t.Errorf("weight (-want +got):\n%s", diff)
	}
	if s.Quota.Weight != nil {
		t.Errorf("root weight = %v, want none (the default)", s.Quota.Weight)
	}
	data, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if diff := cmp.Diff(s, back); diff != "" {
		t.Errorf("round trip (-first +second):\n%s", diff)
	}
	bad := strings.Replace(flavorDoc, `"gpus": {"a100": 4},`, `"gpus": {"a100": 4}, "weight": {"a100": 10001},`, 1)
	if _, err := Unmarshal([]byte(bad)); err == nil || !strings.Contains(err.Error(), `quota.children[0].weight: weight 10001 of flavor "a100" is out of range (0..10000; DESIGN L14)`) {
		t.Errorf("err = %v", err)
	}
}
