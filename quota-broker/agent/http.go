package agent

import (
	"context"
	"errors"
	"net/http"
	"os"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gputide/gputide/quota-broker/acl"
	brokerapi "github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/reservation"
	"github.com/gputide/gputide/quota-broker/store"
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

// newAPI builds the agent's HTTP API (package api, DESIGN §9): token
// checks against Nomad with the caller's token (package acl), the reads
// over the agent's last snapshot and plan, Calendar bookings and the
// preemption history in the agent's store (Consul, or memory: then they
// die with the process), the leader state of the agent's lock (L12), and
// /metrics, /v1/metrics on the agent's registry. Quota writes go to the
// store with Consul (every instance's tree watch picks them up); without
// it they answer 409, as the tree is the quota file (DESIGN §6).
func (a *Agent) newAPI() (*brokerapi.Server, error) {
	res, err := acl.NewResolver(acl.Config{Address: a.cfg.Nomad.Address, AdminPolicy: a.cfg.AdminPolicy,
		AdminToken: a.cfg.AdminToken, Now: a.now, Logger: a.log})
	if err != nil {
		return nil, err
	}
	if !a.consul {
		a.log.Warn("no Consul store: quota writes through the API are refused (edit the quota file)")
	}
	return brokerapi.NewServer(brokerapi.Config{
		Backend: agentBackend{a}, Store: a.store, Resolver: res, QuotaWrites: a.consul,
		OpenReadsWithoutACL: a.cfg.OpenReadsWithoutACL, Staleness: a.cfg.Staleness,
		Preemptions: a.preemptions, Registerer: a.registry,
		Metrics: promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{}), Now: a.now,
		CheckTree: func(root *quota.Node, _ quota.Settings, bookings []reservation.Booking, now time.Time) error {
			return a.CheckTree(root, bookings, now, "the new tree")
		},
		Planner: a.planner, Logger: a.log.Named("api"),
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

// IsLeader is whether the agent holds the leader lock now (L12); a dry
// run never does.
func (b agentBackend) IsLeader() bool { return b.a.IsLeader() }

func (b agentBackend) Health() any { return b.a.Health() }

// PendingOf reads a job for a plan preview as the Nomad adapter reads it
// when it is submitted: brokerapi.PendingOfJob gives the GPU groups, then
// the job's gputide meta is read by the adapter's rules (build.
// ParseJobOptions, and jobmeta.CheckReservation against the bookings of the
// last snapshot), so that a job the broker would leave unadmitted with a
// meta error is refused here with the same words (HTTP 400, the field
// Job.Meta.<key>), and the groups carry the adapter's idle, elastic,
// reservation, flex and pool options (job meta only, as the adapter).
func (b agentBackend) PendingOf(job *nomadapi.Job, now time.Time) ([]plan.Pending, error) {
	groups, err := brokerapi.PendingOfJob(job, now)
	if err != nil {
		return nil, err
	}
	b.a.mu.Lock()
	var res []plan.Reservation
	if b.a.lastSnap != nil {
		res = b.a.lastSnap.Reservations
	}
	b.a.mu.Unlock()
	var pools map[string]bool
	if st := b.a.watcher.State(); st != nil {
		pools = st.Pools()
	}
	return previewOptions(job, groups, previewPools{holding: b.a.cfg.HoldingPool, admit: b.a.cfg.AdmitPools, nomad: pools}, res, now)
}

// previewPools are the pools a preview checks a job's gputide_pool
// against, as the snapshot build does (jobmeta.CheckAdmitPool): the holding
// pool (never nameable), the broker's admit_pools and Nomad's pools (nil:
// not listed, not checked).
type previewPools struct {
	holding string
	admit   []string
	nomad   map[string]bool
}

// previewOptions applies the adapter's reading of job's gputide meta to
// the preview's groups, or returns the meta error as a 400 Problem: the
// same meta error the broker marks the job with (a gputide_pool outside
// admit_pools or unknown to Nomad included, issue 16).
func previewOptions(job *nomadapi.Job, groups []plan.Pending, pools previewPools, res []plan.Reservation, now time.Time) ([]plan.Pending, error) {
	ns := "default"
	if job.Namespace != nil && *job.Namespace != "" {
		ns = *job.Namespace
	}
	// The snapshot build's order (watch.State.Build): the meta, the admit
	// pool, the booking; the first error is the job's meta error.
	opts, err := jobmeta.ParseJobOptions(job.Meta, pools.holding)
	if err == nil {
		err = jobmeta.CheckAdmitPool(opts.Pool, pools.admit, pools.nomad)
	}
	if err == nil {
		err = jobmeta.CheckReservation(opts.Reservation, ns, jobmeta.IndexBookings(res), now)
	}
	if err != nil {
		field := "Job.Meta"
		var me *jobmeta.MetaError
		if errors.As(err, &me) {
			field += "." + me.Key
		}
		return nil, &brokerapi.Problem{Status: http.StatusBadRequest, Field: field, Msg: err.Error()}
	}
	for i := range groups {
		g := &groups[i]
		g.Idle, g.Elastic, g.Reservation, g.Flex, g.NodePool = opts.Idle, opts.Elastic, opts.Reservation, opts.Flex, opts.Pool
	}
	return groups, nil
}

// preemptions is the preemption history in the store (written by the
// leaders, DESIGN §6, L8), oldest first.
func (a *Agent) preemptions(ctx context.Context) ([]store.Preemption, error) {
	return a.store.Preemptions(ctx)
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
		DryRun: a.dryRun, Stopping: a.mem.stopping(), Error: st.LastError}
}

// adminTokenFromEnv is GPUTIDE_ADMIN_TOKEN, used when the file sets no
// admin_token.
func adminTokenFromEnv() string { return os.Getenv("GPUTIDE_ADMIN_TOKEN") }
