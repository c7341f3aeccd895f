package snapshot

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agext/levenshtein"
	"github.com/gputide/gputide/quota-broker/plan"

	"github.com/gputide/gputide/quota-broker/quota"
)

// maxDepth bounds the nesting of the document (objects and arrays), so
// that a hostile input cannot make paths or recursion grow without limit.
// Each level of a quota tree takes two (an object and its children or
// namespaces array): the bound leaves room for a tree of quota.MaxDepth
// levels and a few more, so that a tree just too deep is reported as such
// (by the converter) rather than as deep JSON.
const maxDepth = 2*quota.MaxDepth + 8

// decodeStrict decodes the JSON document in data into v (a pointer to a
// wire struct), walking the document against v's type, and returns the
// first problem: a syntax error, a string that is not valid UTF-8 or holds
// a lone UTF-16 surrogate, an unknown key, a key given twice, a missing
// required key, a value of the wrong JSON type, a number that is not a
// whole number in int64 range, nesting beyond maxDepth, or data after the
// top-level object. It reads the input once, with no token allocations,
// so that snapshots of large clusters decode quickly.
//
// The wire types may hold structs, pointers to structs (null leaves them
// nil), slices (null leaves them nil, [] makes them empty), pointers to
// strings and bools (for optional keys; null is not allowed), strings,
// bools and int64s.
func decodeStrict(data []byte, v any) error {
	if err := checkEncoding(data); err != nil {
		return err
	}
	d := &decoder{data: data}
	d.skipSpace()
	if d.pos == len(data) {
		return &Error{Message: "empty input: a snapshot is one JSON object"}
	}
	if err := d.value(reflect.ValueOf(v).Elem(), 0); err != nil {
		return err
	}
	d.skipSpace()
	if d.pos == len(data) {
		return nil
	}
	rest := data[d.pos:]
	if len(rest) > 20 {
		rest = rest[:20]
	}
	return &Error{Message: fmt.Sprintf("trailing data after the JSON object at %s: %s", d.where(d.pos), plan.Quote(string(rest)))}
}

// checkEncoding rejects documents that are not UTF-8 text with a message
// that says what they are, rather than a syntax error about their first
// byte.
func checkEncoding(data []byte) error {
	switch {
	case bytes.HasPrefix(data, []byte{0xEF, 0xBB, 0xBF}):
		return &Error{Message: "the input starts with a UTF-8 byte order mark; a snapshot is plain UTF-8 JSON without one"}
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}), bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		return &Error{Message: "the input is UTF-16 text (it starts with a UTF-16 byte order mark); a snapshot is UTF-8 JSON"}
	}
	return nil
}

// decoder is the state of one strict decoding: the input, the read
// position and the JSON path of the value being read, kept as a stack so
// that no path string is built unless there is an error.
type decoder struct {
	data []byte
	pos  int
	path []pathElem
	// internOn is set while the value of a field tagged snap:"intern" is
	// read: its strings (and the strings of its list) come from intern, so
	// that a name repeated over 40,000 allocations is one string.
	internOn bool
	intern   map[string]string
	// unique is the noun of a field tagged snap:"unique=noun" while its
	// list is read: an entry given twice is refused at once, before the
	// rest of a list that may be huge is read (plan.Snapshot.Validate
	// holds the rule; this only stops early, with its message).
	unique string
}

// pathElem is one step of a JSON path: an object key, or a list index when
// key is "".
type pathElem struct {
	key   string
	index int
}

func (d *decoder) pushKey(key string) { d.path = append(d.path, pathElem{key: key}) }
func (d *decoder) pushIndex(i int)    { d.path = append(d.path, pathElem{index: i}) }
func (d *decoder) pop()               { d.path = d.path[:len(d.path)-1] }

// pathString renders the current path: "allocations[3].gpu_ids[1]".
func (d *decoder) pathString() string {
	var b strings.Builder
	for _, e := range d.path {
		if e.key == "" {
			fmt.Fprintf(&b, "[%d]", e.index)
			continue
		}
		writeKey(&b, e.key)
	}
	return b.String()
}

