package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/quota"
)

// validSnap is a snapshot that passes Validate: 2 nodes of 8 GPUs, a
// training job of workspace-b on each, and a pending chat job of
// workspace-a.
func validSnap() *Snapshot {
	return newSnap(referenceTree()).nodes(2, 8, h100).
		alloc("b1", "workspace-b", "train", "node-01", 4).
		alloc("b2", "workspace-b", "train", "node-02", 4).
		pending("workspace-a", "chat", 1, 8).
		build()
}

func TestValidateAcceptsAValidSnapshot(t *testing.T) {
	if err := validSnap().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateNamesTheFieldAndTheValue(t *testing.T) {
	tests := []struct {
		name string
		edit func(s *Snapshot)
		want string
	}{
		{"a NUL byte in a namespace", func(s *Snapshot) { s.Pending[0].Namespace = "workspace-a\x00" },
			`pending[0].namespace: "workspace-a\x00" holds the control character U+0000; a name may not`},
		{"an escape in a job name", func(s *Snapshot) { s.Allocations[1].Job = "train\x1b[2J" },
			`allocations[1].job: "train\x1b[2J" holds the control character U+001B; a name may not`},
		{"a control character in a group", func(s *Snapshot) { s.Pending[0].Group = "a\u0085b" },
			`pending[0].group: "a\u0085b" holds the control character U+0085; a name may not`},
		{"a claimant with an empty group", func(s *Snapshot) {
			s.Allocations[0].StoppingFor = GroupKey{Namespace: "workspace-a", Job: "chat"}
		}, `allocations[0].stopping_for.group: must not be empty`},
		{"a datacenter listed twice", func(s *Snapshot) { s.Pending[0].Datacenters = []string{"dc1", "dc2", "dc1"} },
			`pending[0].datacenters[2]: datacenter "dc1" is listed twice (also datacenters[0])`},
		{"a GPU ID on two nodes", func(s *Snapshot) { s.Nodes[1].GPUs[3].ID = "node-01-gpu5" },
			`nodes[1].gpus[3].id: GPU "node-01-gpu5" is listed twice (also nodes[0].gpus[5].id)`},
		{"a GPU ID twice on one node", func(s *Snapshot) { s.Nodes[1].GPUs[3].ID = "node-02-gpu1" },
			`nodes[1].gpus[3].id: GPU "node-02-gpu1" is listed twice (also nodes[1].gpus[1].id)`},
		{"an allocation on an unknown node", func(s *Snapshot) { s.Allocations[1].Node = "node-09" },
			`allocations[1].node: unknown node "node-09"`},
		{"a GPU of another node", func(s *Snapshot) { s.Allocations[1].GPUIDs[0] = "node-01-gpu7" },
			`allocations[1].gpu_ids[0]: GPU "node-01-gpu7" is not on node "node-02" (it is on node "node-01")`},
		{"a GPU no node has", func(s *Snapshot) { s.Allocations[1].GPUIDs[0] = "node-09-gpu0" },
			`allocations[1].gpu_ids[0]: GPU "node-09-gpu0" is not on node "node-02" (no node has it)`},
		{"a GPU of another node, on a node of more than 16 GPUs (found by the map)", func(s *Snapshot) {
			for g := 8; g < 24; g++ {
				s.Nodes[1].GPUs = append(s.Nodes[1].GPUs, GPU{ID: fmt.Sprintf("node-02-gpu%d", g), Model: h100, Healthy: true})
			}
			s.Allocations[1].GPUIDs = []string{"node-02-gpu20", "node-01-gpu7"}
		}, `allocations[1].gpu_ids[1]: GPU "node-01-gpu7" is not on node "node-02" (it is on node "node-01")`},
		{"a GPU held twice on a node of more than 16 GPUs", func(s *Snapshot) {
			for g := 8; g < 24; g++ {
				s.Nodes[1].GPUs = append(s.Nodes[1].GPUs, GPU{ID: fmt.Sprintf("node-02-gpu%d", g), Model: h100, Healthy: true})
			}
			s.Allocations[1].GPUIDs = []string{"node-02-gpu20", "node-02-gpu21"}
			s.Allocations = append(s.Allocations, Allocation{ID: "b3", Namespace: "workspace-b", Job: "train", Group: "worker",
				Type: JobBatch, Priority: 50, Node: "node-02", GPUIDs: []string{"node-02-gpu19", "node-02-gpu21"}, StartedAt: t0})
		}, `allocations[2].gpu_ids[1]: GPU "node-02-gpu21" is used twice (also by allocations[1])`},
		{"a GPU held twice", func(s *Snapshot) {
			s.Allocations = append(s.Allocations, Allocation{ID: "b3", Namespace: "workspace-b", Job: "train", Group: "worker",
				Type: JobBatch, Priority: 50, Node: "node-02", GPUIDs: []string{"node-02-gpu2"}, StartedAt: t0})
		}, `allocations[2].gpu_ids[0]: GPU "node-02-gpu2" is used twice (also by allocations[1])`},
		{"a namespace bound twice", func(s *Snapshot) { s.Quota.Children[1].Namespaces = []string{"workspace-b"} },
			`quota "Quota1.2": namespace "workspace-b" is already bound to quota "Quota1.1"`},
		{"a negative debt grace", func(s *Snapshot) { s.Settings.DebtGrace = -time.Second },
			`settings.debt_grace: "-1s" is negative`},
		{"max_wait above 168h", func(s *Snapshot) { s.Pending[0].Flex = &Flex{MaxWait: 169 * time.Hour, MaxRun: time.Hour} },
			`pending[0].flex.max_wait: "169h0m0s" is above the maximum of 168h`},
		{"max_wait 0 (the planner used to cap it silently)", func(s *Snapshot) { s.Pending[0].Flex = &Flex{MaxRun: time.Hour} },
			`pending[0].flex.max_wait: "0s" must be more than 0 (leave max_wait out for the default 168h)`},
		{"no max_run", func(s *Snapshot) { s.Pending[0].Flex = &Flex{MaxWait: time.Hour} },
			`pending[0].flex.max_run: missing or 0: a flex request needs max_run, more than 0 and at most 168h`},
		{"max_run above 168h", func(s *Snapshot) { s.Pending[0].Flex = &Flex{MaxWait: time.Hour, MaxRun: 200 * time.Hour} },
			`pending[0].flex.max_run: "200h0m0s" is above the maximum of 168h`},
		{"an idle flex request", func(s *Snapshot) {
			s.Pending[0].Idle = true
			s.Pending[0].Flex = &Flex{MaxWait: time.Hour, MaxRun: time.Hour}
		}, `pending[0].flex: an idle job (idle: true) cannot be a flex request`},
		{"a flex request that names a reservation", func(s *Snapshot) {
			s.Pending[0].Reservation = "r-1"
			s.Pending[0].Flex = &Flex{MaxWait: time.Hour, MaxRun: time.Hour}
		}, `pending[0].reservation: "r-1": a flex request cannot name a reservation (L11)`},
		{"a priority out of range", func(s *Snapshot) { s.Allocations[0].Priority = 0 },
			`allocations[0].priority: 0 is outside 1-100`},
		{"allocations of one job that differ in idle", func(s *Snapshot) { s.Allocations[1].Idle = true },
			`allocations[1].idle: true differs from false in allocations[0], an allocation of the same job "workspace-b/train"`},
		{"a group listed twice after another group of its job", func(s *Snapshot) {
			g := s.Pending[0]
			g.Group = "web"
			s.Pending = append(s.Pending, g, s.Pending[0])
		}, `pending[2]: group "workspace-a/chat/server" is listed twice (also pending[0])`},
		{"a group listed twice after its job's first group", func(s *Snapshot) {
			g := s.Pending[0]
			g.Group = "web"
			s.Pending = append(s.Pending, g, g)
		}, `pending[2]: group "workspace-a/chat/web" is listed twice (also pending[1])`},
		{"a non-ASCII letter in a name is fine, a control character after it is not", func(s *Snapshot) {
			s.Allocations[0].Group = "wörker\u009b"
		}, `allocations[0].group: "wörker\u009b" holds the control character U+009B; a name may not`},
		{"a reservation of an unknown quota", func(s *Snapshot) {
			s.Reservations = []Reservation{{ID: "r", Namespace: "workspace-b", Quota: "Q9", GPUs: 1, Start: t0, End: t0.Add(time.Hour)}}
		}, `reservations[0].quota: unknown quota "Q9"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSnap()
			tt.edit(s)
			err := s.Validate()
			if err == nil {
				t.Fatalf("no error; want %s", tt.want)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			var f *Fault
			if !errors.As(err, &f) || !errors.Is(err, ErrInvalid) {
				t.Errorf("err is %T, want a *Fault wrapping ErrInvalid", err)
			}
		})
	}
}

func TestCheckSeparatesFatalFaultsFromItems(t *testing.T) {
	s := validSnap()
	s.Quota.Children[0].GPUs = quota.Plain(200) // children above their parent: L1
	s.Pending[0].Namespace = "x\x00"
	fatal, items := s.Check()
	if fatal == nil || fatal.Item != ItemTree || !fatal.Item.Fatal() || items != nil {
		t.Fatalf("Check = %v, %v; want a fatal tree fault and no items", fatal, items)
	}
	var verr *quota.ValidationError
	if !errors.As(fatal, &verr) {
		t.Errorf("the tree fault does not wrap the *quota.ValidationError: %v", fatal)
	}
}

func TestUsableLeavesOutEachBadItemAndWhatDependsOnIt(t *testing.T) {
	s := validSnap()
	s.Nodes[1].GPUs[0].ID = "node-01-gpu0" // node-02 fails: a GPU of node-01
	s.Pending = append(s.Pending,
		Pending{Namespace: "workspace-c", Job: "sweep", Group: "a", Type: JobBatch, Priority: 50, Count: 1, GPUs: 1, SubmittedAt: t0},
		Pending{Namespace: "workspace-c", Job: "sweep", Group: "b", Type: JobBatch, Priority: 60, Count: 1, GPUs: 1, SubmittedAt: t0})
	got, faults, err := s.Usable()
	if err != nil {
		t.Fatal(err)
	}
	type left struct {
		Item  Item
		Index int
		ID    string
		Job   JobKey
		Path  string
	}
	var gotLeft []left
	for _, f := range faults {
		gotLeft = append(gotLeft, left{f.Item, f.Index, f.ID, f.Job, f.Path})
	}
	want := []left{
		{ItemNode, 1, "node-02", JobKey{}, "nodes[1].gpus[0].id"},
		// Its allocation is on a node that is left out: unknown.
		{ItemAllocation, 1, "b2", JobKey{Namespace: "workspace-b", Job: "train"}, "allocations[1].node"},
		// A job's groups disagree on priority: the whole job is left out.
		{ItemPending, 2, "", JobKey{Namespace: "workspace-c", Job: "sweep"}, "pending[2].priority"},
	}
	if diff := cmp.Diff(want, gotLeft); diff != "" {
		t.Errorf("faults (-want +got):\n%s", diff)
	}
	var nodes, allocs, pending []string
	for _, n := range got.Nodes {
		nodes = append(nodes, n.ID)
	}
	for _, a := range got.Allocations {
		allocs = append(allocs, a.ID)
	}
	for _, p := range got.Pending {
		pending = append(pending, p.Key().String())
	}
	if diff := cmp.Diff([]string{"node-01"}, nodes); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b1"}, allocs); diff != "" {
		t.Errorf("allocations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"workspace-a/chat/server"}, pending); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("the usable snapshot fails Validate: %v", err)
	}
	if len(s.Nodes) != 2 || len(s.Allocations) != 2 || len(s.Pending) != 3 {
		t.Errorf("Usable changed its snapshot")
	}
}

func TestFlexCheckIsTheOneRuleOfL11(t *testing.T) {
	for _, tt := range []struct {
		f   Flex
		key string
	}{
		{Flex{MaxWait: DefaultFlexWait, MaxRun: time.Hour}, ""},
		{Flex{MaxWait: MaxFlexWait, MaxRun: MaxFlexRun}, ""},
		{Flex{MaxWait: MaxFlexWait + 1, MaxRun: time.Hour}, "max_wait"},
		{Flex{MaxWait: -1, MaxRun: time.Hour}, "max_wait"},
		{Flex{MaxWait: time.Hour}, "max_run"},
		{Flex{MaxWait: time.Hour, MaxRun: -time.Hour}, "max_run"},
		{Flex{MaxWait: time.Hour, MaxRun: MaxFlexRun + 1}, "max_run"},
	} {
		err := tt.f.Check()
		var fe *FlexError
		got := ""
		if errors.As(err, &fe) {
			got = fe.Key
		}
		if got != tt.key || (err == nil) != (tt.key == "") {
			t.Errorf("%v.Check() = %v, want a fault of %q", tt.f.String(), err, tt.key)
		}
	}
}

func TestValidateIsLinearInTheGPUsOfAnAllocation(t *testing.T) {
	// An allocation listing one GPU 100,000 times is refused at the second
	// entry, without a quadratic scan.
	s := validSnap()
	ids := make([]string, 100_000)
	for i := range ids {
		ids[i] = "node-02-gpu7"
	}
	s.Allocations[1].GPUIDs = ids
	start := time.Now()
	err := s.Validate()
	if err == nil || !strings.Contains(err.Error(), `allocations[1].gpu_ids[1]: GPU "node-02-gpu7" is listed twice in this allocation`) {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Validate took %s", d)
	}
}

// A NodeCheck gives UsableWith the answers of Usable: on the snapshot it
// first checked, on a later snapshot that shares its nodes (other
// allocations, the same node fault replayed), and on one with other nodes
// (checked again, not read from the memo).
func TestUsableWithANodeCheckAnswersAsUsable(t *testing.T) {
	var memo NodeCheck
	same := func(step string, s *Snapshot) {
		t.Helper()
		want, wantLeft, wantErr := s.Usable()
		got, gotLeft, gotErr := s.UsableWith(&memo)
		if wantErr != nil || gotErr != nil {
			t.Fatalf("%s: errors %v and %v", step, wantErr, gotErr)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: snapshot (-Usable +UsableWith):\n%s", step, diff)
		}
		if diff := cmp.Diff(wantLeft, gotLeft); diff != "" {
			t.Errorf("%s: faults (-Usable +UsableWith):\n%s", step, diff)
		}
	}
	s := validSnap()
	s.Nodes[1].GPUs[0].ID = "node-01-gpu0" // node-02 fails: a GPU of node-01
	same("first", s)
	if memo.first != &s.Nodes[0] || len(memo.faults) != 1 {
		t.Fatalf("the memo holds nodes %p and %d faults, want %p and node-02's fault", memo.first, len(memo.faults), &s.Nodes[0])
	}
	// The same nodes, another allocation that books a GPU of node-01 twice.
	next := *s
	next.Allocations = append(slices.Clone(s.Allocations), Allocation{ID: "b3", Namespace: "workspace-b", Job: "other",
		Group: "g", Type: JobBatch, Priority: 50, Node: "node-01", GPUIDs: []string{"node-01-gpu0"}, StartedAt: t0})
	same("the same nodes", &next)
	// b2 is on node-02, left out; b3 books node-01-gpu0 twice.
	if memo.allocs.first != &next.Allocations[0] || len(memo.allocs.faults) != 2 || memo.allocs.faults[1].ID != "b3" {
		t.Fatalf("the memo holds allocations %p and faults %v, want %p and the faults of b2 and b3", memo.allocs.first, memo.allocs.faults, &next.Allocations[0])
	}
	// The same nodes and the same allocations: the allocations' faults are
	// the ones kept (poisoned here, to see that they are read).
	same("the same allocations", &next)
	kept := memo.allocs.faults
	memo.allocs.faults = nil
	if _, items := next.check(&memo); len(items) != 1 || items[0].Item != ItemNode {
		t.Fatalf("with the kept allocation faults emptied, the check found %v, want node-02's fault alone", items)
	}
	memo.allocs.faults = kept
	// The same nodes, the allocations copied (another slice): checked again.
	again := next
	again.Allocations = slices.Clone(next.Allocations)
	again.Allocations[len(again.Allocations)-1].GPUIDs = []string{"node-01-gpu7"}
	same("the allocations copied and fixed", &again)
	if memo.allocs.first != &again.Allocations[0] || len(memo.allocs.faults) != 1 || memo.allocs.faults[0].ID != "b2" {
		t.Fatalf("the memo holds allocations %p and faults %v, want %p and b2's alone", memo.allocs.first, memo.allocs.faults, &again.Allocations[0])
	}
	// Other nodes: node-02 fixed.
	fixed := *s
	fixed.Nodes = slices.Clone(s.Nodes)
	fixed.Nodes[1].GPUs = slices.Clone(s.Nodes[1].GPUs)
	fixed.Nodes[1].GPUs[0].ID = "node-02-gpu0"
	same("other nodes", &fixed)
	if memo.first != &fixed.Nodes[0] || len(memo.faults) != 0 {
		t.Fatalf("the memo holds nodes %p and %d faults, want the fixed nodes %p and none", memo.first, len(memo.faults), &fixed.Nodes[0])
	}
	if memo.allocs.first != &fixed.Allocations[0] {
		t.Fatalf("the memo holds allocations %p, want those checked against the new nodes %p", memo.allocs.first, &fixed.Allocations[0])
	}
}
