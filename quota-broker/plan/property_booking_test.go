package plan

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/quota"
)

// The booking property suite (issue 16). Each invariant is its own test,
// so that one runs alone:
//
//	go test ./quota-broker/plan -run 'TestBookingProperty$/NoPanic'
//	go test ./quota-broker/plan -run 'TestBookingProperty$/Cover' -args -booking.seed=123
//	go test ./quota-broker/plan -run 'TestBookingProperty$/DebtStops' -args -booking.seeds=20000
//
// Subtests: NoPanic, Existing (the invariants of TestPlanProperties and
// TestCalendarPlanProperties: checkPlan, checkCalendarPlan), Cover (a),
// DebtStops (b), Deterministic (c). A failure names the seed, shrinks the
// snapshot to a smaller one that still fails, and prints it (readable, and
// as snapshot JSON for `gputide plan`); -booking.found=DIR also writes it
// there.
var (
	bookingSeeds = flag.Int("booking.seeds", 2000, "seeds of the booking property suite (issue 16)")
	bookingSeed  = flag.Int64("booking.seed", -1, "run the booking property suite on this seed only")
	bookingFound = flag.String("booking.found", "", "write the shrunk failing snapshots of the booking property suite to this directory")
)

// bookingCase is one seed's snapshot and plan; panicked holds the panic's
// value and stack when Compute panicked (p is then nil).
type bookingCase struct {
	seed     uint64
	s        *Snapshot
	before   *Snapshot // a deep copy of s taken before Compute
	p        *Plan
	panicked string
}

// newBookingCase plans s, keeping a copy of it from before.
func newBookingCase(seed uint64, s *Snapshot) (*bookingCase, error) {
	c := &bookingCase{seed: seed, s: s, before: deepCopySnapshot(s)}
	var err error
	c.p, c.panicked, err = computeSafe(s)
	return c, err
}

// computeSafe is Compute with a panic turned into a message.
func computeSafe(s *Snapshot) (p *Plan, panicked string, err error) {
	defer func() {
		if v := recover(); v != nil {
			stack := string(debug.Stack())
			p, panicked = nil, fmt.Sprintf("%v in %s\n%s", v, panicSite(stack), stack)
		}
	}()
	p, err = Compute(s)
	return p, "", err
}

// panicSite is the function and line of the planner where the panic of
// stack happened: the first frame of package plan after the runtime's.
func panicSite(stack string) string {
	lines := strings.Split(stack, "\n")
	for i := 0; i+1 < len(lines); i++ {
		if strings.HasPrefix(lines[i], "panic(") {
			for j := i + 2; j+1 < len(lines); j += 2 {
				if strings.Contains(lines[j], "quota-broker/plan.") {
					fn := lines[j][strings.LastIndex(lines[j], "plan.")+len("plan."):]
					if k := strings.LastIndexByte(fn, '('); k > 0 {
						fn = fn[:k]
					}
					loc := strings.TrimSpace(lines[j+1])
					if k := strings.LastIndexByte(loc, '/'); k >= 0 {
						loc = loc[k+1:]
					}
					if k := strings.IndexByte(loc, ' '); k > 0 {
						loc = loc[:k]
					}
					return fn + " at " + loc
				}
			}
		}
	}
	return "an unknown place"
}

// bookingSeedList is the seeds to run: -booking.seed alone, or 0 ..
// -booking.seeds-1 (2,000 by default, under -short too: they take about
// 2 s).
func bookingSeedList() []uint64 {
	if *bookingSeed >= 0 {
		return []uint64{uint64(*bookingSeed)}
	}
	n := *bookingSeeds
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i)
	}
	return seeds
}

