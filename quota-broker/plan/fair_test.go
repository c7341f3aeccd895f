package plan

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/quota"
)

// givebackTree is issue 19's e2e tree: Quota1 8 with children Quota1.1 (team
// B, workspace-b) and Quota1.2 (team C, workspace-c) of nominal 2 and
// weight 1 each; Quota1.1 has a child Quota1.1.1 (workspace-b1) of 0.
func givebackTree() *quota.Node {
	return &quota.Node{Name: "Quota1", GPUs: quota.Plain(8), Namespaces: []string{"workspace-a"},
		Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: quota.Plain(2), Weight: quota.Plain(1), Namespaces: []string{"workspace-b"},
				Children: []*quota.Node{{Name: "Quota1.1.1", GPUs: quota.Plain(0), Namespaces: []string{"workspace-b1"}}}},
			{Name: "Quota1.2", GPUs: quota.Plain(2), Weight: quota.Plain(1), Namespaces: []string{"workspace-c"}},
		}}
}

// fairSnap: B's elastic idle job runs 8 allocations of 1 GPU on the one
// node of 8, b1 started 8 minutes ago .. b8 1 minute ago; C asks for 4
// idle allocations of 1 GPU. min_runtime 0.
func fairSnap() *snapBuilder {
	b := newSnap(givebackTree()).nodes(1, 8, h100).settings(0, time.Hour)
	for i := 1; i <= 8; i++ {
		b.alloc(fmt.Sprintf("b%d", i), "workspace-b", "elastic-b", "node-01", 1, idle, elastic, started(time.Duration(9-i)*time.Minute))
	}
	return b.pending("workspace-c", "elastic-c", 4, 1, pIdle)
}

func fairPlan(t *testing.T, s *Snapshot) *Plan {
	t.Helper()
	return mustPlanWith(t, s, Options{IdleOrder: IdleOrderFair})
}

// TestFairGiveBack: issue 19's e2e on the core. C's 4 idle allocations
// take 4 of B's under rule L14.fair, the most recently started first (L5's
// key), and no more: B then borrows 2 (share 2/1), C borrows 2 after
// admission, so a fifth stop would leave B below C. Without L14 (the L3
// order) C waits: idle jobs never preempt.
func TestFairGiveBack(t *testing.T) {
	s := fairSnap().build()
	p := fairPlan(t, s)
	if diff := cmp.Diff([]string{"b8", "b7", "b6", "b5"}, stops(p)); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	for _, a := range actionsOf(p, ActionStop) {
		if a.Rule != RuleFair || !strings.Contains(a.Reason, "fair give-back (L14)") || a.For != (GroupKey{Namespace: "workspace-c", Job: "elastic-c", Group: "server"}) {
			t.Errorf("stop %s: rule %s for %v, reason %q; want L14.fair for workspace-c/elastic-c/server", a.Alloc, a.Rule, a.For, a.Reason)
		}
	}
	if got := admittedCount(p); got != 4 {
		t.Errorf("admitted %d allocations, want 4", got)
	}
	if got := actionsOf(p, ActionWait); len(got) != 0 {
		t.Errorf("waits %v, want none", got)
	}
	l3 := mustPlanWith(t, s, Options{IdleOrder: IdleOrderL3})
	if len(stops(l3)) != 0 || admittedCount(l3) != 0 {
		t.Errorf("L3 order: stops %v, %d admitted; want none", stops(l3), admittedCount(l3))
	}
}

// admittedCount is the allocations a plan admits.
func admittedCount(p *Plan) int {
	n := 0
	for _, a := range actionsOf(p, ActionAdmit) {
		n += a.Count
	}
	return n
}

