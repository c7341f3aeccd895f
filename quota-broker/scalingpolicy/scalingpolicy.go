// Package scalingpolicy reads the checks of Nomad Autoscaler scaling policies
// in the forms a user or Nomad gives them (issue 11 items 2 and 5): an
// Autoscaler policy file (`scaling "name" { policy { check ... } }`, decoded
// with the Autoscaler's own sdk.FileDecodeScalingPolicies), a JSON jobspec as
// `nomad job run -output` writes it, and the Policy map of a Nomad scaling
// policy (GET /v1/scaling/policy/<id>), read as the Autoscaler v0.5.0 reads it
// (lists of one-key maps; config values formatted with %v).
//
// It is pure: bytes or decoded values in, checks out; no I/O.
package scalingpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/nomad-autoscaler/sdk"
	nomadapi "github.com/hashicorp/nomad/api"
)

// ScheduleStrategy is the name of the gputide-schedule strategy.
const ScheduleStrategy = "gputide-schedule"

// MaxFile bounds the size of a policy file or jobspec read by callers.
const MaxFile = 4 << 20

// Sentinels wrapped by *Error.
var (
	// ErrHCLJobspec: the file is an HCL jobspec, which only Nomad can parse.
	ErrHCLJobspec = errors.New("HCL jobspec")
	// ErrNoCheck: no check of the wanted strategy (or of the wanted name).
	ErrNoCheck = errors.New("no such check")
	// ErrAmbiguous: several checks of the strategy and no name to choose.
	ErrAmbiguous = errors.New("several checks")
	// ErrSyntax: the file does not decode.
	ErrSyntax = errors.New("syntax")
)

// Error is every error of this package. Error() reads "<File>: <Reason>".
type Error struct {
	File   string
	Reason string
	Err    error
}

func (e *Error) Error() string { return e.File + ": " + e.Reason }

func (e *Error) Unwrap() error { return e.Err }

// Check is one check of a scaling policy.
type Check struct {
	// Policy names the policy: the scaling block's label in a policy file, or
	// "" in a jobspec or Nomad policy (see Namespace, Job, Group).
	Policy string
	// Namespace, Job, Group: the task group a jobspec's scaling block belongs
	// to (empty for a policy file, unless its target names them).
	Namespace, Job, Group string
	// Name is the check's label.
	Name string
	// Source and Query as written (may be empty).
	Source, Query string
	// Strategy is the strategy block's label and Config its settings.
	Strategy string
	Config   map[string]string
}

// Where names the policy of c for messages: `policy "name"` or
// `job "j" group "g"`.
func (c Check) Where() string {
	if c.Policy != "" {
		return fmt.Sprintf("policy %q", c.Policy)
	}
	return fmt.Sprintf("job %q group %q", c.Job, c.Group)
}

// Kind says what a file holds.
type Kind int

const (
	KindPolicyFile Kind = iota + 1 // Autoscaler policy file (HCL)
	KindJSONJob                    // JSON jobspec
	KindHCLJob                     // HCL jobspec: to be parsed by Nomad
)

// Sniff tells a JSON jobspec (first non-space byte '{'), an HCL jobspec (a
// top-level `job` block) and an Autoscaler policy file apart. An HCL file that
// does not parse is reported as a policy file, whose decoding gives the error.
func Sniff(name string, src []byte) Kind {
	if t := bytes.TrimLeft(src, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		return KindJSONJob
	}
	f, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
	if diags.HasErrors() {
		return KindPolicyFile
	}
	if body, ok := f.Body.(*hclsyntax.Body); ok {
		for _, b := range body.Blocks {
			if b.Type == "job" {
				return KindHCLJob
			}
		}
	}
	return KindPolicyFile
}

// FromPolicyFile decodes an Autoscaler policy file into its checks, in file
// order. name is the file's name for messages.
func FromPolicyFile(name string, src []byte) ([]Check, error) {
	f, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diagError(name, diags)
	}
	var doc sdk.FileDecodeScalingPolicies
	if diags := gohcl.DecodeBody(f.Body, nil, &doc); diags.HasErrors() {
		return nil, diagError(name, diags)
	}
	var out []Check
	for _, p := range doc.ScalingPolicies {
		if p.Doc == nil {
			continue
		}
		var ns, job, group string
		if t := p.Doc.Target; t != nil {
			ns, job, group = t.Config[sdk.TargetConfigKeyNamespace], t.Config[sdk.TargetConfigKeyJob], t.Config[sdk.TargetConfigKeyTaskGroup]
		}
		for _, c := range p.Doc.Checks {
			ck := Check{Policy: p.Name, Namespace: ns, Job: job, Group: group, Name: c.Name, Source: c.Source, Query: c.Query}
			if c.Strategy != nil {
				ck.Strategy, ck.Config = c.Strategy.Name, maps.Clone(c.Strategy.Config)
			}
			out = append(out, ck)
		}
	}
	return out, nil
}

