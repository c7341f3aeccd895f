package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/reservation"
	"github.com/gputide/gputide/quota-broker/snapshot"
	"github.com/gputide/gputide/quota-broker/store"
)

// MoveRequest is the body of POST /v1/quota/move: move gpus of nominal
// quota from one node to another (DESIGN L9).
type MoveRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
	GPUs int    `json:"gpus"`
	// Flavor is the flavor whose nominal moves (DESIGN L13); it may be
	// left out in a tree of one flavor, else it is required.
	Flavor string `json:"flavor,omitempty"`
}

// ScaleRequest is the body of PUT /v1/quota/<name>: set one nominal.
type ScaleRequest struct {
	GPUs *int `json:"gpus"`
	// Flavor is the flavor whose nominal is set (DESIGN L13); it may be
	// left out in a tree of one flavor, else it is required.
	Flavor string `json:"flavor,omitempty"`
}

// TreeWriteResponse answers a quota write: the tree as written, "root" in
// the spelling of PUT /v1/quotas (snapshot.MarshalQuota: snake_case).
type TreeWriteResponse struct {
	ChangedAt time.Time   `json:"changed_at"`
	Guard     uint64      `json:"guard"`
	Root      *quota.Node `json:"-"`
}

// treeWriteJSON is TreeWriteResponse on the wire.
type treeWriteJSON struct {
	ChangedAt time.Time       `json:"changed_at"`
	Guard     uint64          `json:"guard"`
	Root      json.RawMessage `json:"root"`
}

// MarshalJSON writes the root in the tree's JSON spelling.
func (t TreeWriteResponse) MarshalJSON() ([]byte, error) {
	root, err := snapshot.MarshalQuota(t.Root)
	if err != nil {
		return nil, err
	}
	return json.Marshal(treeWriteJSON{ChangedAt: t.ChangedAt, Guard: t.Guard, Root: root})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (t *TreeWriteResponse) UnmarshalJSON(data []byte) error {
	var w treeWriteJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	t.ChangedAt, t.Guard, t.Root = w.ChangedAt, w.Guard, nil
	if len(w.Root) == 0 {
		return nil
	}
	root, err := snapshot.UnmarshalQuota(w.Root)
	if err != nil {
		return err
	}
	t.Root = root
	return nil
}

// decodeStrict decodes a small JSON body, refusing unknown fields. It is
// the one decoder of every request body (issue 16): one JSON value of at
// most MaxRequestBody bytes, no unknown field, nothing after it, each key
// once.
func decodeStrict(data []byte, v any) error {
	return decodeBody(data, v, nil)
}

// decodeBody is decodeStrict; keysAs, when not nil, is the type whose
// shape the duplicate-key check follows instead of v's (POST /v1/plan
// decodes its Job in a second step, decodePlanJob).
func decodeBody(data []byte, v any, keysAs reflect.Type) error {
	if keysAs == nil {
		keysAs = reflect.TypeOf(v)
	}
	if len(data) > MaxRequestBody {
		return &Problem{Status: http.StatusBadRequest, Field: "body", Msg: fmt.Sprintf("body larger than %d bytes", MaxRequestBody)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return &Problem{Status: http.StatusBadRequest, Field: te.Field, Msg: fmt.Sprintf("%s: want a JSON %s, got %s", te.Field, te.Type, te.Value)}
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			f = strings.Trim(f, `"`)
			field := f
			if field == "" {
				field = "body"
			}
			return &Problem{Status: http.StatusBadRequest, Field: field, Msg: fmt.Sprintf("unknown field %q", f)}
		}
		return &Problem{Status: http.StatusBadRequest, Field: "body", Msg: "body is not the documented JSON: " + err.Error()}
	}
	end := dec.InputOffset()
	if rest := bytes.TrimLeft(data[end:], " \t\r\n"); len(rest) > 0 {
		return &Problem{Status: http.StatusBadRequest, Field: "body",
			Msg: fmt.Sprintf("body: data after the JSON value at offset %d", int(end)+len(data[end:])-len(rest))}
	}
	return uniqueKeys(data[:end], keysAs)
}

// keyFrame is one open object or array of uniqueKeys' walk.
type keyFrame struct {
	array bool
	seen  map[string]string // keys seen, by their compared form (objects)
	fold  bool              // keys compare without letter case (a struct's)
	typ   reflect.Type      // the struct (fold), or the map's or array's element; nil: unknown
}

// uniqueKeys refuses a key given twice in one object of data, one JSON
// value already known to be valid (decodeBody), decoded into a value of
// type t. Keys of an object decoded into a struct (or of unknown type)
// compare without letter case, as encoding/json matches them to fields, so
// that no key is silently overridden by a later one; keys of an object
// decoded into a map compare exactly, as the map keeps them (a Nomad job's
// task env may hold both "http_proxy" and "HTTP_PROXY"). The walk is
// iterative (one key set per open object), bounded by the body's size.
func uniqueKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var frames []keyFrame
	next := t // the type of the next value
	expectKey := false
	// after ends a value: the next token is a key in an object, a value
	// of the element type in an array.
	after := func() {
		expectKey = false
		next = nil
		if len(frames) == 0 {
			return
		}
		f := frames[len(frames)-1]
		if f.array {
			next = f.typ
		} else {
			expectKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &Problem{Status: http.StatusBadRequest, Field: "body", Msg: "body is not the documented JSON: " + err.Error()}
		}
		if expectKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				frames = frames[:len(frames)-1]
				after()
				continue
			}
			key := tok.(string)
			f := frames[len(frames)-1]
			seenAs := key
			if f.fold {
				seenAs = foldKey(key)
			}
			if first, dup := f.seen[seenAs]; dup {
				return duplicateKey(dec, key, first)
			}
			f.seen[seenAs] = key
			expectKey = false
			next = f.typ
			if f.fold && f.typ != nil {
				next = fieldType(f.typ, key)
			}
			continue
		}
		switch tok {
		case json.Delim('{'):
			f := keyFrame{seen: map[string]string{}, fold: true}
			if t := deref(next); t != nil {
				switch t.Kind() {
				case reflect.Struct:
					f.typ = t
				case reflect.Map:
					f.fold, f.typ = false, t.Elem()
				case reflect.Interface:
					// Decoded into a map[string]any: keys kept
					// exactly, as a map's (a task Config's labels).
					f.fold, f.typ = false, t
				}
			}
			frames = append(frames, f)
			expectKey = true
		case json.Delim('['):
			f := keyFrame{array: true}
			if t := deref(next); t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
				f.typ = t.Elem()
			} else if t != nil && t.Kind() == reflect.Interface {
				f.typ = t // a []any: its objects are maps too
			}
			frames = append(frames, f)
			next = f.typ
		case json.Delim('}'), json.Delim(']'):
			frames = frames[:len(frames)-1]
			after()
		default:
			after()
		}
	}
}

