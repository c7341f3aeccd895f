package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/gputide/gputide/internal/redact"
)

// consulWait bounds one blocking query (Consul's own default is 5 minutes).
const consulWait = time.Minute

// The broker's connections to Consul are bounded (issue 16: 200 concurrent
// bookings opened 200 connections, past Consul's per-client limit
// (limits.http_max_conns_per_client, 200), which answered 429). A store
// keeps three pooled clients, each on its own transport, so that no caller
// can take the connections another part needs:
const (
	// ConsulMaxConns bounds the connections of ordinary calls: reads and
	// writes of API callers and of the leader's acts. More concurrent calls
	// wait for a free connection (guarded writes also queue, writeQueue).
	ConsulMaxConns = 8
	// ConsulWatchConns bounds the blocking queries (the guard watch): a
	// fixed set of the broker's own, never started by a caller.
	ConsulWatchConns = 4
	// ConsulLockConns bounds the leader lock's own client: session
	// create, renew and destroy, acquire and release, Verify (the check
	// before each act, L12) and the lock key's watch. Callers never use
	// it, so a burst of bookings cannot delay the lock check.
	ConsulLockConns = 4
)

// consul is the Consul KV backend.
type consul struct {
	c      *api.Client // ordinary calls (ConsulMaxConns)
	watch  *api.Client // blocking queries on keys other than the lock's (ConsulWatchConns)
	lock   *api.Client // the leader lock (ConsulLockConns)
	prefix string
	// transports are the three clients' own, closed by close.
	transports []*http.Transport
}

// dialFunc dials Consul through own, the transport's dialer; tests count
// connections with it.
type dialFunc func(ctx context.Context, network, addr string, own func(ctx context.Context, network, addr string) (net.Conn, error)) (net.Conn, error)

// NewConsul returns a store in the Consul KV of cfg (DESIGN §6). An empty
// Address or Token takes CONSUL_HTTP_ADDR / CONSUL_HTTP_TOKEN (as Consul's
// own client does); an empty Prefix is DefaultPrefix. It does not contact
// Consul: the first call that fails says ErrUnavailable.
func NewConsul(cfg ConsulConfig) (*KV, error) {
	return newConsul(cfg, nil)
}

// newConsul is NewConsul dialing with dial (nil: the transport's own).
func newConsul(cfg ConsulConfig, dial dialFunc) (*KV, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(cfg.Prefix, "/") || strings.HasPrefix(cfg.Prefix, "/") {
		return nil, newErr("config", "", ErrInvalid, fmt.Errorf(`consul.prefix %q: must end with "/" and not start with one`, cfg.Prefix))
	}
	b := &consul{prefix: cfg.Prefix}
	client := func(maxConns int) (*api.Client, error) {
		ac := api.DefaultConfig() // a pooled transport of its own
		if cfg.Address != "" {
			ac.Address = cfg.Address
		}
		if cfg.Token != "" {
			ac.Token = cfg.Token
		}
		c, err := api.NewClient(ac)
		if err != nil {
			return nil, newErr("config", "", ErrInvalid, fmt.Errorf("consul.address %q: %w", redact.Address(cfg.Address), err))
		}
		// NewClient may have replaced the transport (a unix socket gets
		// one without keep-alives): bound whichever it uses, before use.
		t, ok := ac.HttpClient.Transport.(*http.Transport)
		if !ok {
			return nil, newErr("config", "", ErrInvalid, fmt.Errorf("consul client transport %T: want *http.Transport", ac.HttpClient.Transport))
		}
		t.DisableKeepAlives = false
		t.MaxConnsPerHost, t.MaxIdleConnsPerHost = maxConns, maxConns
		b.transports = append(b.transports, t)
		if dial != nil {
			own := t.DialContext
			if own == nil {
				own = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
			}
			t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				return dial(ctx, network, addr, own)
			}
		}
		return c, nil
	}
	var err error
	if b.c, err = client(ConsulMaxConns); err != nil {
		return nil, err
	}
	if b.watch, err = client(ConsulWatchConns); err != nil {
		return nil, err
	}
	if b.lock, err = client(ConsulLockConns); err != nil {
		return nil, err
	}
	return &KV{b: b, writes: newWriteQueue(), peer: func() (*KV, error) { return newConsul(cfg, dial) }}, nil
}

