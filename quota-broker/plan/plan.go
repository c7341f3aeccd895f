// Package plan is gputide's pure planning core: given a Snapshot of the
// cluster and the quota tree it returns a Plan (admit, wait, stop, expire)
// with the rule of DESIGN §3 that justifies each action.
//
// The package does no I/O, reads no clock and uses no randomness: the same
// snapshot always gives the same plan.
//
// How a plan is made:
//  1. newPlanner indexes the snapshot and derives the ledger from the live
//     allocations (L2), with over-quota debt (L9).
//  2. Pending groups are gathered into jobs and ordered (L3).
//  3. Non-idle jobs are decided first, in that order: flex requests past
//     max_wait expire (L11); a job that is not entitled waits (L3), where a
//     job of a node with priority preemption leaves out of the node's and
//     the ancestors' figures the node's own lower-priority allocations that
//     L5 step 3 may stop (they yield to it); an entitled job's allocations
//     are placed one at a time, on free GPUs by bin-packing or else on GPUs
//     freed by the best victim set (L5, L6: lower class of the worst
//     victim, then less work lost, then fewer GPUs, then node ID). A flex
//     request is admitted whole or not at all (L11). A job entitled only on
//     what yields to it then has those allocations stopped in key order, on
//     any node, until its node and the ancestors are within their nominal
//     again (rule L5.3); if they cannot be, it waits and nothing is stopped
//     for it.
//  4. Idle jobs are then placed on the GPUs still free, never causing a
//     preemption (L3, L4). Deciding them after the non-idle work keeps an
//     idle job admitted in this plan, which may not be a victim in it, from
//     blocking an entitled job (L3: idle allocations never block an
//     entitled job).
//  5. Usage is reported after the plan's stops and admits (L4).
//  6. The idle fit of each idle group is counted on the GPUs still free
//     (idleFit, issue 11 item 4).
package plan

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gputide/gputide/quota-broker/quota"
)

// Compute plans the snapshot, which must pass Validate (the decoder, the
// Nomad adapter and the simulator check it first). It returns an error
// only when the quota tree breaks law L1; the snapshot itself is not
// changed.
func Compute(s *Snapshot) (*Plan, error) {
	if s == nil {
		return nil, fmt.Errorf("no snapshot")
	}
	if err := quota.Validate(s.Quota); err != nil {
		return nil, err
	}
	buf := bufferPool.Get().(*buffers)
	defer bufferPool.Put(buf)
	p := newPlanner(s, buf)
	jobs := p.pendingJobs()
	cache := map[feasibilityKey][]int{}
	for _, idlePass := range []bool{false, true} {
		for _, j := range jobs {
			if j.idle == idlePass {
				p.decide(j, cache)
			}
		}
	}
	pl := &Plan{Actions: p.st.actions, Usage: p.usage(), Warnings: p.warnings}
	pl.IdleFit = p.idleFit()
	return pl, nil
}

// decide makes the plan's actions for one pending job.
func (p *planner) decide(j *job, cache map[feasibilityKey][]int) {
	if j.q == nil {
		p.warnings = append(p.warnings, fmt.Sprintf("job %s/%s: namespace %q is not bound to any quota; not governed",
			j.namespace, j.name, j.namespace))
		return
	}
	for _, g := range j.groups {
		if g.Type == JobSystem || g.Type == JobSysbatch {
			p.warnings = append(p.warnings, fmt.Sprintf("job %s/%s: %s jobs are not governed", j.namespace, j.name, g.Type))
			return
		}
	}
	if j.flex != nil {
		wait := j.flex.MaxWait // within L11: the snapshot passed Validate
		if waited := p.now.Sub(j.submitted); waited > wait {
			for _, g := range j.groups {
				p.emit(Action{Action: ActionExpire, Namespace: g.Namespace, Job: g.Job, Group: g.Group,
					Count: g.Count, GPUs: g.GPUs, Rule: RuleFlex,
					Reason: fmt.Sprintf("flex request waited %s, more than max_wait %s", waited, wait)})
			}
			return
		}
	}
	var y yielded
	if !j.idle {
		var bound, reason string
		if bound, reason, y = p.entitled(j); reason != "" {
			p.waitAllBound(j, RuleAdmission, bound, reason)
			return
		}
	}
	if j.flex == nil && y.gpus == 0 {
		p.placeJob(j, cache)
		return
	}
	p.placeWhole(j, y, cache)
}

// placeWhole decides job j on a copy of the state, kept only if the job is
// admitted as the laws require: a flex request only whole (L11), and a job
// entitled on y, what yields to it, only if its node and the ancestors can
// then be restored within their nominal (L3, L6, rule L5.3). Otherwise the
// state is restored and the job waits whole, nothing stopped for it.
func (p *planner) placeWhole(j *job, y yielded, cache map[feasibilityKey][]int) {
	saved, resolved, start := p.st.clone(), len(p.resolvedOrder), len(p.st.actions)
	r := p.placeJob(j, cache)
	if j.flex != nil && r.failed > 0 {
		p.st = saved
		p.rebook(resolved)
		p.waitAll(j, RuleFlex, fmt.Sprintf("flex request admitted only whole: %d of %d allocations fit now (%s)",
			r.placed, r.placed+r.failed, r.reason))
		return
	}
	if y.gpus == 0 || r.first == nil {
		return
	}
	c := &claim{j: j, g: r.first, cid: p.claimantID(r.first.Key())}
	if !p.restoreQuota(j, c) {
		// Cannot happen while the ledger agrees with the allocations
		// (entitlement counted exactly these units); kept as L6 says.
		p.st = saved
		p.rebook(resolved)
		p.waitAll(j, RuleAdmission, fmt.Sprintf("%s: too few allocations of lower priority to stop to restore its nominal of %d GPUs",
			j.q.node.Name, j.q.node.GPUs))
		return
	}
	for i := start; i < len(p.st.actions); i++ {
		if a := &p.st.actions[i]; a.Action == ActionAdmit {
			a.Reason = p.admitReason(j) + "; allocations of lower priority yield (L5.3)"
		}
	}
}

