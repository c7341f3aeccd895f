package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
)

// consulWait bounds one blocking query (Consul's own default is 5 minutes).
const consulWait = time.Minute

// consul is the Consul KV backend.
type consul struct {
	c      *api.Client
	prefix string
}

// NewConsul returns a store in the Consul KV of cfg (DESIGN §6). An empty
// Address or Token takes CONSUL_HTTP_ADDR / CONSUL_HTTP_TOKEN (as Consul's
// own client does); an empty Prefix is DefaultPrefix. It does not contact
// Consul: the first call that fails says ErrUnavailable.
func NewConsul(cfg ConsulConfig) (*KV, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(cfg.Prefix, "/") || strings.HasPrefix(cfg.Prefix, "/") {
		return nil, newErr("config", "", ErrInvalid, fmt.Errorf(`consul.prefix %q: must end with "/" and not start with one`, cfg.Prefix))
	}
	ac := api.DefaultConfig()
	if cfg.Address != "" {
		ac.Address = cfg.Address
	}
	if cfg.Token != "" {
		ac.Token = cfg.Token
	}
	c, err := api.NewClient(ac)
	if err != nil {
		return nil, newErr("config", "", ErrInvalid, fmt.Errorf("consul.address %q: %w", cfg.Address, err))
	}
	b := &consul{c: c, prefix: cfg.Prefix}
	return &KV{b: b, peer: func() (*KV, error) { return NewConsul(cfg) }}, nil
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

func (c *consul) get(ctx context.Context, key Key, waitIndex uint64) (*entry, uint64, error) {
	p, meta, err := c.c.KV().Get(c.full(key), c.query(ctx, waitIndex))
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
	ps, meta, err := c.c.KV().List(c.full(prefix), c.query(ctx, waitIndex))
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
	ok, resp, _, err := c.c.KV().Txn(ops, c.query(ctx, 0))
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
	id, _, err := c.c.Session().Create(&api.SessionEntry{
		Name: name, TTL: ttl.String(), LockDelay: lockDelay, Behavior: api.SessionBehaviorRelease,
	}, c.writeOpts(ctx))
	if err != nil {
		return "", unavailable("session", "", err)
	}
	return id, nil
}

func (c *consul) renewSession(ctx context.Context, id string) error {
	se, _, err := c.c.Session().Renew(id, c.writeOpts(ctx))
	if err != nil {
		return unavailable("session", "", err)
	}
	if se == nil {
		return newErr("session", "", ErrNotFound, errors.New("session "+id+" is gone"))
	}
	return nil
}

func (c *consul) destroySession(ctx context.Context, id string) error {
	if _, err := c.c.Session().Destroy(id, c.writeOpts(ctx)); err != nil {
		return unavailable("session", "", err)
	}
	return nil
}

func (c *consul) acquire(ctx context.Context, key Key, value []byte, session string) (bool, error) {
	ok, _, err := c.c.KV().Acquire(&api.KVPair{Key: c.full(key), Value: value, Session: session}, c.writeOpts(ctx))
	if err != nil {
		return false, unavailable("acquire", key, err)
	}
	return ok, nil
}

func (c *consul) release(ctx context.Context, key Key, session string) (bool, error) {
	ok, _, err := c.c.KV().Release(&api.KVPair{Key: c.full(key), Session: session}, c.writeOpts(ctx))
	if err != nil {
		return false, unavailable("release", key, err)
	}
	return ok, nil
}

func (c *consul) close() {}

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
