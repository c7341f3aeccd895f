package plan_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/snapshot"
)

// The three use cases of DESIGN §1 on the files in examples/reference.

var referenceDir = filepath.Join("..", "..", "examples", "reference")

func loadReference(t *testing.T) *plan.Snapshot {
	t.Helper()
	f, err := os.Open(filepath.Join(referenceDir, "snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := snapshot.Decode(f)
	if err != nil {
		t.Fatalf("decode reference snapshot: %v", err)
	}
	return s
}

func computeOK(t *testing.T, s *plan.Snapshot) *plan.Plan {
	t.Helper()
	p, err := plan.Compute(s)
	if err != nil {
		t.Fatalf("Compute: %v", err)
	}
	return p
}

// Use case 1: team A's inference needs more GPUs than are free; the broker
// takes GPUs back from B's and C's training so that inference runs.
func TestUseCase1InferencePreemptsTraining(t *testing.T) {
	s := loadReference(t)
	p := computeOK(t, s)
	byID := map[string]plan.Allocation{}
	for _, a := range s.Allocations {
		byID[a.ID] = a
	}
	var admitted *plan.Action
	freed := map[string]int{}
	for i, a := range p.Actions {
		switch a.Action {
		case plan.ActionAdmit:
			if a.Namespace == "workspace-a" && a.Job == "chat" {
				admitted = &p.Actions[i]
			}
		case plan.ActionStop:
			v := byID[a.Alloc]
			if v.Namespace != "workspace-b" && v.Namespace != "workspace-c" {
				t.Fatalf("stop %s in %s: only training of B and C may yield", a.Alloc, v.Namespace)
			}
			if a.For != (plan.GroupKey{Namespace: "workspace-a", Job: "chat", Group: "server"}) {
				t.Fatalf("stop %s is for %q", a.Alloc, a.For)
			}
			if !(a.Rule == plan.RuleIdleDebt && v.Idle) && a.Rule != plan.RuleChild {
				t.Fatalf("stop %s: rule %s for idle=%v", a.Alloc, a.Rule, v.Idle)
			}
			freed[a.Node] += a.GPUs
		}
	}
	if admitted == nil || admitted.Count != 2 || admitted.Rule != plan.RuleAdmission {
		t.Fatalf("inference not admitted whole: %+v", p.Actions)
	}
	// Every node the inference lands on had 8 GPUs freed or free for it.
	for _, n := range admitted.Nodes {
		if freed[n] < 8 && !nodeHadFree(s, n, 8) {
			t.Fatalf("inference placed on %s where only %d GPUs were freed", n, freed[n])
		}
	}
	// Nothing of team A is stopped, and team B's pending training, which is
	// within its quota but has no room, waits rather than preempting C.
	for _, a := range p.Actions {
		if a.Action == plan.ActionStop && a.For != (plan.GroupKey{Namespace: "workspace-a", Job: "chat", Group: "server"}) {
			t.Fatalf("stop for another claimant: %+v", a)
		}
	}
}

func nodeHadFree(s *plan.Snapshot, node string, want int) bool {
	held := map[string]bool{}
	for _, a := range s.Allocations {
		for _, g := range a.GPUIDs {
			held[g] = true
		}
	}
	for _, n := range s.Nodes {
		if n.ID != node {
			continue
		}
		free := 0
		for _, g := range n.GPUs {
			if g.Healthy && !held[g.ID] {
				free++
			}
		}
		return free >= want
	}
	return false
}

// Use case 2: an admin moves 8 GPUs, Quota1.1 48 -> 56 and Quota1.2 80 ->
// 72, live. The move is valid under L1; Quota1.2's excess is debt, not
// borrowing; after the grace Quota1.1's entitled job takes exactly it.
func TestUseCase2QuotaMove(t *testing.T) {
	root, settings, err := quota.LoadFile(filepath.Join(referenceDir, "quota.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	moved := root.Clone()
	changed := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	moved.Find("Quota1.1").GPUs, moved.Find("Quota1.1").ChangedAt = quota.Plain(56), changed
	moved.Find("Quota1.2").GPUs, moved.Find("Quota1.2").ChangedAt = quota.Plain(72), changed
	if err := quota.Validate(moved); err != nil {
		t.Fatalf("the move must be valid: %v", err)
	}
	// Moving without lowering the sibling breaks L1 and names the numbers.
	bad := root.Clone()
	bad.Find("Quota1.1").GPUs = quota.Plain(56)
	if err := quota.Validate(bad); err == nil || !strings.Contains(err.Error(), "sum to 136") {
		t.Fatalf("want an L1 error naming 136, got %v", err)
	}

	// 16 nodes x 8 GPUs: B runs 48 non-idle, C runs 80 non-idle.
	s := &plan.Snapshot{Quota: moved, Settings: settings}
	for i := 0; i < 16; i++ {
		n := plan.Node{ID: nodeName(i), Datacenter: "dc1", NodePool: "default"}
		for g := 0; g < 8; g++ {
			n.GPUs = append(n.GPUs, plan.GPU{ID: nodeName(i) + "-" + string(rune('0'+g)), Model: "H100", Healthy: true})
		}
		s.Nodes = append(s.Nodes, n)
		ns := "workspace-c"
		if i < 6 {
			ns = "workspace-b"
		}
		a := plan.Allocation{ID: "alloc-" + nodeName(i), Namespace: ns, Job: "train-" + nodeName(i), Group: "w",
			Type: plan.JobBatch, Priority: 50, Node: n.ID, StartedAt: changed.Add(-time.Duration(20-i) * time.Hour)}
		for _, g := range n.GPUs {
			a.GPUIDs = append(a.GPUIDs, g.ID)
		}
		s.Allocations = append(s.Allocations, a)
	}
	s.Pending = []plan.Pending{{Namespace: "workspace-b", Job: "more", Group: "w", Type: plan.JobBatch, Priority: 50,
		Count: 1, GPUs: 8, NodePool: "default", SubmittedAt: changed}}

	// Right after the move: debt, no borrowing, nothing stopped.
	s.Time = changed.Add(time.Minute)
	p := computeOK(t, s)
	if got := usage(p, "Quota1.2"); got.Debt != 8 || got.Borrowed != 0 || got.Nominal != 72 {
		t.Fatalf("Quota1.2 after the move = %+v, want 8 GPUs of debt and no borrowing", got)
	}
	if n := count(p, plan.ActionStop); n != 0 {
		t.Fatalf("%d stops within the grace, want none", n)
	}
	// After the grace: exactly the newest 8 GPUs of Quota1.2 are reclaimed.
	s.Time = changed.Add(11 * time.Minute)
	p = computeOK(t, s)
	var stopped []string
	for _, a := range p.Actions {
		if a.Action == plan.ActionStop {
			stopped = append(stopped, a.Alloc)
		}
	}
	if !slices.Equal(stopped, []string{"alloc-" + nodeName(15)}) {
		t.Fatalf("stops = %v, want the newest Quota1.2 allocation", stopped)
	}
	if got := usage(p, "Quota1.1"); got.NonIdle != 56 {
		t.Fatalf("Quota1.1 holds %d after the plan, want 56", got.NonIdle)
	}
	if got := usage(p, "Quota1.2"); got.NonIdle != 72 || got.Debt != 0 {
		t.Fatalf("Quota1.2 after the plan = %+v, want 72 and no debt", got)
	}
}

func nodeName(i int) string { return "node-" + string(rune('a'+i)) }

// Use case 3: isolation. Team B's and team C's work never preempts the
// other's non-idle allocations, whatever the priorities.
func TestUseCase3Isolation(t *testing.T) {
	s := loadReference(t)
	// Drop team A's claimant; give B and C urgent work each.
	s.Pending = []plan.Pending{
		{Namespace: "workspace-b", Job: "urgent-b", Group: "g", Type: plan.JobBatch, Priority: 100, Count: 1, GPUs: 8,
			NodePool: "default", SubmittedAt: s.Time},
		{Namespace: "workspace-c", Job: "urgent-c", Group: "g", Type: plan.JobBatch, Priority: 100, Count: 1, GPUs: 8,
			NodePool: "default", SubmittedAt: s.Time},
	}
	p := computeOK(t, s)
	ns := map[string]plan.Allocation{}
	for _, a := range s.Allocations {
		ns[a.ID] = a
	}
	for _, a := range p.Actions {
		if a.Action != plan.ActionStop {
			continue
		}
		v := ns[a.Alloc]
		claimantNS := a.For.Namespace
		if v.Namespace != claimantNS && !v.Idle {
			t.Fatalf("%s stopped non-idle %s of %s", a.For, a.Alloc, v.Namespace)
		}
	}
}

func usage(p *plan.Plan, q string) plan.Usage {
	for _, u := range p.Usage {
		if u.Quota == q {
			return u
		}
	}
	return plan.Usage{}
}

func count(p *plan.Plan, kind plan.ActionKind) int {
	n := 0
	for _, a := range p.Actions {
		if a.Action == kind {
			n++
		}
	}
	return n
}