// TestFairGiveBackNever: what rule L14.fair never takes (DESIGN L14).
func TestFairGiveBackNever(t *testing.T) {
	t.Run("ancestor", func(t *testing.T) {
		// The claimant is Quota1.1.1, under B's node: B is its ancestor.
		b := newSnap(givebackTree()).nodes(1, 8, h100).settings(0, time.Hour)
		for i := 1; i <= 8; i++ {
			b.alloc(fmt.Sprintf("b%d", i), "workspace-b", "elastic-b", "node-01", 1, idle)
		}
		p := fairPlan(t, b.pending("workspace-b1", "x", 2, 1, pIdle).build())
		if len(stops(p)) != 0 {
			t.Errorf("stops %v, want none of an ancestor", stops(p))
		}
	})
	t.Run("descendant", func(t *testing.T) {
		b := newSnap(givebackTree()).nodes(1, 8, h100).settings(0, time.Hour)
		for i := 1; i <= 8; i++ {
			b.alloc(fmt.Sprintf("b%d", i), "workspace-b1", "elastic-b", "node-01", 1, idle)
		}
		p := fairPlan(t, b.pending("workspace-b", "x", 2, 1, pIdle).build())
		if len(stops(p)) != 0 {
			t.Errorf("stops %v, want none of a descendant", stops(p))
		}
	})
	t.Run("non-idle", func(t *testing.T) {
		b := newSnap(givebackTree()).nodes(1, 8, h100).settings(0, time.Hour)
		for i := 1; i <= 8; i++ {
			b.alloc(fmt.Sprintf("b%d", i), "workspace-b", "train-b", "node-01", 1)
		}
		p := fairPlan(t, b.pending("workspace-c", "x", 2, 1, pIdle).build())
		if len(stops(p)) != 0 {
			t.Errorf("stops %v, want no non-idle victim", stops(p))
		}
	})
	t.Run("young", func(t *testing.T) {
		s := fairSnap().settings(5*time.Minute, time.Hour).build()
		p := fairPlan(t, s)
		// b1..b4 started 8..5 minutes ago are old enough; b5..b8 are not.
		if diff := cmp.Diff([]string{"b4", "b3", "b2", "b1"}, stops(p)); diff != "" {
			t.Errorf("stops (-want +got):\n%s", diff)
		}
	})
	t.Run("other flavor", func(t *testing.T) {
		tree := givebackTree()
		tree.Flavors = []quota.Flavor{{Name: "h100", Models: []string{h100}}, {Name: "a100", Models: []string{a100}}}
		tree.Walk(func(n *quota.Node) {
			nom := n.GPUs.Of(quota.ImplicitFlavor)
			n.GPUs = quota.Nominal{"h100": nom, "a100": nom}
			if n.Weight != nil {
				n.Weight = quota.Nominal{"h100": 1, "a100": 1}
			}
		})
		b := newSnap(tree).nodes(1, 8, h100).nodes(1, 8, a100).settings(0, time.Hour)
		for i := 1; i <= 8; i++ {
			b.alloc(fmt.Sprintf("b%d", i), "workspace-b", "elastic-b", "node-01", 1, idle, elastic, started(time.Duration(9-i)*time.Minute))
			b.alloc(fmt.Sprintf("a%d", i), "workspace-a", "busy", "node-02", 1)
		}
		// C may use a100 only: B's h100 allocations are not its flavor.
		s := b.pending("workspace-c", "x", 2, 1, pIdle, func(p *Pending) { p.Flavors = []string{"a100"} }).build()
		if p := fairPlan(t, s); len(stops(p)) != 0 {
			t.Errorf("a100 only: stops %v, want none", stops(p))
		}
		s.Pending[0].Flavors = nil
		p := fairPlan(t, s)
		if diff := cmp.Diff([]string{"b8", "b7"}, stops(p)); diff != "" {
			t.Errorf("any flavor: stops (-want +got):\n%s", diff)
		}
	})
}

