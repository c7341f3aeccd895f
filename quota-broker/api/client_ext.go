package api

// The server's side of the broker's HTTP client. The client and the plain
// answers it decodes live in quota-broker/api/client, which imports neither
// this package nor the store, the ACLs, the snapshot format or the planning
// core, so that the autoscaler plugins stay small. Client here adds the
// writes whose answers carry the core's own types (POST /v1/plan, the quota
// tree writes), for the CLI.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/gputide/gputide/quota-broker/api/client"
)

// DefaultAddress is the broker's default listen address (DESIGN §9).
const DefaultAddress = client.DefaultAddress

// MaxCACert bounds the CA certificate file a client reads.
const MaxCACert = client.MaxCACert

// The answers of the reads and of the reservation endpoints, as the client
// decodes them (quota-broker/api/client).
type (
	Error                = client.Error
	ClientConfig         = client.Config
	State                = client.State
	Quota                = client.Quota
	QuotasResponse       = client.QuotasResponse
	Ungoverned           = client.Ungoverned
	EvictBudget          = client.EvictBudget
	Share                = client.Share
	IdleFitResponse      = client.IdleFitResponse
	QueueEntry           = client.QueueEntry
	QueueResponse        = client.QueueResponse
	WarningEntry         = client.WarningEntry
	PreemptionEntry      = client.PreemptionEntry
	PreemptionsResponse  = client.PreemptionsResponse
	BookingRequest       = client.BookingRequest
	ReservationEntry     = client.ReservationEntry
	ReservationsResponse = client.ReservationsResponse
	ReservationResponse  = client.ReservationResponse
)

// Sentinels wrapped by *Error (see quota-broker/api/client).
var (
	ErrUnreachable = client.ErrUnreachable
	ErrStale       = client.ErrStale
	ErrForbidden   = client.ErrForbidden
	ErrNotFound    = client.ErrNotFound
	ErrBadResponse = client.ErrBadResponse
	ErrBadRequest  = client.ErrBadRequest
	ErrConflict    = client.ErrConflict
)

// Client is the broker's HTTP client (quota-broker/api/client) with the
// writes whose answers carry the core's types.
type Client struct{ *client.Client }

// NewClient returns a client of the broker at address (client.New).
func NewClient(address, token string, timeout time.Duration) (*Client, error) {
	c, err := client.New(address, token, timeout)
	if err != nil {
		return nil, err
	}
	return &Client{c}, nil
}

// NewClientConfig builds a client with TLS trust from cfg.CACert
// (client.NewConfig).
func NewClientConfig(cfg ClientConfig) (*Client, error) {
	c, err := client.NewConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{c}, nil
}

// Plan previews a job (POST /v1/plan): body is {"Job": {...}} as `nomad job
// run -output` writes it, or {"Namespace", "JobID"} of a waiting job.
func (c *Client) Plan(ctx context.Context, body []byte) (*PlanResponse, error) {
	var out PlanResponse
	return &out, c.Send(ctx, http.MethodPost, "/v1/plan", nil, body, "application/json", &out)
}

// QuotaMove moves gpus of nominal from one quota node to another, in a
// tree of one flavor (QuotaMoveFlavor names the flavor).
func (c *Client) QuotaMove(ctx context.Context, from, to string, gpus int) (*TreeWriteResponse, error) {
	return c.QuotaMoveFlavor(ctx, from, to, "", gpus)
}

// QuotaMoveFlavor moves gpus of flavor's nominal from one quota node to
// another (DESIGN L13; flavor "" in a tree of one flavor).
func (c *Client) QuotaMoveFlavor(ctx context.Context, from, to, flavor string, gpus int) (*TreeWriteResponse, error) {
	var out TreeWriteResponse
	return &out, c.Send(ctx, http.MethodPost, "/v1/quota/move", nil, jsonBody(MoveRequest{From: from, To: to, GPUs: gpus, Flavor: flavor}), "application/json", &out)
}

// QuotaScale sets one node's nominal (PUT /v1/quota/<name>) in a tree of
// one flavor (QuotaScaleFlavor names the flavor).
func (c *Client) QuotaScale(ctx context.Context, name string, gpus int) (*TreeWriteResponse, error) {
	return c.QuotaScaleFlavor(ctx, name, "", gpus)
}

// QuotaScaleFlavor sets one node's nominal of flavor (DESIGN L13; ""
// in a tree of one flavor).
func (c *Client) QuotaScaleFlavor(ctx context.Context, name, flavor string, gpus int) (*TreeWriteResponse, error) {
	var out TreeWriteResponse
	return &out, c.Send(ctx, http.MethodPut, "/v1/quota/"+url.PathEscape(name), nil, jsonBody(ScaleRequest{GPUs: &gpus, Flavor: flavor}), "application/json", &out)
}

// QuotaApply writes a whole tree (PUT /v1/quotas): HCL, or JSON when
// contentType is "application/json".
func (c *Client) QuotaApply(ctx context.Context, tree []byte, contentType string) (*TreeWriteResponse, error) {
	var out TreeWriteResponse
	return &out, c.Send(ctx, http.MethodPut, "/v1/quotas", nil, tree, contentType, &out)
}

func jsonBody(v any) []byte {
	b, _ := json.Marshal(v) // plain structs: cannot fail
	return b
}

// Job reads GET /v1/job/<namespace>/<job>: one job's story (JobResponse).
func (c *Client) Job(ctx context.Context, namespace, job string) (*JobResponse, error) {
	var out JobResponse
	return &out, c.Send(ctx, http.MethodGet, "/v1/job/"+url.PathEscape(namespace)+"/"+url.PathEscape(job), nil, nil, "", &out)
}
