package api

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/snapshot"
	"github.com/gputide/gputide/quota-broker/store"
)

// current returns the broker's state with its freshness, or a 503 when
// there is none or it is older than the staleness bound (L12, DESIGN §9).
func (s *Server) current() (BrokerState, State, error) {
	st := s.cfg.Backend.State()
	fresh := State{StalenessSeconds: s.cfg.Staleness.Seconds()}
	if st.Snapshot == nil || st.SyncedAt.IsZero() {
		return st, fresh, &Problem{Status: http.StatusServiceUnavailable, Msg: "the broker has no cluster state yet"}
	}
	age := s.cfg.Now().Sub(st.SyncedAt)
	fresh.StateAgeSeconds = max(age.Seconds(), 0)
	if s.cfg.Staleness > 0 && age > s.cfg.Staleness {
		return st, fresh, &Problem{Status: http.StatusServiceUnavailable,
			Msg: fmt.Sprintf("the broker's state is %s old, past its staleness bound of %s (L12)", age.Round(time.Millisecond), s.cfg.Staleness)}
	}
	return st, fresh, nil
}

// quotas serves GET /v1/quotas (any valid token): one entry per node of
// the tree, parents first, in the shape of Quota.
func (s *Server) quotas(w http.ResponseWriter, r *http.Request, c *caller) {
	st, fresh, err := s.current()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, QuotasResponse{State: fresh, Quotas: QuotaFigures(st.Snapshot, st.Plan, s.cfg.Now()), Ungoverned: UngovernedDevices(st.Snapshot)})
}

// nodeFlavor keys a quota node's figures in one flavor.
type nodeFlavor struct{ node, flavor string }

// QuotaFigures computes the figures of every quota node and flavor
// (DESIGN L4, L9, L10, L13): one entry per node and flavor, nodes parents
// first, a node's flavors in tree order (the implicit flavor "gpu" alone in
// a tree without flavor blocks). Nominal, used, non-idle, borrowed, debt,
// displaced and lendable are the plan's usage row of that node and flavor;
// booked = GPUs of the bookings of that flavor active at now in the
// node's subtree; queued = GPUs still to place for the pending groups of
// the subtree's namespaces, each counted in one flavor: the one the last
// plan's answer names, else the first it allows (so that queued adds up
// across flavors); stopping = GPUs of that flavor held by the subtree's
// allocations already being stopped (StoppingFor set). Weight, fair share,
// borrowed share and eviction budget use are DESIGN L14's (fairFigures).
// Ungoverned devices count nowhere.
func QuotaFigures(snap *plan.Snapshot, p *plan.Plan, now time.Time) []Quota {
	names := quota.FlavorNames(snap.Quota)
	only := ""
	if len(names) == 1 {
		only = names[0]
	}
	// rowFlavor is the flavor a plan's or a booking's flavor stands for:
	// "" is the tree's only flavor (the implicit one included).
	rowFlavor := func(f string) string {
		if f == "" {
			return only
		}
		return f
	}
	usage := map[nodeFlavor]plan.Usage{}
	answer := map[plan.GroupKey]string{}
	admitted := map[plan.GroupKey]int{} // allocations the plan admits, counted in its usage
	if p != nil {
		for _, u := range p.Usage {
			usage[nodeFlavor{u.Quota, rowFlavor(u.Flavor)}] = u
		}
		for _, a := range p.Actions {
			k := plan.GroupKey{Namespace: a.Namespace, Job: a.Job, Group: a.Group}
			if a.Action != plan.ActionStop && a.Flavor != "" {
				answer[k] = a.Flavor
			}
			if a.Action == plan.ActionAdmit {
				admitted[k] += a.Count
			}
		}
	}
	ownBooked := map[nodeFlavor]int{}
	for _, res := range snap.Reservations {
		if res.Active(now) {
			ownBooked[nodeFlavor{res.Quota, rowFlavor(res.Flavor)}] += res.GPUs
		}
	}
	nsNode := quota.Namespaces(snap.Quota)
	ownStopping := map[nodeFlavor]int{}
	var deviceFlavor map[string]string // GPU ID -> flavor; built at the first stopping allocation
	for _, a := range snap.Allocations {
		n, ok := nsNode[a.Namespace]
		if !ok || (a.StoppingFor.IsZero() && a.StoppingForReservation == "") {
			continue
		}
		if deviceFlavor == nil {
			deviceFlavor = devicesByFlavor(snap)
		}
		for _, id := range a.GPUIDs {
			if f, ok := deviceFlavor[id]; ok {
				ownStopping[nodeFlavor{n, f}]++
			}
		}
	}
	ownQueued := map[nodeFlavor]int{}
	ownAsked := map[nodeFlavor]int{} // queued less what the plan admits (DESIGN L14's demand, with usage)
	for _, pd := range snap.Pending {
		n, ok := nsNode[pd.Namespace]
		if !ok {
			continue
		}
		f := answer[pd.Key()]
		if f == "" && len(pd.Flavors) > 0 {
			f = pd.Flavors[0]
		}
		if !slices.Contains(names, f) {
			f = names[0]
		}
		ownQueued[nodeFlavor{n, f}] += pd.Count * pd.GPUs
		ownAsked[nodeFlavor{n, f}] += max(0, pd.Count-admitted[pd.Key()]) * pd.GPUs
	}
	var out []Quota
	var walk func(n *quota.Node, parent string) (booked, queued, stopping map[string]int)
	walk = func(n *quota.Node, parent string) (map[string]int, map[string]int, map[string]int) {
		first := len(out)
		for _, f := range names {
			u := usage[nodeFlavor{n.Name, f}]
			out = append(out, Quota{Name: n.Name, Parent: parent, Flavor: f, NominalGPUs: n.GPUs.Of(f), UsedGPUs: u.Used, NonidleGPUs: u.NonIdle,
				BorrowedGPUs: u.Borrowed, DebtGPUs: u.Debt, DisplacedGPUs: u.Displaced, LendableGPUs: u.Lendable, Workspaces: slices.Clone(n.Namespaces)})
		}
		booked, queued, stopping := map[string]int{}, map[string]int{}, map[string]int{}
		for _, f := range names {
			k := nodeFlavor{n.Name, f}
			booked[f], queued[f], stopping[f] = ownBooked[k], ownQueued[k], ownStopping[k]
		}
		for _, ch := range n.Children {
			b, q, s := walk(ch, n.Name)
			for _, f := range names {
				booked[f], queued[f], stopping[f] = booked[f]+b[f], queued[f]+q[f], stopping[f]+s[f]
			}
		}
		for k, f := range names {
			out[first+k].BookedGPUs, out[first+k].QueuedGPUs, out[first+k].StoppingGPUs = booked[f], queued[f], stopping[f]
		}
		return booked, queued, stopping
	}
	if snap.Quota != nil {
		walk(snap.Quota, "")
		fairFigures(out, snap, names, ownAsked, now)
	}
	return out
}

