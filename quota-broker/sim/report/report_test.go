package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/sim"
)

func TestWrite(t *testing.T) {
	sc, err := sim.LoadReference()
	if err != nil {
		t.Fatal(err)
	}
	sc.Length = 12 * time.Hour
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	sh := sim.PolicyShares(sc, w)
	var rs []*sim.Result
	for _, p := range []sim.Policy{sim.NewStatic(sh), sim.NewKueue(sh), sim.Gputide{}} {
		r, err := sim.Run(sc, w, sim.Options{Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	dir := t.TempDir()
	if err := Write(dir, rs[2], rs, w.Notes); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# gputide simulation: reference", "## What ran", "| philly |", "## Utilisation", "## What each quota got",
		"| Quota1.1 | 48 |", "## Workspaces", "## Why work waited", "## Preemptions by rule", "| L5.1 |",
		"## Inference scale-ups", "| Mon 08:00 | workspace-a/chat/server | 1 -> 4 | schedule |",
		"## Policy comparison", "|  | static | kueue | gputide | best | why |", "- **static**: flat, hard quotas", "- **kueue**: a Kueue-like",
		"philly-sample.csv", "![static, GPUs in use over time", "(occupancy-static.svg)", "(queue-kueue.svg)", "(losses.svg)"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	// Every non-idle wait names what bound it.
	for _, line := range strings.Split(string(md), "\n") {
		if strings.HasPrefix(line, "- non-idle jobs of ") && !strings.Contains(line, ", bound by ") {
			t.Errorf("report.md: %q names no binding", line)
		}
	}
	for _, name := range []string{OccupancyFile, "occupancy-static.svg", "occupancy-kueue.svg", QueueFile, "queue-static.svg", LossesFile, "losses-kueue.svg"} {
		svg, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		f := checkSVG(t, name, svg)
		if !strings.HasPrefix(name, "occupancy") {
			continue
		}
		// The main chart and one panel per child quota.
		if f.panels != 3 {
			t.Errorf("%s: %d panels, want the stack and 2 quota panels", name, f.panels)
		}
		for _, want := range []string{"workspace-a (Quota1)", "workspace-b (Quota1.1)", "workspace-c (Quota1.2)", "stopping",
			"Quota1.1 (workspace-b):", "Quota1.2 (workspace-c):", "in quota"} {
			if !f.texts[want] {
				t.Errorf("%s: no text %q", name, want)
			}
		}
		limit := "nominal"
		if name != OccupancyFile {
			limit = map[string]string{"occupancy-static.svg": "hard limit (static partition)", "occupancy-kueue.svg": "Kueue nominal quota"}[name]
		}
		if !f.texts[limit] {
			t.Errorf("%s: no limit %q in the legend", name, limit)
		}
	}
	// gputide lends Quota1.2's GPUs to workspace-b: its borrowed band.
	svg, err := os.ReadFile(filepath.Join(dir, OccupancyFile))
	if err != nil {
		t.Fatal(err)
	}
	if f := checkSVG(t, OccupancyFile, svg); !f.texts["workspace-b borrowed"] || !f.texts["borrowed"] || !f.texts["capacity = Quota1 nominal"] {
		t.Errorf("%s: no borrowed band in the legend", OccupancyFile)
	}
	checkHTML(t, dir, 9, strings.Count(string(md), "\n|---"))
	// One seed, the same bytes: a second run draws the same charts and page.
	again, err := sim.Run(sc, w, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d1, d2 := t.TempDir(), t.TempDir()
	if err := Write(d1, rs[2], nil, w.Notes); err != nil {
		t.Fatal(err)
	}
	if err := Write(d2, again, nil, w.Notes); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{OccupancyFile, QueueFile, LossesFile, HTMLFile} {
		a, _ := os.ReadFile(filepath.Join(d1, name))
		b, _ := os.ReadFile(filepath.Join(d2, name))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs of one seed (%d and %d bytes)", name, len(a), len(b))
		}
	}
	// The same folder again without -compare: the compared charts go.
	if err := Write(dir, rs[2], nil, w.Notes); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"occupancy-static.svg", "occupancy-kueue.svg", "queue-kueue.svg", "losses-static.svg"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s left from the -compare run", name)
		}
	}
	if md, _ := os.ReadFile(filepath.Join(dir, ReportFile)); strings.Contains(string(md), "occupancy-static.svg") {
		t.Errorf("report.md lists occupancy-static.svg without -compare")
	}
	if _, err := os.Stat(filepath.Join(dir, OccupancyFile)); err != nil {
		t.Error(err)
	}
	var b strings.Builder
	Summary(&b, rs[2], rs, w.Notes, dir)
	if !strings.HasSuffix(b.String(), filepath.Join(dir, HTMLFile)+"\n") {
		t.Errorf("summary does not end with the HTML report's path:\n%s", b.String())
	}
	if lines := strings.Count(b.String(), "\n"); lines > 26 {
		t.Errorf("summary is %d lines, want one screen:\n%s", lines, b.String())
	}
}

func TestDur(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", 45 * time.Second: "45s", 754 * time.Second: "12m34s",
		3*time.Hour + 5*time.Minute: "3h05m", 52 * time.Hour: "2d04h"} {
		if got := Dur(d); got != want {
			t.Errorf("Dur(%s) = %q, want %q", d, got, want)
		}
	}
}

