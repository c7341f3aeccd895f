package agent

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gputide/gputide/internal/redact"
	brokerapi "github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/history"
	"github.com/gputide/gputide/quota-broker/metrics"
	nomadact "github.com/gputide/gputide/quota-broker/nomad/act"
	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/gputide/gputide/quota-broker/nomad/policies"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/snapshot"
	"github.com/gputide/gputide/quota-broker/store"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
	"github.com/prometheus/client_golang/prometheus"
)

// actTimeout bounds the Nomad calls of one plan; refreshTimeout the reads
// of job summaries before it.
const (
	actTimeout     = 2 * time.Minute
	refreshTimeout = 5 * time.Second
)

// Agent is a running quota broker.
type Agent struct {
	cfg      *Config
	dryRun   bool
	log      hclog.Logger
	client   *api.Client
	prober   *api.Client // with a timeout, for the L12 probe
	watcher  *watch.Watcher
	actor    *nomadact.Actor
	recorder *history.Recorder
	metrics  *metrics.Metrics
	registry *prometheus.Registry
	api      *brokerapi.Server
	now      func() time.Time
	trigger  chan struct{}
	// store is the broker's state (DESIGN §6): Consul with a consul block,
	// else memory; consul says which.
	store  store.Store
	consul bool
	holder string // this agent's name in the leader lock
	// mem is the broker's one memory between cycles (memory.go).
	mem *memory

	mu         sync.Mutex
	lock       *store.Lock // the leader lock while held (L12)
	leaderName string      // the holder last seen, "" when none
	newTerm    bool        // the lock was taken since the last leader cycle
	// evictLoad: read the recent stops from the store's history at the
	// next cycle (a new term; a dry run's first cycle; evictions.go).
	evictLoad  bool
	prunedAt   time.Time // when the history was last pruned (cycle goroutine)
	tree       *quota.Node
	settings   quota.Settings
	quotaMTime time.Time
	lastPlan   *plan.Plan
	lastSnap   *plan.Snapshot
	lastPlanAt time.Time
	acting     bool   // the last cycle was allowed to act (L12)
	why        string // why it was not
	whyStep    string // the step of the cycle that said why
	cycles     int
	addr       string // the HTTP address actually bound
	poolOK     bool   // the holding pool is known to exist (cycle goroutine only)
	seeded     bool   // a dry run recorded its first start (cycle goroutine only)
	// evicted are the recent victim stops eviction budgets count, kept
	// for the window evictWindow (DESIGN L14; evictions.go; cycle
	// goroutine only).
	evicted     []plan.Eviction
	evictWindow time.Duration
	// left are the snapshot faults logged by the last cycle (cycle
	// goroutine only): a fault is logged when it appears, not every cycle.
	left map[string]bool

	// policies are the scaling policies of governed namespaces, kept by
	// policyWatcher (idle groups, issue 11).
	policies      *policies.Policies
	policyWatcher *policies.PolicyWatcher
	// specs keeps what the cycles' builds read of each job's spec, from
	// one cycle to the next (build.Memo).
	memo build.Memo

	// planner computes a plan (Options.Planner, default plan.ComputeFair: DESIGN L14).
	planner Planner
	// lastPanic is the panic of the last cycle while cycles keep
	// panicking, "" after a plan succeeded (cycle goroutine only): a
	// panic is logged with its stack and dumped once per streak.
	lastPanic string
}

// Planner computes the plan of a snapshot: plan.ComputeFair, or a test's.
type Planner func(*plan.Snapshot) (*plan.Plan, error)

// Options are the run-time options of New.
type Options struct {
	DryRun bool
	Logger hclog.Logger     // default: a named stderr logger at cfg.LogLevel
	Now    func() time.Time // default time.Now
	// Store overrides the store the configuration names (tests: several
	// agents on one memory store).
	Store store.Store
	// Planner overrides plan.ComputeFair (tests: a planner that panics).
	Planner Planner
}

