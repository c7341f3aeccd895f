package plan

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// fullCluster is 4 nodes x 8 GPUs under the reference tree.
func fullCluster() *snapBuilder { return newSnap(referenceTree()).nodes(4, 8, h100) }

func TestL3FreeGPUsPreemptNothing(t *testing.T) {
	// node-01 has 2 free, node-02 8 free, node-03 3 free: bin-packing picks
	// the node with the fewest free GPUs that still fit (node-03 for 3).
	s := fullCluster().
		alloc("b1", "workspace-b", "train", "node-01", 6, idle).
		alloc("c1", "workspace-c", "dev", "node-03", 5).
		alloc("c2", "workspace-c", "fill", "node-04", 8, idle).
		pending("workspace-a", "chat", 1, 3, pPriority(80)).build()
	p := mustPlan(t, s)
	if got := stops(p); len(got) != 0 {
		t.Fatalf("stops = %v, want none", got)
	}
	admits := actionsOf(p, ActionAdmit)
	if len(admits) != 1 || !reflect.DeepEqual(admits[0].Nodes, []string{"node-03"}) || admits[0].Rule != RuleAdmission {
		t.Fatalf("admits = %+v, want one L3 admit on node-03", admits)
	}
}

func TestL3EntitlementAndReasons(t *testing.T) {
	cases := map[string]struct {
		build      func() *Snapshot
		wantAction ActionKind
		wantReason string
		wantQuota  string
	}{
		"a child at its nominal waits with the numbers": {
			build: func() *Snapshot {
				b := newSnap(referenceTree()).nodes(8, 8, h100)
				for i := 1; i <= 6; i++ {
					b.alloc("b"+string(rune('0'+i)), "workspace-b", "t"+string(rune('0'+i)), nodeID(i), 8)
				}
				return b.pending("workspace-b", "big", 1, 8, pType(JobBatch)).build()
			},
			wantAction: ActionWait,
			wantReason: "Quota1.1: 48 of 48 GPUs in use; 8 more needed",
			wantQuota:  "Quota1.1",
		},
		"idle usage never blocks an entitled job": {
			build: func() *Snapshot {
				b := newSnap(referenceTree()).nodes(8, 8, h100)
				for i := 1; i <= 8; i++ {
					b.alloc("b"+string(rune('0'+i)), "workspace-b", "t"+string(rune('0'+i)), nodeID(i), 8, idle)
				}
				return b.pending("workspace-b", "big", 1, 8, pType(JobBatch)).build()
			},
			wantAction: ActionAdmit,
		},
		"all groups of a job are decided together": {
			build: func() *Snapshot {
				b := newSnap(referenceTree()).nodes(8, 8, h100)
				for i := 1; i <= 5; i++ {
					b.alloc("b"+string(rune('0'+i)), "workspace-b", "t"+string(rune('0'+i)), nodeID(i), 8)
				}
				// 8 GPUs left in Quota1.1; two groups of 8 make 16.
				return b.pending("workspace-b", "two", 1, 8, pGroup("a")).
					pending("workspace-b", "two", 1, 8, pGroup("b")).build()
			},
			wantAction: ActionWait,
			wantReason: "Quota1.1: 40 of 48 GPUs in use; 8 more needed for 16 asked",
			wantQuota:  "Quota1.1",
		},
		"an ancestor's limit excludes debt but counts siblings": {
			build: func() *Snapshot {
				tree := &quota.Node{Name: "root", GPUs: quota.Plain(16), Children: []*quota.Node{
					{Name: "x", GPUs: quota.Plain(8), Namespaces: []string{"ns-x"}},
					{Name: "y", GPUs: quota.Plain(8), Namespaces: []string{"ns-y"}},
				}, Namespaces: []string{"ns-root"}}
				return newSnap(tree).nodes(4, 8, h100).
					alloc("r1", "ns-root", "own", "node-01", 8).
					alloc("y1", "ns-y", "t", "node-02", 4).
					pending("ns-x", "j", 1, 8).build()
			},
			wantAction: ActionWait,
			wantReason: "root (above x): 12 of 16 GPUs in use, debt excluded; 4 more needed for 8 asked",
			wantQuota:  "root",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := mustPlan(t, tc.build())
			var decided []Action
			for _, a := range p.Actions {
				if a.Action == ActionAdmit || a.Action == ActionWait {
					decided = append(decided, a)
				}
			}
			if len(decided) == 0 || decided[0].Action != tc.wantAction {
				t.Fatalf("actions = %+v, want %s", p.Actions, tc.wantAction)
			}
			if tc.wantReason != "" && decided[0].Reason != tc.wantReason {
				t.Fatalf("reason = %q, want %q", decided[0].Reason, tc.wantReason)
			}
			// The quota that binds an L3 wait, as a field (the simulator's
			// report counts waits by it).
			if decided[0].Quota != tc.wantQuota {
				t.Fatalf("quota = %q, want %q", decided[0].Quota, tc.wantQuota)
			}
		})
	}
}