// A run of a few minutes draws: samples at its start and end, and time
// ticks at whole minutes; a chart that cannot be drawn leaves no file.
func TestShortRun(t *testing.T) {
	sc, err := sim.LoadReference()
	if err != nil {
		t.Fatal(err)
	}
	sc.Length = 14*time.Minute + 24*time.Second // -days 0.01
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	r, err := sim.Run(sc, w, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.Samples); n != 16 || !r.Samples[0].T.Equal(r.Start) || !r.Samples[n-1].T.Equal(r.End) {
		t.Fatalf("%d samples from %v to %v, want 16 from %v to %v", n, r.Samples[0].T, r.Samples[n-1].T, r.Start, r.End)
	}
	dir := t.TempDir()
	if err := Write(dir, r, nil, nil); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, OccupancyFile))
	if err != nil {
		t.Fatal(err)
	}
	f := checkSVG(t, OccupancyFile, svg)
	for _, want := range []string{"Mon 7 Dec", "00:02", "00:14"} {
		if !f.texts[want] {
			t.Errorf("no time tick %q", want)
		}
	}
	// Shorter than a minute step: the ends.
	got := timeTicks(r.Start, r.Start.Add(40*time.Second), r.Start.Location(), 12)
	if len(got) != 2 || got[0].label != "Mon 00:00:00" || got[1].label != "Mon 00:00:40" {
		t.Errorf("ticks over 40s: %+v, want the two ends", got)
	}
	r.Samples = r.Samples[:1]
	dir = t.TempDir()
	if err := Write(dir, r, nil, nil); err == nil || !strings.Contains(err.Error(), "too few samples") {
		t.Errorf("one sample: error %v, want too few samples", err)
	}
	if _, err := os.Stat(filepath.Join(dir, OccupancyFile)); err == nil {
		t.Errorf("a failed chart left %s", OccupancyFile)
	}
}

