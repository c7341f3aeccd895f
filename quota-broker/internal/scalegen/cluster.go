// Package scalegen generates a GPU cluster at scale for the broker's scale
// benchmark (issue 18, docs/benchmarks.md): a Nomad state of Size.Nodes
// nodes of 8 GPUs, served by a fake Nomad (Cluster.Handler) as Nomad
// v1.11.3 serves its lists, job reads and event stream, so that the
// broker's watcher decodes it with its own code; and the broker's store
// filled through the store package's own API (Fill). Every item is shaped
// after the responses recorded from a real Nomad (the fake Nomad's
// testdata), so payloads and decoded specs have their real size.
//
// Sizes grow together with the nodes (Size): at 5,000 nodes, 10,000 jobs,
// 20,000 allocations, 10,000 job records, 1,000 bookings and 20,000
// history entries.
package scalegen

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/hashicorp/nomad/api"
)

// GPUsPerNode is the GPUs of every generated node.
const GPUsPerNode = 8

// Teams is the number of teams: namespaces team-00 .. team-NN, each bound
// to its own quota node under one root.
const Teams = 10

// HoldingPool is the node pool governed jobs wait in (the broker's
// default, build.DefaultHoldingPool).
const HoldingPool = "gputide-queue"

// Size is the scale of a generated cluster; everything else follows the
// node count.
type Size struct {
	Nodes int
}

// Jobs is the number of running jobs: 2 per node, each of 2 allocations.
func (s Size) Jobs() int { return 2 * s.Nodes }

// Allocs is the number of live allocations: 4 per node.
func (s Size) Allocs() int { return 4 * s.Nodes }

// Records is the number of job records in the store: one per job.
func (s Size) Records() int { return s.Jobs() }

// Bookings is the number of future bookings in the store: 1 per 5 nodes.
func (s Size) Bookings() int { return s.Nodes / 5 }

// History is the number of history entries in the store: 4 per node, one
// ended booking per booking and the rest preemptions.
func (s Size) History() int { return 4 * s.Nodes }

// Check reports a size the generator cannot build: fewer than Teams nodes
// (every team needs a nominal), or a node count that is not a multiple of
// Teams (the nominals must add up to the root).
func (s Size) Check() error {
	if s.Nodes < Teams || s.Nodes%Teams != 0 {
		return fmt.Errorf("scalegen: nodes = %d: want a positive multiple of %d", s.Nodes, Teams)
	}
	return nil
}

// Team returns the namespace of team i.
func Team(i int) string { return fmt.Sprintf("team-%02d", i) }

// QuotaNode returns the quota node team i's namespace is bound to.
func QuotaNode(i int) string { return fmt.Sprintf("Team%02d", i) }

// QuotaHCL is the quota tree of a cluster of size s: a root "Fleet" of
// every GPU with child-level preemption, and one child per team with an
// equal share.
func QuotaHCL(s Size) string {
	total := s.Nodes * GPUsPerNode
	out := fmt.Sprintf("quota \"Fleet\" {\n  gpus             = %d\n  child_preemption = true\n", total)
	for i := range Teams {
		out += fmt.Sprintf("  quota %q {\n    gpus       = %d\n    namespaces = [%q]\n  }\n", QuotaNode(i), total/Teams, Team(i))
	}
	return out + "}\n"
}

// node is a generated node: its index names it and its GPUs.
type node struct {
	id   string
	gpus []string
	used int
}

// alloc is a generated allocation.
type alloc struct {
	id   string
	job  int // index into Cluster.jobs
	node int // index into Cluster.nodes
	gpus []string
}

// job is a generated running job.
type job struct {
	ns, id  string
	service bool
	gpus    int // per allocation
	count   int
	index   uint64 // its create, modify and job modify index
	submit  time.Time
	started time.Time
}

