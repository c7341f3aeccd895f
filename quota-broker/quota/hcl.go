package quota

import (
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// MaxGPUs is the largest nominal a quota node may declare. It keeps every
// sum of nominals far from integer overflow; no cluster comes near it.
const MaxGPUs = math.MaxInt32

// MaxDepth is the deepest a quota tree may be, in levels: the root and 31
// levels below it. Trees are a few levels deep in practice; the bound keeps
// a hostile file from costing unbounded recursion, and every tree the HCL
// loader accepts can also be written in a JSON snapshot and read back.
const MaxDepth = 32

// MaxFileSize is the largest quota file LoadFile reads (1 MiB): a tree of
// 10,000 nodes takes about 300 KB, and the bound keeps what a wrong path
// (a device, a log file) or a hostile file can cost in memory low.
const MaxFileSize = 1 << 20

// ParseError is a syntax, type or structure error in a quota file, found
// before law L1 is checked (L1 violations are *ValidationError).
type ParseError struct {
	Pos     string // "file:line" of the offending text
	Node    string // name of the enclosing quota block, "" outside one
	Message string // what is wrong, with the value where there is one
}

func (e *ParseError) Error() string {
	s := e.Pos
	if s == "" {
		s = "<input>"
	}
	if e.Node != "" {
		s += fmt.Sprintf(": quota %q", e.Node)
	}
	return s + ": " + e.Message
}

// LoadFile reads the quota tree and settings from the HCL file at path. See
// Parse for the language and the errors; an unreadable file gives the
// *os.PathError of os.ReadFile.
func LoadFile(path string) (*Node, Settings, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Settings{}, err
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, Settings{}, err
	}
	if len(src) > MaxFileSize {
		return nil, Settings{}, &ParseError{Pos: path, Message: fmt.Sprintf(
			"the file is larger than %d MiB, the most a quota file may be", MaxFileSize>>20)}
	}
	return Parse(src, path)
}

