package plan

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// The booking corpus (issue 16): random snapshots with bookings (active
// and ahead), debt (nominals lowered, in and past debt_grace), displaced
// allocations, batch jobs of several allocations, holds (with intruders)
// and idle jobs together. It builds on the corpora of property_test.go
// (randomSnapshot) and calendar_property_test.go (withCalendar) and adds
// what they lack; bookingSnapshot(seed) is the whole recipe, so a seed
// names a snapshot.

// bookingStream is the PCG stream of the booking corpus (the other
// corpora use 7 and 11).
const bookingStream = 23

// bookingSnapshot makes the booking corpus's snapshot of seed.
func bookingSnapshot(seed uint64) *Snapshot {
	r := rand.New(rand.NewPCG(seed, bookingStream))
	s := withCalendar(randomSnapshot(r), r)
	g := &bookingGen{s: s, r: r}
	g.index()
	g.jobsAgree()
	g.batchJobs()
	if r.IntN(2) == 0 {
		g.fill()
	}
	g.debt()
	for k := 1 + r.IntN(2); k > 0; k-- {
		g.activeBooking(k)
	}
	g.intruder()
	g.claimants()
	return s
}

// claimants adds up to four non-idle jobs of the tree's namespaces, so
// that several claimants in one plan stop for each other (L9: a stop in
// the plan leaves usage, debt and displaced at once).
func (g *bookingGen) claimants() {
	s, r := g.s, g.r
	var nss []string
	for _, q := range g.quotas {
		nss = append(nss, q.Namespaces...)
	}
	for k := r.IntN(5); k > 0; k-- {
		ns := nss[r.IntN(len(nss))]
		if r.IntN(2) == 0 { // the root's: it may preempt its children (L5 step 2)
			ns = s.Quota.Namespaces[r.IntN(len(s.Quota.Namespaces))]
		}
		s.Pending = append(s.Pending, Pending{Namespace: ns, Job: fmt.Sprintf("x%d", k), Group: "g",
			Type: []JobType{JobService, JobBatch}[r.IntN(2)], Priority: r.IntN(100) + 1, Count: 1 + r.IntN(2),
			GPUs: []int{1, 2, 4, 8}[r.IntN(4)], SubmittedAt: s.Time.Add(-time.Duration(r.IntN(600)) * time.Minute)})
	}
}

type bookingGen struct {
	s      *Snapshot
	r      *rand.Rand
	quotas []*quota.Node
	bound  map[string]string // namespace -> quota node
	busy   map[string]bool   // GPU ID -> an allocation holds it
	held   map[string]bool   // GPU ID -> a hold names it
}

func (g *bookingGen) index() {
	g.quotas = nil
	g.s.Quota.Walk(func(n *quota.Node) { g.quotas = append(g.quotas, n) })
	g.bound = quota.Namespaces(g.s.Quota)
	g.busy = map[string]bool{}
	for _, a := range g.s.Allocations {
		for _, id := range a.GPUIDs {
			g.busy[id] = true
		}
	}
	g.held = map[string]bool{}
	for _, h := range g.s.Holds {
		for _, id := range h.GPUIDs {
			g.held[id] = true
		}
	}
}

// jobsAgree makes every allocation of a job agree with the job's first
// on what Nomad sets per job (type, priority, idle, elastic, flex), as a
// real cluster does: randomSnapshot draws them per allocation, so that
// many of its snapshots fail Validate, and its jobs of several
// allocations mix service and batch. Pending groups get flex settings
// that L11 allows (not idle, max_run set, no reservation) and their job's
// reservation.
func (g *bookingGen) jobsAgree() {
	firstGroup := map[JobKey]*Pending{}
	for i := range g.s.Pending {
		p := &g.s.Pending[i]
		if f, ok := firstGroup[p.JobKey()]; ok {
			p.Flex, p.Reservation = f.Flex, f.Reservation
			continue
		}
		firstGroup[p.JobKey()] = p
		if p.Flex != nil {
			f := *p.Flex
			f.MaxRun = max(f.MaxRun, 30*time.Minute)
			p.Flex, p.Reservation = &f, ""
		}
		if p.Idle {
			p.Flex = nil
		}
	}
	first := map[JobKey]*Allocation{}
	for i := range g.s.Allocations {
		a := &g.s.Allocations[i]
		f, ok := first[a.JobKey()]
		if !ok {
			first[a.JobKey()] = a
			continue
		}
		a.Type, a.Priority, a.Idle, a.Elastic = f.Type, f.Priority, f.Idle, f.Elastic
		if a.Reservation == "" && f.Reservation == "" {
			a.MaxRun, a.AdmittedAt = f.MaxRun, f.AdmittedAt
		} else {
			a.MaxRun, a.AdmittedAt = 0, time.Time{}
		}
	}
}

