package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/sim"
)

// box is a rectangle: left, top, right, bottom.
type box [4]float64

func (b box) holds(x, y float64) bool {
	const eps = 0.051 // coordinates are written to a tenth
	return x >= b[0]-eps && x <= b[2]+eps && y >= b[1]-eps && y <= b[3]+eps
}

func parseBox(s string) (box, error) {
	var b box
	f := strings.Fields(s)
	if len(f) != 4 {
		return b, fmt.Errorf("box %q", s)
	}
	for i := range b {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return b, err
		}
		b[i] = v
	}
	return b, nil
}

// figure is what checkSVG read from a chart.
type figure struct {
	panels int
	texts  map[string]bool // every text drawn
	ticks  []xtick         // time ticks, in order
	limits []limitPath     // the limit lines, with their panel's plot box
	width  float64
}

type xtick struct {
	at    string // data-time
	label string
}

type limitPath struct {
	title string // the panel's title (its first bold text)
	d     string
	plot  box
}

var pathRE = regexp.MustCompile(`([MHVLZ])([^MHVLZ]*)`)

// pathPoints are the points a path's M, L, H and V commands reach.
func pathPoints(d string) ([][2]float64, error) {
	var out [][2]float64
	var x, y float64
	for _, m := range pathRE.FindAllStringSubmatch(d, -1) {
		var nums []float64
		for _, f := range strings.Fields(strings.ReplaceAll(m[2], ",", " ")) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return nil, fmt.Errorf("path %q: %v", d, err)
			}
			nums = append(nums, v)
		}
		switch m[1] {
		case "M", "L":
			if len(nums) != 2 {
				return nil, fmt.Errorf("path %q: %s with %d numbers", d, m[1], len(nums))
			}
			x, y = nums[0], nums[1]
		case "H":
			x = nums[0]
		case "V":
			y = nums[0]
		case "Z":
			continue
		}
		out = append(out, [2]float64{x, y})
	}
	return out, nil
}

