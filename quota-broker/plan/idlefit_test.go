package plan

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/quota"
)

// idleGroup returns an idle group "train" of job in ns: gpus GPUs per
// allocation, priority 50, dc1/default, count and max as given.
func idleGroup(ns, job string, gpus, count, max int, opts ...func(*IdleGroup)) IdleGroup {
	g := IdleGroup{Namespace: ns, Job: job, Group: "train", Priority: 50, GPUs: gpus,
		Datacenters: []string{"dc1"}, NodePool: "default", Count: count, Max: max}
	for _, o := range opts {
		o(&g)
	}
	return g
}

func igPriority(n int) func(*IdleGroup) { return func(g *IdleGroup) { g.Priority = n } }

func fit(ns, job string, n int) GroupFit {
	return GroupFit{Namespace: ns, Job: job, Group: "train", Fit: n}
}

func mustFit(t *testing.T, s *Snapshot) []GroupFit {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	got, err := IdleFit(s)
	if err != nil {
		t.Fatalf("IdleFit: %v", err)
	}
	return got
}

// Two groups share 12 free GPUs in L3 order: the higher priority one (in
// workspace-c, after workspace-b by name) first, up to its max, the other
// gets what is left; once those allocations are placed both fits are 0.
func TestIdleFitSplitsInL3Order(t *testing.T) {
	b := newSnap(referenceTree()).nodes(2, 8, h100).alloc("a1", "workspace-a", "chat", "node-02", 4)
	b.s.IdleGroups = []IdleGroup{
		idleGroup("workspace-b", "low", 4, 1, 10, igPriority(40)),
		idleGroup("workspace-c", "high", 4, 1, 3, igPriority(60)),
	}
	want := []GroupFit{fit("workspace-b", "low", 1), fit("workspace-c", "high", 2)}
	if diff := cmp.Diff(want, mustFit(t, b.build())); diff != "" {
		t.Fatalf("IdleFit (-want +got):\n%s", diff)
	}
	p := mustPlan(t, b.build())
	if diff := cmp.Diff(want, p.IdleFit); diff != "" {
		t.Fatalf("Plan.IdleFit (-want +got):\n%s", diff)
	}
	if n, ok := p.IdleFitOf(key("workspace-c/high/train")); n != 2 || !ok {
		t.Fatalf("IdleFitOf(high) = %d, %v; want 2, true", n, ok)
	}
	if n, ok := p.IdleFitOf(key("workspace-c/other/train")); n != 0 || ok {
		t.Fatalf("IdleFitOf(unknown) = %d, %v; want 0, false", n, ok)
	}

	// The autoscaler scaled both: high to 3 and low to 2, all placed.
	b.alloc("h1", "workspace-c", "high", "node-01", 4, idle, elastic).
		alloc("h2", "workspace-c", "high", "node-01", 4, idle, elastic).
		alloc("l1", "workspace-b", "low", "node-02", 4, idle, elastic)
	b.s.IdleGroups[0].Count, b.s.IdleGroups[1].Count = 2, 3
	want = []GroupFit{fit("workspace-b", "low", 0), fit("workspace-c", "high", 0)}
	if diff := cmp.Diff(want, mustPlan(t, b.build()).IdleFit); diff != "" {
		t.Fatalf("placed: Plan.IdleFit (-want +got):\n%s", diff)
	}
}

// The fit is at most max - count; a count above max gives 0.
func TestIdleFitRespectsMax(t *testing.T) {
	b := newSnap(referenceTree()).nodes(4, 8, h100)
	b.s.IdleGroups = []IdleGroup{
		idleGroup("workspace-b", "one", 1, 3, 5),
		idleGroup("workspace-b", "over", 1, 6, 4),
		idleGroup("workspace-c", "at", 2, 7, 7),
	}
	want := []GroupFit{fit("workspace-b", "one", 2), fit("workspace-b", "over", 0), fit("workspace-c", "at", 0)}
	if diff := cmp.Diff(want, mustFit(t, b.build())); diff != "" {
		t.Fatalf("IdleFit (-want +got):\n%s", diff)
	}
}

// Unhealthy GPUs are never free: a node with 4 of 8 unhealthy fits one
// 4-GPU allocation, not two.
func TestIdleFitIgnoresUnhealthyGPUs(t *testing.T) {
	b := newSnap(referenceTree()).nodes(1, 8, h100)
	for g := 4; g < 8; g++ {
		b.s.Nodes[0].GPUs[g].Healthy = false
	}
	b.s.IdleGroups = []IdleGroup{idleGroup("workspace-c", "train", 4, 1, 10)}
	if diff := cmp.Diff([]GroupFit{fit("workspace-c", "train", 1)}, mustPlan(t, b.build()).IdleFit); diff != "" {
		t.Fatalf("Plan.IdleFit (-want +got):\n%s", diff)
	}
}

