package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gputide/gputide/quota-broker/acl"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/reservation"
	"github.com/gputide/gputide/quota-broker/store"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/prometheus/client_golang/prometheus"
)

// MaxRequestBody bounds the body of a tree write or a job preview (a
// jobspec or a quota tree of thousands of nodes is well under it); every
// other request's is MaxSmallBody (limits.go); more is a 413.
const MaxRequestBody = 4 << 20

// BrokerState is what the broker knows now: the snapshot its last plan was
// made from, that plan, and when the state was last known current (L12).
type BrokerState struct {
	Snapshot *plan.Snapshot // nil: no state yet (every state read answers 503)
	Plan     *plan.Plan
	SyncedAt time.Time
}

// Backend is what the running broker gives the API server. The agent
// implements it; tests use a fixed one. All methods are safe for
// concurrent use and never block on Nomad.
type Backend interface {
	// State returns the broker's current state. The server never changes it.
	State() BrokerState
	// IsLeader reports whether this instance holds the leader lock (a
	// standby serves every read and takes writes too, DESIGN L12, §9).
	IsLeader() bool
	// Health is the body of GET /v1/agent/health (a JSON object); the
	// server sets "is_leader" from IsLeader (the agent's health also
	// names the lock's holder in "leader").
	Health() any
	// PendingOf turns a Nomad job (as `nomad job run -output` writes it)
	// into the task groups it would queue as, for plan previews. An error
	// names the job field and its value (HTTP 400).
	PendingOf(job *nomadapi.Job, now time.Time) ([]plan.Pending, error)
}

// Resolver resolves a caller's token (*acl.Resolver implements it).
type Resolver interface {
	Resolve(ctx context.Context, token string) (*acl.Authorizer, error)
}

// Config configures a Server.
type Config struct {
	Backend  Backend
	Store    store.Store
	Resolver Resolver
	// QuotaWrites is false on an agent without the Consul store: its tree
	// is its quota_file, and quota writes answer 409 saying so (DESIGN §6).
	QuotaWrites bool
	// OpenReadsWithoutACL serves reads without a token while Nomad ACLs
	// are off (config open_reads_without_acl).
	OpenReadsWithoutACL bool
	// Staleness is the L12 bound: reads answer 503 when the state is
	// older. 0: no bound.
	Staleness time.Duration
	// Limits bound bookings (tree settings reservation_max_ahead,
	// reservation_min_duration); zero: reservation.DefaultLimits().
	Limits reservation.Limits
	// Preemptions lists the preemption history, oldest first; nil:
	// Store.Preemptions (the agent gives its store's, Consul or memory).
	Preemptions func(ctx context.Context) ([]store.Preemption, error)
	// Metrics serves /metrics and /v1/metrics (the agent's registry).
	Metrics http.Handler
	// Registerer takes the server's own metrics; nil: none registered.
	Registerer prometheus.Registerer
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Random gives the random part of default reservation IDs; nil:
	// crypto/rand.
	Random io.Reader
	// Logger (hclog, like the rest of the broker: the agent passes its
	// own, named "api"); nil: hclog.NewNullLogger(). Never given a token.
	Logger hclog.Logger
	// CheckTree validates a tree before a quota write stores it, inside
	// the write's guarded transaction, against the bookings read there:
	// the agent gives the validation it applies to the trees it runs
	// (Agent.CheckTree), so that no stored tree is one the broker refuses.
	// nil: reservation.CheckTree (L1 and the bookings).
	CheckTree func(root *quota.Node, settings quota.Settings, bookings []reservation.Booking, now time.Time) error
	// Planner plans a preview's snapshot (POST /v1/plan); nil:
	// plan.ComputeFair. The agent gives its own (Options.Planner).
	Planner func(*plan.Snapshot) (*plan.Plan, error)
}

// Server is the broker's HTTP API (DESIGN §9). Build it with NewServer;
// Handler serves it.
type Server struct {
	cfg     Config
	metrics *serverMetrics
	mux     *http.ServeMux
	ui      *uiSessions // the status page's sessions (ui.go)
}

// NewServer checks cfg and builds a Server.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Backend == nil || cfg.Store == nil || cfg.Resolver == nil {
		return nil, errors.New("api: Backend, Store and Resolver are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Limits == (reservation.Limits{}) {
		cfg.Limits = reservation.DefaultLimits()
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Planner == nil {
		cfg.Planner = plan.ComputeFair
	}
	if cfg.CheckTree == nil {
		cfg.CheckTree = func(root *quota.Node, _ quota.Settings, bookings []reservation.Booking, now time.Time) error {
			return reservation.CheckTree(root, bookings, now)
		}
	}
	if cfg.Preemptions == nil {
		cfg.Preemptions = cfg.Store.Preemptions
	}
	if cfg.Metrics == nil {
		cfg.Metrics = http.NotFoundHandler()
	}
	s := &Server{cfg: cfg, ui: newUISessions()}
	m, err := newServerMetrics(cfg.Registerer, s)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.mux = s.routes()
	return s, nil
}

