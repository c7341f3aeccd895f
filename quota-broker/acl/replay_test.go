package acl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
)

// Unit tests on Nomad v1.11.3's recorded answers (testdata, written by
// TestConformanceWithNomad with GPUTIDE_ACL_RECORD=1), replayed through an
// httptest server.

const recordedFile = "testdata/nomad-1.11.3/recorded.json"

func loadRecording(t testing.TB) *recording {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(recordedFile))
	if err != nil {
		t.Fatal(err)
	}
	var rec recording
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s: %v", recordedFile, err)
	}
	return &rec
}

func (rec *recording) secret(t testing.TB, name string) string {
	t.Helper()
	for _, c := range rec.Cases {
		if c.Name == name {
			return c.Secret
		}
	}
	t.Fatalf("no recorded case %q", name)
	return ""
}

// replay serves the recorded answers; mode switches it to other answers.
type replay struct {
	rec   *recording
	mu    sync.Mutex
	mode  func(w http.ResponseWriter, r *http.Request) bool // true: answered
	reads atomic.Int64
}

func (rp *replay) set(mode func(w http.ResponseWriter, r *http.Request) bool) {
	rp.mu.Lock()
	rp.mode = mode
	rp.mu.Unlock()
}

func (rp *replay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rp.reads.Add(1)
	rp.mu.Lock()
	mode := rp.mode
	rp.mu.Unlock()
	if mode != nil && mode(w, r) {
		return
	}
	token := r.Header.Get("X-Nomad-Token")
	var body json.RawMessage
	switch p := r.URL.Path; {
	case p == "/v1/acl/token/self":
		body = rp.rec.TokenSelf[token]
	case strings.HasPrefix(p, "/v1/acl/policy/"):
		body = rp.rec.Policies[strings.TrimPrefix(p, "/v1/acl/policy/")]
	case strings.HasPrefix(p, "/v1/acl/role/"):
		body = rp.rec.Roles[strings.TrimPrefix(p, "/v1/acl/role/")]
	}
	if body == nil || token == "" {
		http.Error(w, "Permission denied", http.StatusForbidden)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// answerWith replays a recorded {status, body} answer for token/self.
func answerWith(raw json.RawMessage) func(w http.ResponseWriter, r *http.Request) bool {
	var a struct {
		Status int
		Body   string
	}
	_ = json.Unmarshal(raw, &a)
	return func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/v1/acl/token/self" {
			return false
		}
		w.WriteHeader(a.Status)
		_, _ = w.Write([]byte(a.Body))
		return true
	}
}

func fixedAnswer(status int, body string) func(w http.ResponseWriter, r *http.Request) bool {
	return func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
		return true
	}
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	rec   *recording
	rp    *replay
	srv   *httptest.Server
	clock *clock
	res   *Resolver
	logs  *bytes.Buffer
}

func newFixture(t testing.TB, cfg Config) *fixture {
	t.Helper()
	f := &fixture{rec: loadRecording(t), logs: &bytes.Buffer{}}
	f.rp = &replay{rec: f.rec}
	f.srv = httptest.NewServer(f.rp)
	t.Cleanup(f.srv.Close)
	f.clock = &clock{now: f.rec.Cases[0].CheckedAt}
	cfg.Address = f.srv.URL
	cfg.Now = f.clock.Now
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: f.logs, Level: hclog.Trace})
	res, err := NewResolver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.res = res
	return f
}

