package build

import (
	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/nomad/policies"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// idleGroups is the Build step that turns idle policies into the
// snapshot's idle groups (issue 11 item 4): each enabled policy with a
// gputide-idle check whose target is a governed batch job marked idle and
// elastic (meta gputide_idle, gputide_elastic), running (not stopped) and
// with a task group of that name that asks for GPUs. Shape, priority,
// datacenters, pool and allowed flavors (the job's, jobmeta.JobFlavors, DESIGN
// L13) come from the job; max from the policy; count is the group's
// count. It also returns the groups' IdleViews, by key.
// The views are nil while the policies are not synced (the idle groups
// are not known then), else a map, empty when there are none. Policies of
// other groups are ignored: the gputide-idle strategy of such a
// group reads a fit of 0 (GET /v1/idle-fit answers 404 for it).
func idleGroups(pols *policies.Policies, jobs map[plan.JobKey]*JobView, allocs map[string]*watch.Alloc) ([]plan.IdleGroup, map[plan.GroupKey]*policies.IdleView) {
	if !pols.Synced() {
		return nil, nil
	}
	idle := pols.IdlePolicies()
	views := map[plan.GroupKey]*policies.IdleView{} // not nil: the idle groups are known
	if len(idle) == 0 {
		return nil, views
	}
	var out []plan.IdleGroup
	for _, sp := range idle {
		t, ok := scaledGroupOf(jobs, sp.Group)
		if !ok || !t.view.Options.Idle || !t.view.Options.Elastic || t.typ != plan.JobBatch {
			continue
		}
		v, j, gpus, model, count := t.view, t.view.Job, t.gpus, t.model, t.count
		out = append(out, plan.IdleGroup{Namespace: sp.Group.Namespace, Job: sp.Group.Job, Group: sp.Group.Group,
			Priority: jobmeta.Priority(j), GPUs: gpus, Model: model, Datacenters: jobmeta.Datacenters(j.Datacenters), NodePool: v.Options.Pool,
			Max: int(min(sp.Max, quota.MaxGPUs)), Count: count, Flavors: v.Flavors})
		iv := &policies.IdleView{Group: sp.Group, Count: count}
		if j.JobModifyIndex != nil {
			iv.JobModifyIndex = *j.JobModifyIndex
		}
		views[sp.Group] = iv
	}
	for _, a := range allocs {
		k := plan.GroupKey{Namespace: a.Namespace, Job: a.JobID, Group: a.Group}
		if iv := views[k]; iv != nil && a.Live() && !a.Stopping() {
			iv.Live++
		}
	}
	return out, views
}

// scaledGroup is the target of a scaling policy, resolved: the governed
// job's view, its type, and the task group's GPUs per allocation, model
// and count now.
type scaledGroup struct {
	view  *JobView
	typ   plan.JobType
	gpus  int
	model string
	count int
}

// scaledGroupOf resolves a scaling policy's target group g (the step that
// idleGroups and prewarms share): the job is governed (in jobs), its meta
// parses, it is not stopped, periodic or parameterized, it has a task
// group named g.Group, and that group asks for GPUs; the count is the
// group's (1 when unset). ok is false otherwise; each caller checks the
// job type and meta it needs.
func scaledGroupOf(jobs map[plan.JobKey]*JobView, g plan.GroupKey) (scaledGroup, bool) {
	v := jobs[g.JobKey()]
	if v == nil || v.MetaErr != nil {
		return scaledGroup{}, false
	}
	j := v.Job
	if (j.Stop != nil && *j.Stop) || j.IsPeriodic() || j.IsParameterized() {
		return scaledGroup{}, false
	}
	tg := jobmeta.TaskGroup(j, g.Group)
	if tg == nil {
		return scaledGroup{}, false
	}
	gpus, model := jobmeta.GroupGPUs(tg)
	if gpus == 0 {
		return scaledGroup{}, false
	}
	count := 1
	if tg.Count != nil {
		count = *tg.Count
	}
	return scaledGroup{view: v, typ: plan.JobType(str(j.Type)), gpus: gpus, model: model, count: count}, true
}
