package api

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/gputide/gputide/quota-broker/store"
)

// busyStore refuses every guarded write as a full write queue does.
type busyStore struct{ *store.KV }

func (busyStore) Guarded(context.Context, store.ValidateFunc) (*store.Guarded, error) {
	return nil, &store.Error{Op: "queue", Kind: store.ErrBusy}
}

// A write refused by the store's full write queue (store.ErrBusy) is the
// documented 429 with Retry-After, nothing written (issue 16).
func TestWriteQueueFullIs429(t *testing.T) {
	kv := store.NewMemory()
	h := newHarness(t, options{store: busyStore{kv}})
	for _, w := range []struct{ method, path, token, body string }{
		{"POST", "/v1/quota/move", tokMgmt, `{"from":"Quota1.2","to":"Quota1.1","gpus":8}`},
		{"POST", "/v1/reservations", tokTeamB, bookingB},
		{"DELETE", "/v1/reservation/rb", tokTeamB, ""},
	} {
		req, _ := http.NewRequest(w.method, h.url+w.path, strings.NewReader(w.body))
		req.Header.Set("X-Nomad-Token", w.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("%s %s: %d Retry-After %q, want 429 and 1", w.method, w.path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	code, body := h.do(t, "POST", "/v1/reservations", tokTeamB, bookingB)
	if e := errOf(t, body); code != 429 || e.Error != "the broker's store writes are queued full (at most 256 waiting, each at most 10s); nothing was written, try again" {
		t.Errorf("%d %s", code, body)
	}
}