// batchJobs gathers a few allocations of different nodes into batch jobs
// of several allocations (L5: a batch job stops whole), some with
// allocations started at different times, so that one may be debt, one
// displaced and one neither.
func (g *bookingGen) batchJobs() {
	s, r := g.s, g.r
	for k := r.IntN(3); k > 0; k-- {
		var nss []string
		for _, q := range g.quotas {
			nss = append(nss, q.Namespaces...)
		}
		ns := nss[r.IntN(len(nss))]
		idle := r.IntN(4) == 0
		prio := r.IntN(100) + 1
		taken := 0
		for _, i := range r.Perm(len(s.Allocations)) {
			a := &s.Allocations[i]
			if a.Reservation != "" || a.Type == JobSystem || a.Job[0] == 'b' || taken == 3 {
				continue
			}
			a.Namespace, a.Job, a.Group, a.Type, a.Priority, a.Idle, a.Elastic = ns, fmt.Sprintf("bj%d", k), "g", JobBatch, prio, idle, false
			a.MaxRun, a.AdmittedAt, a.StoppingFor, a.StoppingForReservation = 0, time.Time{}, GroupKey{}, ""
			if r.IntN(2) == 0 {
				a.StartedAt = s.Time.Add(-time.Duration(r.IntN(300)) * time.Minute)
			}
			taken++
		}
	}
}

// fill places allocations on the free GPUs that no hold names, so that
// claimants must preempt (debt, displaced, L5 steps 2 and 3).
func (g *bookingGen) fill() {
	s, r := g.s, g.r
	var nss []string
	for _, q := range g.quotas {
		nss = append(nss, q.Namespaces...)
	}
	k := 0
	for _, node := range s.Nodes {
		free := g.freeOn(node, true)
		for len(free) > 0 {
			n := min(len(free), []int{1, 2, 4}[r.IntN(3)])
			k++
			a := Allocation{ID: fmt.Sprintf("f%03d", k), Namespace: nss[r.IntN(len(nss))], Job: fmt.Sprintf("f%d", k), Group: "g",
				Type: []JobType{JobService, JobBatch}[r.IntN(2)], Priority: r.IntN(100) + 1, Node: node.ID, GPUIDs: free[:n],
				Idle: r.IntN(4) == 0, StartedAt: s.Time.Add(-time.Duration(r.IntN(300)) * time.Minute),
				KillTimeout: time.Duration(r.IntN(12)+1) * 5 * time.Second}
			for _, id := range a.GPUIDs {
				g.busy[id] = true
			}
			free = free[n:]
			s.Allocations = append(s.Allocations, a)
		}
	}
}

// debt lowers the nominals of one or two quota nodes below their non-idle
// usage (L9), keeping L1 (never below the children's sum), with a change
// time none (no grace), within debt_grace or past it.
func (g *bookingGen) debt() {
	s, r := g.s, g.r
	for k := 1 + r.IntN(2); k > 0; k-- {
		n := g.quotas[r.IntN(len(g.quotas))]
		used := 0
		in := map[string]bool{}
		n.Walk(func(x *quota.Node) {
			for _, ns := range x.Namespaces {
				in[ns] = true
			}
		})
		for _, a := range s.Allocations {
			if in[a.Namespace] && !a.Idle {
				used += len(a.GPUIDs)
			}
		}
		kids := 0
		for _, c := range n.Children {
			kids += c.GPUs.Total()
		}
		if hi := min(used-1, n.GPUs.Total()-1); hi >= kids {
			n.GPUs = quota.Plain(kids + r.IntN(hi-kids+1))
		}
		grace := s.Settings.DebtGrace
		n.ChangedAt = []time.Time{{}, s.Time.Add(-grace / 5), s.Time.Add(-grace + time.Second), s.Time.Add(-grace),
			s.Time.Add(-3 * grace)}[r.IntN(5)]
	}
}

