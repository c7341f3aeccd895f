package watch

import (
	"context"
	"fmt"
	"github.com/gputide/gputide/quota-broker/nomad/internal/relist"
	"sort"
	"sync"
	"time"

	"github.com/gputide/gputide/internal/redact"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

// Topics are the event stream topics the watcher reads (DESIGN §5);
// NamespaceTopic only where the token may (see ResolveNamespaceWatch).
var Topics = []api.Topic{api.TopicJob, api.TopicAllocation, api.TopicEvaluation, api.TopicNode, NamespaceTopic}

// Watcher keeps a State in step with Nomad: a full list, then the event
// stream from the list's index. Before its first list it reads its token
// once (ResolveNamespaceWatch) and logs at INFO how it watches namespaces:
// on the stream, or, for a token that is not a management token, by
// listing them at each State.Refresh. When the stream breaks or Nomad cannot be
// reached, it waits (exponential backoff, see Backoff), lists again and
// streams again. Every (re-)list replaces the state and
// logs how the GPU ledger changed (law L2: the live state wins).
type Watcher struct {
	Client *api.Client
	// Governed says which namespaces' jobs are read in full.
	Governed func(namespace string) bool
	Logger   hclog.Logger
	// OnChange, if set, is called after every re-list and every batch of
	// events applied. It must not block.
	OnChange func()
	// Backoff is the wait before the first reconnect after a failure
	// (default 1s). Each further failed attempt doubles it up to
	// MaxBackoff (default 30s); a successful list resets it.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// sleep, if set, replaces the reconnect wait (tests): it waits d or
	// until ctx ends and reports whether it waited.
	sleep func(ctx context.Context, d time.Duration) bool

	mu        sync.Mutex
	state     *State
	connected bool
	syncedAt  time.Time // last moment the state was known to match Nomad
	relists   int
	lastErr   error
	retry     chan struct{}   // see Touch
	nsWatch   NamespaceWatch  // 0 until resolved; then fixed
	relist    relist.Relister // see Relist
}

// Status is the watcher's view of its connection to Nomad.
type Status struct {
	Connected bool      // a list succeeded and the stream is open
	SyncedAt  time.Time // when the state was last known to be current
	Relists   int       // full lists done, the first included
	Index     uint64    // the Raft index the state is current to
	LastError string    // the last list, stream or probe error, if any
}

// State returns the current state, or nil before the first list.
func (w *Watcher) State() *State {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state
}

// Status returns the connection status.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := Status{Connected: w.connected, SyncedAt: w.syncedAt, Relists: w.relists}
	if w.state != nil {
		st.Index = w.state.Index()
	}
	if w.lastErr != nil {
		st.LastError = w.lastErr.Error()
	}
	return st
}

// Touch records that Nomad answered: while the stream is open the state is
// current as of now; while it is not, Run stops waiting out its backoff and
// lists again at once. The agent calls it after a successful probe, so a
// Nomad that comes back is listed within a probe period, however long the
// backoff has grown.
func (w *Watcher) Touch() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.connected {
		w.syncedAt = w.now()
		return
	}
	select {
	case w.retryC() <- struct{}{}:
	default:
	}
}

// Relist makes Run end its stream (or the list under way) and list Nomad
// again at once: what the state keeps depends on Governed, so when the
// governed namespaces change (the first quota tree read from the store
// after the first list, or a tree that binds a new namespace) the jobs of
// a namespace newly governed were never read. why is logged. A list that
// starts after the call sees the change: requests made before it are
// satisfied by it.
func (w *Watcher) Relist(why string) { w.relist.Ask(why) }

// retryC is the channel Touch wakes Run's backoff with; w.mu must be held.
func (w *Watcher) retryC() chan struct{} {
	if w.retry == nil {
		w.retry = make(chan struct{}, 1)
	}
	return w.retry
}

// Disconnected marks the state as no longer known to be current (a probe
// failed). The stream's own failure is noticed by Run.
func (w *Watcher) Disconnected(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.connected = false
	w.lastErr = err
}

func (w *Watcher) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// DefaultMaxBackoff caps the reconnect backoff when MaxBackoff is unset.
const DefaultMaxBackoff = 30 * time.Second

// NextBackoff is the wait after one that failed again: doubled, at most
// limit.
func NextBackoff(d, limit time.Duration) time.Duration {
	if d >= limit/2 {
		return limit
	}
	return 2 * d
}

