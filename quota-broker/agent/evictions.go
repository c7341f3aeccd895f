package agent

import (
	"context"
	"fmt"
	"slices"
	"time"

	nomadact "github.com/gputide/gputide/quota-broker/nomad/act"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/store"
)

// The recent victim stops that eviction budgets count (DESIGN L14,
// issue 19 item 3; snapshot `evictions`). The broker keeps its stops in
// the store's history (history/preemptions, recordPreemptions); the
// leader reads the recent ones from there at the first cycle of its term,
// so that it counts its predecessor's stops, and keeps them in
// Agent.evicted from then on: it appends the counted stops of each act
// (noteEvictions) and drops, each cycle, those older than the tree's
// largest max_evict per (plan.RecentEvictions), none at all while no node
// has a budget. A tree change that widens that window reads the history
// again, so that a budget counts the stops within its whole window. A dry
// run reads the history once, as a leader's first cycle; a standby reads
// none (its plans are never carried out).

// evictions is the read step's part: the evictions of the cycle's
// snapshot (c.evictions), read from the store's history when needed.
// The history's entries are counted by the tree of now (a namespace's
// node; rules and GPUs as recorded).
func (a *Agent) evictions(ctx context.Context, c *cycleState) error {
	w := quota.EvictWindow(c.tree)
	a.mu.Lock()
	load := a.evictLoad || w > a.evictWindow
	a.mu.Unlock()
	if load && (c.lock != nil || a.dryRun) && w > 0 {
		sctx, cancel := context.WithTimeout(ctx, storeTimeout)
		ps, err := a.store.Preemptions(sctx)
		cancel()
		if err != nil {
			return fmt.Errorf("failed to read the recent stops from the store's history (eviction budgets, DESIGN L14): %w", err)
		}
		a.evicted = evictionsOf(c.tree, ps, c.start)
		a.log.Debug("read the recent stops from the history", "stops", len(ps), "window", w)
	}
	if c.lock != nil || a.dryRun {
		a.mu.Lock()
		a.evictLoad = false
		a.mu.Unlock()
	}
	a.evictWindow = w
	a.evicted = plan.RecentEvictions(c.tree, a.evicted, c.start)
	c.evictions = slices.Clone(a.evicted) // the snapshot is kept for the HTTP reads
	return nil
}

// evictionsOf turns the history's preemptions into the evictions budgets
// count (plan.Evictions: by the victim's quota node in root, only the
// rules DESIGN L14 names), each at its own time, in the history's order.
// A stop recorded after now (a predecessor whose clock was ahead of this
// broker's) counts as made now: it is recent, not to be left out.
func evictionsOf(root *quota.Node, ps []store.Preemption, now time.Time) []plan.Eviction {
	var out []plan.Eviction
	for _, p := range ps {
		at := p.At
		if at.After(now) {
			at = now
		}
		out = append(out, plan.Evictions(root, []plan.Action{stopAction(p.Namespace, p.GPUs, plan.Rule(p.Rule))}, at)...)
	}
	return out
}

// stopAction is the stop action a budget counts of one stop made.
func stopAction(namespace string, gpus int, rule plan.Rule) plan.Action {
	return plan.Action{Action: plan.ActionStop, Namespace: namespace, GPUs: gpus, Rule: rule}
}

// noteEvictions is the account step's part: the counted stops the act
// made join the recent ones, each at the time Nomad accepted it (the
// time the history records). Kept only while the tree has a budget.
func (a *Agent) noteEvictions(tree *quota.Node, out nomadact.Outcome, now time.Time) {
	if a.evictWindow <= 0 {
		return
	}
	for _, s := range out.Preempted {
		a.evicted = append(a.evicted, plan.Evictions(tree, []plan.Action{stopAction(s.Namespace, s.GPUs, s.Rule)}, s.Time)...)
	}
	a.evicted = plan.RecentEvictions(tree, a.evicted, now)
}