// TestFairGiveBackHighestShareFirst: the victim side with the highest
// borrowed share goes first (DESIGN L14 Candidates), before L5's key.
func TestFairGiveBackHighestShareFirst(t *testing.T) {
	tree := &quota.Node{Name: "Q", GPUs: quota.Plain(8), Namespaces: []string{"ns-q"}, Children: []*quota.Node{
		{Name: "Q.a", GPUs: quota.Plain(1), Weight: quota.Plain(1), Namespaces: []string{"ns-a"}},
		{Name: "Q.b", GPUs: quota.Plain(1), Weight: quota.Plain(1), Namespaces: []string{"ns-b"}},
		{Name: "Q.c", GPUs: quota.Plain(2), Weight: quota.Plain(1), Namespaces: []string{"ns-c"}},
	}}
	b := newSnap(tree).nodes(1, 8, h100).settings(0, time.Hour)
	// a holds 3 (borrows 2), b holds 5 (borrows 4): b's younger ones would
	// go first by L5's key if the share did not.
	for i := 1; i <= 3; i++ {
		b.alloc(fmt.Sprintf("a%d", i), "ns-a", "ja", "node-01", 1, idle, elastic, started(time.Duration(i)*time.Minute))
	}
	for i := 1; i <= 5; i++ {
		b.alloc(fmt.Sprintf("b%d", i), "ns-b", "jb", "node-01", 1, idle, elastic, started(time.Duration(10+i)*time.Hour))
	}
	p := fairPlan(t, b.pending("ns-c", "x", 4, 1, pIdle).build())
	// Each of C's allocations is its own admission (a service job):
	// after the first two C borrows nothing; b borrows 4, a 2: b's
	// youngest (b1), then b (3) again (b2); then a and b tie at 2 and
	// L5's key takes the youngest of all, a1, for C's third (C borrows
	// 1, a and b then 1); a fourth would leave a or b at 0, below C's 2.
	if diff := cmp.Diff([]string{"b1", "b2", "a1"}, stops(p)); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	if got := admittedCount(p); got != 3 {
		t.Errorf("admitted %d, want 3", got)
	}
}

// TestEvictionBudget: max_evict on Quota1.1 of 2 GPUs per 10m lets C take
// 2 of B's allocations; the other two wait with the budget's numbers. A
// snapshot that already holds 2 evicted GPUs in the window lets it take
// none; one out of the window does not count.
func TestEvictionBudget(t *testing.T) {
	build := func(ev ...Eviction) *Snapshot {
		s := fairSnap().build()
		s.Quota.Children[0].MaxEvict = &quota.EvictBudget{GPUs: 2, Per: 10 * time.Minute}
		s.Evictions = ev
		return s
	}
	p := fairPlan(t, build())
	if diff := cmp.Diff([]string{"b8", "b7"}, stops(p)); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	waits := actionsOf(p, ActionWait)
	if len(waits) != 1 || waits[0].Count != 2 || !strings.Contains(waits[0].Reason, "Quota1.1: 2 of 2 GPUs evicted in the last 10m") {
		t.Errorf("waits %+v, want 2 waiting with Quota1.1's budget", waits)
	}
	p = fairPlan(t, build(Eviction{Quota: "Quota1.1.1", GPUs: 2, Time: t0.Add(-time.Minute)}))
	if len(stops(p)) != 0 {
		t.Errorf("with 2 evicted in the window (a descendant's): stops %v, want none", stops(p))
	}
	if want := t0.Add(9 * time.Minute); !p.WakeAt.Equal(want) {
		t.Errorf("WakeAt %v, want %v: when the eviction leaves the window", p.WakeAt, want)
	}
	p = fairPlan(t, build(Eviction{Quota: "Quota1.1", GPUs: 2, Time: t0.Add(-10 * time.Minute)}))
	if len(stops(p)) != 2 {
		t.Errorf("with 2 evicted just out of the window: stops %v, want 2", stops(p))
	}
}

