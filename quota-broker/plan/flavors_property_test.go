package plan

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gputide/gputide/quota-broker/quota"
)

// The property suites with random flavors (issue 17): a snapshot of the
// existing corpora gets the flavors h100 and a100 (by its nodes' models)
// and now and then a100-1g (one A100 node cut into 1g.5gb slices), each
// nominal split between them (L1 per flavor holds), and random allowed
// flavors per job. The plan must then be, in each flavor, a plan the
// existing invariants accept on that flavor's part of the snapshot (no
// flavor's nominal exceeded by non-idle usage after a plan that started
// within it, victims only of the claimant's flavor, admits on GPUs of
// the admit's flavor), and the same for the same state.

var flavorSet = []quota.Flavor{
	{Name: "h100", Models: []string{h100}},
	{Name: "a100-1g", Models: []string{a100}, MIGProfile: "1g.5gb"},
	{Name: "a100", Models: []string{a100}},
}

// flavorize gives s flavors in place (see above); it returns the tree's
// flavors.
func flavorize(s *Snapshot, r *rand.Rand) []quota.Flavor {
	flavors := []quota.Flavor{flavorSet[0], flavorSet[2]}
	if r.IntN(2) == 0 {
		flavors = slices.Clone(flavorSet)
		for i := range s.Nodes {
			if len(s.Nodes[i].GPUs) > 0 && s.Nodes[i].GPUs[0].Model == a100 {
				gpus := slices.Clone(s.Nodes[i].GPUs)
				for k := range gpus {
					gpus[k].MIGProfile = "1g.5gb"
				}
				s.Nodes[i].GPUs = gpus
				break
			}
		}
	}
	s.Quota = s.Quota.Clone()
	s.Quota.Flavors = flavors
	s.Quota.Walk(func(n *quota.Node) {
		total := n.GPUs.Total()
		n.GPUs = quota.Nominal{"h100": total / 2, "a100": total / 2}
		if len(flavors) == 3 {
			n.GPUs["a100-1g"] = total / 4
		}
	})
	names := quota.FlavorNames(s.Quota)
	lists := [][]string{nil, {"h100"}, {"a100"}, {"a100", "h100"}, {"h100", "a100"}, names}
	byJob := map[JobKey][]string{}
	for i := range s.Pending {
		k := s.Pending[i].JobKey()
		if _, ok := byJob[k]; !ok {
			byJob[k] = lists[r.IntN(len(lists))]
		}
		s.Pending[i].Flavors = byJob[k]
	}
	for i := range s.Reservations {
		if s.Reservations[i].Model == "" {
			s.Reservations[i].Flavor = names[r.IntN(len(names))]
		} else {
			s.Reservations[i].Model = ""
			s.Reservations[i].Flavor = "h100"
		}
	}
	// Drawn last, so that the corpus above is as it was before they had
	// flavors.
	for i := range s.Prewarm {
		s.Prewarm[i].Flavors = lists[r.IntN(len(lists))]
	}
	for i := range s.IdleGroups {
		s.IdleGroups[i].Flavors = lists[r.IntN(len(lists))]
	}
	return flavors
}

