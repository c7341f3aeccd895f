package e2e

// The broker's real API handler (quota-broker/api.Server, built as the
// agent's newAPI builds it) served in-process on loopback over a state whose
// figures the test sets, for the autoscaler tests (issue 11, "Real agents in
// CI"): the gputide-apm plugin talks to the real routes, JSON, token checks
// (acl.Resolver against the test's Nomad) and L12 staleness refusal.

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/hashicorp/nomad/api"

	"github.com/gputide/gputide/quota-broker/acl"
	brokerapi "github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/store"
)

// figureBroker is the in-process broker API. Its state is a snapshot taken
// now whose plan's idle fit (plan.Plan.IdleFit) is what SetIdleFit gave, and
// whose SyncedAt is now, or two staleness bounds ago after SetStale(true).
type figureBroker struct {
	URL       string
	staleness time.Duration
	srv       *httptest.Server

	mu     sync.Mutex
	fits   map[plan.GroupKey]int
	stale  bool
	served []servedRead // every answered request, in order
}

// servedRead is one request the broker answered: its path, HTTP status and,
// for /v1/idle-fit, the figure in force when it came.
type servedRead struct {
	Path   string
	Status int
	Fit    int
}

// figureBrokerOptions configure startFigureBroker.
type figureBrokerOptions struct {
	// Staleness is the L12 bound of the API (reads answer 503 past it);
	// 0: 15 s.
	Staleness time.Duration
	// OpenReads serves reads without a token while Nomad ACLs are off
	// (the agent's open_reads_without_acl).
	OpenReads bool
}

// startFigureBroker serves the broker's API handler on 127.0.0.1 with token
// checks against the Nomad at nomadAddr; the server is closed at cleanup
// (Stop closes it earlier).
func startFigureBroker(t *testing.T, nomadAddr string, o figureBrokerOptions) *figureBroker {
	t.Helper()
	if o.Staleness == 0 {
		o.Staleness = 15 * time.Second
	}
	b := &figureBroker{staleness: o.Staleness, fits: map[plan.GroupKey]int{}}
	res, err := acl.NewResolver(acl.Config{Address: nomadAddr})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := brokerapi.NewServer(brokerapi.Config{
		Backend: b, Store: store.NewMemory(), Resolver: res,
		OpenReadsWithoutACL: o.OpenReads, Staleness: o.Staleness,
		Logger: hclog.NewNullLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		fit := b.fits[plan.GroupKey{Namespace: r.URL.Query().Get("namespace"), Job: r.URL.Query().Get("job"), Group: r.URL.Query().Get("group")}]
		b.mu.Unlock()
		rec := &figureStatusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		b.mu.Lock()
		b.served = append(b.served, servedRead{Path: r.URL.Path, Status: rec.status, Fit: fit})
		b.mu.Unlock()
	}))
	t.Cleanup(b.srv.Close)
	b.URL = b.srv.URL
	return b
}

// figureStatusWriter keeps the status an http.Handler wrote.
type figureStatusWriter struct {
	http.ResponseWriter
	status int
}

func (r *figureStatusWriter) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// SetIdleFit sets the idle fit of group k (making it an idle group).
func (b *figureBroker) SetIdleFit(k plan.GroupKey, fit int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fits[k] = fit
}

// SetStale makes the state older than the staleness bound (or current again).
func (b *figureBroker) SetStale(stale bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stale = stale
}

// Stop closes the server: the address refuses connections from then on.
func (b *figureBroker) Stop() { b.srv.Close() }

// Served returns the requests answered so far.
func (b *figureBroker) Served() []servedRead {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.served)
}

// State implements brokerapi.Backend: a snapshot of now with one idle group
// per SetIdleFit, and a plan carrying those figures.
func (b *figureBroker) State() brokerapi.BrokerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	snap := &plan.Snapshot{Time: now}
	p := &plan.Plan{}
	for k, fit := range b.fits {
		snap.IdleGroups = append(snap.IdleGroups, plan.IdleGroup{Namespace: k.Namespace, Job: k.Job, Group: k.Group, Priority: 50, GPUs: 1, Max: 64})
		p.IdleFit = append(p.IdleFit, plan.GroupFit{Namespace: k.Namespace, Job: k.Job, Group: k.Group, Fit: fit})
	}
	slices.SortFunc(p.IdleFit, func(a, b plan.GroupFit) int { return a.Key().Compare(b.Key()) })
	synced := now
	if b.stale {
		synced = now.Add(-2 * b.staleness)
	}
	return brokerapi.BrokerState{Snapshot: snap, Plan: p, SyncedAt: synced}
}

// IsLeader implements brokerapi.Backend.
func (b *figureBroker) IsLeader() bool { return true }

// Health implements brokerapi.Backend.
func (b *figureBroker) Health() any { return map[string]any{"store": "memory"} }

// PendingOf implements brokerapi.Backend.
func (b *figureBroker) PendingOf(job *api.Job, now time.Time) ([]plan.Pending, error) {
	return brokerapi.PendingOfJob(job, now)
}
