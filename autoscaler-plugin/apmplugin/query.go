package apmplugin

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Kind says which figure a query asks for.
type Kind int

const (
	// KindSchedule is the query `schedule`, answered locally with the value 1.
	KindSchedule Kind = iota + 1
	// KindQuota is NAME{quota="Q"} or NAME{quota="Q",flavor="F"}, a figure
	// of one node of the quota tree in one flavor (DESIGN L13).
	KindQuota
	// KindIdleFit is idle_fit{namespace="N",job="J",group="G"}.
	KindIdleFit
)

// QuotaMetrics are the names a KindQuota query may use (DESIGN §8), each a
// field of the broker's GET /v1/quotas.
var QuotaMetrics = []string{
	"nominal_gpus", "used_gpus", "nonidle_gpus", "borrowed_gpus",
	"debt_gpus", "lendable_gpus", "booked_gpus", "queued_gpus",
}

// Query is a parsed APM query.
type Query struct {
	Kind   Kind
	Metric string // KindQuota: one of QuotaMetrics; KindIdleFit: "idle_fit"; KindSchedule: "schedule"
	Quota  string // KindQuota
	// Flavor is, for KindQuota, the flavor whose figure is asked (DESIGN
	// L13); "" asks for the tree's only flavor (the implicit "gpu" in a
	// tree without flavor blocks), an error when the tree has several.
	Flavor string
	// KindIdleFit: the task group.
	Namespace, Job, Group string
}

// QueryError is a query that does not parse. Error() reads
// `query "<Query>": offset <Offset>: <Reason>`; Offset counts bytes from 0.
type QueryError struct {
	Query  string
	Offset int
	Reason string
}

func (e *QueryError) Error() string {
	return fmt.Sprintf("query %q: offset %d: %s", e.Query, e.Offset, e.Reason)
}

// maxQuery bounds the query length; a real one is well under 200 bytes.
const maxQuery = 4096

// ParseQuery parses an APM query (issue 11 item 3):
//
//	query  = ws ( "schedule" | name ws "{" ws label ws { "," ws label ws } "}" ) ws
//	name   = [a-z_]+            one of QuotaMetrics, or "idle_fit"
//	label  = [a-z_]+ ws "=" ws string
//	string = '"' { any byte but '"' and '\' | '\"' | '\\' } '"'
//	ws     = { ' ' | '\t' }
//
// A quota metric takes the label quota and optionally flavor; idle_fit
// exactly namespace, job and group, in any order. Values must not be empty. Errors are *QueryError
// naming the query and the offset of the first bad byte.
func ParseQuery(q string) (Query, error) {
	p := &parser{src: q}
	if len(q) > maxQuery {
		return Query{}, p.fail(maxQuery, fmt.Sprintf("longer than %d bytes", maxQuery))
	}
	return p.parse()
}

type parser struct {
	src string
	pos int
}

func (p *parser) fail(at int, reason string) error {
	return &QueryError{Query: p.src, Offset: at, Reason: reason}
}

func (p *parser) ws() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t') {
		p.pos++
	}
}

// ident reads [a-z_]+.
func (p *parser) ident() string {
	start := p.pos
	for p.pos < len(p.src) && (p.src[p.pos] >= 'a' && p.src[p.pos] <= 'z' || p.src[p.pos] == '_') {
		p.pos++
	}
	return p.src[start:p.pos]
}

func (p *parser) describe() string {
	if p.pos >= len(p.src) {
		return "end of query"
	}
	return fmt.Sprintf("%q", p.src[p.pos])
}

func (p *parser) expect(c byte, what string) error {
	if p.pos >= len(p.src) || p.src[p.pos] != c {
		return p.fail(p.pos, fmt.Sprintf("want %s, got %s", what, p.describe()))
	}
	p.pos++
	return nil
}

