package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/zclconf/go-cty/cty"
)

// Error is a problem in a scenario file, at a line when there is one.
type Error struct {
	Pos string // "file:line", or the file alone
	Msg string
}

func (e *Error) Error() string { return e.Pos + ": " + e.Msg }

func posOf(r hcl.Range) string {
	if r.Filename == "" {
		return "<scenario>"
	}
	return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line)
}

// diagError turns the first error of diags into an *Error.
func diagError(diags hcl.Diagnostics, file string) error {
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		pos := file
		if d.Subject != nil {
			pos = posOf(*d.Subject)
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		return &Error{Pos: pos, Msg: msg}
	}
	return nil
}

// block reads the attributes of one HCL block. The first problem is kept in
// err and later reads are skipped, so a caller reads everything and checks
// err once.
type block struct {
	what  string // e.g. `inference "chat"`, for messages
	file  string
	rng   hcl.Range
	attrs hcl.Attributes
	err   error
	notes []string // warnings on values read as something else, e.g. a time in a DST gap
}

// open reads body against the given attribute names (all optional; required
// ones are checked by the readers) and nested block types.
func open(body hcl.Body, file, what string, rng hcl.Range, attrs []string, blocks ...hcl.BlockHeaderSchema) (*block, []*hcl.Block, error) {
	schema := &hcl.BodySchema{Blocks: blocks}
	for _, a := range attrs {
		schema.Attributes = append(schema.Attributes, hcl.AttributeSchema{Name: a})
	}
	content, diags := body.Content(schema)
	if err := diagError(diags, file); err != nil {
		return nil, nil, err
	}
	return &block{what: what, file: file, rng: rng, attrs: content.Attributes}, content.Blocks, nil
}

func (b *block) fail(r hcl.Range, format string, args ...any) {
	if b.err == nil {
		prefix := ""
		if b.what != "" {
			prefix = b.what + ": "
		}
		b.err = &Error{Pos: posOf(r), Msg: prefix + fmt.Sprintf(format, args...)}
	}
}

// pos is the position of the attribute, or of the block when it is absent.
func (b *block) pos(name string) string {
	if a, ok := b.attrs[name]; ok {
		return posOf(a.Range)
	}
	return posOf(b.rng)
}

func (b *block) decode(name string, required bool, dst any) (hcl.Range, bool) {
	if b.err != nil {
		return hcl.Range{}, false
	}
	a, ok := b.attrs[name]
	if !ok {
		if required {
			b.fail(b.rng, "missing %s", name)
		}
		return b.rng, false
	}
	if diags := gohcl.DecodeExpression(a.Expr, nil, dst); diags.HasErrors() {
		d := diags[0]
		b.fail(a.Range, "%s: %s", name, strings.TrimSuffix(d.Detail, "."))
		return a.Range, false
	}
	return a.Range, true
}

func (b *block) str(name string, required bool, def string) string {
	v := def
	if _, ok := b.decode(name, required, &v); ok && strings.TrimSpace(v) == "" {
		b.fail(b.attrs[name].Range, "%s is empty", name)
	}
	return v
}

func (b *block) boolean(name string, def bool) bool {
	v := def
	b.decode(name, false, &v)
	return v
}

// number formats f as the file is likely to spell it: 100000000, not
// 1e+08, and 4.5; beyond 1e21 in exponent form (1e+30).
func number(f float64) string {
	if math.Abs(f) < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// integer reads a whole number in [lo, hi].
func (b *block) integer(name string, required bool, def, lo, hi int) int {
	var f float64
	r, ok := b.decode(name, required, &f)
	if !ok {
		return def
	}
	if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		b.fail(r, "%s = %s: want a whole number from %d to %d", name, number(f), lo, hi)
		return def
	}
	return int(f)
}

// number reads a number in [lo, hi].
func (b *block) number(name string, def, lo, hi float64) float64 {
	v := def
	r, ok := b.decode(name, false, &v)
	if ok && (v != v || v < lo || v > hi) {
		b.fail(r, "%s = %v: want a number from %g to %g", name, v, lo, hi)
	}
	return v
}

// duration reads a Go duration string ("30s", "10m", "48h") in [lo, hi].
func (b *block) duration(name string, required bool, def, lo, hi time.Duration) time.Duration {
	var s string
	r, ok := b.decode(name, required, &s)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		b.fail(r, "%s = %q: want a Go duration such as \"30s\", \"10m\" or \"48h\"", name, s)
		return def
	}
	if d < lo || d > hi {
		b.fail(r, "%s = %q: want a duration from %s to %s", name, s, lo, hi)
		return def
	}
	return d
}

// Layouts accepted for local times in a scenario; RFC 3339 with a zone
// offset is accepted as well.
var timeLayouts = []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

// parseTime reads s as RFC 3339 or as a local time in loc. gap is true
// when s is a local time that does not exist in loc (it falls in a
// daylight-saving gap): t is then read with the UTC offset before the gap,
// as RFC 5545 (3.3.5) and java.time do, so it moves forward by the gap:
// 02:30 on the spring-forward night in America/Los_Angeles is 03:30 PDT.
// (Go's time.Date leaves the choice open; it gives 01:30 PST there.)
func parseTime(s string, loc *time.Location) (t time.Time, gap, ok bool) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.In(loc), false, true
	}
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, s, loc); err == nil {
			wall, _ := time.Parse(l, s) // the same wall clock, in UTC, where every one exists
			y, mo, d := t.Date()
			wy, wmo, wd := wall.Date()
			gap := y != wy || mo != wmo || d != wd || t.Hour() != wall.Hour() || t.Minute() != wall.Minute() || t.Second() != wall.Second()
			if gap {
				// t was made with one side's offset and lies on the other
				// side; clocks jump forward at a gap, so the offset before
				// it is the smaller of the two.
				used := wall.Sub(t.UTC().Truncate(0).In(time.UTC))
				_, real := t.Zone()
				before := min(used, time.Duration(real)*time.Second)
				t = wall.Add(-before).In(loc)
			}
			return t, gap, true
		}
	}
	return time.Time{}, false, false
}

