package snapshot

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// Encode writes s as a snapshot document: one JSON object indented by two
// spaces, keys in the order of docs/snapshot-format.md, followed by a
// newline. Times are written in RFC 3339 with nanoseconds where they have
// them, durations in Go syntax ("10m0s"); empty lists are written as [];
// optional keys with their default value are left out (quota flags,
// changed_at, flex max_run 0). Decoding the output gives back s (except
// quota.Node.Pos, which decoding sets to each node's JSON path). Encode does
// not validate s; its only errors are those of w.
func Encode(w io.Writer, s *plan.Snapshot) error {
	data, err := Marshal(s)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// Marshal returns the document Encode writes.
func Marshal(s *plan.Snapshot) ([]byte, error) {
	return indent(toWire(s))
}

// EncodePlan writes p as JSON: an object {"actions": [...], "usage": [...],
// "warnings": [...]} with the keys of plan.Action, plan.Usage and
// plan.Warning (kind, namespace, reservation, job, group, gpus, message), indented
// by two spaces and followed by a newline. actions and usage are [] when
// empty; warnings and idle_fit are left out when there are none, wake_at
// when it is zero (DESIGN L12: no instant at which time alone changes the
// plan). The output of one plan
// is always the same bytes. Its only errors are those of w.
func EncodePlan(w io.Writer, p *plan.Plan) error {
	out := plan.Plan{Actions: []plan.Action{}, Usage: []plan.Usage{}}
	if p != nil {
		out.Warnings, out.WakeAt, out.IdleFit = p.Warnings, p.WakeAt, p.IdleFit
		if p.Actions != nil {
			out.Actions = p.Actions
		}
		if p.Usage != nil {
			out.Usage = p.Usage
		}
		// DESIGN L13: every usage row names its flavor, "gpu" for the
		// implicit one (the core leaves it "" in a tree without flavor
		// blocks).
		if slices.ContainsFunc(out.Usage, func(u plan.Usage) bool { return u.Flavor == "" }) {
			out.Usage = slices.Clone(out.Usage)
			for i := range out.Usage {
				if out.Usage[i].Flavor == "" {
					out.Usage[i].Flavor = quota.ImplicitFlavor
				}
			}
		}
	}
	data, err := indent(out)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

func indent(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func timeText(t time.Time) string { return t.Format(time.RFC3339Nano) }

func toWire(s *plan.Snapshot) *wireSnapshot {
	if s == nil {
		s = &plan.Snapshot{}
	}
	text := func(d time.Duration) *string { v := d.String(); return &v }
	st := s.Settings
	maxPerNamespace := int64(st.MaxPerNamespace()) // as it applies: zero is the default
	w := &wireSnapshot{
		Time:    timeText(s.Time),
		Quota:   quotaToWire(s.Quota, quota.TreeFlavors(s.Quota)),
		Flavors: flavorsToWire(s.Quota),
		Settings: &wireSettings{MinRuntime: text(st.MinRuntime), DebtGrace: text(st.DebtGrace),
			Settle: text(st.Settle), DrainMargin: text(st.DrainMargin), DrainHorizon: text(st.DrainHorizon),
			ReservationMaxAhead: text(st.ReservationMaxAhead), ReservationMinDuration: text(st.ReservationMinDuration),
			AutoscalerEvaluationInterval: text(st.AutoscalerEvaluationInterval),
			ReservationMaxPerNamespace:   &maxPerNamespace},
		Nodes:        []wireNode{},
		Allocations:  []wireAllocation{},
		Pending:      []wirePending{},
		Reservations: []wireReservation{},
	}
	for _, n := range s.Nodes {
		wn := wireNode{ID: n.ID, Datacenter: n.Datacenter, NodePool: n.NodePool, GPUs: []wireGPU{}}
		for _, g := range n.GPUs {
			healthy := g.Healthy
			wn.GPUs = append(wn.GPUs, wireGPU{ID: g.ID, Model: g.Model, Healthy: &healthy, MIGProfile: g.MIGProfile})
		}
		w.Nodes = append(w.Nodes, wn)
	}
	for _, a := range s.Allocations {
		wa := wireAllocation{
			ID: a.ID, Namespace: a.Namespace, Job: a.Job, Group: a.Group,
			Type: string(a.Type), Priority: int64(a.Priority), Node: a.Node,
			GPUIDs: append([]string{}, a.GPUIDs...),
			Idle:   a.Idle, Elastic: a.Elastic, Reservation: a.Reservation,
			StoppingFor: claimantToWire(a.StoppingFor), StartedAt: timeText(a.StartedAt),
			KillTimeout: text(a.KillTimeout),
		}
		if a.StoppingForReservation != "" {
			wa.StoppingFor = wireClaimant{Key: &wireGroupKey{Reservation: a.StoppingForReservation}}
		}
		if a.MaxRun != 0 {
			wa.MaxRun = text(a.MaxRun)
		}
		if !a.AdmittedAt.IsZero() {
			wa.AdmittedAt = timeText(a.AdmittedAt)
		}
		w.Allocations = append(w.Allocations, wa)
	}
	for _, p := range s.Pending {
		wp := wirePending{
			Namespace: p.Namespace, Job: p.Job, Group: p.Group, Type: string(p.Type),
			Priority: int64(p.Priority), Count: int64(p.Count), GPUs: int64(p.GPUs),
			Model: p.Model, Flavors: p.Flavors, Datacenters: append([]string{}, p.Datacenters...),
			NodePool: p.NodePool, Idle: p.Idle, Elastic: p.Elastic,
			Reservation: p.Reservation, SubmittedAt: timeText(p.SubmittedAt),
		}
		if !p.QueuedAt.IsZero() && !p.QueuedAt.Equal(p.SubmittedAt) {
			wp.QueuedAt = timeText(p.QueuedAt)
		}
		if p.Flex != nil {
			wp.Flex = &wireFlex{}
			if p.Flex.MaxWait != 0 {
				v := p.Flex.MaxWait.String()
				wp.Flex.MaxWait = &v
			}
			if p.Flex.MaxRun != 0 {
				v := p.Flex.MaxRun.String()
				wp.Flex.MaxRun = &v
			}
		}
		w.Pending = append(w.Pending, wp)
	}
	for _, r := range s.Reservations {
		allocGPUs, _ := r.Shape()
		ag := int64(allocGPUs)
		w.Reservations = append(w.Reservations, wireReservation{
			ID: r.ID, Namespace: r.Namespace, Quota: r.Quota, GPUs: int64(r.GPUs),
			AllocGPUs: &ag, Model: r.Model, Flavor: r.Flavor, NodePool: r.NodePool,
			Start: timeText(r.Start), End: timeText(r.End),
		})
	}
	for _, h := range s.Holds {
		wh := wireHold{Node: h.Node, GPUIDs: append([]string{}, h.GPUIDs...), Until: timeText(h.Until),
			For: wireHoldOwner{Reservation: h.For.Reservation, Namespace: h.For.Group.Namespace,
				Job: h.For.Group.Job, Group: h.For.Group.Group}}
		w.Holds = append(w.Holds, wh)
	}
	w.IdleGroups = idleGroupsToWire(s.IdleGroups)
	w.Prewarm = prewarmsToWire(s.Prewarm)
	w.Evictions = evictionsToWire(s.Evictions)
	return w
}

// quotaToWire writes the tree rooted at n, whose flavors are flavors
// (quota.TreeFlavors of its root): gpus are plain numbers in a tree of
// one flavor, else objects by flavor in the tree's order.
func quotaToWire(n *quota.Node, flavors []quota.Flavor) *wireQuota {
	if n == nil {
		return nil
	}
	w := &wireQuota{
		Name: n.Name, GPUs: nominalToWire(n.GPUs, flavors),
		ChildPreemption: n.ChildPreemption, PriorityPreemption: n.PriorityPreemption,
		Namespaces: append([]string(nil), n.Namespaces...),
		Weight:     weightToWire(n.Weight, flavors),
		MaxEvict:   evictBudgetToWire(n.MaxEvict),
	}
	if !n.ChangedAt.IsZero() {
		w.ChangedAt = timeText(n.ChangedAt)
	}
	for _, c := range n.Children {
		if c != nil {
			w.Children = append(w.Children, *quotaToWire(c, flavors))
		}
	}
	return w
}

// claimantToWire writes a claimant in the object form (none for the zero
// key).
func claimantToWire(k plan.GroupKey) wireClaimant {
	if k.IsZero() {
		return wireClaimant{}
	}
	return wireClaimant{Key: &wireGroupKey{Namespace: k.Namespace, Job: k.Job, Group: k.Group}}
}

// nominalToWire writes a nominal: a plain number in a tree of one flavor,
// else an object by flavor in the tree's order, leaving out flavors at 0
// (DESIGN L13: a flavor left out is 0) unless all are.
func nominalToWire(n quota.Nominal, flavors []quota.Flavor) wireNominal {
	if len(flavors) == 1 {
		v := int64(n.Of(flavors[0].Name))
		return wireNominal{Plain: &v}
	}
	w := wireNominal{ByFlavor: []wireFlavorGPUs{}}
	for _, f := range flavors {
		if v := n.Of(f.Name); v != 0 {
			w.ByFlavor = append(w.ByFlavor, wireFlavorGPUs{Flavor: f.Name, GPUs: int64(v)})
		}
	}
	return w
}

// weightToWire writes a node's explicit weights (DESIGN L14): none when
// it has none, a plain number in a tree of one flavor, else an object of
// the flavors it sets (0 included: an explicit 0 is not the default).
func weightToWire(n quota.Nominal, flavors []quota.Flavor) *wireNominal {
	if len(n) == 0 {
		return nil
	}
	if len(flavors) == 1 {
		if v, ok := n[flavors[0].Name]; ok {
			x := int64(v)
			return &wireNominal{Plain: &x}
		}
		return nil
	}
	w := &wireNominal{ByFlavor: []wireFlavorGPUs{}}
	for _, f := range flavors {
		if v, ok := n[f.Name]; ok {
			w.ByFlavor = append(w.ByFlavor, wireFlavorGPUs{Flavor: f.Name, GPUs: int64(v)})
		}
	}
	return w
}

// flavorsToWire writes a tree's declared flavors (none for the implicit
// one).
func flavorsToWire(root *quota.Node) []wireFlavor {
	if root == nil {
		return nil
	}
	var out []wireFlavor
	for _, f := range root.Flavors {
		out = append(out, wireFlavor{Name: f.Name, Models: append([]string{}, f.Models...), MIGProfile: f.MIGProfile})
	}
	return out
}