// Every recorded case: the broker on Nomad's recorded policies, roles and
// tokens answers what Nomad answered, and what the table says.
func TestReplayConformance(t *testing.T) {
	f := newFixture(t, Config{})
	if got, want := f.rec.NomadVersion, "Nomad v1.11.3"; got != want {
		t.Fatalf("recorded with %q, want %q", got, want)
	}
	wants := map[string]map[string]string{}
	for _, tc := range tableCases {
		wants[tc.name] = tc.want
	}
	if len(f.rec.Cases) != len(tableCases) {
		t.Fatalf("%d recorded cases, the table has %d: re-record", len(f.rec.Cases), len(tableCases))
	}
	for _, c := range f.rec.Cases {
		t.Run(c.Name, func(t *testing.T) {
			f.clock.now = c.CheckedAt
			a, err := f.res.Resolve(context.Background(), c.Secret)
			if c.Name == "expired token" {
				if !errors.Is(err, ErrDenied) || a != nil {
					t.Fatalf("want ErrDenied and no rights, got %v %v", a, err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			got := answer(a.Allowed)
			if diff := cmp.Diff(normalize(c.Nomad), got); diff != "" {
				t.Errorf("broker vs Nomad (-nomad +broker):\n%s", diff)
			}
			if diff := cmp.Diff(normalize(wants[c.Name]), got); diff != "" {
				t.Errorf("broker vs table (-table +broker):\n%s", diff)
			}
		})
	}
}

// Expiry from the injected clock: valid before ExpirationTime, denied at
// and after it, also from the cache.
func TestReplayExpiry(t *testing.T) {
	f := newFixture(t, Config{})
	secret := f.rec.secret(t, "expired token")
	var self tokenSelf
	if err := json.Unmarshal(f.rec.TokenSelf[secret], &self); err != nil || self.ExpirationTime == nil {
		t.Fatalf("recorded token has no expiry: %v", err)
	}
	f.clock.now = self.ExpirationTime.Add(-time.Second)
	a, err := f.res.Resolve(context.Background(), secret)
	if err != nil || !a.Allowed("team-b", CapReadJob) {
		t.Fatalf("before expiry: want read-job on team-b, got %v", err)
	}
	f.clock.now = *self.ExpirationTime
	if a, err := f.res.Resolve(context.Background(), secret); !errors.Is(err, ErrDenied) || a != nil {
		t.Fatalf("at expiry: want ErrDenied, got %v %v", a, err)
	}
	f.rp.set(answerWith(f.rec.ExpiredSelf))
	f.res.Forget()
	if _, err := f.res.Resolve(context.Background(), secret); !errors.Is(err, ErrDenied) {
		t.Fatalf("Nomad's own expired answer (500 ACL token expired): want ErrDenied, got %v", err)
	}
}

// An outage gives ErrUnavailable (503), never rights, and is not cached.
func TestOutageIsUnavailable(t *testing.T) {
	f := newFixture(t, Config{})
	secret := f.rec.secret(t, "management token")
	for _, tc := range []struct {
		name string
		mode func(w http.ResponseWriter, r *http.Request) bool
	}{
		{"500 on token/self", fixedAnswer(500, "rpc error: No cluster leader")},
		{"503", fixedAnswer(503, "")},
		{"garbage 200", fixedAnswer(200, "{not json")},
		{"policy read fails", func(w http.ResponseWriter, r *http.Request) bool {
			if strings.HasPrefix(r.URL.Path, "/v1/acl/policy/") {
				w.WriteHeader(502)
				return true
			}
			return false
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.rp.set(tc.mode)
			s := secret
			if tc.name == "policy read fails" {
				s = f.rec.secret(t, "exact label beats glob")
			}
			a, err := f.res.Resolve(context.Background(), s)
			if !errors.Is(err, ErrUnavailable) || a != nil || a.Allowed("team-a", CapReadJob) || a.IsAdmin() {
				t.Fatalf("want ErrUnavailable and no rights, got %v %v", a, err)
			}
			if errors.Is(err, ErrDenied) || errors.Is(err, ErrACLDisabled) {
				t.Fatalf("an outage must not read as ACLs off or a denial: %v", err)
			}
		})
	}
	f.rp.set(nil)
	if a, err := f.res.Resolve(context.Background(), secret); err != nil || !a.IsAdmin() {
		t.Fatalf("after the outage (not cached): want the management token, got %v %v", a, err)
	}
	f.srv.Close()
	f.res.Forget()
	if _, err := f.res.Resolve(context.Background(), secret); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Nomad unreachable: want ErrUnavailable, got %v", err)
	}
}

// ACLs count as off only on token/self's exact answers.
func TestACLsOffOnlyOnExactAnswer(t *testing.T) {
	const admin = "broker-admin-token"
	f := newFixture(t, Config{AdminToken: admin})
	for _, tc := range []struct {
		name string
		mode func(w http.ResponseWriter, r *http.Request) bool
		want error
	}{
		{"Nomad v1.11.3 recorded answer", answerWith(f.rec.ACLDisabledSelf), ErrACLDisabled},
		{"400 ACL support disabled", fixedAnswer(400, "ACL support disabled"), ErrACLDisabled},
		{"400 ACL support disabled with newline", fixedAnswer(400, "ACL support disabled\n"), ErrACLDisabled},
		{"400 other text", fixedAnswer(400, "ACL support disabled?"), ErrDenied},
		{"400 prefix", fixedAnswer(400, "bad request: ACL support disabled"), ErrDenied},
		{"500 with the text", fixedAnswer(500, "ACL support disabled"), ErrUnavailable},
		{"200 acls-disabled with a secret", fixedAnswer(200, `{"AccessorID":"acls-disabled","SecretID":"x","Type":"client"}`), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.rp.set(tc.mode)
			f.res.Forget()
			a, err := f.res.Resolve(context.Background(), "00000000-0000-0000-0000-0000000000aa")
			if tc.want == nil {
				// Not the ACL-off answer: a client token without policies.
				if err != nil || a.IsAdmin() || a.Allowed("default", CapListJobs) {
					t.Fatalf("want a token without rights, got %+v %v", a, err)
				}
				return
			}
			if !errors.Is(err, tc.want) || a != nil {
				t.Fatalf("want %v, got %v %v", tc.want, a, err)
			}
			if tc.want == ErrACLDisabled {
				a, err := f.res.Resolve(context.Background(), admin)
				if err != nil || !a.IsAdmin() || a.Source() != SourceAdminToken || !a.Allowed("team-c", CapSubmitJob) {
					t.Fatalf("admin token with ACLs off: want admin, got %v %v", a, err)
				}
				if _, err := f.res.Resolve(context.Background(), ""); !errors.Is(err, ErrACLDisabled) {
					t.Fatalf("no token with ACLs off: want ErrACLDisabled, got %v", err)
				}
				f.res.Forget() // the no-token probe itself
				if _, err := f.res.Resolve(context.Background(), ""); !errors.Is(err, ErrACLDisabled) {
					t.Fatalf("no token with ACLs off, probed: want ErrACLDisabled, got %v", err)
				}
			}
		})
	}
	// ACLs on: the admin token is refused even if Nomad knew it.
	f.rp.set(nil)
	f.res.Forget()
	f.rec.TokenSelf[admin] = f.rec.TokenSelf[f.rec.secret(t, "management token")]
	if a, err := f.res.Resolve(context.Background(), admin); !errors.Is(err, ErrDenied) || a != nil {
		t.Fatalf("admin token with ACLs on: want ErrDenied, got %v %v", a, err)
	}
}

// No token: denied, without using Nomad's anonymous policy.
func TestNoTokenIsDenied(t *testing.T) {
	f := newFixture(t, Config{})
	f.rp.set(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("X-Nomad-Token") == "" {
			// Nomad answers the anonymous token with ACLs on.
			_, _ = w.Write([]byte(`{"AccessorID":"anonymous","SecretID":"","Name":"Anonymous Token","Type":"client","Policies":["anonymous"]}`))
			return true
		}
		return false
	})
	a, err := f.res.Resolve(context.Background(), "")
	if !errors.Is(err, ErrDenied) || a != nil {
		t.Fatalf("want ErrDenied, got %v %v", a, err)
	}
	for _, bad := range []string{"unknown-token", strings.Repeat("x", MaxTokenLen+1)} {
		if _, err := f.res.Resolve(context.Background(), bad); !errors.Is(err, ErrDenied) {
			t.Fatalf("want ErrDenied, got %v", err)
		}
	}
}

