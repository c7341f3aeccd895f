// Package report writes what a simulation measured: report.md, the
// occupancy chart (occupancy.svg) and the one-screen summary.
package report

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/sim"
)

// Files are the names of what Write puts in the output folder.
const (
	ReportFile    = "report.md"
	OccupancyFile = "occupancy.svg"
	EventsFile    = "events.jsonl"
)

// CompareFiles are the charts of the compared policies (-compare), named
// occupancy-<policy>.svg. Write removes those a run without them leaves
// from an earlier run in the same folder.
var CompareFiles = []string{compareFile("static"), compareFile("kueue")}

func compareFile(policy string) string { return "occupancy-" + policy + ".svg" }

// Write writes report.md and occupancy.svg for main into dir, and, for each
// compared run, occupancy-<policy>.svg; it removes the CompareFiles it did
// not write (left by an earlier run). notes are the workload's notes.
func Write(dir string, main *sim.Result, compared []*sim.Result, notes []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	Markdown(&b, main, compared, notes)
	if err := os.WriteFile(filepath.Join(dir, ReportFile), []byte(b.String()), 0o644); err != nil {
		return err
	}
	write := func(name string, r *sim.Result) error {
		// Draw into memory first, so that a failure leaves no partial file.
		var svg bytes.Buffer
		if err := Occupancy(&svg, r); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return os.WriteFile(filepath.Join(dir, name), svg.Bytes(), 0o644)
	}
	if err := write(OccupancyFile, main); err != nil {
		return err
	}
	written := map[string]bool{}
	for _, r := range compared {
		if r != main {
			if err := write(compareFile(r.Policy), r); err != nil {
				return err
			}
			written[compareFile(r.Policy)] = true
		}
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

var ruleText = map[string]string{
	"L5.1":          "idle allocation, or debt past its grace",
	"L5.2":          "child-level preemption (a parent's job takes its children's GPUs)",
	"L5.3":          "priority preemption within a quota",
	"L11":           "flex request stopped",
	"autoscaler":    "scale-down by the autoscaler (not a preemption)",
	"kueue:reclaim": "Kueue-like reclaim from a borrowing queue",
}

// Markdown writes report.md.
func Markdown(w io.Writer, r *sim.Result, compared []*sim.Result, notes []string) {
	sc := r.Scenario
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	span := r.End.Sub(r.Start)
	capGPUh := float64(r.Capacity) * span.Seconds()
	p("# gputide simulation: %s\n\n", sc.Name)
	p("- Scenario: `%s`; policy **%s**; seed %d\n", sc.File, r.Policy, sc.Seed)
	p("- Simulated: %s to %s (%s, %s)\n", r.Start.Format("Mon 2006-01-02 15:04"), r.End.Format("Mon 2006-01-02 15:04"), Dur(span), sc.Zone)
	p("- Cluster: %d GPUs", r.Capacity)
	for _, g := range sc.Nodes {
		p("; %d nodes x %d %s (%s, pool %s)", g.Count, g.GPUs, g.Model, g.Datacenter, g.NodePool)
	}
	p("\n- Broker: plans on every arrival and finish and at least every %s (an unchanged state is not planned again); kill_timeout %s; pre-warm %v\n",
		sc.Broker.Interval, sc.Broker.KillTimeout, sc.Broker.Prewarm)
	p("- Run: %d simulated events, %d plans, %s of real time (%.0f events/s)\n\n", r.Events, r.Plans, r.Wall.Round(time.Millisecond),
		float64(r.Events)/max(r.Wall.Seconds(), 1e-9))
	if len(notes) > 0 {
		p("## Inputs\n\n")
		for _, n := range notes {
			p("- %s\n", n)
		}
		p("\n")
	}
	if len(r.Conflicts) > 0 {
		p("## Plan actions that could not be applied (%d)\n\n", len(r.Conflicts))
		for _, c := range r.Conflicts[:min(len(r.Conflicts), 20)] {
			p("- %s\n", c)
		}
		p("\n")
	}

	p("## Utilisation\n\n")
	p("| | GPU-hours | share of capacity |\n|---|---:|---:|\n")
	row := func(name string, sec float64) { p("| %s | %s | %s |\n", name, gpuh(sec), pct(sec/capGPUh)) }
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
	p("\nAt night (outside every inference window) the cluster was %s allocated; while idle training waited for at least as many GPUs as were free (%s of the night), %s.\n\n",
		pct(ratio(r.NightAlloc, float64(r.Capacity)*r.Night)), Dur(secs(r.NightDemand)), pct(r.NightAllocation()))

	p("## Quotas (subtree figures, DESIGN L4)\n\n")
	p("| quota | nominal | nominal GPU-h (over time) | used GPU-h | of nominal GPU-h | non-idle GPU-h | borrowed GPU-h | lendable (unused nominal) GPU-h | debt GPU-h |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, q := range r.Quotas {
		nominal := fmt.Sprint(q.Nominal)
		if len(r.Moves) > 0 && len(r.Samples) > 0 {
			last := r.Samples[len(r.Samples)-1]
			for qi, x := range r.Quotas {
				if x == q && last.Nominal[qi] != q.Nominal {
					nominal = fmt.Sprintf("%d -> %d", q.Nominal, last.Nominal[qi])
				}
			}
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", q.Quota, nominal, gpuh(q.NominalTime), gpuh(q.Used), pct(q.OfNominal()),
			gpuh(q.NonIdle), gpuh(q.Borrowed), gpuh(q.Lendable), gpuh(q.Debt))
	}
	p("\n*Nominal GPU-h* is the nominal over time (a quota move counts from when it happens); *of nominal*, used over it; borrowed and lendable are measured against the same nominal over time.\n")
	p("\n## Workspaces\n\n")
	p("| workspace | quota | GPU-h | of which idle jobs | training jobs submitted | started | still waiting | mean wait (started) | p50 (started) | p90 (started) | max (started) | mean wait (all, still waiting so far) | allocations preempted |\n")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, ws := range r.WS {
		p("| %s | %s | %s | %s | %d | %d | %d | %s | %s | %s | %s | %s | %d |\n", ws.Namespace, ws.Quota, gpuh(ws.Usage.Owned()), gpuh(ws.Usage.Idle),
			ws.Jobs, len(ws.Waits), ws.Unstarted, Dur(secs(mean(ws.Waits))), Dur(secs(quantile(ws.Waits, .5))), Dur(secs(quantile(ws.Waits, .9))),
			Dur(secs(quantile(ws.Waits, 1))), Dur(ws.AllWait()), ws.Preempted)
	}
	sw, sn := r.StartedWait()
	p("\nWaits are from submission to first start, for the training jobs submitted during the run. The *(started)* columns count only the jobs that started; "+
		"*(all)* counts every job, one that never started with its wait so far (to the end of the run, or to its expiry). "+
		"Over all workspaces: %s mean over all %d jobs, %s mean over the %d that started.\n\n",
		Dur(r.TrainingWait()), sn+r.Waiting(), Dur(sw), sn)

	p("## Preemptions by rule\n\n")
	if len(r.Rules) == 0 {
		p("None.\n\n")
	} else {
		p("| rule | meaning | allocations stopped | jobs | GPUs | work lost GPU-h |\n|---|---|---:|---:|---:|---:|\n")
		for _, x := range r.Rules {
			p("| %s | %s | %d | %d | %d | %.1f |\n", x.Rule, ruleText[x.Rule], x.Stops, x.Units, x.GPUs, x.LostGPUh)
		}
		p("\nWork lost to preemption: %.1f GPU-hours (the work since each victim's last checkpoint).\n\n", r.LostGPUh)
	}

	p("## Inference scale-ups\n\n")
	if len(r.ScaleUps) == 0 {
		p("None.\n\n")
	} else {
		p("| due | service | replicas | kind | count set | ready | waited for GPUs |\n|---|---|---|---|---|---|---:|\n")
		for _, u := range r.ScaleUps {
			kind := "demand"
			if u.Boundary {
				kind = "schedule"
			}
			ready := u.Ready.Format("15:04:05")
			switch {
			case u.Open:
				ready = "not by the end"
			case u.Cancelled:
				ready += " (count lowered)"
			}
			p("| %s | %s | %d -> %d | %s | %s | %s | %s |\n", u.Due.Format("Mon 15:04"), u.Service, u.From, u.To, kind,
				u.Raised.Format("15:04:05"), ready, Dur(u.Wait))
		}
		p("\nLongest wait at a scheduled scale-up: %s; mean over all scale-ups: %s.\n\n", Dur(r.MaxBoundaryWait()), Dur(r.MeanScaleUpWait()))
	}
	if len(r.Moves) > 0 {
		p("## Quota moves\n\n")
		for _, m := range r.Moves {
			var ch []string
			for _, c := range m.Changes {
				ch = append(ch, fmt.Sprintf("%s %d -> %d", c.Quota, c.From, c.To))
			}
			p("- %s: `%s`: %s\n", m.At.Format("Mon 2006-01-02 15:04"), m.Name, strings.Join(ch, ", "))
		}
		p("\n")
	}
	if len(compared) > 1 {
		p("## Policy comparison\n\n")
		Compare(w, compared)
		p("\n")
	}
	p("## Files\n\n- `%s`: GPUs in use over time, stacked by workspace (lighter bands are borrowed GPUs, grey the GPUs of stopping allocations, dotted lines the quota moves); below it, a panel per child quota: its use (in quota; borrowed, lighter) against its nominal, a dashed step line.\n", OccupancyFile)
	for _, c := range compared {
		if c != r {
			p("- `%s`: the same chart for the %s policy's run (-compare), against the tree's nominals.\n", compareFile(c.Policy), c.Policy)
		}
	}
	p("- `%s`: every plan action (stop, admit, wait, expire) with its rule, and every lifecycle event of the modelled cluster, one JSON object a line.\n", EventsFile)
	p("- See docs/simulator.md for how the scenario, the traces and the policies are modelled.\n")
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return -1
	}
	return a / b
}

// Compare writes the side-by-side table of the policies.
func Compare(w io.Writer, rs []*sim.Result) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("| |")
	for _, r := range rs {
		p(" %s |", r.Policy)
	}
	p("\n|---|")
	for range rs {
		p("---:|")
	}
	p("\n")
	line := func(name string, f func(r *sim.Result) string) {
		p("| %s |", name)
		for _, r := range rs {
			p(" %s |", f(r))
		}
		p("\n")
	}
	line("utilisation (GPU time on running allocations)", func(r *sim.Result) string { return pct(r.Utilisation()) })
	line("night allocation while idle training waits", func(r *sim.Result) string { return pct(r.NightAllocation()) })
	line("inference wait at scheduled scale-ups (longest)", func(r *sim.Result) string { return Dur(r.MaxBoundaryWait()) })
	line("inference wait, all scale-ups (mean)", func(r *sim.Result) string { return Dur(r.MeanScaleUpWait()) })
	line("training queue wait (mean, all: still waiting so far)", func(r *sim.Result) string { return Dur(r.TrainingWait()) })
	line("training queue wait (mean, started)", func(r *sim.Result) string { w, _ := r.StartedWait(); return Dur(w) })
	line("work lost to preemption (GPU-h)", func(r *sim.Result) string { return fmt.Sprintf("%.1f", r.LostGPUh) })
	line("allocations preempted", func(r *sim.Result) string {
		n := 0
		for _, x := range r.Rules {
			if x.Rule != "autoscaler" {
				n += x.Stops
			}
		}
		return fmt.Sprint(n)
	})
}

// Summary writes the one-screen summary printed on stdout; of notes (the
// workload's), it repeats the warnings.
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
	p("  preemptions          %d (%s), work lost %.1f GPU-h\n", stops, strings.Join(rules, ", "), r.LostGPUh)
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
		Compare(w, compared)
	}
	if dir != "" {
		p("\n  report: %s\n", filepath.Join(dir, ReportFile))
	}
}