func nodeID(i int) string { return "node-0" + string(rune('0'+i)) }

func TestL5OnlyTheMinimalVictimSet(t *testing.T) {
	// node-01 holds four idle 2-GPU allocations; a 4-GPU claimant needs two.
	s := newSnap(referenceTree()).nodes(1, 8, h100).
		alloc("i1", "workspace-b", "j1", "node-01", 2, idle, started(4*time.Hour)).
		alloc("i2", "workspace-b", "j2", "node-01", 2, idle, started(3*time.Hour)).
		alloc("i3", "workspace-b", "j3", "node-01", 2, idle, started(2*time.Hour)).
		alloc("i4", "workspace-b", "j4", "node-01", 2, idle, started(1*time.Hour)).
		pending("workspace-b", "claim", 1, 4).build()
	p := mustPlan(t, s)
	// The most recently started go first (least work lost).
	if got, want := stops(p), []string{"i4", "i3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("stops = %v, want %v", got, want)
	}
	for _, a := range actionsOf(p, ActionStop) {
		if a.Rule != RuleIdleDebt || a.For != key("workspace-b/claim/server") {
			t.Fatalf("stop %+v: want rule L5.1 for workspace-b/claim/server", a)
		}
	}
}

func TestL5ReverseDropRemovesUnneededVictims(t *testing.T) {
	// Key order takes the 1-GPU i1 (lowest priority) first, then the
	// 4-GPU i2, which alone is enough: i1 is dropped.
	s := newSnap(referenceTree()).nodes(1, 5, h100).
		alloc("i1", "workspace-b", "j1", "node-01", 1, idle, priority(10)).
		alloc("i2", "workspace-b", "j2", "node-01", 4, idle, priority(20)).
		pending("workspace-b", "claim", 1, 4).build()
	p := mustPlan(t, s)
	if got := stops(p); !reflect.DeepEqual(got, []string{"i2"}) {
		t.Fatalf("stops = %v, want [i2]", got)
	}
}

func TestL6LowerPriorityIdleJobIsTheOneStopped(t *testing.T) {
	build := func() *Snapshot {
		return newSnap(referenceTree()).nodes(2, 8, h100).
			alloc("hi", "workspace-b", "idle-hi", "node-01", 8, idle, priority(40)).
			alloc("lo", "workspace-c", "idle-lo", "node-02", 8, idle, priority(20)).
			pending("workspace-a", "chat", 1, 8, pPriority(80)).build()
	}
	for i := 0; i < 20; i++ {
		p := mustPlan(t, build())
		if got := stops(p); !reflect.DeepEqual(got, []string{"lo"}) {
			t.Fatalf("run %d: stops = %v, want [lo]", i, got)
		}
		if a := actionsOf(p, ActionAdmit); len(a) != 1 || a[0].Nodes[0] != "node-02" {
			t.Fatalf("run %d: admits = %+v, want node-02", i, a)
		}
	}
}