// deref is t without its pointers; nil stays nil.
func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// fieldType is the type of the field of struct t that encoding/json fills
// from key (matched without letter case; fields of embedded structs
// included), nil when none does.
func fieldType(t reflect.Type, key string) reflect.Type {
	want := foldKey(key)
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" && sf.Tag.Get("json") == "-" {
			continue
		}
		if sf.Anonymous && name == "" {
			if et := deref(sf.Type); et.Kind() == reflect.Struct {
				if ft := fieldType(et, key); ft != nil {
					return ft
				}
			}
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if foldKey(name) == want {
			return sf.Type
		}
	}
	return nil
}

// foldKey maps key to one representative of its case-folding class: each
// rune becomes the smallest rune of its unicode.SimpleFold orbit, so two
// keys have the same foldKey exactly when bytes.EqualFold holds, which is
// how encoding/json matches keys to fields ("nameſpace" is "namespace").
func foldKey(key string) string {
	var b strings.Builder
	b.Grow(len(key))
	for _, r := range key {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// duplicateKey is the 400 for key given again (first: its first spelling),
// naming the key and its second value ("{...}" or "[...]" for a composite).
func duplicateKey(dec *json.Decoder, key, first string) error {
	value := "?"
	if tok, err := dec.Token(); err == nil {
		switch v := tok.(type) {
		case json.Delim:
			value = map[json.Delim]string{'{': "{...}", '[': "[...]"}[v]
		case nil:
			value = "null"
		default:
			value = fmt.Sprint(v)
		}
	}
	if first == key {
		return badInput(key, value, "key given twice")
	}
	return badInput(key, value, "key given twice (as %q before)", first)
}

// readBody reads a request's body, bounded by limitBodies (413 past it)
// and by MaxRequestBody.
func readBody(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBody+1))
	if err != nil {
		return nil, readBodyErr(r, err)
	}
	return data, nil
}

