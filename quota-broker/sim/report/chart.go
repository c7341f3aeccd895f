package report

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"

	chart "github.com/wcharczuk/go-chart/v2"
	"github.com/wcharczuk/go-chart/v2/drawing"

	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/sim"
)

// palette: one hue per workspace; its borrowed GPUs in a lighter tint.
var palette = []drawing.Color{
	{R: 0x1f, G: 0x77, B: 0xb4, A: 255}, // blue
	{R: 0xd6, G: 0x61, B: 0x0a, A: 255}, // orange
	{R: 0x2c, G: 0xa0, B: 0x2c, A: 255}, // green
	{R: 0x94, G: 0x67, B: 0xbd, A: 255}, // purple
	{R: 0x8c, G: 0x56, B: 0x4b, A: 255}, // brown
	{R: 0xe3, G: 0x77, B: 0xc2, A: 255}, // pink
}

var (
	grey     = drawing.Color{R: 0x99, G: 0x99, B: 0x99, A: 255}
	moveGrey = drawing.Color{R: 0x55, G: 0x55, B: 0x55, A: 255}
)

func tint(c drawing.Color) drawing.Color {
	return drawing.Color{R: c.R + (255-c.R)*6/10, G: c.G + (255-c.G)*6/10, B: c.B + (255-c.B)*6/10, A: 255}
}

// Sizes of the occupancy figure, in SVG user units.
const (
	figWidth    = 1500
	stackHeight = 560
	panelHeight = 300
)

// Occupancy draws the GPUs in use over time as one SVG figure of go-chart
// renders. On top, the whole cluster: stacked bands per workspace (in
// quota and, lighter, borrowed: DESIGN L4), the GPUs of stopping
// allocations (kill_timeout) on top of them, the cluster's capacity and the
// quota moves. Below it, one small panel per quota node under the root, on
// one shared scale: the node's subtree use (in quota; borrowed, lighter)
// against its nominal as a dashed step line, so that whether a quota is
// above or below its nominal, and a quota move, can be read at a glance.
func Occupancy(w io.Writer, r *sim.Result) error {
	if len(r.Samples) < 2 {
		return fmt.Errorf("too few samples to draw (%d)", len(r.Samples))
	}
	var tiles []tile
	main, err := render(stackChart(r, figWidth, stackHeight))
	if err != nil {
		return err
	}
	tiles = append(tiles, tile{w: figWidth, h: stackHeight, svg: main})
	qs := panelQuotas(r)
	if len(qs) > 0 {
		cols := min(len(qs), 3)
		if len(qs) == 4 {
			cols = 2
		}
		pw := figWidth / cols
		top, step := panelScale(r, qs)
		for k, qi := range qs {
			svg, err := render(quotaPanel(r, qi, pw, panelHeight, top, step))
			if err != nil {
				return err
			}
			tiles = append(tiles, tile{x: k % cols * pw, y: stackHeight + k/cols*panelHeight, w: pw, h: panelHeight, svg: svg})
		}
	}
	return compose(w, tiles)
}