// consulAddrFromEnv is what tests use: GPUTIDE_CONSUL_ADDR.
func consulAddrFromEnv() string { return os.Getenv("GPUTIDE_CONSUL_ADDR") }

func (c *consul) full(k Key) string { return c.prefix + string(k) }

func (c *consul) rel(full string) Key { return Key(strings.TrimPrefix(full, c.prefix)) }

// unavailable wraps a Consul client error: every failure to get an answer
// (connection refused, timeout, 5xx such as "No cluster leader") means
// the store cannot be used now (L12).
func unavailable(op string, k Key, err error) error {
	var se api.StatusError
	if errors.As(err, &se) && se.Code == 404 {
		return newErr(op, k, ErrNotFound, err)
	}
	return newErr(op, k, ErrUnavailable, err)
}

func (c *consul) query(ctx context.Context, waitIndex uint64) *api.QueryOptions {
	q := &api.QueryOptions{WaitIndex: waitIndex}
	if waitIndex > 0 {
		q.WaitTime = consulWait
	}
	return q.WithContext(ctx)
}

func (c *consul) pair(p *api.KVPair) entry {
	return entry{Key: c.rel(p.Key), Value: p.Value, ModifyIndex: p.ModifyIndex, Session: p.Session}
}

// clientFor is the client of a read of key: the lock's own for the leader
// key (Verify, the lock's watch and wait), the watch client for other
// blocking queries, else the calls client.
func (c *consul) clientFor(key Key, waitIndex uint64) *api.Client {
	switch {
	case key == KeyLeader:
		return c.lock
	case waitIndex > 0:
		return c.watch
	}
	return c.c
}

func (c *consul) get(ctx context.Context, key Key, waitIndex uint64) (*entry, uint64, error) {
	p, meta, err := c.clientFor(key, waitIndex).KV().Get(c.full(key), c.query(ctx, waitIndex))
	if err != nil {
		return nil, 0, unavailable("get", key, err)
	}
	if p == nil {
		return nil, meta.LastIndex, nil
	}
	e := c.pair(p)
	return &e, meta.LastIndex, nil
}

func (c *consul) list(ctx context.Context, prefix Key, waitIndex uint64) ([]entry, uint64, error) {
	ps, meta, err := c.clientFor(prefix, waitIndex).KV().List(c.full(prefix), c.query(ctx, waitIndex))
	if err != nil {
		return nil, 0, unavailable("list", prefix, err)
	}
	out := make([]entry, 0, len(ps))
	for _, p := range ps {
		out = append(out, c.pair(p))
	}
	return out, meta.LastIndex, nil
}

// read is one read-only transaction of get-tree operations: a consistent
// view of all the prefixes. A prefix without "/" at its end is one key.
func (c *consul) read(ctx context.Context, prefixes []Key) ([]entry, error) {
	ops := make(api.KVTxnOps, 0, len(prefixes))
	for _, p := range prefixes {
		ops = append(ops, &api.KVTxnOp{Verb: api.KVGetTree, Key: c.full(p)})
	}
	// Consistent: a server that has just become leader (a restart) may
	// answer default reads before it has applied its log, with an empty or
	// old state; a consistent read waits for that (it answers 500 "Not
	// ready to serve consistent reads" until then, which is ErrUnavailable).
	q := c.query(ctx, 0)
	q.RequireConsistent = true
	ok, resp, _, err := c.c.KV().Txn(ops, q)
	if err != nil {
		return nil, unavailable("read", "", err)
	}
	if !ok {
		return nil, newErr("read", "", ErrUnavailable, txnErrors(resp.Errors))
	}
	out := make([]entry, 0, len(resp.Results))
	for _, p := range resp.Results {
		e := c.pair(p)
		if matchesAny(e.Key, prefixes) {
			out = append(out, e)
		}
	}
	return out, nil
}

// matchesAny: k is one of the exact keys (no "/" at the end) or under one
// of the folders (a "/" at the end) of prefixes; a get-tree of "guard"
// would also return "guardX".
func matchesAny(k Key, prefixes []Key) bool {
	for _, p := range prefixes {
		if k == p || strings.HasSuffix(string(p), "/") && strings.HasPrefix(string(k), string(p)) {
			return true
		}
	}
	return false
}

