package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/google/go-cmp/cmp"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// Issue 8, item 5: placing a claimant of many allocations by preemption
// (DESIGN L6, one allocation at a time) stays near-linear in the snapshot.

// heldSnapshot is the case, scaled: nodes nodes of 8 H100s, every
// GPU held by a one-GPU batch allocation of team B or C training (idle
// every tenth), and one entitled service of team A asking for count
// one-GPU allocations (Quota1 has every GPU, with child-level preemption).
// At 6,250 nodes and count 6,000 it is the 50,000-allocation snapshot of
// the issue (command's clusterJSON(6250, 50000, 6000)).
func heldSnapshot(nodes, count int) *Snapshot {
	gpus := 8 * nodes
	s := &Snapshot{Time: t0, Nodes: benchNodes(nodes),
		Quota: &quota.Node{Name: "Quota1", GPUs: quota.Plain(gpus), ChildPreemption: true, Namespaces: []string{"workspace-a"},
			Children: []*quota.Node{
				{Name: "Quota1.1", GPUs: quota.Plain(gpus * 3 / 8), Namespaces: []string{"workspace-b"}},
				{Name: "Quota1.2", GPUs: quota.Plain(gpus - gpus*3/8), Namespaces: []string{"workspace-c"}},
			}},
		Settings: quota.Settings{MinRuntime: 0, DebtGrace: 10 * time.Minute}}
	s.Allocations = make([]Allocation, 0, gpus)
	for k := 0; k < gpus; k++ {
		n, g := k/8, k%8
		s.Allocations = append(s.Allocations, Allocation{ID: fmt.Sprintf("alloc-%07d", k),
			Namespace: []string{"workspace-b", "workspace-c"}[k%2], Job: fmt.Sprintf("train-%d", k), Group: "worker",
			Type: JobBatch, Priority: 50, Node: s.Nodes[n].ID, GPUIDs: []string{s.Nodes[n].GPUs[g].ID},
			Idle: k%10 == 0, StartedAt: t0.Add(-time.Hour + time.Duration(k%60)*time.Minute)})
	}
	s.Pending = []Pending{{Namespace: "workspace-a", Job: "chat", Group: "server", Type: JobService, Priority: 80,
		Count: count, GPUs: 1, Datacenters: []string{"dc1"}, NodePool: "default", SubmittedAt: t0.Add(-time.Minute)}}
	return s
}