// DecodeMove reads and checks a move body: from and to name two nodes,
// 0 < gpus <= quota.MaxGPUs.
func DecodeMove(data []byte) (MoveRequest, error) {
	var m MoveRequest
	if err := decodeStrict(data, &m); err != nil {
		return m, err
	}
	switch {
	case strings.TrimSpace(m.From) == "":
		return m, badInput("from", m.From, "is empty")
	case strings.TrimSpace(m.To) == "":
		return m, badInput("to", m.To, "is empty")
	case m.From == m.To:
		return m, badInput("to", m.To, "is the same node as from")
	case m.GPUs <= 0 || m.GPUs > quota.MaxGPUs:
		return m, badInput("gpus", strconv.Itoa(m.GPUs), "must be from 1 to %d", quota.MaxGPUs)
	}
	return m, nil
}

// DecodeScale reads and checks a scale body: 0 <= gpus <= quota.MaxGPUs,
// and its flavor ("" when left out; the tree decides, treeFlavor).
func DecodeScale(data []byte) (int, string, error) {
	var m ScaleRequest
	if err := decodeStrict(data, &m); err != nil {
		return 0, "", err
	}
	if m.GPUs == nil {
		return 0, "", badInput("gpus", "", "is missing")
	}
	if *m.GPUs < 0 || *m.GPUs > quota.MaxGPUs {
		return 0, "", badInput("gpus", strconv.Itoa(*m.GPUs), "must be from 0 to %d", quota.MaxGPUs)
	}
	return *m.GPUs, m.Flavor, nil
}

// treeFlavor returns the flavor a move or scale acts on (DESIGN L13): the
// one named, or the tree's only one; a bad input naming field flavor
// otherwise, with the tree's flavors.
func treeFlavor(root *quota.Node, flavor string) (string, error) {
	f, err := quota.FlavorChoice(root, flavor)
	if err != nil {
		return "", badInput("flavor", flavor, "%s", strings.TrimPrefix(err.Error(), fmt.Sprintf("flavor %q ", flavor)))
	}
	return f, nil
}

// flavorText names a flavor in a message of a tree of several ("" in a
// one-flavor tree, whose messages read as before flavors).
func flavorText(root *quota.Node, flavor string) string {
	if len(root.Flavors) == 0 {
		return ""
	}
	return " of flavor " + strconv.Quote(flavor)
}

// DecodeTree reads a whole tree: HCL (the quota file format) unless
// contentType is application/json, then {"root": {...}, "settings": {...}}
// in the HCL file's spelling (snapshot.DecodeTree: snake_case keys,
// durations as Go duration strings such as "10m"; the Go field names and
// nanoseconds of the stored record are refused). Settings left out keep
// the stored ones (nil); keys left out of "settings" take their defaults,
// as in the HCL file.
func DecodeTree(data []byte, contentType string) (*quota.Node, *quota.Settings, error) {
	if len(data) > MaxRequestBody {
		return nil, nil, &Problem{Status: http.StatusBadRequest, Field: "body", Msg: fmt.Sprintf("body larger than %d bytes", MaxRequestBody)}
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/json" {
		root, settings, err := snapshot.DecodeTree(data)
		var se *snapshot.Error
		if errors.As(err, &se) {
			field := se.Path
			if field == "" {
				field = "body"
			}
			return nil, nil, &Problem{Status: http.StatusBadRequest, Field: field, Msg: se.Error()}
		}
		if err != nil {
			return nil, nil, err
		}
		return root, settings, nil
	}
	root, settings, err := quota.Parse(data, "quotas.hcl")
	var pe *quota.ParseError
	switch {
	case errors.As(err, &pe):
		return nil, nil, &Problem{Status: http.StatusBadRequest, Field: "body", Msg: err.Error()}
	case err != nil:
		return nil, nil, err // an L1 break: 409
	}
	return root, &settings, nil
}

