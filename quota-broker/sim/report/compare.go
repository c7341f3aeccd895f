package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/sim"
)

// policyText defines each policy in one sentence (see sim.Static, sim.Kueue
// and docs/simulator.md).
var policyText = map[string]string{
	"static":       "**static**: flat, hard quotas as Nomad Enterprise gives them: each inference workspace owns whole nodes sized to its day peak, the other workspaces split the remaining GPUs in proportion to their quotas' nominals, with no lending and no preemption.",
	"kueue":        "**kueue**: a Kueue-like cohort with one ClusterQueue per workspace on the same shares: idle capacity is borrowed by anyone, and a queue below its nominal reclaims it by evicting borrowers chosen by quota alone (lowest priority, newest first, not node-aware), after the count has risen.",
	"gputide":      "**gputide**: the real planning core on the scenario's quota tree: idle jobs borrow any unused GPU (L4), entitled jobs preempt idle work first and then by the laws L5-L6 on the node that frees the fewest GPUs, and the core pre-warms scheduled scale-ups: it stops borrowers at the boundary less their kill_timeout and the drain margin and holds the GPUs for the replicas (L5 pre-warm). It decides idle jobs in DESIGN L14's order (each time the one whose quota node would have the lowest borrowed share after its admission), and an idle job that finds no free GPU takes idle GPUs back from a side that borrows more (rule L14.fair), within the quotas' eviction budgets.",
	"gputide-fifo": "**gputide-fifo**: the same core with idle jobs decided in L3 order (priority, then submission) on free GPUs only, with no give-back: the core before DESIGN L14.",
}

// whyOf is why policy wins metric m: its own text, or, for gputide-fifo,
// gputide's (the same core).
func whyOf(m metric, policy string) string {
	if t, ok := m.why[policy]; ok {
		return t
	}
	if policy == "gputide-fifo" {
		return m.why["gputide"]
	}
	return ""
}

// metric is one row of the comparison: its value per run, how it is shown,
// whether more is better, and why the winner wins, per winning policy.
type metric struct {
	name   string
	value  func(*sim.Result) float64
	show   func(*sim.Result) string
	higher bool
	why    map[string]string
	// detail rows are left out of the one-screen summary.
	detail bool
}

