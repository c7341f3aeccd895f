package api

import (
	"context"
	"net/http"
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
// numbers in the DOM it renders, and saves a screenshot to out/ui.png.
//
// Logging in: headless Chromium cannot fill and post the login form
// without a script, so the test serves one extra route, GET /test-login,
// that only this test has: it starts a session for team B's token (a
// constant of the test, never in a URL) the way POST /ui/login does, sets
// the same cookie and answers 303 to /ui/. The login form itself is
// covered by the httptest unit tests (TestUILoginCookie and others).
func TestUIChromium(t *testing.T) {
	h := newUIHarness(t, false, func(h *uiHarness, mux *http.ServeMux) {
		mux.HandleFunc("GET /test-login", func(w http.ResponseWriter, r *http.Request) {
			now := h.clock.Now()
			id := h.srv.ui.start(tokTeamB, "acc-team-b", now, now.Add(SessionTTL))
			http.SetCookie(w, sessionCookie(r, id, int(SessionTTL/time.Second)))
			http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		})
	})

	// No session: the login form, no figures.
	if form := chromium(t, "--dump-dom", h.ts.URL+"/ui/"); !strings.Contains(form, `action="/ui/login"`) || strings.Contains(form, `id="quotas"`) {
		t.Errorf("without a session the DOM is not the login form:\n%s", form)
	}

	dom := chromium(t, "--dump-dom", h.ts.URL+"/test-login")
	if !strings.Contains(dom, `id="quotas"`) {
		t.Fatalf("the dumped DOM has no quota tree (login failed?):\n%s", dom)
	}
	want := apiFigures(QuotaFigures(h.srv.cfg.Backend.State().Snapshot, h.srv.cfg.Backend.State().Plan, h.clock.Now()))
	if d := cmp.Diff(want, pageFigures(t, dom)); d != "" {
		t.Errorf("DOM figures (-api +dom):\n%s", d)
	}
	for _, s := range []string{"Quota1.1", "llama-ft-13b", "rb · workspace-b · 16 GPUs", `id="timeline"`} {
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
	chromium(t, "--screenshot="+png, "--window-size=1280,900", "--hide-scrollbars", h.ts.URL+"/test-login")
	fi, err := os.Stat(png)
	if err != nil || fi.Size() < 10_000 {
		t.Fatalf("screenshot %s: %v (size %v), want a PNG of the page", png, err, fi)
	}
	t.Logf("screenshot: %s (%d bytes)", png, fi.Size())

	// The token was in no URL the browser asked for and no log line.
	uris := h.requestURIs()
	if !slices.Contains(uris, "/ui/") || !slices.Contains(uris, "/test-login") {
		t.Errorf("the browser's requests %v lack /ui/ or /test-login", uris)
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
