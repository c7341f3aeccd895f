package plan

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// withCalendar adds to a random snapshot the Calendar and Flex parts:
// the default settings, kill timeouts, up to two reservations of
// namespaces of the tree around now (some draining, some active), a hold
// of free GPUs for the first, and admitted flex allocations.
func withCalendar(s *Snapshot, r *rand.Rand) *Snapshot {
	d := quota.DefaultSettings()
	s.Settings.Settle, s.Settings.DrainMargin, s.Settings.DrainHorizon = d.Settle, d.DrainMargin, d.DrainHorizon
	bound := quota.Namespaces(s.Quota)
	var nss []string
	s.Quota.Walk(func(n *quota.Node) { nss = append(nss, n.Namespaces...) })
	for i := range s.Allocations {
		a := &s.Allocations[i]
		a.KillTimeout = time.Duration(r.IntN(12)+1) * 5 * time.Second
		if a.Reservation == "" && !a.Idle && r.IntN(10) == 0 {
			a.MaxRun, a.AdmittedAt = time.Duration(r.IntN(3)+1)*time.Hour, t0.Add(-time.Duration(r.IntN(200))*time.Minute)
		}
	}
	held := map[string]bool{}
	for _, a := range s.Allocations {
		for _, g := range a.GPUIDs {
			held[g] = true
		}
	}
	for k := r.IntN(3); k > 0; k-- {
		ns := nss[r.IntN(len(nss))]
		gpus := []int{1, 2, 4, 8, 16}[r.IntN(5)]
		start := t0.Add(time.Duration(r.IntN(120)-30) * time.Minute)
		res := Reservation{ID: fmt.Sprintf("rc%d", k), Namespace: ns, Quota: bound[ns], GPUs: gpus,
			Start: start, End: start.Add(time.Duration(r.IntN(3)+1) * time.Hour)}
		res.AllocGPUs, _ = res.Shape()
		s.Reservations = append(s.Reservations, res)
		if k == 1 && len(s.Nodes) > 0 {
			n := s.Nodes[r.IntN(len(s.Nodes))]
			h := Hold{For: HoldOwner{Reservation: res.ID}, Node: n.ID, Until: start.Add(d.Settle)}
			for _, g := range n.GPUs {
				if !held[g.ID] && len(h.GPUIDs) < res.AllocGPUs {
					h.GPUIDs = append(h.GPUIDs, g.ID)
				}
			}
			if len(h.GPUIDs) > 0 {
				s.Holds = append(s.Holds, h)
			}
		}
	}
	for i := range s.Pending {
		if p := &s.Pending[i]; !p.Idle && p.Flex == nil && r.IntN(6) == 0 && len(s.Reservations) > 0 {
			res := s.Reservations[r.IntN(len(s.Reservations))]
			if p.Namespace == res.Namespace {
				p.Reservation = res.ID // the job's other groups may differ: Validate decides
			}
		}
	}
	for k := r.IntN(3); k > 0; k-- {
		at := t0.Add(time.Duration(r.IntN(100)-5) * time.Minute)
		if r.IntN(2) == 0 { // within reach of a victim's stop instant
			at = t0.Add(time.Duration(r.IntN(240)-10) * time.Second)
		}
		s.Prewarm = append(s.Prewarm, Prewarm{Namespace: nss[r.IntN(len(nss))], Job: "pw", Group: fmt.Sprintf("g%d", k),
			Type: JobService, Priority: r.IntN(100) + 1, GPUs: []int{1, 2, 4, 8}[r.IntN(4)], Count: r.IntN(3) + 1,
			At: at, Until: at.Add(90 * time.Second)})
	}
	// A hold for the first pre-warm of GPUs of one node, free or not (an
	// allocation on them is stopped for the group).
	if len(s.Prewarm) > 0 && len(s.Nodes) > 0 {
		w := s.Prewarm[0]
		inHold := map[string]bool{}
		for _, h := range s.Holds {
			for _, g := range h.GPUIDs {
				inHold[g] = true
			}
		}
		n := s.Nodes[r.IntN(len(s.Nodes))]
		h := Hold{For: HoldOwner{Group: w.Key()}, Node: n.ID, Until: w.Until}
		for _, g := range n.GPUs {
			if !inHold[g.ID] && len(h.GPUIDs) < w.GPUs {
				h.GPUIDs = append(h.GPUIDs, g.ID)
			}
		}
		if len(h.GPUIDs) > 0 {
			s.Holds = append(s.Holds, h)
		}
	}
	return s
}