// stackChart is the cluster-wide chart: GPUs in use, stacked by workspace.
func stackChart(r *sim.Result, width, height int) chart.Chart {
	n := len(r.Samples)
	top := float64(r.Capacity) * 1.08
	yTicks := gpuTicks(r.Capacity, top, 10)
	xs := times(r)
	type layer struct {
		name  string
		color drawing.Color
		vals  []float64
	}
	var layers []layer
	for wi, ns := range r.Namespaces {
		c := palette[wi%len(palette)]
		in, br := make([]float64, n), make([]float64, n)
		borrowed := false
		for i, s := range r.Samples {
			in[i] = float64(s.Active[wi] - s.Borrowed[wi])
			br[i] = float64(s.Borrowed[wi])
			borrowed = borrowed || s.Borrowed[wi] > 0
		}
		name := ns
		if q := r.WS[wi].Quota; q != "" {
			name = fmt.Sprintf("%s (%s)", ns, q)
		}
		layers = append(layers, layer{name: name, color: c, vals: in})
		if borrowed {
			layers = append(layers, layer{name: ns + " borrowed", color: tint(c), vals: br})
		}
	}
	stop := make([]float64, n)
	for i, s := range r.Samples {
		stop[i] = float64(s.Stopping)
	}
	layers = append(layers, layer{name: "stopping", color: grey, vals: stop})

	// go-chart fills each series down to the axis: draw the cumulative
	// tops from the highest layer down, so that each band shows its own part.
	cum := make([][]float64, len(layers))
	acc := make([]float64, n)
	for li, l := range layers {
		cum[li] = make([]float64, n)
		for i := range acc {
			acc[i] += l.vals[i]
			cum[li][i] = acc[i]
		}
	}
	var series []chart.Series
	var keys []key
	for li := len(layers) - 1; li >= 0; li-- {
		series = append(series, chart.TimeSeries{
			Name: layers[li].name, XValues: xs, YValues: cum[li],
			Style: chart.Style{StrokeColor: layers[li].color, StrokeWidth: 1, FillColor: layers[li].color},
		})
	}
	for _, l := range layers {
		keys = append(keys, key{name: l.name, color: l.color, area: true})
	}

	// The root's nominal bounds the whole stack (its subtree is every
	// workspace); where it is the capacity, the capacity line says so.
	capName := "capacity"
	root := rootIndex(r)
	rootLine := false
	if root >= 0 {
		rootLine = len(r.Quotas) == 1
		for _, s := range r.Samples {
			rootLine = rootLine || s.Nominal[root] != r.Capacity
		}
		if !rootLine {
			capName = fmt.Sprintf("capacity = %s nominal", r.Quotas[root].Quota)
		}
	}
	capStyle := chart.Style{StrokeColor: drawing.ColorBlack, StrokeWidth: 1.5}
	series = append(series, chart.TimeSeries{Name: capName, XValues: xs, YValues: constant(n, float64(r.Capacity)), Style: capStyle})
	keys = append(keys, key{name: capName, color: drawing.ColorBlack, dash: nil})
	if rootLine {
		ys := make([]float64, n)
		for i, s := range r.Samples {
			ys[i] = min(float64(s.Nominal[root]), top)
		}
		sx, sy := steps(xs, ys)
		name := r.Quotas[root].Quota + " nominal"
		series = append(series, chart.TimeSeries{Name: name, XValues: sx, YValues: sy, Style: nominalStyle()})
		keys = append(keys, key{name: name, color: drawing.ColorBlack, dash: nominalStyle().StrokeDashArray})
	}
	if ms, name := moveSeries(r, yTicks[len(yTicks)-1].Value); len(ms) > 0 {
		series = append(series, ms...)
		keys = append(keys, key{name: name, color: moveGrey, dash: moveStyle().StrokeDashArray})
	}

	zone := r.Scenario.Zone
	graph := chart.Chart{
		Width:      width,
		Height:     height,
		Background: chart.Style{Padding: chart.Box{Top: 40, Left: 10, Right: 20, Bottom: 10}},
		XAxis: chart.XAxis{
			Name:  fmt.Sprintf("%s, policy %s; local time (%s)", r.Scenario.Name, r.Policy, zone),
			Ticks: ticks(r.Start, r.End, zone, 12),
		},
		YAxis: chart.YAxis{
			Name:  "GPUs",
			Range: &chart.ContinuousRange{Min: 0, Max: top},
			Ticks: yTicks,
		},
		// No series use it, but go-chart draws it (a stray "0.00") unless hidden.
		YAxisSecondary: chart.YAxis{Style: chart.Hidden()},
		Series:         series,
	}
	graph.Elements = []chart.Renderable{legend("GPUs in use (bands bottom up):", keys)}
	return graph
}

