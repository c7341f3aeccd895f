package acl

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Defaults and bounds of a Resolver.
const (
	// MaxTTL is the longest rights stay cached (DESIGN §9: at most 30 s).
	MaxTTL = 30 * time.Second
	// DefaultTimeout bounds one resolution (all its Nomad reads).
	DefaultTimeout = 5 * time.Second
	// DefaultMaxEntries bounds the cache (one entry per distinct token).
	DefaultMaxEntries = 10000
	// maxBody bounds one Nomad answer read (a policy's rules are at most
	// MaxRulesBytes, plus the JSON around them).
	maxBody = MaxRulesBytes + 64<<10
	// maxRoles and maxPolicies bound what one token may pull in.
	maxRoles    = 64
	maxPolicies = 256
)

// aclDisabledBody is token/self's exact body when Nomad answers 400 with
// ACLs off (Nomad's documented answer of its ACL endpoints).
const aclDisabledBody = "ACL support disabled"

// aclDisabledAccessor is the accessor ID of the pseudo token Nomad v1.11.3
// answers token/self with (200) while ACLs are off; recorded in
// testdata/nomad-1.11.3/token-self-acl-disabled.json.
const aclDisabledAccessor = "acls-disabled"

// Config configures a Resolver.
type Config struct {
	// Address is Nomad's HTTP address, e.g. "http://127.0.0.1:4646".
	Address string
	// HTTPClient talks to Nomad (TLS set up by the caller); nil: a plain
	// client.
	HTTPClient *http.Client
	// Timeout bounds one resolution; 0: DefaultTimeout.
	Timeout time.Duration
	// AdminPolicy names the Nomad policy whose holders are admins
	// (config admin_policy); "" for none.
	AdminPolicy string
	// AdminToken is the broker's own admin token (config admin_token or
	// GPUTIDE_ADMIN_TOKEN), honoured only while Nomad ACLs are off.
	AdminToken string
	// TTL is how long rights stay cached; 0 or more than MaxTTL: MaxTTL.
	TTL time.Duration
	// MaxEntries bounds the cache; 0: DefaultMaxEntries.
	MaxEntries int
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Logger gets debug lines per resolution, never a token or its hash.
	Logger hclog.Logger
}

// Resolver turns a caller's token into an Authorizer by asking Nomad with
// that token, and caches the answer. It is safe for concurrent use.
type Resolver struct {
	cfg    Config
	base   *url.URL
	client *http.Client
	log    hclog.Logger

	mu       sync.Mutex
	cache    map[[sha256.Size]byte]entry
	inflight map[[sha256.Size]byte]*call
	// mode is the ACL state last seen on token/self, for requests without
	// a token (open reads while ACLs are off); valid until modeUntil.
	modeOff   bool
	modeUntil time.Time
}

// entry is one cached resolution: an Authorizer or a lasting denial.
type entry struct {
	auth  *Authorizer
	err   error
	until time.Time
}

// NewResolver checks cfg and builds a Resolver.
func NewResolver(cfg Config) (*Resolver, error) {
	base, err := url.Parse(cfg.Address)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, &Error{Op: "config address", Msg: fmt.Sprintf("%q is not an http(s) URL", cfg.Address)}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.TTL <= 0 || cfg.TTL > MaxTTL {
		cfg.TTL = MaxTTL
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultMaxEntries
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{}
	}
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Resolver{cfg: cfg, base: base, client: client, log: log.Named("acl"),
		cache: map[[sha256.Size]byte]entry{}, inflight: map[[sha256.Size]byte]*call{}}, nil
}

