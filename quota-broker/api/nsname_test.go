package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// A tree's namespace names are Nomad's (letters, digits, '-', '_', at most
// 128): one with a newline, NUL, U+202E or 5,000 characters was stored
// (node names were refused, namespaces not) and then written into logs,
// the status page and every answer that names it. Refused with 400 on
// field "namespaces", nothing stored.
func TestTreeNamespaceNamesAreNomads(t *testing.T) {
	h := newHarness(t, options{})
	for _, ns := range []string{"work\nspace", "a\x00b", "team\u202ec", strings.Repeat("n", 5000), "a b", "ns/x", "*"} {
		tree := `{"root":{"name":"Quota1","gpus":128,"namespaces":["workspace-a"],"children":[` +
			`{"name":"Quota1.1","gpus":48,"namespaces":["workspace-b"]},{"name":"Quota1.2","gpus":80,"namespaces":["workspace-c",` + jsonString(ns) + `]}]}}`
		code, body := h.do(t, "PUT", "/v1/quotas", tokMgmt, tree)
		if e := errOf(t, body); code != http.StatusBadRequest || e.Field != "namespaces" || len(body) > 1000 {
			t.Errorf("namespace %.40q: %d %.300s, want 400 on namespaces", ns, code, body)
		}
	}
	if g := h.guard(t); g != h.base {
		t.Errorf("refused trees moved the guard %d -> %d", h.base, g)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
