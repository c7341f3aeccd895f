package api

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gputide/gputide/quota-broker/acl"
)

// The status page /ui/ (issue 10 item 7, DESIGN §9): read-only, rendered on
// the server with html/template, no script and no external resource. Its
// data are the JSON API's own (QuotaFigures, queueOf, preemptionsOf,
// reservationsOf) and its rights the API's (callerOf), so it redacts
// exactly as the API does.
//
// Sessions: POST /ui/login takes the token from a form body (never a URL),
// resolves it like any API request, and answers 303 to /ui/ with a cookie
// holding a random session ID (32 bytes of crypto/rand); the server maps
// the ID to the token. A session ends after SessionTTL, when the token no
// longer resolves (Nomad answers it as unknown or expired: ErrDenied), or
// with POST /ui/logout. The cookie is HttpOnly and SameSite=Strict (Secure
// under TLS): a cross-site form cannot carry it, which is the page's CSRF
// defence (login and logout are POST; the page writes nothing). A login
// itself is refused when it comes from another site (crossSite: Origin,
// Sec-Fetch-Site), and one token holds at most MaxSessionsPerToken
// sessions.

const (
	// SessionTTL is how long a /ui/ session lives after its login.
	SessionTTL = 8 * time.Hour
	// SessionCookie is the name of the session cookie (path /ui/).
	SessionCookie = "gputide_session"
	// MaxSessions bounds the session table; a login past it drops the
	// session nearest its end.
	MaxSessions = 10000
	// MaxSessionsPerToken bounds the sessions of one token: a login past
	// it ends that token's oldest session, never another token's, so that
	// one token cannot fill the table and end everyone else's sessions.
	MaxSessionsPerToken = 16
	// sessionIDBytes is the random part of a session ID (crypto/rand).
	sessionIDBytes = 32
	// maxLoginBody bounds the login form body (bytes).
	maxLoginBody = 16 << 10
	// uiPreemptionWindow and uiPreemptionRows: the page lists the stops of
	// the last 24 h, newest first, at most 100.
	uiPreemptionWindow = 24 * time.Hour
	uiPreemptionRows   = 100
	// uiRefreshSeconds: the page reloads itself this often (a meta
	// refresh: no script, the CSP stays).
	uiRefreshSeconds = 30
)

//go:embed ui/*.html
var uiFiles embed.FS

var uiTemplates = template.Must(template.ParseFS(uiFiles, "ui/*.html"))

// uiSession is one logged-in browser: the token it logged in with, who
// that is (accessor ID, for logs), and when the session ends.
type uiSession struct {
	token    string
	accessor string
	expires  time.Time
	tokenKey [sha256.Size]byte // SHA-256 of token: the per-token bound's key
	seq      uint64            // order of login: the lowest is the oldest
}

// uiSessions maps SHA-256 digests of session IDs to sessions (the table
// never holds an ID itself). Safe for concurrent use.
type uiSessions struct {
	mu  sync.Mutex
	m   map[[sha256.Size]byte]uiSession
	seq uint64 // logins so far
}

func newUISessions() *uiSessions { return &uiSessions{m: map[[sha256.Size]byte]uiSession{}} }