// Resolve gives the rights of token. Errors: ErrDenied (no token, expired,
// refused, an unreadable policy or role), ErrUnavailable (Nomad not
// answering usably: never access), ErrACLDisabled (ACLs off and token is
// not the broker's admin token). With ACLs off the broker's admin token
// gives an admin Authorizer; with ACLs on it is refused.
func (r *Resolver) Resolve(ctx context.Context, token string) (*Authorizer, error) {
	if token == "" {
		return nil, r.anonymous(ctx)
	}
	if len(token) > MaxTokenLen {
		return nil, &Error{Kind: ErrDenied, Op: "token", Msg: "longer than the limit"}
	}
	key := sha256.Sum256([]byte(token))
	now := r.cfg.Now()
	if a, err, ok := r.cached(key, now); ok {
		return a, err
	}
	r.mu.Lock()
	if c, ok := r.inflight[key]; ok {
		r.mu.Unlock()
		select {
		case <-c.done:
			return c.auth, c.err
		case <-ctx.Done():
			return nil, &Error{Kind: ErrUnavailable, Op: "token", Msg: "gave up waiting for the check in flight", Err: ctx.Err()}
		}
	}
	c := &call{done: make(chan struct{}), err: &Error{Kind: ErrUnavailable, Op: "token", Msg: "check did not finish"}}
	r.inflight[key] = c
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.inflight, key)
		r.mu.Unlock()
		close(c.done)
	}()

	// The check serves every caller waiting on it, so one caller going
	// away does not cancel it; Timeout bounds it.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Timeout)
	defer cancel()
	auth, err := r.resolve(rctx, token, now)
	if err != nil {
		r.log.Debug("token check failed", "error", err)
	} else {
		r.log.Debug("token resolved", "accessor_id", auth.accessorID, "management", auth.management, "admin", auth.IsAdmin())
	}
	r.store(key, auth, err, now)
	c.auth, c.err = auth, err
	return auth, err
}

// call is one resolution in flight; callers with the same token wait for
// it instead of asking Nomad again.
type call struct {
	done chan struct{}
	auth *Authorizer
	err  error
}

// cached returns a live cache entry; an entry whose token expired since
// gives ErrDenied.
func (r *Resolver) cached(key [sha256.Size]byte, now time.Time) (*Authorizer, error, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.cache[key]
	if !ok || !now.Before(e.until) {
		return nil, nil, false
	}
	if e.auth != nil && e.auth.expired(now) {
		return nil, &Error{Kind: ErrDenied, Op: "token", Msg: "expired"}, true
	}
	return e.auth, e.err, true
}

// store caches a resolution for the TTL (cut to the token's expiry).
// ErrUnavailable is never cached: the next request asks Nomad again.
func (r *Resolver) store(key [sha256.Size]byte, a *Authorizer, err error, now time.Time) {
	if err != nil && !errors.Is(err, ErrDenied) && !errors.Is(err, ErrACLDisabled) {
		return
	}
	until := now.Add(r.cfg.TTL)
	if a != nil && !a.expires.IsZero() && a.expires.Before(until) {
		until = a.expires
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cache) >= r.cfg.MaxEntries {
		r.evict(now)
	}
	r.cache[key] = entry{auth: a, err: err, until: until}
}

// evict drops expired entries, then, if the cache is still full, one
// arbitrary entry. Called with r.mu held.
func (r *Resolver) evict(now time.Time) {
	for k, e := range r.cache {
		if !now.Before(e.until) {
			delete(r.cache, k)
		}
	}
	for k := range r.cache {
		if len(r.cache) < r.cfg.MaxEntries {
			break
		}
		delete(r.cache, k)
	}
}

// Forget drops every cached resolution (e.g. after a policy change the
// operator wants seen at once).
func (r *Resolver) Forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.cache)
	r.modeUntil = time.Time{}
}

// anonymous answers a request without a token: ErrDenied, or
// ErrACLDisabled when Nomad's ACLs are off (the HTTP layer may then serve
// open reads). Nomad's anonymous policy is never used: token/self is asked
// only to learn whether ACLs are on, and its answer is cached for the TTL.
func (r *Resolver) anonymous(ctx context.Context) error {
	now := r.cfg.Now()
	r.mu.Lock()
	off, known := r.modeOff, now.Before(r.modeUntil)
	r.mu.Unlock()
	if !known {
		ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
		defer cancel()
		status, body, err := r.get(ctx, "", "/v1/acl/token/self")
		if err != nil || (status != http.StatusOK && status != http.StatusBadRequest) {
			// Unknown state: denied, and asked again next time.
			return &Error{Kind: ErrDenied, Op: "token", Msg: "none given"}
		}
		var self tokenSelf
		_ = json.Unmarshal(body, &self)
		off = aclsOff(status, body, self)
		r.setMode(off, now)
	}
	if off {
		return &Error{Kind: ErrACLDisabled, Op: "token", Msg: "none given"}
	}
	return &Error{Kind: ErrDenied, Op: "token", Msg: "none given"}
}

func (r *Resolver) setMode(off bool, now time.Time) {
	r.mu.Lock()
	r.modeOff, r.modeUntil = off, now.Add(r.cfg.TTL)
	r.mu.Unlock()
}

