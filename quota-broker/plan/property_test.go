package plan

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/quota"
)

var models = []string{h100, "NVIDIA A100-SXM4-40GB"}

// randomSnapshot makes a random but valid snapshot: a tree of up to 7
// nodes, up to 12 client nodes, allocations filling part of them, and
// pending work.
func randomSnapshot(r *rand.Rand) *Snapshot {
	nsCount := 0
	var mk func(depth, budget int) *quota.Node
	names := 0
	mk = func(depth, budget int) *quota.Node {
		names++
		n := &quota.Node{Name: fmt.Sprintf("q%d", names), GPUs: quota.Plain(budget),
			ChildPreemption: r.IntN(2) == 0, PriorityPreemption: r.IntN(3) == 0}
		for k := r.IntN(2) + 1; k > 0; k-- {
			nsCount++
			n.Namespaces = append(n.Namespaces, fmt.Sprintf("ns%d", nsCount))
		}
		if r.IntN(4) == 0 {
			n.ChangedAt = t0.Add(-time.Duration(r.IntN(30)) * time.Minute)
		}
		if depth < 2 {
			left := budget
			for c := r.IntN(3); c > 0 && left > 0; c-- {
				share := r.IntN(left + 1)
				left -= share
				n.Children = append(n.Children, mk(depth+1, share))
			}
		}
		return n
	}
	root := mk(0, 8*(r.IntN(12)+1))
	// Sometimes lower a child below what it will hold, to make debt.
	s := &Snapshot{Time: t0, Quota: root, Settings: quota.Settings{
		MinRuntime: time.Duration(r.IntN(3)) * 5 * time.Minute, DebtGrace: 10 * time.Minute}}
	var allNS []string
	root.Walk(func(n *quota.Node) { allNS = append(allNS, n.Namespaces...) })
	allNS = append(allNS, "outside")

	nodes := r.IntN(12) + 1
	for i := 0; i < nodes; i++ {
		n := Node{ID: fmt.Sprintf("n%02d", i), Datacenter: []string{"dc1", "dc2"}[r.IntN(2)], NodePool: "default"}
		model := models[r.IntN(len(models))]
		size := []int{4, 8, 8}[r.IntN(3)]
		for g := 0; g < size; g++ {
			n.GPUs = append(n.GPUs, GPU{ID: fmt.Sprintf("n%02d-g%d", i, g), Model: model, Healthy: r.IntN(20) != 0})
		}
		s.Nodes = append(s.Nodes, n)
	}
	types := []JobType{JobService, JobBatch, JobBatch, JobSystem}
	allocID := 0
	for _, n := range s.Nodes {
		free := len(n.GPUs)
		for free > 0 && r.IntN(4) != 0 {
			g := min(free, []int{1, 2, 4, 8}[r.IntN(4)])
			allocID++
			job := fmt.Sprintf("job%d", r.IntN(10))
			a := Allocation{ID: fmt.Sprintf("a%03d", allocID), Namespace: allNS[r.IntN(len(allNS))], Job: job,
				Group: "g", Type: types[r.IntN(len(types))], Priority: r.IntN(100) + 1, Node: n.ID,
				Idle: r.IntN(2) == 0, Elastic: r.IntN(4) == 0,
				StartedAt: t0.Add(-time.Duration(r.IntN(120)) * time.Minute)}
			if r.IntN(15) == 0 {
				a.Reservation = "r1"
			}
			for k := 0; k < g; k++ {
				a.GPUIDs = append(a.GPUIDs, n.GPUs[len(n.GPUs)-free+k].ID)
			}
			free -= g
			s.Allocations = append(s.Allocations, a)
		}
	}
	s.Reservations = []Reservation{{ID: "r1", Namespace: allNS[0], Quota: root.Name, GPUs: 1,
		Start: t0.Add(-time.Hour), End: t0.Add(time.Hour)}}
	for i := r.IntN(8); i > 0; i-- {
		p := Pending{Namespace: allNS[r.IntN(len(allNS))], Job: fmt.Sprintf("p%d", r.IntN(6)),
			Group: fmt.Sprintf("g%d", r.IntN(2)), Type: []JobType{JobService, JobBatch}[r.IntN(2)],
			Priority: r.IntN(100) + 1, Count: r.IntN(3) + 1, GPUs: []int{1, 2, 4, 8}[r.IntN(4)],
			Idle: r.IntN(3) == 0, SubmittedAt: t0.Add(-time.Duration(r.IntN(600)) * time.Minute)}
		if r.IntN(3) == 0 {
			p.Model = models[r.IntN(len(models))]
		}
		if r.IntN(3) == 0 {
			p.Datacenters = []string{"dc1"}
		}
		if r.IntN(4) == 0 {
			p.Flex = &Flex{MaxWait: time.Duration(r.IntN(12)+1) * time.Hour, MaxRun: time.Duration(r.IntN(4)) * time.Hour}
		}
		dup := false
		for _, q := range s.Pending {
			if q.Key() == p.Key() {
				dup = true
			}
			if q.JobKey() == p.JobKey() { // job-level settings are shared by its groups
				p.Idle, p.Flex, p.Priority, p.SubmittedAt, p.Type = q.Idle, q.Flex, q.Priority, q.SubmittedAt, q.Type
			}
		}
		if !dup {
			s.Pending = append(s.Pending, p)
		}
	}
	// Lower one child's nominal below its usage now and then (L9).
	if len(root.Children) > 0 && r.IntN(3) == 0 {
		c := root.Children[0]
		sum := 0
		for _, g := range c.Children {
			sum += g.GPUs.Total()
		}
		c.GPUs = quota.Plain(max(sum, c.GPUs.Total()-8))
	}
	return s
}