// New creates an agent from cfg: it loads the quota tree (law L1 checked)
// and the Nomad client. It does not contact Nomad.
func New(cfg *Config, opt Options) (*Agent, error) {
	log := opt.Logger
	if log == nil {
		log = hclog.New(&hclog.LoggerOptions{Name: "gputide", Level: hclog.LevelFromString(cfg.LogLevel), Output: os.Stderr})
	}
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	a := &Agent{cfg: cfg, dryRun: opt.DryRun, log: log, now: now, trigger: make(chan struct{}, 1),
		recorder: &history.Recorder{}, registry: prometheus.NewRegistry(), store: opt.Store, planner: opt.Planner,
		evictLoad: opt.DryRun}
	if a.planner == nil {
		a.planner = plan.ComputeFair
	}
	a.consul = cfg.Consul != nil
	if a.store == nil {
		kv, warning, err := store.Open(cfg.Consul)
		if err != nil {
			return nil, err
		}
		if warning != "" {
			log.Warn(warning)
		}
		a.store = kv
	}
	a.mem = newMemory(a.store, !opt.DryRun)
	if err := a.loadQuota(); err != nil {
		return nil, err
	}
	apiCfg := api.DefaultConfig()
	apiCfg.Address = cfg.Nomad.Address
	apiCfg.SecretID = cfg.Nomad.Token
	apiCfg.Region = cfg.Nomad.Region
	client, err := api.NewClient(apiCfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create the Nomad client: %w", err)
	}
	a.client = client
	probeCfg := api.DefaultConfig()
	probeCfg.Address, probeCfg.SecretID, probeCfg.Region = cfg.Nomad.Address, cfg.Nomad.Token, cfg.Nomad.Region
	probeCfg.HttpClient = &http.Client{Timeout: cfg.Staleness / 3}
	if a.prober, err = api.NewClient(probeCfg); err != nil {
		return nil, fmt.Errorf("failed to create the Nomad client: %w", err)
	}
	a.metrics = metrics.New(a.registry)
	a.watcher = &watch.Watcher{Client: client, Governed: a.governed, Logger: log.Named("watch"), OnChange: a.poke, Now: now}
	a.actor = &nomadact.Actor{Client: client, HoldingPool: cfg.HoldingPool, Logger: log.Named("act"), DryRun: opt.DryRun,
		Now: now}
	a.policies = policies.NewPolicies()
	a.policyWatcher = &policies.PolicyWatcher{Client: client, Governed: a.governed, Policies: a.policies,
		Logger: log.Named("policies"), OnChange: a.poke}
	if a.api, err = a.newAPI(); err != nil {
		return nil, fmt.Errorf("failed to create the HTTP API: %w", err)
	}
	return a, nil
}

// governed says whether the agent governs a namespace: it is bound in the
// quota tree and, when the configuration lists namespaces, listed.
func (a *Agent) governed(ns string) bool {
	a.mu.Lock()
	tree := a.tree
	a.mu.Unlock()
	if _, ok := quota.Namespaces(tree)[ns]; !ok {
		return false
	}
	if len(a.cfg.Namespaces) == 0 {
		return true
	}
	for _, n := range a.cfg.Namespaces {
		if n == ns {
			return true
		}
	}
	return false
}

// loadQuota (re)reads the quota file when it changed (without Consul; with
// Consul the file only seeds the store, see watchTree). An invalid tree is
// logged and the running tree stays (law L1). Nodes whose nominal changed
// get ChangedAt = now (debt grace, law L9). The tree is copied into the
// memory store.
func (a *Agent) loadQuota() error {
	if a.consul {
		return nil
	}
	st, err := os.Stat(a.cfg.QuotaFile)
	if err != nil {
		return fmt.Errorf("failed to read the quota file: %w", err)
	}
	if !st.Mode().IsRegular() { // a FIFO would block the reload, a device never end
		return &ConfigError{File: a.cfg.QuotaFile, Err: ErrNotRegular, Why: fmt.Sprintf("quota file: not a regular file (%s)", st.Mode().Type())}
	}
	a.mu.Lock()
	same := a.tree != nil && st.ModTime().Equal(a.quotaMTime)
	a.mu.Unlock()
	if same {
		return nil
	}
	tree, settings, err := quota.LoadFile(a.cfg.QuotaFile)
	if err != nil {
		return fmt.Errorf("failed to load the quota tree: %w", err)
	}
	// The bookings of the memory store: a file that would break one is
	// refused like a tree write (CheckTree).
	rctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	g, err := a.store.ReadGuarded(rctx)
	cancel()
	if err != nil {
		return fmt.Errorf("failed to read the bookings: %w", err)
	}
	if err := a.useTree(tree, settings, g.Reservations, a.cfg.QuotaFile); err != nil {
		return err
	}
	a.mu.Lock()
	a.quotaMTime = st.ModTime()
	a.mu.Unlock()
	a.publishTree(context.Background())
	return nil
}

func (a *Agent) poke() {
	select {
	case a.trigger <- struct{}{}:
	default:
	}
}

// Addr returns the address the HTTP server listens on, once Run started it.
func (a *Agent) Addr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addr
}

// Recorder returns the preemption record.
func (a *Agent) Recorder() *history.Recorder { return a.recorder }

