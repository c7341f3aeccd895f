// Package api holds the Go client of the broker's HTTP API (DESIGN §9), the
// only door for the CLI and the autoscaler plugins.
//
// This file is the part issue 11 needs: Quotas (GET /v1/quotas) and IdleFit
// (GET /v1/idle-fit). The server side comes with the API issue (issue 10) and
// issue 11's /v1/idle-fit; the JSON shapes below are the contract both sides
// keep.
//
// GET /v1/quotas, any valid token:
//
//	{
//	  "state_age_seconds": 1.25,        // age of the state the answer was made from
//	  "staleness_seconds": 15,          // the broker's L12 bound; 0 or absent: not given
//	  "quotas": [                       // one entry per node of the quota tree, in tree order
//	    {"name": "Quota1.1", "parent": "Quota1",
//	     "nominal_gpus": 56, "used_gpus": 40, "nonidle_gpus": 38, "borrowed_gpus": 0,
//	     "debt_gpus": 0, "booked_gpus": 8, "displaced_gpus": 0, "lendable_gpus": 16,
//	     "queued_gpus": 4, "workspaces": ["workspace-a"],
//	     "weight": 56, "fair_share": 60.5, "borrowed_share": 0,   // DESIGN L14; weight_explicit: true when set
//	     "max_evict": {"gpus": 16, "per": "5m", "per_seconds": 300, "evicted_gpus": 3}}
//	  ]
//	}
//
// GET /v1/idle-fit?namespace=N&job=J&group=G, read-job on N:
//
//	{"state_age_seconds": 1.25, "staleness_seconds": 15,
//	 "namespace": "workspace-c", "job": "training", "group": "train",
//	 "idle_fit": 8}                     // extra allocations of the group that fit now (issue 11 item 4)
//
// Errors are {"error": "...", "field": "..."} with the HTTP status of DESIGN §9;
// 503 means the broker has no state current enough to answer.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gputide/gputide/internal/redact"
)

// DefaultAddress is the broker's default listen address (DESIGN §9).
const DefaultAddress = "http://127.0.0.1:4780"

// maxBody bounds every response body read (a quota tree of thousands of nodes
// is well under this).
const maxBody = 8 << 20

// Sentinels wrapped by *Error, for callers that branch.
var (
	// ErrUnreachable: no answer (connection refused, timeout) or 503.
	ErrUnreachable = errors.New("broker unreachable")
	// ErrStale: the answer's state_age_seconds is past its staleness_seconds.
	ErrStale = errors.New("broker state stale")
	// ErrForbidden: 401 or 403, the token lacks the right.
	ErrForbidden = errors.New("permission denied")
	// ErrNotFound: 404.
	ErrNotFound = errors.New("not found")
	// ErrBadResponse: an answer that is not the documented JSON.
	ErrBadResponse = errors.New("bad response")
)

// Error is every error the client returns. Error() reads
// "<Op> <Address>: <Message>".
type Error struct {
	Op      string // "GET /v1/quotas"
	Address string // the broker's address as configured
	Status  int    // HTTP status; 0 when there was no answer
	Message string // the broker's "error", or what went wrong
	Field   string // the broker's "field", if any
	Err     error  // one of the sentinels above, or the transport error
}

func (e *Error) Error() string {
	msg := e.Message
	if e.Field != "" {
		msg += " (field " + e.Field + ")"
	}
	return fmt.Sprintf("%s %s: %s", e.Op, e.Address, msg)
}

func (e *Error) Unwrap() error { return e.Err }