func TestPlanProperties(t *testing.T) {
	yielding := 0 // admits that relied on lower-priority allocations yielding
	defer func() {
		if yielding == 0 && !t.Failed() {
			t.Errorf("no plan of the corpus admits a job on what yields to it (L3, L5.3): the corpus no longer tests it")
		}
	}()
	for seed := uint64(0); seed < 2000; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		s := randomSnapshot(r)
		p, err := Compute(s)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if err := checkPlan(s, p); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, a := range p.Actions {
			if a.Action == ActionAdmit && strings.HasSuffix(a.Reason, "yield (L5.3)") {
				yielding++
			}
		}
		// Same input, byte-identical output, even with the input shuffled.
		again := shuffled(s, r)
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
}

func shuffled(s *Snapshot, r *rand.Rand) *Snapshot {
	c := *s
	c.Nodes = append([]Node(nil), s.Nodes...)
	c.Allocations = append([]Allocation(nil), s.Allocations...)
	c.Pending = append([]Pending(nil), s.Pending...)
	r.Shuffle(len(c.Nodes), func(i, j int) { c.Nodes[i], c.Nodes[j] = c.Nodes[j], c.Nodes[i] })
	r.Shuffle(len(c.Allocations), func(i, j int) { c.Allocations[i], c.Allocations[j] = c.Allocations[j], c.Allocations[i] })
	r.Shuffle(len(c.Pending), func(i, j int) { c.Pending[i], c.Pending[j] = c.Pending[j], c.Pending[i] })
	return &c
}