// Parse reads a quota tree and the settings from HCL source; filename is
// only used in positions. The language:
//
//	settings {                     # optional, at most once
//	  min_runtime = "10m"          # Go duration, >= 0, default 0
//	  debt_grace  = "10m"          # Go duration, >= 0, default 10m
//	  settle = "30s", drain_margin = "60s", drain_horizon = "1h",
//	  reservation_max_ahead = "1344h", reservation_min_duration = "1h"
//	                               # Go durations, >= 0 (DESIGN L10, L11)
//	  autoscaler_evaluation_interval = "10s"
//	                               # the Autoscaler agent's default_evaluation_interval
//	                               # (pre-warm holds, DESIGN L5, §8)
//	  reservation_max_per_namespace = 100
//	                               # whole number, 1..10000: the most bookings
//	                               # of one namespace not yet ended (L10)
//	}
//	quota "Quota1" {               # exactly one root
//	  gpus                = 128    # required: nominal GPUs, 0..MaxGPUs
//	  child_preemption    = true   # optional, default false (DESIGN L5 step 2)
//	  priority_preemption = false  # optional, default false (DESIGN L5 step 3)
//	  namespaces          = ["workspace-a"]  # optional
//	  quota "Quota1.1" { gpus = 48 }         # children, at most MaxDepth levels in all
//	}
//	flavor "h100" {                # optional, any number, in order (DESIGN L13)
//	  models      = ["NVIDIA H100 80GB HBM3"]  # required: Nomad device names
//	  mig_profile = "1g.10gb"      # optional: MIG instances of that profile
//	}
//
// With flavor blocks, a node's gpus is an object by flavor, gpus = {
// h100 = 16, a100 = 32 } (a flavor left out is 0); a plain number is
// allowed only in a tree of one flavor (the implicit "gpu", every whole
// GPU, when the file declares none). Errors name the flavor and the
// file:line: a flavor without models, mig_profile without models, a
// model (with its profile) in two flavors, a flavor named twice, gpus
// naming an undeclared flavor, a plain number in a tree of several.
//
// weight (DESIGN L14), optional, is written like gpus: weight = 3, or
// weight = { h100 = 3 } (a flavor left out takes the default, the node's
// nominal); each 0..MaxWeight, else an error naming the node, the flavor
// and the value at its file:line.
//
// max_evict (DESIGN L14), optional, is a node's eviction budget: at most
// gpus devices (of every flavor) stopped as victims of its subtree within
// any window of per, max_evict = { gpus = 16, per = "5m" }; gpus 0..MaxGPUs,
// per a Go duration above 0 and at most MaxEvictPer (24h), both required.
//
// Every Node.Pos is "filename:line" of its block. gpus may be written as
// any constant expression HCL turns into a whole number ("8", 4 * 2). Unknown attributes and
// blocks are errors. Syntax and type errors are returned as a *ParseError
// (the first one found); a tree that breaks law L1 as the *ValidationError
// of Validate. On error the returned tree is nil.
func Parse(src []byte, filename string) (*Node, Settings, error) {
	settings := DefaultSettings()
	if err := checkNesting(src, filename); err != nil {
		return nil, Settings{}, err
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if err := firstError(diags, ""); err != nil {
		return nil, Settings{}, err
	}
	d := &decoder{src: src, flavorNames: map[string]bool{}}
	content, diags := file.Body.Content(topSchema)
	if err := firstError(diags, ""); err != nil {
		return nil, Settings{}, err
	}
	// Flavor blocks first, wherever they stand: a quota's gpus names them.
	for _, b := range content.Blocks {
		if b.Type != "flavor" {
			continue
		}
		f, err := d.flavor(b)
		if err != nil {
			return nil, Settings{}, err
		}
		d.flavors = append(d.flavors, f)
		d.flavorNames[f.Name] = true
	}
	var root *Node
	seenSettings := false
	for _, b := range content.Blocks {
		switch b.Type {
		case "settings":
			if seenSettings {
				return nil, Settings{}, &ParseError{Pos: pos(b.DefRange), Message: "settings block given twice"}
			}
			seenSettings = true
			if err := d.settings(b, &settings); err != nil {
				return nil, Settings{}, err
			}
		case "quota":
			n, err := d.quota(b, 1)
			if err != nil {
				return nil, Settings{}, err
			}
			if root != nil {
				return nil, Settings{}, &ParseError{Pos: n.Pos, Node: n.Name, Message: fmt.Sprintf(
					"a second root quota block; the tree has exactly one root (%q at %s)", root.Name, root.Pos)}
			}
			root = n
		}
	}
	if root == nil {
		return nil, Settings{}, &ParseError{Pos: filename, Message: "no quota block; the tree needs exactly one root quota block"}
	}
	if err := checkFlavors(d.flavors); err != nil {
		return nil, Settings{}, err
	}
	if err := d.resolvePlain(); err != nil {
		return nil, Settings{}, err
	}
	root.Flavors = d.flavors
	if err := Validate(root); err != nil {
		return nil, Settings{}, err
	}
	return root, settings, nil
}

// maxNesting bounds how deep brackets, braces, parentheses, strings and
// template sequences may nest in a quota file, and maxChain how many
// operators, traversal steps and opening brackets one expression may
// chain between two separators (a comma, a line break outside brackets, a
// brace). A tree of MaxDepth levels with its lists needs about MaxDepth+3
// levels and a handful of operators.
const (
	maxNesting = 2 * MaxDepth
	maxChain   = 256
)

// checkNesting rejects sources that would make hclsyntax's recursive
// descent parser recurse without bound: 100,000 nested "[" or "(" in a
// file of 200 KB, or a chain of 200,000 "[*]", overflow the goroutine
// stack, a fatal error that no recover catches, and long operator chains
// cost a gigabyte of stack. The source is lexed (iteratively) first; lexing
// errors are left to the parser to report.
func checkNesting(src []byte, filename string) error {
	tokens, diags := hclsyntax.LexConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil
	}
	var open []hclsyntax.TokenType
	chain := 0
	for _, tok := range tokens {
		switch tok.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen, hclsyntax.TokenOQuote,
			hclsyntax.TokenOHeredoc, hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			open = append(open, tok.Type)
			if len(open) > maxNesting {
				return &ParseError{Pos: pos(tok.Range), Message: fmt.Sprintf(
					"brackets, braces, strings or templates nested more than %d levels deep", maxNesting)}
			}
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenCQuote,
			hclsyntax.TokenCHeredoc, hclsyntax.TokenTemplateSeqEnd:
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
		}
		switch tok.Type {
		case hclsyntax.TokenComma, hclsyntax.TokenOBrace, hclsyntax.TokenCBrace:
			chain = 0
		case hclsyntax.TokenNewline:
			if len(open) == 0 || open[len(open)-1] == hclsyntax.TokenOBrace {
				chain = 0
			}
		case hclsyntax.TokenIdent, hclsyntax.TokenNumberLit, hclsyntax.TokenQuotedLit, hclsyntax.TokenStringLit,
			hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenCQuote, hclsyntax.TokenCHeredoc,
			hclsyntax.TokenTemplateSeqEnd, hclsyntax.TokenComment, hclsyntax.TokenEOF:
		default: // operators, traversal steps, opening brackets
			if chain++; chain > maxChain {
				return &ParseError{Pos: pos(tok.Range), Message: fmt.Sprintf(
					"an expression chains more than %d operators, brackets or traversal steps", maxChain)}
			}
		}
	}
	return nil
}

var topSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "quota", LabelNames: []string{"name"}},
		{Type: "settings"},
		{Type: "flavor", LabelNames: []string{"name"}},
	},
}

var flavorSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "models", Required: true},
		{Name: "mig_profile"},
	},
}

var quotaSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "gpus", Required: true},
		{Name: "weight"},
		{Name: "max_evict"},
		{Name: "child_preemption"},
		{Name: "priority_preemption"},
		{Name: "namespaces"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "quota", LabelNames: []string{"name"}},
	},
}

var settingsSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "min_runtime"},
		{Name: "debt_grace"},
		{Name: "settle"},
		{Name: "drain_margin"},
		{Name: "drain_horizon"},
		{Name: "reservation_max_ahead"},
		{Name: "reservation_min_duration"},
		{Name: "autoscaler_evaluation_interval"},
		{Name: "reservation_max_per_namespace"},
	},
}

// decoder decodes the blocks of one source text.
type decoder struct {
	src []byte
	// flavors are the file's flavor blocks in order, flavorNames their
	// names; plain the nodes whose gpus is a plain number.
	flavors     []Flavor
	flavorNames map[string]bool
	plain       []plainGPUs
}

// quota turns one quota block, at level depth of the tree (the root is at
// 1), and its nested blocks into a Node.
func (d *decoder) quota(b *hcl.Block, depth int) (*Node, error) {
	n := &Node{Name: b.Labels[0], Pos: pos(b.DefRange)}
	if depth > MaxDepth {
		return nil, &ParseError{Pos: n.Pos, Node: n.Name, Message: fmt.Sprintf(
			"the quota tree is more than %d levels deep", MaxDepth)}
	}
	content, diags := b.Body.Content(quotaSchema)
	if err := firstError(diags, n.Name); err != nil {
		return nil, err
	}
	if a, ok := content.Attributes["gpus"]; ok {
		if err := d.gpus(a, n, "gpus", &n.GPUs); err != nil {
			return nil, err
		}
	}
	if a, ok := content.Attributes["weight"]; ok {
		if err := d.gpus(a, n, "weight", &n.Weight); err != nil {
			return nil, err
		}
	}
	if a, ok := content.Attributes["max_evict"]; ok {
		if err := d.maxEvict(a, n); err != nil {
			return nil, err
		}
	}
	if a, ok := content.Attributes["child_preemption"]; ok {
		if err := d.attr(a, n.Name, &n.ChildPreemption); err != nil {
			return nil, err
		}
	}
	if a, ok := content.Attributes["priority_preemption"]; ok {
		if err := d.attr(a, n.Name, &n.PriorityPreemption); err != nil {
			return nil, err
		}
	}
	if a, ok := content.Attributes["namespaces"]; ok {
		if err := d.namespaces(a, n); err != nil {
			return nil, err
		}
	}
	for _, cb := range content.Blocks {
		c, err := d.quota(cb, depth+1)
		if err != nil {
			return nil, err
		}
		n.Children = append(n.Children, c)
	}
	return n, nil
}

