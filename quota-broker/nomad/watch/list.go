package watch

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/nomad/api"
)

// listWorkers bounds the concurrent job reads of a full list.
const listWorkers = 8

// ListAll reads the whole state the broker needs from Nomad into a new
// State: namespaces, node pools, nodes with their device instances (resources=true),
// live allocations with their allocated devices, jobs with their
// summaries (full job specs for namespaces where governed returns true),
// and blocked evaluations. The state's index is the largest index Nomad
// answered with, so an event stream started after it misses nothing. Any
// failed request fails the list: a partial state is never returned.
func ListAll(ctx context.Context, c *api.Client, governed func(namespace string) bool) (*State, error) {
	s := NewState()
	s.governed = governed
	q := func(params map[string]string) *api.QueryOptions {
		return (&api.QueryOptions{Namespace: "*", Params: params}).WithContext(ctx)
	}
	track := func(m *api.QueryMeta) {
		if m != nil && m.LastIndex > s.index {
			s.index = m.LastIndex
		}
	}
	nss, m, err := c.Namespaces().List(q(nil))
	if err != nil {
		return nil, fmt.Errorf("failed to list namespaces: %w", err)
	}
	track(m)
	for _, ns := range nss {
		s.namespaces[ns.Name] = true
	}
	if s.pools, err = listPools(ctx, c); err != nil {
		return nil, err
	}
	nodes, m, err := c.Nodes().List(q(map[string]string{"resources": "true"}))
	if err != nil {
		return nil, fmt.Errorf("failed to list nodes: %w", err)
	}
	track(m)
	for _, n := range nodes {
		s.nodes[n.ID] = nodeFrom(n.ID, n.Name, n.Datacenter, n.NodePool, n.Status, n.SchedulingEligibility, n.Drain, n.NodeResources)
	}
	allocs, m, err := c.Allocations().List(q(map[string]string{"resources": "true"}))
	if err != nil {
		return nil, fmt.Errorf("failed to list allocations: %w", err)
	}
	track(m)
	for _, a := range allocs {
		al := allocFromStub(a)
		if al.Live() {
			s.allocs[al.ID] = al
		}
	}
	jobs, m, err := c.Jobs().List(q(nil))
	if err != nil {
		return nil, fmt.Errorf("failed to list jobs: %w", err)
	}
	track(m)
	var want []*api.JobListStub
	for _, j := range jobs {
		ns := nsOrDefault(j.Namespace)
		if j.JobSummary != nil {
			s.setSummary(plan.JobKey{Namespace: ns, Job: j.ID}, j.JobSummary)
		}
		if governed(ns) {
			want = append(want, j)
		}
	}
	full, err := readJobs(ctx, c, want)
	if err != nil {
		return nil, err
	}
	for _, j := range full {
		s.jobs[jobKey(j)] = j
	}
	for _, al := range s.allocs {
		s.share(al)
	}
	evals, m, err := c.Evaluations().List((&api.QueryOptions{Namespace: "*", Filter: `Status == "blocked"`}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("failed to list blocked evaluations: %w", err)
	}
	track(m)
	for _, e := range evals {
		if e.Status == api.EvalStatusBlocked {
			s.blocked[e.ID] = e
		}
	}
	return s, nil
}

// listPools reads the names of Nomad's node pools (GET /v1/node/pools;
// the token needs node_pool read). The node pool event topic needs a
// management token, so pools are listed, not watched: ListAll lists them
// and Refresh lists them again when a job names one the state lacks.
func listPools(ctx context.Context, c *api.Client) (map[string]bool, error) {
	list, _, err := c.NodePools().List((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("failed to list node pools: %w", err)
	}
	pools := make(map[string]bool, len(list))
	for _, p := range list {
		pools[p.Name] = true
	}
	return pools, nil
}

// readJobs reads the full specs of stubs with a few requests in flight. A
// job deleted between the list and the read is skipped.
func readJobs(ctx context.Context, c *api.Client, stubs []*api.JobListStub) ([]*api.Job, error) {
	out := make([]*api.Job, len(stubs))
	errs := make([]error, len(stubs))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < listWorkers && w < len(stubs); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				st := stubs[i]
				j, _, err := c.Jobs().Info(st.ID, (&api.QueryOptions{Namespace: nsOrDefault(st.Namespace)}).WithContext(ctx))
				if err != nil && !isNotFound(err) {
					errs[i] = fmt.Errorf("failed to read job %s/%s: %w", nsOrDefault(st.Namespace), st.ID, err)
				}
				out[i] = j
			}
		}()
	}
	for i := range stubs {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	jobs := out[:0]
	for _, j := range out {
		if j != nil {
			jobs = append(jobs, j)
		}
	}
	return jobs, nil
}

// isNotFound reports whether err is Nomad's HTTP 404.
func isNotFound(err error) bool {
	var ue api.UnexpectedResponseError
	if errors.As(err, &ue) {
		return ue.StatusCode() == 404
	}
	var uep *api.UnexpectedResponseError
	if errors.As(err, &uep) {
		return uep.StatusCode() == 404
	}
	return false
}