// mixedSnapshot is a random, valid, larger snapshot for comparing plans:
// nodes client nodes of 4 or 8 GPUs of two models (a few unhealthy),
// almost every GPU held by allocations of 1-8 GPUs of service and batch
// jobs (batch jobs spanning many nodes, some elastic, some idle, some in a
// reservation), debt (a lowered child), priority and child-level
// preemption, min_runtime, and pending jobs of up to 40 allocations, some
// flex (admitted whole or not at all).
func mixedSnapshot(seed uint64, nodes int) *Snapshot {
	r := rand.New(rand.NewPCG(seed, 11))
	gpus := 0
	s := &Snapshot{Time: t0, Settings: quota.Settings{MinRuntime: time.Duration(r.IntN(3)) * 10 * time.Minute,
		DebtGrace: 10 * time.Minute}}
	for i := 0; i < nodes; i++ {
		n := Node{ID: fmt.Sprintf("n%04d", i), Datacenter: []string{"dc1", "dc2"}[r.IntN(2)], NodePool: "default"}
		model := models[r.IntN(len(models))]
		size := []int{4, 8, 8}[r.IntN(3)]
		for g := 0; g < size; g++ {
			n.GPUs = append(n.GPUs, GPU{ID: fmt.Sprintf("n%04d-g%d", i, g), Model: model, Healthy: r.IntN(40) != 0})
		}
		gpus += size
		s.Nodes = append(s.Nodes, n)
	}
	s.Quota = &quota.Node{Name: "root", GPUs: quota.Plain(gpus), ChildPreemption: true, Namespaces: []string{"a"},
		Children: []*quota.Node{
			{Name: "b", GPUs: quota.Plain(gpus * 3 / 8), PriorityPreemption: true, Namespaces: []string{"b"},
				Children: []*quota.Node{{Name: "b1", GPUs: quota.Plain(gpus / 8), Namespaces: []string{"b1"}, ChangedAt: t0.Add(-time.Hour)}}},
			{Name: "c", GPUs: quota.Plain(gpus * 3 / 8), ChildPreemption: true, PriorityPreemption: true, Namespaces: []string{"c"},
				Children: []*quota.Node{{Name: "c1", GPUs: quota.Plain(gpus / 8), Namespaces: []string{"c1"}}}},
		}}
	ns := []string{"a", "b", "b1", "c", "c1", "outside"}
	types := []JobType{JobService, JobBatch, JobBatch, JobSystem}
	id := 0
	jobs := map[string]Allocation{}
	for _, n := range s.Nodes {
		free := len(n.GPUs)
		for free > 0 && r.IntN(12) != 0 {
			g := min(free, []int{1, 1, 2, 4, 8}[r.IntN(5)])
			id++
			space := ns[r.IntN(len(ns))]
			job := fmt.Sprintf("%s-job%d", space, r.IntN(nodes/4+1))
			a, ok := jobs[job]
			if !ok { // job-level facts are shared by the job's allocations
				a = Allocation{Namespace: space, Job: job, Group: "g", Type: types[r.IntN(len(types))],
					Priority: 10 * (r.IntN(9) + 1), Idle: r.IntN(5) == 0, Elastic: r.IntN(5) == 0}
				jobs[job] = a
			}
			a.ID, a.Node, a.StartedAt = fmt.Sprintf("a%06d", id), n.ID, t0.Add(-time.Duration(r.IntN(300))*time.Minute)
			if r.IntN(30) == 0 {
				a.Reservation = "r1"
			}
			for k := 0; k < g; k++ {
				a.GPUIDs = append(a.GPUIDs, n.GPUs[len(n.GPUs)-free+k].ID)
			}
			free -= g
			s.Allocations = append(s.Allocations, a)
		}
	}
	s.Reservations = []Reservation{{ID: "r1", Namespace: "a", Quota: "root", GPUs: 1,
		Start: t0.Add(-time.Hour), End: t0.Add(time.Hour)}}
	// b1 lowered below its usage: debt, past its grace (L9).
	used := 0
	for _, a := range s.Allocations {
		if a.Namespace == "b1" && !a.Idle {
			used += len(a.GPUIDs)
		}
	}
	s.Quota.Children[0].Children[0].GPUs = quota.Plain(max(0, min(gpus/8, used-8)))
	for i := 0; i < 12+r.IntN(8); i++ {
		p := Pending{Namespace: []string{"a", "a", "b", "b1", "c", "c", "c1"}[r.IntN(7)], Job: fmt.Sprintf("p%d", i), Group: "g",
			Type: []JobType{JobService, JobBatch}[r.IntN(2)], Priority: 10*(r.IntN(9)+1) + 5,
			Count: 1 + r.IntN(40), GPUs: []int{1, 1, 2, 4, 8}[r.IntN(5)], Idle: r.IntN(6) == 0,
			SubmittedAt: t0.Add(-time.Duration(r.IntN(600)) * time.Minute)}
		if r.IntN(3) == 0 {
			p.Model = models[r.IntN(len(models))]
		}
		if r.IntN(3) == 0 {
			p.Datacenters = []string{"dc1"}
		}
		if !p.Idle && r.IntN(4) == 0 {
			p.Flex = &Flex{MaxWait: time.Duration(r.IntN(12)+1) * time.Hour, MaxRun: time.Duration(r.IntN(4)) * time.Hour}
		}
		s.Pending = append(s.Pending, p)
	}
	return s
}

// planHash is the SHA-256 of a plan's JSON, to compare plans byte for
// byte.
func planHash(t testing.TB, s *Snapshot, o IdleOrder) (string, *Plan) {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatalf("the generated snapshot is invalid: %v", err)
	}
	p, err := ComputeWith(s, Options{IdleOrder: o})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), p
}

