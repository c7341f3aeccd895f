// Package report writes what a simulation measured: report.md and the same
// as one self-contained report.html, the charts (occupancy.svg, queue.svg,
// losses.svg) and the one-screen summary.
package report

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/sim"
)

// Files are the names of what Write puts in the output folder.
const (
	ReportFile    = "report.md"
	HTMLFile      = "report.html"
	OccupancyFile = "occupancy.svg"
	QueueFile     = "queue.svg"
	LossesFile    = "losses.svg"
	EventsFile    = "events.jsonl"
)

// chartKinds are the charts of one run: file stem, what it shows, and how
// it is drawn.
var chartKinds = []struct {
	stem, caption string
	draw          func(io.Writer, *sim.Result, Scales, string) error
}{
	{"occupancy", "GPUs in use over time, stacked by workspace (hatched: borrowed GPUs; grey: stopping allocations); below, each quota's use against the limit the policy enforces", Occupancy},
	{"queue", "GPUs waiting over time by workspace (the queue): non-idle jobs solid, idle jobs hatched", Queue},
	{"losses", "GPU-hours of work lost to preemption in each hour, by rule: victims inside their quota solid, borrowing (idle) victims hatched", Losses},
}

// chartFile is the file of a chart kind for a run: occupancy.svg for the
// main run, occupancy-<label>.svg for a compared one.
func chartFile(stem, label string) string {
	if label == "" {
		return stem + ".svg"
	}
	return stem + "-" + label + ".svg"
}

// CompareFiles are the charts of the compared policies (-compare), named
// <chart>-<policy>.svg (gputide's when the main run is gputide-fifo's), and of a compared quota tree (-compare-quota),
// <chart>-whatif.svg. Write removes those a run without them leaves from an
// earlier run in the same folder.
var CompareFiles = func() []string {
	var out []string
	for _, label := range []string{"static", "kueue", "gputide-fifo", "gputide", "whatif"} {
		for _, k := range chartKinds {
			out = append(out, chartFile(k.stem, label))
		}
	}
	return out
}()

// Label names a compared run in files and tables: its policy, or the
// label given to its quota tree (Result.Label) for a what-if run.
func Label(r *sim.Result) string {
	if r.Label != "" {
		return r.Label
	}
	return r.Policy
}