var metrics = []metric{
	{name: "utilisation (GPU time on running allocations)", value: (*sim.Result).Utilisation,
		show: func(r *sim.Result) string { return pct(r.Utilisation()) }, higher: true,
		why: map[string]string{
			"gputide": "idle jobs run on any GPU a quota leaves unused, at once, and only idle work is stopped to give it back",
			"kueue":   "borrowing in the cohort fills idle shares",
			"static":  "nothing is stopped, so no GPU time goes to kill_timeouts",
		}},
	{name: "night allocation while idle training waits", value: (*sim.Result).NightAllocation,
		show: func(r *sim.Result) string { return pct(r.NightAllocation()) }, higher: true,
		why: map[string]string{
			"gputide": "the inference nodes' night capacity is lent to idle training",
			"kueue":   "borrowing lets training use the inference queue's idle share",
			"static":  "its partitions happened to match the night's demand",
		}},
	{name: "inference wait at scheduled scale-ups (longest)", value: func(r *sim.Result) float64 { return r.MaxBoundaryWait().Seconds() },
		show: func(r *sim.Result) string { return Dur(r.MaxBoundaryWait()) },
		why: map[string]string{
			"gputide": "the core's pre-warm stops borrowers kill_timeout + drain_margin before the boundary and holds the GPUs for the replicas",
			"static":  "inference owns nodes sized to its peak, idle at night",
			"kueue":   "its reclaim happened to free whole nodes in time",
		}},
	{name: "inference wait, all scale-ups (mean)", value: func(r *sim.Result) float64 { return r.MeanScaleUpWait().Seconds() },
		show: func(r *sim.Result) string { return Dur(r.MeanScaleUpWait()) },
		why: map[string]string{
			"gputide": "node-aware victims: the GPUs freed are on one node, where the replica fits",
			"static":  "inference owns nodes sized to its peak",
			"kueue":   "its reclaim happened to free whole nodes in time",
		}, detail: true},
	{name: "training queue wait (mean, all: still waiting so far)", value: func(r *sim.Result) float64 { return r.TrainingWait().Seconds() },
		show: func(r *sim.Result) string { return Dur(r.TrainingWait()) },
		why: map[string]string{
			"gputide": "borrowed GPUs start idle jobs at once and entitled jobs take idle GPUs back",
			"kueue":   "borrowing starts jobs on idle shares, and fewer borrowers are stopped to be queued again",
			"static":  "no job is stopped and queued again",
		}},
	{name: "training queue wait (mean, started)", value: func(r *sim.Result) float64 { w, _ := r.StartedWait(); return w.Seconds() },
		show: func(r *sim.Result) string { w, _ := r.StartedWait(); return Dur(w) },
		why: map[string]string{
			"gputide": "borrowed GPUs start idle jobs at once and entitled jobs take idle GPUs back",
			"kueue":   "borrowing starts jobs on idle shares",
			"static":  "fewer jobs start, the short ones first",
		}, detail: true},
	{name: "training queue wait, non-idle jobs (mean, all)", value: func(r *sim.Result) float64 { return kindWait(r, false).Seconds() },
		show: func(r *sim.Result) string { return Dur(kindWait(r, false)) },
		why: map[string]string{
			"gputide": "entitled jobs take idle jobs' GPUs at once (L3, L5.1): idle work never blocks them",
			"kueue":   "a queue below its nominal reclaims borrowed capacity",
			"static":  "its partitions happened to match this demand",
		}},
	{name: "training queue wait, idle jobs (mean, all)", value: func(r *sim.Result) float64 { return kindWait(r, true).Seconds() },
		show: func(r *sim.Result) string { return Dur(kindWait(r, true)) },
		why: map[string]string{
			"gputide": "idle jobs borrow every unused GPU",
			"kueue":   "its jobs are not told apart: idle ones queue like the others, by quota and submission",
			"static":  "its jobs are not told apart: idle ones queue like the others within the partition",
		}},
	{name: "training jobs never started", value: func(r *sim.Result) float64 { return float64(r.Waiting()) },
		show: func(r *sim.Result) string { return fmt.Sprint(r.Waiting()) },
		why: map[string]string{
			"gputide": "every unused GPU is lent, so more of the queue is served",
			"kueue":   "borrowing serves more of the queue",
			"static":  "no started job is stopped and queued again",
		}},
	{name: "work lost to preemption (GPU-h)", value: func(r *sim.Result) float64 { return r.LostGPUh },
		show: func(r *sim.Result) string { return fmt.Sprintf("%.1f", r.LostGPUh) },
		why: map[string]string{
			"static":  "it never preempts (and never lends)",
			"kueue":   "it lends less than gputide, so fewer borrowers are stopped when owners come back",
			"gputide": "victims are chosen to lose the least work (newest first, L6)",
		}},
	{name: "GPU-h held by stopped allocations (kill_timeout)", value: func(r *sim.Result) float64 { return r.Total.Stopping / 3600 },
		show: func(r *sim.Result) string { return fmt.Sprintf("%.1f", r.Total.Stopping/3600) },
		why: map[string]string{
			"static":  "it never preempts",
			"kueue":   "it stops fewer allocations",
			"gputide": "it stops fewer allocations, choosing victims node by node",
		}, detail: true},
	{name: "allocations preempted", value: func(r *sim.Result) float64 { return float64(preempted(r)) },
		show: func(r *sim.Result) string { return fmt.Sprint(preempted(r)) },
		why: map[string]string{
			"static":  "it never preempts",
			"kueue":   "it lends less, so fewer borrowers are stopped",
			"gputide": "node-aware victim sets stop the fewest allocations that free a node's GPUs",
		}, detail: true},
}

func preempted(r *sim.Result) int {
	n := 0
	for _, x := range r.Rules {
		if x.Rule != "autoscaler" {
			n += x.Stops
		}
	}
	return n
}

// winners are the runs with the best value of m (all equal ones).
func winners(m metric, rs []*sim.Result) []*sim.Result {
	var best []*sim.Result
	var bv float64
	for _, r := range rs {
		v := m.value(r)
		if v < 0 {
			continue // not measured (no such time)
		}
		better := len(best) == 0 || (m.higher && v > bv+1e-9) || (!m.higher && v < bv-1e-9)
		switch {
		case better:
			best, bv = []*sim.Result{r}, v
		case v >= bv-1e-9 && v <= bv+1e-9:
			best = append(best, r)
		}
	}
	return best
}

