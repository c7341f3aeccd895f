package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A body is one JSON value and nothing after it, each key once: trailing
// data (even a lone "}" or "]", which json.Decoder.More lets through) and a
// key given twice (in any letter case, which encoding/json folds: the last
// one would win silently) are a 400 naming the body or the key, and POST
// /v1/reservations writes nothing (issue 9 item 8).
func TestStrictBody(t *testing.T) {
	const good = `"namespace":"workspace-b","gpus":16,"start":"2026-12-07T08:00:00+09:00","duration":"168h"`
	for _, tc := range []struct {
		name, body string
		want       errorBody
	}{
		{"trailing brace", `{` + good + `}}`, errorBody{Field: "body", Error: `body: data after the JSON value at offset 91`}},
		{"trailing bracket", `{` + good + `}]`, errorBody{Field: "body", Error: `body: data after the JSON value at offset 91`}},
		{"second value", `{` + good + `} {}`, errorBody{Field: "body", Error: `body: data after the JSON value at offset 92`}},
		{"duplicate key", `{` + good + `,"namespace":"workspace-c"}`, errorBody{Field: "namespace", Error: `namespace "workspace-c": key given twice`}},
		{"duplicate key other case", `{` + good + `,"Namespace":"workspace-c"}`, errorBody{Field: "Namespace", Error: `Namespace "workspace-c": key given twice (as "namespace" before)`}},
		{"duplicate key folded as encoding/json folds it", `{` + good + `,"nameſpace":"workspace-c"}`, errorBody{Field: "nameſpace", Error: `nameſpace "workspace-c": key given twice (as "namespace" before)`}},
		{"duplicate nested key", `{"root":{"name":"Q","gpus":8,"gpus":9}}`, errorBody{Field: "root.gpus", Error: `root.gpus: key "gpus" is given twice`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, options{})
			path, method := "/v1/reservations", "POST"
			if tc.name == "duplicate nested key" {
				path, method = "/v1/quotas", "PUT"
			}
			code, resp := h.do(t, method, path, tokMgmt, tc.body)
			if code != http.StatusBadRequest {
				t.Fatalf("%s: %d %s, want 400", tc.body, code, resp)
			}
			if diff := cmp.Diff(tc.want, errOf(t, resp)); diff != "" {
				t.Errorf("%s: error (-want +got):\n%s", tc.body, diff)
			}
			if g := h.guard(t); g != h.base {
				t.Errorf("%s: guard moved %d -> %d", tc.body, h.base, g)
			}
		})
	}
}

// A reservation path whose ID cannot be a booking's (DESIGN L10:
// [a-z0-9][a-z0-9-]{0,62}) is a 400 naming the id before any store read, so
// that ".." or "a/b" never reaches a key (on Consul ".." would be cleaned
// into another key's path); nothing is written.
func TestReservationPathID(t *testing.T) {
	h := newHarness(t, options{})
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/v1/reservation/%2E%2E", `id "..": character 1 ('.') is not allowed; an ID matches [a-z0-9][a-z0-9-]{0,62}`},
		{"GET", "/v1/reservation/..%2Fquota", `id "../quota": character 1 ('.') is not allowed; an ID matches [a-z0-9][a-z0-9-]{0,62}`},
		{"GET", "/v1/reservation/a%00b", `id "a\x00b": character 2 ('\x00') is not allowed; an ID matches [a-z0-9][a-z0-9-]{0,62}`},
		{"DELETE", "/v1/reservation/RB?force=true", `id "RB": character 1 ('R') is not allowed; an ID matches [a-z0-9][a-z0-9-]{0,62}`},
		{"DELETE", "/v1/reservation/a%2Fb", `id "a/b": character 2 ('/') is not allowed; an ID matches [a-z0-9][a-z0-9-]{0,62}`},
	} {
		code, resp := h.do(t, tc.method, tc.path, tokMgmt, "")
		if code != http.StatusBadRequest {
			t.Fatalf("%s %s: %d %s, want 400", tc.method, tc.path, code, resp)
		}
		if diff := cmp.Diff(errorBody{Field: "id", Error: tc.want}, errOf(t, resp)); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", tc.method, tc.path, diff)
		}
	}
	if g := h.guard(t); g != h.base {
		t.Errorf("guard moved %d -> %d", h.base, g)
	}
}