// placement is what placeJob did for one job.
type placement struct {
	placed, failed int      // allocations placed and not placed
	reason         string   // why the last allocation not placed did not fit
	first          *Pending // the first group with an allocation placed, or nil
}

// placeJob places the allocations of every group of j, one at a time, and
// emits an admit action per group with the nodes and a wait action for the
// rest.
func (p *planner) placeJob(j *job, cache map[feasibilityKey][]int) placement {
	var r placement
	for _, g := range j.groups {
		c := &claim{j: j, g: g, cid: p.claimantID(g.Key()), nodes: p.feasibleNodes(g, cache)}
		var nodes []string
		why := ""
		for i := 0; i < g.Count; i++ {
			ni, msg := p.placeOne(c)
			if ni < 0 {
				why = msg
				break
			}
			nodes = append(nodes, p.nodes[ni].n.ID)
		}
		r.placed += len(nodes)
		if len(nodes) > 0 {
			if r.first == nil {
				r.first = g
			}
			rule := RuleAdmission
			if j.idle {
				rule = RuleIdle
			}
			p.emit(Action{Action: ActionAdmit, Namespace: g.Namespace, Job: g.Job, Group: g.Group,
				Count: len(nodes), GPUs: g.GPUs, Nodes: nodes, Rule: rule, Reason: p.admitReason(j)})
		}
		if rest := g.Count - len(nodes); rest > 0 {
			r.failed += rest
			r.reason = why
			if j.flex == nil {
				p.emit(Action{Action: ActionWait, Namespace: g.Namespace, Job: g.Job, Group: g.Group,
					Count: rest, GPUs: g.GPUs, Rule: RuleAdmission, Reason: why})
			}
		}
	}
	return r
}

// placeOne places one allocation of claim c: on free GPUs by bin-packing,
// or, for a non-idle job, on the GPUs of the best victim set (L5, L6). It
// returns the node index, or -1 and the reason there is no room.
func (p *planner) placeOne(c *claim) (int, string) {
	if len(c.nodes) == 0 {
		return -1, fmt.Sprintf("no node can run %d GPUs%s%s", c.g.GPUs, modelText(c.g.Model), placeText(c.g))
	}
	if ni := p.binPack(c.nodes, c.cid, c.g); ni >= 0 {
		p.admitOne(c, ni)
		return ni, ""
	}
	if c.j.idle {
		return -1, fmt.Sprintf("idle job: no node has %d free GPUs%s%s; idle jobs never preempt",
			c.g.GPUs, modelText(c.g.Model), placeText(c.g))
	}
	set, keys := p.findVictims(c)
	if set == nil {
		return -1, fmt.Sprintf("no node has %d free GPUs%s%s, even with preemption",
			c.g.GPUs, modelText(c.g.Model), placeText(c.g))
	}
	p.stopUnits(set, c, keys)
	p.admitOne(c, set.node)
	return set.node, ""
}

// admitOne takes the GPUs of one allocation of c on node ni and books them.
func (p *planner) admitOne(c *claim, ni int) {
	p.take(p.nodes[ni], c.cid, c.g.Model, c.g.GPUs)
	p.st.ledger.add(c.j.q, c.g.GPUs, c.j.idle, false)
}

func (p *planner) admitReason(j *job) string {
	if j.idle {
		return "idle job on free GPUs"
	}
	l := p.st.ledger
	if j.q.node.ChildPreemption {
		return fmt.Sprintf("%s: %d of %d GPUs in use by its own namespaces after admission",
			j.q.node.Name, l.ownNonIdle[j.q.index], j.q.node.GPUs)
	}
	return fmt.Sprintf("%s: %d of %d GPUs in use after admission", j.q.node.Name, l.nonIdle[j.q.index], j.q.node.GPUs)
}

// waitAll makes every group of j wait with the same reason.
func (p *planner) waitAll(j *job, rule Rule, reason string) { p.waitAllBound(j, rule, "", reason) }

// waitAllBound is waitAll for a wait by entitlement (L3): bound names the
// quota node whose nominal binds the job (Action.Quota).
func (p *planner) waitAllBound(j *job, rule Rule, bound, reason string) {
	for _, g := range j.groups {
		p.emit(Action{Action: ActionWait, Namespace: g.Namespace, Job: g.Job, Group: g.Group,
			Count: g.Count, GPUs: g.GPUs, Rule: rule, Quota: bound, Reason: reason})
	}
}

func (p *planner) emit(a Action) { p.st.actions = append(p.st.actions, a) }

func modelText(model string) string {
	if model == "" {
		return ""
	}
	return fmt.Sprintf(" of model %q", model)
}

func placeText(g *Pending) string {
	dcs := "any datacenter"
	if len(g.Datacenters) > 0 {
		dcs = "datacenter " + strings.Join(g.Datacenters, ",")
	}
	return " in " + dcs + ", node pool " + strconv.Quote(poolOf(g.NodePool))
}