// gpus reads a node's nominal (DESIGN L13) from attribute a, named attr
// ("gpus", or "weight", which is written the same way, DESIGN L14) into
// *dst: a whole number, at most MaxGPUs, the value of the tree's only
// flavor (kept under the key "" until Parse knows the flavors,
// resolvePlain), or an object by flavor, gpus = { h100 = 16, a100 = 32 },
// each a whole number. Values beyond the range of an int are reported
// here with their text; negative gpus that fit are left to Validate,
// which reports them under law L1. A weight outside 0..MaxWeight is an
// error here, naming the node, the flavor and the value at a's file:line.
func (d *decoder) gpus(a *hcl.Attribute, n *Node, attr string, dst *Nominal) error {
	var val cty.Value
	if err := d.attr(a, n.Name, &val); err != nil {
		return err
	}
	text := d.text(a.Expr.Range())
	unsuitable := func(why string) error {
		return &ParseError{Pos: pos(a.Range), Node: n.Name, Message: fmt.Sprintf(
			"%s = %s: Unsuitable value type; Unsuitable value: %s", attr, text, why)}
	}
	weightRange := func(flavor string, v int) error {
		if attr != "weight" || v >= 0 && v <= MaxWeight {
			return nil
		}
		of := ""
		if flavor != "" {
			of = " of flavor " + strconv.Quote(flavor)
		}
		return &ParseError{Pos: pos(a.Range), Node: n.Name, Message: fmt.Sprintf(
			"weight%s = %d is out of range (0..%d; DESIGN L14)", of, v, MaxWeight)}
	}
	if ty := val.Type(); !val.IsNull() && val.IsWhollyKnown() && (ty.IsObjectType() || ty.IsMapType()) {
		*dst = Nominal{}
		for it := val.ElementIterator(); it.Next(); {
			k, v := it.Element()
			name := k.AsString()
			if !d.flavorNames[name] && (len(d.flavors) > 0 || name != ImplicitFlavor) {
				return &ParseError{Pos: pos(a.Range), Node: n.Name, Message: fmt.Sprintf(
					"%s names flavor %s, which the file does not declare (flavors: %s)", attr, nameText(name), d.declared())}
			}
			i, err := wholeGPUs(v, attr+"."+name, attr, text)
			if err != nil {
				err.Pos, err.Node = pos(a.Range), n.Name
				return err
			}
			if err := weightRange(name, i); err != nil {
				return err
			}
			(*dst)[name] = i
		}
		return nil
	}
	val, err := convert.Convert(val, cty.Number)
	switch {
	case err != nil:
		return unsuitable(err.Error())
	case val.IsNull():
		return unsuitable("null value is not allowed")
	case !val.IsWhollyKnown():
		return unsuitable("the value is not known")
	}
	i, perr := wholeGPUs(val, attr, attr, text)
	if perr != nil {
		perr.Pos, perr.Node = pos(a.Range), n.Name
		return perr
	}
	if err := weightRange("", i); err != nil {
		return err
	}
	*dst = Nominal{"": i}
	d.plain = append(d.plain, plainGPUs{node: n, pos: pos(a.Range), text: text, attr: attr, dst: dst})
	return nil
}