// TestLargePlansAsBeforeTheVictimCache compares large plans with the ones
// the planner made before it kept victim sets between the allocations of
// one claimant (commit 99e24e5, which searched every node again for each
// allocation): same bytes. The hashes were recorded again when the
// Calendar core (reservations, holds, flex rules, wake_at) changed the plans
// themselves; TestVictimCacheMatchesScan confirmed then that the cached and
// the scanning search still give the same bytes. Seed 2's hash changed
// once more for text alone: one idle wait's "1 free GPUs" became "1 free
// GPU" (its JSON diff was that one reason). Seed 1's changed with issue 16's
// L9 sentence (a stopped allocation leaves debt at once): its JSON diff was
// the debt of b1 (190 non-idle of 194 after the plan's stops), b and root,
// 10 before and 0 now; every action stayed as it was. The mixed seeds' hashes
// changed again when a plan's warnings became objects (Warning: kind,
// namespace, message; issue 16): their actions, usage, wake_at, idle fit
// and number of warnings were compared with the plans before and are the
// same. With both of issue 16's core changes merged, seeds 2-4 keep the
// warnings-only hashes and seed 1 combines its debt diff with them. Since
// DESIGN L14 the planner's default order is IdleOrderFair: the L3 hashes
// stay as recorded (the planner under IdleOrderL3 is unchanged), and the
// fair ones were recorded when rule L14.fair landed; each differs from
// its L3 plan only in the idle jobs' order, their admissions and the
// stops of rule L14.fair (TestLargePlansFairDiffersOnlyInIdleWork).
func TestLargePlansAsBeforeTheVictimCache(t *testing.T) {
	golden := []struct {
		name  string
		s     *Snapshot
		stops int
		hash  string // under IdleOrderL3, as recorded before DESIGN L14
		fair  string // under IdleOrderFair (Compute's since rule L14.fair)
	}{
		{"held 200 nodes, admit 700", heldSnapshot(200, 700), 700, "03048c81f0896f934f332812c669036d387ddb7c3e30c7516af5d49d2eb4648d", "03048c81f0896f934f332812c669036d387ddb7c3e30c7516af5d49d2eb4648d"},
		{"mixed seed 1, 300 nodes", mixedSnapshot(1, 300), -1, "6c01fad12971a1e716ee201e60794f57a3d21b9adf3e6abe1854330cf14d2af5", "6c01fad12971a1e716ee201e60794f57a3d21b9adf3e6abe1854330cf14d2af5"},
		{"mixed seed 2, 300 nodes", mixedSnapshot(2, 300), -1, "c3b2c1510254676fa331aa8750ffc73562d71f694e775837c7338a4e046e50ad", "440037c855d2689ed1b2d36d574c448cfd336833c0b5836fe9f2b197029c6a36"},
		{"mixed seed 3, 500 nodes", mixedSnapshot(3, 500), -1, "18b49a308aa4da43c5906371a1b7f66962bbf0cf0546e908268087e1eb947abd", "9ac0809e7fc880592fb8ea0248a54d149b476b07a44228f6572c83c1eda059b2"},
		{"mixed seed 4, 500 nodes", mixedSnapshot(4, 500), -1, "a6e6fcc8e17eeb0a5c37e574846f44fe6246e2b4c08b0ef030b1c80db0227918", "5fca5252bf0d6aca8a85310258f9926544a03a3030be3921abd445bb914739c7"},
	}
	for _, g := range golden {
		t.Run(g.name, func(t *testing.T) {
			for _, o := range []IdleOrder{IdleOrderL3, IdleOrderFair} {
				hash, p := planHash(t, g.s, o)
				n := len(actionsOf(p, ActionStop))
				if g.stops >= 0 && n != g.stops {
					t.Errorf("%s: %d stops, want %d", o, n, g.stops)
				}
				t.Logf("%s: %d actions, %d stops, %d admits", o, len(p.Actions), n, len(actionsOf(p, ActionAdmit)))
				if want := map[IdleOrder]string{IdleOrderL3: g.hash, IdleOrderFair: g.fair}[o]; hash != want {
					t.Errorf("%s: plan hash %s, want %s", o, hash, want)
				}
			}
		})
	}
}

// computeWith is Compute with the victim cache on, or off (scan: every
// node searched for every allocation, as before the cache), and the number
// of node searches made.
func computeWith(t testing.TB, s *Snapshot, scan bool) (*Plan, int) {
	t.Helper()
	if err := quota.Validate(s.Quota); err != nil {
		t.Fatal(err)
	}
	p := newPlanner(s, new(buffers))
	defer p.vc.forget()
	p.scanVictims = scan
	return p.run(), p.victimEvals
}

