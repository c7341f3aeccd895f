package api

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// uiTimeFormat is how the page writes instants (UTC).
const uiTimeFormat = "2006-01-02 15:04 UTC"

// Geometry of the page's SVG drawings, in CSS pixels.
const (
	uiBarWidth      = 240 // a quota's bars: the nominal GPUs span this
	uiBarHeight     = 7   // one figure's bar
	uiTimelineLabel = 220 // the timeline's label column
	uiTimelineAxis  = 960 // the timeline's time axis
	uiTimelineRow   = 22  // one booking of the timeline
	uiTimelineHead  = 24  // the day labels
	// uiLabelChars: a booking's label is cut to this many characters
	// (11 px text, about 6.5 px a character) so that it ends before the
	// axis; its whole text is the box's tooltip.
	uiLabelChars = 32
)

// uiSpan is one zoom of the bookings timeline: ?span=<Param>.
type uiSpan struct {
	Param string        // "48h" (the default), "8w"
	Title string        // "next 48 hours"
	Span  time.Duration // the axis
	Tick  time.Duration // a grid line at each multiple (UTC)
	Label string        // the grid lines' time format
}

// uiSpans are the timeline's zooms, the default first (issue 20: the next
// 48 hours, the 8 weeks a click away).
var uiSpans = []uiSpan{
	{Param: "48h", Title: "next 48 hours", Span: 48 * time.Hour, Tick: 6 * time.Hour, Label: "Mon 15:04"},
	{Param: "8w", Title: "next 8 weeks", Span: 8 * 7 * 24 * time.Hour, Tick: 7 * 24 * time.Hour, Label: "Mon 02 Jan"},
}

// uiSpanOf is the zoom ?span=param names, else the default.
func uiSpanOf(param string) (uiSpan, uiSpan) {
	for i, z := range uiSpans {
		if z.Param == param {
			return z, uiSpans[(i+1)%len(uiSpans)]
		}
	}
	return uiSpans[0], uiSpans[1]
}

// uiView is the data of page.html.
type uiView struct {
	Who         string // the token's name, else its accessor ID, "admin-token" or "open-reads"
	Refresh     int    // seconds between reloads (meta refresh)
	Now         string
	Warnings    []WarningEntry // the last plan's, as the caller may see them
	Workspaces  []uiWorkspace  // running allocations per workspace
	Zoom, Other uiSpan         // the timeline's zoom, and the one a click away
	StateAge    string
	Error       string    // the state could not be read (no state, stale): no figures
	PreemptErr  string    // the preemption history could not be read
	Quotas      []uiQuota // one row per quota node and flavor (DESIGN L13)
	// Flavored is true when the tree declares several flavors: the tree
	// table then has a flavor column and its rows' IDs name the flavor
	// (quota-Quota1.1-h100); a one-flavor tree's table is as before.
	Flavored bool
	// Ungoverned are the devices of no flavor, per node (DESIGN L13).
	Ungoverned  []Ungoverned
	Queue       []QueueEntry
	Preemptions []PreemptionEntry // last 24 h, newest first
	PreemptMore int               // stops left off past uiPreemptionRows
	BookingsErr string
	Timeline    uiTimeline
	Hidden      []ReservationEntry // bookings of namespaces without read-job (no times)
}

// uiQuota is one row of the tree: the API's figures, its depth and bars.
type uiQuota struct {
	Quota
	Indent int // pixels: 16 per level below the root
	Bars   []uiBar
	Height int // of the bars' SVG
	// The texts of DESIGN L14's figures, as quota status writes them
	// (fairtext.go).
	WeightText, FairShareText, BorrowedShareText, EvictedText string
}

// uiBar is one figure drawn against the node's nominal GPUs.
type uiBar struct {
	Label string // non-idle, borrowed, debt, displaced
	Class string // CSS class (its colour)
	GPUs  int
	Y     int
	Width int // pixels, at most uiBarWidth
}

// uiWorkspace is one workspace's running allocations with the
// rule-relevant facts: its quota's borrowed, debt and displaced GPUs, and
// per allocation idle (L4), booked (L10), being stopped (and for whom),
// the plan's stop and its age. Without read-job only the namespace and its
// GPUs show.
type uiWorkspace struct {
	Namespace string
	Quota     string
	Hidden    bool
	GPUs      int
	Borrowed  int
	Debt      int
	Displaced int
	Allocs    []uiAlloc
}

type uiAlloc struct {
	ID, Job, Group, Node string
	GPUs                 int
	Idle                 bool
	Reservation          string
	Stopping             string // already being stopped for
	Stop                 string // the last plan's stop: rule and reason
	Age                  string
}

