// Package policies keeps the broker's copy of the horizontal scaling
// policies of governed namespaces (Policies), read and followed from Nomad
// by a PolicyWatcher (GET /v1/scaling/policies, each policy's
// /v1/scaling/policy/<id>, parsed as the Autoscaler v0.5.0 reads it), and
// says when a gputide-schedule check next raises a group's count
// (RaisingBoundary): the input of the build's idle groups and pre-warm
// entries (issue 11 items 4-5).
package policies

import (
	"context"
	"fmt"
	"github.com/gputide/gputide/quota-broker/nomad/internal/relist"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/watch"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/scalingpolicy"
	"github.com/gputide/gputide/quota-broker/schedule"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

// IdleStrategy is the name of the gputide-idle strategy (issue 11 item 4):
// a group whose scaling policy has a check with it is an idle group.
const IdleStrategy = "gputide-idle"

// ScalingPolicy is one Nomad scaling policy of a governed namespace, read
// from GET /v1/scaling/policy/<id> and parsed as the Autoscaler v0.5.0
// reads it (scalingpolicy.FromNomadPolicy).
type ScalingPolicy struct {
	ID      string
	Group   plan.GroupKey // the target: namespace, job, task group
	Enabled bool
	Min     int64 // the policy's min (Nomad's default: the group's count)
	Max     int64 // the policy's max (required by Nomad)
	// EvaluationInterval is the policy's evaluation_interval, 0 when not
	// set (the Autoscaler's default then applies) or not a duration.
	EvaluationInterval time.Duration
	Checks             []scalingpolicy.Check
	ModifyIndex        uint64
}

// Has reports whether the policy has a check with the strategy.
func (p *ScalingPolicy) Has(strategy string) bool {
	return slices.ContainsFunc(p.Checks, func(c scalingpolicy.Check) bool { return c.Strategy == strategy })
}

// Policies is the broker's copy of the horizontal scaling policies of
// governed namespaces (DESIGN §5, §8), kept by a PolicyWatcher. Safe for
// concurrent use; a nil *Policies has none.
type Policies struct {
	mu    sync.RWMutex
	byID  map[string]*ScalingPolicy
	index uint64
	// synced reports whether a list succeeded since the last failure: a
	// broker that cannot read the policies plans no idle group (their fit
	// is then unknown, not 0).
	synced bool
}

// NewPolicies returns an empty set.
func NewPolicies() *Policies { return &Policies{byID: map[string]*ScalingPolicy{}} }

// Index returns the Raft index of the last list.
func (p *Policies) Index() uint64 {
	if p == nil {
		return 0
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.index
}

// Synced reports whether the policies are current (the last list worked).
func (p *Policies) Synced() bool {
	if p == nil {
		return false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.synced
}

// withStrategy returns copies of the enabled policies with a check of the
// strategy (their Checks are shared: callers must not change them),
// by target group; a group with several such policies keeps the
// one of lowest ID, so the choice does not depend on map order.
func (p *Policies) withStrategy(strategy string) []ScalingPolicy {
	if p == nil {
		return nil
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []ScalingPolicy
	seen := map[plan.GroupKey]bool{}
	for _, id := range slices.Sorted(maps.Keys(p.byID)) {
		sp := p.byID[id]
		if !sp.Enabled || seen[sp.Group] || !sp.Has(strategy) {
			continue
		}
		seen[sp.Group] = true
		out = append(out, *sp)
	}
	slices.SortFunc(out, func(a, b ScalingPolicy) int { return a.Group.Compare(b.Group) })
	return out
}

// IdlePolicies returns the enabled policies with a gputide-idle check, by
// target group (issue 11 item 4).
func (p *Policies) IdlePolicies() []ScalingPolicy { return p.withStrategy(IdleStrategy) }

// SchedulePolicies returns the enabled policies with a gputide-schedule
// check, by target group: what pre-warm (DESIGN L5, issue 11 item 5)
// evaluates with quota-broker/schedule (the check's Config is the
// strategy block; EvaluationInterval bounds the hold): Build's prewarms
// step turns them into the snapshot's pre-warm entries.
func (p *Policies) SchedulePolicies() []ScalingPolicy {
	return p.withStrategy(scalingpolicy.ScheduleStrategy)
}

// replace sets the whole set (tests and PolicyWatcher).
func (p *Policies) replace(byID map[string]*ScalingPolicy, index uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byID, p.index, p.synced = byID, index, true
}

// Unsynced marks the policies as not synced: a list failed (the
// PolicyWatcher), and until the next one succeeds no idle group is planned
// and no pre-warm made.
func (p *Policies) Unsynced() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.synced = false
}

func (p *Policies) snapshot() map[string]*ScalingPolicy {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return maps.Clone(p.byID)
}

// policyFrom converts a policy read from Nomad; ok is false for one that
// is not horizontal or names no job and group.
func policyFrom(sp *api.ScalingPolicy) (*ScalingPolicy, bool) {
	if sp == nil || (sp.Type != "" && sp.Type != "horizontal") {
		return nil, false
	}
	k := plan.GroupKey{Namespace: nsOrDefault(sp.Target["Namespace"]), Job: sp.Target["Job"], Group: sp.Target["Group"]}
	if sp.Namespace != "" {
		k.Namespace = sp.Namespace
	}
	if k.Job == "" || k.Group == "" {
		return nil, false
	}
	out := &ScalingPolicy{ID: sp.ID, Group: k, Enabled: sp.Enabled == nil || *sp.Enabled,
		Checks: scalingpolicy.FromNomadPolicy(sp.Policy), ModifyIndex: sp.ModifyIndex}
	if sp.Min != nil {
		out.Min = *sp.Min
	}
	if sp.Max != nil {
		out.Max = *sp.Max
	}
	if s, ok := sp.Policy["evaluation_interval"].(string); ok {
		if d, err := time.ParseDuration(s); err == nil && d > 0 {
			out.EvaluationInterval = d
		}
	}
	for i := range out.Checks {
		out.Checks[i].Namespace, out.Checks[i].Job, out.Checks[i].Group = k.Namespace, k.Job, k.Group
	}
	return out, true
}

// DefaultPolicyWait is how long one blocking query on the policy list
// waits for a change.
const DefaultPolicyWait = 5 * time.Minute

// PolicyWatcher keeps Policies in step with Nomad (DESIGN §5): a blocking
// query on GET /v1/scaling/policies of every namespace (namespace "*",
// filtered by Governed), then GET /v1/scaling/policy/<id> for each policy
// that is new or whose ModifyIndex changed; policies no longer listed are
// dropped. On an error it waits (Backoff, doubled up to 30 s) and lists
// again from index 0, and the set is not Synced until a list works.
type PolicyWatcher struct {
	Client   *api.Client
	Governed func(namespace string) bool // nil: every namespace
	Policies *Policies
	Logger   hclog.Logger
	// OnChange, if set, is called after each change of the set. It must
	// not block.
	OnChange func()
	// Wait is the blocking query's wait (default DefaultPolicyWait);
	// Backoff the first wait after a failure (default 1 s).
	Wait, Backoff time.Duration

	relist relist.Relister // see Relist
}

// Relist makes Run end its blocking query and read every policy again at
// once: the policies kept depend on Governed, which changed (see
// Watcher.Relist). why is logged.
func (w *PolicyWatcher) Relist(why string) { w.relist.Ask(why) }

// Run watches until ctx ends and returns ctx's error (or an error at once
// when Policies is nil).
func (w *PolicyWatcher) Run(ctx context.Context) error {
	if w.Policies == nil {
		return fmt.Errorf("policy watcher: no Policies to keep")
	}
	backoff := w.Backoff
	if backoff <= 0 {
		backoff = time.Second
	}
	wait, index, failed := backoff, uint64(0), false
	for {
		start := time.Now()
		var next uint64
		var err error
		why := w.relist.Run(ctx, func(ctx context.Context) {
			next, err = w.Sync(ctx, index)
			// A query that came back at once without a change (a proxy
			// that does not block) waits out the rest of backoff, so the
			// loop never spins; Relist ends the wait.
			if err == nil && index != 0 && next == index {
				if pause := backoff - time.Since(start); pause > 0 {
					sleepCtx(ctx, pause)
				}
			}
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if why != "" {
			w.Logger.Debug("reading the scaling policies again", "reason", why)
			index = 0
			continue
		}
		if err == nil {
			index, wait, failed = next, backoff, false
			continue
		}
		w.Policies.Unsynced()
		if !failed {
			w.Logger.Warn("cannot read the scaling policies; idle groups are not planned until they are read", "error", err, "retry_in", wait)
		}
		failed, index = true, 0
		if !sleepCtx(ctx, wait) {
			return ctx.Err()
		}
		wait = watch.NextBackoff(wait, watch.DefaultMaxBackoff)
	}
}

// sleepCtx waits d or until ctx ends; it reports whether it waited d.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Sync does one blocking list from index (0: answer at once) and reads
// the policies that changed. It returns the list's index.
func (w *PolicyWatcher) Sync(ctx context.Context, index uint64) (uint64, error) {
	wait := w.Wait
	if wait <= 0 {
		wait = DefaultPolicyWait
	}
	q := (&api.QueryOptions{Namespace: "*", WaitIndex: index, WaitTime: wait}).WithContext(ctx)
	stubs, meta, err := w.Client.Scaling().ListPolicies(q)
	if err != nil {
		return 0, fmt.Errorf("failed to list the scaling policies: %w", err)
	}
	if index != 0 && meta.LastIndex == index && w.Policies.Synced() {
		return index, nil // the wait ended without a change
	}
	// Otherwise (a change, or an index gone back after Nomad restored a
	// snapshot) the list is compared with the set: the policies are read
	// again by ModifyIndex, and the list's index is the next one.
	old := w.Policies.snapshot()
	next := make(map[string]*ScalingPolicy, len(stubs))
	changed := false
	for _, st := range stubs {
		ns := nsOrDefault(st.Target["Namespace"])
		if st.Type != "" && st.Type != "horizontal" || (w.Governed != nil && !w.Governed(ns)) {
			continue
		}
		if p, ok := old[st.ID]; ok && p.ModifyIndex == st.ModifyIndex {
			next[st.ID] = p
			continue
		}
		sp, _, err := w.Client.Scaling().GetPolicy(st.ID, (&api.QueryOptions{Namespace: ns}).WithContext(ctx))
		if err != nil {
			return 0, fmt.Errorf("failed to read scaling policy %s of job %q group %q in namespace %q: %w",
				st.ID, st.Target["Job"], st.Target["Group"], ns, err)
		}
		if p, ok := policyFrom(sp); ok {
			next[st.ID] = p
		}
		changed = true
	}
	if len(next) != len(old) {
		changed = true
	}
	w.Policies.replace(next, meta.LastIndex)
	if changed {
		w.Logger.Debug("scaling policies read", "policies", len(next), "index", meta.LastIndex)
		if w.OnChange != nil {
			w.OnChange()
		}
	}
	return meta.LastIndex, nil
}

// nsOrDefault is Nomad's name of an empty namespace.
func nsOrDefault(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

// DefaultEvaluationInterval is the Nomad Autoscaler's evaluation_interval
// when a policy sets none and the tree's settings do not say the agent's
// (autoscaler_evaluation_interval): the Autoscaler v0.5.0 agent's own
// default_evaluation_interval. The pre-warm hold lasts at + this + settle
// then.
const DefaultEvaluationInterval = quota.DefaultAutoscalerEvaluationInterval

// RaisingBoundary returns the first boundary of the policy's first
// gputide-schedule check in (now, now + horizon] whose count after its
// ramp (the count at the boundary + ramp, or at the boundary without one),
// capped at the policy's max (the Autoscaler v0.5.0 clamps a strategy's
// count to the policy's [min, max] before it scales), is above current,
// with that count. ok is false when there is none, or the check's config
// does not parse.
func RaisingBoundary(checks []scalingpolicy.Check, now time.Time, horizon time.Duration, current int, maxCount int64) (time.Time, int, bool) {
	for _, c := range checks {
		if c.Strategy != scalingpolicy.ScheduleStrategy {
			continue
		}
		s, err := schedule.Parse(c.Config)
		if err != nil {
			return time.Time{}, 0, false
		}
		end := now.Add(horizon)
		for t := now; ; {
			at, n, ok := s.NextBoundary(t)
			if !ok || at.After(end) {
				return time.Time{}, 0, false
			}
			if s.Ramp() > 0 {
				n = max(n, s.CountAt(at.Add(s.Ramp())))
			}
			n = int(min(int64(n), maxCount))
			if n > current {
				return at.UTC(), n, true
			}
			t = at
		}
	}
	return time.Time{}, 0, false
}

// IdleView is an idle group as the Actor needs it for scale-down (issue 11
// item 4): its count in the job, its live allocations that are not being
// stopped, the job's modify index the Scale call enforces, and since when
// it has had allocations unplaced (build.Input.UnplacedSince).
type IdleView struct {
	Group          plan.GroupKey
	Count          int
	Live           int
	JobModifyIndex uint64
	// UnplacedSince: since when the group has had allocations unplaced,
	// as the broker recorded it; zero: not recorded (yet).
	UnplacedSince time.Time
}

// Unplaced reports whether the group has allocations unplaced that a
// scale-down would remove: a count above its live allocations, and above
// 1 (a batch job at count 0 is dead).
func (v *IdleView) Unplaced() bool { return v.Count > max(v.Live, 1) }
