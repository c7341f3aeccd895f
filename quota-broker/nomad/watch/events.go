package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

// Apply folds a batch of stream events into the state. Events older than
// what the state holds (by modify index) are ignored, so replaying events
// the list already saw does no harm. Jobs, summaries and blocked
// evaluations of namespaces outside governed are not kept, except that
// allocations and nodes of every namespace are, since they hold GPUs.
func (s *State) Apply(evs *api.Events, log hclog.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range evs.Events {
		e := &evs.Events[i]
		if err := s.applyOne(e); err != nil {
			log.Warn("ignored an event Nomad sent", "topic", e.Topic, "type", e.Type, "key", e.Key, "error", err)
		}
	}
	if evs.Index > s.index {
		s.index = evs.Index
	}
}

func (s *State) applyOne(e *api.Event) error {
	switch e.Topic {
	case api.TopicJob:
		pl, err := decodePayload(e)
		j, deleted := pl.Job, pl.Deleted
		if err != nil || j == nil {
			return fmt.Errorf("bad job payload: %v", err)
		}
		k := jobKey(j)
		if deleted {
			delete(s.jobs, k)
			s.setSummary(k, nil)
			s.touchJobs()
			return nil
		}
		if s.governed != nil && !s.governed(nsOrDefault(str(j.Namespace))) {
			return nil
		}
		if old := s.jobs[k]; old != nil && old.ModifyIndex != nil && j.ModifyIndex != nil && *old.ModifyIndex > *j.ModifyIndex {
			return nil
		}
		s.jobs[k] = j
		s.dirty[k] = true
		s.touchJobs()
	case api.TopicAllocation:
		pl, err := decodePayload(e)
		a := pl.Allocation
		if err != nil || a == nil {
			return fmt.Errorf("bad allocation payload: %v", err)
		}
		al := allocFromFull(a)
		if old := s.allocs[al.ID]; old != nil {
			if old.ModifyIndex > al.ModifyIndex {
				return nil
			}
			if al.JobType == "" {
				al.JobType = old.JobType
			}
			if len(al.GPUIDs) == 0 {
				al.GPUIDs = old.GPUIDs
			}
		}
		if !al.Live() {
			delete(s.allocs, al.ID)
		} else {
			s.share(al)
			s.allocs[al.ID] = al
		}
		s.touchAllocs()
		if s.governed == nil || s.governed(al.Namespace) {
			s.dirty[al.JobKey()] = true
		}
	case api.TopicEvaluation:
		pl, err := decodePayload(e)
		ev := pl.Evaluation
		if err != nil || ev == nil {
			return fmt.Errorf("bad evaluation payload: %v", err)
		}
		if ev.Status == api.EvalStatusBlocked {
			s.blocked[ev.ID] = ev
		} else {
			delete(s.blocked, ev.ID)
		}
		if s.governed == nil || s.governed(nsOrDefault(ev.Namespace)) {
			s.dirty[plan.JobKey{Namespace: nsOrDefault(ev.Namespace), Job: ev.JobID}] = true
		}
	case api.TopicNode:
		pl, err := decodePayload(e)
		n := pl.Node
		if err != nil || n == nil {
			return fmt.Errorf("bad node payload: %v", err)
		}
		s.touchNodes()
		if e.Type == "NodeDeregistration" {
			delete(s.nodes, n.ID)
			return nil
		}
		s.nodes[n.ID] = nodeFrom(n.ID, n.Name, n.Datacenter, n.NodePool, n.Status, n.SchedulingEligibility,
			n.DrainStrategy != nil, n.NodeResources)
	case "Namespace":
		raw, _ := e.Payload["Namespace"].(map[string]any)
		name, _ := raw["Name"].(string)
		if name == "" {
			name = e.Key
		}
		if e.Type == "NamespaceDeleted" {
			delete(s.namespaces, name)
		} else {
			s.namespaces[name] = true
		}
	}
	return nil
}

// payload is an event payload decoded by its JSON field names.
type payload struct {
	Job        *api.Job
	Deleted    bool
	Allocation *api.Allocation
	Evaluation *api.Evaluation
	Node       *api.Node
}

