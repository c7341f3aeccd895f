package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// benchRequest serves one request through the handler (no network), token
// cache warm.
func benchRequest(b *testing.B, method, path, body string) {
	h := newHarness(b, options{staleness: time.Hour})
	handler := h.srv.Handler()
	run := func() int {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("X-Nomad-Token", tokTeamB)
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, req)
		return w.Code
	}
	if code := run(); code != http.StatusOK {
		b.Fatalf("%s %s: %d", method, path, code)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if code := run(); code != http.StatusOK {
			b.Fatalf("%s %s: %d", method, path, code)
		}
	}
}

func BenchmarkQuotas(b *testing.B) { benchRequest(b, "GET", "/v1/quotas", "") }
func BenchmarkQueue(b *testing.B)  { benchRequest(b, "GET", "/v1/queue", "") }
func BenchmarkPreview(b *testing.B) {
	benchRequest(b, "POST", "/v1/plan", `{"Job":{"ID":"probe","Namespace":"workspace-b","Type":"batch","Datacenters":["dc1"],"TaskGroups":[{"Name":"g","Count":2,"Tasks":[{"Name":"t","Resources":{"Devices":[{"Name":"nvidia/gpu","Count":8}]}}]}]}}`)
}
