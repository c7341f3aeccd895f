package agent

import (
	"context"
	"fmt"
	"os"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gputide/gputide/quota-broker/acl"
	brokerapi "github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/store"
)

// Health is the body of GET /v1/agent/health (the API adds "leader").
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
	Error      string    `json:"last_error,omitempty"`
}

// newAPI builds the agent's HTTP API (package api, DESIGN §9): token
// checks against Nomad with the caller's token (package acl), the reads
// over the agent's last snapshot and plan, Calendar bookings in an
// in-memory store seeded with the quota tree (they die with the process:
// the agent has no Consul store yet), quota writes answered 409 (the tree
// is the quota file), preemptions from this process's record, and
// /metrics, /v1/metrics on the agent's registry.
func (a *Agent) newAPI() (*brokerapi.Server, error) {
	res, err := acl.NewResolver(acl.Config{Address: a.cfg.Nomad.Address, AdminPolicy: a.cfg.AdminPolicy,
		AdminToken: a.cfg.AdminToken, Now: a.now, Logger: a.log})
	if err != nil {
		return nil, err
	}
	kv := store.NewMemory()
	a.mu.Lock()
	rec := store.TreeRecord{Root: a.tree.Clone(), Settings: a.settings, ChangedAt: a.now()}
	a.mu.Unlock()
	if _, _, err := kv.SeedTree(context.Background(), rec); err != nil {
		return nil, fmt.Errorf("seeding the in-memory store: %w", err)
	}
	a.apiStore = kv
	a.log.Warn("no Consul store: reservations live in memory and die with this process; quota writes are refused (edit the quota file)")
	return brokerapi.NewServer(brokerapi.Config{
		Backend: agentBackend{a}, Store: kv, Resolver: res, QuotaWrites: false,
		OpenReadsWithoutACL: a.cfg.OpenReadsWithoutACL, Staleness: a.cfg.Staleness,
		Preemptions: a.preemptions, Registerer: a.registry,
		Metrics: promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{}), Now: a.now,
	})
}

// agentBackend is the agent as the API's Backend.
type agentBackend struct{ a *Agent }

func (b agentBackend) State() brokerapi.BrokerState {
	st := b.a.watcher.Status()
	b.a.mu.Lock()
	defer b.a.mu.Unlock()
	return brokerapi.BrokerState{Snapshot: b.a.lastSnap, Plan: b.a.lastPlan, SyncedAt: st.SyncedAt}
}

// IsLeader: an agent without the Consul store is the only broker.
func (b agentBackend) IsLeader() bool { return true }

func (b agentBackend) Health() any { return b.a.Health() }

func (b agentBackend) PendingOf(job *nomadapi.Job, now time.Time) ([]plan.Pending, error) {
	return brokerapi.PendingOfJob(job, now)
}

// preemptions gives this process's record in the store's history shape.
func (a *Agent) preemptions(context.Context) ([]store.Preemption, error) {
	list := a.recorder.List()
	out := make([]store.Preemption, 0, len(list))
	for _, p := range list {
		out = append(out, store.Preemption{At: p.Time, Alloc: p.Alloc, Namespace: p.Namespace, Job: p.Job, GPUs: p.GPUs,
			For: p.Claimant.String(), Rule: string(p.Rule)})
	}
	return out, nil
}

// Health returns the agent's health.
func (a *Agent) Health() Health {
	st := a.watcher.Status()
	a.mu.Lock()
	defer a.mu.Unlock()
	return Health{Acting: a.acting, Why: a.why, Connected: st.Connected, SyncedAt: st.SyncedAt,
		Staleness: a.cfg.Staleness.String(), Index: st.Index, Relists: st.Relists, LastPlanAt: a.lastPlanAt,
		DryRun: a.dryRun, Stopping: len(a.actor.Stopping()), Error: st.LastError}
}

// adminTokenFromEnv is GPUTIDE_ADMIN_TOKEN, used when the file sets no
// admin_token.
func adminTokenFromEnv() string { return os.Getenv("GPUTIDE_ADMIN_TOKEN") }