// writeKey appends an object key to a path: ".name" for a plain key
// (letters, digits, "_" and "-", at most 64 bytes), else a quoted,
// shortened ["..."], so that a hostile key cannot put control characters
// or megabytes into an error message.
func writeKey(b *strings.Builder, key string) {
	plain := len(key) > 0 && len(key) <= 64
	for i := 0; plain && i < len(key); i++ {
		c := key[i]
		plain = c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	if !plain {
		b.WriteString("[" + plan.Quote(key) + "]")
		return
	}
	if b.Len() > 0 {
		b.WriteByte('.')
	}
	b.WriteString(key)
}

// errorf returns an *Error at the current path.
func (d *decoder) errorf(format string, args ...any) error {
	return &Error{Path: d.pathString(), Message: fmt.Sprintf(format, args...)}
}

// where gives "line L, column C" of a byte offset in the input; columns
// count bytes from 1.
func (d *decoder) where(off int) string {
	if off > len(d.data) {
		off = len(d.data)
	}
	before := d.data[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}

// syntaxError reports a JSON syntax error at the current position, worded
// as encoding/json words it ("invalid character 'x' after object key"), or
// the end of the input when the document stops early.
func (d *decoder) syntaxError(context string) error {
	if d.pos >= len(d.data) {
		return &Error{Path: d.pathString(), Message: "unexpected end of the JSON input"}
	}
	return &Error{Message: fmt.Sprintf("JSON syntax error at %s: invalid character %s %s",
		d.where(d.pos), d.quoteChar(), context)}
}

// quoteChar quotes the character at the current position as encoding/json
// does ('x', '\”, '"', '\n'), showing a whole UTF-8 character rather than
// its first byte.
func (d *decoder) quoteChar() string {
	r, _ := utf8.DecodeRune(d.data[d.pos:])
	switch r {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	return strconv.QuoteRune(r)
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\r', '\n':
			d.pos++
		default:
			return
		}
	}
}

// value decodes one JSON value, after optional white space, into v.
func (d *decoder) value(v reflect.Value, depth int) error {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return d.syntaxError("")
	}
	c := d.data[d.pos]
	t := v.Type()
	if c == 'n' {
		if err := d.literal("null"); err != nil {
			return err
		}
		switch {
		case t.Kind() == reflect.Slice, t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
			v.SetZero()
			return nil
		}
		return d.errorf("null is not allowed here; want %s", want(t))
	}
	if t == claimantType {
		return d.claimant(v.Addr().Interface().(*wireClaimant), depth)
	}
	if t == nominalType {
		return d.nominal(v.Addr().Interface().(*wireNominal), depth)
	}
	if t.Kind() == reflect.Pointer {
		if !startsValue(c) {
			return d.syntaxError("looking for beginning of value")
		}
		if !d.kindMatches(c, t.Elem()) {
			return d.mismatch(t.Elem())
		}
		p := reflect.New(t.Elem())
		if err := d.value(p.Elem(), depth); err != nil {
			return err
		}
		v.Set(p)
		return nil
	}
	if !startsValue(c) {
		return d.syntaxError("looking for beginning of value")
	}
	if !d.kindMatches(c, t) {
		return d.mismatch(t)
	}
	switch t.Kind() {
	case reflect.Struct:
		if depth >= maxDepth {
			return d.errorf("nested more than %d levels deep", maxDepth)
		}
		return d.object(v, depth+1)
	case reflect.Slice:
		if depth >= maxDepth {
			return d.errorf("nested more than %d levels deep", maxDepth)
		}
		return d.array(v, depth+1)
	case reflect.String:
		s, err := d.str()
		if err != nil {
			return err
		}
		v.SetString(s)
	case reflect.Bool:
		if c == 't' {
			if err := d.literal("true"); err != nil {
				return err
			}
			v.SetBool(true)
		} else {
			if err := d.literal("false"); err != nil {
				return err
			}
			v.SetBool(false)
		}
	case reflect.Int64:
		text, whole, err := d.number()
		if err != nil {
			return err
		}
		if !whole {
			return d.errorf("%s is not a whole number", shortNumber(text))
		}
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return d.errorf("%s is out of range", shortNumber(text))
		}
		v.SetInt(n)
	default:
		panic("snapshot: wire type with unsupported kind " + t.Kind().String())
	}
	return nil
}

var claimantType = reflect.TypeFor[wireClaimant]()

var nominalType = reflect.TypeFor[wireNominal]()