// TestEvictionBudgetNonIdle: a budget refuses L5.1's stops for a non-idle
// claimant too, and never a reservation's.
func TestEvictionBudgetNonIdle(t *testing.T) {
	b := newSnap(givebackTree()).nodes(1, 8, h100).settings(0, time.Hour)
	for i := 1; i <= 8; i++ {
		b.alloc(fmt.Sprintf("b%d", i), "workspace-b", "elastic-b", "node-01", 1, idle, elastic, started(time.Duration(9-i)*time.Minute))
	}
	s := b.pending("workspace-c", "train", 2, 1).build()
	s.Quota.Children[0].MaxEvict = &quota.EvictBudget{GPUs: 1, Per: 5 * time.Minute}
	p := mustPlan(t, s)
	if len(stops(p)) != 1 {
		t.Errorf("stops %v, want 1 within the budget", stops(p))
	}
	waits := actionsOf(p, ActionWait)
	if len(waits) != 1 || !strings.Contains(waits[0].Reason, "Quota1.1: 1 of 1 GPUs evicted in the last 5m") {
		t.Errorf("waits %+v, want the budget's reason", waits)
	}
}

// fairWorld is a small cluster under plans applied one after another for
// the property tests: stops remove allocations (an idle allocation
// stopped is asked for again by its job: demand does not change), admits
// add them.
type fairWorld struct {
	s    *Snapshot
	next int
}

// apply applies plan p to the world's snapshot and advances its clock by
// a minute.
func (w *fairWorld) apply(p *Plan) {
	s := w.s
	stopped := map[string]bool{}
	for _, a := range actionsOf(p, ActionStop) {
		stopped[a.Alloc] = true
	}
	var live []Allocation
	for _, a := range s.Allocations {
		if !stopped[a.ID] {
			live = append(live, a)
			continue
		}
		// Asked for again.
		i := slices.IndexFunc(s.Pending, func(g Pending) bool { return g.Namespace == a.Namespace && g.Job == a.Job })
		if i < 0 {
			s.Pending = append(s.Pending, Pending{Namespace: a.Namespace, Job: a.Job, Group: a.Group, Type: a.Type, Priority: a.Priority,
				GPUs: a.GPUs(), Idle: true, Elastic: a.Elastic, Datacenters: []string{"dc1"}, NodePool: "default", SubmittedAt: a.StartedAt})
			i = len(s.Pending) - 1
		}
		s.Pending[i].Count++
	}
	s.Allocations = live
	used := map[string]bool{}
	for _, a := range live {
		for _, g := range a.GPUIDs {
			used[g] = true
		}
	}
	for _, ad := range actionsOf(p, ActionAdmit) {
		i := slices.IndexFunc(s.Pending, func(g Pending) bool {
			return g.Namespace == ad.Namespace && g.Job == ad.Job && g.Group == ad.Group
		})
		pg := s.Pending[i]
		for _, nid := range ad.Nodes {
			n := s.Nodes[slices.IndexFunc(s.Nodes, func(n Node) bool { return n.ID == nid })]
			a := Allocation{ID: fmt.Sprintf("x%04d", w.next), Namespace: pg.Namespace, Job: pg.Job, Group: pg.Group, Type: pg.Type,
				Priority: pg.Priority, Idle: pg.Idle, Elastic: pg.Elastic, Node: nid, StartedAt: s.Time}
			w.next++
			for _, g := range n.GPUs {
				if len(a.GPUIDs) < pg.GPUs && !used[g.ID] {
					used[g.ID] = true
					a.GPUIDs = append(a.GPUIDs, g.ID)
				}
			}
			s.Allocations = append(s.Allocations, a)
		}
		s.Pending[i].Count -= ad.Count
	}
	s.Pending = slices.DeleteFunc(s.Pending, func(g Pending) bool { return g.Count <= 0 })
	s.Time = s.Time.Add(time.Minute)
}

