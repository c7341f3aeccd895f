package quota

import "testing"

func TestFlavorOf(t *testing.T) {
	flavors := []Flavor{
		{Name: "h100", Models: []string{"NVIDIA H100 80GB HBM3"}},
		{Name: "a100-1g", Models: []string{"NVIDIA A100-SXM4-40GB"}, MIGProfile: "1g.5gb"},
		{Name: "a100", Models: []string{"NVIDIA A100-SXM4-40GB"}},
	}
	for _, c := range []struct {
		flavors        []Flavor
		model, profile string
		want           string
		ok             bool
	}{
		{flavors, "NVIDIA H100 80GB HBM3", "", "h100", true},
		{flavors, "NVIDIA A100-SXM4-40GB", "", "a100", true},
		{flavors, "NVIDIA A100-SXM4-40GB", "1g.5gb", "a100-1g", true},
		{flavors, "NVIDIA A100-SXM4-40GB", "2g.10gb", "", false},
		{flavors, "NVIDIA H100 80GB HBM3", "1g.10gb", "", false},
		{flavors, "Tesla T4", "", "", false},
		{nil, "Tesla T4", "", ImplicitFlavor, true},
		{nil, "NVIDIA A100-SXM4-40GB", "1g.5gb", ImplicitFlavor, false},
	} {
		got, ok := FlavorOf(c.flavors, c.model, c.profile)
		if got != c.want || ok != c.ok {
			t.Errorf("FlavorOf(%d flavors, %q, %q) = %q, %v; want %q, %v", len(c.flavors), c.model, c.profile, got, ok, c.want, c.ok)
		}
	}
}

func TestSplitMIGName(t *testing.T) {
	for name, want := range map[string][2]string{
		"NVIDIA A100-SXM4-40GB MIG 1g.5gb": {"NVIDIA A100-SXM4-40GB", "1g.5gb"},
		"NVIDIA H100 80GB HBM3":            {"NVIDIA H100 80GB HBM3", ""},
		" MIG 1g.5gb":                      {" MIG 1g.5gb", ""},
	} {
		if m, p := SplitMIGName(name); m != want[0] || p != want[1] {
			t.Errorf("SplitMIGName(%q) = %q, %q; want %q, %q", name, m, p, want[0], want[1])
		}
	}
}
