package api

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// JobResponse is the body of GET /v1/job/<namespace>/<job>: one job's
// whole story in the last plan (issue 20): its waiting groups with their
// place in the order and what binds them, its running allocations and the
// stops the plan makes of them, what it waits for next and when, and the
// plan's warnings about it. It needs read-job on the namespace; whatever
// it names of a namespace the caller cannot read is cut to that
// namespace, as in GET /v1/queue.
type JobResponse struct {
	State
	Namespace string `json:"namespace"`
	Job       string `json:"job"`
	Quota     string `json:"quota,omitempty"`
	// Found is false when the snapshot holds neither a waiting group nor
	// an allocation of the job (a job the broker does not govern, or one
	// that has ended).
	Found   bool           `json:"found"`
	Waiting []JobWaiting   `json:"waiting"`
	Running []JobAlloc     `json:"running"`
	Next    []JobNextEvent `json:"next"`
	// Warnings are the last plan's warnings about the job, as the caller
	// may see them (WarningEntry, the shape of GET /v1/queue's).
	Warnings []WarningEntry `json:"warnings,omitempty"`
}

// JobWaiting is one waiting task group of the job.
type JobWaiting struct {
	Group     string `json:"group"`
	GPUs      int    `json:"gpus"` // still to place: count x alloc_gpus
	Count     int    `json:"count"`
	AllocGPUs int    `json:"alloc_gpus"`
	// Position is its place in the order of L3 (1: first), of Of groups
	// waiting in the cluster; AheadGPUs the GPUs of the groups before it.
	Position      int        `json:"position"`
	Of            int        `json:"of"`
	AheadGPUs     int        `json:"ahead_gpus"`
	Action        string     `json:"action,omitempty"` // the last plan's answer: wait, admit, expire
	Rule          string     `json:"rule,omitempty"`
	Reason        string     `json:"reason,omitempty"` // what binds it, with the numbers
	Reservation   string     `json:"reservation,omitempty"`
	SubmittedAt   *time.Time `json:"submitted_at,omitempty"`
	WaitedSeconds float64    `json:"waited_seconds,omitempty"`
	FlexExpiresAt *time.Time `json:"flex_expires_at,omitempty"`
}