// nominal decodes a quota node's gpus: a whole number, or an object of
// whole numbers by flavor, keys once each (DESIGN L13).
func (d *decoder) nominal(n *wireNominal, depth int) error {
	int64Type := reflect.TypeFor[int64]()
	switch c := d.data[d.pos]; {
	case c == '-' || c >= '0' && c <= '9':
		var v int64
		if err := d.value(reflect.ValueOf(&v).Elem(), depth); err != nil {
			return err
		}
		n.Plain = &v
		return nil
	case c != '{':
		if !startsValue(c) {
			return d.syntaxError("looking for beginning of value")
		}
		err := d.mismatch(int64Type)
		if e, ok := err.(*Error); ok {
			e.Message += " (or an object by flavor, {\"h100\": 16})"
		}
		return err
	}
	if depth >= maxDepth {
		return d.errorf("nested more than %d levels deep", maxDepth)
	}
	d.pos++ // '{'
	n.ByFlavor = []wireFlavorGPUs{}
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return nil
	}
	for {
		key, err := d.objectKey()
		if err != nil {
			return err
		}
		for _, f := range n.ByFlavor {
			if f.Flavor == key {
				return d.errorf("key %q is given twice", key)
			}
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			d.pop()
			return d.syntaxError("after object key")
		}
		d.pos++
		d.skipSpace()
		if d.pos >= len(d.data) {
			d.pop()
			return d.syntaxError("")
		}
		var v int64
		if err := d.value(reflect.ValueOf(&v).Elem(), depth+1); err != nil {
			return err
		}
		d.pop()
		n.ByFlavor = append(n.ByFlavor, wireFlavorGPUs{Flavor: key, GPUs: v})
		d.skipSpace()
		if d.pos >= len(d.data) {
			return d.syntaxError("")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return nil
		default:
			return d.syntaxError("after object key:value pair")
		}
	}
}

// claimant decodes a claimant reference: a string (the older form) or an
// object {"namespace", "job", "group"}.
func (d *decoder) claimant(c *wireClaimant, depth int) error {
	switch d.data[d.pos] {
	case '"':
		s, err := d.str()
		if err != nil {
			return err
		}
		c.Text = s
		return nil
	case '{':
		if depth >= maxDepth {
			return d.errorf("nested more than %d levels deep", maxDepth)
		}
		c.Key = &wireGroupKey{}
		return d.object(reflect.ValueOf(c.Key).Elem(), depth+1)
	}
	return d.mismatch(reflect.TypeFor[wireGroupKey]())
}

// startsValue reports whether c can start a JSON value.
func startsValue(c byte) bool {
	switch {
	case c == '{', c == '[', c == '"', c == 't', c == 'f', c == 'n', c == '-', c >= '0' && c <= '9':
		return true
	}
	return false
}

// kindMatches reports whether a value starting with c has the JSON type
// that t wants (null is handled before).
func (d *decoder) kindMatches(c byte, t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct:
		return c == '{'
	case reflect.Slice:
		return c == '['
	case reflect.String:
		return c == '"'
	case reflect.Bool:
		return c == 't' || c == 'f'
	case reflect.Int64:
		return c == '-' || c >= '0' && c <= '9'
	}
	return false
}

// mismatch reports a value of the wrong JSON type at the current position,
// describing it ("the string \"high\"", "the number 7", "an object").
func (d *decoder) mismatch(t reflect.Type) error {
	start := d.pos
	var got string
	switch c := d.data[d.pos]; {
	case c == '{':
		got = "an object"
	case c == '[':
		got = "an array"
	case c == '"':
		s, err := d.str()
		if err != nil {
			return err
		}
		got = "the string " + plan.Quote(s)
	case c == 't':
		if err := d.literal("true"); err != nil {
			return err
		}
		got = "true"
	case c == 'f':
		if err := d.literal("false"); err != nil {
			return err
		}
		got = "false"
	default:
		text, _, err := d.number()
		if err != nil {
			return err
		}
		got = "the number " + shortNumber(text)
	}
	if c := d.data[start]; c != '{' && c != '[' {
		if err := d.checkEndOfValue(); err != nil {
			return err
		}
	}
	return d.errorf("want %s, not %s", want(t), got)
}

