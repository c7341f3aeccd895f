package act

import (
	"context"
	"fmt"
	"github.com/gputide/gputide/quota-broker/nomad/policies"
	"maps"
	"slices"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/nomad/api"
)

// DefaultSettle is how long an idle group may have allocations unplaced
// before the broker lowers its count (issue 11 item 4, `settle`).
const DefaultSettle = 30 * time.Second

func (a *Actor) settle() time.Duration {
	if a.Settle > 0 {
		return a.Settle
	}
	return DefaultSettle
}

// scaleDown is step 8 (issue 11 item 4, DESIGN §8: the gputide-idle
// strategy never shrinks a group, the broker does). For each idle group of
// the build, in key order, the count is set to its live allocations that
// are not being stopped, less those this Execute stopped, never below 1 (a
// batch job at count 0 is dead), when it is above that and either
//
//   - this Execute stopped an allocation of the group (any rule), or
//   - the group has had allocations unplaced (count above its live
//     allocations) for Settle (default 30 s) in a row: since
//     IdleView.UnplacedSince, which the broker records in its store when
//     a cycle first sees them unplaced (so a successor counts from its
//     predecessor's instant, issue 18) and drops through the Fence before
//     the Scale call.
//
// The Scale call enforces the job's modify index (the latest the State
// knows, since step 3 may have moved the job), so a job changed meanwhile
// is not scaled on stale figures; the next plan tries again.
func (x *execution) scaleDown(ctx context.Context) {
	a := x.a
	stopped := x.stoppedByGroup()
	now := a.now()
	for _, k := range slices.SortedFunc(maps.Keys(x.b.Idle), plan.GroupKey.Compare) {
		v := x.b.Idle[k]
		due := stopped[k] > 0 ||
			v.Unplaced() && !v.UnplacedSince.IsZero() && now.Sub(v.UnplacedSince) >= a.settle()
		if !due {
			continue
		}
		count := max(v.Live-stopped[k], 1)
		if count >= v.Count {
			continue
		}
		reason := fmt.Sprintf("%d allocations unplaced for %s", v.Count-v.Live, a.settle())
		if stopped[k] > 0 {
			reason = fmt.Sprintf("%d allocations stopped by gputide", stopped[k])
		}
		if err := a.scale(ctx, v, count, reason); err != nil {
			x.fail("scale", err)
			continue
		}
		x.out.ScaledDown++
	}
}

// stoppedByGroup counts, per task group, the allocations this Execute
// stopped.
func (x *execution) stoppedByGroup() map[plan.GroupKey]int {
	ids := map[string]bool{}
	for _, s := range x.out.Preempted {
		ids[s.Alloc] = true
	}
	out := map[plan.GroupKey]int{}
	for _, act := range x.p.Actions {
		if act.Action == plan.ActionStop && ids[act.Alloc] {
			out[plan.GroupKey{Namespace: act.Namespace, Job: act.Job, Group: act.Group}]++
		}
	}
	return out
}

// scale sets the count of idle group v to count with the Scale API
// (PUT /v1/job/<id>/scale), enforcing the job's modify index. The broker
// overrides no Sentinel policy (PolicyOverride false), as its registers
// do not.
func (a *Actor) scale(ctx context.Context, v *policies.IdleView, count int, reason string) error {
	k := v.Group
	if a.DryRun {
		a.Logger.Info("dry run: would scale down an idle group", "group", k.String(), "from", v.Count, "to", count, "reason", reason)
		return nil
	}
	if err := a.beforeScale(ctx, k); err != nil { // only the leader acts (L12)
		return fmt.Errorf("not scaling group %q of job %q in namespace %q: %w", k.Group, k.Job, k.Namespace, err)
	}
	index := v.JobModifyIndex
	if a.State != nil {
		if j := a.State.Job(k.Namespace, k.Job); j != nil && j.JobModifyIndex != nil {
			index = *j.JobModifyIndex
		}
	}
	n := int64(count)
	req := &api.ScalingRequest{
		Count:          &n,
		Target:         map[string]string{"Namespace": k.Namespace, "Job": k.Job, "Group": k.Group},
		Message:        "gputide: idle group scaled down to its live allocations: " + reason,
		Meta:           map[string]any{"gputide_from": v.Count, "gputide_to": count},
		JobModifyIndex: index,
	}
	wo := (&api.WriteOptions{Namespace: k.Namespace}).WithContext(ctx)
	if _, _, err := a.Client.Jobs().ScaleWithRequest(k.Job, req, wo); err != nil {
		return fmt.Errorf("failed to scale group %q of job %q in namespace %q from %d to %d: %w",
			k.Group, k.Job, k.Namespace, v.Count, count, err)
	}
	a.Logger.Info("scaled down an idle group", "group", k.String(), "from", v.Count, "to", count, "reason", reason)
	return nil
}
