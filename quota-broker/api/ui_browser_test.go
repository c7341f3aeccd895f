package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// chromiumFlags are the flags of every headless run (no sandbox: CI runs
// as root in a container; no background networking: the test machine has
// no outside network).
var chromiumFlags = []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"}

// chromium runs Debian's chromium with args plus a fresh profile; the
// binary is `chromium` on PATH (installed by .ci/run). Without it the test
// skips, or fails under CI.
func chromium(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("chromium not found under CI (.ci/run installs it): %v", err)
		}
		t.Skipf("chromium not found (apt-get install chromium): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append(append(append([]string{}, chromiumFlags...), "--user-data-dir="+t.TempDir()), args...)
	cmd := exec.CommandContext(ctx, bin, all...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// TestUIChromium loads /ui/ of a broker API server on the reference
// scenario (examples/reference/snapshot.json, memory store, the fake
// Nomad's recorded ACL answers) in headless Chromium, checks the tree's
// numbers, the refresh, the allocations table and a plan warning in the
// DOM it renders, and saves a screenshot to out/ui.png.
//
// Logging in goes through the login form (issue 20): the test serves one
// extra route, GET /test-form/<who>, that only this test has: the very
// form GET /ui/ answers without a session, its token field filled with
// that token (a constant of the test, never in a URL) and a script that
// submits it; the form posts to POST /ui/login, whose cookie the browser
// keeps for the page it is sent on to. The page itself has no script (its
// CSP forbids any); the test's route sets no CSP.
func TestUIChromium(t *testing.T) {
	h := newUIHarness(t, false, func(h *uiHarness, mux *http.ServeMux) {
		mux.HandleFunc("GET /test-form/{who}", func(w http.ResponseWriter, r *http.Request) {
			tok := map[string]string{"team-b": tokTeamB, "mgmt": tokMgmt}[r.PathValue("who")]
			rec := httptest.NewRecorder()
			h.srv.uiLoginForm(rec, http.StatusOK, "")
			form := rec.Body.String()
			filled := strings.Replace(form, `name="token" type="password"`, `name="token" type="password" value="`+tok+`"`, 1)
			if filled == form || !strings.Contains(form, `action="/ui/login"`) {
				http.Error(w, "the login form changed: no token field to fill", http.StatusInternalServerError)
				return
			}
			filled = strings.Replace(filled, "</body>", "<script>document.forms[0].submit()</script></body>", 1)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, filled)
		})
	})
	h.be.mu.Lock()
	p := *h.be.st.Plan
	setWarnings(t, &p, "L1: the tree's nominal 128 exceeds the 120 healthy GPUs")
	h.be.st.Plan = &p
	h.be.mu.Unlock()
	login := func(who string, args ...string) string {
		return chromium(t, append([]string{"--virtual-time-budget=10000"}, append(args, h.ts.URL+"/test-form/"+who)...)...)
	}

	// No session: the login form, no figures.
	if form := chromium(t, "--dump-dom", h.ts.URL+"/ui/"); !strings.Contains(form, `action="/ui/login"`) || strings.Contains(form, `id="quotas"`) {
		t.Errorf("without a session the DOM is not the login form:\n%s", form)
	}

	dom := login("team-b", "--dump-dom")
	if !strings.Contains(dom, `id="quotas"`) {
		t.Fatalf("the dumped DOM has no quota tree (login failed?):\n%s", dom)
	}
	want := apiFigures(QuotaFigures(h.srv.cfg.Backend.State().Snapshot, h.srv.cfg.Backend.State().Plan, h.clock.Now()))
	if d := cmp.Diff(want, pageFigures(t, dom)); d != "" {
		t.Errorf("DOM figures (-api +dom):\n%s", d)
	}
	for _, s := range []string{"Quota1.1", "llama-ft-13b", "rb · workspace-b · 16 GPUs", `id="timeline"`,
		`<meta http-equiv="refresh" content="30">`, `id="allocations"`, `<span id="who">team-b</span>`,
		`<td>hparam-sweep</td><td>trial</td><td>node-09</td><td class="n">1</td><td>idle</td>`} {
		if !strings.Contains(dom, s) {
			t.Errorf("DOM lacks %q", s)
		}
	}
	for _, s := range []string{"secret-c-job", "rc-hidden", tokTeamB} {
		if strings.Contains(dom, s) {
			t.Errorf("DOM shows %q", s)
		}
	}

	outDir, err := filepath.Abs(filepath.FromSlash("../../out"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	png := filepath.Join(outDir, "ui.png")
	_ = os.Remove(png)
	login("team-b", "--screenshot="+png, "--window-size=1400,1600", "--hide-scrollbars")
	fi, err := os.Stat(png)
	if err != nil || fi.Size() < 10_000 {
		t.Fatalf("screenshot %s: %v (size %v), want a PNG of the page", png, err, fi)
	}
	t.Logf("screenshot: %s (%d bytes)", png, fi.Size())

	// The management token, through the form too, sees the plan's warning
	// about the tree (admins only).
	mdom := login("mgmt", "--dump-dom")
	if !strings.Contains(mdom, `<li class="warn">L1: the tree's nominal 128 exceeds the 120 healthy GPUs`) || !strings.Contains(mdom, `<span id="who">root</span>`) {
		t.Errorf("management's DOM lacks the plan warning or the token's name")
	}
	if strings.Contains(dom, "healthy GPUs") {
		t.Errorf("team B sees the tree's warning")
	}

	// The token was in no URL the browser asked for and no log line.
	uris := h.requestURIs()
	if !slices.Contains(uris, "/ui/") || !slices.Contains(uris, "/ui/login") || !slices.Contains(uris, "/test-form/team-b") {
		t.Errorf("the browser's requests %v lack /ui/, /ui/login or /test-form/team-b", uris)
	}
	for _, u := range uris {
		if strings.Contains(u, tokTeamB) {
			t.Errorf("a requested URL holds the token: %s", u)
		}
	}
	if strings.Contains(h.logs.String(), tokTeamB) {
		t.Errorf("a log line holds the token:\n%s", h.logs.String())
	}
}