func (p *parser) parse() (Query, error) {
	p.ws()
	at := p.pos
	name := p.ident()
	if name == "" {
		return Query{}, p.fail(at, fmt.Sprintf("want a metric name (schedule, idle_fit, %s), got %s", strings.Join(QuotaMetrics, ", "), p.describe()))
	}
	var want, optional []string
	q := Query{Metric: name}
	switch {
	case name == "schedule":
		q.Kind = KindSchedule
		p.ws()
		if p.pos != len(p.src) {
			return Query{}, p.fail(p.pos, fmt.Sprintf("want end of query after schedule, got %s", p.describe()))
		}
		return q, nil
	case name == "idle_fit":
		q.Kind, want = KindIdleFit, []string{"namespace", "job", "group"}
	case slices.Contains(QuotaMetrics, name):
		q.Kind, want, optional = KindQuota, []string{"quota"}, []string{"flavor"}
	default:
		return Query{}, p.fail(at, fmt.Sprintf("unknown metric %q: want schedule, idle_fit or one of %s", name, strings.Join(QuotaMetrics, ", ")))
	}
	p.ws()
	if err := p.expect('{', `"{"`); err != nil {
		return Query{}, err
	}
	labels := make(map[string]string, len(want))
	known := slices.Concat(want, optional)
	for {
		p.ws()
		at := p.pos
		key := p.ident()
		if key == "" {
			return Query{}, p.fail(at, fmt.Sprintf("want a label name (%s), got %s", strings.Join(known, ", "), p.describe()))
		}
		if !slices.Contains(known, key) {
			return Query{}, p.fail(at, fmt.Sprintf("unknown label %q for %s: want %s", key, name, strings.Join(known, ", ")))
		}
		if _, dup := labels[key]; dup {
			return Query{}, p.fail(at, fmt.Sprintf("label %q given twice", key))
		}
		p.ws()
		if err := p.expect('=', `"="`); err != nil {
			return Query{}, err
		}
		p.ws()
		vat := p.pos
		v, err := p.str()
		if err != nil {
			return Query{}, err
		}
		if v == "" {
			return Query{}, p.fail(vat, fmt.Sprintf("label %q is empty", key))
		}
		labels[key] = v
		p.ws()
		if p.pos < len(p.src) && p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if err := p.expect('}', `"," or "}"`); err != nil {
			return Query{}, err
		}
		break
	}
	for _, k := range want {
		if _, ok := labels[k]; !ok {
			return Query{}, p.fail(p.pos-1, fmt.Sprintf("missing label %q: %s takes %s", k, name, strings.Join(want, ", ")))
		}
	}
	p.ws()
	if p.pos != len(p.src) {
		return Query{}, p.fail(p.pos, fmt.Sprintf("want end of query after \"}\", got %s", p.describe()))
	}
	q.Quota, q.Flavor, q.Namespace, q.Job, q.Group = labels["quota"], labels["flavor"], labels["namespace"], labels["job"], labels["group"]
	return q, nil
}

// str reads a double-quoted string with the escapes \" and \\.
func (p *parser) str() (string, error) {
	if err := p.expect('"', "a double-quoted value"); err != nil {
		return "", err
	}
	var b strings.Builder
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch c {
		case '"':
			p.pos++
			return b.String(), nil
		case '\\':
			if p.pos+1 >= len(p.src) {
				return "", p.fail(p.pos, "unterminated escape")
			}
			n := p.src[p.pos+1]
			if n != '"' && n != '\\' {
				r, _ := utf8.DecodeRuneInString(p.src[p.pos+1:]) // named as written, not by its first byte
				return "", p.fail(p.pos, fmt.Sprintf(`invalid escape "\%c": only \" and \\`, r))
			}
			b.WriteByte(n)
			p.pos += 2
		default:
			b.WriteByte(c)
			p.pos++
		}
	}
	return "", p.fail(p.pos, "unterminated string: want a closing '\"'")
}

// String writes the query back in its canonical form (no spaces, labels in
// the order of the grammar); ParseQuery(q.String()) == q.
func (q Query) String() string {
	quote := func(s string) string {
		return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
	}
	switch q.Kind {
	case KindSchedule:
		return "schedule"
	case KindQuota:
		if q.Flavor != "" {
			return q.Metric + "{quota=" + quote(q.Quota) + ",flavor=" + quote(q.Flavor) + "}"
		}
		return q.Metric + "{quota=" + quote(q.Quota) + "}"
	case KindIdleFit:
		return "idle_fit{namespace=" + quote(q.Namespace) + ",job=" + quote(q.Job) + ",group=" + quote(q.Group) + "}"
	}
	return ""
}