// newSessionID returns 32 random bytes from crypto/rand, base64url (43
// characters).
func newSessionID() string {
	b := make([]byte, sessionIDBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// start records a session for token ending at expires and returns its ID.
// A token with MaxSessionsPerToken live sessions loses its oldest (its
// expired ones go first); then, in a full table, expired sessions are
// dropped, and if it is still full the session nearest its end.
func (u *uiSessions) start(token, accessor string, now, expires time.Time) string {
	id := newSessionID()
	tk := sha256.Sum256([]byte(token))
	u.mu.Lock()
	defer u.mu.Unlock()
	var oldestOwn [sha256.Size]byte
	own, oldestSeq := 0, uint64(0)
	for k, s := range u.m {
		switch {
		case s.tokenKey != tk:
		case !now.Before(s.expires):
			delete(u.m, k)
		default:
			if own == 0 || s.seq < oldestSeq {
				oldestOwn, oldestSeq = k, s.seq
			}
			own++
		}
	}
	if own >= MaxSessionsPerToken {
		delete(u.m, oldestOwn)
	}
	if len(u.m) >= MaxSessions {
		for k, s := range u.m {
			if !now.Before(s.expires) {
				delete(u.m, k)
			}
		}
	}
	if len(u.m) >= MaxSessions {
		var oldest [sha256.Size]byte
		first := true
		for k, s := range u.m {
			if first || s.expires.Before(u.m[oldest].expires) {
				oldest, first = k, false
			}
		}
		delete(u.m, oldest)
	}
	u.seq++
	u.m[sha256.Sum256([]byte(id))] = uiSession{token: token, accessor: accessor, expires: expires, tokenKey: tk, seq: u.seq}
	return id
}

// get returns the live session of id; an expired one is dropped.
func (u *uiSessions) get(id string, now time.Time) (uiSession, bool) {
	if len(id) != base64.RawURLEncoding.EncodedLen(sessionIDBytes) {
		return uiSession{}, false
	}
	k := sha256.Sum256([]byte(id))
	u.mu.Lock()
	defer u.mu.Unlock()
	s, ok := u.m[k]
	if ok && !now.Before(s.expires) {
		delete(u.m, k)
		return uiSession{}, false
	}
	return s, ok
}

// end drops the session of id, if any.
func (u *uiSessions) end(id string) {
	u.mu.Lock()
	delete(u.m, sha256.Sum256([]byte(id)))
	u.mu.Unlock()
}

// uiRoutes registers the status page on mux.
func (s *Server) uiRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /ui/{$}", s.uiPage)
	mux.HandleFunc("POST /ui/login", s.uiLogin)
	mux.HandleFunc("POST /ui/logout", s.uiLogout)
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ui/login" || r.URL.Path == "/ui/logout" {
			w.Header().Set("Allow", http.MethodPost)
			s.uiError(w, http.StatusMethodNotAllowed, r.URL.Path+" takes POST only (a token never goes in a URL)")
			return
		}
		s.uiError(w, http.StatusNotFound, "no page "+r.URL.Path)
	})
}

// uiHeaders sets the headers of every /ui/ answer: HTML, not cached, and a
// content security policy allowing no script, no external resource and
// forms posting only to this server.
func uiHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}

// uiRender executes template name with data, writing nothing on a
// template error (500).
func (s *Server) uiRender(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := uiTemplates.ExecuteTemplate(&buf, name, data); err != nil {
		s.cfg.Logger.Error("ui: template", "template", name, "error", err)
		uiHeaders(w)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("status page: template error"))
		return
	}
	uiHeaders(w)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// uiLoginView is the data of the login form.
type uiLoginView struct{ Msg string }

func (s *Server) uiLoginForm(w http.ResponseWriter, status int, msg string) {
	s.uiRender(w, status, "login.html", uiLoginView{Msg: msg})
}

func (s *Server) uiError(w http.ResponseWriter, status int, msg string) {
	s.uiRender(w, status, "error.html", uiLoginView{Msg: msg})
}

// sessionCookie builds the session cookie for id; maxAge < 0 deletes it.
func sessionCookie(r *http.Request, id string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: SessionCookie, Value: id, Path: "/ui/", MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode}
}

