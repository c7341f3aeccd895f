package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gputide/gputide/quota-broker/acl"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/reservation"
	"github.com/gputide/gputide/quota-broker/snapshot"
	"github.com/gputide/gputide/quota-broker/store"
)

// The tokens of the fake Nomad: a management token, team B (write on
// workspace-b), team C (write on workspace-c), a reader of workspace-b
// only, and a holder of the admin policy.
const (
	tokMgmt   = "00000000-0000-4000-8000-00000000000a"
	tokTeamB  = "00000000-0000-4000-8000-00000000000b"
	tokTeamC  = "00000000-0000-4000-8000-00000000000c"
	tokReadB  = "00000000-0000-4000-8000-00000000000d"
	tokAdminP = "00000000-0000-4000-8000-00000000000e"
	// tokSubmitC holds submit-job on workspace-c and nothing else (no
	// read-job).
	tokSubmitC = "00000000-0000-4000-8000-00000000000f"
	adminTok   = "broker-admin-secret"
)

// fakeNomad answers the ACL reads as Nomad v1.11.3 does (shapes of
// quota-broker/acl/testdata/nomad-1.11.3/recorded.json); mode switches it
// to down (500) or ACLs off (the recorded pseudo-token answer).
type fakeNomad struct {
	mu   sync.Mutex
	mode string // "", "down", "off"
}

func (f *fakeNomad) set(mode string) { f.mu.Lock(); f.mode = mode; f.mu.Unlock() }

var fakeTokens = map[string]string{
	tokMgmt:    `{"AccessorID":"acc-mgmt","SecretID":"` + tokMgmt + `","Name":"root","Type":"management","Policies":null,"Roles":null,"ExpirationTime":null}`,
	tokTeamB:   `{"AccessorID":"acc-team-b","SecretID":"` + tokTeamB + `","Name":"team-b","Type":"client","Policies":["team-b"],"Roles":null,"ExpirationTime":null}`,
	tokTeamC:   `{"AccessorID":"acc-team-c","SecretID":"` + tokTeamC + `","Name":"team-c","Type":"client","Policies":["team-c"],"Roles":null,"ExpirationTime":null}`,
	tokReadB:   `{"AccessorID":"acc-read-b","SecretID":"` + tokReadB + `","Name":"read-b","Type":"client","Policies":["read-b"],"Roles":null,"ExpirationTime":null}`,
	tokSubmitC: `{"AccessorID":"acc-submit-c","SecretID":"` + tokSubmitC + `","Name":"submit-c","Type":"client","Policies":["submit-c"],"Roles":null,"ExpirationTime":null}`,
	tokAdminP:  `{"AccessorID":"acc-admin","SecretID":"` + tokAdminP + `","Name":"admin","Type":"client","Policies":["gputide-admin"],"Roles":null,"ExpirationTime":null}`,
}

var fakePolicies = map[string]string{
	"team-b":        `namespace "workspace-b" { policy = "write" }`,
	"team-c":        `namespace "workspace-c" { policy = "write" }`,
	"read-b":        `namespace "workspace-b" { policy = "read" }`,
	"submit-c":      `namespace "workspace-c" { capabilities = ["submit-job"] }`,
	"gputide-admin": `namespace "*" { policy = "read" }`,
}

const aclOffSelf = `{"ExpirationTTL":"","AccessorID":"acls-disabled","SecretID":"","Name":"ACLs disabled token","Type":"client","Policies":null,"Roles":null,"Global":false,"Hash":null,"CreateTime":"0001-01-01T00:00:00Z","ExpirationTime":null,"CreateIndex":0,"ModifyIndex":0}`

func (f *fakeNomad) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	mode := f.mode
	f.mu.Unlock()
	switch mode {
	case "down":
		http.Error(w, "rpc error: no leader", http.StatusInternalServerError)
		return
	case "off":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, aclOffSelf)
		return
	}
	tok := r.Header.Get("X-Nomad-Token")
	self, ok := fakeTokens[tok]
	if !ok {
		http.Error(w, "ACL token not found", http.StatusForbidden)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch p := r.URL.Path; {
	case p == "/v1/acl/token/self":
		_, _ = io.WriteString(w, self)
	case strings.HasPrefix(p, "/v1/acl/policy/"):
		name := strings.TrimPrefix(p, "/v1/acl/policy/")
		rules, ok := fakePolicies[name]
		if !ok {
			http.Error(w, "Permission denied", http.StatusForbidden)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"Name": name, "Rules": rules})
	default:
		http.Error(w, "Permission denied", http.StatusForbidden)
	}
}

// fakeBackend is a broker state fixed by the test.
type fakeBackend struct {
	mu     sync.Mutex
	st     BrokerState
	leader bool
}

func (b *fakeBackend) State() BrokerState { b.mu.Lock(); defer b.mu.Unlock(); return b.st }
func (b *fakeBackend) IsLeader() bool     { b.mu.Lock(); defer b.mu.Unlock(); return b.leader }
func (b *fakeBackend) Health() any        { return map[string]any{"connected": true} }
func (b *fakeBackend) PendingOf(job *nomadapi.Job, now time.Time) ([]plan.Pending, error) {
	return PendingOfJob(job, now)
}

// clock is the test's now: 5 s after the reference snapshot.
var clock = time.Date(2026, 12, 1, 8, 0, 5, 0, time.UTC)

func referenceState(t testing.TB) BrokerState {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash("../../examples/reference/snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Compute(snap)
	if err != nil {
		t.Fatal(err)
	}
	return BrokerState{Snapshot: snap, Plan: p, SyncedAt: snap.Time}
}

// repeat is a "random" source that repeats its bytes.
type repeat []byte

func (r repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = r[i%len(r)]
	}
	return len(p), nil
}

type harness struct {
	url     string
	kv      *store.KV
	nomad   *fakeNomad
	backend *fakeBackend
	srv     *Server
	base    uint64 // the guard counter after seeding
}

type options struct {
	noQuotaWrites bool
	openReads     bool
	store         store.Store // wraps kv when set
	staleness     time.Duration
	checkTree     func(*quota.Node, quota.Settings, []reservation.Booking, time.Time) error // Config.CheckTree
	planner       func(*plan.Snapshot) (*plan.Plan, error)                                  // Config.Planner
}