func TestUnreadablePolicyDenies(t *testing.T) {
	f := newFixture(t, Config{})
	secret := f.rec.secret(t, "exact label beats glob")
	f.rp.set(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/v1/acl/policy/prod-api-read" {
			_, _ = w.Write([]byte(`{"Name":"prod-api-read","Rules":"namespace \"prod-api\" { policy = \"admin\" }"}`))
			return true
		}
		return false
	})
	a, err := f.res.Resolve(context.Background(), secret)
	if !errors.Is(err, ErrDenied) || !errors.Is(err, ErrInvalidRules) || a != nil {
		t.Fatalf("want ErrDenied wrapping ErrInvalidRules, got %v %v", a, err)
	}
	if want := `acl: policy prod-api-read: rules unreadable: acl: policy prod-api-read namespace "prod-api" policy: "admin" is not one of read, write, scale, deny (invalid policy rules) (denied)`; err.Error() != want {
		t.Fatalf("error\n got %s\nwant %s", err, want)
	}
}

func TestAdminPolicy(t *testing.T) {
	f := newFixture(t, Config{AdminPolicy: "team-c-submit"})
	for name, want := range map[string]bool{
		"policies and roles merge":         true, // through its role
		"capabilities of one label add up": true, // directly
		"exact label beats glob":           false,
	} {
		a, err := f.res.Resolve(context.Background(), f.rec.secret(t, name))
		if err != nil || a.IsAdmin() != want || a.IsManagement() {
			t.Errorf("%s: IsAdmin want %v, got %v (%v)", name, want, a.IsAdmin(), err)
		}
	}
	a, _ := f.res.Resolve(context.Background(), f.rec.secret(t, "management token"))
	if !a.IsAdmin() || !a.IsManagement() || a.AccessorID() == "" || a.Capabilities("team-a") != nil {
		t.Fatalf("management token: %+v", a)
	}
}