// TestCalendarPlanProperties: on random snapshots with bookings, holds and
// flex allocations that pass Validate, the plan is the same for shuffled
// input, stops each allocation at most once and never one of an active
// reservation, a system job or one already stopping; drain stops name the
// reservation and no claimant, pre-warm stops (L5.prewarm) a pre-warmed
// group other than the victim's own; holds name one owner (a reservation,
// or a pre-warmed group by rule L5.prewarm) and are of GPUs of their node
// that no other owner holds, each held once.
func TestCalendarPlanProperties(t *testing.T) {
	checked := map[ActionKind]int{}
	for seed := uint64(0); seed < 1500; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		s := withCalendar(randomSnapshot(r), r)
		if err := s.Validate(); err != nil {
			continue
		}
		p, err := Compute(s)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if err := checkCalendarPlan(s, p); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, a := range p.Actions {
			checked[a.Action]++
			if a.Action == ActionStop {
				checked[ActionKind(a.Rule)]++
			}
			if a.Action == ActionHold && a.Rule == RulePrewarm {
				checked["hold "+ActionKind(a.Rule)]++
			}
		}
		again := shuffled(s, r)
		again.Prewarm = append([]Prewarm(nil), s.Prewarm...)
		r.Shuffle(len(again.Prewarm), func(i, j int) { again.Prewarm[i], again.Prewarm[j] = again.Prewarm[j], again.Prewarm[i] })
		again.Reservations = append([]Reservation(nil), s.Reservations...)
		r.Shuffle(len(again.Reservations), func(i, j int) {
			again.Reservations[i], again.Reservations[j] = again.Reservations[j], again.Reservations[i]
		})
		p2, err := Compute(again)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		b1, _ := json.Marshal(p)
		b2, _ := json.Marshal(p2)
		if string(b1) != string(b2) {
			t.Fatalf("seed %d: plans differ for the same state:\n%s\n%s", seed, b1, b2)
		}
	}
	for _, k := range []ActionKind{ActionHold, ActionStopJob, ActionKind(RuleDrain), ActionKind(RulePrewarm), "hold L5.prewarm"} {
		if checked[k] == 0 {
			t.Errorf("no plan of the corpus has %q: the corpus no longer tests it (%v)", k, checked)
		}
	}
}

func checkCalendarPlan(s *Snapshot, p *Plan) error {
	allocs := map[string]*Allocation{}
	for i := range s.Allocations {
		allocs[s.Allocations[i].ID] = &s.Allocations[i]
	}
	active := map[string]bool{}
	for _, r := range s.Reservations {
		active[r.ID] = r.Active(s.Time)
	}
	gpuNode := map[string]string{}
	for _, n := range s.Nodes {
		for _, g := range n.GPUs {
			gpuNode[g.ID] = n.ID
		}
	}
	heldBy := map[string]string{}
	for _, h := range s.Holds {
		if s.Time.Before(h.Until) {
			for _, g := range h.GPUIDs {
				heldBy[g] = h.For.String()
			}
		}
	}
	prewarmed := map[GroupKey]bool{}
	for i := range s.Prewarm {
		prewarmed[s.Prewarm[i].Key()] = true
	}
	// A stored hold of a group that has not ended binds every plan, its
	// pre-warm in this snapshot or not (DESIGN L10, issue 16 item 8): its
	// owner stops what sits on its GPUs by the pre-warm's rule.
	for _, h := range s.Holds {
		if !h.For.Group.IsZero() && s.Time.Before(h.Until) {
			prewarmed[h.For.Group] = true
		}
	}
	stopped := map[string]bool{}
	newHold := map[string]bool{}
	for _, a := range p.Actions {
		switch a.Action {
		case ActionStop:
			v := allocs[a.Alloc]
			if v == nil || stopped[a.Alloc] {
				return fmt.Errorf("stop %s: unknown or stopped twice", a.Alloc)
			}
			stopped[a.Alloc] = true
			if active[v.Reservation] || v.Type == JobSystem || v.Type == JobSysbatch || !v.StoppingFor.IsZero() {
				return fmt.Errorf("stop %s: %+v may never be a victim", a.Alloc, v)
			}
			if a.Rule == RuleDrain && (a.Reservation == "" || !a.For.IsZero()) {
				return fmt.Errorf("drain stop %s: reservation %q, for %v", a.Alloc, a.Reservation, a.For)
			}
			if a.Rule == RulePrewarm && (a.Reservation != "" || !prewarmed[a.For] || a.For.JobKey() == (JobKey{Namespace: v.Namespace, Job: v.Job})) {
				return fmt.Errorf("pre-warm stop %s: reservation %q, for %v", a.Alloc, a.Reservation, a.For)
			}
		case ActionHold:
			owner := HoldOwner{Reservation: a.Reservation, Group: a.For}.String()
			if (a.Reservation == "") == a.For.IsZero() || (!a.For.IsZero() && (!prewarmed[a.For] || a.Rule != RulePrewarm)) ||
				len(a.GPUIDs) != a.GPUs || (!a.Until.After(s.Time) && !active[a.Reservation]) {
				return fmt.Errorf("hold %+v: no owner, wrong count or over", a)
			}
			for _, g := range a.GPUIDs {
				if gpuNode[g] != a.Node || newHold[g] || (heldBy[g] != "" && heldBy[g] != owner) {
					return fmt.Errorf("hold %+v: GPU %s not on the node, held twice or held by %q", a, g, heldBy[g])
				}
				newHold[g] = true
			}
		}
	}
	return nil
}
