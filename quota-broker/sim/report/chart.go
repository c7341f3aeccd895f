package report

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/sim"
)

// Sizes of the figures, in SVG user units.
const (
	figWidth    = 1200.0
	stackHeight = 440.0
	panelHeight = 270.0
	queueHeight = 380.0
	lossHeight  = 340.0
)

// Scales are the y ranges shared by the charts of one report, so that the
// charts of compared runs can be set side by side: GPUs in use span the
// cluster's GPUs, the queue and the work lost their largest value over all
// the runs.
type Scales struct {
	GPUs  float64 // the cluster's GPUs
	Queue float64 // GPUs waiting: the queue axis's top (clipped, see QueuePeak)
	Loss  float64 // GPU-hours lost per hour
	// QueuePeak is the largest queue when the queue axis is clipped (one
	// day's peak more than queueClipFactor times every other day's: the
	// rest would be a flat line under it), at QueuePeakAt; 0 when not.
	QueuePeak   float64
	QueuePeakAt time.Time
}

// queueClipFactor: the queue axis is clipped when one day's peak is more
// than this many times the next highest day's (issue 20: one evening's
// queue 10x the rest); it then spans 1.5 times that next highest peak.
const queueClipFactor = 3

// NewScales measures the shared scales of rs.
func NewScales(rs ...*sim.Result) Scales {
	var s Scales
	peaks := map[string]float64{} // per local day, over all runs
	var peakAt time.Time
	for _, r := range rs {
		s.GPUs = max(s.GPUs, float64(r.Capacity))
		zone := time.UTC
		if r.Scenario != nil && r.Scenario.Zone != nil {
			zone = r.Scenario.Zone
		}
		for _, x := range r.Samples {
			n := 0
			for _, w := range x.Waiting {
				n += w
			}
			if float64(n) > s.Queue {
				s.Queue, peakAt = float64(n), x.T
			}
			day := x.T.In(zone).Format("2006-01-02")
			peaks[day] = max(peaks[day], float64(n))
		}
		for _, b := range lossBins(r) {
			t := 0.0
			for _, v := range b {
				t += v
			}
			s.Loss = max(s.Loss, t)
		}
	}
	s.GPUs = max(s.GPUs, 1)
	if len(peaks) >= 2 {
		all := slices.Sorted(maps.Values(peaks))
		next := max(all[len(all)-2], 8)
		if s.Queue > queueClipFactor*next {
			s.QueuePeak, s.QueuePeakAt = s.Queue, peakAt
			s.Queue = math.Ceil(1.5 * next)
		}
	}
	s.Queue = max(s.Queue, 8)
	s.Loss = max(s.Loss, 1)
	return s
}

func (s Scales) top(v float64) float64 { return v * 1.06 }

// workspaceColour is a workspace's hue (Okabe-Ito).
func workspaceColour(i int) colour { return palette[i%len(palette)] }

// nsLimit is the GPUs namespace i is entitled to before it borrows, for
// the policies that cap namespaces (nil NSLimits: gputide's Sample.Borrowed
// is the tree's L4 figure).
func borrowedAt(r *sim.Result, s sim.Sample, i int) int {
	if r.NSLimits == nil {
		return s.Borrowed[i]
	}
	return max(0, s.Active[i]-r.NSLimits[i])
}

// Occupancy draws the GPUs in use over time as one SVG figure. On top, the
// whole cluster: stacked bands per workspace, in quota (solid) and borrowed
// (its light tint, hatched: DESIGN L4, or above the policy's share), the
// GPUs of stopping allocations (kill_timeout) on top of them, the cluster's
// capacity and the quota moves. Below it, one panel per quota node under
// the root: the node's subtree use (in quota; borrowed) against the limit
// the policy enforces: the tree's nominal as a dashed step line for
// gputide, the partition or nominal quota of the shares otherwise. All
// panels share the scale sc.GPUs.
func Occupancy(w io.Writer, r *sim.Result, sc Scales, id string) error {
	if len(r.Samples) < 2 {
		return fmt.Errorf("too few samples to draw (%d)", len(r.Samples))
	}
	qs := panelQuotas(r)
	cols := min(len(qs), 3)
	if len(qs) == 4 {
		cols = 2
	}
	rows := 0
	if cols > 0 {
		rows = (len(qs) + cols - 1) / cols
	}
	d := newSVG(id, figWidth, stackHeight+float64(rows)*panelHeight)
	stackPanel(d, r, sc)
	for k, qi := range qs {
		pw := figWidth / float64(cols)
		quotaPanel(d, r, qi, float64(k%cols)*pw, stackHeight+float64(k/cols)*panelHeight, pw, panelHeight, sc)
	}
	_, err := w.Write(d.bytes())
	return err
}

