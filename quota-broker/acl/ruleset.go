package acl

import (
	"maps"
	"slices"
	"strings"
)

// grant is what one label gives after merging: nothing when denied,
// else the union of its capabilities.
type grant struct {
	denied bool
	caps   map[Capability]struct{}
}

func (g grant) has(c Capability) bool {
	if g.denied || c == CapDeny {
		return false
	}
	_, ok := g.caps[c]
	return ok
}

// globRule is one label holding "*", with its count of literal characters.
type globRule struct {
	label    string
	literals int
	grant    grant
}

// RuleSet is the merged namespace rules of all of a token's policies
// (DESIGN §9): per label, the union of the capabilities of every rule with
// that label, or nothing when any of them denies.
type RuleSet struct {
	exact map[string]grant
	globs []globRule // sorted by label
}

// Merge joins the namespace rules of policies per label. A label is denied
// when any rule for it has policy = "deny" or lists the "deny" capability.
func Merge(policies ...Policy) RuleSet {
	byLabel := map[string]*grant{}
	for _, p := range policies {
		for _, r := range p.Namespaces {
			g := byLabel[r.Label]
			if g == nil {
				g = &grant{caps: map[Capability]struct{}{}}
				byLabel[r.Label] = g
			}
			addRule(g, r)
		}
	}
	rs := RuleSet{exact: map[string]grant{}}
	for _, label := range slices.Sorted(maps.Keys(byLabel)) {
		g := *byLabel[label]
		if g.denied {
			g.caps = nil
		}
		if strings.Contains(label, "*") {
			rs.globs = append(rs.globs, globRule{label: label, literals: len(label) - strings.Count(label, "*"), grant: g})
		} else {
			rs.exact[label] = g
		}
	}
	return rs
}

func addRule(g *grant, r NamespaceRule) {
	if r.Policy == DispositionDeny || slices.Contains(r.Capabilities, CapDeny) {
		g.denied = true
		return
	}
	expanded, _ := r.Policy.Expand()
	for _, c := range expanded {
		g.caps[c] = struct{}{}
	}
	for _, c := range r.Capabilities {
		g.caps[c] = struct{}{}
	}
}

// MaxNamespaceLen bounds a namespace name looked up (Nomad's limit is 128).
const MaxNamespaceLen = 128

// lookup finds the grant for namespace ns: its exact label if present
// (denied or not), else the matching glob with the most literal
// characters; among globs tied on that count, the label greatest in byte
// order, which for labels matching the same name is the one whose first
// "*" comes latest (the longest literal prefix). That tie rule is what
// Nomad v1.11.3 answered in every tie the conformance test tried (the
// documentation does not say). ok is false when no label matches.
func (rs RuleSet) lookup(ns string) (grant, bool) {
	if ns == "" || len(ns) > MaxNamespaceLen {
		return grant{}, false
	}
	if g, ok := rs.exact[ns]; ok {
		return g, true
	}
	best := -1
	var won grant
	for _, gr := range rs.globs { // sorted by label: a later tie is greater
		if gr.literals >= best && globMatch(gr.label, ns) {
			best, won = gr.literals, gr.grant
		}
	}
	return won, best >= 0
}

// Allowed reports whether the merged rules give capability c in namespace ns.
func (rs RuleSet) Allowed(ns string, c Capability) bool {
	g, ok := rs.lookup(ns)
	return ok && g.has(c)
}

// Capabilities lists, sorted, what the merged rules give in namespace ns.
func (rs RuleSet) Capabilities(ns string) []Capability {
	g, ok := rs.lookup(ns)
	if !ok || g.denied {
		return nil
	}
	return slices.Sorted(maps.Keys(g.caps))
}

// globMatch reports whether s matches pattern, where "*" matches any run
// of characters (also none) and every other byte matches itself. It runs
// in O(len(pattern)*len(s)) at worst, with no recursion.
func globMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