// checkEndOfValue reports a syntax error when what follows the value just
// read cannot follow a value, so that "tru e" or "01" is reported as the
// syntax error it is, not as a value of the wrong type.
func (d *decoder) checkEndOfValue() error {
	save := d.pos
	d.skipSpace()
	defer func() { d.pos = save }()
	if d.pos >= len(d.data) {
		return nil
	}
	switch c := d.data[d.pos]; {
	case len(d.path) == 0:
		return nil // trailing data, reported after the object
	case d.path[len(d.path)-1].key == "" && (c == ',' || c == ']'):
		return nil
	case d.path[len(d.path)-1].key != "" && (c == ',' || c == '}'):
		return nil
	case d.path[len(d.path)-1].key == "":
		return d.syntaxError("after array element")
	}
	return d.syntaxError("after object key:value pair")
}

// literal reads the literal word (true, false or null) at the position.
func (d *decoder) literal(word string) error {
	for i := 0; i < len(word); i++ {
		if d.pos >= len(d.data) || d.data[d.pos] != word[i] {
			if i == 0 {
				return d.syntaxError("looking for beginning of value")
			}
			return d.syntaxError(fmt.Sprintf("in literal %s (expecting %s)", word, strconv.QuoteRune(rune(word[i]))))
		}
		d.pos++
	}
	return nil
}

// number reads a JSON number and returns its text and whether it is
// written as a whole number (no fraction, no exponent).
func (d *decoder) number() (text string, whole bool, err error) {
	start := d.pos
	whole = true
	digits := func() int {
		n := 0
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
			n++
		}
		return n
	}
	if d.data[d.pos] == '-' {
		d.pos++
	}
	switch {
	case d.pos < len(d.data) && d.data[d.pos] == '0':
		d.pos++
	case digits() == 0:
		return "", false, d.syntaxError("in numeric literal")
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		whole = false
		d.pos++
		if digits() == 0 {
			return "", false, d.syntaxError("after decimal point in numeric literal")
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		whole = false
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return "", false, d.syntaxError("in exponent of numeric literal")
		}
	}
	return string(d.data[start:d.pos]), whole, nil
}

// str reads a JSON string and returns its value. It rejects what
// encoding/json would quietly replace with U+FFFD: bytes that are not
// UTF-8 and lone UTF-16 surrogates in \u escapes, so that two different
// IDs can never decode to the same one.
func (d *decoder) str() (string, error) {
	d.pos++ // '"'
	start := d.pos
	ascii := true
	for {
		if d.pos >= len(d.data) {
			return "", d.syntaxError("")
		}
		c := d.data[d.pos]
		switch {
		case c == '"':
			raw := d.data[start:d.pos]
			d.pos++
			if !ascii && !utf8.Valid(raw) {
				return "", d.badUTF8(start)
			}
			return d.newString(raw), nil
		case c == '\\':
			return d.strEscaped(start)
		case c < 0x20:
			return "", d.syntaxError("in string literal")
		case c >= 0x80:
			ascii = false
		}
		d.pos++
	}
}

// newString returns raw as a string, interned while internOn.
func (d *decoder) newString(raw []byte) string {
	if !d.internOn {
		return string(raw)
	}
	if s, ok := d.intern[string(raw)]; ok {
		return s
	}
	if d.intern == nil {
		d.intern = map[string]string{}
	}
	s := string(raw)
	d.intern[s] = s
	return s
}

// strEscaped finishes reading a string that holds escapes; the position is
// at the first backslash and start at the first byte of the string.
func (d *decoder) strEscaped(start int) (string, error) {
	buf := make([]byte, 0, d.pos-start+16)
	buf = append(buf, d.data[start:d.pos]...)
	for {
		if d.pos >= len(d.data) {
			return "", d.syntaxError("")
		}
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			if !utf8.Valid(buf) {
				return "", d.badUTF8(start)
			}
			return string(buf), nil
		case c < 0x20:
			return "", d.syntaxError("in string literal")
		case c != '\\':
			buf = append(buf, c)
			d.pos++
			continue
		}
		escAt := d.pos
		d.pos++
		if d.pos >= len(d.data) {
			return "", d.syntaxError("")
		}
		switch e := d.data[d.pos]; e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			d.pos++
			r, err := d.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				var r2 rune = -1
				if r < 0xDC00 && d.pos+1 < len(d.data) && d.data[d.pos] == '\\' && d.data[d.pos+1] == 'u' {
					save := d.pos
					d.pos += 2
					if r2, err = d.hex4(); err != nil {
						return "", err
					}
					if utf16.DecodeRune(r, r2) == utf8.RuneError {
						d.pos, r2 = save, -1
					}
				}
				if r2 < 0 {
					return "", d.errorf("the string holds a lone UTF-16 surrogate %s at %s (not a character)",
						string(d.data[escAt:escAt+6]), d.where(escAt))
				}
				r = utf16.DecodeRune(r, r2)
			}
			buf = utf8.AppendRune(buf, r)
			continue
		default:
			return "", d.syntaxError("in string escape code")
		}
		d.pos++
	}
}