// checkSVG parses a chart and checks its geometry: every mark lies inside
// the plot box of its panel, every label (at the width laid out) inside its
// panel, every panel inside the figure.
func checkSVG(t *testing.T, name string, svg []byte) figure {
	t.Helper()
	f := figure{texts: map[string]bool{}}
	d := xml.NewDecoder(bytes.NewReader(svg))
	type open struct {
		name  string
		boxes []box // panel, plot
	}
	var stack []open
	var fig box
	inDefs := 0
	var text *xml.StartElement
	var tickAt string
	title := ""
	errs := 0
	fail := func(format string, a ...any) {
		if errs++; errs <= 10 {
			t.Errorf(name+": "+format, a...)
		}
	}
	cur := func() []box {
		if len(stack) == 0 {
			return nil
		}
		return stack[len(stack)-1].boxes
	}
	inside := func(what string, x, y float64) {
		bs := cur()
		switch {
		case len(bs) == 2:
			if !bs[1].holds(x, y) {
				fail("%s at %g,%g is outside its plot %v", what, x, y, bs[1])
			}
		case len(bs) == 1:
			if !bs[0].holds(x, y) {
				fail("%s at %g,%g is outside its panel %v", what, x, y, bs[0])
			}
		default:
			if !fig.holds(x, y) {
				fail("%s at %g,%g is outside the figure", what, x, y)
			}
		}
	}
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
			num := func(k string) float64 {
				v, err := strconv.ParseFloat(attr[k], 64)
				if err != nil {
					fail("<%s %s=%q>: %v", tok.Name.Local, k, attr[k], err)
				}
				return v
			}
			boxes := cur()
			switch tok.Name.Local {
			case "svg":
				vb, err := parseBox(attr["viewBox"])
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				fig = box{0, 0, vb[2], vb[3]}
				f.width = vb[2]
			case "defs":
				inDefs++
			case "g":
				if b, ok := attr["data-box"]; ok {
					bx, err := parseBox(b)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if attr["class"] == "panel" {
						f.panels++
						if !fig.holds(bx[0], bx[1]) || !fig.holds(bx[2], bx[3]) {
							fail("panel %v outside the figure", bx)
						}
						boxes = []box{bx}
						title = ""
					} else {
						if len(boxes) != 1 || !boxes[0].holds(bx[0], bx[1]) || !boxes[0].holds(bx[2], bx[3]) {
							fail("plot %v outside its panel %v", bx, boxes)
						}
						boxes = []box{boxes[0], bx}
					}
				}
				if at, ok := attr["data-time"]; ok {
					tickAt = at
				}
			}
			stack = append(stack, open{name: tok.Name.Local, boxes: boxes})
			if inDefs > 0 {
				continue
			}
			switch tok.Name.Local {
			case "rect":
				if attr["x"] != "" {
					x, y := num("x"), num("y")
					inside("rect", x, y)
					inside("rect", x+num("width"), y+num("height"))
				}
			case "line":
				inside("line", num("x1"), num("y1"))
				inside("line", num("x2"), num("y2"))
			case "path":
				pts, err := pathPoints(attr["d"])
				if err != nil {
					fail("%v", err)
				}
				for _, p := range pts {
					inside("path", p[0], p[1])
				}
				if attr["class"] == "limit" && len(boxes) == 2 {
					f.limits = append(f.limits, limitPath{title: title, d: attr["d"], plot: boxes[1]})
				}
			case "text":
				tk := tok.Copy()
				text = &tk
			}
		case xml.CharData:
			if text == nil {
				continue
			}
			s := string(tok)
			f.texts[s] = true
			attr := map[string]string{}
			for _, a := range text.Attr {
				attr[a.Name.Local] = a.Value
			}
			x, _ := strconv.ParseFloat(attr["x"], 64)
			y, _ := strconv.ParseFloat(attr["y"], 64)
			size, _ := strconv.ParseFloat(attr["font-size"], 64)
			if attr["font-weight"] == "bold" && title == "" {
				title = s
			}
			w := textWidth(s, size)
			lo, hi := x, x+w
			switch attr["text-anchor"] {
			case "middle":
				lo, hi = x-w/2, x+w/2
			case "end":
				lo, hi = x-w, x
			}
			bs := cur()
			pb := fig
			if len(bs) > 0 {
				pb = bs[0]
			}
			if attr["transform"] != "" {
				lo, hi = x, x // rotated: its anchor only
			}
			if !pb.holds(lo, y-size) || !pb.holds(hi, y) {
				fail("text %q from %g to %g at %g is outside its panel %v", s, lo, hi, y, pb)
			}
			if tickAt != "" {
				f.ticks = append(f.ticks, xtick{at: tickAt, label: s})
			}
		case xml.EndElement:
			if tok.Name.Local == "text" {
				text = nil
			}
			if tok.Name.Local == "defs" {
				inDefs--
			}
			if tok.Name.Local == "g" {
				tickAt = ""
			}
			stack = stack[:len(stack)-1]
		}
	}
	return f
}