// NodeID returns the ID of node i (sorted like i).
func NodeID(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-00000000aaaa", i) }

func allocID(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-00000000bbbb", i) }

// templates are decoded responses recorded from Nomad v1.11.3.
type templates struct {
	node    api.NodeListStub
	alloc   api.AllocationListStub
	batch   api.Job
	service api.Job
}

// recorded is the folder of responses captured from Nomad v1.11.3
// (quota-broker/nomad/internal/fakenomad/testdata).
func recorded() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "nomad", "internal", "fakenomad", "testdata", "nomad-1.11.3")
}

func loadTemplates() (*templates, error) {
	var t templates
	var nodes []api.NodeListStub
	var allocs []api.AllocationListStub
	for _, f := range []struct {
		name string
		v    any
	}{
		{"nodes.json", &nodes},
		{"allocations.json", &allocs},
		{"job-workspace-c-training.json", &t.batch},
		{"job-workspace-a-inference.json", &t.service},
	} {
		data, err := os.ReadFile(filepath.Join(recorded(), f.name))
		if err != nil {
			return nil, fmt.Errorf("scalegen: template: %w", err)
		}
		if err := json.Unmarshal(data, f.v); err != nil {
			return nil, fmt.Errorf("scalegen: template %s: %w", f.name, err)
		}
	}
	if len(nodes) == 0 || len(allocs) == 0 {
		return nil, fmt.Errorf("scalegen: the recorded nodes.json or allocations.json is empty")
	}
	t.node, t.alloc = nodes[0], allocs[0]
	return &t, nil
}

// layout places the jobs and allocations of a cluster of size s: job j
// runs in namespace team-(j mod Teams), even jobs are batch (2 x 1 GPU),
// odd ones services (2 x 2 GPUs). The services' allocations fill the even
// nodes (4 x 2 GPUs each) and the batch jobs' allocations take half of
// each odd node (4 x 1 GPU), round robin: three quarters of the GPUs are
// in use, half the nodes are full and half have 4 free GPUs (where a new
// 4-GPU job fits), and every team uses 75% of its nominal.
func layout(s Size, now time.Time) ([]node, []job, []alloc) {
	nodes := make([]node, s.Nodes)
	for i := range nodes {
		nodes[i].id = NodeID(i)
		nodes[i].gpus = make([]string, GPUsPerNode)
		for g := range GPUsPerNode {
			nodes[i].gpus[g] = fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", i, g)
		}
	}
	jobs := make([]job, s.Jobs())
	for j := range jobs {
		service := j%2 == 1
		name := fmt.Sprintf("train-%05d", j)
		gpus := 1
		if service {
			name, gpus = fmt.Sprintf("serve-%05d", j), 2
		}
		age := time.Duration(s.Jobs()-j) * time.Minute
		jobs[j] = job{ns: Team(j % Teams), id: name, service: service, gpus: gpus, count: 2, index: uint64(1000 + j),
			submit: now.Add(-age - time.Minute).UTC(), started: now.Add(-age).UTC()}
	}
	allocs := make([]alloc, 0, s.Allocs())
	half := s.Nodes / 2
	placed := [2]int{} // allocations placed so far: batch, service
	for k := range s.Allocs() {
		j := k / 2
		kind := j % 2
		n := 2*(placed[kind]%half) + 1 - kind // batch: odd nodes; services: even ones
		placed[kind]++
		want := jobs[j].gpus
		a := alloc{id: allocID(k), job: j, node: n, gpus: nodes[n].gpus[nodes[n].used : nodes[n].used+want]}
		nodes[n].used += want
		allocs = append(allocs, a)
	}
	return nodes, jobs, allocs
}

// nodeStub is node n as GET /v1/nodes?resources=true lists it.
func (t *templates) nodeStub(i int, n node) *api.NodeListStub {
	st := t.node
	st.ID, st.Name = n.id, fmt.Sprintf("gpu-%05d", i)
	st.CreateIndex, st.ModifyIndex = uint64(10+i), uint64(10+i)
	res := *t.node.NodeResources
	dev := *t.node.NodeResources.Devices[0]
	dev.Instances = make([]*api.NodeDevice, len(n.gpus))
	for g, id := range n.gpus {
		inst := *t.node.NodeResources.Devices[0].Instances[0]
		inst.ID = id
		dev.Instances[g] = &inst
	}
	res.Devices = []*api.NodeDeviceResource{&dev}
	st.NodeResources = &res
	return &st
}

