package snapshot

import (
	"strconv"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// wireIdleGroup is one entry of idle_groups: a task group with a
// gputide-idle scaling policy (plan.IdleGroup, issue 11 item 4).
type wireIdleGroup struct {
	Namespace   string   `json:"namespace" snap:"required,intern"`
	Job         string   `json:"job" snap:"required"`
	Group       string   `json:"group" snap:"required,intern"`
	Priority    int64    `json:"priority" snap:"required"`
	GPUs        int64    `json:"gpus" snap:"required"`
	Model       string   `json:"model,omitempty" snap:"intern"`
	Datacenters []string `json:"datacenters,omitempty" snap:"intern,unique=datacenter"`
	NodePool    string   `json:"node_pool,omitempty" snap:"intern"`
	// Flavors are the group's allowed flavors in order (DESIGN L13);
	// none: every flavor of the tree in tree order.
	Flavors []string `json:"flavors,omitempty" snap:"intern,unique=flavor"`
	Max     int64    `json:"max" snap:"required"`
	Count   int64    `json:"count" snap:"required"`
}

// idleGroups converts idle_groups; the rest of their rules are
// plan.Snapshot.Validate's.
func (c *converter) idleGroups(ws []wireIdleGroup) ([]plan.IdleGroup, error) {
	var out []plan.IdleGroup
	for i := range ws {
		w := &ws[i]
		path := "idle_groups[" + strconv.Itoa(i) + "]"
		if err := priority(path+".priority", w.Priority); err != nil {
			return nil, err
		}
		if err := positive(path+".gpus", w.GPUs); err != nil {
			return nil, err
		}
		if err := positive(path+".max", w.Max); err != nil {
			return nil, err
		}
		if w.Count < 0 || w.Count > quota.MaxGPUs {
			return nil, errf(path+".count", "must be in 0-%d, not %d", quota.MaxGPUs, w.Count)
		}
		out = append(out, plan.IdleGroup{Namespace: w.Namespace, Job: w.Job, Group: w.Group, Priority: int(w.Priority),
			GPUs: int(w.GPUs), Model: w.Model, Datacenters: nilIfEmpty(w.Datacenters), NodePool: w.NodePool, Flavors: nilIfEmpty(w.Flavors),
			Max: int(w.Max), Count: int(w.Count)})
	}
	return out, nil
}

// idleGroupsToWire is the encoder's side: nil when there are none, so that
// snapshots without idle groups are written as before.
func idleGroupsToWire(gs []plan.IdleGroup) []wireIdleGroup {
	var out []wireIdleGroup
	for _, g := range gs {
		out = append(out, wireIdleGroup{Namespace: g.Namespace, Job: g.Job, Group: g.Group, Priority: int64(g.Priority),
			GPUs: int64(g.GPUs), Model: g.Model, Datacenters: append([]string(nil), g.Datacenters...), NodePool: g.NodePool,
			Flavors: append([]string(nil), g.Flavors...), Max: int64(g.Max), Count: int64(g.Count)})
	}
	return out
}