// synthetic is a run of the given length from start, in zone, with a
// three-node tree, busy workspaces, a queue, losses and a quota move, drawn
// from a fixed sequence (no randomness).
func synthetic(start time.Time, length time.Duration, limits bool) *sim.Result {
	tree := &quota.Node{Name: "Q", GPUs: quota.Plain(64), Namespaces: []string{"a"}, Children: []*quota.Node{
		{Name: "Q.1", GPUs: quota.Plain(24), Namespaces: []string{"b"}},
		{Name: "Q.2", GPUs: quota.Plain(40), Namespaces: []string{"c"}},
	}}
	r := &sim.Result{Policy: "gputide", Scenario: &sim.Scenario{Name: "t", Zone: start.Location(), Quota: tree},
		Start: start, End: start.Add(length), Capacity: 64, Namespaces: []string{"a", "b", "c"},
		WS:     []*sim.WSStats{{Namespace: "a", Quota: "Q"}, {Namespace: "b", Quota: "Q.1"}, {Namespace: "c", Quota: "Q.2"}},
		Quotas: []*sim.QuotaStats{{Quota: "Q", Nominal: 64}, {Quota: "Q.1", Nominal: 24}, {Quota: "Q.2", Nominal: 40}},
		Moves:  []sim.MoveRecord{{Name: "move", At: start.Add(length / 2)}}}
	if limits {
		r.Policy, r.Limits, r.NSLimits, r.LimitName = "static", []int{64, 20, 28}, []int{16, 20, 28}, "hard limit (static partition)"
	}
	n := 1000
	for i := 0; i <= n; i++ {
		k := (i * 7919) % 97 // a fixed, uneven sequence
		a, b, c := 8+k%17, 10+k%31, k%19
		s := sim.Sample{T: start.Add(length * time.Duration(i) / time.Duration(n)),
			Active: []int{a, b, c}, Borrowed: []int{0, max(0, b-24), 0}, Stopping: k % 3,
			Nominal: []int{64, 24, 40}, NonIdle: []int{a + b/2 + c/2, b / 2, c / 2}, Used: []int{a + b + c, b, c},
			Waiting: []int{0, 3 * k, k}, WaitingIdle: []int{0, 2 * k, k / 2}}
		if i >= n/2 {
			s.Nominal = []int{64, 32, 32}
		}
		r.Samples = append(r.Samples, s)
	}
	for h := time.Duration(0); h < length; h += 37 * time.Minute {
		r.Losses = append(r.Losses, sim.Loss{At: start.Add(h), Rule: []string{"L5.1", "L5.2"}[int(h/time.Minute)%2], GPUh: float64(h/time.Minute%13) / 2,
			Borrowing: int(h/time.Minute)%3 != 0})
	}
	return r
}

// Charts for 1, 2, 7 and 31 days: every mark inside its panel, time ticks
// at whole local hours or days in the scenario's zone and labelled there,
// few enough to read, and the static policy's limit drawn at its partition.
func TestChartGeometry(t *testing.T) {
	la, err := time.LoadLocation("America/Los_Angeles")
	if err != nil {
		t.Skip(err)
	}
	// 31 days from March 1 cross the change to daylight saving time.
	for _, c := range []struct {
		days  int
		start time.Time
	}{{1, time.Date(2026, 12, 7, 0, 0, 0, 0, la)}, {2, time.Date(2026, 12, 7, 0, 0, 0, 0, la)},
		{7, time.Date(2026, 12, 7, 0, 0, 0, 0, la)}, {31, time.Date(2026, 3, 1, 0, 0, 0, 0, la)}} {
		for _, static := range []bool{false, true} {
			r := synthetic(c.start, time.Duration(c.days)*24*time.Hour, static)
			sc := NewScales(r)
			for _, k := range chartKinds {
				name := fmt.Sprintf("%dd-%s-%v", c.days, k.stem, static)
				var b bytes.Buffer
				if err := k.draw(&b, r, sc, name); err != nil {
					t.Fatal(err)
				}
				f := checkSVG(t, name, b.Bytes())
				if want := map[string]int{"occupancy": 3, "queue": 1, "losses": 1}[k.stem]; f.panels != want {
					t.Errorf("%s: %d panels, want %d", name, f.panels, want)
				}
				checkTicks(t, name, f, la, c.days)
				if k.stem == "occupancy" {
					checkLimits(t, name, f, r, sc)
				}
			}
		}
	}
}

