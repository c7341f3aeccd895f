package jobmeta

import (
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/device"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/hashicorp/nomad/api"
)

// This file reads what a job spec says besides its gputide meta: a task
// group's GPU ask, the job's priority, datacenters and submission time,
// a group's kill_timeout.

// GroupGPUs returns the nvidia/gpu devices one allocation of tg asks for,
// over its tasks, and the model when a device names one ("nvidia/gpu/<model>";
// for a MIG group's name, its GPU's model, the profile being the flavor's,
// DESIGN L13). Requests named "gpu" and "nvidia/gpu" count; other vendors
// do not (device.GPURequest). The sum stops at quota.MaxGPUs+1.
func GroupGPUs(tg *api.TaskGroup) (int, string) {
	n, model := 0, ""
	for _, d := range device.Requests(tg) {
		if d == nil {
			continue
		}
		m, ok := device.GPURequest(d.Name)
		if !ok {
			continue
		}
		if m != "" {
			model, _ = quota.SplitMIGName(m)
		}
		c := 1
		if d.Count != nil {
			// A uint64 past quota.MaxGPUs is kept just past it, not wrapped
			// into a negative int: too many for any plan (Usable refuses
			// it), never read as no GPU.
			c = int(min(*d.Count, uint64(quota.MaxGPUs)+1))
		}
		n = min(n+c, quota.MaxGPUs+1)
	}
	return n, model
}

// Priority is the job's priority, 50 when unset or below 1 (Nomad's
// default).
func Priority(j *api.Job) int {
	if j.Priority == nil || *j.Priority < 1 {
		return 50
	}
	return *j.Priority
}

// Datacenters is the job's datacenters for the core: nil for any ("*").
func Datacenters(dcs []string) []string {
	var out []string
	for _, d := range dcs {
		if d == "*" {
			return nil
		}
		out = append(out, d)
	}
	return out
}

// Submitted is when job j was first submitted, as far as Nomad tells: its
// gputide_submitted meta (written by the broker at its first move), else
// its SubmitTime; zero when neither is known. The agent records it as the
// job's first_seen when it first sees the job (never later than then).
func Submitted(j *api.Job) time.Time {
	if v, ok := j.Meta[MetaSubmitted]; ok {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t
		}
	}
	if j.SubmitTime != nil {
		return time.Unix(0, *j.SubmitTime).UTC()
	}
	return time.Time{}
}

// TaskGroup returns j's task group called name, or nil.
func TaskGroup(j *api.Job, name string) *api.TaskGroup {
	for _, tg := range j.TaskGroups {
		if tg != nil && tg.Name != nil && *tg.Name == name {
			return tg
		}
	}
	return nil
}

// GroupKillTimeout is the largest kill_timeout of the tasks of group in j,
// or plan.DefaultKillTimeout when none sets one.
func GroupKillTimeout(j *api.Job, group string) time.Duration {
	var most time.Duration
	for _, tg := range j.TaskGroups {
		if tg == nil || tg.Name == nil || *tg.Name != group {
			continue
		}
		for _, t := range tg.Tasks {
			if t != nil && t.KillTimeout != nil && *t.KillTimeout > most {
				most = *t.KillTimeout
			}
		}
	}
	if most <= 0 {
		return plan.DefaultKillTimeout
	}
	return most
}