// maxEvict reads a node's eviction budget (DESIGN L14) from attribute a:
// an object with exactly the keys gpus, a whole number from 0 to MaxGPUs,
// and per, a Go duration above 0 and at most MaxEvictPer:
//
//	max_evict = { gpus = 16, per = "5m" }
//
// Errors name the node, the key and the value at a's file:line.
func (d *decoder) maxEvict(a *hcl.Attribute, n *Node) error {
	var val cty.Value
	if err := d.attr(a, n.Name, &val); err != nil {
		return err
	}
	text := d.text(a.Expr.Range())
	bad := func(format string, args ...any) error {
		return &ParseError{Pos: pos(a.Range), Node: n.Name, Message: fmt.Sprintf(format, args...)}
	}
	ty := val.Type()
	if val.IsNull() || !val.IsWhollyKnown() || !(ty.IsObjectType() || ty.IsMapType()) {
		return bad("max_evict = %s: want an object { gpus = 16, per = \"5m\" } (DESIGN L14)", text)
	}
	b := &EvictBudget{}
	seen := map[string]bool{}
	for it := val.ElementIterator(); it.Next(); {
		k, v := it.Element()
		key := k.AsString()
		switch key {
		case "gpus":
			vt := text // the value's own text where it is a number
			if !v.IsNull() && v.IsKnown() && v.Type() == cty.Number {
				vt = v.AsBigFloat().Text('g', -1)
			}
			i, err := wholeGPUs(v, "max_evict.gpus", "max_evict", vt)
			if err != nil {
				err.Pos, err.Node = pos(a.Range), n.Name
				return err
			}
			b.GPUs = i
		case "per":
			if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
				return bad("max_evict.per in max_evict = %s is not a string (a Go duration such as \"5m\")", text)
			}
			per, err := time.ParseDuration(v.AsString())
			if err != nil {
				return bad("max_evict.per = %q is not a duration (Go syntax such as \"90s\", \"5m\", \"1h\")", v.AsString())
			}
			b.Per = per
		default:
			return bad("max_evict has no key %s (its keys: gpus, per)", nameText(key))
		}
		seen[key] = true
	}
	for _, key := range []string{"gpus", "per"} {
		if !seen[key] {
			return bad("max_evict = %s lacks %s (write max_evict = { gpus = 16, per = \"5m\" })", text, key)
		}
	}
	if problem := CheckEvictBudget(b); problem != "" {
		return bad("%s", problem)
	}
	n.MaxEvict = b
	return nil
}

// wholeGPUs reads one nominal value: a whole number from -MaxGPUs to
// MaxGPUs (negative ones are left to Validate); name, attr and text are
// the value's name, its attribute ("gpus", "weight") and its source for
// the message.
func wholeGPUs(val cty.Value, name, attr, text string) (int, *ParseError) {
	if val.IsNull() || !val.IsWhollyKnown() {
		return 0, &ParseError{Message: fmt.Sprintf("%s in %s = %s is not a whole number", name, attr, text)}
	}
	val, err := convert.Convert(val, cty.Number)
	if err != nil {
		return 0, &ParseError{Message: fmt.Sprintf("%s in %s = %s is not a number", name, attr, text)}
	}
	v := val.AsBigFloat()
	if !v.IsInt() {
		return 0, &ParseError{Message: fmt.Sprintf("%s = %s is not a whole number", name, text)}
	}
	if v.Cmp(big.NewFloat(MaxGPUs)) > 0 {
		return 0, &ParseError{Message: fmt.Sprintf("%s = %s is too large (at most %d)", name, text, MaxGPUs)}
	}
	if v.Cmp(big.NewFloat(-MaxGPUs)) < 0 {
		return 0, &ParseError{Message: fmt.Sprintf("%s = %s is negative", name, text)}
	}
	i, _ := v.Int64()
	return int(i), nil
}

// plainGPUs is a node whose gpus is a plain number, resolved to the
// tree's only flavor once the file is read.
type plainGPUs struct {
	node      *Node
	pos, text string
	// attr is the attribute ("gpus", "weight") and dst the node's field
	// it was read into.
	attr string
	dst  *Nominal
}

// declared lists the file's flavors for a message: "h100, a100", or
// "none declared; the implicit gpu".
func (d *decoder) declared() string {
	if len(d.flavors) == 0 {
		return "none declared, the tree's one flavor is the implicit " + strconv.Quote(ImplicitFlavor)
	}
	names := make([]string, len(d.flavors))
	for i := range d.flavors {
		names[i] = d.flavors[i].Name
	}
	return strings.Join(names, ", ")
}

// resolvePlain gives each plain `gpus = N` to the tree's only flavor; in
// a tree of several flavors it is an error at its file:line.
func (d *decoder) resolvePlain() error {
	only := ImplicitFlavor
	if len(d.flavors) == 1 {
		only = d.flavors[0].Name
	}
	for _, p := range d.plain {
		if len(d.flavors) > 1 {
			return &ParseError{Pos: p.pos, Node: p.node.Name, Message: fmt.Sprintf(
				"%s = %s is a plain number, but the tree declares %d flavors (%s): write %s = { %s = ... } by flavor",
				p.attr, p.text, len(d.flavors), d.declared(), p.attr, d.flavors[0].Name)}
		}
		v := (*p.dst)[""]
		*p.dst = Nominal{only: v}
	}
	return nil
}