// checkTicks: each panel's time ticks are in zone, at whole local hours (at
// midnight for runs of a week and more), labelled as the zone reads them.
func checkTicks(t *testing.T, name string, f figure, zone *time.Location, days int) {
	t.Helper()
	if len(f.ticks) < 2*max(1, f.panels) {
		t.Errorf("%s: %d time ticks", name, len(f.ticks))
		return
	}
	perPanel := len(f.ticks) / f.panels
	if perPanel > 16 {
		t.Errorf("%s: %d time ticks a panel, want at most 16", name, perPanel)
	}
	for _, tk := range f.ticks {
		at, err := time.Parse(time.RFC3339, tk.at)
		if err != nil {
			t.Fatalf("%s: tick %q: %v", name, tk.at, err)
		}
		local := at.In(zone)
		if _, off := local.Zone(); func() int { _, o := at.Zone(); return o }() != off {
			t.Errorf("%s: tick %s is not in the scenario's zone (%s)", name, tk.at, local.Format(time.RFC3339))
		}
		if local.Minute() != 0 || local.Second() != 0 || (days >= 7 && local.Hour() != 0) {
			t.Errorf("%s: tick at %s, want a whole local hour (midnight for %d days)", name, local.Format(time.RFC3339), days)
		}
		wants := []string{local.Format("Mon 2 Jan"), local.Format("15:04"), local.Format("Mon 15:04")}
		if !strings.Contains(strings.Join(wants, "\x00")+"\x00", tk.label+"\x00") {
			t.Errorf("%s: tick at %s labelled %q, want one of %q", name, local.Format(time.RFC3339), tk.label, wants)
		}
	}
}

// checkLimits: each quota panel's limit line is at the quota's nominal
// (stepping at the move) for gputide, at its partition for static.
func checkLimits(t *testing.T, name string, f figure, r *sim.Result, sc Scales) {
	t.Helper()
	if len(f.limits) != 3 { // the capacity on top, and one per quota panel
		t.Fatalf("%s: %d limit lines, want 3", name, len(f.limits))
	}
	for _, l := range f.limits[1:] {
		qi := 1
		if strings.HasPrefix(l.title, "Q.2") {
			qi = 2
		}
		pts, _ := pathPoints(l.d)
		var want []float64
		if r.Limits != nil {
			want = []float64{float64(r.Limits[qi])}
		} else {
			want = []float64{float64(r.Samples[0].Nominal[qi]), float64(r.Samples[len(r.Samples)-1].Nominal[qi])}
		}
		seen := map[float64]bool{}
		for _, p := range pts {
			v := (l.plot[3] - p[1]) / (l.plot[3] - l.plot[1]) * sc.top(sc.GPUs)
			seen[math.Round(v)] = true
		}
		for _, w := range want {
			if !seen[w] {
				t.Errorf("%s: %s's limit line %q never at %g GPUs (%v)", name, l.title, l.d, w, seen)
			}
		}
		if len(seen) != len(want) {
			t.Errorf("%s: %s's limit line at %v, want %v", name, l.title, seen, want)
		}
	}
}

// TestQueueClippedAtASpike (issue 20 item 5): one evening's queue 10x the
// rest clips the queue axis at 1.5 times the next highest day's peak, and
// the chart says so, with the peak and when; every mark stays inside its
// panel. Without the spike the axis is not clipped.
func TestQueueClippedAtASpike(t *testing.T) {
	start := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	r := synthetic(start, 7*24*time.Hour, false)
	plain := NewScales(r)
	if plain.QueuePeak != 0 {
		t.Fatalf("the synthetic run's queue is clipped: %+v", plain)
	}
	before := plain.Queue
	spikeAt := start.Add(3*24*time.Hour + 20*time.Hour) // Thu 20:00
	for i := range r.Samples {
		if s := &r.Samples[i]; !s.T.Before(spikeAt) && s.T.Before(spikeAt.Add(2*time.Hour)) {
			s.Waiting = []int{0, 3000, 0}
			s.WaitingIdle = []int{0, 0, 0}
		}
	}
	sc := NewScales(r)
	if sc.QueuePeak != 3000 || sc.Queue != math.Ceil(1.5*before) || sc.QueuePeakAt.Before(spikeAt) || !sc.QueuePeakAt.Before(spikeAt.Add(2*time.Hour)) {
		t.Errorf("scales %+v, want the queue clipped at %v with its peak 3000 on Thu", sc, math.Ceil(1.5*before))
	}
	var b bytes.Buffer
	if err := Queue(&b, r, sc, "q"); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("axis clipped at %.0f: the queue reached 3000 GPUs at Thu 12-10 2", sc.top(sc.Queue))
	if !strings.Contains(b.String(), want) {
		t.Errorf("queue chart lacks %q", want)
	}
	checkSVG(t, "clipped queue", b.Bytes())
}
