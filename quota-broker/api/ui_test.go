package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/acl"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/store"
)

// testClock is a settable clock shared by the server and its resolver.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// revocable wraps a resolver: a revoked token is refused as Nomad refuses
// an unknown one (acl.ErrDenied).
type revocable struct {
	Resolver
	mu      sync.Mutex
	revoked map[string]bool
}

func (r *revocable) revoke(tok string) { r.mu.Lock(); r.revoked[tok] = true; r.mu.Unlock() }

func (r *revocable) Resolve(ctx context.Context, tok string) (*acl.Authorizer, error) {
	r.mu.Lock()
	gone := r.revoked[tok]
	r.mu.Unlock()
	if gone {
		return nil, &acl.Error{Kind: acl.ErrDenied, Op: "token", Msg: "ACL token not found"}
	}
	return r.Resolver.Resolve(ctx, tok)
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type uiHarness struct {
	srv   *Server
	be    *fakeBackend
	ts    *httptest.Server
	clock *testClock
	res   *revocable
	logs  *syncBuffer

	mu   sync.Mutex
	urls []string // every request URI the server received
}

// requestURIs returns the request URIs the server received so far.
func (h *uiHarness) requestURIs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.urls...)
}

// The recorded preemptions of the UI tests: one of workspace-b and one of
// workspace-c within the last 24 h, one of workspace-b 2 days ago.
var uiPreemptions = []store.Preemption{
	{At: clock.Add(-48 * time.Hour), Alloc: "old-alloc", Namespace: "workspace-b", Job: "old-job", GPUs: 8, Rule: "L3"},
	{At: clock.Add(-2 * time.Hour), Alloc: "c-alloc-1", Namespace: "workspace-c", Job: "secret-c-job", GPUs: 16, For: "workspace-a/chat", Rule: "L3"},
	{At: clock.Add(-1 * time.Hour), Alloc: "b-alloc-1", Namespace: "workspace-b", Job: "b-batch", GPUs: 8, For: "workspace-a/chat", Rule: "L3"},
}

// newUIHarness serves the reference scenario (examples/reference) with
// the fake Nomad's tokens, a settable clock, a bookings of team B (rb) and
// of team C (rc-hidden), and a log sink.
// extra adds routes beside the server's (the browser test's login
// helper).
func newUIHarness(t testing.TB, tlsServer bool, extra ...func(h *uiHarness, mux *http.ServeMux)) *uiHarness {
	t.Helper()
	clk := &testClock{t: clock}
	nomadSrv := httptest.NewServer(&fakeNomad{})
	t.Cleanup(nomadSrv.Close)
	inner, err := acl.NewResolver(acl.Config{Address: nomadSrv.URL, AdminPolicy: "gputide-admin", AdminToken: adminTok, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	res := &revocable{Resolver: inner, revoked: map[string]bool{}}
	kv := store.NewMemory()
	st := referenceState(t)
	if _, _, err := kv.SeedTree(context.Background(), store.TreeRecord{Root: st.Snapshot.Quota.Clone(), Settings: st.Snapshot.Settings}); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	be := &fakeBackend{st: st, leader: true}
	srv, err := NewServer(Config{Backend: be, Store: kv, Resolver: res, QuotaWrites: true,
		Now: clk.Now, Random: repeat{1, 2, 3, 4},
		Preemptions: func(context.Context) ([]store.Preemption, error) { return uiPreemptions, nil },
		Logger:      hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})})
	if err != nil {
		t.Fatal(err)
	}
	h := &uiHarness{srv: srv, be: be, clock: clk, res: res, logs: logs}
	mux := http.NewServeMux()
	mux.Handle("/", srv.Handler())
	for _, f := range extra {
		f(h, mux)
	}
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.urls = append(h.urls, r.RequestURI)
		h.mu.Unlock()
		mux.ServeHTTP(w, r)
	})
	if tlsServer {
		h.ts = httptest.NewTLSServer(record)
	} else {
		h.ts = httptest.NewServer(record)
	}
	ts := h.ts
	t.Cleanup(ts.Close)
	for tok, body := range map[string]string{
		tokTeamB: `{"namespace":"workspace-b","gpus":16,"start":"2026-12-03T00:00:00Z","duration":"48h","id":"rb"}`,
		tokTeamC: `{"namespace":"workspace-c","gpus":8,"start":"2026-12-05T00:00:00Z","duration":"24h","id":"rc-hidden"}`,
	} {
		req, _ := http.NewRequest("POST", ts.URL+"/v1/reservations", strings.NewReader(body))
		req.Header.Set("X-Nomad-Token", tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("booking %s: %d %s", body, resp.StatusCode, out)
		}
	}
	return h
}