// uiWorkspacesOf groups st's allocations by namespace (sorted), oldest
// first within one. A workspace's borrowed, debt and displaced GPUs are
// its quota node's, summed over the flavors (the tree table shows each
// flavor apart).
func uiWorkspacesOf(st BrokerState, quotas []Quota, c *caller, now time.Time) []uiWorkspace {
	nsNode := quota.Namespaces(st.Snapshot.Quota)
	fig := map[string]Quota{}
	for _, q := range quotas {
		f := fig[q.Name]
		f.Name, f.BorrowedGPUs, f.DebtGPUs, f.DisplacedGPUs = q.Name, f.BorrowedGPUs+q.BorrowedGPUs, f.DebtGPUs+q.DebtGPUs, f.DisplacedGPUs+q.DisplacedGPUs
		fig[q.Name] = f
	}
	stops := map[string]plan.Action{}
	if st.Plan != nil {
		for _, a := range st.Plan.Actions {
			if a.Action == plan.ActionStop {
				stops[a.Alloc] = a
			}
		}
	}
	by := map[string]*uiWorkspace{}
	var names []string
	allocs := slices.Clone(st.Snapshot.Allocations)
	slices.SortStableFunc(allocs, func(a, b plan.Allocation) int { return a.StartedAt.Compare(b.StartedAt) })
	for _, a := range allocs {
		w := by[a.Namespace]
		if w == nil {
			q := fig[nsNode[a.Namespace]]
			w = &uiWorkspace{Namespace: a.Namespace, Quota: q.Name, Hidden: !c.canRead(a.Namespace), Borrowed: q.BorrowedGPUs, Debt: q.DebtGPUs, Displaced: q.DisplacedGPUs}
			by[a.Namespace] = w
			names = append(names, a.Namespace)
		}
		w.GPUs += a.GPUs()
		if w.Hidden {
			continue
		}
		e := uiAlloc{ID: shortAlloc(a.ID), Job: a.Job, Group: a.Group, Node: a.Node, GPUs: a.GPUs(), Idle: a.Idle, Reservation: a.Reservation}
		switch {
		case a.StoppingForReservation != "":
			e.Stopping = "reservation " + reservationFor(st.Snapshot, a.StoppingForReservation, c)
		case !a.StoppingFor.IsZero():
			e.Stopping = claimantFor(a.StoppingFor.String(), c)
		}
		if s, ok := stops[a.ID]; ok {
			e.Stop = string(s.Rule) + ": " + reasonFor(st.Snapshot, s.Reason, c)
		}
		if !a.StartedAt.IsZero() {
			e.Age = now.Sub(a.StartedAt).Round(time.Minute).String()
		}
		w.Allocs = append(w.Allocs, e)
	}
	slices.Sort(names)
	out := make([]uiWorkspace, 0, len(names))
	for _, n := range names {
		out = append(out, *by[n])
	}
	return out
}

