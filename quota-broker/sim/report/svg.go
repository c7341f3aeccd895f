package report

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strconv"
	"time"
)

// The charts are plain SVG written here: every mark is clamped to the plot
// box of its panel, every label is laid out inside its panel, and the
// output is a pure function of the result (no clock, no map order), so that
// one seed gives the same bytes.

// colour is an RGB colour.
type colour struct{ r, g, b uint8 }

func (c colour) String() string { return fmt.Sprintf("#%02x%02x%02x", c.r, c.g, c.b) }

// light is c mixed with white (k of 10 parts white).
func (c colour) light(k int) colour {
	f := func(x uint8) uint8 { return uint8(int(x) + (255-int(x))*k/10) }
	return colour{f(c.r), f(c.g), f(c.b)}
}

// Okabe-Ito, the palette of "Color Universal Design" (Okabe and Ito,
// 2008), readable with the common colour-vision deficiencies; the yellow
// comes last (faint on white).
var palette = []colour{
	{0x00, 0x72, 0xb2}, // blue
	{0xe6, 0x9f, 0x00}, // orange
	{0x00, 0x9e, 0x73}, // bluish green
	{0xcc, 0x79, 0xa7}, // reddish purple
	{0x56, 0xb4, 0xe9}, // sky blue
	{0xd5, 0x5e, 0x00}, // vermillion
	{0xf0, 0xe4, 0x42}, // yellow
}

var (
	black    = colour{0, 0, 0}
	greyC    = colour{0x99, 0x99, 0x99}
	gridC    = colour{0xe4, 0xe4, 0xe4}
	textC    = colour{0x33, 0x33, 0x33}
	moveGrey = colour{0x55, 0x55, 0x55}
)

// Font sizes and the width a character is given when laying text out (a
// generous average for sans-serif fonts, so that labels keep inside).
const (
	fontSize  = 11.0
	titleSize = 13.0
	charWidth = 0.62
)

func textWidth(s string, size float64) float64 { return float64(len([]rune(s))) * size * charWidth }

func num(x float64) string { return strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64) }

// svgDoc is one SVG document being written. id prefixes the ids it
// defines, so that several documents can be inlined in one HTML page.
type svgDoc struct {
	id       string
	w, h     float64
	patterns map[colour]string
	defs     bytes.Buffer
	body     bytes.Buffer
}

func newSVG(id string, w, h float64) *svgDoc {
	return &svgDoc{id: id, w: w, h: h, patterns: map[colour]string{}}
}

// hatch returns a fill of c's light tint crossed by diagonal lines of c:
// borrowed GPUs, told from in-quota ones by lightness and texture.
func (d *svgDoc) hatch(c colour) string {
	if id, ok := d.patterns[c]; ok {
		return "url(#" + id + ")"
	}
	id := fmt.Sprintf("%s-hatch-%d", d.id, len(d.patterns))
	d.patterns[c] = id
	fmt.Fprintf(&d.defs, `<pattern id="%s" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)">`+
		`<rect width="6" height="6" fill="%s"/><line x1="1.5" y1="0" x2="1.5" y2="6" stroke="%s" stroke-width="2"/></pattern>`,
		id, c.light(6), c)
	return "url(#" + id + ")"
}

func (d *svgDoc) raw(format string, a ...any) { fmt.Fprintf(&d.body, format, a...) }

// text writes a label; anchor is start, middle or end.
func (d *svgDoc) text(x, y float64, s string, size float64, anchor string, bold bool) {
	weight := ""
	if bold {
		weight = ` font-weight="bold"`
	}
	d.raw(`<text x="%s" y="%s" font-size="%s" text-anchor="%s" fill="%s"%s>%s</text>`, num(x), num(y), num(size), anchor, textC, weight,
		html.EscapeString(s))
}

func (d *svgDoc) line(x1, y1, x2, y2 float64, c colour, width float64, dash string) {
	da := ""
	if dash != "" {
		da = ` stroke-dasharray="` + dash + `"`
	}
	d.raw(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s/>`, num(x1), num(y1), num(x2), num(y2), c, num(width), da)
}

func (d *svgDoc) rect(x, y, w, h float64, fill string) {
	d.raw(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>`, num(x), num(y), num(w), num(h), fill)
}