// l1Sums checks law L1's sums at the parents of the changed nodes and at
// the changed nodes themselves, with the numbers in the CLI's words:
// "Quota1: children 56 + 80 = 136 > 128".
func l1Sums(root *quota.Node, flavor string, changed ...string) error {
	parents := map[string]*quota.Node{}
	root.Walk(func(n *quota.Node) {
		for _, c := range n.Children {
			parents[c.Name] = n
		}
	})
	check := func(n *quota.Node) error {
		if n == nil || len(n.Children) == 0 {
			return nil
		}
		sum, parts := 0, make([]string, 0, len(n.Children))
		for _, c := range n.Children {
			sum += c.GPUs.Of(flavor)
			parts = append(parts, strconv.Itoa(c.GPUs.Of(flavor)))
		}
		if sum > n.GPUs.Of(flavor) {
			return conflict("L1: %s%s: children %s = %d > %d; move GPUs between nodes with `gputide quota move`",
				n.Name, flavorText(root, flavor), strings.Join(parts, " + "), sum, n.GPUs.Of(flavor))
		}
		return nil
	}
	for _, name := range changed {
		if err := check(parents[name]); err != nil {
			return err
		}
		if err := check(root.Find(name)); err != nil {
			return err
		}
	}
	return nil
}

// treeChange edits a clone of the stored tree and returns a summary; an
// error is returned to the caller unchanged.
type treeChange func(root *quota.Node, now time.Time) (subject, detail string, err error)

// writeTree runs one guarded tree write (DESIGN §6, L9): read the stored
// tree, apply change, validate L1 (quota package) and L10 (reservation
// package: the bookings not yet ended still fit every nominal), then write
// the tree with changed_at and the change record in one transaction.
func (s *Server) writeTree(ctx context.Context, c *caller, op string, settings *quota.Settings, change treeChange) (*store.Guarded, error) {
	if !s.cfg.QuotaWrites {
		return nil, conflict("this broker keeps its quota tree in its quota_file (no consul store): edit the file (the agent reloads it when it changes), or configure the Consul store for quota writes through the API")
	}
	now := s.cfg.Now()
	return s.cfg.Store.Guarded(ctx, func(g *store.Guarded) ([]store.Change, error) {
		if g.Tree == nil || g.Tree.Root == nil {
			return nil, conflict("no quota tree is stored yet")
		}
		root := g.Tree.Root.Clone()
		subject, detail, err := change(root, now)
		if err != nil {
			return nil, err
		}
		rec := store.TreeRecord{Root: root, Settings: g.Tree.Settings, ChangedAt: now}
		if settings != nil {
			rec.Settings = *settings
		}
		if err := treeRefused(s.cfg.CheckTree(root, rec.Settings, g.Reservations, now)); err != nil {
			return nil, err
		}
		return []store.Change{
			store.PutTree(rec),
			store.PutChangeRecord(store.ChangeRecord{At: now, Op: op, Accessor: c.accessor(), Subject: subject, Detail: detail, Guard: g.Counter}),
		}, nil
	})
}

// treeRefused maps the refusal of Config.CheckTree to an answer, nil for
// nil: an L1 break as it is (409 "L1: ..."), bookings the tree would leave
// above a nominal, outside their namespace's node or without a flavor of
// the tree 409 "L10: ...", and
// anything else (a namespace the agent governs left unbound) 409 with its
// message. Nothing is written.
func treeRefused(err error) error {
	var ve *quota.ValidationError
	var be *reservation.BindingError
	var re *reservation.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ve):
		return err
	case errors.As(err, &be):
		return conflict("L10: %v", be)
	case errors.As(err, &re) && errors.Is(err, reservation.ErrRefused):
		return conflict("L10: the change leaves bookings above a nominal: %v", re)
	case errors.As(err, &re):
		// A booking the tree cannot place (DESIGN L13: its flavor dropped,
		// none named in a tree of several): re names the booking, its
		// flavor and the tree's flavors.
		return conflict("L10: the change leaves a booking without its flavor: %v", re)
	}
	return conflict("%v", err)
}

func (s *Server) answerTree(w http.ResponseWriter, g *store.Guarded, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, TreeWriteResponse{ChangedAt: g.Tree.ChangedAt, Guard: g.Counter, Root: g.Tree.Root})
}

