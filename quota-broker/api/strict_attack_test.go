package api

import (
	"net/http"
	"strings"
	"testing"
)

// A Nomad job's task Config is map[string]interface{}: objects inside it
// decode into maps that keep keys differing only in case (Docker labels
// "Team" and "team"), so the duplicate-key check must compare them
// exactly, as it does the Env map's; it refused them as "key given twice".
func TestPreviewConfigObjectsKeepCase(t *testing.T) {
	h := newHarness(t, options{})
	job := `{"Job":{"ID":"probe","Namespace":"workspace-b","Type":"batch","TaskGroups":[{"Name":"g","Count":1,"Tasks":[{"Name":"t",` +
		`"Config":{"image":"x","labels":{"Team":"a","team":"b"},"mounts":[{"Source":"a","source":"b"}]},"Resources":{"Devices":[{"Name":"nvidia/gpu","Count":8}]}}]}]}}`
	if code, body := h.do(t, "POST", "/v1/plan", tokTeamB, job); code != http.StatusOK {
		t.Errorf("a job whose Config labels differ in case: %d %s", code, body)
	}
	dup := strings.Replace(job, `"team":"b"`, `"Team":"b"`, 1)
	if code, body := h.do(t, "POST", "/v1/plan", tokTeamB, dup); code != http.StatusBadRequest || !strings.Contains(string(body), "key given twice") {
		t.Errorf("a Config label given twice: %d %s", code, body)
	}
}

// The strict decoder's edges on a small body (a booking): each is a 400
// naming the body or a field, nothing stored.
func TestStrictBodyEdges(t *testing.T) {
	h := newHarness(t, options{})
	ok := `"namespace":"workspace-b","gpus":1,"start":"2026-12-07T08:00:00Z","duration":"1h"`
	for name, body := range map[string]string{
		"long s folds to namespace":  `{` + ok + `,"nameſpace":"workspace-b"}`,
		"kelvin sign folds to k":     `{"id":"a",` + ok + `,"\u212aind":1,"kind":2}`,
		"escaped key duplicate":      `{` + ok + `,"\u0067pus":2}`,
		"huge number":                `{"namespace":"workspace-b","gpus":1e400,"start":"2026-12-07T08:00:00Z","duration":"1h"}`,
		"fraction":                   `{"namespace":"workspace-b","gpus":1.5,"start":"2026-12-07T08:00:00Z","duration":"1h"}`,
		"int64 overflow":             `{"namespace":"workspace-b","gpus":9223372036854775808,"start":"2026-12-07T08:00:00Z","duration":"1h"}`,
		"trailing NUL":               `{` + ok + `}` + "\x00",
		"two values":                 `{` + ok + `}{}`,
		"deep nesting":               `{` + ok + `,"x":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`,
		"invalid UTF-8 in the ID":    `{"id":"a` + "\xff" + `",` + ok + `}`,
		"U+202E in the ID":           `{"id":"a` + "\u202e" + `b",` + ok + `}`,
		"top-level array":            `[` + `{` + ok + `}]`,
		"empty":                      ``,
		"null":                       `null`,
		"key differing by invalid 8": `{` + ok + `,"` + "\xff" + `":1,"` + "\xfe" + `":2}`,
	} {
		code, resp := h.do(t, "POST", "/v1/reservations", tokTeamB, body)
		if code != http.StatusBadRequest {
			t.Errorf("%s: %d %.300s, want 400", name, code, resp)
		}
		if len(resp) > 2000 {
			t.Errorf("%s: a %d-byte answer echoes the body", name, len(resp))
		}
	}
	if g := h.guard(t); g != h.base {
		t.Errorf("refused bodies moved the guard %d -> %d", h.base, g)
	}
}
