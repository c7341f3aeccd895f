// Package plan is gputide's pure planning core: given a Snapshot of the
// cluster and the quota tree it returns a Plan (admit, wait, stop, expire)
// (and stop_job, suspend, hold) with the rule of DESIGN §3 that justifies
// each action.
//
// The package does no I/O, reads no clock and uses no randomness: the same
// snapshot always gives the same plan.
//
// How a plan is made:
//  1. newPlanner indexes the snapshot and derives the ledger from the live
//     allocations (L2), with over-quota debt (L9); allocations of active
//     reservations are counted apart (L10) and the allocations the active
//     bookings displace are marked (L10), a batch job or flex request
//     whole (L5 units); the snapshot's holds are booked GPU by GPU (L10),
//     a reservation's past its Until only for the allocations the booking
//     has not placed. Debt and displaced are plan state, derived again
//     after every stop the plan makes (L9: a stopped allocation leaves
//     usage, debt and displaced at once, inside one claimant's placement
//     too).
//  2. Timed job rules (timedStops): a reservation's jobs are stopped at
//     end - kill_timeout (rule L10.end), an admitted flex request at
//     admitted + max_run - kill_timeout (L11.max_run), both job stops; an
//     admitted flex request still missing allocations at admitted +
//     settle is suspended whole and queued again (L11.settle). Then holds
//     bind (bindHolds): what Nomad placed on the GPUs of any stored hold
//     still in force for another job is stopped at once by the owner's
//     rule, placed in this plan or not (L10). Then each active
//     reservation's Cover (cover): its allocations not yet placed go on
//     held, then free, then idle-occupied GPUs; the free ones are held and
//     the idle allocations claimed for its jobs (L10 Cover).
//  3. Drains (drains): each reservation within drain_horizon of its start
//     places its shape as a claimant of its node; free GPUs are held at
//     once, GPU by GPU, victims (L5 step 1, then what it will displace) are
//     stopped and their GPUs held at start - (their largest kill_timeout +
//     drain_margin) (rule L10.drain), and claimed for it until then, so
//     that no later owner or job counts on them (L3). Each pre-warm (Prewarm, DESIGN L5
//     "Pre-warm") within drain_horizon of its boundary is the same drain
//     owned by its group: if the group is entitled now (L3), its added
//     allocations are placed by L5 (all steps) and L6, free GPUs held at
//     once, victims stopped and their GPUs held at at - (their largest
//     kill_timeout + drain_margin), holds until its Until (rule
//     L5.prewarm).
//  4. Pending groups are gathered into jobs and ordered (L3).
//  5. Non-idle jobs are decided first, in that order: flex requests past
//     max_wait from their queued time expire (L11.expire); a job naming a
//     reservation waits before its start and is entitled by its booking
//     alone in its window (L10), with the displaced allocations as
//     victims between L5 steps 1 and 2 (rule L10.start); for other jobs
//     each node's nominal counts less booked(N), the peak booked over
//     [now, now + max_run) for flex and [now, now + drain_horizon)
//     otherwise, and reserved allocations are left out of the usage. A
//     job that is not entitled waits (L3), where a
//     job of a node with priority preemption leaves out of the node's and
//     the ancestors' figures the node's own lower-priority allocations that
//     L5 step 3 may stop (they yield to it); an entitled job's allocations
//     are placed one at a time, on free GPUs by bin-packing or else on GPUs
//     freed by the best victim set (L5, L6: lower class of the worst
//     victim, then less work lost, then fewer GPUs, then node ID); every
//     stop of a unit has the rule of its largest-key allocation
//     (unitRule). A flex request is admitted whole or not at all (L11); a
//     wait on GPUs held for others names the hold. A job entitled only on
//     what yields to it then has those allocations stopped in key order, on
//     any node, until its node and the ancestors are within their nominal
//     again (rule L5.3); if they cannot be, it waits and nothing is stopped
//     for it. Held GPUs are free only to their owner (L10).
//  6. Idle jobs are then placed on the GPUs still free, never causing a
//     preemption (L3, L4), never on held GPUs except a reservation's from
//     start + settle. Deciding them after the non-idle work keeps an
//     idle job admitted in this plan, which may not be a victim in it, from
//     blocking an entitled job (L3: idle allocations never block an
//     entitled job).
//  7. Usage is reported after the plan's stops and admits (L4, L10), and
//     WakeAt, the next instant at which time alone changes the plan (L12).
//     Warnings (Warning) name the workspace and owner they are about.
//  8. The idle fit of each idle group is counted on the GPUs still free
//     (idleFit, issue 11 item 4).
package plan

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// Compute plans the snapshot, which must pass Validate (the decoder, the
// Nomad adapter and the simulator check it first). It returns an error
// only when the quota tree breaks law L1; the snapshot itself is not
// changed.
func Compute(s *Snapshot) (*Plan, error) {
	return compute(s, IdleOrderFair)
}