func txnErrors(errs api.TxnErrors) error {
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		parts = append(parts, fmt.Sprintf("op %d: %s", e.OpIndex, e.What))
	}
	return errors.New(strings.Join(parts, "; "))
}

func (c *consul) write(ctx context.Context, ops []op) ([]entry, int, error) {
	tops := make(api.KVTxnOps, 0, len(ops))
	for _, o := range ops {
		t := &api.KVTxnOp{Key: c.full(o.key)}
		switch o.kind {
		case opSet:
			t.Verb, t.Value = api.KVSet, o.value
		case opCAS:
			t.Verb, t.Value, t.Index = api.KVCAS, o.value, o.index
		case opDelete:
			t.Verb = api.KVDelete
		case opCheckSession:
			t.Verb, t.Session = api.KVCheckSession, o.session
		}
		tops = append(tops, t)
	}
	ok, resp, _, err := c.c.KV().Txn(tops, c.query(ctx, 0))
	if err != nil {
		return nil, -1, unavailable("txn", "", err)
	}
	if !ok {
		if len(resp.Errors) == 0 {
			return nil, -1, newErr("txn", "", ErrUnavailable, errors.New("transaction rolled back without an error"))
		}
		return nil, resp.Errors[0].OpIndex, nil
	}
	out := make([]entry, 0, len(resp.Results))
	for _, p := range resp.Results {
		if p != nil {
			out = append(out, c.pair(p))
		}
	}
	return out, -1, nil
}

func (c *consul) writeOpts(ctx context.Context) *api.WriteOptions {
	return (&api.WriteOptions{}).WithContext(ctx)
}

func (c *consul) createSession(ctx context.Context, name string, ttl, lockDelay time.Duration) (string, error) {
	id, _, err := c.lock.Session().Create(&api.SessionEntry{
		Name: name, TTL: ttl.String(), LockDelay: lockDelay, Behavior: api.SessionBehaviorRelease,
	}, c.writeOpts(ctx))
	if err != nil {
		return "", unavailable("session", "", err)
	}
	return id, nil
}

func (c *consul) renewSession(ctx context.Context, id string) error {
	se, _, err := c.lock.Session().Renew(id, c.writeOpts(ctx))
	if err != nil {
		return unavailable("session", "", err)
	}
	if se == nil {
		return newErr("session", "", ErrNotFound, errors.New("session "+id+" is gone"))
	}
	return nil
}

func (c *consul) destroySession(ctx context.Context, id string) error {
	if _, err := c.lock.Session().Destroy(id, c.writeOpts(ctx)); err != nil {
		return unavailable("session", "", err)
	}
	return nil
}

func (c *consul) acquire(ctx context.Context, key Key, value []byte, session string) (bool, error) {
	ok, _, err := c.lock.KV().Acquire(&api.KVPair{Key: c.full(key), Value: value, Session: session}, c.writeOpts(ctx))
	if err != nil {
		return false, unavailable("acquire", key, err)
	}
	return ok, nil
}

func (c *consul) release(ctx context.Context, key Key, session string) (bool, error) {
	ok, _, err := c.lock.KV().Release(&api.KVPair{Key: c.full(key), Session: session}, c.writeOpts(ctx))
	if err != nil {
		return false, unavailable("release", key, err)
	}
	return ok, nil
}

// close drops the idle connections of the three transports (a call in
// flight keeps its own until it ends).
func (c *consul) close() {
	for _, t := range c.transports {
		t.CloseIdleConnections()
	}
}

// MemoryWarning is what an agent without a consul block logs (DESIGN §6).
const MemoryWarning = "no consul block: the broker keeps its state in memory; bookings, job times and history die with this process, and only one broker may run"

// Open returns the store the agent's configuration asks for: Consul when
// cfg is non-nil, else memory together with MemoryWarning.
func Open(cfg *ConsulConfig) (kv *KV, warning string, err error) {
	if cfg == nil {
		return NewMemory(), MemoryWarning, nil
	}
	kv, err = NewConsul(*cfg)
	return kv, "", err
}