// uiLogin serves POST /ui/login: the form field "token" (body only, never
// the URL) is resolved like an API request's; a token with read rights
// gets a session and 303 to /ui/; else the form again (403, or 503 while
// Nomad cannot check tokens).
func (s *Server) uiLogin(w http.ResponseWriter, r *http.Request) {
	if why := crossSite(r); why != "" {
		s.cfg.Logger.Info("ui: cross-site login refused", "why", why)
		s.uiLoginForm(w, http.StatusForbidden, "login refused: the form was not posted from this page ("+why+")")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		s.uiLoginForm(w, http.StatusBadRequest, "the login form could not be read")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if len(token) > acl.MaxTokenLen || strings.ContainsFunc(token, func(r rune) bool { return r < 0x21 || r == 0x7f }) {
		s.uiLoginForm(w, http.StatusForbidden, "permission denied: that is not a token")
		return
	}
	c, err := s.callerOf(r.Context(), token, needRead)
	if err != nil {
		status, body := statusOf(err)
		s.cfg.Logger.Info("ui: login refused", "status", status)
		s.uiLoginForm(w, status, body.Error)
		return
	}
	who := "open-reads"
	if !c.open {
		who = c.accessor()
	}
	if old, err := r.Cookie(SessionCookie); err == nil {
		s.ui.end(old.Value) // a new login replaces this browser's session
	}
	now := s.cfg.Now()
	id := s.ui.start(token, who, now, now.Add(SessionTTL))
	s.cfg.Logger.Info("ui: session started", "accessor_id", who, "ends", now.Add(SessionTTL))
	http.SetCookie(w, sessionCookie(r, id, int(SessionTTL/time.Second)))
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// crossSite says why r, a login, comes from another site (login CSRF: a
// page elsewhere posting its own token so that the victim's browser shows
// that token's view), or "" when it does not: Sec-Fetch-Site is
// cross-site, or an Origin header is present and is not this page's host
// (r.Host, compared without letter case; "null" is refused). A request
// with neither header (curl, older browsers) passes: without an Origin
// there is no site to tell apart, and the browsers that leave it out of
// a cross-site form post are long gone.
func crossSite(r *http.Request) string {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return "Sec-Fetch-Site: cross-site"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return "Origin " + strconv.Quote(origin) + " is not " + strconv.Quote(r.Host)
	}
	return ""
}

// uiLogout serves POST /ui/logout: ends the session, deletes the cookie,
// 303 to /ui/ (the login form).
func (s *Server) uiLogout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(SessionCookie); err == nil {
		if sess, ok := s.ui.get(ck.Value, s.cfg.Now()); ok {
			s.cfg.Logger.Info("ui: session ended by logout", "accessor_id", sess.accessor)
		}
		s.ui.end(ck.Value)
	}
	http.SetCookie(w, sessionCookie(r, "", -1))
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// uiPage serves GET /ui/: the login form without a live session, else the
// status page for the session's token.
func (s *Server) uiPage(w http.ResponseWriter, r *http.Request) {
	ck, err := r.Cookie(SessionCookie)
	if err != nil {
		s.uiLoginForm(w, http.StatusOK, "")
		return
	}
	sess, ok := s.ui.get(ck.Value, s.cfg.Now())
	if !ok {
		http.SetCookie(w, sessionCookie(r, "", -1))
		s.uiLoginForm(w, http.StatusOK, "no session, or it ended: log in again")
		return
	}
	c, err := s.callerOf(r.Context(), sess.token, needRead)
	switch {
	case errors.Is(err, acl.ErrUnavailable):
		// Fail closed, but keep the session: the token may well be good.
		status, body := statusOf(err)
		s.uiError(w, status, body.Error)
		return
	case err != nil:
		s.ui.end(ck.Value)
		s.cfg.Logger.Info("ui: session ended, token no longer accepted", "accessor_id", sess.accessor)
		http.SetCookie(w, sessionCookie(r, "", -1))
		status, body := statusOf(err)
		s.uiLoginForm(w, status, "your session ended: "+body.Error)
		return
	}
	who := sess.accessor
	if name := c.auth.Name(); name != "" && !c.open {
		who = name // the token's name, not its accessor ID (issue 20)
	}
	view, status := s.uiView(r.Context(), c, who, r.URL.Query().Get("span"))
	s.uiRender(w, status, "page.html", view)
}
