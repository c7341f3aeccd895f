// Package history keeps the quota broker's preemption record (DESIGN L8):
// every allocation the broker stopped for a claimant, as the Nomad adapter
// reported it (act.Outcome.Preempted), served by the agent at
// GET /v1/preemptions.
package history

import (
	"sync"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/act"
	"github.com/gputide/gputide/quota-broker/plan"
)

// Preemption is one allocation the broker stopped for a claimant (DESIGN L8).
type Preemption struct {
	Time      time.Time     `json:"time"`
	Claimant  plan.GroupKey `json:"claimant"` // {"namespace", "job", "group"}
	Namespace string        `json:"namespace"`
	Job       string        `json:"job"`
	Alloc     string        `json:"alloc"`
	Node      string        `json:"node,omitempty"`
	GPUs      int           `json:"gpus"`
	Rule      plan.Rule     `json:"rule"`
	Reason    string        `json:"reason,omitempty"`
}

// FromStop is the record of one stop the adapter reported.
func FromStop(s act.Stop) Preemption {
	return Preemption{Time: s.Time, Claimant: s.Claimant, Namespace: s.Namespace, Job: s.Job, Alloc: s.Alloc,
		Node: s.Node, GPUs: s.GPUs, Rule: s.Rule, Reason: s.Reason}
}

// Recorder keeps the preemptions of this broker process in memory, the
// newest Max of them (default 10000). It is safe for concurrent use.
type Recorder struct {
	Max  int
	mu   sync.Mutex
	list []Preemption
}

// Add records p.
func (r *Recorder) Add(p Preemption) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, p)
	limit := r.Max
	if limit <= 0 {
		limit = 10000
	}
	if len(r.list) > limit {
		r.list = append([]Preemption(nil), r.list[len(r.list)-limit:]...)
	}
}

// AddOutcome records every preemption of one Execute, in order.
func (r *Recorder) AddOutcome(o act.Outcome) {
	for _, s := range o.Preempted {
		r.Add(FromStop(s))
	}
}

// List returns the preemptions recorded, oldest first.
func (r *Recorder) List() []Preemption {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Preemption(nil), r.list...)
}
