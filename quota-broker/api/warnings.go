package api

import "github.com/gputide/gputide/quota-broker/plan"

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