// checkPlan verifies a plan against the snapshot, independently of the
// planner's own bookkeeping.
func checkPlan(s *Snapshot, p *Plan) error {
	owner := quota.Namespaces(s.Quota)
	byName := map[string]*quota.Node{}
	parent := map[string]string{}
	s.Quota.Walk(func(n *quota.Node) {
		byName[n.Name] = n
		for _, c := range n.Children {
			parent[c.Name] = n.Name
		}
	})
	allocs := map[string]*Allocation{}
	for i := range s.Allocations {
		allocs[s.Allocations[i].ID] = &s.Allocations[i]
	}
	pend := map[GroupKey]*Pending{}
	for i := range s.Pending {
		pend[s.Pending[i].Key()] = &s.Pending[i]
	}
	admitted := map[GroupKey]bool{}
	stopped := map[string]bool{}
	for _, a := range p.Actions {
		if a.Action == ActionAdmit {
			admitted[GroupKey{Namespace: a.Namespace, Job: a.Job, Group: a.Group}] = true
		}
	}
	// Reservations active now (L10): randomSnapshot's r1, and those of
	// the booking corpus (property_booking_test.go).
	active := map[string]bool{}
	for _, r := range s.Reservations {
		if r.Active(s.Time) {
			active[r.ID] = true
		}
	}
	for _, a := range p.Actions {
		if a.Action != ActionStop {
			continue
		}
		// Drains and pre-warms stop for an owner that is not admitted
		// (checkCalendarPlan checks them); every other stop is for an
		// admitted claimant, by L5 (or, for a job of an active
		// reservation, L10.start).
		ahead := a.Rule == RuleDrain || a.Rule == RulePrewarm
		start := a.Rule == RuleStart && pend[a.For] != nil && active[pend[a.For].Reservation]
		if a.Rule == RuleFair {
			// L14.fair: an idle victim of another node, neither the
			// claimant's ancestor nor its descendant, for an idle
			// claimant.
			v, c := allocs[a.Alloc], pend[a.For]
			if v == nil || c == nil || !v.Idle || !c.Idle {
				return fmt.Errorf("stop %s by L14.fair for %s: victim and claimant must both be idle", a.Alloc, a.For)
			}
			for _, pair := range [][2]string{{owner[v.Namespace], owner[c.Namespace]}, {owner[c.Namespace], owner[v.Namespace]}} {
				for n := pair[0]; n != ""; n = parent[n] {
					if n == pair[1] {
						return fmt.Errorf("stop %s (%s) by L14.fair for %s (%s): one node is the other's ancestor or the same",
							a.Alloc, owner[v.Namespace], a.For, owner[c.Namespace])
					}
				}
			}
		} else if a.Rule != RuleIdleDebt && a.Rule != RuleChild && a.Rule != RulePriority && !ahead && !start {
			return fmt.Errorf("stop %s has rule %q", a.Alloc, a.Rule)
		}
		if !ahead && (a.For.IsZero() || !admitted[a.For]) {
			return fmt.Errorf("stop %s is for %q, which is not admitted", a.Alloc, a.For)
		}
		v := allocs[a.Alloc]
		if v == nil || stopped[a.Alloc] {
			return fmt.Errorf("stop %s: unknown or stopped twice", a.Alloc)
		}
		stopped[a.Alloc] = true
		if _, ok := owner[v.Namespace]; !ok || v.Type == JobSystem || v.Type == JobSysbatch || !v.StoppingFor.IsZero() ||
			v.StoppingForReservation != "" || active[v.Reservation] {
			return fmt.Errorf("stop %s: %+v may never be a victim", a.Alloc, v)
		}
		if !v.Idle && a.Rule == RuleIdleDebt && !strings.Contains(a.Reason, "debt") {
			return fmt.Errorf("stop %s: non-idle stopped as idle", a.Alloc)
		}
		// L5 step 3 (also when it restores the quota, L6): only the
		// claimant's node's own allocations of lower priority.
		if c := pend[a.For]; a.Rule == RulePriority &&
			(c == nil || owner[v.Namespace] != owner[c.Namespace] || v.Priority >= c.Priority || !byName[owner[c.Namespace]].PriorityPreemption) {
			return fmt.Errorf("stop %s (%s, priority %d) by L5.3 for %s: not its node's own allocation of lower priority",
				a.Alloc, v.Namespace, v.Priority, a.For)
		}
	}
	// A job stop (L10.end, L11.max_run) or a suspend (L11.settle) takes
	// the whole job out of the usage.
	for _, a := range p.Actions {
		if a.Action == ActionStopJob || a.Action == ActionSuspend {
			for _, v := range s.Allocations {
				if v.Namespace == a.Namespace && v.Job == a.Job {
					stopped[v.ID] = true
				}
			}
		}
	}
	// Placement: per node, GPUs left after the stops must hold the admits
	// (GPUs being freed for a reservation are free to its admitted jobs).
	freedFor := map[string]bool{}
	for k := range admitted {
		if g := pend[k]; g != nil && g.Reservation != "" {
			freedFor[g.Reservation] = true
		}
	}
	held := map[string]int{}
	for _, a := range s.Allocations {
		if stopped[a.ID] || (!a.StoppingFor.IsZero() && admitted[a.StoppingFor]) || freedFor[a.StoppingForReservation] {
			continue
		}
		for _, id := range a.GPUIDs {
			held[id] = 1
		}
	}
	need := map[string]map[string]int{} // node -> model -> GPUs
	for _, a := range p.Actions {
		if a.Action != ActionAdmit {
			continue
		}
		g := pend[GroupKey{Namespace: a.Namespace, Job: a.Job, Group: a.Group}]
		if g == nil || len(a.Nodes) != a.Count || a.Count > g.Count {
			return fmt.Errorf("admit %+v does not match a pending group", a)
		}
		for _, n := range a.Nodes {
			if need[n] == nil {
				need[n] = map[string]int{}
			}
			need[n][g.Model] += g.GPUs
		}
		if g.Idle && a.Rule != RuleIdle || !g.Idle && a.Rule != RuleAdmission && !(a.Rule == RuleReservation && active[g.Reservation]) {
			return fmt.Errorf("admit %+v has the wrong rule", a)
		}
	}
	for _, n := range s.Nodes {
		freeBy := map[string]int{}
		total := 0
		for _, g := range n.GPUs {
			if g.Healthy && held[g.ID] == 0 {
				freeBy[g.Model]++
				total++
			}
		}
		sum := 0
		for model, k := range need[n.ID] {
			sum += k
			if model != "" && freeBy[model] < k {
				return fmt.Errorf("node %s: %d GPUs of %s admitted, %d free", n.ID, k, model, freeBy[model])
			}
		}
		if sum > total {
			return fmt.Errorf("node %s: %d GPUs admitted, %d free after stops", n.ID, sum, total)
		}
	}
	// L3: after the plan, every quota node that admitted non-idle work is
	// within its nominal, and so is every ancestor (debt excluded). Every
	// allocation the plan stops counts as stopped, those that yielded to a
	// claimant under priority preemption (L5.3) included: such a claimant
	// is entitled without them, and the plan must have stopped enough of
	// them to restore its node and the ancestors.
	debt := debtOf(s)
	nonIdle := map[string]int{}
	ownNonIdle := map[string]int{}
	debtSub := map[string]int{}
	book := func(q string, gpus int, isDebt bool) {
		ownNonIdle[q] += gpus
		for x := q; x != ""; x = parent[x] {
			nonIdle[x] += gpus
			if isDebt {
				debtSub[x] += gpus
			}
		}
	}
	for _, a := range s.Allocations {
		// L10: allocations of active reservations are left out of the
		// usage for other jobs.
		if q, ok := owner[a.Namespace]; ok && !a.Idle && !stopped[a.ID] && !active[a.Reservation] {
			book(q, len(a.GPUIDs), debt[a.ID])
		}
	}
	touched := map[string]bool{}
	for _, a := range p.Actions {
		g := pend[GroupKey{Namespace: a.Namespace, Job: a.Job, Group: a.Group}]
		// A job of an active reservation is entitled by its booking alone
		// and is left out of the usage (L10).
		if a.Action == ActionAdmit && !g.Idle && !active[g.Reservation] {
			book(owner[a.Namespace], a.Count*g.GPUs, false)
			touched[owner[a.Namespace]] = true
		}
	}
	for q := range touched {
		n := byName[q]
		// At admission q's own check counts its debt, but a later
		// admission below q checks q as an ancestor, debt excluded (debt
		// never blocks the quota it was moved to): after the plan, q is
		// within its nominal with its debt left out.
		used := nonIdle[q] - debtSub[q]
		if n.ChildPreemption {
			used = ownNonIdle[q]
		}
		if used > n.GPUs.Total() {
			return fmt.Errorf("L3: %s holds %d non-idle GPUs after the plan, nominal %d", q, used, n.GPUs.Total())
		}
		for a := parent[q]; a != ""; a = parent[a] {
			if byName[a].ChildPreemption {
				// A node with child-level preemption admits its own jobs on
				// its own usage only (L3): its descendants yield to it only
				// when GPUs run out, so its subtree may exceed its nominal
				// on capacity beyond it.
				continue
			}
			if nonIdle[a]-debtSub[a] > byName[a].GPUs.Total() {
				return fmt.Errorf("L3: ancestor %s of %s holds %d, nominal %d", a, q, nonIdle[a]-debtSub[a], byName[a].GPUs.Total())
			}
		}
	}
	return nil
}