// Run lists and streams until ctx ends; it returns ctx's error. A stream
// lost after a successful list is logged at WARN; so is the first failed
// attempt to reach Nomad, and further failures in a row at DEBUG.
func (w *Watcher) Run(ctx context.Context) error {
	first, limit := w.Backoff, w.MaxBackoff
	if first <= 0 {
		first = time.Second
	}
	if limit <= 0 {
		limit = DefaultMaxBackoff
	}
	if limit < first {
		limit = first
	}
	wait := first
	unreachable := false // the failure in a row was already logged at WARN
	for {
		connected, why, err := w.onceOrRelist(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.mu.Lock()
		w.connected = false
		w.lastErr = err
		if why != "" {
			w.lastErr = nil
		}
		w.mu.Unlock()
		if why != "" {
			w.Logger.Info("listing Nomad again", "reason", why)
			wait, unreachable = first, false
			continue
		}
		switch {
		case connected:
			wait, unreachable = first, false
			w.Logger.Warn("lost the Nomad event stream; will list again", "error", err, "retry_in", wait)
		case !unreachable:
			unreachable = true
			w.Logger.Warn(fmt.Sprintf("cannot reach Nomad at %s; will keep retrying", redact.Address(w.Client.Address())), "error", err, "retry_in", wait)
		default:
			w.Logger.Debug("Nomad still unreachable", "address", redact.Address(w.Client.Address()), "error", err, "retry_in", wait)
		}
		w.changed()
		if !w.wait(ctx, wait) {
			return ctx.Err()
		}
		wait = NextBackoff(wait, limit)
	}
}

// wait sleeps d, or less if ctx ends or Touch finds Nomad back first; it
// reports false when ctx ended.
func (w *Watcher) wait(ctx context.Context, d time.Duration) bool {
	if w.sleep != nil {
		return w.sleep(ctx, d)
	}
	w.mu.Lock()
	retry := w.retryC()
	w.mu.Unlock()
	// A Touch from before this failure says nothing about Nomad now.
	select {
	case <-retry:
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	case <-retry:
		w.Logger.Debug("Nomad answers again; listing without waiting out the backoff")
		return true
	}
}

// onceOrRelist runs once until it ends or Relist is called; why is the
// reason given to Relist when that ended it, else "".
func (w *Watcher) onceOrRelist(ctx context.Context) (connected bool, why string, err error) {
	why = w.relist.Run(ctx, func(ctx context.Context) { connected, err = w.once(ctx) })
	return connected, why, err
}

// once does one full list and follows the stream until it fails; connected
// says whether the list succeeded and the stream opened.
func (w *Watcher) once(ctx context.Context) (connected bool, err error) {
	mode, err := w.namespaceWatch(ctx)
	if err != nil {
		return false, err
	}
	s, err := ListAll(ctx, w.Client, w.Governed)
	if err != nil {
		return false, err
	}
	s.nsWatch = mode
	stream, err := w.Client.EventStream().Stream(ctx, topicsFor(mode), s.index+1, &api.QueryOptions{Namespace: "*"})
	if err != nil {
		return false, fmt.Errorf("failed to open the event stream: %w", err)
	}
	w.replace(s)
	for evs := range stream {
		if evs.Err != nil {
			return true, fmt.Errorf("event stream: %w", evs.Err)
		}
		s.Apply(evs, w.Logger)
		w.mu.Lock()
		w.syncedAt = w.now()
		w.mu.Unlock()
		w.changed()
	}
	if ctx.Err() != nil {
		return true, ctx.Err()
	}
	return true, fmt.Errorf("event stream closed")
}

// namespaceWatch returns how namespaces are watched, resolving it on the
// first call that reaches Nomad (ResolveNamespaceWatch) and logging the
// choice once at INFO.
func (w *Watcher) namespaceWatch(ctx context.Context) (NamespaceWatch, error) {
	w.mu.Lock()
	mode := w.nsWatch
	w.mu.Unlock()
	if mode != 0 {
		return mode, nil
	}
	mode, why, err := ResolveNamespaceWatch(ctx, w.Client)
	if err != nil {
		return 0, err
	}
	w.mu.Lock()
	w.nsWatch = mode
	w.mu.Unlock()
	switch mode {
	case NamespacesStreamed:
		w.Logger.Info("watching namespaces on the event stream (Namespace topic)", "reason", why)
	default:
		w.Logger.Info("watching namespaces by listing them at each planning cycle; the event stream leaves out the Namespace topic", "reason", why)
	}
	return mode, nil
}

// replace installs a freshly listed state and logs how the ledger changed.
func (w *Watcher) replace(s *State) {
	w.mu.Lock()
	old := w.state
	w.state = s
	w.connected = true
	w.lastErr = nil
	w.syncedAt = w.now()
	w.relists++
	n := w.relists
	w.mu.Unlock()
	gpus := 0
	for _, g := range s.GPUsByAlloc() {
		gpus += g
	}
	w.Logger.Info("listed Nomad state", "relist", n, "index", s.Index(), "live_gpu_allocations", len(s.GPUsByAlloc()), "gpus_in_use", gpus)
	if old != nil {
		for _, m := range LedgerDiff(old.GPUsByAlloc(), s.GPUsByAlloc()) {
			w.Logger.Warn("L2: ledger re-derived from Nomad differs; the live state wins", "alloc", m.Alloc, "had_gpus", m.Had, "live_gpus", m.Live)
		}
	}
	w.changed()
}

func (w *Watcher) changed() {
	if w.OnChange != nil {
		w.OnChange()
	}
}

// Mismatch is one allocation whose GPUs differ between two ledgers.
type Mismatch struct {
	Alloc     string
	Had, Live int // GPUs before and in the live state (0: absent)
}

// LedgerDiff compares two per-allocation GPU ledgers (GPUsByAlloc) and
// returns the differences sorted by allocation ID.
func LedgerDiff(had, live map[string]int) []Mismatch {
	var out []Mismatch
	for id, g := range had {
		if live[id] != g {
			out = append(out, Mismatch{Alloc: id, Had: g, Live: live[id]})
		}
	}
	for id, g := range live {
		if _, ok := had[id]; !ok {
			out = append(out, Mismatch{Alloc: id, Live: g})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Alloc < out[j].Alloc })
	return out
}