// allocStub is allocation a as GET /v1/allocations?resources=true lists it.
func (t *templates) allocStub(a alloc, j job, n node, nodeIndex int) *api.AllocationListStub {
	st := t.alloc
	st.ID, st.Namespace, st.JobID = a.id, j.ns, j.id
	st.TaskGroup, st.JobType, st.Name = "worker", "batch", fmt.Sprintf("%s.worker[%d]", j.id, a.job%2)
	if j.service {
		st.TaskGroup, st.JobType, st.Name = "server", "service", fmt.Sprintf("%s.server[%d]", j.id, a.job%2)
	}
	st.NodeID, st.NodeName = n.id, fmt.Sprintf("gpu-%05d", nodeIndex)
	st.CreateIndex, st.ModifyIndex = j.index+1, j.index+2
	st.CreateTime, st.ModifyTime = j.started.UnixNano(), j.started.UnixNano()
	res := *t.alloc.AllocatedResources
	res.Tasks = map[string]*api.AllocatedTaskResources{}
	for name, tr := range t.alloc.AllocatedResources.Tasks {
		c := *tr
		dev := *tr.Devices[0]
		dev.DeviceIDs = a.gpus
		c.Devices = []*api.AllocatedDeviceResource{&dev}
		res.Tasks[name] = &c
	}
	st.AllocatedResources = &res
	st.TaskStates = map[string]*api.TaskState{}
	for name, ts := range t.alloc.TaskStates {
		c := *ts
		c.StartedAt = j.started
		st.TaskStates[name] = &c
	}
	return &st
}

// spec is the full job j as GET /v1/job/<id> returns it, in pool with
// count allocations of gpus GPUs each.
func (t *templates) spec(j job, pool, status string) *api.Job {
	tmpl := &t.batch
	if j.service {
		tmpl = &t.service
	}
	c := *tmpl
	ns, id, st := j.ns, j.id, status
	c.Namespace, c.ID, c.Name, c.NodePool, c.Status = &ns, &id, &id, &pool, &st
	idx := j.index
	c.CreateIndex, c.ModifyIndex, c.JobModifyIndex = &idx, &idx, &idx
	submit := j.submit.UnixNano()
	c.SubmitTime = &submit
	c.Meta = map[string]string{"gputide_pool": "default", "gputide_submitted": j.submit.Format(time.RFC3339Nano)}
	tg := *tmpl.TaskGroups[0]
	count := j.count
	tg.Count = &count
	task := *tg.Tasks[0]
	res := *task.Resources
	dev := *res.Devices[0]
	gpus := uint64(j.gpus)
	dev.Count = &gpus
	res.Devices = []*api.RequestedDevice{&dev}
	task.Resources = &res
	tg.Tasks = []*api.Task{&task}
	c.TaskGroups = []*api.TaskGroup{&tg}
	return &c
}

// summary is job j's summary: running allocations, or queued ones.
func summary(j job, running, queued int) *api.JobSummary {
	group := "worker"
	if j.service {
		group = "server"
	}
	return &api.JobSummary{JobID: j.id, Namespace: j.ns, CreateIndex: j.index, ModifyIndex: j.index,
		Summary: map[string]api.TaskGroupSummary{group: {Running: running, Queued: queued}}}
}

// stub is job j as GET /v1/jobs lists it (the list carries no node pool).
func stub(j job, status string, sum *api.JobSummary) *api.JobListStub {
	typ, prio := "batch", 50
	if j.service {
		typ, prio = "service", 80
	}
	return &api.JobListStub{ID: j.id, Name: j.id, Namespace: j.ns, Datacenters: []string{"*"}, Type: typ,
		Priority: prio, Status: status, JobSummary: sum, CreateIndex: j.index, ModifyIndex: j.index, JobModifyIndex: j.index,
		SubmitTime: j.submit.UnixNano()}
}