// Rights are cached for at most 30 s; denials too, outages never.
func TestCache(t *testing.T) {
	f := newFixture(t, Config{TTL: time.Hour})
	secret := f.rec.secret(t, "exact label beats glob")
	if _, err := f.res.Resolve(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	if got := f.rp.reads.Load(); got != 3 {
		t.Fatalf("cold resolve: %d Nomad reads, want 3 (token/self and two policies)", got)
	}
	f.clock.Add(MaxTTL - time.Millisecond)
	if _, err := f.res.Resolve(context.Background(), secret); err != nil || f.rp.reads.Load() != 3 {
		t.Fatalf("warm resolve asked Nomad: reads %d, err %v", f.rp.reads.Load(), err)
	}
	f.clock.Add(time.Millisecond)
	if _, err := f.res.Resolve(context.Background(), secret); err != nil || f.rp.reads.Load() != 6 {
		t.Fatalf("after 30 s (TTL capped at 30 s): reads %d, want 6; err %v", f.rp.reads.Load(), err)
	}
	// A denial is cached.
	f.rp.reads.Store(0)
	for range 2 {
		if _, err := f.res.Resolve(context.Background(), "00000000-0000-0000-0000-00000000beef"); !errors.Is(err, ErrDenied) {
			t.Fatal(err)
		}
	}
	if got := f.rp.reads.Load(); got != 1 {
		t.Fatalf("a denial: %d reads, want 1", got)
	}
	// The cache stays bounded.
	small := newFixture(t, Config{MaxEntries: 4})
	for i := range 20 {
		_, _ = small.res.Resolve(context.Background(), fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
	}
	if n := len(small.res.cache); n > 4 {
		t.Fatalf("cache holds %d entries, bound 4", n)
	}
}

// Concurrent cold checks of one token ask Nomad once.
func TestConcurrentColdChecksShareOneResolution(t *testing.T) {
	f := newFixture(t, Config{})
	secret := f.rec.secret(t, "exact label beats glob")
	release := make(chan struct{})
	f.rp.set(func(w http.ResponseWriter, r *http.Request) bool {
		<-release // hold token/self until every caller is waiting
		return false
	})
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			a, err := f.res.Resolve(context.Background(), secret)
			if err == nil && !a.Allowed("prod-web", CapSubmitJob) {
				err = fmt.Errorf("no submit-job on prod-web")
			}
			errs <- err
		})
	}
	time.Sleep(100 * time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := f.rp.reads.Load(); got != 3 {
		t.Fatalf("50 concurrent cold checks made %d Nomad reads, want 3", got)
	}
}

// Secrets, and their SHA-256 (hex or base64), appear in no error and no
// log line, whatever happens.
func TestSecretsNeverInErrorsOrLogs(t *testing.T) {
	f := newFixture(t, Config{AdminToken: "the-broker-admin-secret"})
	var secrets []string
	var errs []string
	resolve := func(s string) {
		secrets = append(secrets, s)
		if _, err := f.res.Resolve(context.Background(), s); err != nil {
			errs = append(errs, err.Error(), fmt.Sprintf("%+v %#v", err, err))
		}
	}
	for _, c := range f.rec.Cases {
		resolve(c.Secret)
	}
	resolve("11111111-2222-3333-4444-555555555555")
	// Nomad echoing the token in an error body.
	f.rp.set(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "no such token "+r.Header.Get("X-Nomad-Token"), http.StatusInternalServerError)
		return true
	})
	resolve("66666666-7777-8888-9999-000000000000")
	f.rp.set(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "forbidden for "+r.Header.Get("X-Nomad-Token"), http.StatusForbidden)
		return true
	})
	resolve("77777777-7777-8888-9999-000000000000")
	f.rp.set(fixedAnswer(400, "ACL support disabled"))
	resolve("the-broker-admin-secret")
	resolve("88888888-7777-8888-9999-000000000000")
	f.srv.Close()
	resolve("99999999-7777-8888-9999-000000000000")
	all := strings.Join(errs, "\n") + "\n" + f.logs.String()
	if !strings.Contains(f.logs.String(), "token check failed") || len(errs) < 5 {
		t.Fatalf("the test saw too little: %d errors, logs:\n%s", len(errs), f.logs.String())
	}
	for _, s := range secrets {
		sum := sha256.Sum256([]byte(s))
		for _, leak := range []string{s, hex.EncodeToString(sum[:]), base64.StdEncoding.EncodeToString(sum[:]), base64.RawURLEncoding.EncodeToString(sum[:])} {
			if strings.Contains(all, leak) {
				t.Fatalf("leaked %q in:\n%s", leak, all)
			}
		}
	}
}

