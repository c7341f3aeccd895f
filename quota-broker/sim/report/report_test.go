package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	chart "github.com/wcharczuk/go-chart/v2"

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
	for _, want := range []string{"# gputide simulation: reference", "## Utilisation", "## Quotas", "| Quota1.1 | 48 |",
		"## Workspaces", "## Preemptions by rule", "| L5.1 |", "## Inference scale-ups", "| Mon 08:00 | workspace-a/chat/server | 1 -> 4 | schedule |",
		"## Policy comparison", "| | static | kueue | gputide |", "philly-sample.csv",
		"- `occupancy-static.svg`: the same chart for the static policy's run (-compare)",
		"- `occupancy-kueue.svg`: the same chart for the kueue policy's run (-compare)"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, name := range []string{OccupancyFile, "occupancy-static.svg", "occupancy-kueue.svg"} {
		svg, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		f := checkSVG(t, name, svg)
		if f.paths < 20 {
			t.Errorf("%s: %d paths, want a chart", name, f.paths)
		}
		// The main chart and one panel per child quota.
		if len(f.tiles) != 3 {
			t.Errorf("%s: %d charts, want the stack and 2 quota panels", name, len(f.tiles))
		}
		for _, want := range []string{"GPUs in use (bands bottom up):", "workspace-a (Quota1)", "workspace-b (Quota1.1)",
			"workspace-c (Quota1.2)", "stopping", "capacity = Quota1 nominal",
			"Quota1.1 (workspace-b):", "Quota1.2 (workspace-c):", "in quota", "nominal"} {
			if !f.texts[want] {
				t.Errorf("%s: no text %q", name, want)
			}
		}
		// A dashed nominal line in each panel (and its legend key).
		if n := strings.Count(string(svg), `stroke-dasharray="7.0, 4.0"`); n != 4 {
			t.Errorf("%s: %d dashed nominal paths, want 2 lines and 2 keys", name, n)
		}
		if f.texts["0.00"] {
			t.Errorf("%s: stray 0.00 label", name)
		}
	}
	// gputide lends Quota1.2's GPUs to workspace-b: its borrowed band.
	svg, err := os.ReadFile(filepath.Join(dir, OccupancyFile))
	if err != nil {
		t.Fatal(err)
	}
	if f := checkSVG(t, OccupancyFile, svg); !f.texts["workspace-b borrowed"] || !f.texts["borrowed"] {
		t.Errorf("%s: no borrowed band in the legend", OccupancyFile)
	}
	// The same folder again without -compare: the compared charts go.
	if err := Write(dir, rs[2], nil, w.Notes); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"occupancy-static.svg", "occupancy-kueue.svg"} {
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
	if lines := strings.Count(b.String(), "\n"); lines > 24 {
		t.Errorf("summary is %d lines, want one screen:\n%s", lines, b.String())
	}
}

// figure is what checkSVG read from an occupancy figure.
type figure struct {
	tiles []string        // the nested charts' viewBoxes
	texts map[string]bool // every text drawn
	paths int
}

// checkSVG parses an occupancy figure and checks that every text lies
// inside the chart that draws it.
func checkSVG(t *testing.T, name string, svg []byte) figure {
	t.Helper()
	f := figure{texts: map[string]bool{}}
	d := xml.NewDecoder(bytes.NewReader(svg))
	var w, h []float64 // sizes of the open <svg> elements
	var x, y float64
	inText := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range tok.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch tok.Name.Local {
			case "svg":
				vb := strings.Fields(attr["viewBox"])
				if len(vb) != 4 {
					t.Fatalf("%s: svg without a viewBox: %v", name, tok.Attr)
				}
				vw, _ := strconv.ParseFloat(vb[2], 64)
				vh, _ := strconv.ParseFloat(vb[3], 64)
				w, h = append(w, vw), append(h, vh)
				if len(w) > 1 {
					f.tiles = append(f.tiles, attr["viewBox"])
				}
			case "path":
				f.paths++
			case "text":
				inText = true
				x, _ = strconv.ParseFloat(attr["x"], 64)
				y, _ = strconv.ParseFloat(attr["y"], 64)
			}
		case xml.CharData:
			if inText {
				s := string(tok)
				f.texts[s] = true
				if n := len(w) - 1; n < 0 || x < 0 || y < 0 || x > w[n] || y > h[n] {
					t.Errorf("%s: text %q at %g,%g is outside its chart", name, s, x, y)
				}
			}
		case xml.EndElement:
			inText = false
			if tok.Name.Local == "svg" {
				w, h = w[:len(w)-1], h[:len(h)-1]
			}
		}
	}
	return f
}