// hex4 reads the four hex digits of a \u escape.
func (d *decoder) hex4() (rune, error) {
	var r rune
	for i := 0; i < 4; i++ {
		if d.pos >= len(d.data) {
			return 0, d.syntaxError("")
		}
		c := d.data[d.pos]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, d.syntaxError(`in \u hexadecimal character escape`)
		}
		r = r*16 + rune(c)
		d.pos++
	}
	return r, nil
}

// badUTF8 reports the first byte that is not UTF-8 in the string that
// starts at start.
func (d *decoder) badUTF8(start int) error {
	off := start
	for off < len(d.data) {
		r, n := utf8.DecodeRune(d.data[off:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		off += n
	}
	return d.errorf("the string is not valid UTF-8 (byte 0x%02x at %s); a snapshot is UTF-8 text", d.data[off], d.where(off))
}

// array decodes the elements of a JSON array into the slice v.
func (d *decoder) array(v reflect.Value, depth int) error {
	d.pos++ // '['
	v.Set(reflect.MakeSlice(v.Type(), 0, 0))
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return nil
	}
	noun := d.unique
	var seen map[string]int
	if noun != "" && v.Type().Elem().Kind() == reflect.String {
		seen = map[string]int{}
	}
	// A list of unique entries is not sized ahead: its first repeat
	// refuses it, which may come long before its end.
	if n := d.presize(v.Type().Elem()); n > 0 && d.unique == "" {
		v.Set(reflect.MakeSlice(v.Type(), 0, n))
	}
	for i := 0; ; i++ {
		if i == v.Cap() {
			grown := reflect.MakeSlice(v.Type(), i, max(4, 2*i))
			reflect.Copy(grown, v)
			v.Set(grown)
		}
		v.SetLen(i + 1)
		d.pushIndex(i)
		if err := d.value(v.Index(i), depth); err != nil {
			return err
		}
		if seen != nil {
			e := v.Index(i).String()
			if j, dup := seen[e]; dup {
				return d.errorf("%s %s is listed twice (also %s[%d])", noun, plan.Quote(e), d.path[len(d.path)-2].key, j)
			}
			seen[e] = i
		}
		d.pop()
		d.skipSpace()
		if d.pos >= len(d.data) {
			return d.syntaxError("")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return nil
		default:
			return d.syntaxError("after array element")
		}
	}
}

// presizePath is the deepest path at which an array is counted before it
// is read (nodes[i].gpus and allocations[i].gpu_ids are at 3): deeper
// arrays (a quota tree's children of children) are not, so that no byte
// is scanned more than a few times.
const presizePath = 4

// presize returns the capacity to give the slice of the array at the
// position ('[' just passed): its number of elements, found by a scan that
// allocates nothing, so that a list of 40,000 allocations or 2.5 million
// GPUs is allocated once at its size rather than through doubling (which
// allocates twice its size and holds up to one and a half times it at
// once). The capacity is bounded by four bytes of memory per byte of the
// array's text, so that a hostile list of "{}" cannot make it allocate
// more than the text warrants before its first element is found bad.
// It returns 0 (grow as needed) for short or deep arrays and bad syntax,
// which the reader then reports.
func (d *decoder) presize(elem reflect.Type) int {
	if len(d.path) > presizePath {
		return 0
	}
	n, size := 1, 0
	depth := 0
	for i := d.pos; i < len(d.data); i++ {
		switch c := d.data[i]; c {
		case '"':
			for i++; i < len(d.data) && d.data[i] != '"'; i++ {
				if d.data[i] == '\\' {
					i++
				}
			}
		case '[', '{':
			depth++
		case ']', '}':
			if depth == 0 {
				size = i - d.pos
				return min(n, 4*size/int(max(elem.Size(), 1))+4)
			}
			depth--
		case ',':
			if depth == 0 {
				n++
			}
		}
	}
	return 0
}

// object decodes the members of a JSON object into the struct v.
func (d *decoder) object(v reflect.Value, depth int) error {
	d.pos++ // '{'
	fields := fieldsOf(v.Type())
	var seen uint64 // by field index; wire structs have fewer than 64 fields
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return d.required(fields, seen)
	}
	for {
		key, err := d.objectKey()
		if err != nil {
			return err
		}
		f, ok := fields.byName[key]
		if !ok {
			return d.errorf("unknown key %s%s", plan.Quote(key), suggest(key, fields.byName))
		}
		if seen&(1<<f.index) != 0 {
			return d.errorf("key %q is given twice", key)
		}
		seen |= 1 << f.index
		d.skipSpace()
		if d.pos >= len(d.data) {
			d.pop()
			return d.syntaxError("")
		}
		if d.data[d.pos] != ':' {
			d.pop()
			return d.syntaxError("after object key")
		}
		d.pos++
		d.internOn, d.unique = f.intern, f.unique
		err = d.value(v.Field(f.index), depth)
		d.internOn, d.unique = false, ""
		if err != nil {
			return err
		}
		d.pop()
		d.skipSpace()
		if d.pos >= len(d.data) {
			return d.syntaxError("")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return d.required(fields, seen)
		default:
			return d.syntaxError("after object key:value pair")
		}
	}
}

