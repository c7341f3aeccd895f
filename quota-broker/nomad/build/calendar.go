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

// recordedPending is steps 5c and 5d of Build: a pending group of a job
// the broker recorded takes its place in the order from the record's
// first_seen (SubmittedAt, DESIGN L11: the order of L3), and a job the
// broker queued again (rule L11.settle) is queued since its queued_at
// (QueuedAt; max_wait counts from it) when that is after its submission.
func recordedPending(pending []plan.Pending, jobs map[plan.JobKey]*JobView) {
	for i := range pending {
		v := jobs[pending[i].JobKey()]
		if v == nil {
			continue
		}
		if t := v.rec.FirstSeen; !t.IsZero() {
			pending[i].SubmittedAt = t
		}
		if t := v.rec.QueuedAt; t.After(pending[i].SubmittedAt) {
			pending[i].QueuedAt = t
		}
	}
}