func TestL6SpreadFreeGPUsDoNotMakeRoom(t *testing.T) {
	// 8 nodes each with 1 free GPU and 7 held by idle jobs: 8 free GPUs in
	// all, but an 8-GPU allocation needs one node: victims on one node.
	b := newSnap(referenceTree()).nodes(8, 8, h100)
	for i := 1; i <= 8; i++ {
		b.alloc("i"+string(rune('0'+i)), "workspace-c", "idle"+string(rune('0'+i)), nodeID(i), 7, idle,
			started(time.Duration(i)*time.Minute))
	}
	p := mustPlan(t, b.pending("workspace-a", "chat", 1, 8, pPriority(80)).build())
	st := actionsOf(p, ActionStop)
	if len(st) != 1 {
		t.Fatalf("stops = %+v, want exactly one", st)
	}
	admit := actionsOf(p, ActionAdmit)
	if len(admit) != 1 || admit[0].Nodes[0] != st[0].Node {
		t.Fatalf("admit %+v is not on the victim's node %s", admit, st[0].Node)
	}
	// Same class (idle, priority 50) everywhere: least work lost, the youngest.
	if st[0].Alloc != "i1" {
		t.Fatalf("victim = %s, want i1 (least work lost)", st[0].Alloc)
	}
}

func TestL5NamespaceOutsideTreeIsNeverAVictim(t *testing.T) {
	s := newSnap(referenceTree()).nodes(1, 8, h100).
		alloc("x1", "outside", "idle-job", "node-01", 8, idle, priority(1)).
		pending("workspace-a", "chat", 1, 8, pPriority(80)).build()
	p := mustPlan(t, s)
	if got := stops(p); len(got) != 0 {
		t.Fatalf("stops = %v, want none", got)
	}
	w := actionsOf(p, ActionWait)
	if len(w) != 1 || !strings.Contains(w[0].Reason, "even with preemption") {
		t.Fatalf("waits = %+v, want one wait for room", w)
	}
}

func TestL5NeverVictims(t *testing.T) {
	cases := map[string]allocOpt{
		"system job":                       jobType(JobSystem),
		"sysbatch job":                     jobType(JobSysbatch),
		"allocation of active reservation": reservation("r-1"),
		"allocation already stopping":      stoppingFor("workspace-b/other/g"),
	}
	for name, opt := range cases {
		t.Run(name, func(t *testing.T) {
			b := newSnap(referenceTree()).nodes(1, 8, h100).
				alloc("v", "workspace-b", "job", "node-01", 8, idle, opt).
				pending("workspace-a", "chat", 1, 8, pPriority(80))
			b.s.Reservations = []Reservation{{ID: "r-1", Namespace: "workspace-b", Quota: "Quota1.1", GPUs: 8,
				Start: t0.Add(-time.Hour), End: t0.Add(time.Hour)}}
			p := mustPlan(t, b.build())
			if got := stops(p); len(got) != 0 {
				t.Fatalf("stops = %v, want none", got)
			}
		})
	}
}

func TestL5BatchJobIsOneUnitElasticIsNot(t *testing.T) {
	build := func(opts ...allocOpt) *Snapshot {
		return newSnap(referenceTree()).nodes(2, 8, h100).
			alloc("w1", "workspace-b", "train", "node-01", 8, append([]allocOpt{idle}, opts...)...).
			alloc("w2", "workspace-b", "train", "node-02", 8, append([]allocOpt{idle}, opts...)...).
			pending("workspace-a", "chat", 1, 8, pPriority(80)).build()
	}
	if got := stops(mustPlan(t, build())); !reflect.DeepEqual(got, []string{"w1", "w2"}) {
		t.Fatalf("batch: stops = %v, want the whole job [w1 w2]", got)
	}
	if got := stops(mustPlan(t, build(elastic))); len(got) != 1 {
		t.Fatalf("elastic: stops = %v, want one allocation", got)
	}
	if got := stops(mustPlan(t, build(jobType(JobService)))); len(got) != 1 {
		t.Fatalf("service: stops = %v, want one allocation", got)
	}
}

func TestL5BatchUnitIsCandidateOnlyIfAllAllocationsAre(t *testing.T) {
	// One allocation of the job is in an active reservation: the job is no
	// candidate, so nothing can be stopped.
	b := newSnap(referenceTree()).nodes(2, 8, h100).
		alloc("w1", "workspace-b", "train", "node-01", 8, idle).
		alloc("w2", "workspace-b", "train", "node-02", 8, idle, reservation("r-1")).
		pending("workspace-a", "chat", 1, 8, pPriority(80))
	b.s.Reservations = []Reservation{{ID: "r-1", Namespace: "workspace-b", Quota: "Quota1.1", GPUs: 8,
		Start: t0.Add(-time.Hour), End: t0.Add(time.Hour)}}
	if got := stops(mustPlan(t, b.build())); len(got) != 0 {
		t.Fatalf("stops = %v, want none", got)
	}
}