// activeBooking adds active reservation rb<k> of a random quota node
// (usually within its nominal, sometimes over it), so that the node's
// allocations may be displaced (L10), with some of its allocations
// placed, a pending job naming it (a claimant of rule L10.start), and
// sometimes a hold of free GPUs for it (ended or not: from start + settle
// the hold lends to idle jobs only).
func (g *bookingGen) activeBooking(k int) {
	s, r := g.s, g.r
	q := g.quotas[r.IntN(len(g.quotas))]
	ns := q.Namespaces[r.IntN(len(q.Namespaces))]
	shape := []int{1, 2, 4, 8}[r.IntN(4)]
	n := 1 + r.IntN(3)
	if r.IntN(5) != 0 { // within the nominal
		n = min(n, q.GPUs.Total()/shape)
	}
	if n == 0 {
		return
	}
	res := Reservation{ID: fmt.Sprintf("rb%d", k), Namespace: ns, Quota: q.Name, GPUs: n * shape, AllocGPUs: shape,
		Start: s.Time.Add(-time.Duration(r.IntN(180)) * time.Minute)}
	if r.IntN(3) == 0 {
		res.AllocGPUs = 0 // the default shape
	}
	if r.IntN(3) == 0 && len(s.Nodes) > 0 {
		res.Model = s.Nodes[r.IntN(len(s.Nodes))].GPUs[0].Model
	}
	res.End = s.Time.Add(time.Duration(1+r.IntN(48)) * time.Hour)
	if r.IntN(8) == 0 { // ends within reach of its jobs' kill_timeout (L10.end)
		res.End = s.Time.Add(time.Duration(r.IntN(120)) * time.Second)
	}
	s.Reservations = append(s.Reservations, res)
	allocGPUs, count := res.Shape()
	// Some of its allocations placed already.
	placed := 0
	if r.IntN(2) == 0 {
		for _, ni := range r.Perm(len(s.Nodes)) {
			node := s.Nodes[ni]
			if placed >= count-1 || !modelMatches(res.Model, node.GPUs[0].Model) {
				continue
			}
			free := g.freeOn(node, false)
			if len(free) < allocGPUs {
				continue
			}
			a := Allocation{ID: fmt.Sprintf("rb%d-%d", k, placed), Namespace: ns, Job: fmt.Sprintf("rb%d-run", k), Group: "g",
				Type: JobBatch, Priority: 50, Node: node.ID, GPUIDs: free[:allocGPUs], Reservation: res.ID,
				StartedAt: res.Start.Add(time.Duration(r.IntN(10)) * time.Minute), KillTimeout: 30 * time.Second}
			for _, id := range a.GPUIDs {
				g.busy[id] = true
			}
			s.Allocations = append(s.Allocations, a)
			placed++
		}
	}
	// A pending job naming it.
	if r.IntN(3) != 0 {
		p := Pending{Namespace: ns, Job: fmt.Sprintf("rb%d-new", k), Group: "g", Type: []JobType{JobBatch, JobService}[r.IntN(2)],
			Priority: r.IntN(100) + 1, Count: 1 + r.IntN(count), GPUs: allocGPUs, Model: res.Model, Reservation: res.ID,
			SubmittedAt: s.Time.Add(-time.Duration(r.IntN(120)) * time.Minute)}
		if r.IntN(6) == 0 {
			p.GPUs = max(1, allocGPUs/2) // smaller than the shape
		}
		s.Pending = append(s.Pending, p)
	}
	// A hold of free GPUs for it.
	if r.IntN(3) == 0 && len(s.Nodes) > 0 {
		node := s.Nodes[r.IntN(len(s.Nodes))]
		free := g.freeOn(node, true)
		if len(free) > allocGPUs {
			free = free[:allocGPUs]
		}
		if len(free) > 0 {
			until := res.Start.Add(s.Settings.Settle)
			if r.IntN(2) == 0 {
				until = s.Time.Add(s.Settings.Settle)
			}
			s.Holds = append(s.Holds, Hold{For: HoldOwner{Reservation: res.ID}, Node: node.ID, GPUIDs: free, Until: until})
			for _, id := range free {
				g.held[id] = true
			}
		}
	}
}

// freeOn returns the healthy GPUs of node that no allocation holds (and,
// with unheld, that no hold names).
func (g *bookingGen) freeOn(node Node, unheld bool) []string {
	var out []string
	for _, gpu := range node.GPUs {
		if gpu.Healthy && !g.busy[gpu.ID] && (!unheld || !g.held[gpu.ID]) {
			out = append(out, gpu.ID)
		}
	}
	return out
}

// intruder now and then holds, for an active booking, GPUs that another
// job's non-idle allocation holds: Nomad placed it there (L10: a victim
// of the hold's owner).
func (g *bookingGen) intruder() {
	s, r := g.s, g.r
	if r.IntN(3) != 0 || len(s.Reservations) == 0 {
		return
	}
	res := s.Reservations[len(s.Reservations)-1]
	for _, i := range r.Perm(len(s.Allocations)) {
		a := s.Allocations[i]
		if a.Idle || a.Reservation != "" || slices.ContainsFunc(a.GPUIDs, func(id string) bool { return g.held[id] }) {
			continue
		}
		s.Holds = append(s.Holds, Hold{For: HoldOwner{Reservation: res.ID}, Node: a.Node, GPUIDs: slices.Clone(a.GPUIDs),
			Until: s.Time.Add(time.Duration(1+r.IntN(60)) * time.Minute)})
		for _, id := range a.GPUIDs {
			g.held[id] = true
		}
		return
	}
}