func TestTokenFromRequest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    string
	}{
		{"X-Nomad-Token", map[string]string{"X-Nomad-Token": "abc"}, "abc"},
		{"Bearer", map[string]string{"Authorization": "Bearer abc"}, "abc"},
		{"bearer lower case, spaces", map[string]string{"Authorization": "  bearer   abc  "}, "abc"},
		{"X-Nomad-Token first", map[string]string{"X-Nomad-Token": "abc", "Authorization": "Bearer def"}, "abc"},
		{"Basic is no token", map[string]string{"Authorization": "Basic abc"}, ""},
		{"Bearer without value", map[string]string{"Authorization": "Bearer"}, ""},
		{"control character", map[string]string{"X-Nomad-Token": "a\x01b"}, ""},
		{"inner space", map[string]string{"X-Nomad-Token": "a b"}, ""},
		{"too long", map[string]string{"X-Nomad-Token": strings.Repeat("a", MaxTokenLen+1)}, ""},
		{"none", nil, ""},
	} {
		r := httptest.NewRequest(http.MethodGet, "/v1/quotas", nil)
		for k, v := range tc.headers {
			r.Header.Set(k, v)
		}
		if got := TokenFromRequest(r); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestAdminTokenMatches(t *testing.T) {
	for _, tc := range []struct {
		given, admin string
		want         bool
	}{
		{"s3cret", "s3cret", true}, {"s3cret", "s3cre", false}, {"s3cre", "s3cret", false},
		{"", "", false}, {"x", "", false}, {"", "x", false},
	} {
		if got := AdminTokenMatches(tc.given, tc.admin); got != tc.want {
			t.Errorf("AdminTokenMatches(%q, %q) = %v", tc.given, tc.admin, got)
		}
	}
}

func TestNewResolverRejectsBadAddress(t *testing.T) {
	for _, addr := range []string{"", "127.0.0.1:4646", "ftp://x", "http://"} {
		if _, err := NewResolver(Config{Address: addr}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", addr)) {
			t.Errorf("address %q: want an error naming it, got %v", addr, err)
		}
	}
}

// Token check with a warm cache (issue 10: under 50 µs).
func BenchmarkTokenCheckWarm(b *testing.B) {
	f := newFixture(b, Config{})
	secret := f.rec.secret(b, "closest glob wins")
	ctx := context.Background()
	if _, err := f.res.Resolve(ctx, secret); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		a, err := f.res.Resolve(ctx, secret)
		if err != nil || !a.Allowed("prod-api", CapSubmitJob) {
			b.Fatal("warm check failed")
		}
	}
}

// The same from many goroutines at once (the load test's 200 clients).
func BenchmarkTokenCheckWarmParallel(b *testing.B) {
	f := newFixture(b, Config{})
	secret := f.rec.secret(b, "closest glob wins")
	ctx := context.Background()
	if _, err := f.res.Resolve(ctx, secret); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(100)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a, err := f.res.Resolve(ctx, secret)
			if err != nil || !a.Allowed("prod-api", CapSubmitJob) {
				b.Error("warm check failed")
				return
			}
		}
	})
}

// Token check with a cold cache: three Nomad reads (token/self and two
// policies) on loopback against the recorded answers; reports the median
// and p99 of one check.
func BenchmarkTokenCheckCold(b *testing.B) {
	f := newFixture(b, Config{})
	secret := f.rec.secret(b, "exact label beats glob")
	ctx := context.Background()
	var ds []time.Duration
	for b.Loop() {
		f.res.Forget()
		start := time.Now()
		a, err := f.res.Resolve(ctx, secret)
		ds = append(ds, time.Since(start))
		if err != nil || !a.Allowed("prod-web", CapSubmitJob) {
			b.Fatal("cold check failed")
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(ds[min(len(ds)-1, len(ds)*99/100)].Microseconds()), "p99-µs")
	if got := f.rp.reads.Load(); got != int64(3*len(ds)) {
		b.Fatalf("%d Nomad reads for %d checks, want 3 each", got, len(ds))
	}
}