// TestBookingProperty runs each invariant over the booking corpus.
func TestBookingProperty(t *testing.T) {
	var cases []bookingCase
	valid := 0
	for _, seed := range bookingSeedList() {
		s := bookingSnapshot(seed)
		if err := s.Validate(); err != nil {
			continue
		}
		valid++
		c, err := newBookingCase(seed, s)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		cases = append(cases, *c)
	}
	if n := len(bookingSeedList()); valid < n*3/4 {
		t.Fatalf("only %d of %d snapshots of the booking corpus pass Validate: the generator has rotted", valid, n)
	}
	t.Run("NoPanic", func(t *testing.T) {
		runInvariant(t, cases, true, func(*bookingCase) error { return nil })
	})
	t.Run("Existing", func(t *testing.T) {
		runInvariant(t, cases, false, func(c *bookingCase) error {
			s, p := c.s, c.p
			if err := checkPlan(s, p); err != nil {
				return err
			}
			return checkCalendarPlan(s, p)
		})
	})
	t.Run("Cover", func(t *testing.T) {
		checked := 0
		runInvariant(t, cases, false, func(c *bookingCase) error {
			ok, err := checkCover(c.s, c.p)
			if ok {
				checked++
			}
			return err
		})
		t.Logf("%d snapshots have active bookings whose unplaced allocations fit before the plan", checked)
		if checked == 0 && len(cases) > 100 {
			t.Errorf("no snapshot of the corpus has an active booking with unplaced allocations that fit: the corpus no longer tests the Cover")
		}
	})
	t.Run("DebtStops", func(t *testing.T) {
		checked := 0
		runInvariant(t, cases, false, func(c *bookingCase) error {
			n, err := checkDebtStops(c.s, c.p)
			checked += n
			return err
		})
		t.Logf("%d debt stops checked", checked)
		if checked == 0 && len(cases) > 100 {
			t.Errorf("no plan of the corpus stops debt: the corpus no longer tests it")
		}
	})
	t.Run("Deterministic", func(t *testing.T) {
		runInvariant(t, cases, false, func(c *bookingCase) error {
			return checkDeterministic(c, rand.New(rand.NewPCG(c.seed, 5)))
		})
	})
	t.Run("Corpus", func(t *testing.T) {
		if len(cases) < 100 {
			t.Skip("too few seeds to judge the corpus")
		}
		checkBookingCorpus(t, cases)
	})
}

// runInvariant checks check on every case. With panics, it reports the
// cases whose Compute panicked; otherwise it leaves them out (NoPanic
// reports them) and reports those that break check. Each failing seed is
// named; the first is shrunk and printed.
func runInvariant(t *testing.T, cases []bookingCase, panics bool, check func(*bookingCase) error) {
	t.Helper()
	var failed []uint64
	skipped := 0
	var first *bookingCase
	var firstErr string
	for i := range cases {
		c := &cases[i]
		var msg string
		switch {
		case c.panicked != "" && panics:
			msg = "Compute panicked: " + c.panicked
		case c.panicked != "":
			skipped++
			continue
		case !panics:
			if err := check(c); err != nil {
				msg = err.Error()
			}
		}
		if msg == "" {
			continue
		}
		failed = append(failed, c.seed)
		if first == nil {
			first, firstErr = c, msg
		} else if len(failed) <= 10 {
			t.Errorf("seed %d: %s", c.seed, firstLine(msg))
		}
	}
	if skipped > 0 {
		t.Logf("%d seeds left out: Compute panicked on them (see NoPanic)", skipped)
	}
	if first == nil {
		return
	}
	fails := func(s *Snapshot) bool {
		c, err := newBookingCase(first.seed, deepCopySnapshot(s))
		if err != nil {
			return false
		}
		if panics {
			return c.panicked != ""
		}
		return c.panicked == "" && check(c) != nil
	}
	small := shrinkSnapshot(first.before, fails)
	sc, _ := newBookingCase(first.seed, deepCopySnapshot(small))
	p, msg := sc.p, sc.panicked
	if msg == "" && !panics {
		if err := check(sc); err != nil {
			msg = err.Error()
		}
	}
	t.Errorf("seed %d: %s\n\nshrunk to this snapshot, which still fails:\n%s\nplan:\n%s\nthe shrunk snapshot's failure: %s",
		first.seed, firstErr, describeSnapshot(small), describePlan(p), msg)
	if SnapshotJSON != nil {
		if b, err := SnapshotJSON(small); err == nil {
			t.Logf("the shrunk snapshot as JSON (gputide plan FILE):\n%s", b)
			if *bookingFound != "" {
				name := strings.ReplaceAll(strings.TrimPrefix(t.Name(), "TestBookingProperty/"), "/", "-")
				path := filepath.Join(*bookingFound, fmt.Sprintf("%s-seed-%d.json", name, first.seed))
				if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
					t.Error(err)
				}
			}
		}
	}
	t.Errorf("%d of %d seeds fail: %v", len(failed), len(cases), failed)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// shrinkSnapshot removes, one at a time, pending groups, allocations,
