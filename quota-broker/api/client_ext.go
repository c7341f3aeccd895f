package api

// The rest of the client: every endpoint of the server (server.go), for the
// CLI. Reads check freshness as Quotas does; writes return the server's
// answer or an *Error whose Message carries the refusal with its numbers.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gputide/gputide/internal/redact"
	"github.com/gputide/gputide/internal/regfile"
)

// More sentinels wrapped by *Error.
var (
	// ErrBadRequest: 400, the input named by Field is wrong; nothing was written.
	ErrBadRequest = errors.New("bad request")
	// ErrConflict: 409, a law (L1, L10) refused the write, or the guard
	// kept changing.
	ErrConflict = errors.New("refused")
)

// ClientConfig configures NewClientConfig.
type ClientConfig struct {
	Address string        // "" = DefaultAddress (GPUTIDE_ADDR in the CLI)
	Token   string        // sent as X-Nomad-Token (NOMAD_TOKEN in the CLI)
	CACert  string        // PEM file of the CA that signed the broker's certificate (GPUTIDE_CACERT)
	Timeout time.Duration // per call; 0 = none beyond the context
}

// NewClientConfig builds a client with TLS trust from cfg.CACert.
func NewClientConfig(cfg ClientConfig) (*Client, error) {
	c, err := NewClient(cfg.Address, cfg.Token, cfg.Timeout)
	if err != nil {
		return nil, err
	}
	if cfg.CACert == "" {
		return c, nil
	}
	pem, err := readCACert(cfg.CACert)
	if err != nil {
		return nil, fmt.Errorf("CA certificate %q: %w", cfg.CACert, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA certificate %q: no PEM certificate in the file", cfg.CACert)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	c.http.Transport = tr
	return c, nil
}

// Queue reads GET /v1/queue[?namespace=].
func (c *Client) Queue(ctx context.Context, namespace string) (*QueueResponse, error) {
	var out QueueResponse
	return &out, c.get(ctx, "/v1/queue", optional("namespace", namespace), &out)
}

// Preemptions reads GET /v1/preemptions[?namespace=&since=]; since is RFC
// 3339 or a duration back from now.
func (c *Client) Preemptions(ctx context.Context, namespace, since string) (*PreemptionsResponse, error) {
	q := url.Values{}
	if namespace != "" {
		q.Set("namespace", namespace)
	}
	if since != "" {
		q.Set("since", since)
	}
	var out PreemptionsResponse
	return &out, c.get(ctx, "/v1/preemptions", q, &out)
}

// Reservations reads GET /v1/reservations[?namespace=].
func (c *Client) Reservations(ctx context.Context, namespace string) (*ReservationsResponse, error) {
	var out ReservationsResponse
	return &out, c.get(ctx, "/v1/reservations", optional("namespace", namespace), &out)
}

// Reservation reads GET /v1/reservation/<id>.
func (c *Client) Reservation(ctx context.Context, id string) (*ReservationResponse, error) {
	var out ReservationResponse
	return &out, c.get(ctx, "/v1/reservation/"+url.PathEscape(id), nil, &out)
}

// CreateReservation books (POST /v1/reservations).
func (c *Client) CreateReservation(ctx context.Context, req BookingRequest) (*ReservationResponse, error) {
	var out ReservationResponse
	return &out, c.send(ctx, http.MethodPost, "/v1/reservations", nil, jsonBody(req), "application/json", &out)
}

// CancelReservation cancels (DELETE /v1/reservation/<id>[?force=true]).
func (c *Client) CancelReservation(ctx context.Context, id string, force bool) (*ReservationResponse, error) {
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	var out ReservationResponse
	return &out, c.send(ctx, http.MethodDelete, "/v1/reservation/"+url.PathEscape(id), q, nil, "", &out)
}

// Plan previews a job (POST /v1/plan): body is {"Job": {...}} as `nomad job
// run -output` writes it, or {"Namespace", "JobID"} of a waiting job.
func (c *Client) Plan(ctx context.Context, body []byte) (*PlanResponse, error) {
	var out PlanResponse
	return &out, c.send(ctx, http.MethodPost, "/v1/plan", nil, body, "application/json", &out)
}

// QuotaMove moves gpus of nominal from one quota node to another.
func (c *Client) QuotaMove(ctx context.Context, from, to string, gpus int) (*TreeWriteResponse, error) {
	var out TreeWriteResponse
	return &out, c.send(ctx, http.MethodPost, "/v1/quota/move", nil, jsonBody(MoveRequest{From: from, To: to, GPUs: gpus}), "application/json", &out)
}

// QuotaScale sets one node's nominal (PUT /v1/quota/<name>).
func (c *Client) QuotaScale(ctx context.Context, name string, gpus int) (*TreeWriteResponse, error) {
	var out TreeWriteResponse
	return &out, c.send(ctx, http.MethodPut, "/v1/quota/"+url.PathEscape(name), nil, jsonBody(ScaleRequest{GPUs: &gpus}), "application/json", &out)
}

// QuotaApply writes a whole tree (PUT /v1/quotas): HCL, or JSON when
// contentType is "application/json".
func (c *Client) QuotaApply(ctx context.Context, tree []byte, contentType string) (*TreeWriteResponse, error) {
	var out TreeWriteResponse
	return &out, c.send(ctx, http.MethodPut, "/v1/quotas", nil, tree, contentType, &out)
}

func optional(key, value string) url.Values {
	if value == "" {
		return nil
	}
	return url.Values{key: {value}}
}

func jsonBody(v any) []byte {
	b, _ := json.Marshal(v) // plain structs: cannot fail
	return b
}

// send performs one write and decodes the JSON answer (200 or 201) into out.
func (c *Client) send(ctx context.Context, method, path string, q url.Values, body []byte, contentType string, out any) error {
	op := method + " " + path
	u := c.url(path)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return &Error{Op: op, Address: c.address, Message: redact.URLError(err).Error(), Err: err}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("X-Nomad-Token", c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return &Error{Op: op, Address: c.address, Message: "no answer: " + redact.URLError(err).Error(), Err: errors.Join(ErrUnreachable, err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil || len(data) > maxBody {
		return &Error{Op: op, Address: c.address, Status: resp.StatusCode, Message: "reading the answer failed or it is larger than " + strconv.Itoa(maxBody) + " bytes", Err: ErrBadResponse}
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return statusError(op, c.address, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &Error{Op: op, Address: c.address, Status: resp.StatusCode, Message: "answer is not the documented JSON: " + err.Error(), Err: ErrBadResponse}
	}
	return nil
}

// MaxCACert bounds the CA certificate file a client reads (a PEM bundle of
// a few certificates is a few KiB).
const MaxCACert = 1 << 20

// readCACert reads the regular file path, at most MaxCACert bytes.
func readCACert(path string) ([]byte, error) {
	f, err := regfile.Open(path, MaxCACert)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Job reads GET /v1/job/<namespace>/<job>: one job's story (JobResponse).
func (c *Client) Job(ctx context.Context, namespace, job string) (*JobResponse, error) {
	var out JobResponse
	return &out, c.get(ctx, "/v1/job/"+url.PathEscape(namespace)+"/"+url.PathEscape(job), nil, &out)
}