// Comparison writes the compared runs: what each policy is, one table with
// a column naming each metric's winner, and why it wins.
func Comparison(d *doc, rs []*sim.Result) {
	var defs []string
	seen := map[string]bool{}
	for _, r := range rs {
		if t, ok := policyText[r.Policy]; ok && !seen[r.Policy] {
			defs = append(defs, t)
			seen[r.Policy] = true
		}
	}
	for _, r := range rs {
		if r.Label != "" {
			defs = append(defs, fmt.Sprintf("**%s**: %s", Label(r), r.LabelText))
		}
	}
	d.list(defs...)
	trees(d, rs)
	head := []string{""}
	for _, r := range rs {
		head = append(head, Label(r)+">")
	}
	head = append(head, "best", "why")
	t := d.table(head...)
	for _, m := range metrics {
		cells := []string{m.name}
		for _, r := range rs {
			cells = append(cells, m.show(r))
		}
		ws := winners(m, rs)
		var names []string
		for _, w := range ws {
			names = append(names, Label(w))
		}
		why := ""
		switch {
		case len(ws) == len(rs):
			why = "all equal"
		case len(ws) == 1 && ws[0].Label == "":
			why = whyOf(m, ws[0].Policy)
			if other := treePeer(ws[0], rs); other != nil {
				// Against a run of the same policy only the tree differs:
				// the policy's mechanism does not explain that win.
				why = "its quota tree"
				if !samePolicy(rs) && whyOf(m, ws[0].Policy) != "" {
					why = whyOf(m, ws[0].Policy) + "; over " + Label(other) + ": its quota tree"
				}
			}
		case len(ws) == 1:
			why = "its quota tree"
		default:
			// Winners with the same reason (gputide and gputide-fifo:
			// one core) share one part, named together.
			var parts []string
			named := map[string]int{}
			for _, w := range ws {
				t := whyOf(m, w.Policy)
				if t == "" || w.Label != "" {
					continue
				}
				if i, ok := named[t]; ok {
					parts[i] = strings.Replace(parts[i], ": ", ", "+Label(w)+": ", 1)
					continue
				}
				named[t] = len(parts)
				parts = append(parts, Label(w)+": "+t)
			}
			why = strings.Join(parts, "; ")
		}
		cells = append(cells, strings.Join(names, ", "), why)
		t.row(cells...)
	}
	d.p("The same workload (one seed) runs under each column; *best* names the column with the best value (ties all named), and *why* the mechanism that makes it so. See docs/simulator.md for how each policy is modelled.")
	// Work lost is the price of lending: say how much of it is.
	for _, r := range rs {
		b := 0.0
		for _, x := range r.Rules {
			b += x.LostBorrowing
		}
		if r.LostGPUh > 0 {
			d.p("%s lost %.1f GPU-h to preemption: %.1f by borrowing (idle) victims, %.1f by victims inside their quota.", Label(r), r.LostGPUh, b, r.LostGPUh-b)
		}
	}
}

// CompareTable writes the comparison's table alone, for the summary.
func CompareTable(w io.Writer, rs []*sim.Result) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("| |")
	for _, r := range rs {
		p(" %s |", Label(r))
	}
	p(" best |\n|---|")
	for range rs {
		p("---:|")
	}
	p("---|\n")
	for _, m := range metrics {
		if m.detail {
			continue
		}
		p("| %s |", m.name)
		for _, r := range rs {
			p(" %s |", m.show(r))
		}
		var names []string
		for _, x := range winners(m, rs) {
			names = append(names, Label(x))
		}
		p(" %s |\n", strings.Join(names, ", "))
	}
}

// trees puts the quota trees of the runs side by side when one of them is
// a what-if tree: each node's nominal at the start, per run.
func trees(d *doc, rs []*sim.Result) {
	what := false
	for _, r := range rs {
		what = what || r.Label != ""
	}
	if !what {
		return
	}
	var names []string
	seen := map[string]bool{}
	for _, r := range rs {
		for _, q := range r.Quotas {
			if !seen[q.Quota] {
				seen[q.Quota] = true
				names = append(names, q.Quota)
			}
		}
	}
	head := []string{"quota nominal (GPUs at the start)"}
	for _, r := range rs {
		head = append(head, Label(r)+">")
	}
	t := d.table(head...)
	for _, n := range names {
		cells := []string{n}
		for _, r := range rs {
			v := "-"
			for _, q := range r.Quotas {
				if q.Quota == n {
					v = fmt.Sprint(q.Nominal)
				}
			}
			cells = append(cells, v)
		}
		t.row(cells...)
	}
}

// kindWait is the mean wait of the idle (or non-idle) training jobs, one
// that never started counted with its wait so far (sim.WaitGroup).
func kindWait(r *sim.Result, idle bool) time.Duration {
	sum, n := 0.0, 0
	for _, g := range r.WaitGroups {
		if g.Idle == idle {
			sum += g.Seconds
			n += g.Jobs()
		}
	}
	if n == 0 {
		return 0
	}
	return time.Duration(sum / float64(n) * float64(time.Second))
}

// treePeer is a compared run of w's policy with another quota tree (a
// what-if column), or nil: what separates w from it is the tree alone.
func treePeer(w *sim.Result, rs []*sim.Result) *sim.Result {
	for _, r := range rs {
		if r != w && r.Policy == w.Policy && r.Label != w.Label {
			return r
		}
	}
	return nil
}

// samePolicy says whether every compared run has one policy (only -compare-quota).
func samePolicy(rs []*sim.Result) bool {
	for _, r := range rs {
		if r.Policy != rs[0].Policy {
			return false
		}
	}
	return true
}