// Handler returns the server's HTTP handler: the routes behind the body
// limits (limitBodies, applied before the token check).
func (s *Server) Handler() http.Handler { return limitBodies(s.mux) }

// need is the right a route asks for before its handler runs; per-namespace
// rights are checked by the handler.
type need int

const (
	needNothing  need = iota // health
	needRead                 // any valid token (open reads while ACLs are off)
	needAdminGet             // admin; a read (open while ACLs are off and reads are open)
	needWrite                // any valid token, not open: the handler checks submit-job or admin
	needAdmin                // admin, a write
)

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/agent/health", s.health)
	mux.Handle("GET /metrics", s.cfg.Metrics)
	mux.Handle("GET /v1/metrics", s.guard(needRead, func(w http.ResponseWriter, r *http.Request, c *caller) {
		s.cfg.Metrics.ServeHTTP(w, r)
	}))
	mux.Handle("GET /v1/quotas", s.guard(needRead, s.quotas))
	mux.Handle("GET /v1/queue", s.guard(needRead, s.queue))
	mux.Handle("GET /v1/preemptions", s.guard(needRead, s.preemptions))
	mux.Handle("GET /v1/plan", s.guard(needAdminGet, s.lastPlan))
	mux.Handle("GET /v1/snapshot", s.guard(needAdminGet, s.snapshot))
	mux.Handle("POST /v1/plan", s.guard(needWrite, s.previewPlan))
	mux.Handle("POST /v1/quota/move", s.guard(needAdmin, s.quotaMove))
	mux.Handle("PUT /v1/quota/{name}", s.guard(needAdmin, s.quotaScale))
	mux.Handle("PUT /v1/quotas", s.guard(needAdmin, s.quotaApply))
	mux.Handle("GET /v1/idle-fit", s.guard(needRead, s.idleFit))
	mux.Handle("GET /v1/reservations", s.guard(needRead, s.reservationList))
	mux.Handle("POST /v1/reservations", s.guard(needWrite, s.reservationCreate))
	mux.Handle("GET /v1/reservation/{id}", s.guard(needRead, s.reservationGet))
	mux.Handle("GET /v1/job/{namespace}/{job}", s.guard(needRead, s.job))
	mux.Handle("DELETE /v1/reservation/{id}", s.guard(needWrite, s.reservationCancel))
	s.uiRoutes(mux)
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &Problem{Status: http.StatusNotFound, Msg: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)})
	})
	return mux
}

// Problem is an error answer: {"error": Msg, "field": Field} with Status.
type Problem struct {
	Status int
	Msg    string
	Field  string
}

func (p *Problem) Error() string { return p.Msg }

func badInput(field, value, format string, args ...any) *Problem {
	return &Problem{Status: http.StatusBadRequest, Field: field,
		Msg: fmt.Sprintf("%s %s: %s", field, strconv.Quote(value), fmt.Sprintf(format, args...))}
}

func forbidden(msg string) *Problem { return &Problem{Status: http.StatusForbidden, Msg: msg} }