// Bin-packing as admission does: a 2-GPU allocation goes to the node with
// the fewest free GPUs that fit, leaving the whole node to the 8-GPU group
// after it.
func TestIdleFitBinPacks(t *testing.T) {
	b := newSnap(referenceTree()).nodes(2, 8, h100).alloc("a1", "workspace-a", "chat", "node-01", 6)
	b.s.IdleGroups = []IdleGroup{
		idleGroup("workspace-b", "small", 2, 1, 2, igPriority(60)),
		idleGroup("workspace-c", "big", 8, 1, 5),
	}
	want := []GroupFit{fit("workspace-b", "small", 1), fit("workspace-c", "big", 1)}
	if diff := cmp.Diff(want, mustFit(t, b.build())); diff != "" {
		t.Fatalf("IdleFit (-want +got):\n%s", diff)
	}
}

// The fit counts after the plan's own actions: GPUs admitted to a pending
// job, and GPUs freed for a claimant, are not free. A group of a namespace
// bound to no quota is not governed: 0.
func TestIdleFitAfterPlanActions(t *testing.T) {
	b := newSnap(referenceTree()).nodes(2, 8, h100).pending("workspace-a", "chat", 1, 4)
	b.s.IdleGroups = []IdleGroup{idleGroup("workspace-c", "train", 4, 1, 10), idleGroup("elsewhere", "train", 1, 1, 10)}
	before := []GroupFit{fit("elsewhere", "train", 0), fit("workspace-c", "train", 4)}
	if diff := cmp.Diff(before, mustFit(t, b.build())); diff != "" {
		t.Fatalf("IdleFit before the plan (-want +got):\n%s", diff)
	}
	after := []GroupFit{fit("elsewhere", "train", 0), fit("workspace-c", "train", 3)}
	if diff := cmp.Diff(after, mustPlan(t, b.build()).IdleFit); diff != "" {
		t.Fatalf("Plan.IdleFit (-want +got):\n%s", diff)
	}

	// Both nodes full of idle work; an entitled 8-GPU job stops one node's
	// idle allocations: those GPUs go to the claimant, none to idle fit.
	b = newSnap(referenceTree()).nodes(2, 8, h100).
		alloc("i1", "workspace-b", "idle1", "node-01", 8, idle).
		alloc("i2", "workspace-b", "idle2", "node-02", 8, idle).
		pending("workspace-a", "chat", 1, 8)
	b.s.IdleGroups = []IdleGroup{idleGroup("workspace-c", "train", 1, 1, 10)}
	p := mustPlan(t, b.build())
	if got := stops(p); len(got) != 1 {
		t.Fatalf("stops = %v; want one", got)
	}
	if diff := cmp.Diff([]GroupFit{fit("workspace-c", "train", 0)}, p.IdleFit); diff != "" {
		t.Fatalf("Plan.IdleFit with a stop (-want +got):\n%s", diff)
	}
}

func TestIdleGroupValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*IdleGroup)
		want string
	}{
		{"empty job", func(g *IdleGroup) { g.Job = "" }, `idle_groups[1].job: must not be empty`},
		{"twice", func(g *IdleGroup) { g.Job = "a" }, `idle_groups[1]: group "workspace-c/a/train" is listed twice (also idle_groups[0])`},
		{"priority", func(g *IdleGroup) { g.Priority = 0 }, `idle_groups[1].priority: 0 is outside 1-100`},
		{"gpus", func(g *IdleGroup) { g.GPUs = 0 }, `idle_groups[1].gpus: must be at least 1, not 0`},
		{"max", func(g *IdleGroup) { g.Max = 0 }, `idle_groups[1].max: must be at least 1, not 0`},
		{"count", func(g *IdleGroup) { g.Count = -1 }, `idle_groups[1].count: must be in 0-2147483647, not -1`},
		{"dc", func(g *IdleGroup) { g.Datacenters = []string{"dc1", "dc1"} }, `idle_groups[1].datacenters[1]: datacenter "dc1" is listed twice (also datacenters[0])`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newSnap(referenceTree()).nodes(1, 8, h100)
			g := idleGroup("workspace-c", "b", 1, 1, 2)
			tc.edit(&g)
			b.s.IdleGroups = []IdleGroup{idleGroup("workspace-c", "a", 1, 1, 2), g}
			err := b.build().Validate()
			if err == nil || err.Error() != tc.want || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate = %v; want %s", err, tc.want)
			}
			var f *Fault
			if !errors.As(err, &f) || f.Item != ItemIdleGroup || f.Index != 1 {
				t.Fatalf("fault = %+v; want item idle group, index 1", f)
			}
			u, faults, err := b.build().Usable()
			if err != nil || len(faults) != 1 || len(u.IdleGroups) != 1 || u.IdleGroups[0].Job != "a" {
				t.Fatalf("Usable = %v, %v, %v; want the bad group left out", u.IdleGroups, faults, err)
			}
		})
	}
}