// Quota is one node of the quota tree with its figures of one flavor, in
// GPUs (devices of that flavor).
type Quota struct {
	Name   string `json:"name"`
	Parent string `json:"parent,omitempty"`
	// Flavor is the flavor the entry counts (DESIGN L13): /v1/quotas has
	// one entry per quota node and flavor, "gpu" for the implicit flavor
	// of a tree without flavor blocks. Every figure below is of this
	// flavor only, in devices (a MIG flavor counts its slices).
	Flavor        string `json:"flavor"`
	NominalGPUs   int    `json:"nominal_gpus"`
	UsedGPUs      int    `json:"used_gpus"`
	NonidleGPUs   int    `json:"nonidle_gpus"`
	BorrowedGPUs  int    `json:"borrowed_gpus"`
	DebtGPUs      int    `json:"debt_gpus"`
	BookedGPUs    int    `json:"booked_gpus"`
	DisplacedGPUs int    `json:"displaced_gpus"`
	LendableGPUs  int    `json:"lendable_gpus"`
	QueuedGPUs    int    `json:"queued_gpus"`
	// StoppingGPUs is the GPUs of the subtree's allocations the broker is
	// already stopping (counted in UsedGPUs until they are terminal, L2):
	// mid-preemption a node may read "12 used of 8" with 4 of them leaving.
	StoppingGPUs int      `json:"stopping_gpus,omitempty"`
	Workspaces   []string `json:"workspaces,omitempty"`
	// Weight is the node's weight in the flavor (DESIGN L14): its explicit
	// weight (WeightExplicit), else its nominal in the flavor.
	Weight         int  `json:"weight"`
	WeightExplicit bool `json:"weight_explicit,omitempty"`
	// FairShare is the node's fair share of the flavor (DESIGN L14), in
	// devices, fractional (7 GPUs lent to two children of equal weight
	// give each 3.5); nil (absent in JSON) when L14 leaves it undefined:
	// for the root, and for the children of a parent whose own non-idle
	// use leaves less of its nominal than their bases.
	FairShare *float64 `json:"fair_share,omitempty"`
	// BorrowedShare is BorrowedGPUs / Weight (DESIGN L14); with weight 0,
	// 0 while the node borrows nothing, +Inf (JSON "+Inf") once it does.
	BorrowedShare Share `json:"borrowed_share"`
	// MaxEvict is the node's eviction budget and its use now (DESIGN
	// L14), the same on each of the node's flavors (a budget counts
	// devices of every flavor); nil (absent) when the node sets none.
	MaxEvict *EvictBudget `json:"max_evict,omitempty"`
}

// EvictBudget is a quota node's eviction budget, `max_evict = { gpus = 16,
// per = "5m" }`, and its use now (DESIGN L14).
type EvictBudget struct {
	// GPUs is the most devices, of every flavor, the node's subtree may
	// lose as victims within Per.
	GPUs int `json:"gpus"`
	// Per is the window as the quota file writes it ("5m", "1h30m");
	// PerSeconds the same in seconds.
	Per        string  `json:"per"`
	PerSeconds float64 `json:"per_seconds"`
	// EvictedGPUs is the devices, of every flavor, stopped as victims of
	// the node's and its descendants' namespaces within (now - per, now]
	// (the snapshot's evictions): "3 of 16 GPUs in 5m".
	EvictedGPUs int `json:"evicted_gpus"`
}

// Share is a borrowed share (DESIGN L14): a JSON number, or the string
// "+Inf" for the infinite share of a weight-0 node that borrows (JSON has
// no infinity; Prometheus writes it the same way).
type Share float64