// Run runs the agent until ctx ends: it creates the holding pool, serves
// HTTP, watches Nomad, probes it, and plans on every change and at least
// every interval. It returns nil after a graceful stop, or the error that
// kept it from starting (the HTTP address in use).
func (a *Agent) Run(ctx context.Context) error {
	var cert tls.Certificate
	if a.cfg.TLSCertFile != "" {
		c, err := tls.LoadX509KeyPair(a.cfg.TLSCertFile, a.cfg.TLSKeyFile)
		if err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		cert = c
	}
	ln, err := net.Listen("tcp", a.cfg.HTTPBind)
	if err != nil {
		return fmt.Errorf("failed to listen on %s: %w", a.cfg.HTTPBind, err)
	}
	a.mu.Lock()
	a.addr = ln.Addr().String()
	a.mu.Unlock()
	host, _ := os.Hostname()
	a.holder = host + " " + a.Addr()
	// Every timeout and a connection cap (api.HTTPServer, api.MaxConns;
	// issue 16: slow clients).
	srv := brokerapi.HTTPServer(a.api.Handler(), brokerapi.HTTPLimits{})
	ln = brokerapi.LimitListener(ln, brokerapi.MaxConns)
	if a.cfg.TLSCertFile != "" {
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	a.log.Info("gputide agent started", "nomad", redact.Address(a.cfg.Nomad.Address), "http", a.Addr(), "holding_pool", a.cfg.HoldingPool,
		"interval", a.cfg.Interval, "staleness_bound", a.cfg.Staleness, "dry_run", a.dryRun)

	// Released after the last cycle and after lead returned (defers run
	// last first): nothing acts once a standby may.
	defer a.releaseLock()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); _ = a.watcher.Run(ctx) }()
	go func() { defer wg.Done(); _ = a.policyWatcher.Run(ctx) }()
	go func() { defer wg.Done(); a.probe(ctx) }()
	wg.Add(1)
	if a.consul {
		go func() { defer wg.Done(); a.watchTree(ctx) }()
	} else {
		go func() { defer wg.Done(); a.watchStore(ctx, nil) }()
	}
	if !a.dryRun {
		wg.Add(1)
		go func() { defer wg.Done(); a.lead(ctx) }()
	}
	defer wg.Wait()

	tick := time.NewTicker(a.cfg.Interval)
	defer tick.Stop()
	wake := newWakeTimer() // the last plan's WakeAt (calendar.go)
	for {
		select {
		case <-ctx.Done():
			a.log.Info("gputide agent stopping")
			return nil
		case <-a.trigger:
		case <-tick.C:
		case <-wake.C():
			wake.fired()
		}
		a.cycle(ctx)
		wake.reset(a.wakeAt(), a.now())
	}
}

// probe asks Nomad for its leader every third of the staleness bound: a
// success while the stream is open means the state is current (L12).
func (a *Agent) probe(ctx context.Context) {
	every := a.cfg.Staleness / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := a.prober.Status().Leader()
		if err != nil {
			a.watcher.Disconnected(err)
		} else {
			a.watcher.Touch()
		}
		a.poke()
	}
}

// fresh reports whether the agent may act now (law L12), and why not.
func (a *Agent) fresh() (bool, string) {
	st := a.watcher.Status()
	if !st.Connected {
		why := "not connected to Nomad"
		if st.LastError != "" {
			why += ": " + st.LastError
		}
		return false, why
	}
	if age := a.now().Sub(st.SyncedAt); age > a.cfg.Staleness {
		return false, fmt.Sprintf("state is %s old, more than the %s bound", age.Round(time.Millisecond), a.cfg.Staleness)
	}
	return true, ""
}

// logLeft logs each item left out of the plan for breaking a snapshot
// rule, once while it stays left out.
func (a *Agent) logLeft(faults []*plan.Fault) {
	now := make(map[string]bool, len(faults))
	for _, f := range faults {
		key := f.Item.String() + "\x00" + f.ID + "\x00" + f.Job.String() + "\x00" + f.Error()
		now[key] = true
		if !a.left[key] {
			a.log.Warn("left out of the plan: it breaks a snapshot rule", "item", f.Item.String(), "id", f.ID,
				"job", f.Job.String(), "path", f.Path, "problem", f.Message)
		}
	}
	a.left = now
}

// setActing records whether the cycle that ended in step acts (L12) and
// why not; it logs a change once: a cycle that stops in the same step as
// the last one is not logged again (its reason may carry a figure that
// changes every cycle, such as the state's age).
func (a *Agent) setActing(ok bool, why, step string) {
	a.mu.Lock()
	changed := a.acting != ok || a.cycles == 0 || (!ok && a.whyStep != step)
	a.acting, a.why, a.whyStep = ok, why, step
	a.cycles++
	a.mu.Unlock()
	if changed {
		if ok {
			a.log.Info("acting: state is current")
		} else {
			a.log.Warn("not acting (L12)", "step", step, "why", why)
		}
	}
}

