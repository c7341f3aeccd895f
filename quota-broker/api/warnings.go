package api

import "github.com/gputide/gputide/quota-broker/plan"

// WarningEntry is one warning of the last plan (plan.Warning: a booking or
// a pre-warm that cannot be placed, GPUs held for a scale-up, ...) in
// GET /v1/queue and GET /v1/reservation/<id>. For a namespace the caller
// cannot read (no read-job) only Kind, Namespace and GPUs are set; a
// warning about no namespace (the tree, the snapshot) is shown to admins
// and open reads only.
type WarningEntry struct {
	Kind        string `json:"kind"`
	Namespace   string `json:"namespace,omitempty"`
	GPUs        int    `json:"gpus,omitempty"`
	Reservation string `json:"reservation,omitempty"`
	Job         string `json:"job,omitempty"`
	Group       string `json:"group,omitempty"`
	Message     string `json:"message,omitempty"`
}

// warningsOf returns the warnings of p that keep accepts, as caller c may
// see them (see WarningEntry); nil when there are none.
func warningsOf(p *plan.Plan, c *caller, keep func(plan.Warning) bool) []WarningEntry {
	if p == nil {
		return nil
	}
	var out []WarningEntry
	for _, w := range p.Warnings {
		if !keep(w) {
			continue
		}
		e := WarningEntry{Kind: string(w.Kind), Namespace: w.Namespace, GPUs: w.GPUs}
		switch {
		case w.Namespace == "" && !c.open && !c.admin():
			continue
		case w.Namespace == "" || c.canRead(w.Namespace):
			e.Reservation, e.Job, e.Group, e.Message = w.Reservation, w.Job, w.Group, w.Message
		}
		out = append(out, e)
	}
	return out
}
