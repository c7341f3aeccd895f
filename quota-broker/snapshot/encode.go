package snapshot

import (
	"bytes"
	"encoding/json"
	"io"
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
		Time:  timeText(s.Time),
		Quota: quotaToWire(s.Quota),
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
			Model: p.Model, Datacenters: append([]string{}, p.Datacenters...),
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
			AllocGPUs: &ag, Model: r.Model, NodePool: r.NodePool,
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
	return w
}

func quotaToWire(n *quota.Node) *wireQuota {
	if n == nil {
		return nil
	}
	w := &wireQuota{
		Name: n.Name, GPUs: int64(n.GPUs),
		ChildPreemption: n.ChildPreemption, PriorityPreemption: n.PriorityPreemption,
		Namespaces: append([]string(nil), n.Namespaces...),
	}
	if !n.ChangedAt.IsZero() {
		w.ChangedAt = timeText(n.ChangedAt)
	}
	for _, c := range n.Children {
		if c != nil {
			w.Children = append(w.Children, *quotaToWire(c))
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