// tokenSelf is the part of GET /v1/acl/token/self the broker reads.
type tokenSelf struct {
	AccessorID     string
	SecretID       string
	Name           string
	Type           string
	Policies       []string
	Roles          []struct{ ID, Name string }
	ExpirationTime *time.Time
}

// roleBody is the part of GET /v1/acl/role/<id> the broker reads.
type roleBody struct {
	ID       string
	Name     string
	Policies []struct{ Name string }
}

// policyBody is the part of GET /v1/acl/policy/<name> the broker reads.
type policyBody struct {
	Name   string
	Rules  string
	JobACL *json.RawMessage
}

// aclsOff reports whether token/self's answer is one of Nomad's exact
// "ACLs are off" answers: 400 "ACL support disabled", or (Nomad v1.11.3)
// 200 with the pseudo token whose accessor is "acls-disabled" and whose
// secret is empty.
func aclsOff(status int, body []byte, self tokenSelf) bool {
	if status == http.StatusBadRequest {
		return strings.TrimSuffix(string(body), "\n") == aclDisabledBody
	}
	return status == http.StatusOK && self.AccessorID == aclDisabledAccessor && self.SecretID == ""
}

// resolve runs one uncached resolution: token/self, then roles, then
// policies, then the rules.
func (r *Resolver) resolve(ctx context.Context, token string, now time.Time) (*Authorizer, error) {
	self, off, err := r.tokenSelf(ctx, token)
	if err != nil {
		return nil, err
	}
	r.setMode(off, now)
	if off {
		if AdminTokenMatches(token, r.cfg.AdminToken) {
			return &Authorizer{source: SourceAdminToken}, nil
		}
		return nil, &Error{Kind: ErrACLDisabled, Op: "token/self", Msg: "Nomad ACLs are off and the token is not the broker's admin token"}
	}
	if AdminTokenMatches(token, r.cfg.AdminToken) {
		return nil, &Error{Kind: ErrDenied, Op: "token", Msg: "the broker's admin token is refused while Nomad ACLs are on"}
	}
	a := &Authorizer{source: SourceToken, accessorID: self.AccessorID, name: self.Name}
	if self.ExpirationTime != nil {
		a.expires = *self.ExpirationTime
		if a.expired(now) {
			return nil, &Error{Kind: ErrDenied, Op: "token", Msg: "expired"}
		}
	}
	switch self.Type {
	case "management":
		a.management = true
		return a, nil
	case "client":
	default:
		return nil, &Error{Kind: ErrDenied, Op: "token/self", Msg: fmt.Sprintf("token type %q is neither client nor management", self.Type)}
	}
	names, err := r.policyNames(ctx, token, self)
	if err != nil {
		return nil, err
	}
	policies, err := fetchAll(names, func(name string) (Policy, error) { return r.policy(ctx, token, name) })
	if err != nil {
		return nil, err
	}
	a.admin = r.cfg.AdminPolicy != "" && slices.Contains(names, r.cfg.AdminPolicy)
	a.rules = Merge(policies...)
	return a, nil
}

// tokenSelf asks Nomad about token. off is true on Nomad's exact ACL-off
// answers; the other answers map: 200 → the token; 5xx or no answer →
// ErrUnavailable; 4xx, and Nomad v1.11.3's two 500 answers about the token
// itself ("failed to parse signed token" for a secret that is neither a
// UUID nor a JWT, "ACL token expired") → ErrDenied.
func (r *Resolver) tokenSelf(ctx context.Context, token string) (tokenSelf, bool, error) {
	var self tokenSelf
	status, body, err := r.get(ctx, token, "/v1/acl/token/self")
	if err != nil {
		return self, false, err
	}
	if status == http.StatusOK {
		if err := json.Unmarshal(body, &self); err != nil {
			return self, false, &Error{Kind: ErrUnavailable, Op: "token/self", Msg: "answer does not decode", Err: err}
		}
	}
	if aclsOff(status, body, self) {
		return self, true, nil
	}
	switch {
	case status == http.StatusOK:
		return self, false, nil
	case status == http.StatusInternalServerError && strings.HasPrefix(string(body), "failed to parse signed token"):
		return self, false, &Error{Kind: ErrDenied, Op: "token/self", Msg: "Nomad does not know the token"}
	case status == http.StatusInternalServerError && strings.TrimSpace(string(body)) == "ACL token expired":
		return self, false, &Error{Kind: ErrDenied, Op: "token", Msg: "expired"}
	}
	return self, false, statusError("token/self", status, body, token)
}