// reservations, holds, pre-warms, idle groups, nodes (with what is on
// them) and quota namespaces while the snapshot still passes Validate and
// still fails; it stops after a few seconds.
func shrinkSnapshot(s *Snapshot, fails func(*Snapshot) bool) *Snapshot {
	deadline := time.Now().Add(5 * time.Second)
	try := func(c *Snapshot) bool {
		return time.Now().Before(deadline) && c.Validate() == nil && fails(c)
	}
	type lister struct {
		n      func(*Snapshot) int
		remove func(*Snapshot, int) *Snapshot
	}
	without := func(c *Snapshot) *Snapshot { x := *c; return &x }
	listers := []lister{
		{func(c *Snapshot) int { return len(c.Pending) }, func(c *Snapshot, i int) *Snapshot {
			x := without(c)
			x.Pending = slices.Delete(slices.Clone(c.Pending), i, i+1)
			return x
		}},
		{func(c *Snapshot) int { return len(c.Prewarm) }, func(c *Snapshot, i int) *Snapshot {
			x := without(c)
			x.Prewarm = slices.Delete(slices.Clone(c.Prewarm), i, i+1)
			return x
		}},
		{func(c *Snapshot) int { return len(c.IdleGroups) }, func(c *Snapshot, i int) *Snapshot {
			x := without(c)
			x.IdleGroups = slices.Delete(slices.Clone(c.IdleGroups), i, i+1)
			return x
		}},
		{func(c *Snapshot) int { return len(c.Holds) }, func(c *Snapshot, i int) *Snapshot {
			x := without(c)
			x.Holds = slices.Delete(slices.Clone(c.Holds), i, i+1)
			return x
		}},
		{func(c *Snapshot) int { return len(c.Reservations) }, func(c *Snapshot, i int) *Snapshot {
			x := without(c)
			x.Reservations = slices.Delete(slices.Clone(c.Reservations), i, i+1)
			return x
		}},
		{func(c *Snapshot) int { return len(c.Allocations) }, func(c *Snapshot, i int) *Snapshot {
			x := without(c)
			x.Allocations = slices.Delete(slices.Clone(c.Allocations), i, i+1)
			return x
		}},
		{func(c *Snapshot) int { return len(c.Nodes) }, func(c *Snapshot, i int) *Snapshot {
			x := without(c)
			id := c.Nodes[i].ID
			x.Nodes = slices.Delete(slices.Clone(c.Nodes), i, i+1)
			x.Allocations = slices.DeleteFunc(slices.Clone(c.Allocations), func(a Allocation) bool { return a.Node == id })
			x.Holds = slices.DeleteFunc(slices.Clone(c.Holds), func(h Hold) bool { return h.Node == id })
			return x
		}},
	}
	for changed := true; changed && time.Now().Before(deadline); {
		changed = false
		for _, l := range listers {
			for i := 0; i < l.n(s); {
				if c := l.remove(s, i); try(c) {
					s, changed = c, true
				} else {
					i++
				}
			}
		}
	}
	return s
}