func TestL5StepsInOrder(t *testing.T) {
	// Quota1 has child-level preemption: team A may take idle GPUs (step 1)
	// and its children's non-idle training (step 2); idle goes first even at
	// a higher priority.
	s := newSnap(referenceTree()).nodes(2, 8, h100).
		alloc("train", "workspace-b", "train", "node-01", 8, priority(10)).
		alloc("idle", "workspace-c", "borrow", "node-02", 8, idle, priority(90)).
		pending("workspace-a", "chat", 2, 8, pPriority(80)).build()
	p := mustPlan(t, s)
	st := actionsOf(p, ActionStop)
	if len(st) != 2 || st[0].Alloc != "idle" || st[0].Rule != RuleIdleDebt || st[1].Alloc != "train" || st[1].Rule != RuleChild {
		t.Fatalf("stops = %+v, want idle (L5.1) then train (L5.2)", st)
	}
	if st[1].Reason != "child-level preemption for Quota1" {
		t.Fatalf("reason = %q", st[1].Reason)
	}
	if a := actionsOf(p, ActionAdmit); len(a) != 1 || a[0].Count != 2 {
		t.Fatalf("admits = %+v, want 2 allocations admitted", a)
	}
}

func TestL5ChildCannotPreemptSiblingNonIdle(t *testing.T) {
	s := newSnap(referenceTree()).nodes(1, 8, h100).
		alloc("c1", "workspace-c", "train", "node-01", 8, priority(1)).
		pending("workspace-b", "claim", 1, 8, pPriority(100)).build()
	p := mustPlan(t, s)
	if got := stops(p); len(got) != 0 {
		t.Fatalf("stops = %v, want none", got)
	}
}

func TestL5PriorityPreemption(t *testing.T) {
	tree := referenceTree()
	tree.Children[0].PriorityPreemption = true
	// Quota1.1 holds 40 of 48: entitled for 8, but the cluster is full.
	b := newSnap(tree).nodes(6, 8, h100)
	for i := 1; i <= 5; i++ {
		b.alloc("b"+string(rune('0'+i)), "workspace-b", "t"+string(rune('0'+i)), nodeID(i), 8,
			priority(10*i), jobType(JobService))
	}
	b.alloc("c1", "workspace-c", "c", "node-06", 8)
	p := mustPlan(t, b.pending("workspace-b", "urgent", 1, 8, pPriority(35)).build())
	st := actionsOf(p, ActionStop)
	if len(st) != 1 || st[0].Alloc != "b1" || st[0].Rule != RulePriority {
		t.Fatalf("stops = %+v, want b1 (priority 10) by L5.3", st)
	}
	if !strings.Contains(st[0].Reason, "priority 10 below 35") {
		t.Fatalf("reason = %q", st[0].Reason)
	}
}

func TestL5MinRuntimeSparesYoungAllocations(t *testing.T) {
	build := func(oldIsIdle bool) *Snapshot {
		b := newSnap(referenceTree()).nodes(2, 8, h100).settings(10*time.Minute, 10*time.Minute).
			alloc("young", "workspace-b", "y", "node-01", 8, idle, started(2*time.Minute), priority(10))
		if oldIsIdle {
			b.alloc("old", "workspace-b", "o", "node-02", 8, idle, started(2*time.Hour), priority(40))
		} else {
			b.alloc("old", "workspace-b", "o", "node-02", 8, started(2*time.Hour), priority(40))
		}
		return b.pending("workspace-a", "chat", 1, 8, pPriority(80)).build()
	}
	// The young one has the smaller key, but an older one suffices.
	if got := stops(mustPlan(t, build(true))); !reflect.DeepEqual(got, []string{"old"}) {
		t.Fatalf("stops = %v, want [old]", got)
	}
	// Quota1 has child preemption, so "old" (non-idle in Quota1.1) is a
	// step-2 candidate and still older: it is chosen over the young one.
	if got := stops(mustPlan(t, build(false))); !reflect.DeepEqual(got, []string{"old"}) {
		t.Fatalf("stops = %v, want [old]", got)
	}
	// Only young candidates: the search is repeated with them allowed.
	s := newSnap(referenceTree()).nodes(1, 8, h100).settings(10*time.Minute, 10*time.Minute).
		alloc("young", "workspace-b", "y", "node-01", 8, idle, started(2*time.Minute)).
		pending("workspace-a", "chat", 1, 8, pPriority(80)).build()
	if got := stops(mustPlan(t, s)); !reflect.DeepEqual(got, []string{"young"}) {
		t.Fatalf("stops = %v, want [young]", got)
	}
}