// TestVictimCacheMatchesScan: with the victim cache, every plan of the
// property corpus (2,000 seeds) and of 60 larger mixed snapshots is the
// same, byte for byte, as with every node searched for every allocation;
// and Compute is computeWith.
func TestVictimCacheMatchesScan(t *testing.T) {
	cached := 0 // plans where a claim's later allocation used the cache
	check := func(name string, s *Snapshot) {
		t.Helper()
		p, evals := computeWith(t, s, false)
		want, scans := computeWith(t, s, true)
		b1, _ := json.Marshal(p)
		b2, _ := json.Marshal(want)
		if string(b1) != string(b2) {
			t.Fatalf("%s: the plan with the victim cache differs from the scan:\n%s\n%s", name, b1, b2)
		}
		if evals < scans {
			cached++
		}
	}
	for seed := uint64(0); seed < 2000; seed++ {
		check(fmt.Sprintf("property seed %d", seed), randomSnapshot(rand.New(rand.NewPCG(seed, 7))))
	}
	for seed := uint64(0); seed < 60; seed++ {
		check(fmt.Sprintf("mixed seed %d", seed), mixedSnapshot(seed, 40+int(seed)))
	}
	// Drains and pre-warms (their claims search victims too).
	for seed := uint64(0); seed < 500; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		if s := withCalendar(randomSnapshot(r), r); s.Validate() == nil {
			check(fmt.Sprintf("calendar seed %d", seed), s)
		}
	}
	if cached < 50 {
		t.Errorf("only %d plans searched fewer nodes with the cache: the corpus no longer tests it", cached)
	}
	s := mixedSnapshot(5, 100)
	p, _ := computeWith(t, s, false)
	got, err := Compute(s)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := json.Marshal(p)
	b2, _ := json.Marshal(got)
	if string(b1) != string(b2) {
		t.Errorf("Compute differs from computeWith:\n%s\n%s", b2, b1)
	}
}

// TestManyAllocationAdmitSearchesLinearly: an admit of n allocations, each
// placed by preemption on a cluster of n full nodes (as the 6,000
// on 6,250), searches
// about one node per allocation plus each node once: 4 times the cluster
// and the admit cost about 4 times the node searches, not 16 (as they did
// when every node was searched for every allocation, checked too so that
// the test can fail).
func TestManyAllocationAdmitSearchesLinearly(t *testing.T) {
	evals := func(nodes int, scan bool) int {
		s := heldSnapshot(nodes, nodes)
		p, n := computeWith(t, s, scan)
		if got := len(actionsOf(p, ActionStop)); got != nodes {
			t.Fatalf("%d nodes: %d stops, want %d", nodes, got, nodes)
		}
		return n
	}
	small, large := evals(50, false), evals(200, false)
	t.Logf("node searches: %d for 50 nodes, %d for 200 (%.1fx)", small, large, float64(large)/float64(small))
	if large > 5*small {
		t.Errorf("node searches grew %.1fx for 4x the input (%d, then %d); want at most 5x", float64(large)/float64(small), small, large)
	}
	if limit := 3 * (200 + 200); large > limit {
		t.Errorf("%d node searches for 200 nodes and 200 allocations; want at most %d", large, limit)
	}
	scanSmall, scanLarge := evals(50, true), evals(200, true)
	if scanLarge < 12*scanSmall {
		t.Errorf("without the cache node searches grew only %.1fx (%d, then %d): the measure no longer shows quadratic growth",
			float64(scanLarge)/float64(scanSmall), scanSmall, scanLarge)
	}
}

// TestLargePlansFairDiffersOnlyInIdleWork: on the large golden snapshots,
// the plan under IdleOrderFair (DESIGN L14) and under IdleOrderL3 make
// the same actions for all non-idle work, in the same order: L14 changes
// only the idle jobs' admissions and waits and adds stops of rule
// L14.fair (non-idle work is decided first, the same way, in both).
func TestLargePlansFairDiffersOnlyInIdleWork(t *testing.T) {
	for seed, nodes := range map[uint64]int{1: 300, 2: 300, 3: 500, 4: 500} {
		s := mixedSnapshot(seed, nodes)
		idleGroup := map[GroupKey]bool{}
		for _, g := range s.Pending {
			idleGroup[g.Key()] = g.Idle
		}
		nonIdle := func(p *Plan) []Action {
			var out []Action
			for _, a := range p.Actions {
				if a.Rule == RuleFair || idleGroup[GroupKey{Namespace: a.Namespace, Job: a.Job, Group: a.Group}] && a.Action != ActionStop {
					continue
				}
				out = append(out, a)
			}
			return out
		}
		l3 := mustPlanWith(t, s, Options{IdleOrder: IdleOrderL3})
		fair := mustPlanWith(t, s, Options{IdleOrder: IdleOrderFair})
		if d := cmp.Diff(nonIdle(l3), nonIdle(fair)); d != "" {
			t.Errorf("seed %d: non-idle actions differ (-L3 +fair):\n%s", seed, d)
		}
		if len(actionsOf(fair, ActionStop)) < len(actionsOf(l3, ActionStop)) {
			t.Errorf("seed %d: fewer stops under L14 than under L3", seed)
		}
	}
}
