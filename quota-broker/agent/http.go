package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/gputide/gputide/quota-broker/snapshot"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Health is the body of GET /v1/agent/health.
type Health struct {
	Acting     bool      `json:"acting"`          // the last cycle was allowed to act (L12)
	Why        string    `json:"why,omitempty"`   // why not
	Connected  bool      `json:"connected"`       // the Nomad stream is open
	SyncedAt   time.Time `json:"synced_at"`       // when the state was last known current
	Staleness  string    `json:"staleness_bound"` // the L12 bound
	Index      uint64    `json:"index"`           // Nomad index of the state
	Relists    int       `json:"relists"`         // full lists so far
	LastPlanAt time.Time `json:"last_plan_at"`    // when the last plan was made
	DryRun     bool      `json:"dry_run"`         // plans are only logged
	Stopping   int       `json:"stopping"`        // allocations stopped and not yet gone
	// Leader is the name of the leader lock's holder as last read ("" when
	// none); IsLeader says whether it is this agent (DESIGN L12).
	Leader   string `json:"leader"`
	IsLeader bool   `json:"is_leader"`
	Store    string `json:"store"` // "consul" or "memory"
	Error    string `json:"last_error,omitempty"`
}

// handler serves the agent's reads. They keep working while Nomad is
// unreachable (L12):
//
//	GET /v1/agent/health   Health
//	GET /v1/plan           the last plan (docs/snapshot-format.md)
//	GET /v1/snapshot       the snapshot of the last plan
//	GET /v1/preemptions    the preemption history in the store, oldest first
//	GET /metrics           Prometheus metrics
func (a *Agent) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /v1/agent/health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, a.Health())
	})
	mux.HandleFunc("GET /v1/preemptions", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
		defer cancel()
		list, err := a.preemptions(ctx)
		if err != nil {
			http.Error(w, "failed to read the preemption history: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, list)
	})
	mux.HandleFunc("GET /v1/plan", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		p := a.lastPlan
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = snapshot.EncodePlan(w, p)
	})
	mux.HandleFunc("GET /v1/snapshot", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		s := a.lastSnap
		a.mu.Unlock()
		if s == nil {
			http.Error(w, "no snapshot yet", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = snapshot.Encode(w, s)
	})
	return mux
}

// Health returns the agent's health.
func (a *Agent) Health() Health {
	st := a.watcher.Status()
	isLeader := a.IsLeader()
	kind := "memory"
	if a.consul {
		kind = "consul"
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	leader := a.leaderName
	if isLeader {
		leader = a.holder
	}
	return Health{Leader: leader, IsLeader: isLeader, Store: kind, Acting: a.acting, Why: a.why, Connected: st.Connected, SyncedAt: st.SyncedAt,
		Staleness: a.cfg.Staleness.String(), Index: st.Index, Relists: st.Relists, LastPlanAt: a.lastPlanAt,
		DryRun: a.dryRun, Stopping: len(a.actor.Stopping()), Error: st.LastError}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