func TestL6AlreadyStoppingGoesToItsClaimant(t *testing.T) {
	s := newSnap(referenceTree()).nodes(2, 8, h100).
		alloc("v", "workspace-b", "victim", "node-01", 8, idle, stoppingFor("workspace-a/chat/server")).
		alloc("other", "workspace-b", "other", "node-02", 8, idle).
		pending("workspace-a", "chat", 1, 8, pPriority(80)).
		pending("workspace-b", "victim", 1, 8, pPriority(90), pIdle).build()
	p := mustPlan(t, s)
	if got := stops(p); len(got) != 0 {
		t.Fatalf("stops = %v, want none: the claimant's GPUs are already being freed", got)
	}
	admits := actionsOf(p, ActionAdmit)
	if len(admits) != 1 || admits[0].Job != "chat" || admits[0].Nodes[0] != "node-01" {
		t.Fatalf("admits = %+v, want chat on node-01 only (L7: not the victim)", admits)
	}
}

func TestL6StoppingForAnotherClaimantIsNotFree(t *testing.T) {
	s := newSnap(referenceTree()).nodes(1, 8, h100).
		alloc("v", "workspace-b", "victim", "node-01", 8, idle, stoppingFor("workspace-a/first/server")).
		pending("workspace-a", "second", 1, 8, pPriority(99)).build()
	p := mustPlan(t, s)
	if len(stops(p)) != 0 || len(actionsOf(p, ActionAdmit)) != 0 {
		t.Fatalf("plan = %+v, want the second claimant to wait", p.Actions)
	}
}

func TestL4IdleJobsUseFreeGPUsOnly(t *testing.T) {
	s := newSnap(referenceTree()).nodes(2, 8, h100).
		alloc("c1", "workspace-c", "c", "node-01", 8, idle, priority(1)).
		pending("workspace-b", "borrow", 2, 8, pIdle, pPriority(100), pType(JobBatch)).build()
	p := mustPlan(t, s)
	if got := stops(p); len(got) != 0 {
		t.Fatalf("stops = %v: idle jobs never preempt", got)
	}
	a := actionsOf(p, ActionAdmit)
	if len(a) != 1 || a[0].Rule != RuleIdle || a[0].Count != 1 || a[0].Nodes[0] != "node-02" {
		t.Fatalf("admits = %+v, want one L4 admit on node-02", a)
	}
	if w := actionsOf(p, ActionWait); len(w) != 1 || w[0].Count != 1 {
		t.Fatalf("waits = %+v, want the other allocation waiting", w)
	}
}

func TestL4IdleDecidedAfterEntitledWork(t *testing.T) {
	// A priority-100 idle job and a priority-10 entitled job compete for the
	// only free node: the entitled job gets it.
	s := newSnap(referenceTree()).nodes(1, 8, h100).
		pending("workspace-b", "borrow", 1, 8, pIdle, pPriority(100)).
		pending("workspace-c", "train", 1, 8, pPriority(10)).build()
	p := mustPlan(t, s)
	a := actionsOf(p, ActionAdmit)
	if len(a) != 1 || a[0].Job != "train" {
		t.Fatalf("admits = %+v, want train", a)
	}
}