// fairFigures sets DESIGN L14's figures on out (QuotaFigures' entries: one
// per node, pre-order, and flavor, in names' order): each node's weight,
// fair share and borrowed share per flavor, from plan.FairFigures.Build
// on each node's own figures (used and non-idle: its usage row less its
// children's; asked: its own queued GPUs, as QueuedGPUs counts them, less
// those of the allocations the plan admits, which its usage counts), and
// each node's eviction budget use (plan.BudgetUse on the
// snapshot's evictions at now). A flavor whose figures do not add up (a
// plan whose usage rows disagree with the tree) leaves its fair shares
// nil.
func fairFigures(out []Quota, snap *plan.Snapshot, names []string, ownAsked map[nodeFlavor]int, now time.Time) {
	var nodes []*quota.Node
	snap.Quota.Walk(func(n *quota.Node) { nodes = append(nodes, n) })
	nf := len(names)
	if len(out) != len(nodes)*nf {
		return
	}
	index := make(map[*quota.Node]int, len(nodes))
	for i, n := range nodes {
		index[n] = i
	}
	use := plan.BudgetUse(snap.Quota, snap.Evictions, now)
	var budget []*EvictBudget
	for _, n := range nodes {
		var b *EvictBudget
		if n.MaxEvict != nil {
			b = &EvictBudget{GPUs: n.MaxEvict.GPUs, Per: plan.DurationText(n.MaxEvict.Per), PerSeconds: n.MaxEvict.Per.Seconds(), EvictedGPUs: use[n.Name]}
		}
		budget = append(budget, b)
	}
	var f plan.FairFigures
	own := make([]plan.OwnFigures, len(nodes))
	for k, fl := range names {
		for i, n := range nodes {
			q := out[i*nf+k]
			held, nonidle := q.UsedGPUs, q.NonidleGPUs
			for _, c := range n.Children {
				cq := out[index[c]*nf+k]
				held, nonidle = held-cq.UsedGPUs, nonidle-cq.NonidleGPUs
			}
			held = max(0, held)
			own[i] = plan.OwnFigures{NonIdle: min(max(0, nonidle), held), Held: held, Asked: ownAsked[nodeFlavor{n.Name, fl}]}
		}
		var shares []plan.FairShare
		err := f.Build(snap.Quota, fl, own)
		if err == nil {
			shares, err = plan.FairShares(snap.Quota, &f)
		}
		for i, n := range nodes {
			q := &out[i*nf+k]
			q.Weight, q.WeightExplicit = plan.Weight(n, fl)
			q.BorrowedShare = Share(plan.BorrowedShare(q.BorrowedGPUs, q.Weight))
			if b := budget[i]; b != nil {
				c := *b
				q.MaxEvict = &c
			}
			if err == nil && shares[i].Defined {
				share := shares[i].Share
				q.FairShare = &share
			}
		}
	}
}