// flavorPart returns flavor f's part of s and p, written as a snapshot
// and plan of one implicit flavor, for the existing checks: the tree with
// f's nominals and no flavor blocks, nodes, allocations and holds with
// only f's GPUs, the pending jobs that allow f, f's bookings, f's
// actions (and every job stop and suspend), f's usage rows, the
// pre-warms that allow f, the idle groups whose fit lies in f and their
// fits.
func flavorPart(s *Snapshot, p *Plan, flavors []quota.Flavor, f string) (*Snapshot, *Plan) {
	of := map[string]string{}
	for _, n := range s.Nodes {
		for _, g := range n.GPUs {
			name, _ := quota.FlavorOf(flavors, g.Model, g.MIGProfile)
			of[g.ID] = name
		}
	}
	mine := func(ids []string) []string {
		var out []string
		for _, id := range ids {
			if of[id] == f {
				out = append(out, id)
			}
		}
		return out
	}
	ps := &Snapshot{Time: s.Time, Settings: s.Settings, Quota: s.Quota.Clone()}
	// The pre-warms that allow f: each drains in one of them
	// (prewarmFlavor).
	for _, w := range s.Prewarm {
		if w.Flavors == nil || slices.Contains(w.Flavors, f) {
			w.Flavors = nil
			ps.Prewarm = append(ps.Prewarm, w)
		}
	}
	// The idle groups whose fit lies in f (idleFitAcross), and their fits.
	var fits []GroupFit
	for _, x := range p.IdleFit {
		if x.Flavor == f {
			x.Flavor = ""
			fits = append(fits, x)
		}
	}
	for _, g := range s.IdleGroups {
		if slices.ContainsFunc(fits, func(x GroupFit) bool { return x.Key() == g.Key() }) {
			g.Flavors = nil
			ps.IdleGroups = append(ps.IdleGroups, g)
		}
	}
	ps.Quota.Flavors = nil
	ps.Quota.Walk(func(n *quota.Node) { n.GPUs = quota.Plain(n.GPUs.Of(f)) })
	for _, n := range s.Nodes {
		n.GPUs = slices.DeleteFunc(slices.Clone(n.GPUs), func(g GPU) bool { return of[g.ID] != f })
		for k := range n.GPUs {
			n.GPUs[k].MIGProfile = ""
		}
		ps.Nodes = append(ps.Nodes, n)
	}
	for _, a := range s.Allocations {
		if a.GPUIDs = mine(a.GPUIDs); len(a.GPUIDs) > 0 {
			ps.Allocations = append(ps.Allocations, a)
		}
	}
	for _, g := range s.Pending {
		if g.Flavors == nil || slices.Contains(g.Flavors, f) {
			g.Flavors = nil
			ps.Pending = append(ps.Pending, g)
		}
	}
	for _, r := range s.Reservations {
		if r.Flavor == f {
			r.Flavor = ""
			ps.Reservations = append(ps.Reservations, r)
		}
	}
	for _, h := range s.Holds {
		if h.GPUIDs = mine(h.GPUIDs); len(h.GPUIDs) > 0 {
			ps.Holds = append(ps.Holds, h)
		}
	}
	pp := &Plan{WakeAt: p.WakeAt, IdleFit: fits}
	for _, a := range p.Actions {
		if a.Flavor == f || a.Action == ActionStopJob || a.Action == ActionSuspend {
			a.Flavor = ""
			pp.Actions = append(pp.Actions, a)
		}
	}
	for _, u := range p.Usage {
		if u.Flavor == f {
			u.Flavor = ""
			pp.Usage = append(pp.Usage, u)
		}
	}
	return ps, pp
}

