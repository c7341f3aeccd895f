package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/reservation"
)

// checkDecodeError: every decoder error is a 400 naming a field, or (a
// whole tree breaking L1) a 409; never a panic.
func checkDecodeError(t *testing.T, what string, data []byte, err error) {
	if err == nil {
		return
	}
	status, body := statusOf(err)
	var ve *quota.ValidationError
	if errors.As(err, &ve) && status == http.StatusConflict {
		return
	}
	if status != http.StatusBadRequest || body.Field == "" {
		t.Fatalf("%s(%q): %d %+v, want 400 naming a field", what, data, status, body)
	}
}

func FuzzDecoders(f *testing.F) {
	for _, s := range []string{
		bookingB, `{"namespace":"a","gpus":1,"start":"2026-12-07T08:00:00Z","duration":"1h","alloc_gpus":-3}`,
		`{"from":"A","to":"B","gpus":8}`, `{"gpus":3}`, `{"gpus":null}`, `{"Job":{"ID":"x"}}`, `{"Namespace":"n","JobID":"j"}`,
		`{"root":{"Name":"Q","GPUs":8,"Children":[{"Name":"A","GPUs":9}]}}`, "quota \"Q\" {\n  gpus = 8\n}\n", `{`, `[]`, `null`, `{"id":"R"}`,
		// Trees in the one spelling, with names outside quota.ValidName
		// and settings (issue 16).
		`{"root":{"name":"Q","gpus":8,"children":[{"name":"a\nb","gpus":1},{"name":"\u0000\u202e","gpus":1}]},"settings":{"debt_grace":"10m","reservation_max_per_namespace":7}}`,
		`{"root":{"name":"","gpus":8},"settings":{"settle":"-1s"}}`, "quota \"a\\nb\" {\n  gpus = 8\n}\n",
		// Eviction budgets (DESIGN L14), well formed and not.
		`{"root":{"name":"Q","gpus":8,"max_evict":{"gpus":2,"per":"10m"},"children":[{"name":"A","gpus":1,"max_evict":{"gpus":-1,"per":"0s"}}]}}`,
		"quota \"Q\" {\n  gpus = 8\n  max_evict = { gpus = 2, per = \"25h\" }\n}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := DecodeBooking(data)
		var re *reservation.Error
		if err != nil && !errors.As(err, &re) {
			checkDecodeError(t, "DecodeBooking", data, err)
		} else if err != nil && re.Field == "" {
			t.Fatalf("DecodeBooking(%q): %v names no field", data, err)
		}
		_, err = DecodeMove(data)
		checkDecodeError(t, "DecodeMove", data, err)
		_, _, err = DecodeScale(data)
		checkDecodeError(t, "DecodeScale", data, err)
		_, err = DecodePlanRequest(data)
		checkDecodeError(t, "DecodePlanRequest", data, err)
		root, _, err := DecodeTree(data, "application/json")
		checkDecodeError(t, "DecodeTree json", data, err)
		if err == nil {
			// What the write then checks: a bad name is a 400 naming
			// the name, an L1 break a 409.
			checkDecodeError(t, "Validate of a JSON tree", data, quota.Validate(root))
		}
		_, _, err = DecodeTree(data, "text/plain")
		checkDecodeError(t, "DecodeTree hcl", data, err)
	})
}

// FuzzBookingPost: POST /v1/reservations with well-formed JSON of any
// values (times, durations, counts, IDs; issue 9 item 8) never panics and
// never writes on bad input: a 400 names the field and its quoted value
// and leaves the guard (so every key) as it was; a 201 books exactly the
// window asked (end = start + duration), and is cancelled again so that
// every input meets the same state.
func FuzzBookingPost(f *testing.F) {
	h := newHarness(f, options{})
	f.Add("rb", "workspace-b", 16, 0, "2026-12-07T08:00:00+09:00", "168h")
	f.Add("", "workspace-b", 16, 8, "2026-12-07T08:00:00Z", "1h")
	f.Add("Bad_ID", "workspace-b", 16, 5, "tomorrow", "90d")
	f.Add("r-1", "nowhere", 0, -1, "2026-11-30T08:00:00Z", "-1h")
	f.Add("r-2", "workspace-b", 48, 0, "2027-06-01T00:00:00Z", "2161h")
	f.Add("r-3", "workspace-b", 1<<40, 3, "2026-12-07T08:00:00.5+14:00", "59m59s")
	f.Fuzz(func(t *testing.T, id, ns string, gpus, alloc int, start, duration string) {
		body, err := json.Marshal(map[string]any{"id": id, "namespace": ns, "gpus": gpus, "alloc_gpus": alloc,
			"start": start, "duration": duration})
		if err != nil {
			t.Fatal(err)
		}
		before, err := h.kv.ReadGuarded(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		code, resp := h.do(t, "POST", "/v1/reservations", tokMgmt, string(body))
		switch code {
		case http.StatusBadRequest, http.StatusConflict:
			e := errOf(t, resp)
			if code == http.StatusBadRequest && (e.Field == "" || !strings.HasPrefix(e.Error, e.Field+` "`)) {
				t.Fatalf("%s: 400 %+v, want the field and its quoted value first", body, e)
			}
			after, err := h.kv.ReadGuarded(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if after.Counter != before.Counter {
				t.Fatalf("%s: %d, but the guard moved %d -> %d", body, code, before.Counter, after.Counter)
			}
		case http.StatusCreated:
			var r ReservationResponse
			if err := json.Unmarshal(resp, &r); err != nil {
				t.Fatal(err)
			}
			s, _ := time.Parse(time.RFC3339, start)
			d, _ := time.ParseDuration(duration)
			got := r.Reservation
			if got.Start == nil || got.End == nil || !got.Start.Equal(s) || !got.End.Equal(s.Add(d)) || got.GPUs != gpus ||
				got.AllocGPUs <= 0 || gpus%got.AllocGPUs != 0 || (id != "" && got.ID != id) {
				t.Fatalf("%s: booked %+v", body, got)
			}
			if code, resp := h.do(t, "DELETE", "/v1/reservation/"+url.PathEscape(got.ID), tokMgmt, ""); code != http.StatusOK {
				t.Fatalf("cancel %s: %d %s", got.ID, code, resp)
			}
		default:
			t.Fatalf("%s: %d %s", body, code, resp)
		}
	})
}
