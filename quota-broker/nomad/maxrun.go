package nomad

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/nomad/api"
)

// EnforceMaxRun stops admitted flex requests whose gputide_flex_max_run has
// run out (DESIGN L11): a job in a real pool with live allocations whose
// earliest start is more than max_run before now is stopped (job stop, no
// purge: Nomad sends each task its kill signal and kill_timeout, and the
// job keeps its spec). The core plans only what is pending, so the adapter
// enforces this limit itself. It returns the jobs it stopped, sorted.
//
// Deprecated: the core now plans this stop itself (stop_job, rule
// L11.max_run, at admitted_at + max_run - kill_timeout; the Actor carries it
// out in Execute) and the agent no longer calls EnforceMaxRun.
func (a *Actor) EnforceMaxRun(ctx context.Context, b *Build, now time.Time) ([]plan.JobKey, error) {
	var due []plan.JobKey
	for k, v := range b.Jobs {
		if v.Options.Flex == nil || v.Options.Flex.MaxRun <= 0 || v.Holding || v.Live == 0 {
			continue
		}
		if v.Job.Stop != nil && *v.Job.Stop {
			continue
		}
		start := a.firstStart(k)
		if start.IsZero() || now.Sub(start) <= v.Options.Flex.MaxRun {
			continue
		}
		due = append(due, k)
	}
	slices.SortFunc(due, plan.JobKey.Compare)
	var first error
	for _, k := range due {
		v := b.Jobs[k]
		ran := now.Sub(a.firstStart(k)).Round(time.Second)
		if a.DryRun {
			a.Logger.Info("dry run: would stop a flex request past its max_run", "job", k.String(), "ran", ran, "max_run", v.Options.Flex.MaxRun)
			continue
		}
		if err := a.beforeJob(ctx, k, WriteStatus); err != nil {
			if first == nil {
				first = fmt.Errorf("not stopping flex request %s past its max_run: %w", k, err)
			}
			continue
		}
		ns, id := k.Namespace, k.Job
		if _, _, err := a.Client.Jobs().Deregister(id, false, (&api.WriteOptions{Namespace: ns}).WithContext(ctx)); err != nil {
			if first == nil {
				first = fmt.Errorf("failed to stop flex request %s past its max_run: %w", k, err)
			}
			continue
		}
		a.Logger.Info("stopped a flex request past its max_run (L11)", "job", k.String(), "ran", ran, "max_run", v.Options.Flex.MaxRun)
	}
	return due, first
}

// firstStart is the earliest start of the job's live allocations.
func (a *Actor) firstStart(key plan.JobKey) time.Time {
	ns, id := key.Namespace, key.Job
	var first time.Time
	for _, al := range a.State.Allocs() {
		if al.Namespace == ns && al.JobID == id && al.Live() && (first.IsZero() || al.StartedAt.Before(first)) {
			first = al.StartedAt
		}
	}
	return first
}