// shortAlloc is an allocation ID's first 8 characters, as nomad shows it.
func shortAlloc(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// uiTimeline is the SVG of the bookings of the zoom's span.
type uiTimeline struct {
	Width, Height int
	Days          []uiDay
	Rows          []uiBooking
}

// uiDay is one line of the timeline: now, or a UTC midnight.
type uiDay struct {
	X     int
	Label string // "now", "Mon 07"
}

type uiBooking struct {
	ReservationEntry
	Y, X, Width int
	Label       string
	Span        string // start to end, UTC
}

// uiView gathers the page's data for c from the API's own functions,
// redacted as the JSON reads are; the status is 503 when the state is
// missing or stale (L12), else 200.
func (s *Server) uiView(ctx context.Context, c *caller, who, span string) (uiView, int) {
	now := s.cfg.Now()
	v := uiView{Who: who, Refresh: uiRefreshSeconds, Now: now.UTC().Format(uiTimeFormat)}
	v.Zoom, v.Other = uiSpanOf(span)
	st, fresh, err := s.current()
	if err != nil {
		status, body := statusOfRead(err)
		v.Error = body.Error
		return v, status
	}
	v.StateAge = time.Duration(fresh.StateAgeSeconds * float64(time.Second)).Round(time.Second).String()
	figures := QuotaFigures(st.Snapshot, st.Plan, now)
	v.Quotas = uiQuotas(figures)
	v.Flavored = len(quota.TreeFlavors(st.Snapshot.Quota)) > 1
	v.Ungoverned = UngovernedDevices(st.Snapshot)
	v.Queue = queueOf(st, "", c, now)
	v.Warnings = warningsOf(st.Plan, c, func(plan.Warning) bool { return true })
	v.Workspaces = uiWorkspacesOf(st, figures, c, now)
	if list, err := s.cfg.Preemptions(ctx); err != nil {
		_, body := statusOfRead(err)
		v.PreemptErr = body.Error
	} else {
		p := preemptionsOf(list, "", now.Add(-uiPreemptionWindow), c)
		slices.Reverse(p)
		if len(p) > uiPreemptionRows {
			v.PreemptMore = len(p) - uiPreemptionRows
			p = p[:uiPreemptionRows]
		}
		v.Preemptions = p
	}
	g, err := s.cfg.Store.ReadGuarded(ctx)
	if err != nil {
		_, body := statusOfRead(err)
		v.BookingsErr = body.Error
		return v, http.StatusOK
	}
	var shown []ReservationEntry
	for _, e := range s.reservationsOf(g, "", c, now) {
		switch {
		case e.Start == nil:
			v.Hidden = append(v.Hidden, e)
		case e.End.After(now) && e.Start.Before(now.Add(v.Zoom.Span)):
			shown = append(shown, e)
		}
	}
	v.Timeline = uiTimelineOf(shown, now, v.Zoom)
	return v, http.StatusOK
}

// uiQuotas adds depth and bars to the API's quota figures (parents come
// before their children).
func uiQuotas(qs []Quota) []uiQuota {
	depth := map[string]int{}
	out := make([]uiQuota, 0, len(qs))
	for _, q := range qs {
		d := 0
		if q.Parent != "" {
			d = depth[q.Parent] + 1
		}
		depth[q.Name] = d
		figures := []struct {
			label, class string
			gpus         int
		}{
			{"non-idle", "nonidle", q.NonidleGPUs},
			{"borrowed", "borrowed", q.BorrowedGPUs},
			{"debt", "debt", q.DebtGPUs},
			{"displaced", "displaced", q.DisplacedGPUs},
		}
		u := uiQuota{Quota: q, Indent: 16 * d, WeightText: WeightText(q), FairShareText: FairShareText(q),
			BorrowedShareText: BorrowedShareText(q), EvictedText: EvictedText(q)}
		for i, f := range figures {
			u.Bars = append(u.Bars, uiBar{Label: f.label, Class: f.class, GPUs: f.gpus,
				Y: i * (uiBarHeight + 1), Width: barWidth(f.gpus, q.NominalGPUs)})
		}
		u.Height = len(figures) * (uiBarHeight + 1)
		out = append(out, u)
	}
	return out
}

// barWidth scales gpus to uiBarWidth pixels for nominal GPUs, capped at
// the full width (a node with 0 nominal GPUs draws any use in full).
func barWidth(gpus, nominal int) int {
	switch {
	case gpus <= 0:
		return 0
	case nominal <= 0 || gpus >= nominal:
		return uiBarWidth
	}
	return max(gpus*uiBarWidth/nominal, 1)
}

// uiTimelineOf places bookings (readable, overlapping [now, now+span)) on
// an axis of uiTimelineAxis pixels starting at now (a grid line at each
// UTC multiple of the zoom's tick), one row each, by start; a booking's
// box is clipped to the axis, its label cut to uiLabelChars.
func uiTimelineOf(list []ReservationEntry, now time.Time, z uiSpan) uiTimeline {
	list = slices.Clone(list)
	slices.SortStableFunc(list, func(a, b ReservationEntry) int { return a.Start.Compare(*b.Start) })
	t := uiTimeline{Width: uiTimelineLabel + uiTimelineAxis, Height: uiTimelineHead + max(len(list), 1)*uiTimelineRow}
	x := func(at time.Time) int {
		f := float64(at.Sub(now)) / float64(z.Span)
		return uiTimelineLabel + int(min(max(f, 0), 1)*uiTimelineAxis)
	}
	// A line at now, then one at each tick before the end; a tick too
	// close to now, or to the end, for its label is left out.
	t.Days = append(t.Days, uiDay{X: uiTimelineLabel, Label: "now"})
	first := now.UTC().Truncate(z.Tick).Add(z.Tick)
	if z.Tick >= 7*24*time.Hour { // weeks start on Monday
		d := now.UTC().Truncate(24 * time.Hour)
		first = d.AddDate(0, 0, (8-int(d.Weekday()))%7)
		if !first.After(now) {
			first = first.AddDate(0, 0, 7)
		}
	}
	for d := first; d.Before(now.Add(z.Span)); d = d.Add(z.Tick) {
		if x(d)-uiTimelineLabel < 40 || uiTimelineLabel+uiTimelineAxis-x(d) < 60 {
			continue
		}
		t.Days = append(t.Days, uiDay{X: x(d), Label: d.Format(z.Label)})
	}
	for i, e := range list {
		x0, x1 := x(*e.Start), x(*e.End)
		label := e.ID + " · " + e.Namespace + " · " + strconv.Itoa(e.GPUs) + " GPUs"
		if r := []rune(label); len(r) > uiLabelChars {
			label = strings.TrimRight(string(r[:uiLabelChars-1]), " ·") + "…"
		}
		t.Rows = append(t.Rows, uiBooking{ReservationEntry: e, Y: uiTimelineHead + i*uiTimelineRow,
			X: x0, Width: max(x1-x0, 2), Label: label,
			Span: e.Start.UTC().Format(uiTimeFormat) + " to " + e.End.UTC().Format(uiTimeFormat)})
	}
	return t
}
