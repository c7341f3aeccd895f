package snapshot

import (
	"strconv"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// wireEvictBudget is a quota node's max_evict (DESIGN L14): {"gpus": 16,
// "per": "5m"}, gpus a whole number from 0, per a Go duration above 0 and
// at most quota.MaxEvictPer.
type wireEvictBudget struct {
	GPUs int64  `json:"gpus" snap:"required"`
	Per  string `json:"per" snap:"required"`
}

// wireEviction is one entry of evictions (DESIGN L14): GPUs stopped as
// victims of quota node quota's namespaces at time, under a rule budgets
// count (plan.Eviction).
type wireEviction struct {
	Quota string `json:"quota" snap:"required,intern"`
	GPUs  int64  `json:"gpus" snap:"required"`
	Time  string `json:"time" snap:"required"`
}

// evictBudget converts the max_evict of the quota node at path (nil:
// none); errors name path.max_evict.gpus or path.max_evict.per.
func evictBudget(w *wireEvictBudget, path string) (*quota.EvictBudget, error) {
	if w == nil {
		return nil, nil
	}
	path += ".max_evict"
	switch {
	case w.GPUs < 0:
		return nil, errf(path+".gpus", "%d is negative", w.GPUs)
	case w.GPUs > quota.MaxGPUs:
		return nil, errf(path+".gpus", "%d is too large (at most %d)", w.GPUs, quota.MaxGPUs)
	}
	per, err := parseDuration(path+".per", w.Per)
	if err != nil {
		return nil, err
	}
	switch {
	case per == 0:
		return nil, errf(path+".per", "%s is not above 0: a budget needs a window (DESIGN L14)", plan.Quote(w.Per))
	case per > quota.MaxEvictPer:
		return nil, errf(path+".per", "%s is more than %s (DESIGN L14)", plan.Quote(w.Per), quota.MaxEvictPer)
	}
	return &quota.EvictBudget{GPUs: int(w.GPUs), Per: per}, nil
}

// evictBudgetToWire is the encoder's side: per in Go syntax ("5m0s").
func evictBudgetToWire(b *quota.EvictBudget) *wireEvictBudget {
	if b == nil {
		return nil
	}
	return &wireEvictBudget{GPUs: int64(b.GPUs), Per: b.Per.String()}
}

// evictions converts evictions: each names a node of the tree root, with
// at least one GPU, at an RFC 3339 time.
func (c *converter) evictions(ws []wireEviction, root *quota.Node) ([]plan.Eviction, error) {
	var out []plan.Eviction
	for i := range ws {
		w := &ws[i]
		path := "evictions[" + strconv.Itoa(i) + "]"
		if root.Find(w.Quota) == nil {
			return nil, errf(path+".quota", "%s is not a node of the quota tree", plan.Quote(w.Quota))
		}
		if err := positive(path+".gpus", w.GPUs); err != nil {
			return nil, err
		}
		t, err := parseTime(path+".time", w.Time)
		if err != nil {
			return nil, err
		}
		out = append(out, plan.Eviction{Quota: w.Quota, GPUs: int(w.GPUs), Time: t})
	}
	return out, nil
}

// evictionsToWire is the encoder's side: nil when there are none, so that
// snapshots without them are written as before.
func evictionsToWire(es []plan.Eviction) []wireEviction {
	var out []wireEviction
	for _, e := range es {
		out = append(out, wireEviction{Quota: e.Quota, GPUs: int64(e.GPUs), Time: timeText(e.Time)})
	}
	return out
}
