package acl

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The table evaluated on parsed and merged rules alone (no Nomad).
func TestTableRules(t *testing.T) {
	for _, tc := range tableCases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.management || tc.expires {
				t.Skip("a property of the token, checked by the resolver tests")
			}
			var ps []Policy
			for _, name := range tc.allPolicyNames() {
				p, err := ParseRules(name, tablePolicies[name])
				if err != nil {
					t.Fatal(err)
				}
				ps = append(ps, p)
			}
			rs := Merge(ps...)
			if diff := cmp.Diff(normalize(tc.want), answer(rs.Allowed)); diff != "" {
				t.Fatalf("rights (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRules(t *testing.T) {
	p, err := ParseRules("x", tablePolicies["other-blocks"])
	if err != nil {
		t.Fatal(err)
	}
	want := Policy{Name: "x", Namespaces: []NamespaceRule{{Label: "dev-*", Policy: DispositionRead}}}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	p, err = ParseRules("j", tablePolicies["json-rules"])
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]NamespaceRule{}
	for _, r := range p.Namespaces {
		got[r.Label] = r
	}
	wantJ := map[string]NamespaceRule{
		"team-c": {Label: "team-c", Policy: DispositionRead},
		"team-b": {Label: "team-b", Capabilities: []Capability{CapSubmitJob}},
	}
	if diff := cmp.Diff(wantJ, got); diff != "" {
		t.Fatalf("JSON (-want +got):\n%s", diff)
	}
}

func TestParseRulesErrors(t *testing.T) {
	cases := []struct {
		name, rules, wantMsg string
	}{
		{"bad disposition", `namespace "a" { policy = "list" }`, `policy p namespace "a" policy: "list" is not one of read, write, scale, deny`},
		{"policy not a string", `namespace "a" { policy = 3 }`, `policy p namespace "a" policy: must be a string`},
		{"capabilities not a list", `namespace "a" { capabilities = "read-job" }`, `policy p namespace "a" capabilities: must be a list of strings`},
		{"bad capability", `namespace "a" { capabilities = ["Read Job"] }`, `policy p namespace "a" capabilities: "Read Job" is not a capability name`},
		{"bad label", `namespace "a/b" { policy = "read" }`, `policy p namespace "a/b": label must be 1-128 of [a-zA-Z0-9-*]`},
		{"variable reference", `namespace "a" { policy = var.x }`, `policy p namespace "a" policy: `},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRules("p", tc.rules)
			if !errors.Is(err, ErrInvalidRules) {
				t.Fatalf("want ErrInvalidRules, got %v", err)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("want *Error, got %T", err)
			}
			if got := e.Op + ": " + e.Msg; len(got) < len(tc.wantMsg) || got[:len(tc.wantMsg)] != tc.wantMsg {
				t.Fatalf("message\n got %q\nwant prefix %q", got, tc.wantMsg)
			}
		})
	}
	if _, err := ParseRules("p", `namespace "a" {`); !errors.Is(err, ErrInvalidRules) {
		t.Fatalf("syntax error: want ErrInvalidRules, got %v", err)
	}
}

func TestDispositionExpansion(t *testing.T) {
	// As Nomad v1.11.3's policy API expands them (testdata RulesJSON,
	// checked again live by the conformance test).
	for _, tc := range []struct {
		d    Disposition
		want []Capability
	}{
		{DispositionRead, []Capability{"csi-list-volume", "csi-read-volume", "host-volume-read", "list-jobs", "list-scaling-policies", "parse-job", "read-job", "read-job-scaling", "read-scaling-policy"}},
		{DispositionScale, []Capability{"list-scaling-policies", "read-job", "read-job-scaling", "read-scaling-policy", "scale-job", "submit-recommendation"}},
		{DispositionWrite, []Capability{"alloc-exec", "alloc-lifecycle", "csi-list-volume", "csi-mount-volume", "csi-read-volume", "csi-write-volume", "dispatch-job", "host-volume-create", "host-volume-read", "list-jobs", "list-scaling-policies", "parse-job", "read-fs", "read-job", "read-job-scaling", "read-logs", "read-scaling-policy", "scale-job", "submit-job", "submit-recommendation"}},
	} {
		rs := Merge(Policy{Namespaces: []NamespaceRule{{Label: "n", Policy: tc.d}}})
		if diff := cmp.Diff(tc.want, rs.Capabilities("n")); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.d, diff)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"*", "a", true}, {"prod-*", "prod-", true}, {"prod-*", "prod", false},
		{"*-web", "prod-web", true}, {"p*d*b", "prod-web", true}, {"p*d*b", "prod-we", false},
		{"a*a*a", "aaaa", true}, {"a*a*a", "aa", false}, {"**", "", true}, {"team-b", "team-b", true},
	} {
		if got := globMatch(tc.p, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.p, tc.s, got, tc.want)
		}
	}
}

// Globs tied on literal characters: the greatest label wins, whatever the
// order of the policies.
func TestTieWhateverTheOrder(t *testing.T) {
	a := Policy{Name: "a", Namespaces: []NamespaceRule{{Label: "team-*", Capabilities: []Capability{CapReadLogs}}}}
	b := Policy{Name: "b", Namespaces: []NamespaceRule{{Label: "*eam-b", Capabilities: []Capability{CapReadJob}}}}
	for _, rs := range []RuleSet{Merge(a, b), Merge(b, a)} {
		if diff := cmp.Diff([]Capability{CapReadLogs}, rs.Capabilities("team-b")); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
	}
}

func FuzzParseRules(f *testing.F) {
	for _, r := range tablePolicies {
		f.Add(r)
	}
	f.Add(`namespace "*" { policy = "read" capabilities = ["x"] } namespace "*" { policy = "deny" }`)
	f.Fuzz(func(t *testing.T, rules string) {
		p, err := ParseRules("fuzz", rules)
		if err != nil {
			if !errors.Is(err, ErrInvalidRules) {
				t.Fatalf("error without ErrInvalidRules: %v", err)
			}
			return
		}
		for _, r := range p.Namespaces {
			if !validLabel.MatchString(r.Label) {
				t.Fatalf("accepted label %q", r.Label)
			}
			if _, ok := r.Policy.Expand(); !ok {
				t.Fatalf("accepted disposition %q", r.Policy)
			}
		}
		// Whatever parsed evaluates without panic and denies the
		// over-long namespace.
		rs := Merge(p)
		for _, ns := range tableNamespaces {
			rs.Allowed(ns, CapReadJob)
		}
		if rs.Allowed(string(make([]byte, MaxNamespaceLen+1)), CapReadJob) {
			t.Fatal("an over-long namespace was allowed")
		}
	})
}