// diagError reports the first error of diags with its line and column.
func diagError(name string, diags hcl.Diagnostics) error {
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		where := ""
		if d.Subject != nil {
			where = fmt.Sprintf("line %d, column %d: ", d.Subject.Start.Line, d.Subject.Start.Column)
		}
		return &Error{File: name, Reason: where + d.Summary + "; " + d.Detail, Err: ErrSyntax}
	}
	return &Error{File: name, Reason: diags.Error(), Err: ErrSyntax}
}

// FromJSONJob decodes a JSON jobspec, either `{"Job": {...}}` as `nomad job run
// -output` writes it or the bare job object, into the checks of its groups'
// scaling policies, in group order.
func FromJSONJob(name string, src []byte) ([]Check, error) {
	var wrapped struct {
		Job *nomadapi.Job `json:"Job"`
	}
	dec := json.NewDecoder(bytes.NewReader(src))
	if err := dec.Decode(&wrapped); err != nil {
		return nil, &Error{File: name, Reason: "not a JSON jobspec: " + err.Error(), Err: ErrSyntax}
	}
	job := wrapped.Job
	if job == nil {
		job = new(nomadapi.Job)
		if err := json.Unmarshal(src, job); err != nil {
			return nil, &Error{File: name, Reason: "not a JSON jobspec: " + err.Error(), Err: ErrSyntax}
		}
	}
	return FromJob(job), nil
}

// FromJob returns the checks of the scaling policies of job's groups.
func FromJob(job *nomadapi.Job) []Check {
	var out []Check
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	for _, tg := range job.TaskGroups {
		if tg == nil || tg.Scaling == nil {
			continue
		}
		for _, c := range FromNomadPolicy(tg.Scaling.Policy) {
			c.Namespace, c.Job, c.Group = deref(job.Namespace), deref(job.ID), deref(tg.Name)
			out = append(out, c)
		}
	}
	return out
}

// FromNomadPolicy reads the checks of a Nomad scaling policy's Policy map as
// the Autoscaler v0.5.0 does: `check` is a list of one-key maps (check name to
// a one-element list holding the check body); a check's `strategy` likewise;
// strategy settings are formatted with %v. Checks come in name order (the
// Autoscaler's own order is a map's). Entries of other shapes are skipped, as
// the Autoscaler skips them.
func FromNomadPolicy(policy map[string]any) []Check {
	checks := blocks(policy["check"])
	var out []Check
	for _, name := range slices.Sorted(maps.Keys(checks)) {
		body := block(checks[name])
		if body == nil {
			continue
		}
		c := Check{Name: name}
		c.Source, _ = body["source"].(string)
		c.Query, _ = body["query"].(string)
		strategies := blocks(body["strategy"])
		for _, sname := range slices.Sorted(maps.Keys(strategies)) {
			sb := block(strategies[sname])
			if sb == nil {
				continue
			}
			c.Strategy = sname
			c.Config = make(map[string]string, len(sb))
			for k, v := range sb {
				c.Config[k] = fmt.Sprintf("%v", v)
			}
			break
		}
		out = append(out, c)
	}
	return out
}

// block reads a one-element list holding a map (the Autoscaler's parseBlock).
func block(v any) map[string]any {
	l, ok := v.([]any)
	if !ok || len(l) != 1 {
		return nil
	}
	m, _ := l[0].(map[string]any)
	return m
}

// blocks reads a list of maps into one map (the Autoscaler's parseBlocks).
func blocks(v any) map[string]any {
	l, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make(map[string]any)
	for _, e := range l {
		if m, ok := e.(map[string]any); ok {
			maps.Copy(out, m)
		}
	}
	return out
}

// Select returns the one check of the given strategy, or the one named name
// when name is not empty. file names the source in errors.
func Select(file string, checks []Check, strategy, name string) (Check, error) {
	var found []Check
	for _, c := range checks {
		if c.Strategy == strategy && (name == "" || c.Name == name) {
			found = append(found, c)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) == 0 && name != "":
		return Check{}, &Error{File: file, Reason: fmt.Sprintf("no %s check named %q; %s", strategy, name, list(checks, strategy)), Err: ErrNoCheck}
	case len(found) == 0:
		return Check{}, &Error{File: file, Reason: fmt.Sprintf("no check with strategy %q", strategy), Err: ErrNoCheck}
	default:
		return Check{}, &Error{File: file, Reason: fmt.Sprintf("%d %s checks: choose one with -check; %s", len(found), strategy, list(checks, strategy)), Err: ErrAmbiguous}
	}
}

// list names the checks of the strategy for messages.
func list(checks []Check, strategy string) string {
	var names []string
	for _, c := range checks {
		if c.Strategy == strategy {
			names = append(names, fmt.Sprintf("%q (%s)", c.Name, c.Where()))
		}
	}
	if len(names) == 0 {
		return "there are none"
	}
	return "there are " + strings.Join(names, ", ")
}
