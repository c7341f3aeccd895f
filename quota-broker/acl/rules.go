package acl

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
)

// MaxRulesBytes bounds the rules text of one policy (1 MiB).
const MaxRulesBytes = 1 << 20

// Policy is the part of one Nomad ACL policy the broker evaluates: its
// namespace rules, in the order written. Other blocks (node, agent,
// operator, quota, host_volume, plugin, node_pool, variables inside a
// namespace, ...) are read past and ignored.
type Policy struct {
	Name       string
	Namespaces []NamespaceRule
}

// NamespaceRule is one `namespace "label" { policy = ... capabilities = [...] }`
// block. Label may hold "*" globs.
type NamespaceRule struct {
	Label        string
	Policy       Disposition
	Capabilities []Capability
}

var policySchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "namespace", LabelNames: []string{"label"}}},
}

var namespaceSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "policy"}, {Name: "capabilities"}},
}

// ParseRules reads the rules text of policy name, in HCL or (when it starts
// with "{") JSON, as Nomad accepts both. Errors (kind ErrInvalidRules) name
// the policy, the block and the bad value.
func ParseRules(name, rules string) (Policy, error) {
	p := Policy{Name: name}
	if len(rules) > MaxRulesBytes {
		return p, rulesError(name, "", fmt.Sprintf("%d bytes, more than %d", len(rules), MaxRulesBytes))
	}
	body, err := parseBody(name, rules)
	if err != nil {
		return p, err
	}
	content, _, diags := body.PartialContent(policySchema)
	if diags.HasErrors() {
		return p, rulesError(name, "", diags.Error())
	}
	for _, block := range content.Blocks {
		rule, err := parseNamespace(name, block)
		if err != nil {
			return p, err
		}
		p.Namespaces = append(p.Namespaces, rule)
	}
	return p, nil
}

func parseBody(name, rules string) (hcl.Body, error) {
	file := "policy " + name
	var f *hcl.File
	var diags hcl.Diagnostics
	if strings.HasPrefix(strings.TrimSpace(rules), "{") {
		f, diags = hcljson.Parse([]byte(rules), file)
	} else {
		f, diags = hclsyntax.ParseConfig([]byte(rules), file, hcl.InitialPos)
	}
	if diags.HasErrors() {
		return nil, rulesError(name, "", diags.Error())
	}
	return f.Body, nil
}

// parseNamespace reads one namespace block: its label, its policy string
// and its capabilities list of strings; anything else inside is ignored.
func parseNamespace(name string, block *hcl.Block) (NamespaceRule, error) {
	label := block.Labels[0]
	where := fmt.Sprintf("namespace %q", label)
	if !validLabel.MatchString(label) {
		return NamespaceRule{}, rulesError(name, where, "label must be 1-128 of [a-zA-Z0-9-*]")
	}
	rule := NamespaceRule{Label: label}
	content, _, diags := block.Body.PartialContent(namespaceSchema)
	if diags.HasErrors() {
		return rule, rulesError(name, where, diags.Error())
	}
	if attr, ok := content.Attributes["policy"]; ok {
		s, err := stringValue(name, where+" policy", attr.Expr)
		if err != nil {
			return rule, err
		}
		d := Disposition(s)
		if _, ok := d.Expand(); !ok || d == DispositionNone {
			return rule, rulesError(name, where+" policy", fmt.Sprintf("%q is not one of read, write, scale, deny", s))
		}
		rule.Policy = d
	}
	if attr, ok := content.Attributes["capabilities"]; ok {
		caps, err := capabilitiesValue(name, where+" capabilities", attr.Expr)
		if err != nil {
			return rule, err
		}
		rule.Capabilities = caps
	}
	return rule, nil
}

func stringValue(name, where string, expr hcl.Expression) (string, error) {
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		return "", rulesError(name, where, diags.Error())
	}
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return "", rulesError(name, where, "must be a string")
	}
	return v.AsString(), nil
}

func capabilitiesValue(name, where string, expr hcl.Expression) ([]Capability, error) {
	v, diags := expr.Value(nil)
	if diags.HasErrors() {
		return nil, rulesError(name, where, diags.Error())
	}
	if v.IsNull() || !v.IsWhollyKnown() || !(v.Type().IsTupleType() || v.Type().IsListType()) {
		return nil, rulesError(name, where, "must be a list of strings")
	}
	out := make([]Capability, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() || e.Type() != cty.String {
			return nil, rulesError(name, where, "must be a list of strings")
		}
		s := e.AsString()
		if !validCapability.MatchString(s) {
			return nil, rulesError(name, where, fmt.Sprintf("%q is not a capability name", s))
		}
		out = append(out, Capability(s))
	}
	return out, nil
}

func rulesError(name, where, msg string) error {
	op := "policy " + name
	if where != "" {
		op += " " + where
	}
	return &Error{Kind: ErrInvalidRules, Op: op, Msg: msg}
}
