package build

import (
	"github.com/gputide/gputide/quota-broker/plan"
)

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
