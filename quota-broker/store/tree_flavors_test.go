package store

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/quota"
)

// TestTreeRecordCarriesFlavors: the Consul tree key holds the tree's
// flavors and its nominals by flavor (DESIGN L13, §6), and a record
// written before flavors existed ("GPUs": 48) reads as the implicit
// flavor's nominal.
func TestTreeRecordCarriesFlavors(t *testing.T) {
	rec := TreeRecord{Settings: quota.DefaultSettings(), Root: &quota.Node{
		Name: "Quota1", GPUs: quota.Nominal{"h100": 16, "a100-1g": 7},
		Flavors: []quota.Flavor{
			{Name: "h100", Models: []string{"NVIDIA H100 80GB HBM3"}, Pos: "quota.hcl:1"},
			{Name: "a100-1g", Models: []string{"NVIDIA A100-SXM4-40GB"}, MIGProfile: "1g.5gb", Pos: "quota.hcl:4"},
		},
		Children: []*quota.Node{{Name: "Quota1.1", GPUs: quota.Nominal{"h100": 8}}},
	}}
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var back TreeRecord
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	var old TreeRecord
	if err := json.Unmarshal([]byte(`{"root": {"Name": "Quota1", "GPUs": 48, "Children": null}, "settings": {}}`), &old); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(quota.Plain(48), old.Root.GPUs); diff != "" || old.Root.Flavors != nil {
		t.Errorf("old record: gpus (-want +got):\n%s flavors %v", diff, old.Root.Flavors)
	}
}

// TestTreeRecordCarriesWeights: the tree key holds each node's explicit
// weights by flavor (DESIGN L14), an explicit 0 apart from the default
// (none), and a record without them reads as the default.
func TestTreeRecordCarriesWeights(t *testing.T) {
	rec := TreeRecord{Settings: quota.DefaultSettings(), Root: &quota.Node{
		Name: "Quota1", GPUs: quota.Plain(8),
		Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: quota.Plain(2), Weight: quota.Nominal{quota.ImplicitFlavor: 3}},
			{Name: "Quota1.2", GPUs: quota.Plain(2), Weight: quota.Nominal{quota.ImplicitFlavor: 0}},
		},
	}}
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var back TreeRecord
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s\n%s", diff, data)
	}
	if back.Root.Weight != nil {
		t.Errorf("root weight = %v, want none", back.Root.Weight)
	}
}

// TestTreeRecordCarriesMaxEvict: the tree key holds each node's eviction
// budget (DESIGN L14), and a record without one reads as none.
func TestTreeRecordCarriesMaxEvict(t *testing.T) {
	rec := TreeRecord{Settings: quota.DefaultSettings(), Root: &quota.Node{
		Name: "Quota1", GPUs: quota.Plain(8), MaxEvict: &quota.EvictBudget{GPUs: 16, Per: 5 * time.Minute},
		Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: quota.Plain(2), MaxEvict: &quota.EvictBudget{GPUs: 0, Per: time.Hour}},
			{Name: "Quota1.2", GPUs: quota.Plain(2)},
		},
	}}
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var back TreeRecord
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s\n%s", diff, data)
	}
	if back.Root.Children[1].MaxEvict != nil {
		t.Errorf("Quota1.2 budget = %+v, want none", back.Root.Children[1].MaxEvict)
	}
}
