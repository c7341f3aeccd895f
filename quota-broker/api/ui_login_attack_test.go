package api

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// More cross-site logins (issue 16's login CSRF): another port, an IPv6
// literal, a userinfo trick, a second Origin after a good one, an
// "Origin" with a path on another host; all refused, no cookie.
func TestUILoginCrossSiteVariants(t *testing.T) {
	h := newUIHarness(t, false)
	host := strings.TrimPrefix(h.ts.URL, "http://")
	hostname, _, _ := strings.Cut(host, ":")
	for _, origin := range []string{
		"http://" + hostname + ":1",
		"http://" + hostname,
		"http://[::1]:" + strings.SplitN(host, ":", 2)[1],
		"http://" + host + "@evil.example",
		"http://evil.example/" + host,
		"http://evil.example?" + host,
		"null ",
		"http://" + host + ".",
	} {
		req, err := http.NewRequest("POST", h.ts.URL+"/ui/login", strings.NewReader(url.Values{"token": {tokTeamB}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := h.browser(t, nil).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Errorf("Origin %q: %d, cookies %v; want 403 and none", origin, resp.StatusCode, resp.Cookies())
		}
	}
}