// required reports the first required key (in declaration order) that the
// object just read did not give.
func (d *decoder) required(fields *fieldSet, seen uint64) error {
	for _, name := range fields.required {
		if seen&(1<<fields.byName[name].index) == 0 {
			d.pushKey(name)
			err := d.errorf("missing required key %q", name)
			d.pop()
			return err
		}
	}
	return nil
}

type field struct {
	typ      reflect.Type
	required bool
	intern   bool   // snap:"intern"
	unique   string // snap:"unique=noun"
	index    int
}

// fieldSet is what the decoder knows of a wire struct type: its keys, and
// its required keys in declaration order (so that the first missing key
// reported is stable).
type fieldSet struct {
	byName   map[string]field
	required []string
}

var fieldCache sync.Map // reflect.Type -> *fieldSet

// fieldsOf returns the JSON keys of a wire struct type.
func fieldsOf(t reflect.Type) *fieldSet {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.(*fieldSet)
	}
	if t.NumField() > 64 {
		panic("snapshot: wire struct with more than 64 fields: " + t.String())
	}
	fs := &fieldSet{byName: map[string]field{}}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		f := field{typ: sf.Type, index: i}
		for opt := range strings.SplitSeq(sf.Tag.Get("snap"), ",") {
			switch k, v, _ := strings.Cut(opt, "="); k {
			case "required":
				f.required = true
			case "intern":
				f.intern = true
			case "unique":
				f.unique = v
			}
		}
		required := f.required
		fs.byName[name] = f
		if required {
			fs.required = append(fs.required, name)
		}
	}
	fieldCache.Store(t, fs)
	return fs
}

// suggest returns ` (did you mean "x"?)` for a key within two edits
// (github.com/agext/levenshtein) of a known one (case and "-" for "_"
// aside), otherwise "".
func suggest(key string, fields map[string]field) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	if len(key) < 3 || len(key) > 64 {
		return ""
	}
	best, bestDist := "", 3
	for name := range fields {
		d := levenshtein.Distance(norm(key), name, nil)
		if d < bestDist || (d == bestDist && name < best) {
			best, bestDist = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
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

// shortNumber cuts the text of a number to 40 bytes for messages.
func shortNumber(s string) string {
	if len(s) > 40 {
		return s[:40] + fmt.Sprintf("... (%d digits)", len(s))
	}
	return s
}

// objectKey reads the next key of an object (after "{" or ","), leading
// space skipped, and pushes it onto the path that errors name.
func (d *decoder) objectKey() (string, error) {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return "", d.syntaxError("")
	}
	if d.data[d.pos] != '"' {
		return "", d.syntaxError("looking for beginning of object key string")
	}
	key, err := d.str()
	if err != nil {
		return "", err
	}
	d.pushKey(key)
	return key, nil
}