// policyNames lists the policies token holds, directly and through its
// roles, each once, in the order met.
func (r *Resolver) policyNames(ctx context.Context, token string, self tokenSelf) ([]string, error) {
	if len(self.Roles) > maxRoles {
		return nil, &Error{Kind: ErrDenied, Op: "token/self", Msg: fmt.Sprintf("%d roles, more than %d", len(self.Roles), maxRoles)}
	}
	roles, err := fetchAll(self.Roles, func(link struct{ ID, Name string }) (roleBody, error) {
		var role roleBody
		err := r.getJSON(ctx, token, "role "+link.ID, "/v1/acl/role/"+url.PathEscape(link.ID), &role)
		return role, err
	})
	if err != nil {
		return nil, err
	}
	names := slices.Clone(self.Policies)
	for _, role := range roles {
		for _, p := range role.Policies {
			names = append(names, p.Name)
		}
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) > maxPolicies {
		return nil, &Error{Kind: ErrDenied, Op: "token/self", Msg: fmt.Sprintf("%d policies, more than %d", len(out), maxPolicies)}
	}
	return out, nil
}

// policy reads and parses one policy. A policy Nomad binds to a job
// (JobACL) grants only that job's workload identity, so it adds nothing
// here. Rules that do not parse deny the whole token.
func (r *Resolver) policy(ctx context.Context, token, name string) (Policy, error) {
	var body policyBody
	op := "policy " + name
	if err := r.getJSON(ctx, token, op, "/v1/acl/policy/"+url.PathEscape(name), &body); err != nil {
		return Policy{}, err
	}
	if body.JobACL != nil && string(*body.JobACL) != "null" {
		return Policy{Name: name}, nil
	}
	p, err := ParseRules(name, body.Rules)
	if err != nil {
		return Policy{}, &Error{Kind: ErrDenied, Op: op, Msg: "rules unreadable", Err: err}
	}
	return p, nil
}

// getJSON reads path with token and decodes a 200 answer into v.
func (r *Resolver) getJSON(ctx context.Context, token, op, path string, v any) error {
	status, body, err := r.get(ctx, token, path)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return statusError(op, status, body, token)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return &Error{Kind: ErrUnavailable, Op: op, Msg: "answer does not decode", Err: err}
	}
	return nil
}

// get does one GET against Nomad with token in X-Nomad-Token (none when
// ""); path is already escaped. It reads at most maxBody bytes. Transport failures are
// ErrUnavailable; the error names the path, never the token.
func (r *Resolver) get(ctx context.Context, token, path string) (int, []byte, error) {
	u := strings.TrimSuffix(r.base.String(), "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, &Error{Kind: ErrUnavailable, Op: path, Msg: "request not built", Err: err}
	}
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, nil, &Error{Kind: ErrUnavailable, Op: path, Msg: "Nomad not reachable", Err: scrub(err, token)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return 0, nil, &Error{Kind: ErrUnavailable, Op: path, Msg: "answer not read", Err: scrub(err, token)}
	}
	if len(body) > maxBody {
		return 0, nil, &Error{Kind: ErrUnavailable, Op: path, Msg: fmt.Sprintf("answer longer than %d bytes", maxBody)}
	}
	return resp.StatusCode, body, nil
}

// statusError maps a non-200 answer: 5xx → ErrUnavailable, other →
// ErrDenied. The body (at most 200 bytes, the token masked) is kept as
// the message.
func statusError(op string, status int, body []byte, token string) error {
	kind := ErrDenied
	if status >= 500 {
		kind = ErrUnavailable
	}
	text := string(body)
	if token != "" {
		text = strings.ReplaceAll(text, token, "<token>")
	}
	if len(text) > 200 {
		text = text[:200]
	}
	return &Error{Kind: kind, Op: op, Msg: fmt.Sprintf("Nomad answered %d %q", status, strings.TrimSpace(text))}
}

// scrub keeps err's text but masks the token, should a transport error
// ever echo it.
func scrub(err error, token string) error {
	if token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), token, "<token>"))
}

// fetchAll runs get on every item at once (roles, then policies: one
// round trip each instead of one per item) and returns the results in
// item order, or the error of the first failing item in that order.
func fetchAll[T, R any](items []T, get func(T) (R, error)) ([]R, error) {
	out := make([]R, len(items))
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Go(func() { out[i], errs[i] = get(it) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