// quotaPanel is the small chart of quota node qi: its subtree's GPUs in
// use, split as DESIGN L4 does (borrowed: used - max(nominal, non-idle)),
// against its nominal.
func quotaPanel(r *sim.Result, qi, width, height int, top float64, step int) chart.Chart {
	n := len(r.Samples)
	xs := times(r)
	yTicks := gpuTicksStep(step, top)
	q := r.Quotas[qi]
	c := quotaColor(r, q.Quota)
	in, used, nom := make([]float64, n), make([]float64, n), make([]float64, n)
	borrowed := false
	for i, s := range r.Samples {
		u, ni, nm := s.Used[qi], s.NonIdle[qi], s.Nominal[qi]
		used[i] = float64(u)
		in[i] = float64(min(u, max(nm, ni)))
		nom[i] = float64(nm)
		borrowed = borrowed || used[i] > in[i]
	}
	sx, sy := steps(xs, nom)
	series := []chart.Series{
		chart.TimeSeries{Name: q.Quota + " borrowed", XValues: xs, YValues: used,
			Style: chart.Style{StrokeColor: tint(c), StrokeWidth: 1, FillColor: tint(c)}},
		chart.TimeSeries{Name: q.Quota + " in quota", XValues: xs, YValues: in,
			Style: chart.Style{StrokeColor: c, StrokeWidth: 1, FillColor: c}},
		chart.TimeSeries{Name: q.Quota + " nominal", XValues: sx, YValues: sy, Style: nominalStyle()},
	}
	keys := []key{{name: "in quota", color: c, area: true}}
	if borrowed {
		keys = append(keys, key{name: "borrowed", color: tint(c), area: true})
	}
	keys = append(keys, key{name: "nominal", color: drawing.ColorBlack, dash: nominalStyle().StrokeDashArray})
	if ms, name := moveSeries(r, yTicks[len(yTicks)-1].Value); len(ms) > 0 {
		series = append(series, ms...)
		keys = append(keys, key{name: name, color: moveGrey, dash: moveStyle().StrokeDashArray})
	}
	title := q.Quota
	if ns := quotaNamespaces(r, q.Quota); len(ns) > 0 {
		title += " (" + strings.Join(ns, ", ") + ")"
	}
	zone := r.Scenario.Zone
	graph := chart.Chart{
		Width:      width,
		Height:     height,
		Background: chart.Style{Padding: chart.Box{Top: 36, Left: 10, Right: 20, Bottom: 12}},
		XAxis:      chart.XAxis{Ticks: ticks(r.Start, r.End, zone, max(3, 12*width/figWidth))},
		YAxis: chart.YAxis{
			Name:  "GPUs",
			Range: &chart.ContinuousRange{Min: 0, Max: top},
			Ticks: yTicks,
		},
		YAxisSecondary: chart.YAxis{Style: chart.Hidden()},
		Series:         series,
	}
	graph.Elements = []chart.Renderable{legend(title+":", keys)}
	return graph
}

// panelQuotas are the quota nodes that get a panel: every node but the
// root, whose nominal bounds the whole stack of the main chart (a tree of
// one node has no panel: its nominal is drawn on the main chart).
func panelQuotas(r *sim.Result) []int {
	if len(r.Quotas) < 2 {
		return nil
	}
	root := rootIndex(r)
	var out []int
	for qi := range r.Quotas {
		if qi != root {
			out = append(out, qi)
		}
	}
	return out
}

// panelScale is the panels' shared GPU range: the most any of them used or
// was nominally guaranteed, with some room, and its tick step.
func panelScale(r *sim.Result, qs []int) (top float64, step int) {
	peak := 1
	for _, s := range r.Samples {
		for _, qi := range qs {
			peak = max(peak, s.Used[qi], s.Nominal[qi])
		}
	}
	step = 1
	for peak/step > 6 {
		step *= 2
	}
	return float64(peak) * 1.12, step
}

// rootIndex is the index of the tree's root in r.Quotas, or -1.
func rootIndex(r *sim.Result) int {
	if r.Scenario == nil || r.Scenario.Quota == nil {
		if len(r.Quotas) > 0 {
			return 0
		}
		return -1
	}
	for qi, q := range r.Quotas {
		if q.Quota == r.Scenario.Quota.Name {
			return qi
		}
	}
	return -1
}

// quotaNode finds a node of the scenario's tree by name.
func quotaNode(r *sim.Result, name string) *quota.Node {
	if r.Scenario == nil || r.Scenario.Quota == nil {
		return nil
	}
	return r.Scenario.Quota.Find(name)
}

// quotaNamespaces are the workspaces bound to the node itself.
func quotaNamespaces(r *sim.Result, name string) []string {
	var out []string
	for _, ws := range r.WS {
		if ws.Quota == name {
			out = append(out, ws.Namespace)
		}
	}
	return out
}