func notFound(format string, args ...any) *Problem {
	return &Problem{Status: http.StatusNotFound, Msg: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) *Problem {
	return &Problem{Status: http.StatusConflict, Msg: fmt.Sprintf(format, args...)}
}

// errorBody is the JSON of every error answer.
type errorBody struct {
	Error    string     `json:"error"`
	Field    string     `json:"field,omitempty"`
	Refusal  *Refusal   `json:"refusal,omitempty"`
	Earliest *time.Time `json:"earliest_start,omitempty"`
}

// Refusal carries the numbers of an L10 refusal (409): the quota node's
// figures only (the sum of every workspace's bookings in its subtree),
// never another workspace's booking IDs or namespaces. They still tell
// when the node's booked GPUs change; docs/api.md says why that stays.
type Refusal struct {
	// Flavor is the booking's flavor (DESIGN L13) in a tree with flavor
	// blocks: the figures are that flavor's only.
	Flavor  string    `json:"flavor,omitempty"`
	Node    string    `json:"node"`
	At      time.Time `json:"at"`
	Booked  int       `json:"booked_gpus"`
	Nominal int       `json:"nominal_gpus"`
	Asked   int       `json:"asked_gpus"`
}

// statusOf maps an error to its HTTP status and body (DESIGN §9): 400 bad
// input, 403 rights, 404, 409 law refusal or guard conflict, 429 the
// store's write queue full (store.ErrBusy), 503 Nomad (token checks) or
// the store not answering. The store's 503 says "nothing was written":
// statusOf is for writes; reads use statusOfRead.
func statusOf(err error) (int, errorBody) { return statusFor(err, false) }

// statusOfRead is statusOf for a read (GET, HEAD): a read writes nothing,
// so its store 503 does not say that nothing was written.
func statusOfRead(err error) (int, errorBody) { return statusFor(err, true) }

func statusFor(err error, read bool) (int, errorBody) {
	var p *Problem
	var re *reservation.Error
	var ve *quota.ValidationError
	switch {
	case errors.As(err, &p):
		return p.Status, errorBody{Error: p.Msg, Field: p.Field}
	case errors.As(err, &re) && errors.Is(err, reservation.ErrRefused):
		b := errorBody{Error: re.Error(), Refusal: &Refusal{Flavor: re.Flavor, Node: re.Node, At: re.At, Booked: re.Booked, Nominal: re.Nominal, Asked: re.Asked}}
		if !re.Earliest.IsZero() {
			e := re.Earliest
			b.Earliest = &e
		}
		return http.StatusConflict, b
	case errors.As(err, &re):
		return http.StatusBadRequest, errorBody{Error: re.Error(), Field: re.Field}
	case errors.As(err, &ve) && ve.BadName:
		return http.StatusBadRequest, errorBody{Error: ve.Error(), Field: "name"}
	case errors.As(err, &ve) && ve.BadNamespace:
		return http.StatusBadRequest, errorBody{Error: ve.Error(), Field: "namespaces"}
	case errors.As(err, &ve):
		return http.StatusConflict, errorBody{Error: "L1: " + ve.Error()}
	case errors.Is(err, acl.ErrUnavailable):
		return http.StatusServiceUnavailable, errorBody{Error: "token check: Nomad is not answering; access is denied until it does"}
	case errors.Is(err, acl.ErrDenied):
		return http.StatusForbidden, errorBody{Error: "permission denied: " + err.Error()}
	case errors.Is(err, store.ErrBusy):
		return http.StatusTooManyRequests, errorBody{Error: fmt.Sprintf("the broker's store writes are queued full (at most %d waiting, each at most %s); nothing was written, try again", store.MaxQueuedWrites, store.WriteQueueWait)}
	case errors.Is(err, store.ErrConflict):
		return http.StatusConflict, errorBody{Error: "the guarded state kept changing while writing (retried " + strconv.Itoa(store.Retries) + " times); nothing was written, try again"}
	case errors.Is(err, store.ErrUnavailable) && read:
		return http.StatusServiceUnavailable, errorBody{Error: "store (Consul) not answering: " + err.Error()}
	case errors.Is(err, store.ErrUnavailable):
		return http.StatusServiceUnavailable, errorBody{Error: "store (Consul) not answering; nothing was written: " + err.Error()}
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, errorBody{Error: err.Error()}
	case errors.Is(err, store.ErrInvalid):
		return http.StatusBadRequest, errorBody{Error: err.Error()}
	}
	return http.StatusInternalServerError, errorBody{Error: err.Error()}
}

// RetryAfterBusy is the Retry-After (seconds) of a 429 for a full write
// queue (store.ErrBusy).
const RetryAfterBusy = 1

// writeError answers err (statusOf; statusOfRead when w is a read's
// answer, readAnswer); a 429 carries Retry-After.
func writeError(w http.ResponseWriter, err error) {
	status, body := statusOf(err)
	if _, read := w.(readAnswer); read {
		status, body = statusOfRead(err)
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterBusy))
	}
	writeJSONStatus(w, status, body)
}

// readAnswer marks the ResponseWriter of a read (GET or HEAD; guard wraps
// it), so that writeError does not say a read wrote nothing.
type readAnswer struct{ http.ResponseWriter }

// Unwrap returns the wrapped writer (http.ResponseController).
func (a readAnswer) Unwrap() http.ResponseWriter { return a.ResponseWriter }

func writeJSON(w http.ResponseWriter, v any) { writeJSONStatus(w, http.StatusOK, v) }

// jsonHeaders sets the headers of every API JSON answer: its type, and
// Cache-Control: no-store (a workspace's queue or bookings are never kept
// by a shared cache or the browser).
func jsonHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
}

func writeJSONStatus(w http.ResponseWriter, status int, v any) {
	jsonHeaders(w)
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// health serves GET /v1/agent/health: the backend's health object with
// "is_leader" set from IsLeader. It needs no token.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	out := map[string]any{}
	if raw, err := json.Marshal(s.cfg.Backend.Health()); err == nil {
		_ = json.Unmarshal(raw, &out)
	}
	out["is_leader"] = s.cfg.Backend.IsLeader()
	writeJSON(w, out)
}

// CheckListen enforces DESIGN §9 on http_bind: an address beyond loopback
// needs TLS (cert and key files).
func CheckListen(bind string, tls bool) error {
	host, _, err := net.SplitHostPort(bind)
	if err != nil {
		return fmt.Errorf("http_bind = %q: %v", bind, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip != nil && ip.IsLoopback() {
		return nil
	}
	if !tls {
		return fmt.Errorf("http_bind = %q: must be a loopback address, or listening beyond loopback needs tls { cert_file key_file }", bind)
	}
	return nil
}