// observe keeps the plan for reads, logs warnings and meta errors, feeds
// the metrics and dumps the snapshot and plan when asked.
func (a *Agent) observe(b *build.Build, p *plan.Plan, took time.Duration) {
	a.mu.Lock()
	a.lastPlan, a.lastSnap, a.lastPlanAt = p, b.Snapshot, a.now()
	a.mu.Unlock()
	metaErrs, pending := 0, 0
	for _, v := range b.Jobs {
		if v.MetaErr != nil {
			metaErrs++
		}
		pending += v.Pending
	}
	a.metrics.Plans.Inc()
	a.metrics.PlanSeconds.Observe(took.Seconds())
	a.metrics.MetaErrors.Set(float64(metaErrs))
	a.metrics.PendingJobs.Set(float64(pending))
	a.metrics.ObservePlan(p, b.Snapshot.Quota)
	for _, w := range p.Warnings {
		a.log.Debug("plan warning", "kind", w.Kind, "namespace", w.Namespace, "warning", w.Message)
	}
	if a.dryRun {
		for _, act := range p.Actions {
			if act.Action != plan.ActionWait {
				a.log.Info("dry run: plan action", "action", act.Action, "namespace", act.Namespace, "job", act.Job, "group", act.Group,
					"alloc", act.Alloc, "count", act.Count, "gpus", act.GPUs, "rule", act.Rule, "for", act.For.String(), "reason", act.Reason)
			}
		}
	}
	if a.cfg.DumpDir != "" && len(p.Actions) > 0 {
		a.dump(b.Snapshot, p, nil)
	}
}

// dump writes the snapshot, the plan and the panic that are not nil into
// dump_dir under one stamp, prunes the folder, and returns the paths
// written.
func (a *Agent) dump(s *plan.Snapshot, p *plan.Plan, pe *PanicError) []string {
	if err := os.MkdirAll(a.cfg.DumpDir, 0o755); err != nil {
		a.log.Warn("failed to dump the snapshot", "error", err)
		return nil
	}
	stamp := a.now().UTC().Format("20060102T150405.000000000")
	var files []struct {
		name string
		fn   func(*os.File) error
	}
	add := func(name string, fn func(*os.File) error) {
		files = append(files, struct {
			name string
			fn   func(*os.File) error
		}{name, fn})
	}
	if s != nil {
		add("snapshot-"+stamp+".json", func(w *os.File) error { return snapshot.Encode(w, s) })
	}
	if p != nil {
		add("plan-"+stamp+".json", func(w *os.File) error { return snapshot.EncodePlan(w, p) })
	}
	var written []string
	for _, f := range files {
		path := filepath.Join(a.cfg.DumpDir, f.name)
		w, err := os.Create(path)
		if err == nil {
			err = f.fn(w)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			a.log.Warn("failed to dump", "file", f.name, "error", err)
			continue
		}
		written = append(written, path)
	}
	if pe != nil {
		path := filepath.Join(a.cfg.DumpDir, "panic-"+stamp+".json")
		if err := writePanicDump(path, pe); err != nil {
			a.log.Warn("failed to dump", "file", filepath.Base(path), "error", err)
		} else {
			written = append(written, path)
		}
	}
	if n, err := pruneDumps(a.cfg.DumpDir, a.cfg.DumpMaxFiles); err != nil {
		a.log.Warn("failed to prune the dumps", "dir", a.cfg.DumpDir, "max_files", a.cfg.DumpMaxFiles, "error", err)
	} else if n > 0 {
		a.log.Debug("pruned the dumps", "dir", a.cfg.DumpDir, "removed", n, "max_files", a.cfg.DumpMaxFiles)
	}
	return written
}

// ensureHoldingPool creates the holding node pool if Nomad lacks it.
func (a *Agent) ensureHoldingPool(ctx context.Context) error {
	_, _, err := a.client.NodePools().Info(a.cfg.HoldingPool, (&api.QueryOptions{}).WithContext(ctx))
	if err == nil {
		a.poolOK = true
		return nil
	}
	pool := &api.NodePool{Name: a.cfg.HoldingPool,
		Description: "gputide holding pool: governed jobs wait here, with no nodes, until the broker admits them"}
	if _, err := a.client.NodePools().Register(pool, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return err
	}
	a.log.Info("created the holding pool", "pool", a.cfg.HoldingPool)
	a.poolOK = true
	return nil
}