// stackPanel is the cluster-wide chart: GPUs in use, stacked by workspace.
func stackPanel(d *svgDoc, r *sim.Result, sc Scales) {
	n := len(r.Samples)
	ts := times(r)
	type layer struct {
		name string
		fill string
		vals []float64
	}
	var layers []layer
	for wi, ns := range r.Namespaces {
		c := workspaceColour(wi)
		in, br := make([]float64, n), make([]float64, n)
		borrowed := false
		for i, s := range r.Samples {
			b := borrowedAt(r, s, wi)
			in[i] = float64(s.Active[wi] - b)
			br[i] = float64(b)
			borrowed = borrowed || b > 0
		}
		name := ns
		if q := r.WS[wi].Quota; q != "" {
			name = fmt.Sprintf("%s (%s)", ns, q)
		}
		layers = append(layers, layer{name: name, fill: c.String(), vals: in})
		if borrowed {
			layers = append(layers, layer{name: ns + " borrowed", fill: d.hatch(c), vals: br})
		}
	}
	stop := make([]float64, n)
	for i, s := range r.Samples {
		stop[i] = float64(s.Stopping)
	}
	layers = append(layers, layer{name: "stopping", fill: greyC.String(), vals: stop})
	var keys []key
	for _, l := range layers {
		keys = append(keys, key{name: l.name, fill: l.fill})
	}
	capName := "capacity"
	root := rootIndex(r)
	rootLine := false
	if root >= 0 && r.Limits == nil {
		rootLine = len(r.Quotas) == 1
		for _, s := range r.Samples {
			rootLine = rootLine || s.Nominal[root] != r.Capacity
		}
		if !rootLine {
			capName = fmt.Sprintf("capacity = %s nominal", r.Quotas[root].Quota)
		}
	}
	keys = append(keys, key{name: capName, line: black})
	if rootLine {
		keys = append(keys, key{name: r.Quotas[root].Quota + " nominal", line: black, dash: "7 4"})
	}
	moves := movesIn(r)
	if len(moves) > 0 {
		keys = append(keys, key{name: moveName(r, moves), line: moveGrey, dash: "2 3"})
	}
	title := fmt.Sprintf("%s, policy %s: GPUs in use (bands bottom up):", r.Scenario.Name, r.Policy)
	p := newPanel(d, 0, 0, figWidth, stackHeight, title, keys, r.Start, r.End, r.Scenario.Zone, sc.top(sc.GPUs), "GPUs")
	lo := make([]float64, n)
	for _, l := range layers {
		hi := make([]float64, n)
		for i := range hi {
			hi[i] = lo[i] + l.vals[i]
		}
		p.band(ts, lo, hi, l.fill)
		lo = hi
	}
	p.step(ts, constant(n, float64(r.Capacity)), black, 1.5, "")
	if rootLine {
		ys := make([]float64, n)
		for i, s := range r.Samples {
			ys[i] = float64(s.Nominal[root])
		}
		p.step(ts, ys, black, 2, "7 4")
	}
	for _, m := range moves {
		p.vline(m.At, moveGrey, "2 3")
	}
	p.close()
}