func TestL4UsageFigures(t *testing.T) {
	// Quota1.1 (48) runs 40 non-idle and 16 idle: it borrows 8.
	b := newSnap(referenceTree()).nodes(16, 8, h100)
	for i := 1; i <= 5; i++ {
		b.alloc("b"+string(rune('0'+i)), "workspace-b", "t"+string(rune('0'+i)), nodeID(i), 8)
	}
	b.alloc("i1", "workspace-b", "i1", "node-06", 8, idle).alloc("i2", "workspace-b", "i2", "node-07", 8, idle)
	b.alloc("c1", "workspace-c", "c1", "node-08", 8)
	p := mustPlan(t, b.build())
	want := Usage{Quota: "Quota1.1", Nominal: 48, Used: 56, NonIdle: 40, Borrowed: 8, Debt: 0, Lendable: 0}
	if got := usageOf(t, p, "Quota1.1"); got != want {
		t.Fatalf("Quota1.1 usage = %+v, want %+v", got, want)
	}
	want = Usage{Quota: "Quota1.2", Nominal: 80, Used: 8, NonIdle: 8, Borrowed: 0, Debt: 0, Lendable: 72}
	if got := usageOf(t, p, "Quota1.2"); got != want {
		t.Fatalf("Quota1.2 usage = %+v, want %+v", got, want)
	}
	want = Usage{Quota: "Quota1", Nominal: 128, Used: 64, NonIdle: 48, Borrowed: 0, Debt: 0, Lendable: 64}
	if got := usageOf(t, p, "Quota1"); got != want {
		t.Fatalf("Quota1 usage = %+v, want %+v", got, want)
	}
}

// debtCluster is use case 2 after the move: Quota1.2 lowered 80 -> 72 at
// `changed` while it runs 80 non-idle GPUs; Quota1.1 raised 48 -> 56 runs
// 48; a Quota1.1 job asks for 8.
func debtCluster(changed time.Time) *Snapshot {
	tree := referenceTree()
	tree.Children[0].GPUs, tree.Children[0].ChangedAt = quota.Plain(56), changed
	tree.Children[1].GPUs, tree.Children[1].ChangedAt = quota.Plain(72), changed
	b := newSnap(tree).nodes(16, 8, h100)
	for i := 1; i <= 6; i++ {
		b.alloc(id("b", i), "workspace-b", id("tb", i), nodeFor(i), 8, started(time.Duration(20-i)*time.Hour))
	}
	for i := 7; i <= 16; i++ {
		b.alloc(id("c", i), "workspace-c", id("tc", i), nodeFor(i), 8, started(time.Duration(20-i)*time.Hour))
	}
	return b.pending("workspace-b", "more", 1, 8, pType(JobBatch)).build()
}

func id(prefix string, i int) string { return prefix + "-" + string(rune('a'+i)) }
func nodeFor(i int) string {
	return "node-" + string(rune('0'+i/10)) + string(rune('0'+i%10))
}

func TestL9LoweredQuotaShowsDebtNotBorrowing(t *testing.T) {
	// Within the grace: debt, no borrowing, nothing stopped, the claimant waits.
	p := mustPlan(t, debtCluster(t0.Add(-time.Minute)))
	if got := stops(p); len(got) != 0 {
		t.Fatalf("stops = %v, want none within the grace", got)
	}
	want := Usage{Quota: "Quota1.2", Nominal: 72, Used: 80, NonIdle: 80, Borrowed: 0, Debt: 8, Lendable: 0}
	if got := usageOf(t, p, "Quota1.2"); got != want {
		t.Fatalf("Quota1.2 usage = %+v, want %+v", got, want)
	}
	w := actionsOf(p, ActionWait)
	if len(w) != 1 || w[0].Job != "more" {
		t.Fatalf("waits = %+v, want the Quota1.1 job waiting", w)
	}
}

func TestL9AfterGraceDebtIsReclaimedExactly(t *testing.T) {
	p := mustPlan(t, debtCluster(t0.Add(-11*time.Minute)))
	st := actionsOf(p, ActionStop)
	// The newest Quota1.2 allocation (c-q, started 4h ago) is the debt.
	if len(st) != 1 || st[0].Alloc != "c-q" || st[0].Rule != RuleIdleDebt || st[0].GPUs != 8 {
		t.Fatalf("stops = %+v, want exactly the 8-GPU debt allocation c-q by L5.1", st)
	}
	if !strings.Contains(st[0].Reason, "debt of Quota1.2") {
		t.Fatalf("reason = %q", st[0].Reason)
	}
	if a := actionsOf(p, ActionAdmit); len(a) != 1 || a[0].Job != "more" {
		t.Fatalf("admits = %+v", a)
	}
	for _, q := range []string{"Quota1.1", "Quota1.2"} {
		u := usageOf(t, p, q)
		if u.Debt != 0 || u.NonIdle != u.Nominal {
			t.Fatalf("%s after reclaim = %+v, want nonidle = nominal and no debt", q, u)
		}
	}
}