// describeSnapshot writes s for a reader: times as offsets from s.Time.
func describeSnapshot(s *Snapshot) string {
	var b strings.Builder
	at := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		d := t.Sub(s.Time)
		if d >= 0 {
			return "+" + d.String()
		}
		return d.String()
	}
	fmt.Fprintf(&b, "time %s; min_runtime %s, debt_grace %s, settle %s, drain_margin %s, drain_horizon %s\n",
		s.Time.Format(time.RFC3339), s.Settings.MinRuntime, s.Settings.DebtGrace, s.Settings.Settle,
		s.Settings.DrainMargin, s.Settings.DrainHorizon)
	var tree func(n *quota.Node, depth int)
	tree = func(n *quota.Node, depth int) {
		fmt.Fprintf(&b, "%squota %s gpus %v ns %v", strings.Repeat("  ", depth), n.Name, n.GPUs, n.Namespaces)
		if n.ChildPreemption {
			b.WriteString(" child-preemption")
		}
		if n.PriorityPreemption {
			b.WriteString(" priority-preemption")
		}
		if !n.ChangedAt.IsZero() {
			fmt.Fprintf(&b, " changed %s", at(n.ChangedAt))
		}
		b.WriteString("\n")
		for _, c := range n.Children {
			tree(c, depth+1)
		}
	}
	tree(s.Quota, 0)
	for _, n := range s.Nodes {
		var bad []string
		for _, g := range n.GPUs {
			if !g.Healthy {
				bad = append(bad, g.ID)
			}
		}
		fmt.Fprintf(&b, "node %s %s pool %s: %d x %s", n.ID, n.Datacenter, poolOf(n.NodePool), len(n.GPUs), n.GPUs[0].Model)
		if len(bad) > 0 {
			fmt.Fprintf(&b, " (unhealthy %v)", bad)
		}
		b.WriteString("\n")
	}
	for _, a := range s.Allocations {
		fmt.Fprintf(&b, "alloc %s %s/%s/%s %s prio %d on %s %v started %s", a.ID, a.Namespace, a.Job, a.Group, a.Type,
			a.Priority, a.Node, a.GPUIDs, at(a.StartedAt))
		for _, f := range []struct {
			on   bool
			text string
		}{{a.Idle, " idle"}, {a.Elastic, " elastic"}, {a.Reservation != "", " reservation " + a.Reservation},
			{!a.StoppingFor.IsZero(), " stopping for " + a.StoppingFor.String()},
			{a.StoppingForReservation != "", " stopping for reservation " + a.StoppingForReservation},
			{a.MaxRun > 0, fmt.Sprintf(" flex max_run %s admitted %s", a.MaxRun, at(a.AdmittedAt))}} {
			if f.on {
				b.WriteString(f.text)
			}
		}
		fmt.Fprintf(&b, " kill_timeout %s\n", a.KillTimeout)
	}
	for _, p := range s.Pending {
		fmt.Fprintf(&b, "pending %s %s prio %d: %d x %d GPUs", p.Key(), p.Type, p.Priority, p.Count, p.GPUs)
		if p.Model != "" {
			fmt.Fprintf(&b, " model %s", p.Model)
		}
		if len(p.Datacenters) > 0 {
			fmt.Fprintf(&b, " dc %v", p.Datacenters)
		}
		if p.Idle {
			b.WriteString(" idle")
		}
		if p.Reservation != "" {
			b.WriteString(" reservation " + p.Reservation)
		}
		if p.Flex != nil {
			fmt.Fprintf(&b, " %s", p.Flex)
		}
		fmt.Fprintf(&b, " submitted %s\n", at(p.SubmittedAt))
	}
	for _, r := range s.Reservations {
		allocGPUs, count := r.Shape()
		fmt.Fprintf(&b, "reservation %s %s in %s: %d GPUs (%d x %d)", r.ID, r.Namespace, r.Quota, r.GPUs, count, allocGPUs)
		if r.Model != "" {
			fmt.Fprintf(&b, " model %s", r.Model)
		}
		fmt.Fprintf(&b, " from %s to %s\n", at(r.Start), at(r.End))
	}
	for _, h := range s.Holds {
		fmt.Fprintf(&b, "hold for %s on %s %v until %s\n", h.For, h.Node, h.GPUIDs, at(h.Until))
	}
	for _, w := range s.Prewarm {
		fmt.Fprintf(&b, "prewarm %s %s prio %d: +%d x %d GPUs at %s until %s\n", w.Key(), w.Type, w.Priority, w.Count, w.GPUs,
			at(w.At), at(w.Until))
	}
	return b.String()
}

