package api

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestEveryV1AnswerIsJSONNoStore (attack on issue 16): every answer under
// /v1/ but the metrics is JSON with Cache-Control: no-store, refusals
// included (400, 403, 404, 405, 409, 413), for odd paths (encoded slashes,
// "..", long and control-character names, unknown methods), and none
// drops the connection (a handler panic would).
func TestEveryV1AnswerIsJSONNoStore(t *testing.T) {
	h := newHarness(t, options{})
	long := strings.Repeat("x", 8000)
	paths := []string{
		"/v1/quotas", "/v1/queue", "/v1/queue?namespace=%00", "/v1/preemptions?since=-1h", "/v1/preemptions?since=" + long,
		"/v1/plan", "/v1/snapshot", "/v1/idle-fit", "/v1/idle-fit?namespace=workspace-c", "/v1/reservations?namespace=x",
		"/v1/reservation/rc", "/v1/reservation/" + long, "/v1/reservation/%2e%2e", "/v1/reservation/a%2Fb", "/v1/reservation/%E2%80%AE",
		"/v1/job/workspace-b/llama-ft-13b", "/v1/job/workspace-b%2F..%2Fworkspace-c/x", "/v1/job/%2e%2e/x", "/v1/job/workspace-b/" + long,
		"/v1/job/workspace-b/a%00b", "/v1/job/workspace-b", "/v1/job/workspace-b/x/y", "/v1/quota/Quota1.1", "/v1/quota/%0a",
		"/v1/agent/health", "/v1/nope", "/v1/", "/v1/quota/move", "/v1/reservation/rc?force=maybe",
	}
	methods := []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"}
	for _, tok := range []string{"", tokTeamB, tokMgmt} {
		for _, p := range paths {
			for _, m := range methods {
				req, err := http.NewRequest(m, h.url+p, strings.NewReader(`{"x":1}`))
				if err != nil {
					t.Fatal(err)
				}
				if tok != "" {
					req.Header.Set("X-Nomad-Token", tok)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Errorf("%s %.80s (token %.8s): %v", m, p, tok, err)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode >= 300 && resp.StatusCode < 400 {
					continue // the mux's redirect of an unclean path: no data
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" || resp.Header.Get("Cache-Control") != "no-store" {
					t.Errorf("%s %.80s (token %.8s): %d Content-Type %q Cache-Control %q", m, p, tok, resp.StatusCode, ct, resp.Header.Get("Cache-Control"))
				}
				if resp.StatusCode >= 500 {
					t.Errorf("%s %.80s (token %.8s): %d", m, p, tok, resp.StatusCode)
				}
			}
		}
	}
}