func TestL9NoRecordedChangeHasNoGrace(t *testing.T) {
	p := mustPlan(t, debtCluster(time.Time{}))
	if got := stops(p); !reflect.DeepEqual(got, []string{"c-q"}) {
		t.Fatalf("stops = %v, want [c-q]", got)
	}
}

func TestL11FlexIsAdmittedWholeOrWaits(t *testing.T) {
	// Two free nodes; a flex request for three 8-GPU allocations waits
	// whole, and its GPUs are not taken from anyone.
	s := newSnap(referenceTree()).nodes(3, 8, h100).
		alloc("c1", "workspace-c", "keep", "node-03", 8).
		pending("workspace-b", "flex", 3, 8, pFlex(24*time.Hour, 4*time.Hour), pType(JobBatch)).build()
	p := mustPlan(t, s)
	if len(p.Actions) != 1 || p.Actions[0].Action != ActionWait || p.Actions[0].Rule != RuleFlex || p.Actions[0].Count != 3 {
		t.Fatalf("actions = %+v, want one L11 wait for 3", p.Actions)
	}
	if u := usageOf(t, p, "Quota1.1"); u.Used != 0 {
		t.Fatalf("Quota1.1 used = %d after a failed flex try, want 0", u.Used)
	}
	// With a third node free it is admitted whole.
	s.Allocations = nil
	p = mustPlan(t, s)
	if a := actionsOf(p, ActionAdmit); len(a) != 1 || a[0].Count != 3 {
		t.Fatalf("admits = %+v, want all 3", a)
	}
}

func TestL11FlexRollbackUndoesVictims(t *testing.T) {
	// The flex claimant could take one idle node but needs two: nothing is stopped.
	s := newSnap(referenceTree()).nodes(2, 8, h100).
		alloc("i1", "workspace-c", "borrow", "node-01", 8, idle).
		alloc("c2", "workspace-c", "keep", "node-02", 8).
		pending("workspace-b", "flex", 2, 8, pFlex(24*time.Hour, time.Hour)).build()
	p := mustPlan(t, s)
	if got := stops(p); len(got) != 0 {
		t.Fatalf("stops = %v, want none", got)
	}
}

func TestL11ExpiryAndOrder(t *testing.T) {
	s := newSnap(referenceTree()).nodes(1, 8, h100).
		pending("workspace-b", "old", 1, 8, pFlex(time.Hour, time.Hour), pSubmitted(61*time.Minute)).
		pending("workspace-b", "long", 1, 8, pFlex(24*time.Hour, 8*time.Hour), pSubmitted(time.Hour)).
		pending("workspace-b", "short", 1, 8, pFlex(24*time.Hour, 2*time.Hour), pSubmitted(time.Minute)).build()
	p := mustPlan(t, s)
	ex := actionsOf(p, ActionExpire)
	if len(ex) != 1 || ex[0].Job != "old" || ex[0].Rule != RuleFlexExpire {
		t.Fatalf("expired = %+v, want old", ex)
	}
	if a := actionsOf(p, ActionAdmit); len(a) != 1 || a[0].Job != "short" {
		t.Fatalf("admits = %+v, want the shorter max_run first", a)
	}
}

func TestL3OrderPriorityThenSubmission(t *testing.T) {
	s := newSnap(referenceTree()).nodes(1, 8, h100).
		pending("workspace-c", "early-low", 1, 8, pPriority(40), pSubmitted(time.Hour)).
		pending("workspace-c", "late-high", 1, 8, pPriority(60), pSubmitted(time.Minute)).
		pending("workspace-b", "early-high", 1, 8, pPriority(60), pSubmitted(time.Hour)).build()
	p := mustPlan(t, s)
	if a := actionsOf(p, ActionAdmit); len(a) != 1 || a[0].Job != "early-high" {
		t.Fatalf("admits = %+v, want early-high", a)
	}
}