// Write writes report.md, report.html and the charts of main into dir,
// and, for each compared run, its charts named after it; it removes the
// CompareFiles it did not write (left by an earlier run). notes are the
// workload's notes. Everything is drawn in memory first, so that a failure
// leaves no partial file.
func Write(dir string, main *sim.Result, compared []*sim.Result, notes []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files, err := Charts(main, compared)
	if err != nil {
		return err
	}
	var md, page bytes.Buffer
	Markdown(&md, main, compared, notes)
	HTML(&page, main, compared, notes, files)
	written := map[string]bool{}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.SVG, 0o644); err != nil {
			return err
		}
		written[f.Name] = true
	}
	if err := os.WriteFile(filepath.Join(dir, ReportFile), md.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, HTMLFile), page.Bytes(), 0o644); err != nil {
		return err
	}
	for _, name := range CompareFiles {
		if written[name] {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// ChartFile is one drawn chart.
type ChartFile struct {
	Name, Caption string
	Run           *sim.Result
	SVG           []byte
}

// Charts draws every chart of main and of the compared runs, on the
// scales they share.
func Charts(main *sim.Result, compared []*sim.Result) ([]ChartFile, error) {
	runs := []*sim.Result{main}
	for _, r := range compared {
		if r != main {
			runs = append(runs, r)
		}
	}
	sc := NewScales(runs...)
	var out []ChartFile
	for i, r := range runs {
		label := ""
		if i > 0 {
			label = Label(r)
		}
		for _, k := range chartKinds {
			name := chartFile(k.stem, label)
			var b bytes.Buffer
			if err := k.draw(&b, r, sc, strings.TrimSuffix(name, ".svg")); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			out = append(out, ChartFile{Name: name, Caption: k.caption, Run: r, SVG: b.Bytes()})
		}
	}
	return out, nil
}

func gpuh(sec float64) string { return fmt.Sprintf("%.0f", sec/3600) }

func pct(x float64) string {
	if x < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", 100*x)
}

// Dur formats a duration for people: 0s, 45s, 12m30s, 3h05m, 2d04h.
func Dur(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(q * float64(len(s)-1))
	return s[i]
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

func secs(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }

// ruleText is the "meaning" column of the preemptions table: one line per
// rule a stop, stop_job or suspend action of the core can carry (package
// plan's Rule constants, DESIGN L5, L10, L11), and the simulator's own.
var ruleText = map[string]string{
	"L5.1":          "idle allocation, or debt past its grace",
	"L5.2":          "child-level preemption (a parent's job takes its children's GPUs)",
	"L5.3":          "priority preemption within a quota",
	"L5.prewarm":    "pre-warm: GPUs freed ahead of a scheduled inference scale-up",
	"L14.fair":      "fair give-back: an idle job takes idle GPUs back from a side that borrows more (DESIGN L14)",
	"L10.drain":     "drain: GPUs freed for a Calendar booking's start",
	"L10.start":     "displaced by a job of an active Calendar booking",
	"L10.end":       "a booking's job stopped at its end (a job stop)",
	"L11":           "flex request stopped",
	"L11.max_run":   "flex request stopped at its max_run (a job stop)",
	"L11.settle":    "flex request suspended whole: not all of it ran within settle",
	"autoscaler":    "scale-down by the autoscaler (not a preemption)",
	"kueue:reclaim": "Kueue-like reclaim from a borrowing queue",
}

// Markdown writes report.md.
func Markdown(w io.Writer, r *sim.Result, compared []*sim.Result, notes []string) {
	d := build(r, compared, notes, nil, true)
	d.markdown(w)
}

// HTML writes report.html: the report with its charts inline, one file a
// browser opens from disk (no script, nothing fetched). It leaves out the
// real time the run took, so that one seed gives the same bytes.
func HTML(w io.Writer, r *sim.Result, compared []*sim.Result, notes []string, charts []ChartFile) {
	d := build(r, compared, notes, charts, false)
	d.html(w, "gputide simulation: "+r.Scenario.Name)
}

// build lays the report out. With charts, the figures hold their SVG
// (HTML); wall adds the real time the run took (Markdown only).
func build(r *sim.Result, compared []*sim.Result, notes []string, charts []ChartFile, wall bool) *doc {
	d := &doc{}
	d.h(1, "gputide simulation: %s", r.Scenario.Name)
	whatRan(d, r, notes, wall)
	if len(compared) > 1 {
		d.h(2, "Policy comparison")
		Comparison(d, compared)
	}
	utilisation(d, r)
	flavors(d, r)
	quotas(d, r)
	workspaces(d, r)
	fairLending(d, r, compared)
	whyWaited(d, r)
	preemptions(d, r)
	scaleUps(d, r)
	moves(d, r)
	calendar(d, r)
	figures(d, r, compared, charts)
	return d
}

func whatRan(d *doc, r *sim.Result, notes []string, wall bool) {
	sc := r.Scenario
	span := r.End.Sub(r.Start)
	d.h(2, "What ran")
	cluster := fmt.Sprintf("Cluster: %d GPUs", r.Capacity)
	for _, g := range sc.Nodes {
		cluster += fmt.Sprintf("; %d nodes x %d %s (%s, pool %s)", g.Count, g.GPUs, g.Model, g.Datacenter, g.NodePool)
		if m := g.MIG; m != nil {
			cluster += fmt.Sprintf(", %d GPUs of each cut into %d MIG %s slices (%d devices a node)", m.GPUs, m.Slices, m.Profile, g.Devices())
		}
	}
	items := []string{
		fmt.Sprintf("Scenario: `%s` (%s); policy **%s**; seed %d", sc.File, sc.Name, r.Policy, sc.Seed),
		fmt.Sprintf("Simulated: %s to %s (%s, %s)", r.Start.Format("Mon 2006-01-02 15:04"), r.End.Format("Mon 2006-01-02 15:04"), Dur(span), sc.Zone),
		cluster,
		fmt.Sprintf("Broker: plans on every arrival and finish and at least every %s (an unchanged state is not planned again); kill_timeout %s; pre-warm %v",
			sc.Broker.Interval, sc.Broker.KillTimeout, sc.Broker.Prewarm),
	}
	if r.Label != "" {
		items = append(items, fmt.Sprintf("Quota tree: %s", r.Label))
	}
	if wall {
		items = append(items, fmt.Sprintf("Run: %d simulated events, %d plans, %s of real time (%.0f events/s)", r.Events, r.Plans,
			r.Wall.Round(time.Millisecond), float64(r.Events)/max(r.Wall.Seconds(), 1e-9)))
	} else {
		items = append(items, fmt.Sprintf("Run: %d simulated events, %d plans", r.Events, r.Plans))
	}
	d.list(items...)
	if len(sc.Training) > 0 {
		t := d.table("training", "trace", "slice starts at (trace time)", "trace seconds per simulated second>", "GPU scale>", "rows kept>",
			"idle jobs>", "checkpoint every>", "checkpoint on stop (L8)>", "gangs")
		for _, tr := range sc.Training {
			ckpt := "never"
			if tr.Checkpoint > 0 {
				ckpt = Dur(tr.Checkpoint)
			}
			zone := time.UTC
			if tr.TraceZone != nil {
				zone = tr.TraceZone
			}
			onStop := "no"
			if w := tr.CheckpointWrite; w > 0 && w <= tr.KillTimeout {
				onStop = fmt.Sprintf("written in %s of a %s kill_timeout", Dur(w), Dur(tr.KillTimeout))
			} else if w > 0 {
				onStop = fmt.Sprintf("no: a %s write does not fit a %s kill_timeout", Dur(w), Dur(tr.KillTimeout))
			}
			t.row(tr.Name, traceText(tr), tr.TraceStart.In(zone).Format("2006-01-02 15:04 MST"), fmt.Sprintf("%g", tr.TimeScale),
				fmt.Sprintf("%g", tr.GPUScale), pct(tr.Sample), pct(tr.IdleFraction), ckpt, onStop, tr.Gang)
		}
	}
	if len(notes) > 0 {
		d.p("Inputs:")
		d.list(notes...)
	}
	if len(r.Conflicts) > 0 {
		d.h(3, "Plan actions that could not be applied (%d)", len(r.Conflicts))
		d.list(r.Conflicts[:min(len(r.Conflicts), 20)]...)
	}
}

func utilisation(d *doc, r *sim.Result) {
	capGPUh := float64(r.Capacity) * r.End.Sub(r.Start).Seconds()
	d.h(2, "Utilisation")
	t := d.table("", "GPU-hours>", "share of capacity>")
	row := func(name string, sec float64) { t.row(name, gpuh(sec), pct(sec/capGPUh)) }
	row("capacity", capGPUh)
	row("running allocations (utilisation)", r.Total.Running)
	row("of which idle jobs", r.Total.Idle)
	row("placed, waiting for a victim's kill_timeout", r.Total.Placing)
	row("stopping (kill_timeout after a stop)", r.Total.Stopping)
	row("idle GPUs (no allocation)", r.FreeGPUs)
	lent := 0.0
	for _, q := range r.Quotas {
		lent += q.Borrowed
	}
	row("lent: borrowed beyond a quota's nominal (DESIGN L4)", lent)
	d.p("At night (outside every inference window) the cluster was %s allocated; while idle training waited for at least as many GPUs as were free (%s of the night), %s.",
		pct(ratio(r.NightAlloc, float64(r.Capacity)*r.Night)), Dur(secs(r.NightDemand)), pct(r.NightAllocation()))
}

// flavors writes the section "Flavors" (DESIGN L13) when the tree
// declares flavors: each flavor's devices, occupancy, the waits of the
// jobs that first started in it and its preemptions.
func flavors(d *doc, r *sim.Result) {
	if len(r.Flavors) == 0 {
		return
	}
	sec := r.End.Sub(r.Start).Seconds()
	d.h(2, "Flavors")
	t := d.table("flavor", "GPUs>", "held GPU-h>", "occupancy>", "jobs started>", "mean wait>", "preemptions>", "work lost GPU-h>")
	for _, f := range r.Flavors {
		t.row(f.Flavor, fmt.Sprint(f.GPUs), gpuh(f.Used), pct(f.Occupancy(sec)), fmt.Sprint(f.Started), Dur(f.MeanWait()),
			fmt.Sprint(f.Stops), fmt.Sprintf("%.1f", f.LostGPUh))
	}
	d.p("Per flavor of the quota tree (DESIGN L13), in the tree's order. *Held* counts allocations placing, running or stopping on the flavor's devices; a job counts in the flavor its first allocation started in, its wait from its submission (or the run's start) to then; *preemptions* are the allocations of the flavor stopped by a plan.")
}

func quotas(d *doc, r *sim.Result) {
	d.h(2, "What each quota got")
	limit := ""
	if r.Limits != nil {
		limit = r.LimitName + ">"
	}
	head := []string{"quota", "nominal"}
	if limit != "" {
		head = append(head, limit)
	}
	head = append(head, "nominal GPU-h (over time)>", "used GPU-h>", "of nominal GPU-h>", "non-idle GPU-h>", "borrowed GPU-h>",
		"lendable (unused nominal) GPU-h>", "debt GPU-h>")
	t := d.table(head...)
	for qi, q := range r.Quotas {
		nominal := fmt.Sprint(q.Nominal)
		if len(r.Samples) > 0 {
			if last := r.Samples[len(r.Samples)-1]; len(last.Nominal) > qi && last.Nominal[qi] != q.Nominal {
				nominal = fmt.Sprintf("%d -> %d", q.Nominal, last.Nominal[qi])
			}
		}
		cells := []string{q.Quota, nominal}
		if limit != "" {
			cells = append(cells, fmt.Sprint(r.Limits[qi]))
		}
		cells = append(cells, gpuh(q.NominalTime), gpuh(q.Used), pct(q.OfNominal()), gpuh(q.NonIdle), gpuh(q.Borrowed), gpuh(q.Lendable), gpuh(q.Debt))
		t.row(cells...)
	}
	d.p("Subtree figures (DESIGN L4). *Nominal GPU-h* is the nominal over time (a quota move counts from when it happens); *of nominal*, used over it; borrowed (used above the nominal and the non-idle use) and lendable (nominal left unused, which idle jobs of any quota may borrow) are measured against the same nominal over time.")
	if r.Limits != nil {
		d.p("The %s policy does not enforce the tree: it caps each subtree at its %s (the shares of its workspaces); the tree's figures are given for comparison.", r.Policy, r.LimitName)
	}
}

func workspaces(d *doc, r *sim.Result) {
	d.h(2, "Workspaces")
	t := d.table("workspace", "quota", "GPU-h>", "of which idle jobs>", "training jobs submitted>", "started>", "still waiting>",
		"mean wait (started)>", "p50 (started)>", "p90 (started)>", "max (started)>", "mean wait (all, still waiting so far)>", "allocations preempted>")
	for _, ws := range r.WS {
		t.row(ws.Namespace, ws.Quota, gpuh(ws.Usage.Owned()), gpuh(ws.Usage.Idle), fmt.Sprint(ws.Jobs), fmt.Sprint(len(ws.Waits)), fmt.Sprint(ws.Unstarted),
			Dur(secs(mean(ws.Waits))), Dur(secs(quantile(ws.Waits, .5))), Dur(secs(quantile(ws.Waits, .9))), Dur(secs(quantile(ws.Waits, 1))),
			Dur(ws.AllWait()), fmt.Sprint(ws.Preempted))
	}
	sw, sn := r.StartedWait()
	d.p("Waits are from submission to first start, for the training jobs submitted during the run. The *(started)* columns count only the jobs that started; "+
		"*(all)* counts every job, one that never started with its wait so far (to the end of the run, or to its expiry). "+
		"Over all workspaces: %s mean over all %d jobs, %s mean over the %d that started.",
		Dur(r.TrainingWait()), sn+r.Waiting(), Dur(sw), sn)
}

// fairLending writes the section "Fair lending" (DESIGN L14): per
// workspace, the time integrals of its quota node's fair share, of what
// the node's subtree held, and of the fair share it did not hold, over the
// instants where L14 defines the node's fair share; with compared runs,
// the last figure per run.
func fairLending(d *doc, r *sim.Result, compared []*sim.Result) {
	d.h(2, "Fair lending")
	t := d.table("workspace", "quota", "fair share GPU-h>", "held GPU-h>", "below fair share GPU-h>")
	var roots []string
	for _, ws := range r.WS {
		q := quotaStats(r, ws.Quota)
		if q == nil || q.FairTime == 0 {
			t.row(ws.Namespace, ws.Quota, "n/a", "n/a", "n/a")
			if q != nil && r.Scenario != nil && r.Scenario.Quota != nil && r.Scenario.Quota.Name == q.Quota {
				roots = append(roots, fmt.Sprintf("`%s` (%s)", ws.Namespace, q.Quota))
			}
			continue
		}
		t.row(ws.Namespace, ws.Quota, gpuh(q.FairShare), gpuh(q.FairHeld), gpuh(q.FairBelow))
	}
	d.p("A quota node's *fair share* (DESIGN L14) is its base, max(non-idle, min(nominal, demand)), plus its part, by weight, of the GPUs its parent lends: " +
		"the parent's nominal less its own non-idle use and its children's bases, shared by water-filling among the children that want more (demand: GPUs held or asked for, pending included). " +
		"Each figure is a time integral over the instants where L14 defines the node's fair share: not for the root, which has no parent, nor while the children's bases exceed what the parent's own non-idle use leaves of its nominal (as when, in the reference, the parent's inference takes their GPUs by day). " +
		"*Held* is what the node's subtree held then (L2: every allocation, idle or not, stopping included), and *below fair share* the integral of max(0, fair share - held). " +
		"Figures are the quota node's, over its subtree; weights are the quota file's (`weight`; without one, the node's nominal); the one flavor is the tree's first.")
	if len(roots) > 0 {
		d.p("n/a: %s bound to the root, which L14 gives no fair share.", strings.Join(roots, ", "))
	}
	var spans []string
	for _, ws := range r.WS {
		if q := quotaStats(r, ws.Quota); q != nil && q.FairTime > 0 {
			spans = append(spans, fmt.Sprintf("%s %s", ws.Namespace, Dur(secs(q.FairTime))))
		}
	}
	if len(spans) > 0 {
		d.p("Fair shares were defined for %s of the %s simulated.", strings.Join(spans, ", "), Dur(r.End.Sub(r.Start)))
	}
	if len(compared) < 2 {
		return
	}
	head := []string{"below fair share GPU-h", "quota"}
	for _, c := range compared {
		head = append(head, Label(c)+">")
	}
	ct := d.table(head...)
	for _, ws := range r.WS {
		cells := []string{ws.Namespace, ws.Quota}
		for _, c := range compared {
			q := quotaStats(c, ws.Quota)
			if q == nil || q.FairTime == 0 {
				cells = append(cells, "n/a")
				continue
			}
			cells = append(cells, fmt.Sprintf("%s of %s in %s", gpuh(q.FairBelow), gpuh(q.FairShare), Dur(secs(q.FairTime))))
		}
		ct.row(cells...)
	}
	d.p("Per compared run: the GPU-hours of fair share the workspace's quota did not hold, of its fair share GPU-hours, in the time its fair share was defined. Every run is measured against the same tree, but the instants where L14 defines the shares depend on what each policy ran (its children's non-idle use), so the spans differ.")
}

// quotaStats returns r's figures of the quota node called name, or nil.
func quotaStats(r *sim.Result, name string) *sim.QuotaStats {
	for _, q := range r.Quotas {
		if q.Quota == name {
			return q
		}
	}
	return nil
}

// kind names idle and non-idle jobs.
func kind(idle bool) string {
	if idle {
		return "idle"
	}
	return "non-idle"
}

// whyWaited splits the waits by workspace, idle or not, and what bound
// traceText names the trace file a training read (issue 20): the file
// opened, and the one asked for when that was missing and the fallback
// was read.
func traceText(tr *sim.Training) string {
	if tr.TraceRead == "" {
		return "`" + tr.Trace + "`"
	}
	if tr.FallbackRead {
		return fmt.Sprintf("`%s` (the fallback: `%s` is missing)", tr.TraceRead, tr.Trace)
	}
	return "`" + tr.TraceRead + "`"
}

// them, and says for the quotas that bound non-idle jobs how full they
// were and who held them.
func whyWaited(d *doc, r *sim.Result) {
	d.h(2, "Why work waited")
	if len(r.WaitGroups) == 0 {
		d.p("No training job was submitted during the run.")
		return
	}
	infer := map[string]bool{}
	for _, in := range r.Scenario.Infer {
		infer[in.Namespace] = true
	}
	bound := map[string]*sim.BoundQuota{}
	for _, b := range r.BoundQuotas {
		bound[b.Quota] = b
	}
	t := d.table("workspace", "kind", "bound by", "jobs>", "started>", "still waiting>", "mean wait>", "waits, job-hours>")
	for _, g := range r.WaitGroups {
		t.row(g.Namespace, kind(g.Idle), g.Bound, fmt.Sprint(g.Jobs()), fmt.Sprint(g.Started), fmt.Sprint(g.Waiting), Dur(g.Mean()),
			fmt.Sprintf("%.0f", g.Seconds/3600))
	}
	d.p("Each training job submitted during the run is counted once, under what bound its wait longest: a quota node (DESIGN L3: the job's own quota, or an ancestor, counting non-idle use; the planner names it in each wait), "+
		"`%s` (idle jobs never preempt and wait for free GPUs), `%s` (entitled, but no node has room even with preemption), `%s` (a gang is admitted whole or not at all), "+
		"`%s` (admitted on GPUs whose victims are in their kill_timeout), `%s` or a static partition for the alternative policies; `%s` for jobs that started at once. "+
		"The groups of a workspace add up to its row in the table above; the last column is the waits in hours (not weighted by GPUs).",
		sim.BoundIdle, sim.BoundNoRoom, sim.BoundGang, sim.BoundVictims, sim.BoundCohort, sim.BoundNone)
	var lines []string
	for _, g := range r.WaitGroups {
		if g.Idle || g.Seconds == 0 {
			continue
		}
		line := fmt.Sprintf("non-idle jobs of %s waited %s on average (%d jobs, %d still waiting), bound by %s", g.Namespace, Dur(g.Mean()), g.Jobs(), g.Waiting, g.Bound)
		if b := bound[g.Bound]; b != nil {
			line += fmt.Sprintf(" at %.0f of %.0f non-idle GPUs (mean at its %d wait events)", b.MeanUsed(), b.MeanNominal(), b.Events)
			if h := holders(r, b, infer); h != "" {
				line += ", held by " + h
			}
		}
		lines = append(lines, line)
	}
	for _, g := range r.WaitGroups {
		if g.Idle && g.Seconds > 0 {
			lines = append(lines, fmt.Sprintf("idle jobs of %s waited %s on average (%d jobs, %d still waiting), bound by %s", g.Namespace, Dur(g.Mean()), g.Jobs(), g.Waiting, g.Bound))
		}
	}
	lines = append(lines, parentTook(r, infer)...)
	d.list(lines...)
}

// parentTook says, for each quota node with namespaces of its own (a
// parent's own workload: inference in Quota1) that bound the waits of its
// children's non-idle jobs (a WaitGroup bound by it), how many GPU-hours
// its own namespaces held while those jobs waited with the node full (its
// non-idle use plus their asks past its nominal), and when: from the
// samples, each counted until the next.
func parentTook(r *sim.Result, infer map[string]bool) []string {
	if r.Scenario == nil || r.Scenario.Quota == nil || len(r.Samples) < 2 {
		return nil
	}
	qi := map[string]int{}
	for i, q := range r.Quotas {
		qi[q.Quota] = i
	}
	nsi := map[string]int{}
	for i, n := range r.Namespaces {
		nsi[n] = i
	}
	zone := r.Scenario.Zone
	if zone == nil {
		zone = time.UTC
	}
	var out []string
	r.Scenario.Quota.Walk(func(n *quota.Node) {
		pi, ok := qi[n.Name]
		if !ok || len(n.Namespaces) == 0 || len(n.Children) == 0 {
			return
		}
		var children []string
		for _, ch := range n.Children {
			ch.Walk(func(c *quota.Node) { children = append(children, c.Namespaces...) })
		}
		var waited []string
		for _, g := range r.WaitGroups {
			if !g.Idle && g.Bound == n.Name && g.Seconds > 0 && slices.Contains(children, g.Namespace) && !slices.Contains(waited, g.Namespace) {
				waited = append(waited, g.Namespace)
			}
		}
		if len(waited) == 0 {
			return
		}
		var gpuSec float64
		var first, last time.Time
		for i := 0; i+1 < len(r.Samples); i++ {
			s := r.Samples[i]
			asks := 0
			for _, ns := range waited {
				if k, ok := nsi[ns]; ok && k < len(s.Waiting) && k < len(s.WaitingIdle) {
					asks += s.Waiting[k] - s.WaitingIdle[k]
				}
			}
			if asks <= 0 || pi >= len(s.NonIdle) || s.NonIdle[pi]+asks <= s.Nominal[pi] {
				continue
			}
			own := 0
			for _, ns := range n.Namespaces {
				if k, ok := nsi[ns]; ok && k < len(s.Active) {
					own += s.Active[k]
				}
			}
			if own == 0 {
				continue
			}
			next := r.Samples[i+1].T
			gpuSec += float64(own) * next.Sub(s.T).Seconds()
			if first.IsZero() {
				first = s.T
			}
			last = next
		}
		if gpuSec == 0 {
			return
		}
		var owners []string
		for _, ns := range n.Namespaces {
			if infer[ns] {
				ns += ", inference"
			}
			owners = append(owners, ns)
		}
		out = append(out, fmt.Sprintf("%s's own workload (%s) held %.0f GPU-hours of %s's GPUs while non-idle jobs of %s waited for them "+
			"(%s full: its non-idle use plus their asks past its nominal), between %s and %s",
			n.Name, strings.Join(owners, "; "), gpuSec/3600, n.Name, strings.Join(waited, ", "), n.Name,
			first.In(zone).Format("Mon 2006-01-02 15:04"), last.In(zone).Format("Mon 2006-01-02 15:04")))
	})
	return out
}

// holders says who held a bound quota's non-idle GPUs at its wait events,
// the largest share first.
func holders(r *sim.Result, b *sim.BoundQuota, infer map[string]bool) string {
	total := 0.0
	for _, h := range b.Holders {
		total += h
	}
	if total == 0 {
		return ""
	}
	idx := make([]int, len(b.Holders))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(x, y int) int {
		switch {
		case b.Holders[x] > b.Holders[y]:
			return -1
		case b.Holders[x] < b.Holders[y]:
			return 1
		}
		return 0
	})
	var parts []string
	for _, i := range idx {
		if b.Holders[i] == 0 {
			break
		}
		name := r.Namespaces[i]
		if infer[name] {
			name += " (inference)"
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%%", name, 100*b.Holders[i]/total))
	}
	return strings.Join(parts, ", ")
}

func preemptions(d *doc, r *sim.Result) {
	d.h(2, "Preemptions by rule")
	if len(r.Rules) == 0 {
		d.p("None.")
		return
	}
	t := d.table("rule", "meaning", "allocations stopped>", "of them borrowing (idle)>", "jobs>", "GPUs>", "work lost GPU-h>",
		"lost by borrowing (idle) victims>", "lost by victims inside their quota>")
	borrowing := 0.0
	for _, x := range r.Rules {
		t.row(x.Rule, ruleText[x.Rule], fmt.Sprint(x.Stops), fmt.Sprint(x.StopsBorrowing), fmt.Sprint(x.Units), fmt.Sprint(x.GPUs),
			fmt.Sprintf("%.1f", x.LostGPUh), fmt.Sprintf("%.1f", x.LostBorrowing), fmt.Sprintf("%.1f", x.LostGPUh-x.LostBorrowing))
		borrowing += x.LostBorrowing
	}
	d.p("Work lost to preemption: %.1f GPU-hours (the work since each victim's last checkpoint), %.1f of it by victims that were borrowing (idle jobs on GPUs lent to them, DESIGN L4) and %.1f by victims inside their quota.",
		r.LostGPUh, borrowing, r.LostGPUh-borrowing)
}

func scaleUps(d *doc, r *sim.Result) {
	d.h(2, "Inference scale-ups")
	if len(r.ScaleUps) == 0 {
		d.p("None.")
		return
	}
	t := d.table("due", "service", "replicas", "kind", "count set", "ready", "waited for GPUs>")
	for _, u := range r.ScaleUps {
		k := "demand"
		if u.Boundary {
			k = "schedule"
		}
		ready := u.Ready.Format("15:04:05")
		switch {
		case u.Open:
			ready = "not by the end"
		case u.Cancelled:
			ready += " (count lowered)"
		}
		t.row(u.Due.Format("Mon 15:04"), u.Service, fmt.Sprintf("%d -> %d", u.From, u.To), k, u.Raised.Format("15:04:05"), ready, Dur(u.Wait))
	}
	d.p("Longest wait at a scheduled scale-up: %s; mean over all scale-ups: %s.", Dur(r.MaxBoundaryWait()), Dur(r.MeanScaleUpWait()))
}

func moves(d *doc, r *sim.Result) {
	if len(r.Moves) == 0 {
		return
	}
	d.h(2, "Quota moves")
	var items []string
	for _, m := range r.Moves {
		var ch []string
		for _, c := range m.Changes {
			ch = append(ch, fmt.Sprintf("%s %d -> %d", c.Quota, c.From, c.To))
		}
		items = append(items, fmt.Sprintf("%s: `%s`: %s", m.At.Format("Mon 2006-01-02 15:04"), m.Name, strings.Join(ch, ", ")))
	}
	d.list(items...)
}

// calendar lists the scenario's bookings (DESIGN L10) and the whole jobs
// the core stopped or suspended by a timed rule (L10.end, L11.max_run,
// L11.settle), when there are any.
func calendar(d *doc, r *sim.Result) {
	if len(r.Scenario.Reservations) == 0 && len(r.JobStops) == 0 {
		return
	}
	d.h(2, "Bookings and timed stops")
	if len(r.Scenario.Reservations) > 0 {
		t := d.table("booking", "namespace", "quota", "GPUs", "shape", "from", "to")
		for _, b := range r.Scenario.Reservations {
			t.row(b.ID, b.Namespace, b.Quota, fmt.Sprint(b.GPUs), fmt.Sprintf("%d x %d", b.GPUs/max(1, b.AllocGPUs), b.AllocGPUs),
				b.Start.Format("Mon 2006-01-02 15:04"), b.End().In(b.Start.Location()).Format("Mon 2006-01-02 15:04"))
		}
	}
	var items []string
	for _, j := range r.JobStops {
		what := "stopped"
		if j.Suspended {
			what = "suspended and queued again"
		}
		items = append(items, fmt.Sprintf("%s: %s/%s %s (%s): %s", j.At.Format("Mon 15:04:05"), j.Namespace, j.Job, what, j.Rule, j.Reason))
	}
	d.list(items...)
}

// figures lists the charts (Markdown: links; HTML: inline) and the files.
func figures(d *doc, r *sim.Result, compared []*sim.Result, charts []ChartFile) {
	d.h(2, "Charts")
	if charts == nil {
		var err error
		if charts, err = chartNames(r, compared); err != nil {
			return
		}
	}
	for _, c := range charts {
		caption := fmt.Sprintf("%s, %s", Label(c.Run), c.Caption)
		d.figure(c.Name, caption, c.SVG)
	}
	d.h(2, "Files")
	d.list(fmt.Sprintf("`%s`: this report; `%s`: the same with the charts inline (opens from disk, no network)", ReportFile, HTMLFile),
		fmt.Sprintf("`%s`, `%s`, `%s`: the charts above; a compared run's are named after it (`occupancy-<policy>.svg`)", OccupancyFile, QueueFile, LossesFile),
		fmt.Sprintf("`%s`: every plan action (stop, admit, wait with the quota that binds it, expire) with its rule, and every lifecycle event of the modelled cluster, one JSON object a line", EventsFile),
		"See docs/simulator.md for how the scenario, the traces and the policies are modelled.")
}

// chartNames are the charts' names without drawing them (report.md).
func chartNames(main *sim.Result, compared []*sim.Result) ([]ChartFile, error) {
	var out []ChartFile
	runs := []*sim.Result{main}
	for _, r := range compared {
		if r != main {
			runs = append(runs, r)
		}
	}
	for i, r := range runs {
		label := ""
		if i > 0 {
			label = Label(r)
		}
		for _, k := range chartKinds {
			out = append(out, ChartFile{Name: chartFile(k.stem, label), Caption: k.caption, Run: r})
		}
	}
	return out, nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return -1
	}
	return a / b
}

// Summary writes the one-screen summary printed on stdout; of notes (the
// workload's), it repeats the warnings. The report's HTML path comes last.
func Summary(w io.Writer, r *sim.Result, compared []*sim.Result, notes []string, dir string) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	sc := r.Scenario
	p("gputide sim: %s, %s to %s (%s), %d GPUs, policy %s\n", sc.Name, r.Start.Format("Mon 2006-01-02 15:04"),
		r.End.Format("Mon 2006-01-02 15:04"), sc.Zone, r.Capacity, r.Policy)
	p("  %d events, %d plans in %s\n\n", r.Events, r.Plans, r.Wall.Round(time.Millisecond))
	p("  utilisation          %s (night, while idle training waits: %s)\n", pct(r.Utilisation()), pct(r.NightAllocation()))
	for _, q := range r.Quotas {
		p("  %-20s used %6s GPU-h, borrowed %5s, lendable %5s\n", q.Quota, gpuh(q.Used), gpuh(q.Borrowed), gpuh(q.Lendable))
	}
	stops := 0
	var rules []string
	for _, x := range r.Rules {
		if x.Rule == "autoscaler" {
			continue
		}
		stops += x.Stops
		rules = append(rules, fmt.Sprintf("%s %d", x.Rule, x.Stops))
	}
	byRule := ""
	if len(rules) > 0 {
		byRule = " (" + strings.Join(rules, ", ") + ")"
	}
	p("  preemptions          %d%s, work lost %.1f GPU-h\n", stops, byRule, r.LostGPUh)
	p("  inference scale-ups  %d, longest wait at a scheduled one %s\n", len(r.ScaleUps), Dur(r.MaxBoundaryWait()))
	sw, sn := r.StartedWait()
	p("  training wait        %s mean (all %d jobs, still waiting so far); %s mean (the %d started)\n", Dur(r.TrainingWait()), sn+r.Waiting(), Dur(sw), sn)
	if len(r.Conflicts) > 0 {
		p("  WARNING: %d plan actions could not be applied (see report.md)\n", len(r.Conflicts))
	}
	for _, n := range notes {
		if strings.Contains(n, "WARNING:") {
			p("  %s\n", n)
		}
	}
	if len(compared) > 1 {
		p("\n")
		CompareTable(w, compared)
	}
	if dir != "" {
		p("\n  report: %s\n", filepath.Join(dir, ReportFile))
		p("  report: %s\n", filepath.Join(dir, HTMLFile))
	}
}