// JobAlloc is one running allocation of the job, with the stop the last
// plan makes of it, if any.
type JobAlloc struct {
	ID          string    `json:"id"`
	Group       string    `json:"group"`
	Node        string    `json:"node"`
	GPUs        int       `json:"gpus"`
	Idle        bool      `json:"idle,omitempty"`
	Reservation string    `json:"reservation,omitempty"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	// StoppingFor is whom it is already being stopped for (a claimant
	// "namespace/job/group", cut to its namespace when unreadable, or
	// "reservation <id>").
	StoppingFor string `json:"stopping_for,omitempty"`
	StopRule    string `json:"stop_rule,omitempty"`
	StopReason  string `json:"stop_reason,omitempty"`
}

// JobNextEvent is an instant at which the job's wait may end or change:
// a booking's start or end (L10), a debt grace ending (L9), a hold's end
// (L10, L5 pre-warm), the flex deadline (L11) or the plan's next wake.
type JobNextEvent struct {
	At   time.Time `json:"at"`
	Kind string    `json:"kind"` // booking_start, booking_end, debt_grace_end, hold_end, flex_expires, plan_wake
	What string    `json:"what"`
}

// maxJobNext bounds JobResponse.Next.
const maxJobNext = 12

// job serves GET /v1/job/{namespace}/{job}.
func (s *Server) job(w http.ResponseWriter, r *http.Request, c *caller) {
	ns, name := r.PathValue("namespace"), r.PathValue("job")
	if !c.canRead(ns) {
		writeError(w, forbidden(fmt.Sprintf("reading job %q needs read-job on namespace %q", name, ns)))
		return
	}
	st, fresh, err := s.current()
	if err != nil {
		writeError(w, err)
		return
	}
	out := jobStory(st, ns, name, c, s.cfg.Now())
	out.State = fresh
	writeJSON(w, out)
}

// jobStory builds GET /v1/job's body (less its State) for job ns/name.
func jobStory(st BrokerState, ns, name string, c *caller, now time.Time) JobResponse {
	snap := st.Snapshot
	nsNode := quota.Namespaces(snap.Quota)
	out := JobResponse{Namespace: ns, Job: name, Quota: nsNode[ns], Waiting: []JobWaiting{}, Running: []JobAlloc{}, Next: []JobNextEvent{}}
	answers := map[plan.GroupKey]plan.Action{}
	stops := map[string]plan.Action{}
	if st.Plan != nil {
		for _, a := range st.Plan.Actions {
			switch a.Action {
			case plan.ActionStop:
				stops[a.Alloc] = a
			case plan.ActionAdmit, plan.ActionWait, plan.ActionExpire:
				answers[plan.GroupKey{Namespace: a.Namespace, Job: a.Job, Group: a.Group}] = a
			}
		}
	}
	pending := slices.Clone(snap.Pending)
	slices.SortStableFunc(pending, func(a, b plan.Pending) int {
		return cmp.Or(a.SubmittedAt.Compare(b.SubmittedAt), a.Key().Compare(b.Key()))
	})
	ahead := 0
	var bookingsNamed []string
	for i, p := range pending {
		if p.Namespace == ns && p.Job == name {
			sub := p.SubmittedAt
			e := JobWaiting{Group: p.Group, GPUs: p.Count * p.GPUs, Count: p.Count, AllocGPUs: p.GPUs, Position: i + 1, Of: len(pending),
				AheadGPUs: ahead, Reservation: p.Reservation, SubmittedAt: &sub}
			if !sub.IsZero() {
				e.WaitedSeconds = max(now.Sub(sub).Seconds(), 0)
			}
			if a, ok := answers[p.Key()]; ok {
				e.Action, e.Rule, e.Reason = string(a.Action), string(a.Rule), reasonFor(snap, a.Reason, c)
			}
			if p.Flex != nil {
				exp := p.Queued().Add(p.Flex.MaxWait)
				e.FlexExpiresAt = &exp
				out.Next = append(out.Next, JobNextEvent{At: exp, Kind: "flex_expires",
					What: fmt.Sprintf("group %s expires unplaced after waiting its max_wait of %s (L11)", p.Group, p.Flex.MaxWait)})
			}
			if p.Reservation != "" {
				bookingsNamed = append(bookingsNamed, p.Reservation)
			}
			out.Waiting = append(out.Waiting, e)
		}
		ahead += p.Count * p.GPUs
	}
	for _, a := range snap.Allocations {
		if a.Namespace != ns || a.Job != name {
			continue
		}
		e := JobAlloc{ID: a.ID, Group: a.Group, Node: a.Node, GPUs: a.GPUs(), Idle: a.Idle, Reservation: a.Reservation, StartedAt: a.StartedAt}
		switch {
		case a.StoppingForReservation != "":
			e.StoppingFor = "reservation " + reservationFor(snap, a.StoppingForReservation, c)
		case !a.StoppingFor.IsZero():
			e.StoppingFor = claimantFor(a.StoppingFor.String(), c)
		}
		if s, ok := stops[a.ID]; ok {
			e.StopRule, e.StopReason = string(s.Rule), reasonFor(snap, s.Reason, c)
		}
		out.Running = append(out.Running, e)
	}
	out.Found = len(out.Waiting) > 0 || len(out.Running) > 0
	if len(out.Waiting) > 0 {
		out.Next = append(out.Next, nextEvents(st, out.Quota, bookingsNamed, c, now)...)
		slices.SortStableFunc(out.Next, func(a, b JobNextEvent) int { return a.At.Compare(b.At) })
		if len(out.Next) > maxJobNext {
			out.Next = out.Next[:maxJobNext]
		}
	}
	out.Warnings = jobWarnings(st.Plan, c, ns, name)
	return out
}

// reservationFor is booking id as c may see it: the ID with read-job on
// its namespace, else "of <namespace>".
func reservationFor(snap *plan.Snapshot, id string, c *caller) string {
	for _, r := range snap.Reservations {
		if r.ID == id && !c.canRead(r.Namespace) {
			return "of " + r.Namespace
		}
	}
	return id
}

// nextEvents lists what a waiting job of quota node q waits for, after
// now: the start of the bookings it names; the start and end of bookings
// in q's subtree or above it (they lower and restore nominals, L10); the
// end of the debt grace of any node with debt (L9: debt past its grace is
// reclaimed first, L5 step 1); the end of every hold (L10, L5 pre-warm);
// and the plan's next wake.
func nextEvents(st BrokerState, q string, named []string, c *caller, now time.Time) []JobNextEvent {
	snap := st.Snapshot
	var out []JobNextEvent
	related := map[string]bool{}
	if node := snap.Quota.Find(q); node != nil {
		node.Walk(func(n *quota.Node) { related[n.Name] = true })
		var up func(n *quota.Node) bool
		up = func(n *quota.Node) bool {
			if n.Name == q {
				return true
			}
			for _, ch := range n.Children {
				if up(ch) {
					related[n.Name] = true
					return true
				}
			}
			return false
		}
		up(snap.Quota)
	}
	for _, r := range snap.Reservations {
		own := slices.Contains(named, r.ID)
		if !own && !related[r.Quota] {
			continue
		}
		who := "booking " + reservationFor(snap, r.ID, c)
		if own {
			who = "its booking " + r.ID
		}
		if r.Start.After(now) {
			what := fmt.Sprintf("%s of %d GPUs in %s starts", who, r.GPUs, r.Quota)
			if own {
				what += ": its jobs are entitled by it from then (L10)"
			} else {
				what += fmt.Sprintf(": %s may use %d fewer (L10)", r.Quota, r.GPUs)
			}
			out = append(out, JobNextEvent{At: r.Start, Kind: "booking_start", What: what})
		}
		if r.End.After(now) && !own {
			out = append(out, JobNextEvent{At: r.End, Kind: "booking_end",
				What: fmt.Sprintf("%s of %d GPUs in %s ends: %s gets them back (L10)", who, r.GPUs, r.Quota, r.Quota)})
		}
	}
	if st.Plan != nil {
		grace := snap.Settings.DebtGrace
		for _, u := range st.Plan.Usage {
			n := snap.Quota.Find(u.Quota)
			if u.Debt <= 0 || n == nil || n.ChangedAt.IsZero() {
				continue
			}
			if end := n.ChangedAt.Add(grace); end.After(now) {
				out = append(out, JobNextEvent{At: end, Kind: "debt_grace_end",
					What: fmt.Sprintf("the debt grace of %s ends: its %d GPUs of debt may be reclaimed (L9, L5 step 1)", u.Quota, u.Debt)})
			}
		}
	}
	holds := slices.Clone(snap.Holds)
	if st.Plan != nil {
		for _, a := range st.Plan.Actions {
			if a.Action == plan.ActionHold {
				holds = append(holds, plan.Hold{For: plan.HoldOwner{Reservation: a.Reservation, Group: a.For}, Node: a.Node, GPUIDs: a.GPUIDs, Until: a.Until})
			}
		}
	}
	seen := map[string]bool{}
	for _, h := range holds {
		if !h.Until.After(now) {
			continue
		}
		owner := claimantFor(h.For.Group.String(), c)
		if h.For.Reservation != "" {
			owner = "reservation " + reservationFor(snap, h.For.Reservation, c)
		}
		what := fmt.Sprintf("the hold of %d GPUs on %s for %s ends", len(h.GPUIDs), h.Node, owner)
		if key := h.Until.String() + what; !seen[key] {
			seen[key] = true
			out = append(out, JobNextEvent{At: h.Until, Kind: "hold_end", What: what})
		}
	}
	if st.Plan != nil && st.Plan.WakeAt.After(now) {
		out = append(out, JobNextEvent{At: st.Plan.WakeAt, Kind: "plan_wake", What: "the broker plans again, as time alone changes the plan then (L12)"})
	}
	return out
}

// jobWarnings are the warnings of p about job ns/job, those about GPUs
// held from others (kind "held": they explain waits), and the tree's
// (admins only), as c may see them (warningsOf).
func jobWarnings(p *plan.Plan, c *caller, ns, job string) []WarningEntry {
	return warningsOf(p, c, func(w plan.Warning) bool {
		return (w.Namespace == ns && w.Job == job) || w.Kind == plan.WarnHeld || w.Namespace == ""
	})
}