// flavor reads one flavor block (DESIGN L13):
//
//	flavor "a100-1g" {
//	  models      = ["NVIDIA A100-SXM4-40GB"]   # required, Nomad device names
//	  mig_profile = "1g.5gb"                      # optional: MIG instances of it
//	}
func (d *decoder) flavor(b *hcl.Block) (Flavor, error) {
	f := Flavor{Name: b.Labels[0], Pos: pos(b.DefRange)}
	content, diags := b.Body.Content(flavorSchema)
	if err := firstError(diags, ""); err != nil {
		err.(*ParseError).Message = fmt.Sprintf("flavor %s: %s", nameText(f.Name), err.(*ParseError).Message)
		return f, err
	}
	bad := func(a *hcl.Attribute, format string, args ...any) error {
		return &ParseError{Pos: pos(a.Range), Message: fmt.Sprintf("flavor %s: ", nameText(f.Name)) + fmt.Sprintf(format, args...)}
	}
	if a, ok := content.Attributes["models"]; ok {
		val, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			return f, bad(a, "models = %s: %s", d.text(a.Expr.Range()), diags[0].Summary)
		}
		ty := val.Type()
		if val.IsNull() || !val.IsWhollyKnown() || !(ty.IsTupleType() || ty.IsListType() || ty.IsSetType()) {
			return f, bad(a, "models = %s: want a list of device model names", d.text(a.Expr.Range()))
		}
		for i, it := 0, val.ElementIterator(); it.Next(); i++ {
			_, el := it.Element()
			if el.IsNull() || !el.IsKnown() || el.Type() != cty.String {
				return f, bad(a, "models = %s: element %d is not a string", d.text(a.Expr.Range()), i)
			}
			f.Models = append(f.Models, el.AsString())
		}
	}
	if a, ok := content.Attributes["mig_profile"]; ok {
		val, diags := a.Expr.Value(nil)
		if diags.HasErrors() || val.IsNull() || !val.IsWhollyKnown() || val.Type() != cty.String {
			return f, bad(a, "mig_profile = %s: want a string such as \"1g.10gb\"", d.text(a.Expr.Range()))
		}
		f.MIGProfile = val.AsString()
		if f.MIGProfile == "" {
			return f, bad(a, "mig_profile = \"\": leave mig_profile out for whole GPUs")
		}
	}
	return f, nil
}

// namespaces reads a node's namespaces: a list of strings (null for none).
// Each element must be a string: a number or a bool is an error naming it,
// not converted ([1] is not namespace "1"). It reads element by element: go-cty's conversion of a whole tuple to a
// list unifies the element types in quadratic time (20,000 namespaces
// took 4 s).
func (d *decoder) namespaces(a *hcl.Attribute, n *Node) error {
	var val cty.Value
	if err := d.attr(a, n.Name, &val); err != nil {
		return err
	}
	unsuitable := func(why string) error {
		return &ParseError{Pos: pos(a.Range), Node: n.Name, Message: fmt.Sprintf(
			"namespaces = %s: Unsuitable value type; Unsuitable value: %s", d.text(a.Expr.Range()), why)}
	}
	ty := val.Type()
	switch {
	case val.IsNull():
		return nil
	case !val.IsWhollyKnown():
		return unsuitable("the value is not known")
	case !ty.IsTupleType() && !ty.IsListType() && !ty.IsSetType():
		return unsuitable("list of string required, but have " + ty.FriendlyName())
	}
	for i, it := 0, val.ElementIterator(); it.Next(); i++ {
		_, el := it.Element()
		switch {
		case el.IsNull():
			return unsuitable(fmt.Sprintf("element %d: null value is not allowed", i))
		case !el.IsKnown():
			return unsuitable(fmt.Sprintf("element %d: the value is not known", i))
		case el.Type() == cty.Number:
			return unsuitable(fmt.Sprintf("element %d: string required, but have number %s", i, el.AsBigFloat().Text('g', -1)))
		case el.Type() == cty.Bool:
			return unsuitable(fmt.Sprintf("element %d: string required, but have bool %t", i, el.True()))
		case el.Type() != cty.String:
			return unsuitable(fmt.Sprintf("element %d: string required, but have %s", i, el.Type().FriendlyName()))
		}
		n.Namespaces = append(n.Namespaces, el.AsString())
	}
	return nil
}