// seen records every URL requested and every response header of a
// client: the token must be in none of them.
type seen struct {
	mu   sync.Mutex
	urls []string
	hdrs []string
}

func (s *seen) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.urls = append(s.urls, req.URL.String())
	s.mu.Unlock()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		s.mu.Lock()
		for k, vs := range resp.Header {
			s.hdrs = append(s.hdrs, k+": "+strings.Join(vs, ", "))
		}
		s.mu.Unlock()
	}
	return resp, err
}

// browser is a client with a cookie jar that does not follow redirects.
func (h *uiHarness) browser(t testing.TB, rt http.RoundTripper) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if rt == nil {
		rt = h.ts.Client().Transport
	}
	return &http.Client{Jar: jar, Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func send(t testing.TB, c *http.Client, method, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

func (h *uiHarness) login(t testing.TB, c *http.Client, tok string) *http.Response {
	t.Helper()
	resp, body := send(t, c, "POST", h.ts.URL+"/ui/login", url.Values{"token": {tok}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("login: %d Location %q, want 303 to /ui/: %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	return resp
}

const loginMarker = `action="/ui/login"`

func TestUILoginCookie(t *testing.T) {
	for _, tlsServer := range []bool{false, true} {
		t.Run("tls="+strconv.FormatBool(tlsServer), func(t *testing.T) {
			h := newUIHarness(t, tlsServer)
			resp := h.login(t, h.browser(t, nil), tokTeamB)
			cks := resp.Cookies()
			if len(cks) != 1 {
				t.Fatalf("cookies %v, want one", cks)
			}
			ck := cks[0]
			raw, err := base64.RawURLEncoding.DecodeString(ck.Value)
			if err != nil || len(raw) != 32 {
				t.Errorf("session ID %q: %d bytes (%v), want 32 random bytes base64url", ck.Value, len(raw), err)
			}
			got := struct {
				Name, Path       string
				MaxAge           int
				HttpOnly, Secure bool
				SameSite         http.SameSite
			}{ck.Name, ck.Path, ck.MaxAge, ck.HttpOnly, ck.Secure, ck.SameSite}
			want := got
			want.Name, want.Path, want.MaxAge, want.HttpOnly, want.Secure, want.SameSite =
				"gputide_session", "/ui/", 8*3600, true, tlsServer, http.SameSiteStrictMode
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("cookie (-want +got):\n%s", d)
			}
			// Two logins never share an ID.
			if other := h.login(t, h.browser(t, nil), tokTeamB).Cookies()[0].Value; other == ck.Value {
				t.Errorf("two logins got the same session ID %q", other)
			}
			// A new login from a browser with a session replaces it.
			c := h.browser(t, nil)
			first := h.login(t, c, tokTeamB).Cookies()[0].Value
			h.login(t, c, tokMgmt)
			if _, ok := h.srv.ui.get(first, h.clock.Now()); ok {
				t.Errorf("the session before a new login lives on")
			}
		})
	}
}

func TestUINoSession(t *testing.T) {
	h := newUIHarness(t, false)
	c := h.browser(t, nil)
	for _, tc := range []struct {
		name, method, path string
		cookie             string
		status             int
		has                string
	}{
		{"no cookie", "GET", "/ui/", "", 200, loginMarker},
		{"unknown session", "GET", "/ui/", strings.Repeat("A", 43), 200, loginMarker},
		{"malformed session", "GET", "/ui/", "x", 200, loginMarker},
		{"token in the URL is ignored", "GET", "/ui/?token=" + tokTeamB, "", 200, loginMarker},
		{"GET login", "GET", "/ui/login?token=" + tokTeamB, "", 405, "POST only"},
		{"GET logout", "GET", "/ui/logout", "", 405, "POST only"},
		{"no page", "GET", "/ui/nothing", "", 404, "no page /ui/nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, h.ts.URL+tc.path, nil)
			if tc.cookie != "" {
				req.AddCookie(&http.Cookie{Name: SessionCookie, Value: tc.cookie})
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.has) {
				t.Errorf("%s %s: %d, want %d with %q:\n%s", tc.method, tc.path, resp.StatusCode, tc.status, tc.has, body)
			}
			if strings.Contains(string(body), `id="quotas"`) {
				t.Errorf("%s %s without a session shows the tree", tc.method, tc.path)
			}
		})
	}
	for _, tok := range []string{"", "not-a-token", tokTeamB + " x"} {
		resp, body := send(t, c, "POST", h.ts.URL+"/ui/login", url.Values{"token": {tok}})
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, loginMarker) || len(resp.Cookies()) != 0 {
			t.Errorf("login with %q: %d, cookies %v, want 403 and the form again:\n%s", tok, resp.StatusCode, resp.Cookies(), body)
		}
	}
}

var (
	quotaRow  = regexp.MustCompile(`(?s)<tr id="quota-([^"]+)">(.*?)</tr>`)
	quotaCell = regexp.MustCompile(`<td class="n ([a-z]+)-gpus">(\d+)</td>`)
)

// pageFigures reads the tree's numbers off a page: quota -> figure -> GPUs.
func pageFigures(t testing.TB, page string) map[string]map[string]int {
	t.Helper()
	out := map[string]map[string]int{}
	for _, row := range quotaRow.FindAllStringSubmatch(page, -1) {
		m := map[string]int{}
		for _, c := range quotaCell.FindAllStringSubmatch(row[2], -1) {
			n, _ := strconv.Atoi(c[2])
			m[c[1]] = n
		}
		out[row[1]] = m
	}
	return out
}

// apiFigures gives the same numbers from GET /v1/quotas.
func apiFigures(qs []Quota) map[string]map[string]int {
	out := map[string]map[string]int{}
	for _, q := range qs {
		out[q.Name] = map[string]int{"nominal": q.NominalGPUs, "used": q.UsedGPUs, "nonidle": q.NonidleGPUs,
			"borrowed": q.BorrowedGPUs, "debt": q.DebtGPUs, "displaced": q.DisplacedGPUs, "lendable": q.LendableGPUs,
			"booked": q.BookedGPUs, "queued": q.QueuedGPUs, "stopping": q.StoppingGPUs}
	}
	return out
}

func TestUIPage(t *testing.T) {
	h := newUIHarness(t, false)
	c := h.browser(t, nil)
	h.login(t, c, tokTeamB)
	resp, page := send(t, c, "GET", h.ts.URL+"/ui/", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("page: %d\n%s", resp.StatusCode, page)
	}
	// The tree: the API's own numbers, every node, parents first.
	req, _ := http.NewRequest("GET", h.ts.URL+"/v1/quotas", nil)
	req.Header.Set("X-Nomad-Token", tokTeamB)
	aresp, err := h.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var qr QuotasResponse
	if err := json.NewDecoder(aresp.Body).Decode(&qr); err != nil {
		t.Fatal(err)
	}
	aresp.Body.Close()
	got := pageFigures(t, page)
	if d := cmp.Diff(apiFigures(qr.Quotas), got); d != "" {
		t.Errorf("page figures (-api +page):\n%s", d)
	}
	want := map[string]int{"nominal": 128}
	if d := cmp.Diff(want["nominal"], got["Quota1"]["nominal"]); d != "" || len(got) != 3 {
		t.Errorf("Quota1 nominal (-want +got): %s; %d nodes, want 3", d, len(got))
	}
	// Booked now: none (rb starts 2026-12-03); queued: 16 in Quota1.1
	// (llama-ft-13b 2 x 8), 32 in Quota1 (chat 2 x 8 too).
	if d := cmp.Diff(map[string]int{"Quota1": 32, "Quota1.1": 16, "Quota1.2": 0},
		map[string]int{"Quota1": got["Quota1"]["queued"], "Quota1.1": got["Quota1.1"]["queued"], "Quota1.2": got["Quota1.2"]["queued"]}); d != "" {
		t.Errorf("queued (-want +got):\n%s", d)
	}
	// Redaction as the API: team B reads workspace-b only.
	for _, s := range []string{"llama-ft-13b", "b-batch", "b-alloc-1", `rb · workspace-b · 16 GPUs`, `id="hidden-bookings"`, "Log out",
		// issue 20: the refresh, the token's name, the allocations, the
		// 48 h timeline with the 8 weeks a click away.
		`<meta http-equiv="refresh" content="30">`, `<span id="who">team-b</span>`, `id="allocations"`,
		`<tr class="workspace" id="ws-workspace-a"><td class="ws" colspan="10">workspace-a <span class="muted">· Quota1 · 20 GPUs · quota borrowed 0, debt 0, displaced 0 · allocations hidden (no read-job)</span>`,
		`<td>hparam-sweep</td><td>trial</td><td>node-09</td><td class="n">1</td><td>idle</td><td></td><td></td><td>L5.1: idle allocation of Quota1.1 reclaimed for Quota1</td><td class="n">1h50m0s</td>`,
		`Bookings, next 48 hours`, `<a id="zoom" href="/ui/?span=8w">show the next 8 weeks</a>`} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	for _, s := range []string{">chat<", "secret-c-job", "c-alloc-1", "rc-hidden", "old-job", tokTeamB} {
		if strings.Contains(page, s) {
			t.Errorf("page shows %q", s)
		}
	}
	// Newest first: b-batch (1 h ago) before the hidden workspace-c stop.
	if i, j := strings.Index(page, "b-batch"), strings.Index(page, "<td>workspace-c</td>"); i < 0 || j < 0 || i > j {
		t.Errorf("preemptions not newest first (b-batch at %d, workspace-c at %d)", i, j)
	}
	// The management token reads all.
	m := h.browser(t, nil)
	h.login(t, m, tokMgmt)
	_, all := send(t, m, "GET", h.ts.URL+"/ui/", nil)
	if strings.Contains(all, "rc-hidden") || strings.Contains(all, "acc-mgmt") || !strings.Contains(all, `<span id="who">root</span>`) {
		t.Errorf("management's default page shows a booking 4 days ahead, or not the token's name")
	}
	_, all = send(t, m, "GET", h.ts.URL+"/ui/?span=8w", nil)
	for _, s := range []string{">chat<", "secret-c-job", "rc-hidden · workspace-c · 8 GPUs", "Bookings, next 8 weeks", `href="/ui/?span=48h"`} {
		if !strings.Contains(all, s) {
			t.Errorf("management page lacks %q", s)
		}
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Errorf("page has a script or an external reference")
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
}

// The token is in no URL, no response header and no log line, through a
// whole session (login, page, logout, page).
func TestUITokenNeverExposed(t *testing.T) {
	h := newUIHarness(t, false)
	rec := &seen{}
	c := h.browser(t, rec)
	login := h.login(t, c, tokTeamB)
	id := login.Cookies()[0].Value
	send(t, c, "GET", h.ts.URL+"/ui/", nil)
	send(t, c, "POST", h.ts.URL+"/ui/logout", url.Values{})
	send(t, c, "GET", h.ts.URL+"/ui/", nil)
	send(t, c, "POST", h.ts.URL+"/ui/login", url.Values{"token": {tokTeamC + "x"}}) // refused
	for _, u := range rec.urls {
		if strings.Contains(u, tokTeamB) || strings.Contains(u, tokTeamC) {
			t.Errorf("a URL holds the token: %s", u)
		}
	}
	for _, hd := range rec.hdrs {
		if strings.Contains(hd, tokTeamB) || strings.Contains(hd, tokTeamC) {
			t.Errorf("a response header holds the token: %s", hd)
		}
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "ui: session started") || !strings.Contains(logs, "acc-team-b") {
		t.Errorf("logs lack the login by its accessor:\n%s", logs)
	}
	for _, secret := range []string{tokTeamB, tokTeamC, id} {
		if strings.Contains(logs, secret) {
			t.Errorf("a log line holds %q:\n%s", secret, logs)
		}
	}
}

func TestUILogout(t *testing.T) {
	h := newUIHarness(t, false)
	c := h.browser(t, nil)
	id := h.login(t, c, tokTeamB).Cookies()[0].Value
	resp, _ := send(t, c, "POST", h.ts.URL+"/ui/logout", url.Values{})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("logout: %d to %q, want 303 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	if cks := resp.Cookies(); len(cks) != 1 || cks[0].MaxAge >= 0 || cks[0].Value != "" {
		t.Errorf("logout cookies %v, want the session cookie deleted", cks)
	}
	// The old ID, replayed, no longer opens the page.
	req, _ := http.NewRequest("GET", h.ts.URL+"/ui/", nil)
	req.AddCookie(&http.Cookie{Name: SessionCookie, Value: id})
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	if !strings.Contains(string(body), loginMarker) || strings.Contains(string(body), `id="quotas"`) {
		t.Errorf("the logged-out session still opens the page:\n%s", body)
	}
}

func TestUISessionEnds(t *testing.T) {
	h := newUIHarness(t, false)
	page := func(c *http.Client) (int, string) {
		resp, body := send(t, c, "GET", h.ts.URL+"/ui/", nil)
		return resp.StatusCode, body
	}
	c := h.browser(t, nil)
	h.login(t, c, tokTeamB)
	h.clock.Add(SessionTTL - time.Second)
	if _, body := page(c); !strings.Contains(body, `id="quotas"`) {
		t.Fatalf("at 8 h less 1 s the session is over:\n%s", body)
	}
	h.clock.Add(time.Second)
	if _, body := page(c); !strings.Contains(body, loginMarker) || strings.Contains(body, `id="quotas"`) {
		t.Errorf("at 8 h the session still shows the page:\n%s", body)
	}

	// A token that stops resolving ends its session at once.
	h2 := newUIHarness(t, false)
	c2 := h2.browser(t, nil)
	h2.login(t, c2, tokTeamC)
	h2.res.revoke(tokTeamC)
	resp, body := send(t, c2, "GET", h2.ts.URL+"/ui/", nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "your session ended") || strings.Contains(body, `id="quotas"`) {
		t.Errorf("revoked token: %d\n%s", resp.StatusCode, body)
	}
	n := 0
	h2.srv.ui.mu.Lock()
	n = len(h2.srv.ui.m)
	h2.srv.ui.mu.Unlock()
	if n != 0 {
		t.Errorf("%d sessions left after the token was revoked, want 0", n)
	}
}

func TestUISessionTableBound(t *testing.T) {
	u := newUISessions()
	now := clock
	first := u.start("t0", "a0", now, now.Add(time.Hour))
	for i := 1; i < MaxSessions+5; i++ {
		u.start("t"+strconv.Itoa(i), "a", now, now.Add(SessionTTL+time.Duration(i)*time.Second))
	}
	if len(u.m) != MaxSessions {
		t.Errorf("%d sessions, want the bound %d", len(u.m), MaxSessions)
	}
	if _, ok := u.get(first, now); ok {
		t.Errorf("the session nearest its end survived a full table")
	}
}

func TestUITimelineAndBars(t *testing.T) {
	at := func(h int) *time.Time { v := clock.Add(time.Duration(h) * time.Hour); return &v }
	list := []ReservationEntry{
		{Namespace: "workspace-b", GPUs: 16, ID: "late", Start: at(24 * 13), End: at(24 * 20)},
		{Namespace: "workspace-b", GPUs: 8, ID: "two-days", Start: at(24), End: at(72)},
		{Namespace: "workspace-c", GPUs: 8, ID: "running-with-a-long-booking-id", Start: at(-5), End: at(12)},
	}
	type box struct {
		ID          string
		X, Width, Y int
		Label       string
	}
	boxes := func(tl uiTimeline) []box {
		var got []box
		for _, r := range tl.Rows {
			got = append(got, box{r.ID, r.X, r.Width, r.Y, r.Label})
		}
		return got
	}
	// The default zoom (issue 20): the next 48 hours on 960 px after a
	// 220 px label column; rows by start, 22 px apart below a 24 px head;
	// boxes clipped to [now, now+48 h]; a label cut to 32 characters so
	// that it ends before the axis.
	zoom, other := uiSpanOf("")
	if zoom.Param != "48h" || other.Param != "8w" {
		t.Fatalf("default zoom %q, the other %q", zoom.Param, other.Param)
	}
	tl := uiTimelineOf(list, clock, zoom)
	want := []box{{"running-with-a-long-booking-id", 220, 240, 24, "running-with-a-long-booking-id…"},
		{"two-days", 700, 480, 46, "two-days · workspace-b · 8 GPUs"}, {"late", 1180, 2, 68, "late · workspace-b · 16 GPUs"}}
	if d := cmp.Diff(want, boxes(tl)); d != "" {
		t.Errorf("48 h timeline boxes (-want +got):\n%s", d)
	}
	if tl.Width != 220+960 || tl.Height != 24+3*22 {
		t.Errorf("timeline %dx%d, want %dx%d", tl.Width, tl.Height, 220+960, 24+3*22)
	}
	// clock is Tue 08:00:05 UTC: grid lines every 6 h from 12:00 (79.99
	// px, truncated) to Thu 00:00 (Thu 06:00, 41 px before the end, would
	// be cut off).
	if len(tl.Days) != 8 || tl.Days[0].Label != "now" || tl.Days[1] != (uiDay{X: 220 + 79, Label: "Tue 12:00"}) || tl.Days[7].Label != "Thu 00:00" {
		t.Errorf("48 h timeline lines %+v", tl.Days)
	}
	// ?span=8w: 8 weeks, a line each Monday.
	zoom, other = uiSpanOf("8w")
	tl = uiTimelineOf(list, clock, zoom)
	want = []box{{"running-with-a-long-booking-id", 220, 8, 24, "running-with-a-long-booking-id…"},
		{"two-days", 237, 34, 46, "two-days · workspace-b · 8 GPUs"}, {"late", 442, 120, 68, "late · workspace-b · 16 GPUs"}}
	if d := cmp.Diff(want, boxes(tl)); d != "" || other.Param != "48h" {
		t.Errorf("8 week timeline boxes (-want +got):\n%s", d)
	}
	if len(tl.Days) != 8 || tl.Days[1] != (uiDay{X: 220 + 97, Label: "Mon 07 Dec"}) || tl.Days[7].Label != "Mon 18 Jan" {
		t.Errorf("8 week timeline lines %+v", tl.Days)
	}
	for _, c := range []struct{ gpus, nominal, want int }{
		{0, 48, 0}, {40, 48, 200}, {48, 48, 240}, {60, 48, 240}, {1, 1000, 1}, {3, 0, 240},
	} {
		if got := barWidth(c.gpus, c.nominal); got != c.want {
			t.Errorf("barWidth(%d, %d) = %d, want %d", c.gpus, c.nominal, got, c.want)
		}
	}
}

// No state yet: the page says so (503) and shows no figures; the session
// stays.
func TestUINoState(t *testing.T) {
	h := newUIHarness(t, false)
	c := h.browser(t, nil)
	h.login(t, c, tokTeamB)
	h.be.mu.Lock()
	h.be.st = BrokerState{}
	h.be.mu.Unlock()
	resp, body := send(t, c, "GET", h.ts.URL+"/ui/", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "the broker has no cluster state yet") ||
		strings.Contains(body, `id="quotas"`) || !strings.Contains(body, "Log out") {
		t.Errorf("no state: %d\n%s", resp.StatusCode, body)
	}
}

// One token holds at most MaxSessionsPerToken sessions: a login past it
// ends that token's oldest session, never another token's (issue 16:
// 10,000 logins with one token ended every other session).
func TestUISessionsPerToken(t *testing.T) {
	u := newUISessions()
	now := clock
	other := u.start("token-c", "acc-c", now, now.Add(SessionTTL))
	var ids []string
	for i := range MaxSessionsPerToken + 4 {
		at := now.Add(time.Duration(i) * time.Second)
		ids = append(ids, u.start("token-b", "acc-b", at, at.Add(SessionTTL)))
	}
	if n := len(u.m); n != MaxSessionsPerToken+1 {
		t.Errorf("%d sessions, want %d of token-b and 1 of token-c", n, MaxSessionsPerToken+1)
	}
	for i, id := range ids {
		if _, ok := u.get(id, now); ok != (i >= 4) {
			t.Errorf("token-b's login %d: live %t, want %t (the 4 oldest end)", i, ok, i >= 4)
		}
	}
	if _, ok := u.get(other, now); !ok {
		t.Error("token-c's session ended by token-b's logins")
	}
	// 200 logins with one token through the page: the other token's
	// session lives on.
	h := newUIHarness(t, false)
	c := h.browser(t, nil)
	keep := h.login(t, c, tokTeamC).Cookies()[0].Value
	for range 200 {
		h.login(t, h.browser(t, nil), tokTeamB)
	}
	if _, ok := h.srv.ui.get(keep, h.clock.Now()); !ok {
		t.Error("team C's session ended by team B's logins")
	}
	h.srv.ui.mu.Lock()
	n := len(h.srv.ui.m)
	h.srv.ui.mu.Unlock()
	if n != MaxSessionsPerToken+1 {
		t.Errorf("%d sessions after 200 logins of one token and 1 of another, want %d", n, MaxSessionsPerToken+1)
	}
}

// A login posted from another site is refused (login CSRF, issue 16): an
// Origin header that is not the page's own host, or Sec-Fetch-Site:
// cross-site. The page's own form (same Origin, same-origin) logs in, and
// so does a client that sends neither header (curl, the CLI's tests).
func TestUILoginCrossSite(t *testing.T) {
	h := newUIHarness(t, false)
	host := strings.TrimPrefix(h.ts.URL, "http://")
	for _, tc := range []struct {
		origin, fetchSite string
		want              int
	}{
		{"https://evil.example", "", 403},
		{"http://" + host + ".evil.example", "", 403},
		{"null", "", 403},
		{"", "cross-site", 403},
		{"http://" + host, "cross-site", 403},
		{"http://" + host, "same-origin", 303},
		{"http://" + strings.ToUpper(host), "", 303},
		{"", "same-origin", 303},
		{"", "none", 303},
		{"", "", 303},
	} {
		req, err := http.NewRequest("POST", h.ts.URL+"/ui/login", strings.NewReader(url.Values{"token": {tokTeamB}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		if tc.fetchSite != "" {
			req.Header.Set("Sec-Fetch-Site", tc.fetchSite)
		}
		resp, err := h.browser(t, nil).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Origin %q Sec-Fetch-Site %q: %d, want %d", tc.origin, tc.fetchSite, resp.StatusCode, tc.want)
		}
		if tc.want == 403 && (len(resp.Cookies()) != 0 || !strings.Contains(string(body), "login refused: the form was not posted from this page")) {
			t.Errorf("Origin %q Sec-Fetch-Site %q: cookies %v, body %s; want no cookie and the refusal", tc.origin, tc.fetchSite, resp.Cookies(), body)
		}
	}
	h.srv.ui.mu.Lock()
	n := len(h.srv.ui.m)
	h.srv.ui.mu.Unlock()
	if n != 5 {
		t.Errorf("%d sessions, want the 5 same-site logins", n)
	}
}

// TestUIPageFlavors: with several flavors the tree table has a flavor
// column and one row per node and flavor, IDs naming the flavor, each
// row the API's figures of that flavor (DESIGN L13, issue 17 item 5).
func TestUIPageFlavors(t *testing.T) {
	h := newUIHarness(t, false)
	h.be.mu.Lock()
	snap := *h.be.st.Snapshot
	snap.Quota = snap.Quota.Clone()
	snap.Quota.Flavors = []quota.Flavor{{Name: "h100", Models: []string{"NVIDIA H100 80GB HBM3"}}, {Name: "a100", Models: []string{"NVIDIA A100-SXM4-80GB"}}}
	nominal := map[string]quota.Nominal{"Quota1": {"h100": 64, "a100": 64}, "Quota1.1": {"h100": 16, "a100": 32}, "Quota1.2": {"h100": 48, "a100": 32}}
	snap.Quota.Walk(func(n *quota.Node) { n.GPUs = nominal[n.Name] })
	// node-01's GPUs cut into MIG slices: of no flavor (ungoverned).
	snap.Nodes = slices.Clone(snap.Nodes)
	snap.Nodes[0].GPUs = slices.Clone(snap.Nodes[0].GPUs)
	for k := range snap.Nodes[0].GPUs {
		snap.Nodes[0].GPUs[k].MIGProfile = "1g.10gb"
	}
	p := *h.be.st.Plan
	p.Usage = nil
	for _, name := range []string{"Quota1", "Quota1.1", "Quota1.2"} {
		p.Usage = append(p.Usage,
			plan.Usage{Quota: name, Flavor: "h100", Nominal: nominal[name]["h100"], Used: 7, NonIdle: 5},
			plan.Usage{Quota: name, Flavor: "a100", Nominal: nominal[name]["a100"], Used: 3, Lendable: 2})
	}
	h.be.st.Snapshot, h.be.st.Plan = &snap, &p
	h.be.mu.Unlock()

	c := h.browser(t, nil)
	h.login(t, c, tokTeamB)
	resp, page := send(t, c, "GET", h.ts.URL+"/ui/", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("page: %d\n%s", resp.StatusCode, page)
	}
	req, _ := http.NewRequest("GET", h.ts.URL+"/v1/quotas", nil)
	req.Header.Set("X-Nomad-Token", tokTeamB)
	aresp, err := h.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var qr QuotasResponse
	if err := json.NewDecoder(aresp.Body).Decode(&qr); err != nil {
		t.Fatal(err)
	}
	aresp.Body.Close()
	if len(qr.Quotas) != 6 {
		t.Fatalf("/v1/quotas: %d entries, want 6 (3 nodes x 2 flavors)", len(qr.Quotas))
	}
	api := map[string]map[string]int{}
	for _, q := range qr.Quotas {
		api[q.Name+"-"+q.Flavor] = apiFigures([]Quota{q})[q.Name]
	}
	got := pageFigures(t, page)
	if d := cmp.Diff(api, got); d != "" {
		t.Errorf("page figures per flavor (-api +page):\n%s", d)
	}
	if d := cmp.Diff(map[string]int{"Quota1.1-h100": 16, "Quota1.1-a100": 32},
		map[string]int{"Quota1.1-h100": got["Quota1.1-h100"]["nominal"], "Quota1.1-a100": got["Quota1.1-a100"]["nominal"]}); d != "" {
		t.Errorf("Quota1.1 nominals (-want +got):\n%s", d)
	}
	// node-01's slices are listed as ungoverned, with the reason.
	for _, s := range []string{`<th>flavor</th>`, `<td class="flavor">a100</td>`, `aria-label="Quota1.2 h100 bars"`, `<table id="ungoverned">`,
		`<td>node-01</td><td>NVIDIA H100 80GB HBM3 MIG 1g.10gb</td><td class="n">8</td><td>model &#34;NVIDIA H100 80GB HBM3&#34; with mig_profile &#34;1g.10gb&#34; is in no flavor of the tree (h100, a100)</td>`} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
}