// BenchmarkIdleFit: 1,000 idle groups of 1, 2, 4 and 8 GPUs at 5,000
// nodes of 8 GPUs, half the nodes half used (issue 11: under 5 ms).
func BenchmarkIdleFit(b *testing.B) {
	s := idleFitSnapshot(5000, 1000)
	if err := s.Validate(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		if _, err := IdleFit(s); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}

// cpuTime is the process's user and system CPU time. The benchmarks
// report it per op next to the wall time, which on a shared machine
// counts the time other processes run.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkComputeIdleGroups is Compute on the same snapshot with and
// without its idle groups: the difference is what idle fit adds to a plan.
func BenchmarkComputeIdleGroups(b *testing.B) {
	for _, groups := range []int{0, 1000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			s := idleFitSnapshot(5000, groups)
			b.ReportAllocs()
			cpu := cpuTime()
			for b.Loop() {
				if _, err := Compute(s); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
	}
	// The broker's planner: the idle fit in DESIGN L14's order, each time
	// the group of the lowest borrowed share after it (idleFitAcross).
	b.Run("groups=1000/fair", func(b *testing.B) {
		s := idleFitSnapshot(5000, 1000)
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			if _, err := ComputeFair(s); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu)
	})
}

func idleFitSnapshot(nodes, groups int) *Snapshot {
	s := &Snapshot{Time: t0, Quota: benchTree(8 * nodes), Settings: quota.DefaultSettings(), Nodes: benchNodes(nodes)}
	for i := 0; i < nodes; i += 2 {
		n := s.Nodes[i]
		a := Allocation{ID: fmt.Sprintf("a%05d", i), Namespace: "workspace-b", Job: fmt.Sprintf("job-%d", i), Group: "worker",
			Type: JobBatch, Priority: 50, Node: n.ID, StartedAt: t0}
		for g := 0; g < 4; g++ {
			a.GPUIDs = append(a.GPUIDs, n.GPUs[g].ID)
		}
		s.Allocations = append(s.Allocations, a)
	}
	sizes := []int{1, 2, 4, 8}
	for i := 0; i < groups; i++ {
		s.IdleGroups = append(s.IdleGroups, IdleGroup{Namespace: "workspace-c", Job: fmt.Sprintf("train-%04d", i), Group: "train",
			Priority: 10 + i%50, GPUs: sizes[i%4], Model: h100, Datacenters: []string{"dc1"}, NodePool: "default", Count: 1, Max: 1 + 30})
	}
	return s
}

// naiveIdleFit is the idle fit written the obvious way, as an oracle: for
// each group in L3 order, scan every node for the one with the fewest free
// GPUs of the model that still fit (then the first), and take its first
// free GPUs of the model. s has no pending groups, so the free GPUs are the
// healthy ones no allocation holds. Nodes must be given sorted by ID.
func naiveIdleFit(s *Snapshot) []GroupFit {
	held := map[string]bool{}
	for _, a := range s.Allocations {
		for _, id := range a.GPUIDs {
			held[id] = true
		}
	}
	free := make([][]bool, len(s.Nodes))
	for i, n := range s.Nodes {
		free[i] = make([]bool, len(n.GPUs))
		for k, g := range n.GPUs {
			free[i][k] = g.Healthy && !held[g.ID]
		}
	}
	bound := map[string]bool{}
	s.Quota.Walk(func(q *quota.Node) {
		for _, ns := range q.Namespaces {
			bound[ns] = true
		}
	})
	groups := append([]IdleGroup(nil), s.IdleGroups...)
	sort.SliceStable(groups, func(a, b int) bool {
		if groups[a].Priority != groups[b].Priority {
			return groups[a].Priority > groups[b].Priority
		}
		return groups[a].Key().Compare(groups[b].Key()) < 0
	})
	var out []GroupFit
	for _, g := range groups {
		f := GroupFit{Namespace: g.Namespace, Job: g.Job, Group: g.Group}
		for bound[g.Namespace] && f.Fit < g.Max-g.Count {
			best, bestFree := -1, 0
			for i, n := range s.Nodes {
				if poolOf(n.NodePool) != poolOf(g.NodePool) || (len(g.Datacenters) > 0 && !slices.Contains(g.Datacenters, n.Datacenter)) {
					continue
				}
				c := 0
				for k, gpu := range n.GPUs {
					if free[i][k] && modelMatches(g.Model, gpu.Model) {
						c++
					}
				}
				if c >= g.GPUs && (best < 0 || c < bestFree) {
					best, bestFree = i, c
				}
			}
			if best < 0 {
				break
			}
			left := g.GPUs
			for k, gpu := range s.Nodes[best].GPUs {
				if left > 0 && free[best][k] && modelMatches(g.Model, gpu.Model) {
					free[best][k] = false
					left--
				}
			}
			f.Fit++
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b GroupFit) int { return a.Key().Compare(b.Key()) })
	return out
}

// IdleFit agrees with the oracle on random clusters: mixed models, unhealthy
// GPUs, two datacenters and pools, groups of every shape and priority.
func TestIdleFitMatchesTheNaiveOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 4))
	a100 := "NVIDIA A100-SXM4-40GB"
	for round := range 300 {
		s := &Snapshot{Time: t0, Quota: referenceTree(), Settings: quota.DefaultSettings()}
		for i := range 1 + rng.IntN(12) {
			n := Node{ID: fmt.Sprintf("node-%02d", i), Datacenter: []string{"dc1", "dc2"}[rng.IntN(2)], NodePool: []string{"default", "gpu"}[rng.IntN(2)]}
			mixed := rng.IntN(4) == 0
			model := []string{h100, a100}[rng.IntN(2)]
			for k := range 1 + rng.IntN(8) {
				m := model
				if mixed {
					m = []string{h100, a100}[rng.IntN(2)]
				}
				n.GPUs = append(n.GPUs, GPU{ID: fmt.Sprintf("%s-%d", n.ID, k), Model: m, Healthy: rng.IntN(6) != 0})
			}
			held := rng.IntN(len(n.GPUs) + 1)
			if held > 0 {
				a := Allocation{ID: "a-" + n.ID, Namespace: "workspace-b", Job: "j-" + n.ID, Group: "g", Type: JobBatch, Priority: 50, Node: n.ID, StartedAt: t0}
				for k := 0; k < held; k++ {
					a.GPUIDs = append(a.GPUIDs, n.GPUs[k].ID)
				}
				s.Allocations = append(s.Allocations, a)
			}
			s.Nodes = append(s.Nodes, n)
		}
		for i := range rng.IntN(8) {
			g := IdleGroup{Namespace: []string{"workspace-a", "workspace-b", "workspace-c", "nowhere"}[rng.IntN(4)], Job: fmt.Sprintf("t%d", i), Group: "g",
				Priority: 1 + rng.IntN(3)*20, GPUs: 1 + rng.IntN(4), Max: 1 + rng.IntN(8), Count: rng.IntN(3)}
			if rng.IntN(2) == 0 {
				g.Model = []string{h100, a100}[rng.IntN(2)]
			}
			if rng.IntN(2) == 0 {
				g.Datacenters = []string{[]string{"dc1", "dc2"}[rng.IntN(2)]}
			}
			if rng.IntN(2) == 0 {
				g.NodePool = "gpu"
			}
			s.IdleGroups = append(s.IdleGroups, g)
		}
		want := naiveIdleFit(s)
		got := mustFit(t, s)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round %d: IdleFit differs from the oracle (-want +got):\n%s", round, diff)
		}
		if diff := cmp.Diff(want, mustPlan(t, s).IdleFit); diff != "" {
			t.Fatalf("round %d: Plan.IdleFit differs from the oracle (-want +got):\n%s", round, diff)
		}
	}
}

func TestIdleFitRefusesNoSnapshotAndABadTree(t *testing.T) {
	if _, err := IdleFit(nil); err == nil {
		t.Fatal("IdleFit(nil): no error")
	}
	bad := newSnap(&quota.Node{Name: "Root", GPUs: quota.Plain(4), Children: []*quota.Node{{Name: "A", GPUs: quota.Plain(8)}}}).build()
	if _, err := IdleFit(bad); err == nil {
		t.Fatal("IdleFit with children above their parent (L1): no error")
	}
}