// handMade is a small run of 4 hours with a quota move at 2 hours: Q.1
// 6 -> 8, Q.2 10 -> 8.
func handMade() *sim.Result {
	zone := time.UTC
	start := time.Date(2026, 12, 8, 10, 0, 0, 0, zone)
	tree := &quota.Node{Name: "Q", GPUs: quota.Plain(16), Namespaces: []string{"a"}, Children: []*quota.Node{
		{Name: "Q.1", GPUs: quota.Plain(6), Namespaces: []string{"b"}},
		{Name: "Q.2", GPUs: quota.Plain(10), Namespaces: []string{"c"}},
	}}
	h := 3600.0
	r := &sim.Result{Policy: "gputide", Scenario: &sim.Scenario{Name: "t", Zone: zone, Quota: tree},
		Start: start, End: start.Add(4 * time.Hour), Capacity: 16, Namespaces: []string{"a", "b", "c"},
		WS: []*sim.WSStats{{Namespace: "a", Quota: "Q"},
			{Namespace: "b", Quota: "Q.1", Jobs: 4, Waits: []float64{0, 600, 1200}, Censored: []float64{9000}, Unstarted: 1},
			{Namespace: "c", Quota: "Q.2"}},
		Quotas: []*sim.QuotaStats{{Quota: "Q", Nominal: 16, NominalTime: 64 * h, Used: 60 * h},
			{Quota: "Q.1", Nominal: 6, NominalTime: 28 * h, Used: 21 * h},
			{Quota: "Q.2", Nominal: 10, NominalTime: 36 * h, Used: 27 * h}},
		Moves: []sim.MoveRecord{{Name: "move", At: start.Add(2 * time.Hour),
			Changes: []sim.QuotaChange{{Quota: "Q.1", From: 6, To: 8}, {Quota: "Q.2", From: 10, To: 8}}}}}
	for i := 0; i <= 8; i++ {
		s := sim.Sample{T: start.Add(time.Duration(i) * 30 * time.Minute),
			Active: []int{2, 9, 4}, Borrowed: []int{0, 3, 0}, Nominal: []int{16, 6, 10}, NonIdle: []int{15, 6, 4}, Used: []int{15, 9, 4}}
		if i >= 4 {
			s.Nominal = []int{16, 8, 8}
		}
		r.Samples = append(r.Samples, s)
	}
	return r
}

// The Quotas table's of nominal is over the nominal over time; a quota
// move shows what it changed.
func TestMarkdownQuotas(t *testing.T) {
	var b strings.Builder
	Markdown(&b, handMade(), nil, nil)
	md := b.String()
	for _, want := range []string{
		"| quota | nominal | nominal GPU-h (over time) | used GPU-h | of nominal GPU-h |",
		"| Q.1 | 6 -> 8 | 28 | 21 | 75.0% |",
		"| Q.2 | 10 -> 8 | 36 | 27 | 75.0% |",
		"*of nominal*, used over it",
		"## Quota moves\n\n- Tue 2026-12-08 12:00: `move`: Q.1 6 -> 8, Q.2 10 -> 8\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
}

// The wait columns say what they count, and the means reconcile: b's jobs
// waited 0, 10m and 20m, and one still waits at 2h30m.
func TestMarkdownWaits(t *testing.T) {
	r := handMade()
	var b strings.Builder
	Markdown(&b, r, nil, nil)
	md := b.String()
	for _, want := range []string{
		"| mean wait (started) | p50 (started) | p90 (started) | max (started) | mean wait (all, still waiting so far) |",
		"| b | Q.1 | 0 | 0 | 4 | 3 | 1 | 10m00s | 10m00s | 10m00s | 20m00s | 45m00s | 0 |",
		"Over all workspaces: 45m00s mean over all 4 jobs, 10m00s mean over the 3 that started.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	b.Reset()
	Summary(&b, r, nil, nil, "")
	if want := "training wait        45m00s mean (all 4 jobs, still waiting so far); 10m00s mean (the 3 started)"; !strings.Contains(b.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, b.String())
	}
}

// The summary repeats the workload's warnings, and only them.
func TestSummaryWarnings(t *testing.T) {
	warn := `training "philly": WARNING: the trace ends at 2017-10-31 00:00:00 (simulated 2026-12-15T00:00:00-08:00), before the end of the run (2026-12-19T00:00:00-08:00): no training arrives in the last 96h0m0s`
	var b strings.Builder
	Summary(&b, handMade(), nil, []string{"training \"philly\": t.csv: 10 rows", warn}, "")
	if !strings.Contains(b.String(), "\n  "+warn+"\n") || strings.Contains(b.String(), "10 rows") {
		t.Errorf("summary:\n%s\nwant the warning alone", b.String())
	}
}

// A run without preemptions says 0, with no empty list of rules (the
// summary said "preemptions 0 ()").
func TestSummaryNoPreemptions(t *testing.T) {
	r := handMade()
	r.Rules = nil
	r.LostGPUh = 0
	var b strings.Builder
	Summary(&b, r, nil, nil, "")
	if want := "  preemptions          0, work lost 0.0 GPU-h\n"; !strings.Contains(b.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, b.String())
	}
}