// compute is Compute with the idle jobs decided in idleOrder (options.go).
func compute(s *Snapshot, idleOrder IdleOrder) (*Plan, error) {
	if s == nil {
		return nil, fmt.Errorf("no snapshot")
	}
	if err := quota.Validate(s.Quota); err != nil {
		return nil, err
	}
	// DESIGN L13: a tree of several flavors, or with devices of no
	// flavor, is planned flavor by flavor (flavors.go).
	if flavors := quota.TreeFlavors(s.Quota); len(flavors) > 1 || !governed(s, &flavors[0]) {
		return computeFlavors(s, flavors, newFlavorIndex(s, flavors), idleOrder), nil
	}
	buf := bufferPool.Get().(*buffers)
	defer bufferPool.Put(buf)
	p := newPlanner(s, buf)
	p.idleOrder = idleOrder
	defer p.vc.forget()
	return p.run(), nil
}

// run is the pipeline above on a new planner: timed stops, drains, then the
// pending jobs in L3 order, non-idle before idle.
func (p *planner) run() *Plan {
	suspended := p.timedStops()
	cache := map[feasibilityKey][]int{}
	p.bindHolds()
	p.cover(cache)
	p.drains(cache)
	jobs := p.pendingJobs()
	for _, idlePass := range []bool{false, true} {
		if idlePass && p.idleOrder.fair() {
			p.decideIdleFair(jobs, suspended, cache)
			break
		}
		for _, j := range jobs {
			if j.idle == idlePass && !suspended[JobKey{Namespace: j.namespace, Job: j.name}] {
				p.decide(j, cache)
			}
		}
	}
	if p.label != "" { // a tree of one declared flavor: actions name it (DESIGN L13)
		for i := range p.st.actions {
			p.st.actions[i].Flavor = p.label
		}
	}
	pl := &Plan{Actions: p.st.actions, Usage: p.usage(), Warnings: p.planWarnings(), WakeAt: p.wakeAt}
	pl.IdleFit = p.idleFit()
	return pl
}

