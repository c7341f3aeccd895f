// Package apmplugin is the Nomad Autoscaler APM plugin "gputide-apm" (DESIGN
// §8, issue 11 item 3). It answers the query `schedule` itself (one point,
// value 1, no broker call, so day/night scaling goes on while the broker is
// down) and serves the broker's figures: NAME{quota="Q"} and, per flavor
// (DESIGN L13), NAME{quota="Q",flavor="F"} from GET /v1/quotas
// and idle_fit{namespace="N",job="J",group="G"} from GET /v1/idle-fit. A valid
// query returns exactly one point; anything else is an error.
//
// Agent plugin block:
//
//	apm "gputide-apm" {
//	  driver = "gputide-apm"
//	  config = {
//	    address = "http://127.0.0.1:4780"  # the broker; this default when absent
//	    token   = "..."                    # default: the agent's nomad_token
//	    timeout = "5s"                     # per broker call
//	    ca_file = "broker-ca.pem"          # the CA of the broker's TLS certificate (https address)
//	  }
//	}
package apmplugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad-autoscaler/plugins/apm"
	"github.com/hashicorp/nomad-autoscaler/plugins/base"
	"github.com/hashicorp/nomad-autoscaler/sdk"

	"github.com/gputide/gputide/autoscaler-plugin/pluginconf"
	"github.com/gputide/gputide/quota-broker/api/client"
)

// Name is the plugin's name: binary, driver and check source.
const Name = "gputide-apm"

// Plugin-block keys.
const (
	KeyAddress    = "address"
	KeyToken      = "token"
	KeyTimeout    = "timeout"
	KeyCAFile     = "ca_file"
	keyNomadToken = "nomad_token"
)

// DefaultTimeout bounds each broker call when the block gives no timeout.
const DefaultTimeout = 5 * time.Second

// ErrBrokerUnreachable is wrapped by the error of a broker query when the
// broker does not answer, answers 503, or its state is past its staleness
// bound. The message reads "broker unreachable at <address>: <detail>".
var ErrBrokerUnreachable = errors.New("broker unreachable")

// ErrNotConfigured: Query before SetConfig.
var ErrNotConfigured = errors.New("not configured")

var _ apm.APM = (*APM)(nil)

// APM is the plugin. Use New.
type APM struct {
	log hclog.Logger
	now func() time.Time

	mu      sync.RWMutex
	client  *client.Client
	timeout time.Duration
}

// New returns the plugin; now is the clock stamped on points (time.Now when nil).
func New(log hclog.Logger, now func() time.Time) *APM {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if now == nil {
		now = time.Now
	}
	return &APM{log: log, now: now}
}

// PluginInfo names the plugin as an APM.
func (a *APM) PluginInfo() (*base.PluginInfo, error) {
	return &base.PluginInfo{Name: Name, PluginType: sdk.PluginTypeAPM}, nil
}

// SetConfig reads the agent's plugin block (see the package doc). The agent's
// nomad_* keys are ignored but for nomad_token, the token's default; any other
// unknown key is refused by name.
func (a *APM) SetConfig(cfg map[string]string) error {
	if err := pluginconf.Check(Name, cfg, KeyAddress, KeyToken, KeyTimeout, KeyCAFile); err != nil {
		return err
	}
	timeout := DefaultTimeout
	if v, ok := cfg[KeyTimeout]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return &pluginconf.Error{Plugin: Name, Key: KeyTimeout, Reason: fmt.Sprintf("invalid duration %q: want a positive Go duration such as \"5s\"", v)}
		}
		timeout = d
	}
	token, ok := cfg[KeyToken]
	if !ok {
		token = cfg[keyNomadToken]
	}
	c, err := client.New(cfg[KeyAddress], token, timeout)
	if err != nil {
		return &pluginconf.Error{Plugin: Name, Key: KeyAddress, Reason: err.Error()}
	}
	if ca := cfg[KeyCAFile]; ca != "" {
		if c, err = client.NewConfig(client.Config{Address: cfg[KeyAddress], Token: token, CACert: ca, Timeout: timeout}); err != nil {
			return &pluginconf.Error{Plugin: Name, Key: KeyCAFile, Reason: err.Error()}
		}
	}
	a.mu.Lock()
	a.client, a.timeout = c, timeout
	a.mu.Unlock()
	// The timeout as text: over go-plugin's JSON log a time.Duration
	// arrived as a float of nanoseconds (timeout="5e+09").
	a.log.Info("configured", "address", c.Address(), "timeout", timeout.String(), "token_set", token != "")
	return nil
}

// Query answers one query with exactly one point stamped now; the time range
// is ignored (the figures are the broker's current ones). Its errors read as
// agentSafe says.
func (a *APM) Query(query string, _ sdk.TimeRange) (sdk.TimestampedMetrics, error) {
	q, err := ParseQuery(query)
	if err != nil {
		return nil, &agentSafeError{fmt.Errorf("%s: %w", Name, err)}
	}
	v, err := a.value(q)
	if err != nil {
		return nil, &agentSafeError{fmt.Errorf("%s: query %q: %w", Name, query, err)}
	}
	return sdk.TimestampedMetrics{{Timestamp: a.now(), Value: v}}, nil
}