// randomFairWorld: one level of 2..4 children under a root of 2 or 3
// nodes of 8 GPUs, random nominals and weights (or the default), a few
// non-idle allocations, and idle jobs of 1 GPU per allocation; no work in
// the root's own namespace.
func randomFairWorld(rng *rand.Rand) *fairWorld {
	nodes := 2 + rng.Intn(2)
	total := nodes * 8
	root := &quota.Node{Name: "Q", GPUs: quota.Plain(total), Namespaces: []string{"ns-q"}}
	left := total
	for c := 0; c < 2+rng.Intn(3); c++ {
		nom := rng.Intn(left/2 + 1)
		left -= nom
		n := &quota.Node{Name: fmt.Sprintf("Q.%d", c), GPUs: quota.Plain(nom), Namespaces: []string{fmt.Sprintf("ns-%d", c)}}
		if rng.Intn(2) == 0 {
			n.Weight = quota.Plain(1 + rng.Intn(4))
		}
		root.Children = append(root.Children, n)
	}
	b := newSnap(root).nodes(nodes, 8, h100).settings(0, time.Hour)
	a := 0
	for ni := 1; ni <= nodes; ni++ {
		for k := rng.Intn(3); k > 0; k-- {
			c := root.Children[rng.Intn(len(root.Children))]
			b.alloc(fmt.Sprintf("n%02d", a), c.Namespaces[0], fmt.Sprintf("train%02d", a), fmt.Sprintf("node-%02d", ni), 1)
			a++
		}
	}
	// One side holds most of the idle GPUs first; the others ask later.
	first := root.Children[rng.Intn(len(root.Children))]
	for ni := 1; ni <= nodes; ni++ {
		for k := 0; k < 5; k++ {
			b.alloc(fmt.Sprintf("i%02d", a), first.Namespaces[0], "idle-first", fmt.Sprintf("node-%02d", ni), 1, idle, elastic, started(time.Hour))
			a++
		}
	}
	for j, c := range root.Children {
		if rng.Intn(3) > 0 {
			b.pending(c.Namespaces[0], fmt.Sprintf("idle%02d", j), 1+rng.Intn(total), 1, pIdle, pType(JobBatch), func(p *Pending) { p.Elastic = true })
		}
	}
	return &fairWorld{s: b.build()}
}

// fairFiguresOf builds FairFigures of a one-flavor snapshot's tree from
// its allocations (held) and pending groups (asked), for the property
// checks.
func fairFiguresOf(s *Snapshot) (FairFigures, []*quota.Node) {
	var nodes []*quota.Node
	s.Quota.Walk(func(n *quota.Node) { nodes = append(nodes, n) })
	idx := map[*quota.Node]int{}
	for i, n := range nodes {
		idx[n] = i
	}
	parent := map[*quota.Node]*quota.Node{}
	byNS := map[string]*quota.Node{}
	for _, n := range nodes {
		for _, c := range n.Children {
			parent[c] = n
		}
		for _, ns := range n.Namespaces {
			byNS[ns] = n
		}
	}
	f := FairFigures{Nominal: make([]int, len(nodes)), OwnNonIdle: make([]int, len(nodes)), NonIdle: make([]int, len(nodes)),
		Demand: make([]int, len(nodes)), Borrowed: make([]int, len(nodes)), Weight: make([]int, len(nodes))}
	used := make([]int, len(nodes))
	for i, n := range nodes {
		f.Nominal[i] = n.GPUs.Of(quota.ImplicitFlavor)
		f.Weight[i] = DefaultWeight
		if w, ok := n.Weight[quota.ImplicitFlavor]; ok {
			f.Weight[i] = w
		}
	}
	up := func(n *quota.Node, fn func(i int)) {
		for ; n != nil; n = parent[n] {
			fn(idx[n])
		}
	}
	for _, a := range s.Allocations {
		n, g := byNS[a.Namespace], a.GPUs()
		if !a.Idle {
			f.OwnNonIdle[idx[n]] += g
			up(n, func(i int) { f.NonIdle[i] += g })
		}
		up(n, func(i int) { used[i] += g; f.Demand[i] += g })
	}
	for _, p := range s.Pending {
		g := p.GPUs * p.Count
		up(byNS[p.Namespace], func(i int) { f.Demand[i] += g })
	}
	for i := range nodes {
		f.Borrowed[i] = max(0, used[i]-max(f.Nominal[i], f.NonIdle[i]))
	}
	return f, nodes
}

