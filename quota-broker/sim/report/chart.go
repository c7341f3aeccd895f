package report

import (
	"fmt"
	"io"
	"time"

	chart "github.com/wcharczuk/go-chart/v2"
	"github.com/wcharczuk/go-chart/v2/drawing"

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

func tint(c drawing.Color) drawing.Color {
	return drawing.Color{R: c.R + (255-c.R)*6/10, G: c.G + (255-c.G)*6/10, B: c.B + (255-c.B)*6/10, A: 255}
}

// Occupancy draws the GPUs in use over time as an SVG chart: stacked bands
// per workspace (in quota and, lighter, borrowed: DESIGN L4), the GPUs of
// stopping allocations (kill_timeout) on top, the cluster's capacity, and
// a dashed nominal line per quota node placed at the base of its workspace's
// band plus its nominal, where the band's top would be at exactly its
// nominal.
func Occupancy(w io.Writer, r *sim.Result) error { return occupancy(w, r, chart.SVG) }

func occupancy(w io.Writer, r *sim.Result, format chart.RendererProvider) error {
	if len(r.Samples) < 2 {
		return fmt.Errorf("too few samples to draw (%d)", len(r.Samples))
	}
	n := len(r.Samples)
	top := float64(r.Capacity) * 1.08
	xs := make([]time.Time, n)
	for i, s := range r.Samples {
		xs[i] = s.T
	}
	// Quota node of each namespace (for the nominal lines).
	qOf := map[string]int{}
	for qi, q := range r.Quotas {
		for _, ws := range r.WS {
			if ws.Quota == q.Quota {
				qOf[ws.Namespace] = qi
			}
		}
	}
	type layer struct {
		name  string
		color drawing.Color
		vals  []float64
	}
	var layers []layer
	base := make([]float64, n)
	var lines []chart.Series
	for wi, ns := range r.Namespaces {
		c := palette[wi%len(palette)]
		in, br := make([]float64, n), make([]float64, n)
		nom := make([]float64, n)
		for i, s := range r.Samples {
			in[i] = float64(s.Active[wi] - s.Borrowed[wi])
			br[i] = float64(s.Borrowed[wi])
			if qi, ok := qOf[ns]; ok {
				nom[i] = base[i] + float64(s.Nominal[qi])
			}
		}
		for i := range nom {
			nom[i] = min(nom[i], top) // a line above the chart is drawn at its top
		}
		if qi, ok := qOf[ns]; ok && !isRoot(r, qi) {
			lines = append(lines, chart.TimeSeries{
				Name:    fmt.Sprintf("%s nominal", r.Quotas[qi].Quota),
				XValues: xs, YValues: nom,
				Style: chart.Style{StrokeColor: c, StrokeWidth: 1.5, StrokeDashArray: []float64{6, 4}},
			})
		}
		layers = append(layers, layer{name: ns, color: c, vals: in})
		for i := range base {
			base[i] += in[i]
		}
		if qi, ok := qOf[ns]; ok && r.Quotas[qi].Borrowed == 0 {
			continue // never borrowed (e.g. bound to the root): no band
		}
		layers = append(layers, layer{name: ns + " borrowed", color: tint(c), vals: br})
		for i := range base {
			base[i] += br[i]
		}
	}
	stop := make([]float64, n)
	for i, s := range r.Samples {
		stop[i] = float64(s.Stopping)
	}
	layers = append(layers, layer{name: "stopping", color: drawing.Color{R: 0x99, G: 0x99, B: 0x99, A: 255}, vals: stop})

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
	for li := len(layers) - 1; li >= 0; li-- {
		series = append(series, chart.TimeSeries{
			Name: layers[li].name, XValues: xs, YValues: cum[li],
			Style: chart.Style{StrokeColor: layers[li].color, StrokeWidth: 0.5, FillColor: layers[li].color},
		})
	}
	capv := make([]float64, n)
	for i := range capv {
		capv[i] = float64(r.Capacity)
	}
	series = append(series, chart.TimeSeries{Name: "capacity", XValues: xs, YValues: capv,
		Style: chart.Style{StrokeColor: drawing.ColorBlack, StrokeWidth: 1.5}})
	series = append(series, lines...)

	zone := r.Scenario.Zone
	graph := chart.Chart{
		Width:      1500,
		Height:     640,
		Background: chart.Style{Padding: chart.Box{Top: 40, Left: 10, Right: 20, Bottom: 10}},
		XAxis: chart.XAxis{
			Name:  fmt.Sprintf("%s, policy %s; local time (%s)", r.Scenario.Name, r.Policy, zone),
			Ticks: ticks(r.Start, r.End, zone),
		},
		YAxis: chart.YAxis{
			Name:  "GPUs",
			Range: &chart.ContinuousRange{Min: 0, Max: top},
			Ticks: gpuTicks(r.Capacity, top),
		},
		Series: series,
	}
	graph.Elements = []chart.Renderable{chart.LegendThin(&graph, chart.Style{FontSize: 8})}
	return graph.Render(format, w)
}

// ticks are the time axis labels at whole local hours or days, about ten.
func ticks(from, to time.Time, zone *time.Location) []chart.Tick {
	span := to.Sub(from)
	steps := []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
		2 * 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 28 * 24 * time.Hour}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if span/s <= 12 {
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
	t = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, zone)
	for ; !t.After(to); t = nextTick(t, step) {
		if !t.Before(from) {
			out = append(out, chart.Tick{Value: float64(t.UnixNano()), Label: t.Format(layout)})
		}
	}
	return out
}

// nextTick steps by whole local hours or days, so that ticks stay on
// 00:00, 06:00... across daylight-saving changes.
func nextTick(t time.Time, step time.Duration) time.Time {
	if step >= 24*time.Hour {
		return t.AddDate(0, 0, int(step/(24*time.Hour)))
	}
	h := int(step / time.Hour)
	n := t.Add(step)
	return time.Date(n.Year(), n.Month(), n.Day(), n.Hour()/h*h, 0, 0, 0, t.Location())
}

// gpuTicks label the GPU axis at round steps (8, 16, 32...).
func gpuTicks(capacity int, top float64) []chart.Tick {
	step := 1
	for capacity/step > 10 {
		step *= 2
	}
	var out []chart.Tick
	for v := 0; float64(v) <= top; v += step {
		out = append(out, chart.Tick{Value: float64(v), Label: fmt.Sprint(v)})
	}
	return out
}

func isRoot(r *sim.Result, qi int) bool { return qi == 0 && len(r.Quotas) > 1 }
