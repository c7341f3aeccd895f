package api

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// uiTimeFormat is how the page writes instants (UTC).
const uiTimeFormat = "2006-01-02 15:04 UTC"

// Geometry of the page's SVG drawings, in CSS pixels.
const (
	uiBarWidth      = 240 // a quota's bars: the nominal GPUs span this
	uiBarHeight     = 7   // one figure's bar
	uiTimelineLabel = 220 // the timeline's label column
	uiTimelineDay   = 60  // one day of the timeline
	uiTimelineRow   = 22  // one booking of the timeline
	uiTimelineHead  = 24  // the day labels
)

// uiView is the data of page.html.
type uiView struct {
	Who         string // accessor ID of the session, "admin-token" or "open-reads"
	Now         string
	StateAge    string
	Error       string // the state could not be read (no state, stale): no figures
	PreemptErr  string // the preemption history could not be read
	Quotas      []uiQuota
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
}

// uiBar is one figure drawn against the node's nominal GPUs.
type uiBar struct {
	Label string // non-idle, borrowed, debt, displaced
	Class string // CSS class (its colour)
	GPUs  int
	Y     int
	Width int // pixels, at most uiBarWidth
}

// uiTimeline is the SVG of the bookings of the next 14 days.
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
func (s *Server) uiView(ctx context.Context, c *caller, who string) (uiView, int) {
	now := s.cfg.Now()
	v := uiView{Who: who, Now: now.UTC().Format(uiTimeFormat)}
	st, fresh, err := s.current()
	if err != nil {
		status, body := statusOfRead(err)
		v.Error = body.Error
		return v, status
	}
	v.StateAge = time.Duration(fresh.StateAgeSeconds * float64(time.Second)).Round(time.Second).String()
	v.Quotas = uiQuotas(QuotaFigures(st.Snapshot, st.Plan, now))
	v.Queue = queueOf(st, "", c, now)
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
	for _, e := range s.reservationsOf(g.Reservations, "", c, now) {
		switch {
		case e.Start == nil:
			v.Hidden = append(v.Hidden, e)
		case e.End.After(now) && e.Start.Before(now.Add(uiTimelineSpan)):
			shown = append(shown, e)
		}
	}
	v.Timeline = uiTimelineOf(shown, now)
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
		u := uiQuota{Quota: q, Indent: 16 * d}
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

// uiTimelineOf places bookings (readable, overlapping [now, now+14 d)) on
// a 14-day axis starting at now (UTC midnights marked), one row each, by
// start; a booking's box is clipped to the axis.
func uiTimelineOf(list []ReservationEntry, now time.Time) uiTimeline {
	list = slices.Clone(list)
	slices.SortStableFunc(list, func(a, b ReservationEntry) int { return a.Start.Compare(*b.Start) })
	days := int(uiTimelineSpan / (24 * time.Hour))
	t := uiTimeline{Width: uiTimelineLabel + days*uiTimelineDay, Height: uiTimelineHead + max(len(list), 1)*uiTimelineRow}
	x := func(at time.Time) int {
		f := float64(at.Sub(now)) / float64(uiTimelineSpan)
		return uiTimelineLabel + int(min(max(f, 0), 1)*float64(days*uiTimelineDay))
	}
	// A line at now, then one at each UTC midnight before the end.
	t.Days = append(t.Days, uiDay{X: uiTimelineLabel, Label: "now"})
	for d := now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour); d.Before(now.Add(uiTimelineSpan)); d = d.Add(24 * time.Hour) {
		t.Days = append(t.Days, uiDay{X: x(d), Label: d.Format("Mon 02")})
	}
	for i, e := range list {
		x0, x1 := x(*e.Start), x(*e.End)
		t.Rows = append(t.Rows, uiBooking{ReservationEntry: e, Y: uiTimelineHead + i*uiTimelineRow,
			X: x0, Width: max(x1-x0, 2),
			Label: e.ID + " · " + e.Namespace + " · " + strconv.Itoa(e.GPUs) + " GPUs",
			Span:  e.Start.UTC().Format(uiTimeFormat) + " to " + e.End.UTC().Format(uiTimeFormat)})
	}
	return t
}