// bytes returns the document.
func (d *svgDoc) bytes() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="DejaVu Sans, Arial, Helvetica, sans-serif">`,
		num(d.w), num(d.h), num(d.w), num(d.h))
	if d.defs.Len() > 0 {
		b.WriteString("<defs>")
		b.Write(d.defs.Bytes())
		b.WriteString("</defs>")
	}
	fmt.Fprintf(&b, `<rect width="%s" height="%s" fill="white"/>`, num(d.w), num(d.h))
	b.Write(d.body.Bytes())
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// panel is one chart in a figure: its box, its plot box inside it (the
// axes), and the scales of the plot.
type panel struct {
	d                        *svgDoc
	x, y, w, h               float64 // the panel in the figure
	left, top, right, bottom float64 // the plot box, in figure coordinates
	t0, t1                   time.Time
	ymax                     float64
}

// X is the abscissa of t, inside the plot box.
func (p *panel) X(t time.Time) float64 {
	f := float64(t.Sub(p.t0)) / float64(p.t1.Sub(p.t0))
	return p.left + (p.right-p.left)*min(1, max(0, f))
}

// Y is the ordinate of v, inside the plot box.
func (p *panel) Y(v float64) float64 {
	return p.bottom - (p.bottom-p.top)*min(1, max(0, v/p.ymax))
}

// key is one legend entry: a swatch filled with fill, or a line.
type key struct {
	name string
	fill string // an area's fill; "" for a line
	line colour
	dash string
}

const (
	legendRow  = 16.0
	swatchW    = 22.0
	axisLeft   = 52.0
	axisRight  = 14.0
	axisBottom = 38.0
)

// legendRows lays keys out in rows of width w after a title; it returns
// each key's row and x offset, and the number of rows.
func legendRows(title string, keys []key, w float64) (rows []int, xs []float64, n int) {
	x0 := textWidth(title, fontSize) + 10
	x, row := x0, 0
	for _, k := range keys {
		kw := swatchW + 4 + textWidth(k.name, fontSize)
		if x > x0 && x+kw > w {
			x, row = x0, row+1
		}
		rows, xs = append(rows, row), append(xs, x)
		x += kw + 12
	}
	return rows, xs, row + 1
}

// newPanel opens a panel at (x, y) of size w x h with a title, a legend,
// the time axis from t0 to t1 in zone and a GPU axis up to ymax: it draws
// the frame, the grid, the ticks and the legend, and returns the panel to
// draw the data in. The plot box is whatever the legend and the axes leave.
func newPanel(d *svgDoc, x, y, w, h float64, title string, keys []key, t0, t1 time.Time, zone *time.Location, ymax float64, yName string) *panel {
	rows, xs, nrows := legendRows(title, keys, w-axisLeft-axisRight)
	top := y + 22 + float64(nrows)*legendRow
	p := &panel{d: d, x: x, y: y, w: w, h: h, left: x + axisLeft, top: top, right: x + w - axisRight, bottom: y + h - axisBottom,
		t0: t0, t1: t1, ymax: ymax}
	d.raw(`<g class="panel" data-box="%s %s %s %s">`, num(x), num(y), num(x+w), num(y+h))
	// The legend, above the plot.
	ly := y + 18
	d.text(p.left, ly, title, fontSize, "start", true)
	for i, k := range keys {
		kx, ky := p.left+xs[i], ly+float64(rows[i])*legendRow
		if k.fill != "" {
			d.raw(`<rect x="%s" y="%s" width="%s" height="10" fill="%s" stroke="%s" stroke-width="0.5"/>`, num(kx), num(ky-9), num(swatchW), k.fill, greyC)
		} else {
			d.line(kx, ky-4, kx+swatchW, ky-4, k.line, 2, k.dash)
		}
		d.text(kx+swatchW+4, ky, k.name, fontSize, "start", false)
	}
	// The GPU axis: grid lines and labels.
	step := niceStep(ymax, int(max(2, (p.bottom-p.top)/28)))
	for v := 0.0; v <= ymax+1e-9; v += step {
		yy := p.Y(v)
		d.line(p.left, yy, p.right, yy, gridC, 1, "")
		d.text(p.left-5, yy+4, num(v), fontSize, "end", false)
	}
	d.raw(`<text x="%s" y="%s" font-size="%s" text-anchor="middle" fill="%s" transform="rotate(-90 %s %s)">%s</text>`,
		num(x+12), num((p.top+p.bottom)/2), num(fontSize), textC, num(x+12), num((p.top+p.bottom)/2), html.EscapeString(yName))
	// The time axis, in the scenario's zone.
	for _, tk := range timeTicks(t0, t1, zone, int(max(2, (p.right-p.left)/95))) {
		xx := p.X(tk.t)
		d.line(xx, p.top, xx, p.bottom, gridC, 1, "")
		d.raw(`<g class="xtick" data-time="%s">`, tk.t.Format(time.RFC3339))
		d.line(xx, p.bottom, xx, p.bottom+4, textC, 1, "")
		anchor := "middle"
		if xx-textWidth(tk.label, fontSize)/2 < x+2 {
			anchor = "start"
		} else if xx+textWidth(tk.label, fontSize)/2 > x+w-2 {
			anchor = "end"
		}
		d.text(xx, p.bottom+16, tk.label, fontSize, anchor, false)
		d.raw(`</g>`)
	}
	d.text((p.left+p.right)/2, p.bottom+32, "local time ("+zone.String()+")", fontSize, "middle", false)
	d.raw(`<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="%s"/>`, num(p.left), num(p.top), num(p.right-p.left), num(p.bottom-p.top), greyC)
	d.raw(`<g class="plot" data-box="%s %s %s %s">`, num(p.left), num(p.top), num(p.right), num(p.bottom))
	return p
}

// close ends the panel's plot and the panel.
func (p *panel) close() { p.d.raw(`</g></g>`) }

// band fills between lo and hi, two step series over ts (each value holds
// until the next instant), with fill.
func (p *panel) band(ts []time.Time, lo, hi []float64, fill string) {
	if len(ts) == 0 {
		return
	}
	var b bytes.Buffer
	// Upper edge forward, lower edge back; a vertex only where a value
	// changes.
	edge := func(ys []float64, forward bool) {
		n := len(ts)
		for k := 0; k < n; k++ {
			i := k
			if !forward {
				i = n - 1 - k
			}
			x := p.X(ts[i])
			if forward {
				if i == 0 {
					fmt.Fprintf(&b, "M%s %s", num(x), num(p.Y(ys[0])))
				} else if ys[i] != ys[i-1] {
					fmt.Fprintf(&b, "H%sV%s", num(x), num(p.Y(ys[i])))
				}
				if i == n-1 {
					fmt.Fprintf(&b, "H%s", num(p.right))
				}
			} else {
				if i == n-1 {
					fmt.Fprintf(&b, "V%s", num(p.Y(ys[i])))
				}
				if i > 0 && ys[i] != ys[i-1] {
					fmt.Fprintf(&b, "H%sV%s", num(x), num(p.Y(ys[i-1])))
				}
				if i == 0 {
					fmt.Fprintf(&b, "H%s", num(x))
				}
			}
		}
	}
	edge(hi, true)
	edge(lo, false)
	b.WriteString("Z")
	p.d.raw(`<path d="%s" fill="%s" stroke="none"/>`, b.String(), fill)
}

// step draws a step line over ts (a nominal: each value holds until the
// next instant).
func (p *panel) step(ts []time.Time, ys []float64, c colour, width float64, dash string) {
	var b bytes.Buffer
	for i := range ts {
		x := p.X(ts[i])
		switch {
		case i == 0:
			fmt.Fprintf(&b, "M%s %s", num(x), num(p.Y(ys[0])))
		case ys[i] != ys[i-1]:
			fmt.Fprintf(&b, "H%sV%s", num(x), num(p.Y(ys[i])))
		}
	}
	fmt.Fprintf(&b, "H%s", num(p.right))
	da := ""
	if dash != "" {
		da = ` stroke-dasharray="` + dash + `"`
	}
	p.d.raw(`<path class="limit" d="%s" fill="none" stroke="%s" stroke-width="%s"%s/>`, b.String(), c, num(width), da)
}

// vline is a vertical line at t over the plot.
func (p *panel) vline(t time.Time, c colour, dash string) {
	x := p.X(t)
	p.d.line(x, p.top, x, p.bottom, c, 1, dash)
}

// niceStep is a round step (1, 2, 5 times a power of ten, or a power of
// two for GPU counts of 8 and more) giving at most about most ticks up to
// top.
func niceStep(top float64, most int) float64 {
	if top <= 0 {
		return 1
	}
	for _, s := range []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384} {
		if top/s <= float64(most) {
			return s
		}
	}
	return math.Pow(10, math.Ceil(math.Log10(top/float64(most))))
}

// tick is one label of the time axis.
type tick struct {
	t     time.Time
	label string
}

// timeTicks are the time axis labels at whole local minutes, hours, days
// or weeks (Mondays) in zone, the step the smallest that gives at most
// about most ticks; at least the two ends of a run shorter than a step.
// Hour ticks are labelled with the weekday at local midnight.
func timeTicks(from, to time.Time, zone *time.Location, most int) []tick {
	span := to.Sub(from)
	day := 24 * time.Hour
	steps := []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, day, 2 * day, 7 * day, 14 * day, 28 * day}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if int(span/s) <= most {
			step = s
			break
		}
	}
	var out []tick
	t := from.In(zone)
	switch {
	case step >= 7*day:
		t = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, zone)
		for t.Weekday() != time.Monday {
			t = t.AddDate(0, 0, -1)
		}
	case step >= time.Hour:
		t = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, zone)
	default:
		t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, zone)
	}
	for ; !t.After(to); t = nextTick(t, step) {
		if t.Before(from) {
			continue
		}
		label := t.Format("15:04")
		switch {
		case step >= day:
			label = t.Format("Mon 2 Jan")
		case t.Hour() == 0 && t.Minute() == 0:
			label = t.Format("Mon 2 Jan")
		case len(out) == 0:
			label = t.Format("Mon 15:04")
		}
		out = append(out, tick{t: t, label: label})
	}
	if len(out) < 2 {
		out = []tick{{from.In(zone), from.In(zone).Format("Mon 15:04:05")}, {to.In(zone), to.In(zone).Format("Mon 15:04:05")}}
	}
	return out
}

// nextTick steps by whole local minutes, hours, days or weeks, so that
// ticks stay on 00:00, 06:00... across daylight-saving changes.
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
	next := time.Date(n.Year(), n.Month(), n.Day(), n.Hour()/h*h, 0, 0, 0, t.Location())
	if !next.After(t) {
		// A repeated local hour (daylight saving ends): step on.
		next = time.Date(n.Year(), n.Month(), n.Day(), n.Hour()/h*h+h, 0, 0, 0, t.Location())
	}
	return next
}