// settings fills s from a settings block; absent attributes keep their
// value.
func (d *decoder) settings(b *hcl.Block, s *Settings) error {
	content, diags := b.Body.Content(settingsSchema)
	if err := firstError(diags, ""); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		dst  *time.Duration
	}{{"min_runtime", &s.MinRuntime}, {"debt_grace", &s.DebtGrace}, {"settle", &s.Settle},
		{"drain_margin", &s.DrainMargin}, {"drain_horizon", &s.DrainHorizon},
		{"reservation_max_ahead", &s.ReservationMaxAhead}, {"reservation_min_duration", &s.ReservationMinDuration},
		{"autoscaler_evaluation_interval", &s.AutoscalerEvaluationInterval}} {
		a, ok := content.Attributes[f.name]
		if !ok {
			continue
		}
		var text string
		if err := d.attr(a, "", &text); err != nil {
			return err
		}
		d, err := time.ParseDuration(text)
		if err != nil {
			return &ParseError{Pos: pos(a.Range), Message: fmt.Sprintf(
				"settings.%s = %q is not a duration (Go syntax such as \"90s\", \"10m\", \"1h30m\")", f.name, text)}
		}
		if d < 0 {
			return &ParseError{Pos: pos(a.Range), Message: fmt.Sprintf("settings.%s = %q is negative", f.name, text)}
		}
		if d > MaxSetting {
			return &ParseError{Pos: pos(a.Range), Message: fmt.Sprintf("settings.%s = %q is more than %s", f.name, text, MaxSetting)}
		}
		*f.dst = d
	}
	if a, ok := content.Attributes["reservation_max_per_namespace"]; ok {
		if err := d.maxPerNamespace(a, s); err != nil {
			return err
		}
	}
	return nil
}

// maxPerNamespace reads settings.reservation_max_per_namespace: a whole
// number from 1 to MaxReservationMaxPerNamespace (a string, even "5", is
// refused, as a number is where a duration goes).
func (d *decoder) maxPerNamespace(a *hcl.Attribute, s *Settings) error {
	bad := func() error {
		return &ParseError{Pos: pos(a.Range), Message: fmt.Sprintf("settings.%s = %s %s",
			a.Name, d.text(a.Expr.Range()), CheckMaxPerNamespace(0))}
	}
	val, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		return d.attr(a, "", &val)
	}
	if val.IsNull() || !val.IsWhollyKnown() || val.Type() != cty.Number {
		return bad()
	}
	f := val.AsBigFloat()
	n, acc := f.Int64()
	if !f.IsInt() || acc != big.Exact || CheckMaxPerNamespace(n) != "" {
		return bad()
	}
	s.ReservationMaxPerNamespace = int(n)
	return nil
}

// attr evaluates a constant attribute (no variables, no functions) into
// dst, naming the attribute and its source text in the error.
func (d *decoder) attr(a *hcl.Attribute, node string, dst any) error {
	diags := gohcl.DecodeExpression(a.Expr, nil, dst)
	if !diags.HasErrors() {
		return nil
	}
	err := firstError(diags, node).(*ParseError)
	err.Message = a.Name + " = " + d.text(a.Expr.Range()) + ": " + err.Message
	return err
}

// text returns the source text of r, shortened to one line of at most 40
// bytes.
func (d *decoder) text(r hcl.Range) string {
	if r.Start.Byte < 0 || r.End.Byte > len(d.src) || r.Start.Byte > r.End.Byte {
		return "?"
	}
	t := string(d.src[r.Start.Byte:r.End.Byte])
	if i := strings.IndexByte(t, '\n'); i >= 0 {
		t = t[:i] + " ..."
	}
	if len(t) > 40 {
		t = t[:40] + " ..."
	}
	return t
}

// firstError returns the first error of diags as a *ParseError, or nil.
func firstError(diags hcl.Diagnostics, node string) error {
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		e := &ParseError{Node: node, Message: d.Summary}
		if d.Detail != "" {
			e.Message += "; " + d.Detail
		}
		if d.Subject != nil {
			e.Pos = pos(*d.Subject)
		}
		return e
	}
	return nil
}

func pos(r hcl.Range) string {
	return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line)
}