// decide makes the plan's actions for one pending job.
func (p *planner) decide(j *job, cache map[feasibilityKey][]int) {
	if j.q == nil {
		p.warn(Warning{Kind: WarnGeneral, Namespace: j.namespace, Job: j.name,
			Message: fmt.Sprintf("job %s/%s: namespace %q is not bound to any quota; not governed", j.namespace, j.name, j.namespace)})
		return
	}
	for _, g := range j.groups {
		if g.Type == JobSystem || g.Type == JobSysbatch {
			p.warn(Warning{Kind: WarnGeneral, Namespace: j.namespace, Job: j.name,
				Message: fmt.Sprintf("job %s/%s: %s jobs are not governed", j.namespace, j.name, g.Type)})
			return
		}
	}
	if j.flex != nil {
		wait := j.flex.MaxWait // within L11: the snapshot passed Validate
		if waited := p.now.Sub(j.queued); waited > wait {
			for _, g := range j.groups {
				p.emit(Action{Action: ActionExpire, Namespace: g.Namespace, Job: g.Job, Group: g.Group,
					Count: g.Count, GPUs: g.GPUs, Rule: RuleFlexExpire,
					Reason: fmt.Sprintf("flex request queued at %s waited %s, more than max_wait %s",
						j.queued.Format(time.RFC3339), waited, wait)})
			}
			return
		}
		// L11.expire: past max_wait (strictly) from its queued time.
		p.wake(j.queued.Add(wait + time.Nanosecond))
	}
	var y yielded
	switch {
	case j.idle:
		j.fairLeft = 0
		if g := j.groups[0]; g.Type == JobBatch && !g.Elastic || j.flex != nil {
			j.fairLeft = j.asked // L5: stopped whole, so admitted whole (fairAsk)
		}
	case j.reservation != "":
		// L10: a job naming an active reservation is entitled by its
		// booking alone; before the start (or after the end) it waits.
		if why := p.reservationWait(j); why != "" {
			p.waitAll(j, RuleReservation, why)
			return
		}
		j.res = p.activeReservation(j)
		if why := p.reservationEntitlement(j, j.res); why != "" {
			p.waitAll(j, RuleReservation, why)
			return
		}
	default:
		j.booked = p.bookedFor(j)
		var bound, reason string
		if bound, reason, y = p.entitled(j); reason != "" {
			p.waitAllBound(j, RuleAdmission, bound, reason)
			return
		}
		if p.freeOnly && y.gpus > 0 {
			return // entitled only on what yields to it: not on free GPUs
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
	c := p.newClaim(j, r.first, nil)
	if !p.restoreQuota(j, c) {
		// Cannot happen while the ledger agrees with the allocations
		// (entitlement counted exactly these units); kept as L6 says.
		p.st = saved
		p.rebook(resolved)
		p.waitAll(j, RuleAdmission, fmt.Sprintf("%s: too few allocations of lower priority to stop to restore its nominal of %d GPUs",
			j.q.node.Name, j.q.nominal))
		return
	}
	if why := p.budgetBroken(saved.evicted); why != "" && j.res == nil {
		// The restore's L5.3 stops are chosen by priority, not as an L6
		// set: a budget they would take over refuses the whole job
		// (DESIGN L14), as a claimant with no set within budget waits.
		p.st = saved
		p.rebook(resolved)
		p.waitAll(j, RuleAdmission, fmt.Sprintf("%s: allocations of lower priority would yield, but not within the eviction budgets: %s", j.q.node.Name, why))
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
		c := p.newClaim(j, g, cache)
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
			switch {
			case j.idle:
				rule = RuleIdle
			case j.res != nil:
				rule = RuleReservation
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
		return -1, fmt.Sprintf("no node can run %s%s%s", gpuCount(c.g.GPUs), modelText(c.g.Model), placeText(c.g))
	}
	if ni := p.binPack(c.nodes, c); ni >= 0 {
		p.admitOne(c, ni)
		return ni, ""
	}
	fair := c.j.idle && p.idleOrder.fair()
	if c.j.idle && (!fair || p.freeOnly) {
		return -1, fmt.Sprintf("idle job: no node has %s%s%s; idle jobs never preempt%s",
			gpuCount(c.g.GPUs, "free"), modelText(c.g.Model), placeText(c.g), p.heldNote(c))
	}
	if p.freeOnly {
		return -1, fmt.Sprintf("no node has %s%s%s", gpuCount(c.g.GPUs, "free"), modelText(c.g.Model), placeText(c.g))
	}
	p.budgetWhy = ""
	var set *victimSet
	var keys []victimKey
	if fair {
		set, keys = p.fairVictims(c)
	} else {
		set, keys = p.findVictims(c)
	}
	switch {
	case set == nil && p.budgetWhy != "":
		return -1, fmt.Sprintf("no node has %s%s%s within the eviction budgets: %s%s",
			gpuCount(c.g.GPUs, "free"), modelText(c.g.Model), placeText(c.g), p.budgetWhy, p.heldNote(c))
	case set == nil && fair:
		return -1, fmt.Sprintf("idle job: no node has %s%s%s, even with fair give-back (L14)%s",
			gpuCount(c.g.GPUs, "free"), modelText(c.g.Model), placeText(c.g), p.heldNote(c))
	case set == nil:
		return -1, fmt.Sprintf("no node has %s%s%s, even with preemption%s",
			gpuCount(c.g.GPUs, "free"), modelText(c.g.Model), placeText(c.g), p.heldNote(c))
	}
	p.stopUnits(set, c, keys)
	p.admitOne(c, set.node)
	return set.node, ""
}

// gpuCount writes n GPUs for a reason text, singular for one: "1 GPU",
// "8 GPUs", with adjectives between ("1 free GPU", "8 free GPUs").
func gpuCount(n int, adj ...string) string {
	noun := "GPUs"
	if n == 1 {
		noun = "GPU"
	}
	return strings.Join(append(append([]string{strconv.Itoa(n)}, adj...), noun), " ")
}

// newClaim returns the claim of group g of job j, with its feasible nodes
// when cache is not nil.
func (p *planner) newClaim(j *job, g *Pending, cache map[feasibilityKey][]int) *claim {
	c := &claim{j: j, g: g, cid: p.claimantID(g.Key()), alt: noClaimant}
	if j.res != nil {
		c.alt = p.ownerID(HoldOwner{Reservation: j.res.ID})
	}
	if cache != nil {
		c.nodes = p.feasibleNodes(g, cache)
	}
	return c
}

// admitOne takes the GPUs of one allocation of c on node ni and books them.
func (p *planner) admitOne(c *claim, ni int) {
	p.take(p.nodes[ni], c, c.g.GPUs, noClaimant)
	p.st.ledger.add(c.j.q, c.g.GPUs, c.j.idle, false, c.j.res != nil)
	c.j.fairLeft = max(0, c.j.fairLeft-c.g.GPUs)
	p.fairEpoch++
	if c.j.res != nil {
		*p.usedOf(c.j.res) += c.g.GPUs
	}
}

func (p *planner) admitReason(j *job) string {
	if j.idle {
		return "idle job on free GPUs"
	}
	if j.res != nil {
		return fmt.Sprintf("reservation %s: %d of %d GPUs in use after admission", j.res.ID, *p.usedOf(j.res), j.res.GPUs)
	}
	l := p.st.ledger
	if j.q.node.ChildPreemption {
		return fmt.Sprintf("%s: %d of %d GPUs in use by its own namespaces after admission",
			j.q.node.Name, l.ownNonIdle[j.q.index], j.q.nominal)
	}
	return fmt.Sprintf("%s: %d of %d GPUs in use after admission", j.q.node.Name, l.nonIdle[j.q.index], j.q.nominal)
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

// warn adds a warning about one workspace's work (Warning).
func (p *planner) warn(w Warning) { p.notes = append(p.notes, w) }

// planWarnings returns the plan's warnings: the workspaces' in the order
// made, then the general ones (planner.warnings).
func (p *planner) planWarnings() []Warning {
	out := p.notes
	for _, m := range p.warnings {
		out = append(out, Warning{Kind: WarnGeneral, Message: m})
	}
	return out
}