// decodePayload decodes an event payload through JSON. The api package's
// own Event.Job() decodes with mapstructure, which follows the jobspec's
// mapstructure tags (node_pool, ...) and so drops fields such as NodePool
// (seen with Nomad 1.11.3 and api df630b26e78a).
func decodePayload(e *api.Event) (*payload, error) {
	var p payload
	raw, err := json.Marshal(e.Payload)
	if err != nil {
		return &p, err
	}
	err = json.Unmarshal(raw, &p)
	return &p, err
}

// Refresh fetches the summaries of the jobs events have touched since the
// last refresh (the stream carries no summary events). A job Nomad no longer
// knows is dropped. When the stream does not carry the Namespace topic
// (NamespacesListed) it also lists the namespaces again, so a namespace
// created or deleted is seen within one planning cycle. It returns the
// first error; jobs it could not fetch stay marked for the next refresh.
func (s *State) Refresh(ctx context.Context, c *api.Client) error {
	s.mu.Lock()
	keys := make([]plan.JobKey, 0, len(s.dirty))
	for k := range s.dirty {
		keys = append(keys, k)
	}
	s.dirty = map[plan.JobKey]bool{}
	s.mu.Unlock()
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		next  = make(chan plan.JobKey)
	)
	for w := 0; w < listWorkers && w < len(keys); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range next {
				ns, id := k.Namespace, k.Job
				s.mu.RLock()
				before := s.jobs[k]
				s.mu.RUnlock()
				sum, _, err := c.Jobs().Summary(id, (&api.QueryOptions{Namespace: ns}).WithContext(ctx))
				gone := false
				if isNotFound(err) {
					// Purged, or not yet registered: ask for the job itself.
					_, _, ierr := c.Jobs().Info(id, (&api.QueryOptions{Namespace: ns}).WithContext(ctx))
					gone = isNotFound(ierr)
				}
				s.mu.Lock()
				s.touchJobs()
				missing := s.jobs[k] == nil && (s.governed == nil || s.governed(ns))
				switch {
				case err == nil:
					s.setSummary(k, sum)
				case isNotFound(err):
					s.setSummary(k, nil)
					missing = false
					// Drop the job only if no event replaced it meanwhile: a
					// 404 racing a new registration must not lose the new job.
					if gone && s.jobs[k] == before {
						delete(s.jobs, k)
					}
				default:
					s.dirty[k] = true
				}
				s.mu.Unlock()
				if err == nil && missing {
					err = s.fetchJob(ctx, c, k)
				}
				if err != nil && !isNotFound(err) {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("failed to read the summary of job %s: %w", k, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, k := range keys {
		next <- k
	}
	close(next)
	wg.Wait()
	if err := s.refreshPools(ctx, c, keys); err != nil && first == nil {
		first = err
	}
	if err := s.refreshNamespaces(ctx, c); err != nil && first == nil {
		first = err
	}
	return first
}

// metaPool is the job meta key naming the pool a job is admitted to
// (jobmeta.MetaPool).
const metaPool = "gputide_pool"

// refreshPools lists the node pools again when one of the jobs refreshed
// (keys) names in gputide_pool a pool the state does not know: a pool
// created after the last full list is seen on the job's next change. A
// state without a pool list (nil) is left so.
func (s *State) refreshPools(ctx context.Context, c *api.Client, keys []plan.JobKey) error {
	s.mu.RLock()
	unknown := false
	for _, k := range keys {
		j := s.jobs[k]
		if s.pools == nil || j == nil {
			continue
		}
		if p := j.Meta[metaPool]; p != "" && !s.pools[p] {
			unknown = true
			break
		}
	}
	s.mu.RUnlock()
	if !unknown {
		return nil
	}
	pools, err := listPools(ctx, c)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.pools = pools
	s.touchJobs()
	s.touchPools()
	s.mu.Unlock()
	return nil
}

// fetchJob reads a job the state lacks (its event was older than a
// summary that says it exists) and stores it unless a newer copy arrived.
func (s *State) fetchJob(ctx context.Context, c *api.Client, k plan.JobKey) error {
	ns, id := k.Namespace, k.Job
	j, _, err := c.Jobs().Info(id, (&api.QueryOptions{Namespace: ns}).WithContext(ctx))
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		s.mu.Lock()
		s.dirty[k] = true
		s.mu.Unlock()
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.jobs[k]; old == nil || old.ModifyIndex == nil || j.ModifyIndex == nil || *old.ModifyIndex < *j.ModifyIndex {
		s.jobs[k] = j
		s.touchJobs()
	}
	return nil
}