// quotaColor is the hue of the node's first workspace, or of the first
// workspace in its subtree, as in the main chart.
func quotaColor(r *sim.Result, name string) drawing.Color {
	idx := map[string]int{}
	for i, ns := range r.Namespaces {
		idx[ns] = i
	}
	for _, ns := range quotaNamespaces(r, name) {
		return palette[idx[ns]%len(palette)]
	}
	c := grey
	found := false
	if node := quotaNode(r, name); node != nil {
		node.Walk(func(d *quota.Node) {
			for _, ns := range d.Namespaces {
				if i, ok := idx[ns]; ok && !found {
					c, found = palette[i%len(palette)], true
				}
			}
		})
	}
	return c
}

func nominalStyle() chart.Style {
	return chart.Style{StrokeColor: drawing.ColorBlack, StrokeWidth: 2, StrokeDashArray: []float64{7, 4}}
}

func moveStyle() chart.Style {
	return chart.Style{StrokeColor: moveGrey, StrokeWidth: 1, StrokeDashArray: []float64{2, 3}}
}

// moveSeries are vertical lines at the quota moves, and their legend
// label with the moves' local times.
func moveSeries(r *sim.Result, top float64) ([]chart.Series, string) {
	var out []chart.Series
	var at []string
	for _, m := range r.Moves {
		if m.At.Before(r.Start) || m.At.After(r.End) {
			continue
		}
		out = append(out, chart.TimeSeries{Name: "quota move " + m.Name, XValues: []time.Time{m.At, m.At},
			YValues: []float64{0, top}, Style: moveStyle()})
		at = append(at, m.At.In(r.Scenario.Zone).Format("Mon 15:04"))
	}
	name := "quota move"
	if len(at) > 1 {
		name += "s"
	}
	return out, fmt.Sprintf("%s (%s)", name, strings.Join(at, ", "))
}

func times(r *sim.Result) []time.Time {
	xs := make([]time.Time, len(r.Samples))
	for i, s := range r.Samples {
		xs[i] = s.T
	}
	return xs
}