// describePlan writes p's actions one a line.
func describePlan(p *Plan) string {
	if p == nil {
		return "(no plan)\n"
	}
	var b strings.Builder
	for _, a := range p.Actions {
		fmt.Fprintf(&b, "%s %s", a.Action, a.Rule)
		if a.Alloc != "" {
			fmt.Fprintf(&b, " %s", a.Alloc)
		}
		fmt.Fprintf(&b, " %s/%s", a.Namespace, a.Job)
		if a.Group != "" {
			fmt.Fprintf(&b, "/%s", a.Group)
		}
		if a.Node != "" {
			fmt.Fprintf(&b, " on %s", a.Node)
		}
		if len(a.Nodes) > 0 {
			fmt.Fprintf(&b, " on %v", a.Nodes)
		}
		if len(a.GPUIDs) > 0 {
			fmt.Fprintf(&b, " %v", a.GPUIDs)
		}
		if !a.For.IsZero() {
			fmt.Fprintf(&b, " for %s", a.For)
		}
		if a.Reservation != "" {
			fmt.Fprintf(&b, " reservation %s", a.Reservation)
		}
		if a.Reason != "" {
			fmt.Fprintf(&b, ": %s", a.Reason)
		}
		b.WriteString("\n")
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	return b.String()
}

// checkDeterministic is invariant (c): Compute gives the same plan for
// the same snapshot, again and with its lists shuffled, and leaves the
// snapshot as it was (a deep copy taken before the first Compute).
func checkDeterministic(c *bookingCase, r *rand.Rand) error {
	s, p, before := c.s, c.p, c.before
	again, _, err := computeSafe(s)
	if err != nil || again == nil {
		return fmt.Errorf("second Compute: %v", err)
	}
	if !reflect.DeepEqual(p, again) {
		return fmt.Errorf("plans differ for the same snapshot (-first +second):\n%s", cmp.Diff(p, again))
	}
	sh := shuffled(s, r)
	sh.Reservations = slices.Clone(s.Reservations)
	sh.Holds = slices.Clone(s.Holds)
	sh.Prewarm = slices.Clone(s.Prewarm)
	r.Shuffle(len(sh.Reservations), func(i, j int) { sh.Reservations[i], sh.Reservations[j] = sh.Reservations[j], sh.Reservations[i] })
	r.Shuffle(len(sh.Holds), func(i, j int) { sh.Holds[i], sh.Holds[j] = sh.Holds[j], sh.Holds[i] })
	r.Shuffle(len(sh.Prewarm), func(i, j int) { sh.Prewarm[i], sh.Prewarm[j] = sh.Prewarm[j], sh.Prewarm[i] })
	p3, _, err := computeSafe(sh)
	if err != nil || p3 == nil {
		return fmt.Errorf("Compute of the shuffled snapshot: %v", err)
	}
	if !reflect.DeepEqual(p, p3) {
		return fmt.Errorf("plans differ for the same snapshot with its lists shuffled (-first +shuffled):\n%s", cmp.Diff(p, p3))
	}
	// reflect.DeepEqual first: cmp.Diff on every seed costs seconds.
	if !reflect.DeepEqual(before, s) {
		return fmt.Errorf("Compute changed the snapshot (-before +after):\n%s", cmp.Diff(before, s))
	}
	return nil
}

// deepCopySnapshot copies s and everything it points to.
func deepCopySnapshot(s *Snapshot) *Snapshot {
	c := *s
	var tree func(n *quota.Node) *quota.Node
	tree = func(n *quota.Node) *quota.Node {
		x := *n
		x.Namespaces = slices.Clone(n.Namespaces)
		x.Children = nil
		for _, k := range n.Children {
			x.Children = append(x.Children, tree(k))
		}
		return &x
	}
	c.Quota = tree(s.Quota)
	c.Nodes = slices.Clone(s.Nodes)
	for i := range c.Nodes {
		c.Nodes[i].GPUs = slices.Clone(s.Nodes[i].GPUs)
	}
	c.Allocations = slices.Clone(s.Allocations)
	for i := range c.Allocations {
		c.Allocations[i].GPUIDs = slices.Clone(s.Allocations[i].GPUIDs)
	}
	c.Pending = slices.Clone(s.Pending)
	for i := range c.Pending {
		c.Pending[i].Datacenters = slices.Clone(s.Pending[i].Datacenters)
		if f := s.Pending[i].Flex; f != nil {
			x := *f
			c.Pending[i].Flex = &x
		}
	}
	c.Reservations = slices.Clone(s.Reservations)
	c.Holds = slices.Clone(s.Holds)
	for i := range c.Holds {
		c.Holds[i].GPUIDs = slices.Clone(s.Holds[i].GPUIDs)
	}
	c.IdleGroups = slices.Clone(s.IdleGroups)
	c.Prewarm = slices.Clone(s.Prewarm)
	for i := range c.Prewarm {
		c.Prewarm[i].Datacenters = slices.Clone(s.Prewarm[i].Datacenters)
	}
	return &c
}

// checkDebtStops is invariant (b), DESIGN L9 and L5 step 1: an allocation
// stopped as debt (rule L5.1, or a drain's or pre-warm's stop that says
// debt) is debt of a quota node whose grace has passed once every
// allocation that the plan stopped before it has left the usage: with the
// earlier stops taken out, the fill of debtOf still leaves it out, and
// some node on its way to the root is over its nominal with its grace
// over. The allocations of one stopped unit (consecutive stops of one job
// for one owner and rule) leave together. It returns how many debt stops
// it checked.
func checkDebtStops(s *Snapshot, p *Plan) (int, error) {
	allocs := map[string]*Allocation{}
	byJob := map[JobKey][]string{}
	for i := range s.Allocations {
		a := &s.Allocations[i]
		allocs[a.ID] = a
		byJob[a.JobKey()] = append(byJob[a.JobKey()], a.ID)
	}
	owner := quota.Namespaces(s.Quota)
	parent := map[string]*quota.Node{}
	byName := map[string]*quota.Node{}
	s.Quota.Walk(func(n *quota.Node) {
		byName[n.Name] = n
		for _, c := range n.Children {
			parent[c.Name] = n
		}
	})
	gone := map[string]bool{}
	var stopped []string // in plan order, with their rules, for messages
	var unit []string
	var unitKey string
	flush := func() {
		for _, id := range unit {
			gone[id] = true
		}
		unit, unitKey = nil, ""
	}
	checked := 0
	for _, a := range p.Actions {
		switch a.Action {
		case ActionStopJob, ActionSuspend:
			flush()
			for _, id := range byJob[JobKey{Namespace: a.Namespace, Job: a.Job}] {
				gone[id] = true
				stopped = append(stopped, id+" ("+string(a.Rule)+")")
			}
			continue
		case ActionStop:
		default:
			continue
		}
		v := allocs[a.Alloc]
		if v == nil {
			continue
		}
		key := fmt.Sprintf("%s|%s|%s|%s|%s", v.Namespace, v.Job, a.For, a.Reservation, a.Rule)
		if key != unitKey {
			flush()
			unitKey = key
		}
		unit = append(unit, v.ID)
		stopped = append(stopped, v.ID+" ("+string(a.Rule)+")")
		if v.Idle || (a.Rule != RuleIdleDebt && !strings.Contains(a.Reason, "debt")) {
			continue
		}
		checked++
		rest := *s
		rest.Allocations = slices.DeleteFunc(slices.Clone(s.Allocations), func(x Allocation) bool { return gone[x.ID] })
		if !debtOf(&rest)[v.ID] {
			return checked, fmt.Errorf("L9/L5.1: %s (%s/%s, %d GPUs, quota %s) is stopped as debt (rule %s: %q), but once the "+
				"allocations the plan stopped before it have left the usage (%v) it is not debt: %s",
				v.ID, v.Namespace, v.Job, len(v.GPUIDs), owner[v.Namespace], a.Rule, a.Reason, stopped[:len(stopped)-1],
				usageText(&rest, owner[v.Namespace], byName, parent))
		}
		// Grace (L9): some node on its way to the root is over with its
		// grace over.
		ok := false
		for n := byName[owner[v.Namespace]]; n != nil; n = parent[n.Name] {
			if nonIdleUnder(&rest, n) > n.GPUs.Total() && (n.ChangedAt.IsZero() || !s.Time.Before(n.ChangedAt.Add(s.Settings.DebtGrace))) {
				ok = true
			}
		}
		if !ok {
			return checked, fmt.Errorf("L9: %s is stopped as debt (rule %s) though no quota node over its nominal above it has "+
				"passed debt_grace %s: %s", v.ID, a.Rule, s.Settings.DebtGrace, usageText(&rest, owner[v.Namespace], byName, parent))
		}
	}
	return checked, nil
}

// nonIdleUnder is the GPUs of the non-idle allocations of n's subtree.
func nonIdleUnder(s *Snapshot, n *quota.Node) int {
	in := map[string]bool{}
	n.Walk(func(x *quota.Node) {
		for _, ns := range x.Namespaces {
			in[ns] = true
		}
	})
	used := 0
	for _, a := range s.Allocations {
		if in[a.Namespace] && !a.Idle {
			used += len(a.GPUIDs)
		}
	}
	return used
}

// usageText says, for quota node q and its ancestors, the non-idle GPUs
// of s and the nominal.
func usageText(s *Snapshot, q string, byName, parent map[string]*quota.Node) string {
	var parts []string
	for n := byName[q]; n != nil; n = parent[n.Name] {
		changed := "no change time"
		if !n.ChangedAt.IsZero() {
			changed = "changed " + n.ChangedAt.Sub(s.Time).String()
		}
		parts = append(parts, fmt.Sprintf("%s holds %d non-idle of nominal %v (%s)", n.Name, nonIdleUnder(s, n), n.GPUs, changed))
	}
	return strings.Join(parts, "; ")
}

// checkBookingCorpus fails when the corpus no longer has what the suite
// is for: plans that stop displaced allocations (L10.start), stop a batch
// job of several allocations, stop debt, hold GPUs, drain, admit a job
// of a booking, and snapshots with intruders on held GPUs.
func checkBookingCorpus(t *testing.T, cases []bookingCase) {
	seen := map[string]int{}
	for _, c := range cases {
		if c.p == nil {
			continue
		}
		perJob := map[string]int{}
		for _, a := range c.p.Actions {
			seen[string(a.Action)+" "+string(a.Rule)]++
			if a.Action == ActionStop {
				perJob[a.Namespace+"/"+a.Job+"/"+string(a.Rule)+a.For.String()]++
			}
		}
		for _, n := range perJob {
			if n > 1 {
				seen["stop of a unit of several allocations"]++
			}
		}
		pend := map[GroupKey]*Pending{}
		for i := range c.s.Pending {
			pend[c.s.Pending[i].Key()] = &c.s.Pending[i]
		}
		for _, a := range c.p.Actions {
			if g := pend[GroupKey{Namespace: a.Namespace, Job: a.Job, Group: a.Group}]; a.Action == ActionAdmit && g != nil && g.Reservation != "" {
				seen["admit of a job of a booking"]++
			}
		}
	}
	var keys []string
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t.Logf("actions over the corpus: %v", seen)
	for _, k := range []string{"stop L10.start", "stop L5.1", "stop L5.2", "stop L10.drain", "stop L5.prewarm", "hold L10",
		"stop_job L10.end", "admit L10", "stop of a unit of several allocations", "admit of a job of a booking"} {
		if seen[k] == 0 {
			t.Errorf("no plan of the booking corpus has %q: the corpus no longer tests it (%v)", k, keys)
		}
	}
}
