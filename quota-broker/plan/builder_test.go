package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// t0 is the instant every test snapshot is taken at.
var t0 = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

const h100 = "NVIDIA H100 80GB HBM3"

// snapBuilder builds test snapshots fluently, in the style of Kueue's
// workload builders.
type snapBuilder struct {
	s    *Snapshot
	next map[string]int // node ID -> next free GPU index
}

// referenceTree is DESIGN §1's tree: Quota1 128 with child-level
// preemption (workspace-a), Quota1.1 48 (workspace-b), Quota1.2 80
// (workspace-c).
func referenceTree() *quota.Node {
	return &quota.Node{Name: "Quota1", GPUs: quota.Plain(128), ChildPreemption: true, Namespaces: []string{"workspace-a"},
		Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: quota.Plain(48), Namespaces: []string{"workspace-b"}},
			{Name: "Quota1.2", GPUs: quota.Plain(80), Namespaces: []string{"workspace-c"}},
		}}
}

func newSnap(tree *quota.Node) *snapBuilder {
	return &snapBuilder{s: &Snapshot{Time: t0, Quota: tree, Settings: quota.DefaultSettings()}, next: map[string]int{}}
}

// nodes adds n nodes "node-01".. with gpus GPUs of model each, in dc1/default.
func (b *snapBuilder) nodes(n, gpus int, model string) *snapBuilder {
	start := len(b.s.Nodes)
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("node-%02d", start+i)
		node := Node{ID: id, Datacenter: "dc1", NodePool: "default"}
		for g := 0; g < gpus; g++ {
			node.GPUs = append(node.GPUs, GPU{ID: fmt.Sprintf("%s-gpu%d", id, g), Model: model, Healthy: true})
		}
		b.s.Nodes = append(b.s.Nodes, node)
	}
	return b
}

type allocOpt func(*Allocation)

// key is the GroupKey written "namespace/job/group" in a test (no part of
// a test's names contains "/").
func key(c string) GroupKey {
	p := strings.SplitN(c, "/", 3)
	return GroupKey{Namespace: p[0], Job: p[1], Group: p[2]}
}

func idle(a *Allocation)    { a.Idle = true }
func elastic(a *Allocation) { a.Elastic = true }
func started(ago time.Duration) allocOpt {
	return func(a *Allocation) { a.StartedAt = t0.Add(-ago) }
}
func priority(p int) allocOpt        { return func(a *Allocation) { a.Priority = p } }
func stoppingFor(c string) allocOpt  { return func(a *Allocation) { a.StoppingFor = key(c) } }
func reservation(id string) allocOpt { return func(a *Allocation) { a.Reservation = id } }
func jobType(t JobType) allocOpt     { return func(a *Allocation) { a.Type = t } }

// alloc adds a batch allocation of job in ns with gpus GPUs on node,
// priority 50, started an hour ago; opts change it.
func (b *snapBuilder) alloc(id, ns, job, node string, gpus int, opts ...allocOpt) *snapBuilder {
	a := Allocation{ID: id, Namespace: ns, Job: job, Group: "worker", Type: JobBatch, Priority: 50,
		Node: node, StartedAt: t0.Add(-time.Hour)}
	for g := 0; g < gpus; g++ {
		a.GPUIDs = append(a.GPUIDs, fmt.Sprintf("%s-gpu%d", node, b.next[node]))
		b.next[node]++
	}
	for _, o := range opts {
		o(&a)
	}
	b.s.Allocations = append(b.s.Allocations, a)
	return b
}

type pendOpt func(*Pending)

func pIdle(p *Pending)        { p.Idle = true }
func pPriority(n int) pendOpt { return func(p *Pending) { p.Priority = n } }
func pType(t JobType) pendOpt { return func(p *Pending) { p.Type = t } }
func pGroup(g string) pendOpt { return func(p *Pending) { p.Group = g } }
func pModel(m string) pendOpt { return func(p *Pending) { p.Model = m } }
func pSubmitted(ago time.Duration) pendOpt {
	return func(p *Pending) { p.SubmittedAt = t0.Add(-ago) }
}
func pFlex(wait, run time.Duration) pendOpt {
	return func(p *Pending) { p.Flex = &Flex{MaxWait: wait, MaxRun: run} }
}

// pending adds a pending service group "server" of job in ns: count
// allocations of gpus GPUs, priority 50, submitted a minute ago.
func (b *snapBuilder) pending(ns, job string, count, gpus int, opts ...pendOpt) *snapBuilder {
	p := Pending{Namespace: ns, Job: job, Group: "server", Type: JobService, Priority: 50, Count: count, GPUs: gpus,
		Datacenters: []string{"dc1"}, NodePool: "default", SubmittedAt: t0.Add(-time.Minute)}
	for _, o := range opts {
		o(&p)
	}
	b.s.Pending = append(b.s.Pending, p)
	return b
}

func (b *snapBuilder) settings(minRuntime, debtGrace time.Duration) *snapBuilder {
	b.s.Settings = quota.Settings{MinRuntime: minRuntime, DebtGrace: debtGrace}
	return b
}

func (b *snapBuilder) build() *Snapshot { return b.s }

// mustPlan computes the plan or fails the test.
func mustPlan(t *testing.T, s *Snapshot) *Plan {
	t.Helper()
	p, err := Compute(s)
	if err != nil {
		t.Fatalf("Compute: %v", err)
	}
	return p
}

// stops returns the IDs of the allocations the plan stops, in plan order.
func stops(p *Plan) []string {
	var out []string
	for _, a := range p.Actions {
		if a.Action == ActionStop {
			out = append(out, a.Alloc)
		}
	}
	return out
}

// actionsOf returns the plan's actions of one kind.
func actionsOf(p *Plan, kind ActionKind) []Action {
	var out []Action
	for _, a := range p.Actions {
		if a.Action == kind {
			out = append(out, a)
		}
	}
	return out
}

// usageOf returns the usage row of quota q.
func usageOf(t *testing.T, p *Plan, q string) Usage {
	t.Helper()
	for _, u := range p.Usage {
		if u.Quota == q {
			return u
		}
	}
	t.Fatalf("no usage for quota %q", q)
	return Usage{}
}
