package scalegen

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Cluster is a generated Nomad cluster and the fake Nomad that serves it.
// The running jobs, their allocations and the nodes never change; jobs
// submitted with Submit come and go (Purge). It is safe for concurrent use.
type Cluster struct {
	Size Size
	// Now is the instant the cluster was generated at: jobs were
	// submitted and started before it.
	Now time.Time

	t      *templates
	nodes  []node
	jobs   []job
	allocs []alloc
	byKey  map[string]int // "ns/id" -> index into jobs

	mu         sync.Mutex
	index      uint64              // the Raft index the fake answers with
	submitted  map[string]*api.Job // "ns/id" -> a job submitted by Submit, as registered last
	registered []Register
	events     chan []byte // event stream lines (JSON), sent on the open stream
}

// Register is one job register call the fake Nomad received.
type Register struct {
	Namespace, Job, NodePool string
	EnforceIndex             bool
	JobModifyIndex           uint64 // the index enforced
}

// New generates a cluster of size s at now.
func New(s Size, now time.Time) (*Cluster, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	t, err := loadTemplates()
	if err != nil {
		return nil, err
	}
	nodes, jobs, allocs := layout(s, now)
	c := &Cluster{Size: s, Now: now, t: t, nodes: nodes, jobs: jobs, allocs: allocs, byKey: make(map[string]int, len(jobs)),
		index: uint64(1000 + 10*len(jobs)), submitted: map[string]*api.Job{}, events: make(chan []byte, 64)}
	for i, j := range jobs {
		c.byKey[j.ns+"/"+j.id] = i
	}
	return c, nil
}

// FreeGPUs is the GPUs no allocation uses.
func (c *Cluster) FreeGPUs() int {
	n := 0
	for _, nd := range c.nodes {
		n += GPUsPerNode - nd.used
	}
	return n
}

// Registered returns the job register calls received so far.
func (c *Cluster) Registered() []Register {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Register(nil), c.registered...)
}

// next advances the fake's Raft index and returns it; c.mu is held.
func (c *Cluster) next() uint64 {
	c.index++
	return c.index
}

// Submit registers a new batch job ns/id of one allocation of gpus GPUs
// into the holding pool, as a user's submission the broker has not
// admitted yet: the event stream carries the job (JobRegistered) and its
// blocked evaluation, and the fake then answers the job's reads and its
// summary (one allocation queued). It returns the job's modify index.
func (c *Cluster) Submit(ns, id string, gpus int) uint64 {
	c.mu.Lock()
	idx := c.next()
	j := job{ns: ns, id: id, gpus: gpus, count: 1, index: idx, submit: c.Now, started: c.Now}
	spec := c.t.spec(j, HoldingPool, "pending")
	c.submitted[ns+"/"+id] = spec
	evalIdx := c.next()
	c.mu.Unlock()
	eval := &api.Evaluation{ID: fmt.Sprintf("%08x-0000-4000-8000-00000000eeee", evalIdx), Namespace: ns, JobID: id,
		Priority: 50, Type: "batch", TriggeredBy: "queued-allocs", Status: api.EvalStatusBlocked,
		CreateIndex: evalIdx, ModifyIndex: evalIdx, JobModifyIndex: idx}
	c.send(evalIdx, []api.Event{
		{Topic: api.TopicJob, Type: "JobRegistered", Key: id, Index: idx, Payload: map[string]any{"Job": spec}},
		{Topic: api.TopicEvaluation, Type: "JobRegistered", Key: eval.ID, Index: evalIdx,
			Payload: map[string]any{"Evaluation": eval}},
	})
	return idx
}

// Purge stops and purges a job made by Submit (nomad job stop -purge): the
// stream carries the stopped job (JobDeregistered) and the fake answers
// 404 for it from then on.
func (c *Cluster) Purge(ns, id string) {
	c.mu.Lock()
	spec := c.submitted[ns+"/"+id]
	delete(c.submitted, ns+"/"+id)
	idx := c.next()
	c.mu.Unlock()
	if spec == nil {
		return
	}
	stopped := *spec
	stop, dead := true, "dead"
	stopped.Stop, stopped.Status = &stop, &dead
	stopped.ModifyIndex, stopped.JobModifyIndex = &idx, &idx
	c.send(idx, []api.Event{{Topic: api.TopicJob, Type: "JobDeregistered", Key: id, Index: idx,
		Payload: map[string]any{"Job": &stopped}}})
}

// send queues one batch of events for the open stream.
func (c *Cluster) send(index uint64, evs []api.Event) {
	line, err := json.Marshal(api.Events{Index: index, Events: evs})
	if err != nil {
		panic(fmt.Sprintf("scalegen: events do not encode: %v", err)) // built here from api types: a bug
	}
	c.events <- line
}

// Handler is the fake Nomad: the list endpoints the watcher reads (the
// lists generated on each request, so the fake keeps no payload), job and
// summary reads, the event stream (Submit and Purge feed it), the
// registers the broker makes (recorded, answered with a new job modify
// index) and the few other calls of an agent (ACLs off, the leader, the
// holding pool, no scaling policies).
func (c *Cluster) Handler() http.Handler {
	return http.HandlerFunc(c.serve)
}

