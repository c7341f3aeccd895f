package snapshot

import (
	"strconv"

	"github.com/gputide/gputide/quota-broker/plan"
)

// wirePrewarm is one entry of prewarm: a scheduled scale-up within
// drain_horizon that the core places ahead of time (plan.Prewarm, DESIGN
// L5 "Pre-warm", issue 11 item 5). at and until are RFC 3339 times.
type wirePrewarm struct {
	Namespace   string   `json:"namespace" snap:"required,intern"`
	Job         string   `json:"job" snap:"required"`
	Group       string   `json:"group" snap:"required,intern"`
	Type        string   `json:"type" snap:"required,intern"`
	Priority    int64    `json:"priority" snap:"required"`
	GPUs        int64    `json:"gpus" snap:"required"`
	Model       string   `json:"model,omitempty" snap:"intern"`
	Datacenters []string `json:"datacenters,omitempty" snap:"intern,unique=datacenter"`
	NodePool    string   `json:"node_pool,omitempty" snap:"intern"`
	// Flavors are the group's allowed flavors in order (DESIGN L13);
	// none: every flavor of the tree in tree order.
	Flavors []string `json:"flavors,omitempty" snap:"intern,unique=flavor"`
	At      string   `json:"at" snap:"required"`
	Count   int64    `json:"count" snap:"required"`
	Until   string   `json:"until" snap:"required"`
}

// prewarms converts prewarm; the rest of their rules (type, until after
// at, listed once) are plan.Snapshot.Validate's.
func (c *converter) prewarms(ws []wirePrewarm) ([]plan.Prewarm, error) {
	var out []plan.Prewarm
	for i := range ws {
		w := &ws[i]
		path := "prewarm[" + strconv.Itoa(i) + "]"
		if err := priority(path+".priority", w.Priority); err != nil {
			return nil, err
		}
		if err := positive(path+".gpus", w.GPUs); err != nil {
			return nil, err
		}
		if err := positive(path+".count", w.Count); err != nil {
			return nil, err
		}
		at, err := parseTime(path+".at", w.At)
		if err != nil {
			return nil, err
		}
		until, err := parseTime(path+".until", w.Until)
		if err != nil {
			return nil, err
		}
		out = append(out, plan.Prewarm{Namespace: w.Namespace, Job: w.Job, Group: w.Group, Type: plan.JobType(w.Type),
			Priority: int(w.Priority), GPUs: int(w.GPUs), Model: w.Model, Datacenters: nilIfEmpty(w.Datacenters),
			NodePool: w.NodePool, Flavors: nilIfEmpty(w.Flavors), At: at, Count: int(w.Count), Until: until})
	}
	return out, nil
}

// prewarmsToWire is the encoder's side: nil when there are none, so that
// snapshots without pre-warms are written as before.
func prewarmsToWire(ws []plan.Prewarm) []wirePrewarm {
	var out []wirePrewarm
	for _, w := range ws {
		out = append(out, wirePrewarm{Namespace: w.Namespace, Job: w.Job, Group: w.Group, Type: string(w.Type),
			Priority: int64(w.Priority), GPUs: int64(w.GPUs), Model: w.Model,
			Datacenters: append([]string(nil), w.Datacenters...), NodePool: w.NodePool,
			Flavors: append([]string(nil), w.Flavors...), At: timeText(w.At), Count: int64(w.Count), Until: timeText(w.Until)})
	}
	return out
}