// UngovernedDevices lists the devices of snap that belong to no flavor of
// its tree (DESIGN L13), one entry per node (snapshot order), model and
// MIG profile (first seen order), with the count and the reason: a MIG
// instance under the implicit flavor (whole GPUs only), or a model and
// profile no declared flavor takes. Nil when every device has a flavor.
func UngovernedDevices(snap *plan.Snapshot) []Ungoverned {
	var flavors []quota.Flavor
	if snap.Quota != nil {
		flavors = snap.Quota.Flavors
	}
	var out []Ungoverned
	for i := range snap.Nodes {
		first := len(out)
		for _, g := range snap.Nodes[i].GPUs {
			if _, ok := quota.FlavorOf(flavors, g.Model, g.MIGProfile); ok {
				continue
			}
			k := slices.IndexFunc(out[first:], func(u Ungoverned) bool { return u.Model == g.Model && u.MIGProfile == g.MIGProfile })
			if k >= 0 {
				out[first+k].Devices++
				continue
			}
			reason := fmt.Sprintf("model %q is in no flavor of the tree (%s)", g.Model, strings.Join(quota.FlavorNames(snap.Quota), ", "))
			switch {
			case len(flavors) == 0:
				reason = fmt.Sprintf("MIG %s instance: the implicit flavor %q takes whole GPUs only", g.MIGProfile, quota.ImplicitFlavor)
			case g.MIGProfile != "":
				reason = fmt.Sprintf("model %q with mig_profile %q is in no flavor of the tree (%s)", g.Model, g.MIGProfile, strings.Join(quota.FlavorNames(snap.Quota), ", "))
			}
			out = append(out, Ungoverned{Node: snap.Nodes[i].ID, Model: g.Model, MIGProfile: g.MIGProfile, Devices: 1, Reason: reason})
		}
	}
	return out
}

// devicesByFlavor maps each governed GPU of snap (by device instance ID,
// unique in the cluster) to its flavor (DESIGN L13: the first flavor of
// the tree it matches); ungoverned devices are left out.
func devicesByFlavor(snap *plan.Snapshot) map[string]string {
	var flavors []quota.Flavor
	if snap.Quota != nil {
		flavors = snap.Quota.Flavors
	}
	out := map[string]string{}
	for i := range snap.Nodes {
		for _, g := range snap.Nodes[i].GPUs {
			if f, ok := quota.FlavorOf(flavors, g.Model, g.MIGProfile); ok {
				out[g.ID] = f
			}
		}
	}
	return out
}

// queue serves GET /v1/queue[?namespace=]: the pending groups, oldest
// first, with the last plan's answer for each (DESIGN L3, L11).
func (s *Server) queue(w http.ResponseWriter, r *http.Request, c *caller) {
	st, fresh, err := s.current()
	if err != nil {
		writeError(w, err)
		return
	}
	ns := r.URL.Query().Get("namespace")
	warnings := warningsOf(st.Plan, c, func(w plan.Warning) bool { return ns == "" || w.Namespace == ns })
	writeJSON(w, QueueResponse{State: fresh, Queue: queueOf(st, ns, c, s.cfg.Now()), Warnings: warnings})
}