// quotaMove serves POST /v1/quota/move (admin): both nominals and their
// changed_at in one guarded write (L9).
func (s *Server) quotaMove(w http.ResponseWriter, r *http.Request, c *caller) {
	data, err := readBody(r)
	if err != nil {
		writeError(w, err)
		return
	}
	m, err := DecodeMove(data)
	if err != nil {
		writeError(w, err)
		return
	}
	g, err := s.writeTree(r.Context(), c, "quota move", nil, func(root *quota.Node, now time.Time) (string, string, error) {
		from, to := root.Find(m.From), root.Find(m.To)
		flavor, err := treeFlavor(root, m.Flavor)
		switch {
		case from == nil:
			return "", "", &Problem{Status: http.StatusNotFound, Field: "from", Msg: fmt.Sprintf("from %q: no such quota node", m.From)}
		case to == nil:
			return "", "", &Problem{Status: http.StatusNotFound, Field: "to", Msg: fmt.Sprintf("to %q: no such quota node", m.To)}
		case err != nil:
			return "", "", err
		case from.GPUs.Of(flavor) < m.GPUs:
			return "", "", conflict("L1: %s has %d GPUs%s nominal, %d asked to move", m.From, from.GPUs.Of(flavor), flavorText(root, flavor), m.GPUs)
		}
		from.GPUs = from.GPUs.Set(flavor, from.GPUs.Of(flavor)-m.GPUs)
		to.GPUs = to.GPUs.Set(flavor, to.GPUs.Of(flavor)+m.GPUs)
		from.ChangedAt, to.ChangedAt = now, now
		if err := l1Sums(root, flavor, m.From, m.To); err != nil {
			return "", "", err
		}
		return m.From + "," + m.To, fmt.Sprintf("%s -> %s: %d GPUs%s", m.From, m.To, m.GPUs, flavorText(root, flavor)), nil
	})
	s.answerTree(w, g, err)
}

// quotaScale serves PUT /v1/quota/<name> (admin): one nominal, refused with
// the numbers when L1 breaks.
func (s *Server) quotaScale(w http.ResponseWriter, r *http.Request, c *caller) {
	name := r.PathValue("name")
	data, err := readBody(r)
	if err != nil {
		writeError(w, err)
		return
	}
	gpus, flavorName, err := DecodeScale(data)
	if err != nil {
		writeError(w, err)
		return
	}
	g, err := s.writeTree(r.Context(), c, "quota scale", nil, func(root *quota.Node, now time.Time) (string, string, error) {
		n := root.Find(name)
		if n == nil {
			return "", "", notFound("quota %q: no such quota node", name)
		}
		flavor, err := treeFlavor(root, flavorName)
		if err != nil {
			return "", "", err
		}
		old := n.GPUs.Of(flavor)
		n.GPUs, n.ChangedAt = n.GPUs.Set(flavor, gpus), now
		if err := l1Sums(root, flavor, name); err != nil {
			return "", "", err
		}
		return name, fmt.Sprintf("%s: %d -> %d GPUs%s", name, old, gpus, flavorText(root, flavor)), nil
	})
	s.answerTree(w, g, err)
}

// quotaApply serves PUT /v1/quotas (admin): the whole tree, HCL or JSON.
// Nodes whose nominal changed get changed_at = now; the others keep theirs.
func (s *Server) quotaApply(w http.ResponseWriter, r *http.Request, c *caller) {
	data, err := readBody(r)
	if err != nil {
		writeError(w, err)
		return
	}
	newRoot, settings, err := DecodeTree(data, r.Header.Get("Content-Type"))
	if err != nil {
		writeError(w, err)
		return
	}
	g, err := s.writeTree(r.Context(), c, "quota apply", settings, func(root *quota.Node, now time.Time) (string, string, error) {
		next := newRoot.Clone()
		changed := 0
		next.Walk(func(n *quota.Node) {
			if old := root.Find(n.Name); old != nil && maps.Equal(old.GPUs, n.GPUs) {
				n.ChangedAt = old.ChangedAt
			} else {
				n.ChangedAt = now
				changed++
			}
		})
		*root = *next
		return next.Name, fmt.Sprintf("whole tree, %d nodes with a new nominal", changed), nil
	})
	s.answerTree(w, g, err)
}