// agentSafe rewrites the two phrases that nomad-autoscaler v0.5.0's policy
// manager takes for a lost Nomad connection (policy/manager.go,
// isUnrecoverableError: any policy error whose text contains "connection
// refused" or "EOF"): such an error stops every policy handler of the agent
// and starts them again 10 s later, so a broker outage seen by one idle
// policy would also stall every gputide-schedule policy, which must outlive
// it (DESIGN §8). Seen in e2e TestAutoscalerScheduleWindowScalesOnce.
var agentSafe = strings.NewReplacer("connection refused", "connection was refused", "EOF", "end of stream")

// agentSafeError is an error of Query whose text is agentSafe's rewrite of
// the wrapped error's; errors.Is and errors.As see the wrapped error.
type agentSafeError struct{ err error }

func (e *agentSafeError) Error() string { return agentSafe.Replace(e.err.Error()) }
func (e *agentSafeError) Unwrap() error { return e.err }

// QueryMultiple is Query as one series.
func (a *APM) QueryMultiple(query string, r sdk.TimeRange) ([]sdk.TimestampedMetrics, error) {
	m, err := a.Query(query, r)
	if err != nil {
		return nil, err
	}
	return []sdk.TimestampedMetrics{m}, nil
}

// value answers a parsed query.
func (a *APM) value(q Query) (float64, error) {
	if q.Kind == KindSchedule {
		return 1, nil // answered locally: no broker call (DESIGN §8)
	}
	a.mu.RLock()
	c, timeout := a.client, a.timeout
	a.mu.RUnlock()
	if c == nil {
		return 0, ErrNotConfigured
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	switch q.Kind {
	case KindIdleFit:
		r, err := c.IdleFit(ctx, q.Namespace, q.Job, q.Group)
		if err != nil {
			return 0, brokerError(c, err)
		}
		return float64(r.IdleFit), nil
	case KindQuota:
		r, err := c.Quotas(ctx)
		if err != nil {
			return 0, brokerError(c, err)
		}
		n, err := quotaEntry(r.Quotas, q, c.Address())
		if err != nil {
			return 0, err
		}
		v, ok := quotaFigure(n, q.Metric)
		if !ok {
			return 0, fmt.Errorf("metric %q has no quota figure", q.Metric)
		}
		return v, nil
	}
	return 0, fmt.Errorf("query kind %d not handled", q.Kind)
}

// brokerError turns an unreachable or stale broker into "broker unreachable at
// <address>: ..." and keeps other errors (403, 404) as the client gave them.
func brokerError(c *client.Client, err error) error {
	if errors.Is(err, client.ErrUnreachable) || errors.Is(err, client.ErrStale) {
		return fmt.Errorf("%w at %s: %w", ErrBrokerUnreachable, c.Address(), err)
	}
	return err
}

// implicitFlavor is the flavor of a tree without flavor blocks (DESIGN
// L13, quota.ImplicitFlavor: the plugin links only the broker's client).
const implicitFlavor = "gpu"

// quotaEntry picks the entry of GET /v1/quotas that q asks for: node
// q.Quota in flavor q.Flavor (DESIGN L13; the broker writes one entry per
// node and flavor). Without a flavor it is the node's only entry (a tree
// of one flavor, the implicit "gpu" included); a node of several flavors
// is then an error naming them, as is an unknown node or flavor.
func quotaEntry(qs []client.Quota, q Query, addr string) (client.Quota, error) {
	var mine []client.Quota
	for _, n := range qs {
		if n.Name == q.Quota {
			if n.Flavor == "" {
				n.Flavor = implicitFlavor // a broker from before flavors
			}
			mine = append(mine, n)
		}
	}
	if len(mine) == 0 {
		return client.Quota{}, fmt.Errorf("quota %q not found at broker %s", q.Quota, addr)
	}
	flavors := make([]string, len(mine))
	for i, n := range mine {
		flavors[i] = n.Flavor
	}
	if q.Flavor == "" {
		if len(mine) == 1 {
			return mine[0], nil
		}
		return client.Quota{}, fmt.Errorf("quota %q has %d flavors at broker %s (%s): name one with flavor=\"...\"", q.Quota, len(mine), addr, strings.Join(flavors, ", "))
	}
	for _, n := range mine {
		if n.Flavor == q.Flavor {
			return n, nil
		}
	}
	return client.Quota{}, fmt.Errorf("quota %q has no flavor %q at broker %s (its flavors: %s)", q.Quota, q.Flavor, addr, strings.Join(flavors, ", "))
}

// quotaFigure returns the field of n that metric names (one of QuotaMetrics);
// ok is false for any other name.
func quotaFigure(n client.Quota, metric string) (v float64, ok bool) {
	f := map[string]int{
		"nominal_gpus": n.NominalGPUs, "used_gpus": n.UsedGPUs, "nonidle_gpus": n.NonidleGPUs,
		"borrowed_gpus": n.BorrowedGPUs, "debt_gpus": n.DebtGPUs, "lendable_gpus": n.LendableGPUs,
		"booked_gpus": n.BookedGPUs, "queued_gpus": n.QueuedGPUs,
	}
	x, ok := f[metric]
	return float64(x), ok
}