// MarshalJSON writes s as a number, or "+Inf".
func (s Share) MarshalJSON() ([]byte, error) {
	f := float64(s)
	switch {
	case math.IsInf(f, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(f, -1) || math.IsNaN(f):
		return nil, fmt.Errorf("borrowed share %v: not a share", f)
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// UnmarshalJSON reads a number or "+Inf".
func (s *Share) UnmarshalJSON(b []byte) error {
	if string(b) == `"+Inf"` {
		*s = Share(math.Inf(1))
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || f < 0 {
		return fmt.Errorf("borrowed share %s: want a number >= 0 or \"+Inf\"", b)
	}
	*s = Share(f)
	return nil
}

// State is the freshness every read carries.
type State struct {
	StateAgeSeconds  float64 `json:"state_age_seconds"`
	StalenessSeconds float64 `json:"staleness_seconds,omitempty"`
}

// QuotasResponse is the body of GET /v1/quotas.
type QuotasResponse struct {
	State
	Quotas []Quota `json:"quotas"`
	// Ungoverned are the devices of no flavor (DESIGN L13), by node, model
	// and MIG profile: never counted, admitted through or stopped by the
	// broker, left to Nomad. Absent when every device has a flavor.
	Ungoverned []Ungoverned `json:"ungoverned,omitempty"`
}

// Ungoverned is a node's devices of one model and MIG profile that belong
// to no flavor of the tree, and why (DESIGN L13).
type Ungoverned struct {
	Node       string `json:"node"`
	Model      string `json:"model"`
	MIGProfile string `json:"mig_profile,omitempty"`
	Devices    int    `json:"devices"`
	Reason     string `json:"reason"`
}

// IdleFitResponse is the body of GET /v1/idle-fit.
type IdleFitResponse struct {
	State
	Namespace string `json:"namespace"`
	Job       string `json:"job"`
	Group     string `json:"group"`
	IdleFit   int    `json:"idle_fit"`
	// Flavor is the flavor the fit lies in (plan.GroupFit.Flavor): named
	// when IdleFit > 0 in a tree that declares flavors, else omitted.
	Flavor string `json:"flavor,omitempty"`
}

// Client calls one broker. Build it with New or NewConfig; safe for concurrent use.
type Client struct {
	address string // redacted (redact.Address); base keeps the userinfo
	base    *url.URL
	token   string
	http    *http.Client
}

// New returns a client of the broker at address (http or https URL; ""
// means DefaultAddress) sending token as X-Nomad-Token when not empty. timeout
// bounds each call (0: none beyond the caller's context).
func New(address, token string, timeout time.Duration) (*Client, error) {
	if address == "" {
		address = DefaultAddress
	}
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("broker address %q: want an http or https URL such as %q", redact.Address(address), DefaultAddress)
	}
	return &Client{address: redact.Address(address), base: u, token: token, http: &http.Client{Timeout: timeout}}, nil
}

// Address returns the broker's address as given, its userinfo redacted
// (redact.Address): every error and log line names it.
func (c *Client) Address() string { return c.address }

// Quotas reads GET /v1/quotas.
func (c *Client) Quotas(ctx context.Context) (*QuotasResponse, error) {
	var out QuotasResponse
	if err := c.get(ctx, "/v1/quotas", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// IdleFit reads GET /v1/idle-fit for the task group (namespace, job, group).
func (c *Client) IdleFit(ctx context.Context, namespace, job, group string) (*IdleFitResponse, error) {
	q := url.Values{"namespace": {namespace}, "job": {job}, "group": {group}}
	var out IdleFitResponse
	if err := c.get(ctx, "/v1/idle-fit", q, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// stateOf lets get check the freshness of any response type.
type stateOf interface{ state() State }

func (s State) state() State { return s }

// url is the broker's address with path, an escaped path (its segments
// escaped with url.PathEscape), appended. Both Path and RawPath are set so
// that an escaped "/" or "%" in a segment is sent once escaped, not twice
// ("a%2Fb", not "a%252Fb").
func (c *Client) url(path string) url.URL {
	u := *c.base
	base := strings.TrimSuffix(u.EscapedPath(), "/")
	raw := base + path
	if p, err := url.PathUnescape(raw); err == nil {
		u.Path, u.RawPath = p, raw
	} else {
		u.Path, u.RawPath = strings.TrimSuffix(u.Path, "/")+path, ""
	}
	return u
}

// get performs one GET and decodes the JSON answer into out, checking its
// freshness.
func (c *Client) get(ctx context.Context, path string, q url.Values, out stateOf) error {
	op := "GET " + path
	u := c.url(path)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return &Error{Op: op, Address: c.address, Message: redact.URLError(err).Error(), Err: err}
	}
	if c.token != "" {
		req.Header.Set("X-Nomad-Token", c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return &Error{Op: op, Address: c.address, Message: "no answer: " + redact.URLError(err).Error(), Err: errors.Join(ErrUnreachable, err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return &Error{Op: op, Address: c.address, Status: resp.StatusCode, Message: "reading the answer: " + err.Error(), Err: errors.Join(ErrUnreachable, err)}
	}
	if len(body) > maxBody {
		return &Error{Op: op, Address: c.address, Status: resp.StatusCode, Message: fmt.Sprintf("answer larger than %d bytes", maxBody), Err: ErrBadResponse}
	}
	if resp.StatusCode != http.StatusOK {
		return statusError(op, c.address, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &Error{Op: op, Address: c.address, Status: resp.StatusCode, Message: "answer is not the documented JSON: " + err.Error(), Err: ErrBadResponse}
	}
	if st := out.state(); st.StalenessSeconds > 0 && st.StateAgeSeconds > st.StalenessSeconds {
		return &Error{Op: op, Address: c.address, Status: resp.StatusCode,
			Message: fmt.Sprintf("state is %gs old, past its staleness bound of %gs", st.StateAgeSeconds, st.StalenessSeconds), Err: ErrStale}
	}
	return nil
}

// statusError turns a non-200 answer into an *Error with the broker's message.
func statusError(op, address string, status int, body []byte) error {
	var eb struct {
		Error string `json:"error"`
		Field string `json:"field"`
	}
	msg := fmt.Sprintf("HTTP %d", status)
	if json.Unmarshal(body, &eb) == nil && eb.Error != "" {
		msg += ": " + eb.Error
	}
	e := &Error{Op: op, Address: address, Status: status, Message: msg, Field: eb.Field}
	switch status {
	case http.StatusServiceUnavailable:
		e.Err = ErrUnreachable
	case http.StatusUnauthorized, http.StatusForbidden:
		e.Err = ErrForbidden
	case http.StatusNotFound:
		e.Err = ErrNotFound
	case http.StatusBadRequest:
		e.Err = ErrBadRequest
	case http.StatusConflict:
		e.Err = ErrConflict
	default:
		e.Err = ErrBadResponse
	}
	return e
}
