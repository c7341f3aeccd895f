package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// maxDepth bounds the nesting of the document (objects and arrays), so
// that a hostile input cannot make paths or recursion grow without limit.
// Each level of a quota tree takes two (an object and its children array),
// so a tree may be about 30 levels deep.
const maxDepth = 64

// checkShape walks the JSON document in data against the wire type of v
// (a pointer to a struct) and returns the first problem: a syntax error,
// an unknown key, a key given twice, a missing required key, a value of the
// wrong JSON type, a number that is not a whole number in int64 range,
// nesting beyond maxDepth, or data after the top-level object. After it
// returns nil, json.Unmarshal(data, v) cannot fail.
func checkShape(data []byte, v any) error {
	w := &walker{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	w.dec.UseNumber()
	if err := w.value(reflect.TypeOf(v).Elem(), "", 0); err != nil {
		return err
	}
	off := w.dec.InputOffset()
	rest := bytes.TrimLeft(data[off:], " \t\r\n")
	if len(rest) == 0 {
		return nil
	}
	start := int64(len(data) - len(rest))
	if len(rest) > 20 {
		rest = rest[:20]
	}
	return &Error{Message: fmt.Sprintf("trailing data after the JSON object at %s: %s", w.where(start), quoteShort(string(rest)))}
}

type walker struct {
	data []byte
	dec  *json.Decoder
}

// token reads the next token, turning syntax errors and early ends into an
// *Error that gives the line and column.
func (w *walker) token(path string) (json.Token, error) {
	tok, err := w.dec.Token()
	if err == nil {
		return tok, nil
	}
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &syn):
		return nil, &Error{Message: fmt.Sprintf("JSON syntax error at %s: %s", w.where(syn.Offset), syn.Error())}
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		if w.dec.InputOffset() == 0 && len(bytes.TrimSpace(w.data)) == 0 {
			return nil, &Error{Message: "empty input: a snapshot is one JSON object"}
		}
		return nil, &Error{Path: path, Message: "unexpected end of the JSON input"}
	default:
		return nil, &Error{Path: path, Message: "JSON syntax error: " + err.Error()}
	}
}

// where gives "line L, column C" of a byte offset in the input.
func (w *walker) where(off int64) string {
	if off > int64(len(w.data)) {
		off = int64(len(w.data))
	}
	before := w.data[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}

// value checks one JSON value against type t at path.
func (w *walker) value(t reflect.Type, path string, depth int) error {
	tok, err := w.token(path)
	if err != nil {
		return err
	}
	return w.valueFrom(tok, t, path, depth)
}

func (w *walker) valueFrom(tok json.Token, t reflect.Type, path string, depth int) error {
	if tok == nil { // null
		switch {
		case t.Kind() == reflect.Slice, t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
			return nil
		}
		return &Error{Path: path, Message: fmt.Sprintf("null is not allowed here; want %s", want(t))}
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return &Error{Path: path, Message: fmt.Sprintf("want %s, not %s", want(t), describe(tok))}
		}
		if depth >= maxDepth {
			return &Error{Path: path, Message: fmt.Sprintf("nested more than %d levels deep", maxDepth)}
		}
		return w.object(t, path, depth+1)
	case reflect.Slice:
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return &Error{Path: path, Message: fmt.Sprintf("want %s, not %s", want(t), describe(tok))}
		}
		if depth >= maxDepth {
			return &Error{Path: path, Message: fmt.Sprintf("nested more than %d levels deep", maxDepth)}
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(t.Elem(), fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
		_, err := w.token(path) // ']'
		return err
	case reflect.String:
		if _, ok := tok.(string); !ok {
			return &Error{Path: path, Message: fmt.Sprintf("want %s, not %s", want(t), describe(tok))}
		}
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			return &Error{Path: path, Message: fmt.Sprintf("want %s, not %s", want(t), describe(tok))}
		}
	case reflect.Int64:
		n, ok := tok.(json.Number)
		if !ok {
			return &Error{Path: path, Message: fmt.Sprintf("want %s, not %s", want(t), describe(tok))}
		}
		if _, err := strconv.ParseInt(n.String(), 10, 64); err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return &Error{Path: path, Message: fmt.Sprintf("%s is out of range", n)}
			}
			return &Error{Path: path, Message: fmt.Sprintf("%s is not a whole number", n)}
		}
	default:
		panic("snapshot: wire type with unsupported kind " + t.Kind().String())
	}
	return nil
}

// object checks the members of an object whose '{' was read.
func (w *walker) object(t reflect.Type, path string, depth int) error {
	fields := fieldsOf(t)
	seen := make(map[string]bool, len(fields))
	for w.dec.More() {
		tok, err := w.token(path)
		if err != nil {
			return err
		}
		key, _ := tok.(string) // Token only returns strings as object keys
		kpath := join(path, key)
		f, ok := fields[key]
		if !ok {
			return &Error{Path: kpath, Message: fmt.Sprintf("unknown key %q%s", key, suggest(key, fields))}
		}
		if seen[key] {
			return &Error{Path: kpath, Message: fmt.Sprintf("key %q is given twice", key)}
		}
		seen[key] = true
		if err := w.value(f.typ, kpath, depth); err != nil {
			return err
		}
	}
	if _, err := w.token(path); err != nil { // '}'
		return err
	}
	for _, name := range sortedRequired(fields) {
		if !seen[name] {
			return &Error{Path: join(path, name), Message: fmt.Sprintf("missing required key %q", name)}
		}
	}
	return nil
}

// join appends an object key to a path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

type field struct {
	typ      reflect.Type
	required bool
	index    int
}

var fieldCache sync.Map // reflect.Type -> map[string]field

// fieldsOf returns the JSON keys of a wire struct type.
func fieldsOf(t reflect.Type) map[string]field {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]field)
	}
	m := map[string]field{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		m[name] = field{typ: sf.Type, required: sf.Tag.Get("snap") == "required", index: i}
	}
	fieldCache.Store(t, m)
	return m
}

// sortedRequired returns the required keys in declaration order.
func sortedRequired(fields map[string]field) []string {
	out := make([]string, 0, len(fields))
	for name, f := range fields {
		if f.required {
			out = append(out, name)
		}
	}
	// Declaration order, so that the first missing key reported is stable.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && fields[out[j]].index < fields[out[j-1]].index; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// suggest returns ` (did you mean "x"?)` for a key within two edits of a
// known one (case and "-" for "_" aside), otherwise "".
func suggest(key string, fields map[string]field) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	if len(key) < 3 || len(key) > 64 {
		return ""
	}
	best, bestDist := "", 3
	for name := range fields {
		d := distance(norm(key), name)
		if d < bestDist || (d == bestDist && name < best) {
			best, bestDist = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// distance is the Levenshtein distance between a and b, in bytes.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// want names the JSON type expected for t.
func want(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		return "an object"
	case reflect.Slice:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int64:
		return "a whole number"
	}
	return t.Kind().String()
}

// describe names a JSON token with its value, for error messages.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		if v == '[' {
			return "an array"
		}
		return fmt.Sprintf("%q", string(v))
	case bool:
		return strconv.FormatBool(v)
	case json.Number:
		return "the number " + v.String()
	case string:
		return "the string " + quoteShort(v)
	}
	return fmt.Sprint(tok)
}

// quoteShort quotes s, cut to 64 bytes.
func quoteShort(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return strconv.Quote(s)
}
