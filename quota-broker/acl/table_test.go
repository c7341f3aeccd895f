package acl

import (
	"maps"
	"slices"
	"strings"
)

// The rules table of issue 10, shared by the unit tests (rules parsed and
// merged here), the replay tests (Nomad's recorded answers) and the
// conformance test against a real Nomad (conformance_test.go).

// tableNamespaces are the namespaces every case is checked in, for
// read-job (Nomad: GET /v1/job/<id>) and submit-job (POST /v1/job/<id>/plan).
var tableNamespaces = []string{"default", "team-a", "team-b", "team-c", "prod-api", "prod-web", "dev-x"}

// tablePolicies are the policies the cases use, by name.
var tablePolicies = map[string]string{
	"prod-glob-write":  `namespace "prod-*" { policy = "write" }`,
	"prod-api-read":    `namespace "prod-api" { policy = "read" }`,
	"all-read":         `namespace "*" { policy = "read" }`,
	"prod-w-deny":      `namespace "prod-w*" { policy = "deny" }`,
	"team-b-write":     `namespace "team-b" { policy = "write" }`,
	"team-b-deny":      `namespace "team-b" { policy = "deny" }`,
	"team-b-deny-cap":  `namespace "team-b" { capabilities = ["deny"] }`,
	"deny-all-a-read":  "namespace \"*\" { policy = \"deny\" }\nnamespace \"team-a\" { policy = \"read\" }",
	"team-c-submit":    `namespace "team-c" { capabilities = ["submit-job"] }`,
	"team-c-read-cap":  `namespace "team-c" { capabilities = ["read-job"] }`,
	"team-a-read-cap":  `namespace "team-a" { capabilities = ["read-job", "list-jobs"] }`,
	"team-a-scale":     `namespace "team-a" { policy = "scale" }`,
	"team-a-read-plus": "namespace \"team-a\" {\n  policy       = \"read\"\n  capabilities = [\"submit-job\"]\n}",
	"tie":              "namespace \"team-*\" { policy = \"write\" }\nnamespace \"*eam-b\" { policy = \"read\" }",
	"tie-reversed":     "namespace \"team-*\" { policy = \"read\" }\nnamespace \"te*m-b\" { policy = \"write\" }",
	"tie-deny":         "namespace \"team-*\" { policy = \"deny\" }\nnamespace \"*eam-b\" { policy = \"write\" }",
	"other-blocks": `
namespace "dev-*" {
  policy = "read"
  variables {
    path "project/*" { capabilities = ["read", "list"] }
  }
}
node { policy = "read" }
agent { policy = "read" }
operator { policy = "read" }
quota { policy = "read" }
plugin { policy = "list" }
host_volume "*" { policy = "read" }
node_pool "*" { policy = "read" }
`,
	"json-rules": `{"namespace": {"team-c": {"policy": "read"}, "team-b": {"capabilities": ["submit-job"]}}}`,
}

// tableCase is one token: its policies, its roles (each a list of
// policies), and what it may do per namespace: "r" read-job, "s"
// submit-job, both "rs"; a namespace not listed allows neither.
type tableCase struct {
	name       string
	policies   []string
	roles      [][]string
	management bool
	// expires: the token is created with a short TTL and checked after it
	// passed; want then is empty.
	expires bool
	want    map[string]string
}

var tableCases = []tableCase{
	{name: "exact label beats glob", policies: []string{"prod-glob-write", "prod-api-read"},
		want: map[string]string{"prod-api": "r", "prod-web": "rs"}},
	{name: "closest glob wins", policies: []string{"all-read", "prod-glob-write", "prod-w-deny"},
		want: map[string]string{"default": "r", "team-a": "r", "team-b": "r", "team-c": "r", "prod-api": "rs", "dev-x": "r"}},
	{name: "deny policy on a label leaves nothing", policies: []string{"team-b-write", "team-b-deny"},
		want: map[string]string{}},
	{name: "deny capability on a label leaves nothing", policies: []string{"team-b-write", "team-b-deny-cap"},
		want: map[string]string{}},
	{name: "exact label beats denying glob", policies: []string{"deny-all-a-read"},
		want: map[string]string{"team-a": "r"}},
	{name: "policies and roles merge", policies: []string{"team-c-read-cap"}, roles: [][]string{{"team-c-submit"}},
		want: map[string]string{"team-c": "rs"}},
	{name: "roles only", roles: [][]string{{"team-b-write"}, {"team-c-read-cap", "team-a-read-cap"}},
		want: map[string]string{"team-a": "r", "team-b": "rs", "team-c": "r"}},
	{name: "capabilities without disposition", policies: []string{"team-a-read-cap"},
		want: map[string]string{"team-a": "r"}},
	{name: "scale disposition", policies: []string{"team-a-scale"},
		want: map[string]string{"team-a": "r"}},
	{name: "read disposition plus capability", policies: []string{"team-a-read-plus"},
		want: map[string]string{"team-a": "rs"}},
	{name: "capabilities of one label add up", policies: []string{"team-c-read-cap", "team-c-submit"},
		want: map[string]string{"team-c": "rs"}},
	{name: "no matching label gives nothing", policies: []string{"team-c-submit"},
		want: map[string]string{"team-c": "s"}},
	{name: "other blocks are ignored", policies: []string{"other-blocks"},
		want: map[string]string{"dev-x": "r"}},
	{name: "JSON rules", policies: []string{"json-rules"},
		want: map[string]string{"team-b": "s", "team-c": "r"}},
	{name: "management token", management: true,
		want: allNamespaces("rs")},
	{name: "tied globs: greatest label wins", policies: []string{"tie"},
		want: map[string]string{"team-a": "rs", "team-b": "rs", "team-c": "rs"}},
	{name: "tied globs: greatest label wins, reversed", policies: []string{"tie-reversed"},
		want: map[string]string{"team-a": "r", "team-b": "r", "team-c": "r"}},
	{name: "tied globs: a winning deny", policies: []string{"tie-deny"},
		want: map[string]string{}},
	{name: "expired token", policies: []string{"all-read"}, expires: true,
		want: map[string]string{}},
}

func allNamespaces(v string) map[string]string {
	out := map[string]string{}
	for _, ns := range tableNamespaces {
		out[ns] = v
	}
	return out
}

// matrix is a result table: namespace -> "r", "s", "rs" or "".
type matrix map[string]string

func (m matrix) String() string {
	var b strings.Builder
	for _, ns := range slices.Sorted(maps.Keys(m)) {
		if m[ns] != "" {
			b.WriteString(ns + "=" + m[ns] + " ")
		}
	}
	return strings.TrimSpace(b.String())
}

// normalize drops empty cells so wants and results compare.
func normalize(m map[string]string) matrix {
	out := matrix{}
	for k, v := range m {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// answer builds a matrix from a predicate.
func answer(allowed func(ns string, c Capability) bool) matrix {
	out := matrix{}
	for _, ns := range tableNamespaces {
		cell := ""
		if allowed(ns, CapReadJob) {
			cell += "r"
		}
		if allowed(ns, CapSubmitJob) {
			cell += "s"
		}
		if cell != "" {
			out[ns] = cell
		}
	}
	return out
}

// allPolicyNames gives the policies a case holds, directly and by role.
func (c tableCase) allPolicyNames() []string {
	names := slices.Clone(c.policies)
	for _, r := range c.roles {
		names = append(names, r...)
	}
	return names
}
