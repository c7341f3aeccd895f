package build

import (
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/nomad/api"
)

// groupKillTimeout is the largest kill_timeout of the tasks of group in j,
// or plan.DefaultKillTimeout when none sets one.
func groupKillTimeout(j *api.Job, group string) time.Duration {
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

// firstSeenPending is step 5c of Build: a pending group of a job the
// broker has a first_seen for (the store's jobs/ record, DESIGN L11) has
// its place in the order of L3 from it (SubmittedAt), not from Nomad's
// SubmitTime, which every registration (the broker's own moves between
// pools, a user's update) resets.
func firstSeenPending(pending []plan.Pending, firstSeen func(plan.JobKey) time.Time) {
	if firstSeen == nil {
		return
	}
	for i := range pending {
		if t := firstSeen(pending[i].JobKey()); !t.IsZero() {
			pending[i].SubmittedAt = t
		}
	}
}

// requeuedPending is step 5d of Build: a pending group of a job the broker
// queued again (rule L11.settle) is queued since then (QueuedAt; max_wait
// counts from it, DESIGN L11), when that is after its submission.
func requeuedPending(pending []plan.Pending, requeued func(plan.JobKey) time.Time) {
	if requeued == nil {
		return
	}
	for i := range pending {
		if t := requeued(pending[i].JobKey()); t.After(pending[i].SubmittedAt) {
			pending[i].QueuedAt = t
		}
	}
}