// TestPropertyFairGiveBack checks issue 19's properties (i) and (ii) over
// random trees and workloads, min_runtime 0 and no budgets, plans applied
// one after another with demand fixed: (i) L14.fair stops cease within 3
// plans, and then each child holds its fair share within one largest
// allocation (1 GPU here) where L14 defines it and the child is not held
// back by what it asks (it asks for more than its share); (ii) no node
// takes back under L14.fair what it lost under L14.fair from the same
// node in the same run. Under IdleOrderFair and the word-for-word
// IdleOrderFairEvery alike.
func TestPropertyFairGiveBack(t *testing.T) {
	for _, order := range []IdleOrder{IdleOrderFair, IdleOrderFairEvery} {
		t.Run(order.String(), func(t *testing.T) { propertyFairGiveBack(t, order) })
	}
}

func propertyFairGiveBack(t *testing.T, order IdleOrder) {
	seeds := 200
	if testing.Short() {
		seeds = 40
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		rng := rand.New(rand.NewSource(seed))
		w := randomFairWorld(rng)
		if err := w.s.Validate(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		byNS := quota.Namespaces(w.s.Quota)
		lost := map[[2]string]bool{} // {loser, taker} under L14.fair
		last := -1
		for k := 0; k < 8; k++ {
			p := mustPlanWith(t, w.s, Options{IdleOrder: order})
			nsOf := map[string]string{}
			for _, a := range w.s.Allocations {
				nsOf[a.ID] = a.Namespace
			}
			for _, a := range actionsOf(p, ActionStop) {
				if a.Rule != RuleFair {
					continue
				}
				last = k
				loser, taker := byNS[nsOf[a.Alloc]], byNS[a.For.Namespace]
				if lost[[2]string{taker, loser}] {
					t.Fatalf("seed %d plan %d: %s takes back from %s what it lost to it under L14.fair", seed, k, taker, loser)
				}
				lost[[2]string{loser, taker}] = true
			}
			w.apply(p)
		}
		if last >= 3 {
			t.Errorf("seed %d: L14.fair stops in plan %d (want none after the third)", seed, last+1)
		}
		f, nodes := fairFiguresOf(w.s)
		shares, err := FairShares(w.s.Quota, &f)
		if err != nil {
			t.Fatalf("seed %d: FairShares: %v", seed, err)
		}
		for i, sh := range shares {
			if !sh.Defined {
				continue
			}
			held := f.Demand[i]
			for _, p := range w.s.Pending {
				if quota.Namespaces(w.s.Quota)[p.Namespace] == nodes[i].Name {
					held -= p.GPUs * p.Count
				}
			}
			if float64(held) < sh.Share-1 && f.Demand[i] > held {
				t.Errorf("seed %d: %s holds %d GPUs, fair share %.2f (base %d, wants %d), asks for %d more",
					seed, sh.Quota, held, sh.Share, sh.Base, sh.Wants, f.Demand[i]-held)
			}
		}
	}
}

// TestPropertyEvictionBudget is issue 19's property (iii): with budgets,
// over plans applied one after another with a minute between them, no
// window of a node's per ever holds more than its gpus of stops of idle
// claimants (those a budget may refuse). Under IdleOrderFair and the word-for-word
// IdleOrderFairEvery alike.
func TestPropertyEvictionBudget(t *testing.T) {
	for _, order := range []IdleOrder{IdleOrderFair, IdleOrderFairEvery} {
		t.Run(order.String(), func(t *testing.T) { propertyEvictionBudget(t, order) })
	}
}

func propertyEvictionBudget(t *testing.T, order IdleOrder) {
	seeds := 100
	if testing.Short() {
		seeds = 20
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		rng := rand.New(rand.NewSource(seed))
		w := randomFairWorld(rng)
		w.s.Quota.Walk(func(n *quota.Node) {
			if rng.Intn(2) == 0 {
				n.MaxEvict = &quota.EvictBudget{GPUs: rng.Intn(4), Per: time.Duration(1+rng.Intn(5)) * time.Minute}
			}
		})
		byNS := quota.Namespaces(w.s.Quota)
		var log []Eviction
		for k := 0; k < 10; k++ {
			w.s.Evictions = log
			p := mustPlanWith(t, w.s, Options{IdleOrder: order})
			nsOf := map[string]string{}
			for _, a := range w.s.Allocations {
				nsOf[a.ID] = a.Namespace
			}
			for _, a := range actionsOf(p, ActionStop) {
				log = append(log, Eviction{Quota: byNS[nsOf[a.Alloc]], GPUs: a.GPUs, Time: w.s.Time})
			}
			now := w.s.Time
			w.apply(p)
			// Every node's window ending at this plan.
			w.s.Quota.Walk(func(n *quota.Node) {
				if n.MaxEvict == nil {
					return
				}
				sum := 0
				for _, e := range log {
					if e.Time.After(now.Add(-n.MaxEvict.Per)) && inSubtree(n, e.Quota) {
						sum += e.GPUs
					}
				}
				if sum > n.MaxEvict.GPUs {
					t.Errorf("seed %d plan %d: %s stopped %d GPUs within %s, budget %d", seed, k, n.Name, sum, n.MaxEvict.Per, n.MaxEvict.GPUs)
				}
			})
		}
	}
}

// inSubtree reports whether the node named name is n or below it.
func inSubtree(n *quota.Node, name string) bool {
	found := false
	n.Walk(func(x *quota.Node) { found = found || x.Name == name })
	return found
}

// BenchmarkFairGiveBack: rule L14.fair at scale. n nodes of 8 GPUs, each
// full with four 2-GPU idle allocations of team B (borrowing all but 2 of
// Quota1's n x 8), and team C's elastic idle job of 200 allocations of 2
// GPUs: every one of them is placed by L14.fair (docs/benchmarks.md).
func BenchmarkFairGiveBack(b *testing.B) {
	for _, n := range []int{500, 5000} {
		tree := givebackTree()
		tree.GPUs = quota.Plain(n * 8)
		bld := newSnap(tree).nodes(n, 8, h100).settings(0, time.Hour)
		for ni := 1; ni <= n; ni++ {
			for k := 0; k < 4; k++ {
				bld.alloc(fmt.Sprintf("b%05d-%d", ni, k), "workspace-b", "elastic-b", fmt.Sprintf("node-%02d", ni), 2, idle, elastic,
					started(time.Duration(ni*4+k)*time.Second))
			}
		}
		s := bld.pending("workspace-c", "elastic-c", 200, 2, pIdle, pType(JobBatch), func(p *Pending) { p.Elastic = true }).build()
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := Compute(s)
				if err != nil || admittedCount(p) != 200 || len(stops(p)) != 200 {
					b.Fatalf("unexpected plan: %v, %d admitted, %d stops", err, admittedCount(p), len(stops(p)))
				}
			}
		})
	}
}