// FuzzBookingBody: POST /v1/reservations with any bytes as its body (the
// typed FuzzBookingPost only sends well-formed single objects): never a
// 5xx; a 400 names a field and, with the 409s, leaves the guard as it was;
// a 201 came from exactly one valid JSON object, and is cancelled again so
// that every input meets the same state.
func FuzzBookingBody(f *testing.F) {
	h := newHarness(f, options{})
	const good = `"namespace":"workspace-b","gpus":16,"start":"2026-12-07T08:00:00+09:00","duration":"168h"`
	for _, s := range []string{`{` + good + `}`, `{` + good + `}}`, `{` + good + `}]`, `{` + good + `,"Namespace":"workspace-c"}`,
		`{` + good + `,"id":"rb","ID":"rc"}`, `{"x":{"y":[[[[]]]]}}`, `{` + good + `,"model":"\u0000"}`, "\ufeff{" + good + "}", `{` + good + `} 1`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := h.guard(t)
		code, resp := h.do(t, "POST", "/v1/reservations", tokMgmt, string(body))
		switch code {
		case http.StatusBadRequest, http.StatusConflict:
			if e := errOf(t, resp); code == http.StatusBadRequest && e.Field == "" {
				t.Fatalf("%q: 400 %+v names no field", body, e)
			}
			if after := h.guard(t); after != before {
				t.Fatalf("%q: %d, but the guard moved %d -> %d", body, code, before, after)
			}
		case http.StatusCreated:
			var obj map[string]json.RawMessage
			dec := json.NewDecoder(bytes.NewReader(body))
			if err := dec.Decode(&obj); err != nil || len(bytes.TrimSpace(body[dec.InputOffset():])) != 0 {
				t.Fatalf("%q: booked from a body that is not one JSON object: %v", body, err)
			}
			var r ReservationResponse
			if err := json.Unmarshal(resp, &r); err != nil {
				t.Fatal(err)
			}
			if code, out := h.do(t, "DELETE", "/v1/reservation/"+r.Reservation.ID, tokMgmt, ""); code != http.StatusOK {
				t.Fatalf("cancel %s: %d %s", r.Reservation.ID, code, out)
			}
		default:
			t.Fatalf("%q: %d %s", body, code, resp)
		}
	})
}

// PUT /v1/quotas as JSON checks the settings as the HCL file does: a
// negative duration, or one above quota.MaxSetting (whose sums, such as
// start - (kill_timeout + drain_margin), would overflow), is a 400 naming
// the setting and its value, and nothing is written. The JSON tree is
// spelled as the HCL file (issue 16): snake_case keys, durations as Go
// duration strings; the Go field names and nanoseconds are refused.
func TestTreeJSONSettingsBounds(t *testing.T) {
	h := newHarness(t, options{})
	tree := `"root":{"name":"Quota1","gpus":128,"namespaces":["workspace-a"],"children":[{"name":"Quota1.1","gpus":48,"namespaces":["workspace-b"]},{"name":"Quota1.2","gpus":80,"namespaces":["workspace-c"]}]}`
	for _, tc := range []struct{ settings, field, want string }{
		{`{"drain_margin":"-5s"}`, "settings.drain_margin", `settings.drain_margin: "-5s" is negative`},
		{`{"settle":"2562047h"}`, "settings.settle", `settings.settle: "2562047h0m0s" is more than 87600h0m0s`},
		{`{"reservation_max_ahead":"-1ns"}`, "settings.reservation_max_ahead", `settings.reservation_max_ahead: "-1ns" is negative`},
		{`{"reservation_max_per_namespace":0}`, "settings.reservation_max_per_namespace", `settings.reservation_max_per_namespace: 0 must be a whole number from 1 to 10000`},
		{`{"DrainMargin":-5000000000}`, "settings.DrainMargin", `settings.DrainMargin: unknown key "DrainMargin" (did you mean "drain_margin"?)`},
		{`{"debt_grace":600000000000}`, "settings.debt_grace", `settings.debt_grace: want a string, not the number 600000000000`},
		{`{"debt_grace":"10"}`, "settings.debt_grace", `settings.debt_grace: "10" is not a Go duration (such as "90s", "10m" or "1h30m")`},
	} {
		code, resp := h.do(t, "PUT", "/v1/quotas", tokMgmt, `{`+tree+`,"settings":`+tc.settings+`}`)
		if code != http.StatusBadRequest {
			t.Fatalf("settings %s: %d %s, want 400", tc.settings, code, resp)
		}
		if diff := cmp.Diff(errorBody{Field: tc.field, Error: tc.want}, errOf(t, resp)); diff != "" {
			t.Errorf("settings %s (-want +got):\n%s", tc.settings, diff)
		}
	}
	if g := h.guard(t); g != h.base {
		t.Errorf("guard moved %d -> %d", h.base, g)
	}
}