func queueOf(st BrokerState, ns string, c *caller, now time.Time) []QueueEntry {
	answers := map[plan.GroupKey]plan.Action{}
	if st.Plan != nil {
		for _, a := range st.Plan.Actions {
			if a.Action != plan.ActionStop {
				answers[plan.GroupKey{Namespace: a.Namespace, Job: a.Job, Group: a.Group}] = a
			}
		}
	}
	nsNode := quota.Namespaces(st.Snapshot.Quota)
	pending := slices.Clone(st.Snapshot.Pending)
	slices.SortStableFunc(pending, func(a, b plan.Pending) int {
		return cmp.Or(a.SubmittedAt.Compare(b.SubmittedAt), a.Key().Compare(b.Key()))
	})
	out := []QueueEntry{}
	for _, p := range pending {
		if ns != "" && p.Namespace != ns {
			continue
		}
		e := QueueEntry{Namespace: p.Namespace, GPUs: p.Count * p.GPUs}
		if c.canRead(p.Namespace) {
			sub := p.SubmittedAt
			e.Job, e.Group, e.Quota, e.Count, e.AllocGPUs, e.SubmittedAt = p.Job, p.Group, nsNode[p.Namespace], p.Count, p.GPUs, &sub
			if !sub.IsZero() {
				e.WaitedSeconds = max(now.Sub(sub).Seconds(), 0)
			}
			if a, ok := answers[p.Key()]; ok {
				e.Action, e.Rule, e.Reason = string(a.Action), string(a.Rule), reasonFor(st.Snapshot, a.Reason, c)
			}
			if p.Flex != nil {
				exp := sub.Add(p.Flex.MaxWait)
				e.FlexMaxWait, e.FlexMaxRun, e.FlexExpiresAt = p.Flex.MaxWait.String(), p.Flex.MaxRun.String(), &exp
			}
		}
		out = append(out, e)
	}
	return out
}

// lastPlan serves GET /v1/plan (admin): the last plan as
// docs/snapshot-format.md writes it; the state age rides in the
// X-Gputide-State-Age-Seconds header so the document keeps its format.
func (s *Server) lastPlan(w http.ResponseWriter, r *http.Request, c *caller) {
	st, fresh, err := s.current()
	if err != nil {
		writeError(w, err)
		return
	}
	p := st.Plan
	if p == nil {
		p = &plan.Plan{}
	}
	jsonHeaders(w)
	w.Header().Set("X-Gputide-State-Age-Seconds", fmt.Sprintf("%.3f", fresh.StateAgeSeconds))
	_ = snapshot.EncodePlan(w, p)
}

// snapshot serves GET /v1/snapshot (admin): the snapshot of the last plan.
func (s *Server) snapshot(w http.ResponseWriter, r *http.Request, c *caller) {
	st, fresh, err := s.current()
	if err != nil {
		writeError(w, err)
		return
	}
	jsonHeaders(w)
	w.Header().Set("X-Gputide-State-Age-Seconds", fmt.Sprintf("%.3f", fresh.StateAgeSeconds))
	_ = snapshot.Encode(w, st.Snapshot)
}

// preemptions serves GET /v1/preemptions[?namespace=&since=] from the
// store's history, oldest first. since is RFC 3339 or a Go duration back
// from now ("24h").
func (s *Server) preemptions(w http.ResponseWriter, r *http.Request, c *caller) {
	_, fresh, err := s.current()
	if err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	since, err := parseSince(q.Get("since"), s.cfg.Now())
	if err != nil {
		writeError(w, err)
		return
	}
	ns := q.Get("namespace")
	list, err := s.cfg.Preemptions(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, PreemptionsResponse{State: fresh, Preemptions: preemptionsOf(list, ns, since, c)})
}

// preemptionsOf keeps the stops of list in namespace ns ("": all) at or
// after since, oldest first as listed, redacted to namespace and GPUs
// where c has no read-job.
func preemptionsOf(list []store.Preemption, ns string, since time.Time, c *caller) []PreemptionEntry {
	out := []PreemptionEntry{}
	for _, p := range list {
		if (ns != "" && p.Namespace != ns) || p.At.Before(since) {
			continue
		}
		e := PreemptionEntry{Namespace: p.Namespace, GPUs: p.GPUs}
		if c.canRead(p.Namespace) {
			at := p.At
			e.At, e.Alloc, e.Job, e.For, e.Rule = &at, p.Alloc, p.Job, claimantFor(p.For, c), p.Rule
		}
		out = append(out, e)
	}
	return out
}

// claimantFor is a stop's claimant ("namespace/job/group") as c may see
// it: whole with read-job on its namespace, else only the namespace (issue
// 16: a workspace's jobs are not named to a token that cannot read it).
func claimantFor(claimant string, c *caller) string {
	ns, _, found := strings.Cut(claimant, "/")
	if !found || c.canRead(ns) {
		return claimant
	}
	return ns
}

// parseSince reads since: "" (all), an RFC 3339 time, or a Go duration
// before now.
func parseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, badInput("since", v, "want an RFC 3339 time (2026-12-07T08:00:00+09:00) or a duration back from now (24h)")
}