// TestPanels checks what the charts plot on a small hand-made run with a
// quota move: each quota's use against its own nominal, stepping at the move.
func TestPanels(t *testing.T) {
	zone := time.UTC
	start := time.Date(2026, 12, 8, 10, 0, 0, 0, zone)
	tree := &quota.Node{Name: "Q", GPUs: 16, Namespaces: []string{"a"}, Children: []*quota.Node{
		{Name: "Q.1", GPUs: 6, Namespaces: []string{"b"}},
		{Name: "Q.2", GPUs: 10, Namespaces: []string{"c"}},
	}}
	r := &sim.Result{Policy: "gputide", Scenario: &sim.Scenario{Name: "t", Zone: zone, Quota: tree},
		Start: start, End: start.Add(4 * time.Hour), Capacity: 16, Namespaces: []string{"a", "b", "c"},
		WS:     []*sim.WSStats{{Namespace: "a", Quota: "Q"}, {Namespace: "b", Quota: "Q.1"}, {Namespace: "c", Quota: "Q.2"}},
		Quotas: []*sim.QuotaStats{{Quota: "Q", Nominal: 16}, {Quota: "Q.1", Nominal: 6}, {Quota: "Q.2", Nominal: 10}},
		Moves:  []sim.MoveRecord{{Name: "move", At: start.Add(2 * time.Hour)}}}
	for i := 0; i <= 8; i++ {
		// b uses 9 (3 borrowed from Q.2, which uses 4); after the move to
		// 8/8, b uses 7 and c 9 (non-idle: one in debt, in quota, not
		// borrowed), 1 GPU of it stopping at the end.
		s := sim.Sample{T: start.Add(time.Duration(i) * 30 * time.Minute),
			Active: []int{2, 9, 4}, Borrowed: []int{0, 3, 0}, Nominal: []int{16, 6, 10}, NonIdle: []int{15, 6, 4}, Used: []int{15, 9, 4}}
		if i >= 4 {
			s.Active, s.Borrowed, s.Nominal, s.NonIdle, s.Used = []int{0, 7, 9}, []int{0, 0, 0}, []int{16, 8, 8}, []int{16, 7, 9}, []int{16, 7, 9}
			if i == 8 {
				s.Active[2], s.Stopping = 8, 1
			}
		}
		r.Samples = append(r.Samples, s)
	}
	if got := panelQuotas(r); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("panels for %v, want Q.1 and Q.2", got)
	}
	top, step := panelScale(r, panelQuotas(r))
	series := func(c chart.Chart, name string) chart.TimeSeries {
		for _, s := range c.Series {
			if ts, ok := s.(chart.TimeSeries); ok && ts.Name == name {
				return ts
			}
		}
		t.Fatalf("no series %q", name)
		return chart.TimeSeries{}
	}
	for qi, want := range map[int][2]float64{1: {6, 8}, 2: {10, 8}} {
		c := quotaPanel(r, qi, 750, 300, top, step)
		name := r.Quotas[qi].Quota
		nom := series(c, name+" nominal")
		// A step: the old nominal up to the sample that sees the new one.
		if len(nom.YValues) != len(r.Samples)+1 {
			t.Errorf("%s: nominal has %d points, want a step", name, len(nom.YValues))
		}
		for i, v := range nom.YValues {
			wantV := want[0]
			if nom.XValues[i].After(r.Moves[0].At) || (nom.XValues[i].Equal(r.Moves[0].At) && i > 0 && nom.XValues[i-1].Equal(nom.XValues[i])) {
				wantV = want[1]
			}
			if v != wantV {
				t.Errorf("%s: nominal at %s = %g, want %g", name, nom.XValues[i].Format("15:04"), v, wantV)
			}
		}
		in, used := series(c, name+" in quota"), series(c, name+" borrowed")
		axis := c.YAxis.Ticks[len(c.YAxis.Ticks)-1].Value
		for i, s := range r.Samples {
			if used.YValues[i] != float64(s.Used[qi]) {
				t.Errorf("%s: top of bands %g, want used %d", name, used.YValues[i], s.Used[qi])
			}
			// DESIGN L4: borrowed is used - max(nominal, non-idle).
			if b := used.YValues[i] - in.YValues[i]; b != float64(max(0, s.Used[qi]-max(s.Nominal[qi], s.NonIdle[qi]))) {
				t.Errorf("%s: borrowed %g at %d", name, b, i)
			}
			if used.YValues[i] > axis || float64(s.Nominal[qi]) > axis {
				t.Errorf("%s: %g or nominal %d above the axis (%g)", name, used.YValues[i], s.Nominal[qi], axis)
			}
		}
	}
	// The stack: a, b, b borrowed, c, stopping; the top is all GPUs in use.
	c := stackChart(r, 1500, 560)
	stopping := series(c, "stopping")
	for i, s := range r.Samples {
		if want := float64(s.Active[0] + s.Active[1] + s.Active[2] + s.Stopping); stopping.YValues[i] != want {
			t.Errorf("stack top %g at %d, want %g", stopping.YValues[i], i, want)
		}
	}
	if b := series(c, "b borrowed"); b.YValues[0] != 2+9 {
		t.Errorf("b's borrowed band ends at %g, want 11", b.YValues[0])
	}
	if c.YAxis.Ticks[len(c.YAxis.Ticks)-1].Value < float64(r.Capacity) {
		t.Errorf("capacity above the axis")
	}
	var b bytes.Buffer
	if err := Occupancy(&b, r); err != nil {
		t.Fatal(err)
	}
	f := checkSVG(t, "hand-made", b.Bytes())
	for _, want := range []string{"Q.1 (b):", "Q.2 (c):", "capacity = Q nominal", "quota move (Tue 12:00)", "b borrowed"} {
		if !f.texts[want] {
			t.Errorf("no text %q", want)
		}
	}
	if len(f.tiles) != 3 {
		t.Errorf("%d charts, want 3", len(f.tiles))
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
	for _, want := range []string{"Mon 00:00", "Mon 00:02", "Mon 00:14"} {
		if !f.texts[want] {
			t.Errorf("no time tick %q", want)
		}
	}
	// Shorter than a minute step: the ends.
	got := ticks(r.Start, r.Start.Add(40*time.Second), r.Start.Location(), 12)
	if len(got) != 2 || got[0].Label != "Mon 00:00:00" || got[1].Label != "Mon 00:00:40" {
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
	tree := &quota.Node{Name: "Q", GPUs: 16, Namespaces: []string{"a"}, Children: []*quota.Node{
		{Name: "Q.1", GPUs: 6, Namespaces: []string{"b"}},
		{Name: "Q.2", GPUs: 10, Namespaces: []string{"c"}},
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