// TestEvictionBudgetPriority: L5.3's stops keep the node's budget, both
// as L6 sets (no GPU free: the high-priority job of 2 runs 1 within a
// budget of 1 and the other waits, naming it) and as the restore of the
// node's nominal when the GPUs are free (placeWhole: the whole job waits
// when its stops would take the budget over). Budget 2 lets both run.
func TestEvictionBudgetPriority(t *testing.T) {
	for _, tc := range []struct {
		name          string
		gpus, budget  int
		stops, admits int
		reason        string
	}{
		{"L6 sets, budget 1", 4, 1, 1, 1, "Q: 1 of 1 GPUs evicted in the last 5m"},
		{"L6 sets, budget 2", 4, 2, 2, 2, ""},
		{"restore, budget 1", 8, 1, 0, 0, "not within the eviction budgets: Q: 0 of 1 GPUs evicted in the last 5m"},
		{"restore, budget 2", 8, 2, 2, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree := &quota.Node{Name: "Q", GPUs: quota.Plain(4), PriorityPreemption: true, Namespaces: []string{"ns"},
				MaxEvict: &quota.EvictBudget{GPUs: tc.budget, Per: 5 * time.Minute}}
			b := newSnap(tree).nodes(1, tc.gpus, h100).settings(0, time.Hour)
			for i := 1; i <= 4; i++ {
				b.alloc(fmt.Sprintf("low%d", i), "ns", fmt.Sprintf("low%d", i), "node-01", 1, priority(10))
			}
			p := mustPlan(t, b.pending("ns", "high", 2, 1, pPriority(90)).build())
			if got := len(stops(p)); got != tc.stops {
				t.Errorf("%d stops %v, want %d", got, stops(p), tc.stops)
			}
			if got := admittedCount(p); got != tc.admits {
				t.Errorf("%d admitted, want %d", got, tc.admits)
			}
			if w := actionsOf(p, ActionWait); tc.reason != "" && (len(w) != 1 || !strings.Contains(w[0].Reason, tc.reason)) {
				t.Errorf("waits %+v, want one with %q", w, tc.reason)
			}
		})
	}
}