// checkHTML parses report.html as a browser would and checks that it holds
// every chart inline and every table of report.md, and loads nothing.
func checkHTML(t *testing.T, dir string, charts, tables int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", HTMLFile, err)
	}
	count := map[string]int{}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			count[n.Data]++
			for _, a := range n.Attr {
				if a.Key == "src" || a.Key == "href" || strings.HasPrefix(a.Key, "on") {
					t.Errorf("%s: <%s %s=%q> loads or runs something", HTMLFile, n.Data, a.Key, a.Val)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if count["svg"] != charts || count["figure"] != charts || count["table"] != tables || count["script"] != 0 || count["link"] != 0 {
		t.Errorf("%s: %d svg, %d figure, %d table, %d script, %d link elements; want %d charts, %d tables, no script or link",
			HTMLFile, count["svg"], count["figure"], count["table"], count["script"], count["link"], charts, tables)
	}
	if bytes.Contains(b, []byte("http://")) && bytes.Count(b, []byte("http://")) != bytes.Count(b, []byte(`xmlns="http://www.w3.org/2000/svg"`)) {
		t.Errorf("%s: refers to a network address", HTMLFile)
	}
}

// Every rule that can stop an allocation has a line in the preemptions
// table's "meaning" column (L5.prewarm once showed an empty cell).
func TestRuleTextCoversStopRules(t *testing.T) {
	for _, r := range []plan.Rule{plan.RuleIdleDebt, plan.RuleChild, plan.RulePriority, plan.RulePrewarm,
		plan.RuleDrain, plan.RuleStart, plan.RuleEnd, plan.RuleFlexMaxRun, plan.RuleFlexSettle} {
		if ruleText[string(r)] == "" {
			t.Errorf("rule %s has no meaning in the preemptions table", r)
		}
	}
	if ruleText["kueue:reclaim"] == "" {
		t.Error("rule kueue:reclaim has no meaning in the preemptions table")
	}
}

// Against a what-if run of the same policy, the comparison's why names the
// tree, not the policy's mechanism (which both columns share).
func TestComparisonWhyTreePeer(t *testing.T) {
	base, whatif := handMade(), handMade()
	whatif.Label, whatif.LabelText = "whatif", "gputide with another tree"
	base.Total.Running = 40 * 3600
	whatif.Total.Running = 30 * 3600
	var d doc
	Comparison(&d, []*sim.Result{base, whatif})
	var b strings.Builder
	d.markdown(&b)
	want := "| utilisation (GPU time on running allocations) | 62.5% | 46.9% | gputide | its quota tree |"
	if !strings.Contains(b.String(), want) {
		t.Errorf("comparison lacks\n%s\n got:\n%s", want, b.String())
	}
	// With the peers too, the policy's mechanism and the tree are both named.
	static := handMade()
	static.Policy = "static"
	static.Total.Running = 20 * 3600
	d = doc{}
	Comparison(&d, []*sim.Result{static, base, whatif})
	b.Reset()
	d.markdown(&b)
	want = "| gputide | idle jobs run on any GPU a quota leaves unused, at once, and only idle work is stopped to give it back; over whatif: its quota tree |"
	if !strings.Contains(b.String(), want) {
		t.Errorf("comparison lacks\n%s\n got:\n%s", want, b.String())
	}
}

// TestParentWorkloadTook (issue 20 item 5): when a child's non-idle jobs
// waited bound by their parent and the parent was full, "why work waited"
// says the parent's own workload held its GPUs, with the GPU-hours: a's 2
// GPUs over the 4 half-hour samples in which b asked for 4 more past Q's
// 16 (15 non-idle) are 4 GPU-hours.
func TestParentWorkloadTook(t *testing.T) {
	r := handMade()
	r.Scenario.Infer = []*sim.Inference{{Name: "chat", Namespace: "a"}}
	r.WaitGroups = []*sim.WaitGroup{{Namespace: "b", Bound: "Q", Started: 3, Waiting: 1, Seconds: 3 * 3600}}
	for i := range r.Samples {
		r.Samples[i].Waiting, r.Samples[i].WaitingIdle = []int{0, 0, 0}, []int{0, 0, 0}
		if i >= 2 && i <= 5 {
			r.Samples[i].Waiting = []int{0, 4, 0}
		}
	}
	var b strings.Builder
	Markdown(&b, r, nil, nil)
	want := "- Q's own workload (a, inference) held 4 GPU-hours of Q's GPUs while non-idle jobs of b waited for them " +
		"(Q full: its non-idle use plus their asks past its nominal), between Tue 2026-12-08 11:00 and Tue 2026-12-08 13:00"
	if md := b.String(); !strings.Contains(md, want) {
		t.Errorf("report.md lacks %q:\n%s", want, md)
	}
	// A child bound by its own quota, not the parent's: no such line.
	r.WaitGroups[0].Bound = "Q.1"
	b.Reset()
	Markdown(&b, r, nil, nil)
	if strings.Contains(b.String(), "own workload") {
		t.Errorf("a wait bound by Q.1 is told as the parent's doing:\n%s", b.String())
	}
}

// TestTraceFileRead (issue 20): the report names the trace file read, and
// says when that was the fallback.
func TestTraceFileRead(t *testing.T) {
	for _, c := range []struct {
		tr   sim.Training
		want string
	}{
		{sim.Training{Trace: "philly.csv"}, "`philly.csv`"},
		{sim.Training{Trace: "philly.csv", TraceRead: "/data/philly.csv"}, "`/data/philly.csv`"},
		{sim.Training{Trace: "philly.csv", Fallback: "sample.csv", TraceRead: "/s/sample.csv", FallbackRead: true}, "`/s/sample.csv` (the fallback: `philly.csv` is missing)"},
		// The trace found, named by its path from the working folder, which
		// is not the scenario's text (examples/mixed: ../../../shared/... read
		// as ../shared/...): no fallback was read.
		{sim.Training{Trace: "../../../shared/traces/philly/philly.csv", Fallback: "../traces-sample/philly-sample.csv", TraceRead: "../shared/traces/philly/philly.csv"}, "`../shared/traces/philly/philly.csv`"},
	} {
		if got := traceText(&c.tr); got != c.want {
			t.Errorf("traceText(%+v) = %q, want %q", c.tr, got, c.want)
		}
	}
}

// A tree with flavors gets a Flavors table (DESIGN L13): over the 4-hour
// run, h100's 8 GPUs held 16 GPU-h (50%), two jobs waited 30m in all
// (mean 15m); report.html has the same table; a tree without flavors gets
// none.
func TestMarkdownFlavors(t *testing.T) {
	r := handMade()
	var b strings.Builder
	Markdown(&b, r, nil, nil)
	if strings.Contains(b.String(), "## Flavors") {
		t.Errorf("report.md of a tree without flavors has a Flavors section:\n%s", b.String())
	}
	r.Flavors = []*sim.FlavorStats{
		{Flavor: "h100", GPUs: 8, Used: 16 * 3600, Started: 2, Wait: 1800, Stops: 3, LostGPUh: 1.5},
		{Flavor: "a100-1g", GPUs: 0},
	}
	b.Reset()
	Markdown(&b, r, nil, nil)
	md := b.String()
	for _, want := range []string{
		"## Flavors",
		"| flavor | GPUs | held GPU-h | occupancy | jobs started | mean wait | preemptions | work lost GPU-h |",
		"| h100 | 8 | 16 | 50.0% | 2 | 15m00s | 3 | 1.5 |",
		"| a100-1g | 0 | 0 | 0.0% | 0 | 0s | 0 | 0.0 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	var h strings.Builder
	HTML(&h, r, nil, nil, nil)
	for _, want := range []string{">Flavors<", ">h100<", ">a100-1g<", ">15m00s<"} {
		if !strings.Contains(h.String(), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}