func constant(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// steps turns samples of a value that changes at instants (a nominal) into
// a step line: the old value holds until the sample where the new one is
// seen.
func steps(xs []time.Time, ys []float64) ([]time.Time, []float64) {
	ox, oy := []time.Time{xs[0]}, []float64{ys[0]}
	for i := 1; i < len(xs); i++ {
		if ys[i] != ys[i-1] {
			ox, oy = append(ox, xs[i]), append(oy, ys[i-1])
		}
		ox, oy = append(ox, xs[i]), append(oy, ys[i])
	}
	return ox, oy
}

// key is one legend entry: a filled swatch for a band, a line otherwise.
type key struct {
	name  string
	color drawing.Color
	area  bool
	dash  []float64
}

// legend draws the keys above the chart's canvas, led by a title, in as
// many rows as they need. (go-chart's own legends draw a line in each
// series' stroke, which says nothing about a filled band.)
func legend(title string, keys []key) chart.Renderable {
	return func(r chart.Renderer, cb chart.Box, defaults chart.Style) {
		text := chart.Style{FontColor: chart.DefaultTextColor, FontSize: 9, Font: defaults.GetFont()}
		bold := text
		bold.FontSize = 10
		const swatch, gap, rowHeight = 24, 12, 15
		// Lay out first: the rows end just above the canvas.
		type item struct{ x, row int }
		items := make([]item, len(keys))
		x0 := cb.Left
		if title != "" {
			x0 += textWidth(r, title, bold) + 12
		}
		x, row := x0, 0
		for i, k := range keys {
			w := swatch + 4 + textWidth(r, k.name, text)
			if x > x0 && x+w > cb.Right {
				x, row = x0, row+1
			}
			items[i] = item{x, row}
			x += w + gap
		}
		y0 := cb.Top - 12 - row*rowHeight
		if title != "" {
			chart.Draw.Text(r, title, cb.Left, y0, bold)
		}
		for i, k := range keys {
			x, y := items[i].x, y0+items[i].row*rowHeight
			if k.area {
				chart.Draw.Box(r, chart.Box{Left: x + 4, Top: y - 9, Right: x + swatch - 4, Bottom: y + 1},
					chart.Style{FillColor: k.color, StrokeColor: k.color, StrokeWidth: 1})
			} else {
				st := chart.Style{StrokeColor: k.color, StrokeWidth: 2, StrokeDashArray: k.dash}
				st.GetStrokeOptions().WriteToRenderer(r)
				r.MoveTo(x, y-4)
				r.LineTo(x+swatch, y-4)
				r.Stroke()
				r.ResetStyle()
			}
			chart.Draw.Text(r, k.name, x+swatch+4, y, text)
		}
	}
}

// textWidth is the width of a label with room for a wider fallback font
// (a viewer without Roboto, which go-chart measures with).
func textWidth(r chart.Renderer, s string, st chart.Style) int {
	return chart.Draw.MeasureText(r, s, st).Width() * 23 / 20
}

// tile is one rendered chart and where it goes in the figure.
type tile struct {
	x, y, w, h int
	svg        []byte
}

func render(c chart.Chart) ([]byte, error) {
	var b bytes.Buffer
	if err := c.Render(chart.SVG, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// compose writes go-chart's SVG documents as nested <svg> viewports of one
// document, each at its place.
func compose(w io.Writer, tiles []tile) error {
	width, height := 0, 0
	for _, t := range tiles {
		width, height = max(width, t.x+t.w), max(height, t.y+t.h)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="%d" height="%d" viewBox="0 0 %d %d">`,
		width, height, width, height)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>`)
	for _, t := range tiles {
		s := bytes.TrimSpace(t.svg)
		open := bytes.IndexByte(s, '>')
		if !bytes.HasPrefix(s, []byte("<svg")) || open < 0 || !bytes.HasSuffix(s, []byte("</svg>")) {
			return fmt.Errorf("unexpected SVG from go-chart: %.40q", s)
		}
		fmt.Fprintf(&b, `<svg x="%d" y="%d" width="%d" height="%d" viewBox="0 0 %d %d">`, t.x, t.y, t.w, t.h, t.w, t.h)
		b.Write(s[open+1:])
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// ticks are the time axis labels at whole local minutes, hours or days, at
// most about most; at least two (the ends of a run shorter than a step), so
// that the axis has a range.
func ticks(from, to time.Time, zone *time.Location, most int) []chart.Tick {
	span := to.Sub(from)
	steps := []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
		2 * 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 28 * 24 * time.Hour}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if int(span/s) <= most {
			step = s
			break
		}
	}
	layout := "Mon 15:04"
	if step >= 24*time.Hour {
		layout = "Mon Jan 2"
	}
	var out []chart.Tick
	t := from.In(zone)
	if step >= time.Hour {
		t = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, zone)
	} else {
		t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, zone)
	}
	for ; !t.After(to); t = nextTick(t, step) {
		if !t.Before(from) {
			out = append(out, chart.Tick{Value: float64(t.UnixNano()), Label: t.Format(layout)})
		}
	}
	if len(out) < 2 {
		layout = "Mon 15:04:05"
		out = []chart.Tick{{Value: float64(from.UnixNano()), Label: from.In(zone).Format(layout)},
			{Value: float64(to.UnixNano()), Label: to.In(zone).Format(layout)}}
	}
	return out
}

// nextTick steps by whole local minutes, hours or days, so that ticks stay
// on 00:00, 06:00... across daylight-saving changes.
func nextTick(t time.Time, step time.Duration) time.Time {
	if step >= 24*time.Hour {
		return t.AddDate(0, 0, int(step/(24*time.Hour)))
	}
	n := t.Add(step)
	if step < time.Hour {
		m := int(step / time.Minute)
		return time.Date(n.Year(), n.Month(), n.Day(), n.Hour(), n.Minute()/m*m, 0, 0, t.Location())
	}
	h := int(step / time.Hour)
	return time.Date(n.Year(), n.Month(), n.Day(), n.Hour()/h*h, 0, 0, 0, t.Location())
}

// gpuTicks label the GPU axis at round steps (8, 16, 32...), at most about
// most of them up to capacity.
func gpuTicks(capacity int, top float64, most int) []chart.Tick {
	step := 1
	for capacity/step > most {
		step *= 2
	}
	return gpuTicksStep(step, top)
}

// gpuTicksStep label the GPU axis every step GPUs, up to the first tick at
// or above top (go-chart spans the axis from the first tick to the last).
func gpuTicksStep(step int, top float64) []chart.Tick {
	var out []chart.Tick
	for v := 0; ; v += step {
		out = append(out, chart.Tick{Value: float64(v), Label: fmt.Sprint(v)})
		if float64(v) >= top {
			return out
		}
	}
}