// quotaPanel is the chart of quota node qi: its subtree's GPUs in use,
// split as DESIGN L4 does (borrowed: used - max(limit, non-idle)), against
// the limit the policy enforces.
func quotaPanel(d *svgDoc, r *sim.Result, qi int, x, y, w, h float64, sc Scales) {
	n := len(r.Samples)
	ts := times(r)
	q := r.Quotas[qi]
	c := quotaColour(r, q.Quota)
	in, used, limit := make([]float64, n), make([]float64, n), make([]float64, n)
	borrowed := false
	for i, s := range r.Samples {
		u, ni, lim := s.Used[qi], s.NonIdle[qi], s.Nominal[qi]
		if r.Limits != nil {
			lim, ni = r.Limits[qi], 0
		}
		used[i] = float64(u)
		in[i] = float64(min(u, max(lim, ni)))
		limit[i] = float64(lim)
		borrowed = borrowed || used[i] > in[i]
	}
	limName, dash := "nominal", "7 4"
	if r.Limits != nil {
		limName, dash = r.LimitName, "3 2"
	}
	keys := []key{{name: "in quota", fill: c.String()}}
	if borrowed {
		keys = append(keys, key{name: "borrowed", fill: d.hatch(c)})
	}
	keys = append(keys, key{name: limName, line: black, dash: dash})
	moves := movesIn(r)
	if len(moves) > 0 {
		keys = append(keys, key{name: moveName(r, moves), line: moveGrey, dash: "2 3"})
	}
	title := q.Quota
	if ns := quotaNamespaces(r, q.Quota); len(ns) > 0 {
		title += " (" + strings.Join(ns, ", ") + ")"
	}
	p := newPanel(d, x, y, w, h, title+":", keys, r.Start, r.End, r.Scenario.Zone, sc.top(sc.GPUs), "GPUs")
	zero := make([]float64, n)
	p.band(ts, zero, in, c.String())
	if borrowed {
		p.band(ts, in, used, d.hatch(c))
	}
	p.step(ts, limit, black, 2, dash)
	for _, m := range moves {
		p.vline(m.At, moveGrey, "2 3")
	}
	p.close()
}

// Queue draws the GPUs waiting over time, stacked by workspace: non-idle
// jobs solid, idle jobs in the hatched tint.
func Queue(w io.Writer, r *sim.Result, sc Scales, id string) error {
	if len(r.Samples) < 2 {
		return fmt.Errorf("too few samples to draw (%d)", len(r.Samples))
	}
	n := len(r.Samples)
	ts := times(r)
	d := newSVG(id, figWidth, queueHeight)
	type layer struct {
		name, fill string
		vals       []float64
	}
	var layers []layer
	for wi, ns := range r.Namespaces {
		c := workspaceColour(wi)
		ni, idl := make([]float64, n), make([]float64, n)
		anyNI, anyID := false, false
		for i, s := range r.Samples {
			ni[i] = float64(s.Waiting[wi] - s.WaitingIdle[wi])
			idl[i] = float64(s.WaitingIdle[wi])
			anyNI, anyID = anyNI || ni[i] > 0, anyID || idl[i] > 0
		}
		if anyNI {
			layers = append(layers, layer{ns + " non-idle", c.String(), ni})
		}
		if anyID {
			layers = append(layers, layer{ns + " idle", d.hatch(c), idl})
		}
	}
	var keys []key
	for _, l := range layers {
		keys = append(keys, key{name: l.name, fill: l.fill})
	}
	if len(keys) == 0 {
		keys = append(keys, key{name: "no job waited", line: greyC})
	}
	title := fmt.Sprintf("%s, policy %s: GPUs waiting (the queue, bands bottom up):", r.Scenario.Name, r.Policy)
	if sc.QueuePeak > 0 {
		zone := r.Scenario.Zone
		if zone == nil {
			zone = time.UTC
		}
		title = fmt.Sprintf("%s, policy %s: GPUs waiting; axis clipped at %.0f: the queue reached %.0f GPUs at %s, drawn off the top:",
			r.Scenario.Name, r.Policy, sc.top(sc.Queue), sc.QueuePeak, sc.QueuePeakAt.In(zone).Format("Mon 01-02 15:04"))
	}
	top := sc.top(sc.Queue)
	p := newPanel(d, 0, 0, figWidth, queueHeight, title, keys, r.Start, r.End, r.Scenario.Zone, top, "GPUs asked by pending allocations")
	lo := make([]float64, n)
	for _, l := range layers {
		hi := make([]float64, n)
		for i := range hi {
			hi[i] = lo[i] + l.vals[i]
		}
		p.band(ts, clipTo(lo, top), clipTo(hi, top), l.fill)
		lo = hi
	}
	p.close()
	_, err := w.Write(d.bytes())
	return err
}

// clipTo returns vs with each value at most top (a clipped axis).
func clipTo(vs []float64, top float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = min(v, top)
	}
	return out
}

// lossRules are the rules that lose work, in a fixed order for colours.
func lossRules(r *sim.Result) []string {
	var out []string
	for _, l := range r.Losses {
		if !slices.Contains(out, l.Rule) {
			out = append(out, l.Rule)
		}
	}
	slices.Sort(out)
	return out
}