// instant reads a time: local in loc ("2026-12-07 08:00") or RFC 3339.
func (b *block) instant(name string, required bool, def time.Time, loc *time.Location) time.Time {
	var s string
	r, ok := b.decode(name, required, &s)
	if !ok {
		return def
	}
	t, gap, ok := parseTime(s, loc)
	if !ok {
		b.fail(r, "%s = %q: want a local time \"2006-01-02 15:04\" (in %s) or RFC 3339", name, s, loc)
		return def
	}
	prefix := ""
	if b.what != "" {
		prefix = b.what + ": "
	}
	if gap {
		b.notes = append(b.notes, fmt.Sprintf("%s: %s%s = %q does not exist in %s (a daylight-saving gap): using %s (%s)",
			posOf(r), prefix, name, s, loc, t.Format("2006-01-02 15:04:05 MST"), t.UTC().Format(time.RFC3339)))
	}
	if _, err := time.Parse(time.RFC3339, strings.TrimSpace(s)); err != nil && !gap {
		if twin, ok := foldTwin(t, loc); ok {
			var first, second time.Time
			if twin.Before(t) {
				first, second = twin, t
			} else {
				first, second = t, twin
			}
			t = first
			b.notes = append(b.notes, fmt.Sprintf("%s: %s%s = %q occurs twice in %s (clocks go back): using the first, %s (%s), not %s (%s)",
				posOf(r), prefix, name, s, loc, first.Format("2006-01-02 15:04:05 MST"), first.UTC().Format(time.RFC3339),
				second.Format("2006-01-02 15:04:05 MST"), second.UTC().Format(time.RFC3339)))
		}
	}
	return t
}

// foldTwin returns the other instant whose wall clock in loc is t's, when
// that wall clock occurs twice (a daylight-saving fold: clocks go back);
// ok is false otherwise. The offsets tried are those a day before and a
// day after t.
func foldTwin(t time.Time, loc *time.Location) (twin time.Time, ok bool) {
	t = t.In(loc)
	_, off := t.Zone()
	for _, probe := range []time.Time{t.Add(-24 * time.Hour), t.Add(24 * time.Hour)} {
		_, other := probe.In(loc).Zone()
		if other == off {
			continue
		}
		u := t.Add(time.Duration(off-other) * time.Second).In(loc)
		if _, uoff := u.Zone(); uoff == other && u.Format("2006-01-02 15:04:05") == t.Format("2006-01-02 15:04:05") {
			return u, true
		}
	}
	return time.Time{}, false
}

// entry is one key = value pair of a map attribute, with its position.
type entry struct {
	Key string
	Val cty.Value
	Pos hcl.Range
}

// entries reads a map attribute { key = value, ... } in written order.
func (b *block) entries(name string, required bool) []entry {
	if b.err != nil {
		return nil
	}
	a, ok := b.attrs[name]
	if !ok {
		if required {
			b.fail(b.rng, "missing %s", name)
		}
		return nil
	}
	pairs, diags := hcl.ExprMap(a.Expr)
	if diags.HasErrors() {
		b.fail(a.Range, "%s: want a map { key = value, ... }", name)
		return nil
	}
	var out []entry
	seen := map[string]bool{}
	for _, p := range pairs {
		var key string
		if d := gohcl.DecodeExpression(p.Key, nil, &key); d.HasErrors() {
			// A bare word key (quota = 1) is a traversal: take its name.
			if tr, d2 := hcl.AbsTraversalForExpr(p.Key); !d2.HasErrors() && len(tr) == 1 {
				key = tr.RootName()
			} else {
				b.fail(p.Key.Range(), "%s: a key must be a string", name)
				return nil
			}
		}
		if seen[key] {
			b.fail(p.Key.Range(), "%s: key %q given twice", name, key)
			return nil
		}
		seen[key] = true
		v, d := p.Value.Value(nil)
		if d.HasErrors() {
			b.fail(p.Value.Range(), "%s[%q]: %s", name, key, d[0].Summary)
			return nil
		}
		out = append(out, entry{Key: key, Val: v, Pos: p.Key.Range()})
	}
	return out
}

// entryString returns e's value as a string, or fails.
func (b *block) entryString(name string, e entry) string {
	if e.Val.Type() != cty.String || e.Val.IsNull() {
		b.fail(e.Pos, "%s[%q]: want a string", name, e.Key)
		return ""
	}
	return e.Val.AsString()
}

// entryInt returns e's value as a whole number in [lo, hi], or fails.
func (b *block) entryInt(name string, e entry, lo, hi int) int {
	if e.Val.Type() != cty.Number || e.Val.IsNull() {
		b.fail(e.Pos, "%s[%q]: want a number", name, e.Key)
		return 0
	}
	f, _ := e.Val.AsBigFloat().Float64()
	if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		b.fail(e.Pos, "%s[%q] = %s: want a whole number from %d to %d", name, e.Key, number(f), lo, hi)
		return 0
	}
	return int(f)
}

// strings reads a list of strings.
func (b *block) strings(name string) []string {
	var v []string
	b.decode(name, false, &v)
	return v
}