func (c *Cluster) serve(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	w.Header().Set("X-Nomad-Index", fmt.Sprint(c.index))
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	p := r.URL.Path
	switch {
	case p == "/v1/event/stream":
		c.stream(w, r)
	case r.Method == http.MethodPut && p == "/v1/jobs":
		c.register(w, r)
	case r.Method == http.MethodPut && strings.HasSuffix(p, "/stop"):
		fmt.Fprint(w, `{"EvalID":"eval-stop"}`)
	case p == "/v1/acl/token/self": // Nomad's answer with ACLs off
		http.Error(w, "ACL support disabled", http.StatusBadRequest)
	case p == "/v1/status/leader":
		fmt.Fprint(w, `"127.0.0.1:4647"`)
	case p == "/v1/namespaces":
		list := []*api.Namespace{{Name: "default"}}
		for i := range Teams {
			list = append(list, &api.Namespace{Name: Team(i)})
		}
		writeJSON(w, list)
	case p == "/v1/node/pools":
		writeJSON(w, []*api.NodePool{{Name: "all"}, {Name: "default"}, {Name: HoldingPool}})
	case p == "/v1/node/pool/"+HoldingPool:
		writeJSON(w, &api.NodePool{Name: HoldingPool})
	case p == "/v1/nodes":
		c.listNodes(w)
	case p == "/v1/allocations":
		c.listAllocs(w)
	case p == "/v1/jobs":
		c.listJobs(w)
	case p == "/v1/evaluations", p == "/v1/scaling/policies":
		fmt.Fprint(w, "[]")
	case strings.HasPrefix(p, "/v1/job/"):
		c.readJob(w, r)
	default:
		http.Error(w, "not found", http.StatusNotFound)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	_ = json.NewEncoder(w).Encode(v)
}

// writeList writes a JSON array of n items, each made by item(i), without
// holding the whole list.
func writeList(w http.ResponseWriter, n int, item func(i int) any) {
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := json.NewEncoder(bw)
	_ = bw.WriteByte('[')
	for i := range n {
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		if err := enc.Encode(item(i)); err != nil {
			return
		}
	}
	_ = bw.WriteByte(']')
	_ = bw.Flush()
}

func (c *Cluster) listNodes(w http.ResponseWriter) {
	writeList(w, len(c.nodes), func(i int) any { return c.t.nodeStub(i, c.nodes[i]) })
}

func (c *Cluster) listAllocs(w http.ResponseWriter) {
	writeList(w, len(c.allocs), func(i int) any {
		a := c.allocs[i]
		return c.t.allocStub(a, c.jobs[a.job], c.nodes[a.node], a.node)
	})
}

func (c *Cluster) listJobs(w http.ResponseWriter) {
	c.mu.Lock()
	var extra []*api.JobListStub
	for _, spec := range c.submitted {
		j := job{ns: *spec.Namespace, id: *spec.ID, index: *spec.JobModifyIndex, submit: c.Now}
		extra = append(extra, stub(j, *spec.Status, summary(j, 0, 1)))
	}
	c.mu.Unlock()
	writeList(w, len(c.jobs)+len(extra), func(i int) any {
		if i >= len(c.jobs) {
			return extra[i-len(c.jobs)]
		}
		j := c.jobs[i]
		return stub(j, "running", summary(j, j.count, 0))
	})
}

// readJob answers GET /v1/job/<id> and /v1/job/<id>/summary.
func (c *Cluster) readJob(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/job/")
	id, sum := strings.CutSuffix(rest, "/summary")
	ns := r.URL.Query().Get("namespace")
	if ns == "" {
		ns = "default"
	}
	key := ns + "/" + id
	c.mu.Lock()
	spec := c.submitted[key]
	c.mu.Unlock()
	if spec != nil {
		if sum {
			writeJSON(w, summary(job{ns: ns, id: id, index: *spec.JobModifyIndex}, 0, 1))
		} else {
			writeJSON(w, spec)
		}
		return
	}
	i, ok := c.byKey[key]
	if !ok {
		http.Error(w, "job not found", http.StatusNotFound)
		return
	}
	j := c.jobs[i]
	if sum {
		writeJSON(w, summary(j, j.count, 0))
		return
	}
	writeJSON(w, c.t.spec(j, "default", "running"))
}

// register answers PUT /v1/jobs as Nomad does: the job is stored as sent
// (so a later read returns it) with a new job modify index.
func (c *Cluster) register(w http.ResponseWriter, r *http.Request) {
	var req api.JobRegisterRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Job == nil || req.Job.ID == nil {
		http.Error(w, "bad register body", http.StatusBadRequest)
		return
	}
	ns := r.URL.Query().Get("namespace")
	if req.Job.Namespace != nil && *req.Job.Namespace != "" {
		ns = *req.Job.Namespace
	}
	pool := ""
	if req.Job.NodePool != nil {
		pool = *req.Job.NodePool
	}
	c.mu.Lock()
	idx := c.next()
	c.registered = append(c.registered, Register{Namespace: ns, Job: *req.Job.ID, NodePool: pool,
		EnforceIndex: req.EnforceIndex, JobModifyIndex: req.JobModifyIndex})
	if _, ok := c.submitted[ns+"/"+*req.Job.ID]; ok {
		j := *req.Job
		j.ModifyIndex, j.JobModifyIndex = &idx, &idx
		c.submitted[ns+"/"+*req.Job.ID] = &j
	}
	c.mu.Unlock()
	writeJSON(w, &api.JobRegisterResponse{EvalID: fmt.Sprintf("%08x-0000-4000-8000-00000000eeee", idx), JobModifyIndex: idx})
}

// stream serves the event stream: a keep-alive, then each batch queued by
// Submit and Purge, until the client goes away.
func (c *Cluster) stream(w http.ResponseWriter, r *http.Request) {
	fl, _ := w.(http.Flusher)
	w.WriteHeader(http.StatusOK)
	fmt.Fprintln(w, "{}")
	if fl != nil {
		fl.Flush()
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case line := <-c.events:
			_, _ = w.Write(append(line, '\n'))
			if fl != nil {
				fl.Flush()
			}
		}
	}
}
