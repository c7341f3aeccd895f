package acl

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const examplesDir = "../../examples/reference/acl"

func loadExample(t *testing.T, name string) Policy {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(examplesDir, name+".policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseRules(name, string(b))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The reference policies give each team exactly the issue-10 capabilities
// on its own workspace and nothing on the others.
func TestExamplePolicies(t *testing.T) {
	teamRights := []Capability{"list-jobs", "list-scaling-policies", "parse-job", "read-job",
		"read-job-scaling", "read-logs", "read-scaling-policy", "submit-job"}
	for _, team := range []string{"a", "b", "c"} {
		p := loadExample(t, "team-"+team)
		for _, r := range p.Namespaces {
			if r.Policy != DispositionNone || slices.Contains(r.Capabilities, CapScaleJob) {
				t.Errorf("team-%s: rule %q has disposition %q or scale-job", team, r.Label, r.Policy)
			}
		}
		rs := Merge(p)
		for _, ws := range []string{"a", "b", "c"} {
			var want []Capability
			if ws == team {
				want = teamRights
			}
			if diff := cmp.Diff(want, rs.Capabilities("workspace-"+ws)); diff != "" {
				t.Errorf("team-%s on workspace-%s (-want +got):\n%s", team, ws, diff)
			}
		}
	}
	// Team B, as the isolation e2e uses it.
	b := Merge(loadExample(t, "team-b"))
	for _, c := range []struct {
		ns   string
		cap  Capability
		want bool
	}{
		{"workspace-b", CapReadJob, true}, {"workspace-b", CapSubmitJob, true},
		{"workspace-b", CapScaleJob, false}, {"workspace-b", CapAllocExec, false},
		{"workspace-c", CapReadJob, false}, {"workspace-c", CapSubmitJob, false},
		{"workspace-c", CapListJobs, false}, {"default", CapReadJob, false},
	} {
		if got := b.Allowed(c.ns, c.cap); got != c.want {
			t.Errorf("team-b %s on %s: got %v, want %v", c.cap, c.ns, got, c.want)
		}
	}
	admin := Merge(loadExample(t, "gputide-admin"))
	if !admin.Allowed("workspace-c", CapReadJob) || admin.Allowed("workspace-c", CapSubmitJob) {
		t.Errorf("gputide-admin: want read-job and no submit-job on workspace-c, got %v", admin.Capabilities("workspace-c"))
	}
}