// lossBins are the GPU-hours lost in each hour of the run (from its
// start), per rule and victim kind: index 2*k for rule k's victims inside
// their quota, 2*k+1 for its borrowing (idle) victims.
func lossBins(r *sim.Result) [][]float64 {
	rules := lossRules(r)
	nb := int((r.End.Sub(r.Start) + time.Hour - 1) / time.Hour)
	bins := make([][]float64, max(nb, 1))
	for i := range bins {
		bins[i] = make([]float64, 2*len(rules))
	}
	for _, l := range r.Losses {
		b := min(len(bins)-1, max(0, int(l.At.Sub(r.Start)/time.Hour)))
		k := 2 * slices.Index(rules, l.Rule)
		if l.Borrowing {
			k++
		}
		bins[b][k] += l.GPUh
	}
	return bins
}

// Losses draws the GPU-hours of work lost to preemption in each hour, by
// rule: victims inside their quota solid, borrowing (idle) victims in the
// hatched tint; the night lending and the morning drain show as bars.
func Losses(w io.Writer, r *sim.Result, sc Scales, id string) error {
	d := newSVG(id, figWidth, lossHeight)
	rules := lossRules(r)
	bins := lossBins(r)
	var keys []key
	for k, rule := range rules {
		c := palette[(k+4)%len(palette)]
		var in, br bool
		for _, b := range bins {
			in, br = in || b[2*k] > 0, br || b[2*k+1] > 0
		}
		if in {
			keys = append(keys, key{name: rule + " inside quota", fill: c.String()})
		}
		if br {
			keys = append(keys, key{name: rule + " borrowing (idle)", fill: d.hatch(c)})
		}
	}
	if len(keys) == 0 {
		keys = append(keys, key{name: "no work lost", line: greyC})
	}
	p := newPanel(d, 0, 0, figWidth, lossHeight, fmt.Sprintf("%s, policy %s: work lost to preemption per hour, by rule:", r.Scenario.Name, r.Policy),
		keys, r.Start, r.End, r.Scenario.Zone, sc.top(sc.Loss), "GPU-hours lost per hour")
	for b, vals := range bins {
		t0 := r.Start.Add(time.Duration(b) * time.Hour)
		t1 := minTime(t0.Add(time.Hour), r.End)
		x0, x1 := p.X(t0), p.X(t1)
		acc := 0.0
		for k, v := range vals {
			if v <= 0 {
				continue
			}
			c := palette[(k/2+4)%len(palette)]
			fill := c.String()
			if k%2 == 1 {
				fill = d.hatch(c)
			}
			ytop, ybot := p.Y(acc+v), p.Y(acc)
			d.rect(x0, ytop, max(0.3, x1-x0-0.3), ybot-ytop, fill)
			acc += v
		}
	}
	p.close()
	_, err := w.Write(d.bytes())
	return err
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
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

// quotaColour is the hue of the node's first workspace, or of the first
// workspace in its subtree, as in the main chart.
func quotaColour(r *sim.Result, name string) colour {
	idx := map[string]int{}
	for i, ns := range r.Namespaces {
		idx[ns] = i
	}
	for _, ns := range quotaNamespaces(r, name) {
		return workspaceColour(idx[ns])
	}
	c, found := greyC, false
	if r.Scenario != nil && r.Scenario.Quota != nil {
		if node := r.Scenario.Quota.Find(name); node != nil {
			node.Walk(func(d *quota.Node) {
				for _, ns := range d.Namespaces {
					if i, ok := idx[ns]; ok && !found {
						c, found = workspaceColour(i), true
					}
				}
			})
		}
	}
	return c
}

// movesIn are the quota moves within the run; none for a policy with
// limits of its own (the moves do not change them).
func movesIn(r *sim.Result) []sim.MoveRecord {
	if r.Limits != nil {
		return nil
	}
	var out []sim.MoveRecord
	for _, m := range r.Moves {
		if !m.At.Before(r.Start) && !m.At.After(r.End) {
			out = append(out, m)
		}
	}
	return out
}

// moveName is the legend label of the moves, with their local times.
func moveName(r *sim.Result, ms []sim.MoveRecord) string {
	var at []string
	for _, m := range ms {
		at = append(at, m.At.In(r.Scenario.Zone).Format("Mon 15:04"))
	}
	name := "quota move"
	if len(at) > 1 {
		name += "s"
	}
	return fmt.Sprintf("%s (%s)", name, strings.Join(at, ", "))
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