func TestL3PartialAdmissionForNonFlex(t *testing.T) {
	s := newSnap(referenceTree()).nodes(2, 8, h100).
		alloc("c1", "workspace-c", "keep", "node-02", 8).
		pending("workspace-b", "multi", 3, 8, pType(JobBatch)).build()
	p := mustPlan(t, s)
	a, w := actionsOf(p, ActionAdmit), actionsOf(p, ActionWait)
	if len(a) != 1 || a[0].Count != 1 || len(w) != 1 || w[0].Count != 2 {
		t.Fatalf("admit %+v wait %+v, want 1 admitted and 2 waiting", a, w)
	}
}

func TestL3ModelAndPlaceConstraints(t *testing.T) {
	s := newSnap(referenceTree()).nodes(1, 8, h100).nodes(1, 8, "NVIDIA A100-SXM4-40GB").
		pending("workspace-b", "a100", 1, 4, pModel("NVIDIA A100-SXM4-40GB")).build()
	p := mustPlan(t, s)
	if a := actionsOf(p, ActionAdmit); len(a) != 1 || a[0].Nodes[0] != "node-02" {
		t.Fatalf("admits = %+v, want node-02 (the A100 node)", a)
	}
}

func TestL1InvalidTreeIsAnError(t *testing.T) {
	tree := referenceTree()
	tree.Children[0].GPUs = quota.Plain(56)
	_, err := Compute(newSnap(tree).build())
	want := `quota "Quota1": children's nominal GPUs sum to 136 (Quota1.1 56 + Quota1.2 80), more than its nominal 128`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
}

func TestL1CapacityWarning(t *testing.T) {
	p := mustPlan(t, newSnap(referenceTree()).nodes(2, 8, h100).build())
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0].Message, "nominal 128 GPUs exceeds the 16 healthy GPUs") {
		t.Fatalf("warnings = %v", p.Warnings)
	}
}

func TestL5BatchUnitWithIdleAndDebtAllocations(t *testing.T) {
	// One batch job with a debt allocation (its quota B has nominal 0) and
	// an idle one: the unit's key is the debt's, and both stop together.
	tree := &quota.Node{Name: "R", GPUs: quota.Plain(8), Children: []*quota.Node{
		{Name: "B", GPUs: quota.Plain(0), Namespaces: []string{"b"}},
		{Name: "A", GPUs: quota.Plain(8), Namespaces: []string{"a"}},
	}}
	s := newSnap(tree).nodes(1, 2, h100).
		alloc("x1", "b", "train", "node-01", 1).
		alloc("x2", "b", "train", "node-01", 1, idle).
		pending("a", "chat", 1, 2).build()
	p := mustPlan(t, s)
	st := actionsOf(p, ActionStop)
	if len(st) != 2 || st[0].Rule != RuleIdleDebt || st[1].Rule != RuleIdleDebt {
		t.Fatalf("stops = %+v, want both allocations by L5.1", st)
	}
	if !strings.Contains(st[0].Reason, "debt of B") || !strings.Contains(st[1].Reason, "idle allocation of B") {
		t.Fatalf("reasons = %q, %q", st[0].Reason, st[1].Reason)
	}
}

func TestL3HugeAsksNeverWrap(t *testing.T) {
	// Counts whose product overflows an int32 sum must not wrap into an
	// entitled ask.
	const big = 1<<31 - 1
	s := newSnap(referenceTree()).nodes(2, 8, h100).
		pending("workspace-b", "huge", big, big, pGroup("a")).
		pending("workspace-b", "huge", big, big, pGroup("b")).
		pending("workspace-b", "huge", big, big, pGroup("c")).
		pending("workspace-b", "huge", 16, 1, pGroup("d")).build()
	p := mustPlan(t, s)
	if a := actionsOf(p, ActionAdmit); len(a) != 0 {
		t.Fatalf("admits = %+v, want none", a)
	}
	if w := actionsOf(p, ActionWait); len(w) != 4 || !strings.Contains(w[0].Reason, "Quota1.1: 0 of 48 GPUs in use") {
		t.Fatalf("waits = %+v", w)
	}
}