// debtOf re-derives L9's debt independently: bottom-up, non-idle
// allocations fill each nominal oldest first, first fit; the rest are debt.
func debtOf(s *Snapshot) map[string]bool {
	owner := quota.Namespaces(s.Quota)
	debt := map[string]bool{}
	var visit func(n *quota.Node) []*Allocation
	visit = func(n *quota.Node) []*Allocation {
		var members []*Allocation
		for _, c := range n.Children {
			members = append(members, visit(c)...)
		}
		for i := range s.Allocations {
			a := &s.Allocations[i]
			if owner[a.Namespace] == n.Name && !a.Idle {
				members = append(members, a)
			}
		}
		sort.Slice(members, func(i, j int) bool {
			if !members[i].StartedAt.Equal(members[j].StartedAt) {
				return members[i].StartedAt.Before(members[j].StartedAt)
			}
			return members[i].ID < members[j].ID
		})
		total := 0
		for _, a := range members {
			total += len(a.GPUIDs)
		}
		if total <= n.GPUs.Total() {
			return members
		}
		var keep []*Allocation
		filled := 0
		for _, a := range members {
			if filled+len(a.GPUIDs) <= n.GPUs.Total() {
				filled += len(a.GPUIDs)
				keep = append(keep, a)
			} else {
				debt[a.ID] = true
			}
		}
		return keep
	}
	visit(s.Quota)
	return debt
}

// TestComputeLeavesSnapshotUnchanged plans every snapshot of the property
// corpus twice (as given, then shuffled, which shares its inner slices and
// its tree) with the pooled buffers of the plans before, and compares it
// with the same snapshot made again from the same seed.
func TestComputeLeavesSnapshotUnchanged(t *testing.T) {
	for seed := uint64(0); seed < 2000; seed++ {
		s := randomSnapshot(rand.New(rand.NewPCG(seed, 7)))
		want := randomSnapshot(rand.New(rand.NewPCG(seed, 7)))
		if _, err := Compute(s); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if _, err := Compute(shuffled(s, rand.New(rand.NewPCG(seed, 8)))); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if diff := cmp.Diff(want, s); diff != "" {
			t.Fatalf("seed %d: Compute changed the snapshot (-before +after):\n%s", seed, diff)
		}
	}
}