func newHarness(t testing.TB, o options) *harness {
	t.Helper()
	fn := &fakeNomad{}
	nomadSrv := httptest.NewServer(fn)
	t.Cleanup(nomadSrv.Close)
	res, err := acl.NewResolver(acl.Config{Address: nomadSrv.URL, AdminPolicy: "gputide-admin", AdminToken: adminTok,
		Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	kv := store.NewMemory()
	st := referenceState(t)
	if _, _, err := kv.SeedTree(context.Background(), store.TreeRecord{Root: st.Snapshot.Quota.Clone(), Settings: st.Snapshot.Settings}); err != nil {
		t.Fatal(err)
	}
	var s store.Store = kv
	if o.store != nil {
		s = o.store
	}
	be := &fakeBackend{st: st, leader: true}
	reg := prometheus.NewRegistry()
	staleness := o.staleness
	if staleness == 0 {
		staleness = 15 * time.Second
	}
	srv, err := NewServer(Config{Backend: be, Store: s, Resolver: res, QuotaWrites: !o.noQuotaWrites,
		OpenReadsWithoutACL: o.openReads, Staleness: staleness, Now: func() time.Time { return clock },
		Random: repeat{1, 2, 3, 4}, Registerer: reg, CheckTree: o.checkTree, Planner: o.planner,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	g, err := kv.ReadGuarded(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &harness{url: hs.URL, kv: kv, nomad: fn, backend: be, srv: srv, base: g.Counter}
}

// do sends one request and returns status and body.
func (h *harness) do(t testing.TB, method, path, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	if strings.HasPrefix(body, "{") {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func errOf(t testing.TB, body []byte) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	return e
}

func (h *harness) tree(t testing.TB) *quota.Node {
	t.Helper()
	g, err := h.kv.ReadGuarded(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return g.Tree.Root
}

func (h *harness) guard(t testing.TB) uint64 {
	t.Helper()
	g, err := h.kv.ReadGuarded(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return g.Counter
}

const bookingB = `{"namespace":"workspace-b","gpus":16,"start":"2026-12-07T08:00:00+09:00","duration":"168h","id":"rb"}`

// Every endpoint's rights (DESIGN §9 table): status per token.
func TestRights(t *testing.T) {
	h := newHarness(t, options{})
	job := `{"Job":{"ID":"probe","Namespace":"workspace-b","Type":"batch","TaskGroups":[{"Name":"g","Count":1,"Tasks":[{"Name":"t","Resources":{"Devices":[{"Name":"nvidia/gpu","Count":8}]}}]}]}}`
	cases := []struct {
		method, path, body string
		want               map[string]int // token -> status
	}{
		{"GET", "/v1/agent/health", "", map[string]int{"": 200, "bogus": 200}},
		{"GET", "/v1/quotas", "", map[string]int{"": 403, "bogus": 403, tokTeamB: 200, tokReadB: 200, tokMgmt: 200}},
		{"GET", "/v1/metrics", "", map[string]int{"": 403, tokTeamC: 200}},
		{"GET", "/v1/queue", "", map[string]int{"": 403, tokTeamC: 200}},
		{"GET", "/v1/preemptions", "", map[string]int{"": 403, tokTeamC: 200}},
		{"GET", "/v1/reservations", "", map[string]int{"": 403, tokTeamC: 200}},
		{"GET", "/v1/plan", "", map[string]int{"": 403, tokTeamB: 403, tokMgmt: 200, tokAdminP: 200}},
		{"GET", "/v1/snapshot", "", map[string]int{tokTeamB: 403, tokMgmt: 200}},
		{"POST", "/v1/plan", job, map[string]int{"": 403, tokTeamC: 403, tokReadB: 403, tokTeamB: 200}},
		{"POST", "/v1/plan", `{"Namespace":"workspace-b","JobID":"llama-ft-13b"}`, map[string]int{tokTeamC: 403, tokReadB: 200}},
		{"POST", "/v1/quota/move", `{"from":"Quota1.2","to":"Quota1.1","gpus":1}`, map[string]int{"": 403, tokTeamB: 403, tokReadB: 403}},
		{"PUT", "/v1/quota/Quota1.1", `{"gpus":48}`, map[string]int{tokTeamB: 403}},
		{"PUT", "/v1/quotas", `{"root":{"name":"Quota1","gpus":128}}`, map[string]int{tokTeamB: 403}},
		{"POST", "/v1/reservations", bookingB, map[string]int{"": 403, tokTeamC: 403, tokReadB: 403}},
		{"DELETE", "/v1/reservation/nope", "", map[string]int{"": 403}},
		{"GET", "/v1/nothing", "", map[string]int{tokMgmt: 404}},
	}
	for _, c := range cases {
		for tok, want := range c.want {
			if got, body := h.do(t, c.method, c.path, tok, c.body); got != want {
				t.Errorf("%s %s token %.12q: %d, want %d: %s", c.method, c.path, tok, got, want, body)
			}
		}
	}
	if g := h.guard(t); g != h.base {
		t.Errorf("guard counter %d after refused writes, want %d", g, h.base)
	}
}

func TestQuotasFigures(t *testing.T) {
	h := newHarness(t, options{})
	code, body := h.do(t, "GET", "/v1/quotas", tokTeamB, "")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var got QuotasResponse
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.StateAgeSeconds != 5 || got.StalenessSeconds != 15 {
		t.Errorf("state %+v, want age 5 staleness 15", got.State)
	}
	usage := map[string]plan.Usage{}
	for _, u := range h.backend.st.Plan.Usage {
		usage[u.Quota] = u
	}
	var want []Quota
	for _, n := range []struct {
		name, parent string
		gpus, queued int
		ns           []string
	}{{"Quota1", "", 128, 32, []string{"workspace-a"}}, {"Quota1.1", "Quota1", 48, 16, []string{"workspace-b"}}, {"Quota1.2", "Quota1", 80, 0, []string{"workspace-c"}}} {
		u := usage[n.name]
		want = append(want, Quota{Name: n.name, Parent: n.parent, Flavor: "gpu", NominalGPUs: n.gpus, UsedGPUs: u.Used, NonidleGPUs: u.NonIdle,
			BorrowedGPUs: u.Borrowed, DebtGPUs: u.Debt, LendableGPUs: u.Lendable, QueuedGPUs: n.queued, Workspaces: n.ns,
			// DESIGN L14: the default weight is the nominal; by day team A's
			// inference on Quota1 leaves its children's fair shares undefined.
			Weight: n.gpus, BorrowedShare: Share(float64(u.Borrowed) / float64(n.gpus))})
	}
	if diff := cmp.Diff(want, got.Quotas); diff != "" {
		t.Errorf("quotas (-want +got):\n%s", diff)
	}
	if usage["Quota1"].Used == 0 {
		t.Errorf("reference plan has no usage: %+v", usage)
	}
	// The Go client reads the same shape.
	c, _ := NewClient(h.url, tokTeamB, time.Second)
	cr, err := c.Quotas(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, cr.Quotas); diff != "" {
		t.Errorf("client quotas (-want +got):\n%s", diff)
	}
}

func TestQueueRedacted(t *testing.T) {
	h := newHarness(t, options{})
	code, body := h.do(t, "GET", "/v1/queue", tokTeamC, "")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var got QueueResponse
	_ = json.Unmarshal(body, &got)
	sub := time.Date(2026, 12, 1, 7, 40, 0, 0, time.UTC)
	want := []QueueEntry{{Namespace: "workspace-b", GPUs: 16}, {Namespace: "workspace-a", GPUs: 16}}
	if diff := cmp.Diff(want, got.Queue); diff != "" {
		t.Errorf("team C's queue (-want +got):\n%s", diff)
	}
	_, body = h.do(t, "GET", "/v1/queue?namespace=workspace-b", tokTeamB, "")
	got = QueueResponse{}
	_ = json.Unmarshal(body, &got)
	if len(got.Queue) != 1 {
		t.Fatalf("team B's queue: %s", body)
	}
	e := got.Queue[0]
	if e.Job != "llama-ft-13b" || e.Quota != "Quota1.1" || e.Count != 2 || e.AllocGPUs != 8 || !e.SubmittedAt.Equal(sub) || e.WaitedSeconds != 1205 || e.Action == "" || e.Rule == "" {
		t.Errorf("team B's entry: %+v", e)
	}
}

func TestQuotaMove(t *testing.T) {
	h := newHarness(t, options{})
	code, body := h.do(t, "POST", "/v1/quota/move", tokMgmt, `{"from":"Quota1.2","to":"Quota1.1","gpus":8}`)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	root := h.tree(t)
	q11, q12 := root.Find("Quota1.1"), root.Find("Quota1.2")
	if q11.GPUs.Of(quota.ImplicitFlavor) != 56 || q12.GPUs.Of(quota.ImplicitFlavor) != 72 || !q11.ChangedAt.Equal(clock) || !q12.ChangedAt.Equal(clock) {
		t.Errorf("after move: Quota1.1 %v @%v, Quota1.2 %v @%v", q11.GPUs, q11.ChangedAt, q12.GPUs, q12.ChangedAt)
	}
	recs, err := h.kv.ChangeRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []store.ChangeRecord{{At: clock, Op: "quota move", Accessor: "acc-mgmt", Subject: "Quota1.2,Quota1.1", Detail: "Quota1.2 -> Quota1.1: 8 GPUs", Guard: h.base}}
	if diff := cmp.Diff(want, recs); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if strings.Contains(string(body), tokMgmt) {
		t.Errorf("answer echoes the token")
	}
}

func TestQuotaWritesBadInput(t *testing.T) {
	h := newHarness(t, options{})
	cases := []struct {
		method, path, body string
		status             int
		field, msg         string
	}{
		{"POST", "/v1/quota/move", `{"from":"Quota1.2","to":"Quota1.1","gpus":0}`, 400, "gpus", `gpus "0": must be from 1`},
		{"POST", "/v1/quota/move", `{"from":"","to":"Quota1.1","gpus":1}`, 400, "from", `from "": is empty`},
		{"POST", "/v1/quota/move", `{"from":"Quota1.2","to":"Quota1.1","gpus":"8"}`, 400, "gpus", "want a JSON int"},
		{"POST", "/v1/quota/move", `{"from":"Quota1.2","to":"Quota1.1","gpu":8}`, 400, "gpu", `unknown field "gpu"`},
		{"POST", "/v1/quota/move", `{"from":"Quota9","to":"Quota1.1","gpus":8}`, 404, "from", `from "Quota9": no such quota node`},
		{"POST", "/v1/quota/move", `{"from":"Quota1.1","to":"Quota1.2","gpus":49}`, 409, "", "Quota1.1 has 48 GPUs nominal, 49 asked"},
		{"POST", "/v1/quota/move", `{"from":"Quota1","to":"Quota1.1","gpus":8}`, 409, "", "L1: Quota1: children 56 + 80 = 136 > 120"},
		{"PUT", "/v1/quota/Quota1.1", `{"gpus":-1}`, 400, "gpus", `gpus "-1"`},
		{"PUT", "/v1/quota/Quota1.1", `{}`, 400, "gpus", "is missing"},
		{"PUT", "/v1/quota/Quota1.1", `{"gpus":56}`, 409, "", "L1: Quota1: children 56 + 80 = 136 > 128; move GPUs between nodes with `gputide quota move`"},
		{"PUT", "/v1/quota/Nope", `{"gpus":5}`, 404, "", `quota "Nope": no such quota node`},
		{"PUT", "/v1/quotas", `quota "Q" { gpus = }`, 400, "body", "quotas.hcl"},
		{"PUT", "/v1/quotas", "quota \"Q\" {\n  gpus = 8\n  quota \"A\" {\n    gpus = 9\n  }\n}\n", 409, "", "L1:"},
		{"PUT", "/v1/quotas", `{"root":null}`, 400, "root", "is missing"},
	}
	for _, c := range cases {
		code, body := h.do(t, c.method, c.path, tokMgmt, c.body)
		e := errOf(t, body)
		if code != c.status || e.Field != c.field || !strings.Contains(e.Error, c.msg) {
			t.Errorf("%s %s %s: %d %+v, want %d field %q containing %q", c.method, c.path, c.body, code, e, c.status, c.field, c.msg)
		}
	}
	if g := h.guard(t); g != h.base {
		t.Errorf("guard %d, want %d: a refused write wrote", g, h.base)
	}
}

func TestQuotaApplyAndScale(t *testing.T) {
	h := newHarness(t, options{})
	code, body := h.do(t, "PUT", "/v1/quota/Quota1.2", tokAdminP, `{"gpus":72}`)
	if code != 200 {
		t.Fatalf("scale: %d %s", code, body)
	}
	hcl := `quota "Quota1" {
  gpus = 128
  namespaces = ["workspace-a"]
  quota "Quota1.1" {
    gpus = 48
    namespaces = ["workspace-b"]
  }
  quota "Quota1.2" {
    gpus = 64
    namespaces = ["workspace-c"]
  }
}
`
	code, body = h.do(t, "PUT", "/v1/quotas", tokMgmt, hcl)
	if code != 200 {
		t.Fatalf("apply: %d %s", code, body)
	}
	root := h.tree(t)
	if root.Find("Quota1.2").GPUs.Of(quota.ImplicitFlavor) != 64 || !root.Find("Quota1.2").ChangedAt.Equal(clock) || !root.Find("Quota1.1").ChangedAt.IsZero() {
		t.Errorf("after apply: %+v %+v", root.Find("Quota1.2"), root.Find("Quota1.1"))
	}
	recs, _ := h.kv.ChangeRecords(context.Background())
	if len(recs) != 2 || recs[0].Accessor != "acc-admin" || recs[1].Op != "quota apply" || recs[1].Guard != h.base+1 {
		t.Errorf("history: %+v", recs)
	}
}

func TestQuotaWritesWithoutConsul(t *testing.T) {
	h := newHarness(t, options{noQuotaWrites: true})
	code, body := h.do(t, "POST", "/v1/quota/move", tokMgmt, `{"from":"Quota1.2","to":"Quota1.1","gpus":8}`)
	if code != 409 || !strings.Contains(errOf(t, body).Error, "no consul store") {
		t.Errorf("%d %s", code, body)
	}
}

// racingStore makes every guarded write lose its race: inside validate,
// another writer (a peer client: one client's guarded writes queue one
// after the other) moves the guard.
type racingStore struct{ *store.KV }

func (s racingStore) Guarded(ctx context.Context, validate store.ValidateFunc) (*store.Guarded, error) {
	other, err := s.KV.Peer()
	if err != nil {
		return nil, err
	}
	return s.KV.Guarded(ctx, func(g *store.Guarded) ([]store.Change, error) {
		if _, err := other.Guarded(ctx, func(*store.Guarded) ([]store.Change, error) { return nil, nil }); err != nil {
			return nil, err
		}
		return validate(g)
	})
}

// downStore is a store whose backend does not answer.
type downStore struct{ *store.KV }

func (downStore) Guarded(context.Context, store.ValidateFunc) (*store.Guarded, error) {
	return nil, &store.Error{Op: "guarded", Key: store.KeyGuard, Kind: store.ErrUnavailable, Err: errors.New("connection refused")}
}

func (downStore) ReadGuarded(context.Context) (*store.Guarded, error) {
	return nil, &store.Error{Op: "read", Kind: store.ErrUnavailable, Err: errors.New("connection refused")}
}

func (downStore) Preemptions(context.Context) ([]store.Preemption, error) {
	return nil, &store.Error{Op: "list", Kind: store.ErrUnavailable, Err: errors.New("connection refused")}
}

func TestGuardConflictAndStoreDown(t *testing.T) {
	writes := []struct{ method, path, token, body string }{
		{"POST", "/v1/quota/move", tokMgmt, `{"from":"Quota1.2","to":"Quota1.1","gpus":8}`},
		{"PUT", "/v1/quota/Quota1.2", tokMgmt, `{"gpus":8}`},
		{"PUT", "/v1/quotas", tokMgmt, `{"root":{"name":"Quota1","gpus":128}}`},
		{"POST", "/v1/reservations", tokTeamB, bookingB},
		{"DELETE", "/v1/reservation/rb", tokTeamB, ""},
	}
	t.Run("conflict", func(t *testing.T) {
		kv := store.NewMemory()
		h := newHarness(t, options{store: racingStore{kv}})
		h.kv = kv
		_, _, _ = kv.SeedTree(context.Background(), store.TreeRecord{Root: h.backend.st.Snapshot.Quota.Clone()})
		for _, w := range writes[:4] {
			code, body := h.do(t, w.method, w.path, w.token, w.body)
			if code != 409 || !strings.Contains(errOf(t, body).Error, "kept changing") {
				t.Errorf("%s %s: %d %s, want 409 guard conflict", w.method, w.path, code, body)
			}
		}
		if _, err := kv.ChangeRecords(context.Background()); err != nil {
			t.Fatal(err)
		}
		if recs, _ := kv.ChangeRecords(context.Background()); len(recs) != 0 {
			t.Errorf("conflicting writes left records: %+v", recs)
		}
	})
	t.Run("store down", func(t *testing.T) {
		h := newHarness(t, options{store: downStore{store.NewMemory()}})
		for _, w := range writes {
			code, body := h.do(t, w.method, w.path, w.token, w.body)
			if e := errOf(t, body).Error; code != 503 || !strings.Contains(e, "not answering") || !strings.Contains(e, "nothing was written") {
				t.Errorf("%s %s: %d %s, want 503 saying nothing was written", w.method, w.path, code, body)
			}
		}
		// The status page is a read too: its store errors do not say
		// that nothing was written either.
		jar, _ := cookiejar.New(nil)
		browser := &http.Client{Jar: jar}
		resp, err := browser.PostForm(h.url+"/ui/login", url.Values{"token": {tokTeamB}})
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(page), "not answering") || strings.Contains(string(page), "written") {
			t.Errorf("status page with the store down: %d, want 200 with the store's error and no \"nothing was written\": %s", resp.StatusCode, page)
		}
		// A read writes nothing: its 503 does not say so (issue 16).
		for _, p := range []string{"/v1/reservations", "/v1/preemptions", "/v1/reservation/rb"} {
			code, body := h.do(t, "GET", p, tokTeamB, "")
			if e := errOf(t, body).Error; code != 503 || !strings.HasPrefix(e, "store (Consul) not answering: store: ") || strings.Contains(e, "written") {
				t.Errorf("GET %s: %d %s, want 503 \"store (Consul) not answering: ...\" without \"nothing was written\"", p, code, body)
			}
		}
	})
}

func TestNomadDownAndACLsOff(t *testing.T) {
	h := newHarness(t, options{})
	h.nomad.set("down")
	for _, p := range []string{"/v1/quotas", "/v1/queue", "/v1/plan", "/v1/reservations"} {
		code, body := h.do(t, "GET", p, tokTeamB, "")
		if code != 503 || !strings.Contains(errOf(t, body).Error, "Nomad is not answering") || strings.Contains(string(body), tokTeamB) {
			t.Errorf("GET %s with Nomad down: %d %s, want 503", p, code, body)
		}
	}
	if code, _ := h.do(t, "GET", "/v1/agent/health", "", ""); code != 200 {
		t.Errorf("health with Nomad down: %d", code)
	}

	h = newHarness(t, options{})
	h.nomad.set("off")
	if code, _ := h.do(t, "GET", "/v1/quotas", "", ""); code != 403 {
		t.Errorf("ACLs off, no token, reads closed: %d, want 403", code)
	}
	if code, body := h.do(t, "POST", "/v1/quota/move", adminTok, `{"from":"Quota1.2","to":"Quota1.1","gpus":8}`); code != 200 {
		t.Errorf("ACLs off, admin token move: %d %s", code, body)
	}
	recs, _ := h.kv.ChangeRecords(context.Background())
	if len(recs) != 1 || recs[0].Accessor != "admin-token" {
		t.Errorf("history: %+v", recs)
	}

	h = newHarness(t, options{openReads: true})
	h.nomad.set("off")
	if code, body := h.do(t, "GET", "/v1/queue", "", ""); code != 200 || !strings.Contains(string(body), "llama-ft-13b") {
		t.Errorf("ACLs off, open reads: %d %s", code, body)
	}
	if code, _ := h.do(t, "POST", "/v1/reservations", "", bookingB); code != 403 {
		t.Errorf("ACLs off, open reads, booking without the admin token: %d, want 403", code)
	}
	if code, _ := h.do(t, "GET", "/v1/quotas", adminTok+"x", ""); code != 200 {
		t.Errorf("ACLs off, open reads, wrong token reads: %d, want 200", code)
	}
}

func TestStandbyAndStaleness(t *testing.T) {
	h := newHarness(t, options{})
	h.backend.leader = false
	for _, p := range []string{"/v1/quotas", "/v1/queue", "/v1/preemptions", "/v1/reservations", "/v1/plan", "/v1/snapshot"} {
		if code, body := h.do(t, "GET", p, tokMgmt, ""); code != 200 {
			t.Errorf("standby GET %s: %d %s", p, code, body)
		}
	}
	if code, body := h.do(t, "POST", "/v1/reservations", tokTeamB, bookingB); code != 201 {
		t.Errorf("standby booking: %d %s", code, body)
	}
	_, body := h.do(t, "GET", "/v1/agent/health", "", "")
	var health map[string]any
	_ = json.Unmarshal(body, &health)
	if health["is_leader"] != false || health["connected"] != true {
		t.Errorf("health %s", body)
	}
	h.backend.st.SyncedAt = clock.Add(-16 * time.Second)
	code, body := h.do(t, "GET", "/v1/quotas", tokMgmt, "")
	if code != 503 || !strings.Contains(errOf(t, body).Error, "16s old, past its staleness bound of 15s") {
		t.Errorf("stale read: %d %s", code, body)
	}
}

func TestReservations(t *testing.T) {
	h := newHarness(t, options{})
	code, body := h.do(t, "POST", "/v1/reservations", tokTeamB, bookingB)
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	var created ReservationResponse
	_ = json.Unmarshal(body, &created)
	tokyo := time.FixedZone("", 9*3600)
	start := time.Date(2026, 12, 7, 8, 0, 0, 0, tokyo)
	end := start.Add(168 * time.Hour)
	want := ReservationEntry{Namespace: "workspace-b", GPUs: 16, ID: "rb", Node: "Quota1.1", AllocGPUs: 8, Flavor: "gpu", Start: &start, End: &end}
	if diff := cmp.Diff(want, created.Reservation, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	// Refusal: 40 more on Quota1.1 (48) overlapping.
	code, body = h.do(t, "POST", "/v1/reservations", tokTeamB, `{"namespace":"workspace-b","gpus":40,"start":"2026-12-08T09:00:00+09:00","duration":"24h"}`)
	e := errOf(t, body)
	if code != 409 || e.Refusal == nil || e.Refusal.Node != "Quota1.1" || e.Refusal.Booked != 16 || e.Refusal.Nominal != 48 || e.Refusal.Asked != 40 ||
		e.Earliest == nil || !e.Earliest.Equal(end) || !strings.Contains(e.Error, "Quota1.1 at 2026-12-08T09:00+09:00: 16 of 48 GPUs booked, 40 asked") {
		t.Errorf("refusal: %d %s", code, body)
	}
	// Bad input names the field.
	for _, c := range []struct{ body, field, msg string }{
		{`{"namespace":"workspace-b","gpus":16,"start":"2026-12-07T08:00:00+09:00","duration":"90d"}`, "duration", `duration "90d": not a Go duration`},
		{`{"namespace":"workspace-b","gpus":16,"start":"tomorrow","duration":"1h"}`, "start", `start "tomorrow"`},
		{`{"namespace":"workspace-b","gpus":16,"alloc_gpus":5,"start":"2026-12-07T08:00:00+09:00","duration":"1h"}`, "alloc_gpus", "must divide gpus"},
		{`{"namespace":"workspace-b","gpus":16,"start":"2026-11-30T08:00:00Z","duration":"1h"}`, "start", "not in the future"},
		{`{"namespace":"workspace-b","gpus":16,"start":"2026-12-07T08:00:00Z","duration":"1h","id":"Bad_ID"}`, "id", `id "Bad_ID"`},
		{`{"namespace":"nowhere","gpus":16,"start":"2026-12-07T08:00:00Z","duration":"1h"}`, "namespace", "not bound"},
	} {
		tok := tokTeamB
		if c.field == "namespace" {
			tok = tokMgmt
		}
		code, body := h.do(t, "POST", "/v1/reservations", tok, c.body)
		e := errOf(t, body)
		if code != 400 || e.Field != c.field || !strings.Contains(e.Error, c.msg) {
			t.Errorf("%s: %d %+v, want 400 field %s %q", c.body, code, e, c.field, c.msg)
		}
	}
	// Team C cannot see B's booking, and a taken ID gives no details.
	if code, _ := h.do(t, "GET", "/v1/reservation/rb", tokTeamC, ""); code != 404 {
		t.Errorf("C reads B's booking: %d, want 404", code)
	}
	if code, _ := h.do(t, "GET", "/v1/reservation/rb", tokReadB, ""); code != 200 {
		t.Errorf("B reader reads B's booking: %d, want 200", code)
	}
	code, body = h.do(t, "POST", "/v1/reservations", tokTeamC, `{"id":"rb","namespace":"workspace-c","gpus":8,"start":"2026-12-07T08:00:00Z","duration":"1h"}`)
	if e := errOf(t, body); code != 409 || e.Error != `reservation ID "rb" is taken` {
		t.Errorf("taken ID from C: %d %s", code, body)
	}
	_, body = h.do(t, "GET", "/v1/reservations", tokTeamC, "")
	var list ReservationsResponse
	_ = json.Unmarshal(body, &list)
	if diff := cmp.Diff([]ReservationEntry{{Namespace: "workspace-b", GPUs: 16}}, list.Reservations); diff != "" {
		t.Errorf("C's list (-want +got):\n%s", diff)
	}
	// Cancel: C gets 404, running allocations need force.
	if code, _ := h.do(t, "DELETE", "/v1/reservation/rb", tokTeamC, ""); code != 404 {
		t.Errorf("C cancels B's booking: %d, want 404", code)
	}
	if code, _ := h.do(t, "DELETE", "/v1/reservation/rb", tokReadB, ""); code != 403 {
		t.Errorf("B reader cancels: %d, want 403", code)
	}
	h.backend.st.Snapshot.Allocations[0].Reservation = "rb"
	code, body = h.do(t, "DELETE", "/v1/reservation/rb", tokTeamB, "")
	if code != 409 || !strings.Contains(errOf(t, body).Error, "1 running allocations; cancel with -force") {
		t.Errorf("cancel with running: %d %s", code, body)
	}
	if code, body := h.do(t, "DELETE", "/v1/reservation/rb?force=yes", tokTeamB, ""); code != 400 || errOf(t, body).Field != "force" {
		t.Errorf("force=yes: %d %s", code, body)
	}
	if code, body := h.do(t, "DELETE", "/v1/reservation/rb?force=true", tokTeamB, ""); code != 200 {
		t.Errorf("forced cancel: %d %s", code, body)
	}
	hist, _ := h.kv.ReservationHistory(context.Background())
	if len(hist) != 1 || hist[0].Outcome != "forced" || hist[0].Booking.ID != "rb" {
		t.Errorf("reservation history %+v", hist)
	}
	recs, _ := h.kv.ChangeRecords(context.Background())
	if len(recs) != 2 || recs[0].Accessor != "acc-team-b" || recs[1].Op != "reservation cancel" {
		t.Errorf("change records %+v", recs)
	}
	// The cancelled booking is read from history, by its readers only.
	code, body = h.do(t, "GET", "/v1/reservation/rb", tokTeamB, "")
	var gone ReservationResponse
	_ = json.Unmarshal(body, &gone)
	endedAt := clock
	wantGone := ReservationEntry{Namespace: "workspace-b", GPUs: 16, ID: "rb", Node: "Quota1.1", AllocGPUs: 8, Flavor: "gpu", Start: &start, End: &end,
		Running: 1, Outcome: "forced", EndedAt: &endedAt}
	if diff := cmp.Diff(wantGone, gone.Reservation, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); code != 200 || diff != "" {
		t.Errorf("cancelled booking from history: %d (-want +got):\n%s", code, diff)
	}
	if code, _ := h.do(t, "GET", "/v1/reservation/rb", tokTeamC, ""); code != 404 {
		t.Errorf("C reads B's cancelled booking: %d, want 404", code)
	}
	if code, _ := h.do(t, "GET", "/v1/reservation/r-nowhere", tokMgmt, ""); code != 404 {
		t.Errorf("unknown booking: %d, want 404", code)
	}
	if code, _ := h.do(t, "DELETE", "/v1/reservation/rb", tokTeamB, ""); code != 404 {
		t.Errorf("cancelling a booking in history: %d, want 404", code)
	}
	_, body = h.do(t, "GET", "/v1/reservations", tokTeamB, "")
	list = ReservationsResponse{}
	_ = json.Unmarshal(body, &list)
	if len(list.Reservations) != 0 {
		t.Errorf("the list shows the cancelled booking: %+v", list.Reservations)
	}
	// A default ID from the random source.
	code, body = h.do(t, "POST", "/v1/reservations", tokTeamC, `{"namespace":"workspace-c","gpus":8,"start":"2026-12-07T08:00:00Z","duration":"1h"}`)
	if code != 201 || !strings.Contains(string(body), `"id": "r-01020304"`) {
		t.Errorf("default ID: %d %s", code, body)
	}
}

// A move that would leave bookings above a nominal is refused (L9 + L10).
func TestMoveRefusedByBookings(t *testing.T) {
	h := newHarness(t, options{})
	if code, body := h.do(t, "POST", "/v1/reservations", tokTeamB, `{"namespace":"workspace-b","gpus":48,"start":"2026-12-07T08:00:00Z","duration":"1h"}`); code != 201 {
		t.Fatalf("%d %s", code, body)
	}
	code, body := h.do(t, "POST", "/v1/quota/move", tokMgmt, `{"from":"Quota1.1","to":"Quota1.2","gpus":8}`)
	if code != 409 || !strings.Contains(errOf(t, body).Error, "L10") || !strings.Contains(errOf(t, body).Error, "Quota1.1") {
		t.Errorf("%d %s", code, body)
	}
	if h.tree(t).Find("Quota1.1").GPUs.Of(quota.ImplicitFlavor) != 48 {
		t.Errorf("tree changed")
	}
}

func TestPreview(t *testing.T) {
	h := newHarness(t, options{})
	job := `{"Job":{"ID":"probe","Namespace":"workspace-b","Type":"batch","Priority":50,"Datacenters":["dc1"],"TaskGroups":[{"Name":"g","Count":1,"Tasks":[{"Name":"t","Resources":{"Devices":[{"Name":"nvidia/gpu","Count":8}]}}]}]}}`
	code, body := h.do(t, "POST", "/v1/plan", tokTeamB, job)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var got PlanResponse
	_ = json.Unmarshal(body, &got)
	// The same plan made directly by the core.
	snap := *h.backend.st.Snapshot
	snap.Time = clock
	pend, _ := PendingOfJob(&nomadapi.Job{ID: ptr("probe"), Namespace: ptr("workspace-b"), Type: ptr("batch"), Priority: ptr(50),
		Datacenters: []string{"dc1"}, TaskGroups: []*nomadapi.TaskGroup{{Name: ptr("g"), Count: ptr(1),
			Tasks: []*nomadapi.Task{{Name: "t", Resources: &nomadapi.Resources{Devices: []*nomadapi.RequestedDevice{{Name: "nvidia/gpu", Count: ptr(uint64(8))}}}}}}}}, clock)
	snap.Pending = append(append([]plan.Pending(nil), snap.Pending...), pend...)
	p, err := plan.Compute(&snap)
	if err != nil {
		t.Fatal(err)
	}
	want := previewOf(p, &snap, plan.JobKey{Namespace: "workspace-b", Job: "probe"}, &caller{auth: nil}, got.State)
	if len(want.Actions) == 0 {
		t.Fatalf("core gives the probe no action: %+v", p.Actions)
	}
	if diff := cmp.Diff(want.Actions, got.Actions); diff != "" {
		t.Errorf("preview actions (-want +got):\n%s", diff)
	}
	if len(got.Stops) != len(want.Stops) {
		t.Errorf("stops %d, want %d", len(got.Stops), len(want.Stops))
	}
	for _, c := range []struct {
		body       string
		code       int
		field, msg string
	}{
		{`{"Job":{"ID":"x","Namespace":"workspace-b","Type":"weird"}}`, 400, "Job.Type", `Job.Type "weird"`},
		{`{"Job":{"Namespace":"workspace-b"}}`, 400, "Job.ID", "is empty"},
		{`{"Job":{"ID":7}}`, 400, "Job.ID", "want a JSON string"},
		{`{}`, 400, "JobID", "is empty"},
		{`[`, 400, "body", "not the documented JSON"},
		{`{"Namespace":"workspace-b","JobID":"nope"}`, 404, "", `job "nope" is not waiting`},
	} {
		code, body := h.do(t, "POST", "/v1/plan", tokTeamB, c.body)
		e := errOf(t, body)
		if code != c.code || e.Field != c.field || !strings.Contains(e.Error, c.msg) {
			t.Errorf("%s: %d %+v, want %d %s %q", c.body, code, e, c.code, c.field, c.msg)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestPreemptionsAndMetrics(t *testing.T) {
	h := newHarness(t, options{})
	lock, err := h.kv.Lock(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	at := clock.Add(-time.Hour)
	for _, p := range []store.Preemption{
		{At: at, Alloc: "a1", Namespace: "workspace-c", Job: "sweep", GPUs: 8, For: "workspace-b/llama/worker", Rule: "L5.1"},
		{At: at.Add(-48 * time.Hour), Alloc: "a0", Namespace: "workspace-b", Job: "old", GPUs: 4, Rule: "L5.1"},
	} {
		if err := h.kv.AddPreemption(context.Background(), lock, p); err != nil {
			t.Fatal(err)
		}
	}
	_, body := h.do(t, "GET", "/v1/preemptions?since=24h", tokTeamB, "")
	var got PreemptionsResponse
	_ = json.Unmarshal(body, &got)
	if diff := cmp.Diff([]PreemptionEntry{{Namespace: "workspace-c", GPUs: 8}}, got.Preemptions); diff != "" {
		t.Errorf("B's view (-want +got):\n%s", diff)
	}
	_, body = h.do(t, "GET", "/v1/preemptions?namespace=workspace-c", tokTeamC, "")
	got = PreemptionsResponse{}
	_ = json.Unmarshal(body, &got)
	// C's own stop, for a job of workspace-b, which C cannot read: the
	// claimant is shown by its namespace only (issue 16).
	want := []PreemptionEntry{{Namespace: "workspace-c", GPUs: 8, At: &at, Alloc: "a1", Job: "sweep", For: "workspace-b", Rule: "L5.1"}}
	if diff := cmp.Diff(want, got.Preemptions); diff != "" {
		t.Errorf("C's view (-want +got):\n%s", diff)
	}
	_, body = h.do(t, "GET", "/v1/preemptions?namespace=workspace-c", tokMgmt, "")
	got = PreemptionsResponse{}
	_ = json.Unmarshal(body, &got)
	want[0].For = "workspace-b/llama/worker"
	if diff := cmp.Diff(want, got.Preemptions); diff != "" {
		t.Errorf("the admin's view (-want +got):\n%s", diff)
	}
	if code, body := h.do(t, "GET", "/v1/preemptions?since=yesterday", tokTeamB, ""); code != 400 || errOf(t, body).Field != "since" {
		t.Errorf("bad since: %d %s", code, body)
	}
	_, _ = h.do(t, "GET", "/v1/quotas", "bogus", "")
	h.nomad.set("down")
	_, _ = h.do(t, "GET", "/v1/quotas", "bogus-2", "")
	h.nomad.set("")
	_, body = h.do(t, "GET", "/v1/metrics", tokMgmt, "")
	for _, line := range []string{
		`gputide_token_checks_total{result="denied"} 1`,
		`gputide_token_checks_total{result="unavailable"} 1`,
		`gputide_quota_booked_gpus{flavor="gpu",quota="Quota1.1"} 0`,
		`gputide_quota_displaced_gpus{flavor="gpu",quota="Quota1"} 0`,
		`gputide_queue_wait_seconds_count{quota="Quota1.1"} 1`,
		`gputide_queue_wait_seconds_sum{quota="Quota1.1"} 1205`,
	} {
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
}

// Every endpoint but health: a token Nomad does not know gets 403, and
// with Nomad down every token check answers 503 (fail closed); nothing is
// written either way.
func TestEveryEndpointBadTokenAndNomadDown(t *testing.T) {
	h := newHarness(t, options{})
	endpoints := []struct{ method, path, body string }{
		{"GET", "/v1/quotas", ""}, {"GET", "/v1/metrics", ""}, {"GET", "/v1/queue", ""}, {"GET", "/v1/preemptions", ""},
		{"GET", "/v1/plan", ""}, {"GET", "/v1/snapshot", ""}, {"GET", "/v1/reservations", ""}, {"GET", "/v1/reservation/rb", ""},
		{"POST", "/v1/plan", `{"Namespace":"workspace-b","JobID":"llama-ft-13b"}`},
		{"POST", "/v1/quota/move", `{"from":"Quota1.2","to":"Quota1.1","gpus":1}`},
		{"PUT", "/v1/quota/Quota1.1", `{"gpus":40}`},
		{"PUT", "/v1/quotas", `{"root":{"name":"Quota1","gpus":128}}`},
		{"POST", "/v1/reservations", bookingB},
		{"DELETE", "/v1/reservation/rb", ""},
	}
	for _, e := range endpoints {
		if code, body := h.do(t, e.method, e.path, "00000000-0000-4000-8000-0000000000ff", e.body); code != 403 {
			t.Errorf("%s %s unknown token: %d %s, want 403", e.method, e.path, code, body)
		}
	}
	h.nomad.set("down")
	for _, e := range endpoints {
		// A token not yet in the cache: its check needs Nomad.
		if code, body := h.do(t, e.method, e.path, "00000000-0000-4000-8000-0000000000fe", e.body); code != 503 {
			t.Errorf("%s %s with Nomad down: %d %s, want 503", e.method, e.path, code, body)
		}
	}
	if g := h.guard(t); g != h.base {
		t.Errorf("guard %d, want %d: a refused write wrote", g, h.base)
	}
}

// A booking's limits come from the stored tree's settings (DESIGN L10,
// issue 9), not the server's defaults: with reservation_min_duration = 2m
// and reservation_max_ahead = 24h in the tree, a 2-minute booking is taken
// and one starting 25 h ahead is refused naming the tree's 24h.
func TestBookingLimitsFromTreeSettings(t *testing.T) {
	h := newHarness(t, options{})
	ctx := context.Background()
	_, err := h.kv.Guarded(ctx, func(g *store.Guarded) ([]store.Change, error) {
		rec := *g.Tree
		rec.Settings.ReservationMinDuration = 2 * time.Minute
		rec.Settings.ReservationMaxAhead = 24 * time.Hour
		return []store.Change{store.PutTree(rec)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	start := clock.Add(time.Minute).UTC().Format(time.RFC3339)
	code, body := h.do(t, "POST", "/v1/reservations", tokTeamB, `{"id":"short","namespace":"workspace-b","gpus":8,"start":"`+start+`","duration":"2m"}`)
	if code != 201 {
		t.Fatalf("2-minute booking under reservation_min_duration = 2m: %d %s", code, body)
	}
	code, body = h.do(t, "POST", "/v1/reservations", tokTeamB, `{"namespace":"workspace-b","gpus":8,"start":"`+start+`","duration":"1m"}`)
	if e := errOf(t, body); code != 400 || e.Field != "duration" || !strings.Contains(e.Error, "reservation_min_duration (2m0s)") {
		t.Errorf("1-minute booking: %d %s, want 400 naming reservation_min_duration (2m0s)", code, body)
	}
	late := clock.Add(25 * time.Hour).UTC().Format(time.RFC3339)
	code, body = h.do(t, "POST", "/v1/reservations", tokTeamB, `{"namespace":"workspace-b","gpus":8,"start":"`+late+`","duration":"1h"}`)
	if e := errOf(t, body); code != 400 || e.Field != "start" || !strings.Contains(e.Error, "24h") {
		t.Errorf("booking 25 h ahead under reservation_max_ahead = 24h: %d %s, want 400 naming 24h", code, body)
	}
}

// A booking whose end has passed leaves the list at once, before the
// leader moves it to history; GET by ID still finds it, in reservations/
// until the move and in history after it (DESIGN L10 "End").
func TestEndedBookingLeavesTheList(t *testing.T) {
	h := newHarness(t, options{})
	ended := reservation.Booking{ID: "r-old", Namespace: "workspace-b", Node: "Quota1.1", GPUs: 8, AllocGPUs: 8,
		Start: clock.Add(-2 * time.Hour), End: clock}
	live := reservation.Booking{ID: "r-now", Namespace: "workspace-b", Node: "Quota1.1", GPUs: 8, AllocGPUs: 8,
		Start: clock.Add(-time.Hour), End: clock.Add(time.Second)}
	if _, err := h.kv.Guarded(context.Background(), func(*store.Guarded) ([]store.Change, error) {
		return []store.Change{store.PutReservation(ended), store.PutReservation(live)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	listIDs := func() []string {
		_, body := h.do(t, "GET", "/v1/reservations", tokTeamB, "")
		var list ReservationsResponse
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range list.Reservations {
			ids = append(ids, e.ID)
		}
		return ids
	}
	if diff := cmp.Diff([]string{"r-now"}, listIDs()); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	show := func() ReservationEntry {
		code, body := h.do(t, "GET", "/v1/reservation/r-old", tokTeamB, "")
		if code != 200 {
			t.Fatalf("show r-old: %d %s", code, body)
		}
		var r ReservationResponse
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		return r.Reservation
	}
	if e := show(); e.ID != "r-old" || e.Outcome != "" || e.EndedAt != nil {
		t.Errorf("before the move: %+v", e)
	}
	// The leader's move (agent endBookings).
	if _, err := h.kv.Guarded(context.Background(), func(*store.Guarded) ([]store.Change, error) {
		return []store.Change{store.DeleteReservation("r-old"),
			store.PutReservationHistory(store.ReservationHistory{Booking: ended, EndedAt: ended.End, Outcome: "ended"})}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if e := show(); e.ID != "r-old" || e.Outcome != "ended" || e.EndedAt == nil || !e.EndedAt.Equal(clock) {
		t.Errorf("after the move: %+v", e)
	}
	if diff := cmp.Diff([]string{"r-now"}, listIDs()); diff != "" {
		t.Errorf("list after the move (-want +got):\n%s", diff)
	}
}

// A forced cancel of a booking in its window with running jobs ends it now
// (DESIGN L10 "End": the core's L10.end then stops its jobs at once): the
// booking stays, with end and cancelled_at now, out of the list, shown as
// forced, until the leader moves it to history; a second cancel writes
// nothing.
func TestForcedCancelEndsTheBookingNow(t *testing.T) {
	h := newHarness(t, options{})
	b := reservation.Booking{ID: "r-run", Namespace: "workspace-b", Node: "Quota1.1", GPUs: 8, AllocGPUs: 8,
		Start: clock.Add(-time.Hour), End: clock.Add(time.Hour)}
	if _, err := h.kv.Guarded(context.Background(), func(*store.Guarded) ([]store.Change, error) {
		return []store.Change{store.PutReservation(b)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	h.backend.st.Snapshot.Allocations[0].Reservation = "r-run"
	if code, body := h.do(t, "DELETE", "/v1/reservation/r-run", tokTeamB, ""); code != 409 {
		t.Fatalf("cancel without force: %d %s", code, body)
	}
	code, body := h.do(t, "DELETE", "/v1/reservation/r-run?force=true", tokTeamB, "")
	if code != 200 {
		t.Fatalf("forced cancel: %d %s", code, body)
	}
	g, err := h.kv.ReadGuarded(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := b
	want.End, want.CancelledAt = clock, clock
	if diff := cmp.Diff([]reservation.Booking{want}, g.Reservations, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("stored booking (-want +got):\n%s", diff)
	}
	if hist, _ := h.kv.ReservationHistory(context.Background()); len(hist) != 0 {
		t.Errorf("history before the leader's move: %+v", hist)
	}
	code, body = h.do(t, "GET", "/v1/reservation/r-run", tokTeamB, "")
	var got ReservationResponse
	_ = json.Unmarshal(body, &got)
	start, end, endedAt := b.Start, clock, clock
	wantEntry := ReservationEntry{Namespace: "workspace-b", GPUs: 8, ID: "r-run", Node: "Quota1.1", AllocGPUs: 8, Flavor: "gpu", Start: &start, End: &end,
		Running: 1, Outcome: "forced", EndedAt: &endedAt}
	if diff := cmp.Diff(wantEntry, got.Reservation, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); code != 200 || diff != "" {
		t.Errorf("show: %d (-want +got):\n%s", code, diff)
	}
	_, body = h.do(t, "GET", "/v1/reservations", tokTeamB, "")
	var list ReservationsResponse
	_ = json.Unmarshal(body, &list)
	if len(list.Reservations) != 0 {
		t.Errorf("the list shows the forced booking: %+v", list.Reservations)
	}
	for _, path := range []string{"/v1/reservation/r-run?force=true", "/v1/reservation/r-run"} {
		if code, body := h.do(t, "DELETE", path, tokTeamB, ""); code != 200 {
			t.Errorf("DELETE %s again: %d %s", path, code, body)
		}
	}
	if g2, _ := h.kv.ReadGuarded(context.Background()); g2.Counter != g.Counter {
		t.Errorf("a second cancel wrote: guard %d -> %d", g.Counter, g2.Counter)
	}
}

// Every API JSON answer, errors included, is Cache-Control: no-store: a
// proxy or browser cache never keeps a workspace's queue or a booking
// (issue 16).
func TestAPIAnswersAreNotCached(t *testing.T) {
	h := newHarness(t, options{})
	for _, r := range []struct{ method, path, token, body string }{
		{"GET", "/v1/agent/health", "", ""},
		{"GET", "/v1/quotas", tokTeamB, ""},
		{"GET", "/v1/queue", tokTeamB, ""},
		{"GET", "/v1/preemptions", tokTeamB, ""},
		{"GET", "/v1/reservations", tokTeamB, ""},
		{"GET", "/v1/plan", tokMgmt, ""},
		{"GET", "/v1/snapshot", tokMgmt, ""},
		{"GET", "/v1/quotas", "", ""},                        // 403
		{"GET", "/v1/reservation/nope", tokTeamB, ""},        // 404
		{"GET", "/v1/nothing", tokTeamB, ""},                 // 404, no endpoint
		{"POST", "/v1/reservations", tokTeamB, bookingB},     // 201
		{"POST", "/v1/reservations", tokTeamB, `{"gpus":1}`}, // 400
	} {
		req, err := http.NewRequest(r.method, h.url+r.path, strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		if r.token != "" {
			req.Header.Set("X-Nomad-Token", r.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s %s: %d, Cache-Control %q, want \"no-store\"", r.method, r.path, resp.StatusCode, got)
		}
	}
}

// A token with submit-job but no read-job on a namespace cancels its
// bookings (DESIGN §9: submit-job books and cancels); the answer shows only
// the namespace and the GPUs, as every entry of a namespace it cannot read
// (issue 16). It cannot read the booking (404).
func TestCancelWithSubmitJobOnly(t *testing.T) {
	h := newHarness(t, options{})
	code, body := h.do(t, "POST", "/v1/reservations", tokTeamC, `{"id":"rc","namespace":"workspace-c","gpus":8,"start":"2026-12-07T08:00:00Z","duration":"1h"}`)
	if code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, _ := h.do(t, "GET", "/v1/reservation/rc", tokSubmitC, ""); code != 404 {
		t.Errorf("submit-only reads the booking: %d, want 404", code)
	}
	code, body = h.do(t, "DELETE", "/v1/reservation/rc", tokSubmitC, "")
	var got ReservationResponse
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("cancel: %d %s: %v", code, body, err)
	}
	if diff := cmp.Diff(ReservationEntry{Namespace: "workspace-c", GPUs: 8}, got.Reservation); code != 200 || diff != "" {
		t.Errorf("submit-only cancel: %d (-want +got):\n%s", code, diff)
	}
	g, err := h.kv.ReadGuarded(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.Reservation("rc"); ok {
		t.Error("the booking is still stored after the cancel")
	}
	hist, _ := h.kv.ReservationHistory(context.Background())
	if len(hist) != 1 || hist[0].Booking.ID != "rc" || hist[0].Outcome != "cancelled" {
		t.Errorf("history %+v, want rc cancelled", hist)
	}
	recs, _ := h.kv.ChangeRecords(context.Background())
	if n := len(recs); n != 2 || recs[1].Op != "reservation cancel" || recs[1].Accessor != "acc-submit-c" {
		t.Errorf("change records %+v, want the cancel by acc-submit-c", recs)
	}
}

// reservation_max_per_namespace (tree setting, issue 16) bounds the
// bookings of one namespace that have not ended; the refusal names the
// setting and the numbers, other namespaces and ended bookings are not
// counted, and concurrent bookings cannot pass it (the count is made in
// the guarded write).
func TestBookingsPerNamespaceCap(t *testing.T) {
	h := newHarness(t, options{})
	ctx := context.Background()
	ended := reservation.Booking{ID: "r-ended", Namespace: "workspace-b", Node: "Quota1.1", GPUs: 1, AllocGPUs: 1,
		Start: clock.Add(-2 * time.Hour), End: clock.Add(-time.Hour)}
	_, err := h.kv.Guarded(ctx, func(g *store.Guarded) ([]store.Change, error) {
		rec := *g.Tree
		rec.Settings.ReservationMaxPerNamespace = 3
		return []store.Change{store.PutTree(rec), store.PutReservation(ended)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	book := func(tok, ns string, i int) (int, []byte) {
		start := clock.Add(time.Duration(24+i) * time.Hour).UTC().Format(time.RFC3339)
		return h.do(t, "POST", "/v1/reservations", tok, `{"namespace":"`+ns+`","gpus":1,"start":"`+start+`","duration":"1h"}`)
	}
	// Concurrent: 10 bookings of workspace-b race for 3 places.
	h.srv.cfg.Random = nil // distinct default IDs, from crypto/rand
	var wg sync.WaitGroup
	codes := make([]int, 10)
	bodies := make([][]byte, 10)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], bodies[i] = book(tokTeamB, "workspace-b", i)
		}()
	}
	wg.Wait()
	created, refused := 0, 0
	for i, code := range codes {
		switch e := errOf(t, bodies[i]).Error; {
		case code == 201:
			created++
		case code == 409 && e == `namespace "workspace-b" has 3 bookings that have not ended, the most reservation_max_per_namespace (3) allows; cancel one, or an admin raises the setting`:
			refused++
		case code == 409 && strings.Contains(e, "kept changing"):
		default:
			t.Errorf("booking %d: %d %s", i, code, bodies[i])
		}
	}
	g, err := h.kv.ReadGuarded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, b := range g.Reservations {
		if b.Namespace == "workspace-b" && b.End.After(clock) {
			live++
		}
	}
	if created != 3 || live != 3 || refused == 0 {
		t.Errorf("%d created, %d refused by the cap, %d live bookings of workspace-b stored; want 3 created and 3 stored", created, refused, live)
	}
	// Another namespace has its own count.
	if code, body := book(tokTeamC, "workspace-c", 0); code != 201 {
		t.Errorf("workspace-c's first booking: %d %s", code, body)
	}
}

// Quota node names outside quota.ValidName are bad input (400 naming the
// name, %q-quoted), in HCL and JSON trees, never an L1 409 (issue 16); the
// JSON tree is spelled as the HCL file (snake_case, "10m"), and the write's
// answer gives the root in the same spelling.
func TestTreeNamesAndJSONSpelling(t *testing.T) {
	h := newHarness(t, options{})
	want := `want 1 to 128 letters, digits, '.', '_' or '-'`
	for _, tc := range []struct{ body, want string }{
		{`{"root":{"name":"","gpus":8}}`, `root: name "" is not a quota node name: ` + want},
		{`{"root":{"name":"Quota1","gpus":8,"children":[{"name":"a\nb","gpus":1}]}}`, `root.children[0]: name "a\nb" is not a quota node name: ` + want},
		{`{"root":{"name":"Quota1","gpus":8,"children":[{"name":"a\u0000b","gpus":1}]}}`, `root.children[0]: name "a\x00b" is not a quota node name: ` + want},
		{`{"root":{"name":"Quota1","gpus":8,"children":[{"name":"abc\u202edef","gpus":1}]}}`, `root.children[0]: name "abc\u202edef" is not a quota node name: ` + want},
		{`{"root":{"name":"` + strings.Repeat("q", 5000) + `","gpus":8}}`, `root: name "` + strings.Repeat("q", 64) + `"... (5000 bytes) is not a quota node name: ` + want},
		{"quota \"Quota1\" {\n  gpus = 8\n  quota \"a\\nb\" { gpus = 1 }\n}\n", `quotas.hcl:3: name "a\nb" is not a quota node name: ` + want},
		{"quota \"\" {\n  gpus = 8\n}\n", `quotas.hcl:1: name "" is not a quota node name: ` + want},
	} {
		code, body := h.do(t, "PUT", "/v1/quotas", tokMgmt, tc.body)
		if e := errOf(t, body); code != 400 || e.Field != "name" || e.Error != tc.want {
			t.Errorf("%.60q: %d %s, want 400 field name %q", tc.body, code, body, tc.want)
		}
	}
	if g := h.guard(t); g != h.base {
		t.Fatalf("refused trees moved the guard %d -> %d", h.base, g)
	}
	// A tree in the one spelling: settings left out of "settings" take
	// their defaults, as in the HCL file.
	tree := `{"root":{"name":"Quota1","gpus":128,"child_preemption":true,"namespaces":["workspace-a"],"children":[` +
		`{"name":"Quota1.1","gpus":48,"namespaces":["workspace-b"]},{"name":"Quota1.2","gpus":80,"priority_preemption":true,"namespaces":["workspace-c"]}]},` +
		`"settings":{"debt_grace":"5m","drain_horizon":"2h","reservation_max_per_namespace":7}}`
	code, body := h.do(t, "PUT", "/v1/quotas", tokMgmt, tree)
	if code != 200 {
		t.Fatalf("snake_case tree: %d %s", code, body)
	}
	g, err := h.kv.ReadGuarded(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wantSettings := quota.DefaultSettings()
	wantSettings.DebtGrace, wantSettings.DrainHorizon, wantSettings.ReservationMaxPerNamespace = 5*time.Minute, 2*time.Hour, 7
	if g.Tree.Settings != wantSettings {
		t.Errorf("stored settings %+v, want %+v", g.Tree.Settings, wantSettings)
	}
	if n := g.Tree.Root.Find("Quota1.2"); n == nil || !n.PriorityPreemption || !g.Tree.Root.ChildPreemption {
		t.Errorf("stored tree lost the preemption flags: %+v", g.Tree.Root)
	}
	// The answer's root is in the same spelling, and the client reads it.
	for _, key := range []string{`"name": "Quota1.1"`, `"gpus": 48`, `"child_preemption": true`, `"changed_at": "2026-12-01T08:00:05Z"`} {
		if !strings.Contains(string(body), key) {
			t.Errorf("answer lacks %s: %s", key, body)
		}
	}
	for _, goName := range []string{`"Name"`, `"GPUs"`, `"Pos"`, `"Children"`} {
		if strings.Contains(string(body), goName) {
			t.Errorf("answer has the Go field name %s: %s", goName, body)
		}
	}
	var res TreeWriteResponse
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	if n := res.Root.Find("Quota1.1"); n == nil || n.GPUs.Of(quota.ImplicitFlavor) != 48 || res.Guard != h.base+1 {
		t.Errorf("the client's reading of the answer: %+v", res)
	}
	// The answer, sent back as it is (root only), is a valid tree.
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(body, &raw)
	if code, out := h.do(t, "PUT", "/v1/quotas", tokMgmt, `{"root":`+string(raw["root"])+`}`); code != 200 {
		t.Errorf("the answer's root sent back: %d %s", code, out)
	}
}

// A refused booking gives the quota node's figures only (issue 16): the
// node, the first instant it would be over, the GPUs booked in its subtree
// then (summed over every workspace), its nominal, the ask and the
// earliest start that fits; never another workspace's booking IDs or
// namespaces, nor one booking's own figures apart (docs/api.md says what
// the node's figures still tell).
func TestRefusalGivesNodeFiguresOnly(t *testing.T) {
	h := newHarness(t, options{})
	for _, b := range []struct{ tok, body string }{
		{tokMgmt, `{"id":"ra-secret","namespace":"workspace-a","gpus":40,"start":"2026-12-07T05:00:00Z","duration":"7h"}`},
		{tokTeamC, `{"id":"rc-secret","namespace":"workspace-c","gpus":80,"start":"2026-12-07T03:00:00Z","duration":"11h"}`},
	} {
		if code, body := h.do(t, "POST", "/v1/reservations", b.tok, b.body); code != 201 {
			t.Fatalf("%s: %d %s", b.body, code, body)
		}
	}
	code, body := h.do(t, "POST", "/v1/reservations", tokTeamB, `{"namespace":"workspace-b","gpus":16,"start":"2026-12-07T04:00:00Z","duration":"2h"}`)
	if code != 409 {
		t.Fatalf("B's booking over Quota1: %d %s, want 409", code, body)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"error": "Quota1 at 2026-12-07T05:00Z: 120 of 128 GPUs booked, 16 asked; earliest start that fits: 2026-12-07T12:00Z",
		"refusal": map[string]any{"node": "Quota1", "at": "2026-12-07T05:00:00Z", "booked_gpus": float64(120),
			"nominal_gpus": float64(128), "asked_gpus": float64(16)},
		"earliest_start": "2026-12-07T12:00:00Z",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refusal (-want +got):\n%s", diff)
	}
	for _, secret := range []string{"ra-secret", "rc-secret", "workspace-a", "workspace-c", `"40`, `"80`} {
		if strings.Contains(string(body), secret) {
			t.Errorf("the refusal names %s: %s", secret, body)
		}
	}
}