// TestFairAndBudgetsMeetBookings: rule L14.fair and eviction budgets
// against an active booking (DESIGN L10, L14). A budget of 0 on Quota1.1
// refuses C's non-idle claim its L5.1 stops, but never a job of an active
// reservation of Quota1.2; and L14.fair never takes the booking's own
// idle allocation.
func TestFairAndBudgetsMeetBookings(t *testing.T) {
	start := t0.Add(-time.Minute)
	build := func(reserved bool) *Snapshot {
		b := fairSnap()
		b.s.Pending = nil
		b.booking("r-c", "workspace-c", "Quota1.2", 2, start, start.Add(time.Hour))
		p := Pending{Namespace: "workspace-c", Job: "train", Group: "g", Type: JobBatch, Priority: 50, Count: 2, GPUs: 1,
			NodePool: "default", SubmittedAt: t0}
		if reserved {
			p.Reservation = "r-c"
		}
		s := b.build()
		s.Pending = []Pending{p}
		s.Quota.Children[0].MaxEvict = &quota.EvictBudget{GPUs: 0, Per: 5 * time.Minute}
		return s
	}
	if p := mustPlan(t, build(false)); len(stops(p)) != 0 || admittedCount(p) != 0 {
		t.Errorf("plain job: stops %v, %d admitted; want the budget to refuse both", stops(p), admittedCount(p))
	}
	p := mustPlan(t, build(true))
	if len(stops(p)) != 2 || admittedCount(p) != 2 {
		t.Errorf("the booking's job: stops %v, %d admitted; want 2 and 2, the budget never refusing it", stops(p), admittedCount(p))
	}
	// The booking's own idle allocation is never a victim of L14.fair.
	b := newSnap(givebackTree()).nodes(1, 8, h100).settings(0, time.Hour).
		booking("r-b", "workspace-b", "Quota1.1", 8, start, start.Add(time.Hour))
	for i := 1; i <= 8; i++ {
		b.alloc(fmt.Sprintf("b%d", i), "workspace-b", "booked", "node-01", 1, idle, elastic, reservation("r-b"))
	}
	if p := mustPlan(t, b.pending("workspace-c", "x", 2, 1, pIdle).build()); len(stops(p)) != 0 {
		t.Errorf("stops %v of an active booking's allocations, want none", stops(p))
	}
}
