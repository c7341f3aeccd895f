package build

import (
	"strings"

	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
)

// A build makes a view of each of 10,000 governed jobs, and in a cycle
// with one change all but one are the views of the cycle before. The
// build that owns a Memo (Memo.begin) keeps each view it made on the
// job's spec entry with what it was made of, and reuses it when a later
// build makes the same (issue 18: a cycle with one change costs the
// change, not the cluster). A view is kept only for a job placed in its
// pool, not a direct registration, naming no reservation and with no
// queued allocation: its view then depends on its spec, its live count,
// its record and whether it was accepted (viewKey), and on the admit
// pools and Nomad's node pools (viewContext); it is not pending. The
// others (waiting in the holding pool, pending, checked against the
// bookings and the time) are made again each build. Views are read only
// once built: a view reused is the very view a build before returned.

// viewContext is what every kept view depends on besides its own key: the
// admit pools and Nomad's node pools (jobmeta.CheckAdmitPool).
type viewContext struct {
	admitPools string // Input.AdmitPools, joined
	pools      uint64 // watch.Generations.Pools
}

// viewKey is what a kept view was made of besides its spec (the spec
// entry's) and its context.
type viewKey struct {
	epoch    uint64 // the Memo's views epoch (viewContext) it was made under
	live     int
	rec      JobRecord
	accepted bool
}

// contextOf is the view context of a build of s with in.
func contextOf(s watch.View, in Input) viewContext {
	return viewContext{admitPools: strings.Join(in.AdmitPools, "\x00"), pools: s.Gen.Pools}
}

// keptView returns the view e kept when it was made of key and may be
// reused: by the owning build, of a job not queued.
func keptView(e *specEntry, key viewKey, owner, queued bool) *JobView {
	if !owner || queued || e.view == nil || e.made != key {
		return nil
	}
	return e.view
}

// keepView keeps v, made of key, on e when the owning build made it and
// it can be reused (see above); else e keeps none.
func keepView(e *specEntry, v *JobView, key viewKey, owner bool) {
	if !owner {
		return
	}
	if v.Holding || v.Direct || v.Pending > 0 || v.Options.Reservation != "" {
		e.view = nil
		return
	}
	e.view, e.made = v, key
}

// heldIndex is job k's index in h.jobs (-1: none of its allocations holds
// GPUs), kept on e by the owning build while h is the same.
func heldIndex(e *specEntry, h *heldAllocs, k plan.JobKey, owner bool) int32 {
	if owner && e.heldOf == h {
		return e.held
	}
	held := int32(-1)
	if j, ok := h.jobIndex[k]; ok {
		held = j
	}
	if owner {
		e.heldOf, e.held = h, held
	}
	return held
}

// liveCount is job k's live allocations (live.jobs), kept on e by the
// owning build while the allocations' generation (gen) is the same.
func liveCount(e *specEntry, live liveCounts, gen uint64, k plan.JobKey, owner bool) int {
	if owner && e.liveOf == gen {
		return e.live
	}
	n := live.jobs[k]
	if owner {
		e.liveOf, e.live = gen, n
	}
	return n
}