// checkFlavorPlan checks a plan of a snapshot with flavors: the existing
// invariants (check) in each flavor's part, each stop and admit and hold
// naming a flavor, a stop's victim holding devices of it, and a wait
// without a flavor giving one reason per flavor tried.
func checkFlavorPlan(s *Snapshot, p *Plan, flavors []quota.Flavor, check func(*Snapshot, *Plan) error) error {
	gpuFlavor := map[string]string{}
	for _, n := range s.Nodes {
		for _, g := range n.GPUs {
			gpuFlavor[g.ID], _ = quota.FlavorOf(flavors, g.Model, g.MIGProfile)
		}
	}
	allocs := map[string]*Allocation{}
	for i := range s.Allocations {
		allocs[s.Allocations[i].ID] = &s.Allocations[i]
	}
	for _, a := range p.Actions {
		switch a.Action {
		case ActionStop:
			v := allocs[a.Alloc]
			if v == nil || !slices.ContainsFunc(v.GPUIDs, func(id string) bool { return gpuFlavor[id] == a.Flavor }) {
				return fmt.Errorf("stop %s in flavor %q: the victim holds no device of it (L5, L13)", a.Alloc, a.Flavor)
			}
		case ActionAdmit, ActionHold:
			if a.Flavor == "" {
				return fmt.Errorf("%s of %s/%s names no flavor", a.Action, a.Namespace, a.Job)
			}
		case ActionWait:
			// A job left no flavor (its groups allow none in common, or
			// its booking's flavor is not among them) was tried in none.
			none := strings.HasPrefix(a.Reason, "no flavor is allowed") || strings.Contains(a.Reason, "which the job's device requests do not allow")
			if a.Flavor == "" && len(a.Reasons) < 2 && !none {
				return fmt.Errorf("wait of %s/%s names no flavor and gives %d reasons", a.Namespace, a.Job, len(a.Reasons))
			}
		}
	}
	for _, f := range flavors {
		ps, pp := flavorPart(s, p, flavors, f.Name)
		if err := check(ps, pp); err != nil {
			return fmt.Errorf("flavor %s: %w", f.Name, err)
		}
	}
	return nil
}

func TestFlavorPlanProperties(t *testing.T) {
	across := 0  // admits in a100, the later flavor of most jobs
	reasons := 0 // waits with a reason per flavor
	stopsA := 0  // stops in a100 or a100-1g
	for seed := uint64(0); seed < 1000; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		s := randomSnapshot(r)
		flavors := flavorize(s, r)
		p, err := Compute(s)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if err := checkFlavorPlan(s, p, flavors, checkPlan); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, a := range p.Actions {
			switch {
			case a.Action == ActionAdmit && a.Flavor == "a100":
				across++
			case a.Action == ActionWait && len(a.Reasons) > 1:
				reasons++
			case a.Action == ActionStop && a.Flavor != "h100":
				stopsA++
			}
		}
		p2, err := Compute(shuffled(s, r))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		b1, _ := json.Marshal(p)
		b2, _ := json.Marshal(p2)
		if string(b1) != string(b2) {
			t.Fatalf("seed %d: plans differ for the same state:\n%s\n%s", seed, b1, b2)
		}
	}
	t.Logf("%d admits in a100, %d waits with a reason per flavor, %d stops outside h100", across, reasons, stopsA)
	if across == 0 || reasons == 0 || stopsA == 0 {
		t.Errorf("the corpus no longer tests the choice, the reasons per flavor or the victims of a later flavor")
	}
}

// TestFlavorBookingProperty runs the booking corpus's existing invariants
// (checkPlan, checkCalendarPlan) with random flavors.
func TestFlavorBookingProperty(t *testing.T) {
	checked, prewarmLater := 0, 0
	for _, seed := range bookingSeedList() {
		s := bookingSnapshot(seed)
		if s.Validate() != nil {
			continue
		}
		r := rand.New(rand.NewPCG(seed, 17))
		flavors := flavorize(s, r)
		if err := s.Validate(); err != nil {
			continue // a booking over a flavor's share of a nominal, say
		}
		checked++
		p, err := Compute(s)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		err = checkFlavorPlan(s, p, flavors, func(s *Snapshot, p *Plan) error {
			if err := checkPlan(s, p); err != nil {
				return err
			}
			return checkCalendarPlan(s, p)
		})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, a := range p.Actions {
			if a.Rule == RulePrewarm && a.Action == ActionHold && a.Flavor != flavors[0].Name {
				prewarmLater++
			}
		}
	}
	t.Logf("%d of %d snapshots checked, %d pre-warm holds outside the first flavor", checked, len(bookingSeedList()), prewarmLater)
	if prewarmLater == 0 {
		t.Errorf("the corpus no longer tests pre-warms in a later flavor")
	}
	if checked < len(bookingSeedList())/2 {
		t.Errorf("only %d flavored snapshots of the booking corpus are valid", checked)
	}
}
