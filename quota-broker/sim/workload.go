package sim

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/sim/trace"
)

// JobSpec is one job the simulation submits.
type JobSpec struct {
	Namespace, Name, Group string
	Type                   plan.JobType
	Priority               int
	Count                  int // allocations
	GPUs                   int // per allocation
	Idle                   bool
	Gang                   bool // all-or-nothing (a flex request with no max_run)
	Submit                 time.Time
	Work                   time.Duration // batch: run time needed; services run until the end
	KillTimeout            time.Duration
	Checkpoint             time.Duration
	CheckpointWrite        time.Duration // see Training.CheckpointWrite
	InFlight               bool          // was running when the trace window opened
	Training               bool          // counts in the training statistics
	Reservation            string        // the booking the job names (DESIGN L10), or ""
	Flex                   *plan.Flex    // an explicit flex request (DESIGN L11), or nil
	Origin                 string        // "file:line" of the trace row, or the scenario block
	Placement
}

// Workload is the scenario's jobs, made once and shared by every policy
// run, with notes on how the traces were read.
type Workload struct {
	Jobs   []*JobSpec // sorted by submit time, then namespace and name
	Shapes []*trace.Shape
	Notes  []string // what was read and what was left out
	// Openb are the counts of each openb replay, in the scenario's order.
	Openb []OpenbCounts
}

// Workload reads the traces and builds the jobs of the scenario. It is
// deterministic for the scenario's seed.
func (s *Scenario) Workload() (*Workload, error) {
	w := &Workload{Notes: append([]string(nil), s.Notes...)}
	for _, inv := range s.Inventories {
		w.Notes = append(w.Notes, inv.Note())
	}
	end := s.End()
	for _, in := range s.Infer {
		if in.Demand == nil {
			w.Shapes = append(w.Shapes, nil)
			continue
		}
		f, name, _, err := openFallback(s.src, in.Demand.Trace, in.Demand.Fallback)
		if err != nil {
			return nil, &Error{Pos: in.Demand.Pos, Msg: fmt.Sprintf("inference %q demand: %v", in.Name, err)}
		}
		shape, err := trace.ReadShape(f, name, in.Demand.Shift)
		f.Close()
		if err != nil {
			return nil, err
		}
		w.Shapes = append(w.Shapes, shape)
		w.Notes = append(w.Notes, fmt.Sprintf("inference %q: demand shape from %s (%d rows), up to %d extra replicas at the busiest hour",
			in.Name, name, shape.Samples, in.Demand.Extra))
	}
	for _, t := range s.Training {
		if err := s.training(w, t, end); err != nil {
			return nil, err
		}
	}
	for _, o := range s.Openb {
		if err := s.openb(w, o, end); err != nil {
			return nil, err
		}
	}
	for _, d := range s.Dev {
		for i := 0; i < d.Count; i++ {
			w.Jobs = append(w.Jobs, &JobSpec{
				Namespace: d.Namespace, Name: fmt.Sprintf("%s-%02d", d.Name, i+1), Group: "notebook",
				Type: plan.JobService, Priority: d.Priority, Count: 1, GPUs: d.GPUs,
				Submit: d.At, KillTimeout: d.KillTimeout, Origin: fmt.Sprintf("dev %q", d.Name), Placement: d.Placement,
			})
		}
	}
	for _, j := range s.Jobs {
		w.Jobs = append(w.Jobs, &JobSpec{
			Namespace: j.Namespace, Name: j.Name, Group: "worker", Type: plan.JobBatch, Priority: j.Priority,
			Count: j.Count, GPUs: j.GPUs, Idle: j.Idle, Gang: (j.Count > 1 || j.Flex != nil) && j.Reservation == "", Submit: j.At, Work: j.Duration,
			KillTimeout: j.KillTimeout, Checkpoint: j.Checkpoint, Origin: fmt.Sprintf("job %q", j.Name), Placement: j.Placement,
			Reservation: j.Reservation, Flex: j.Flex,
		})
	}
	sort.SliceStable(w.Jobs, func(a, b int) bool {
		x, y := w.Jobs[a], w.Jobs[b]
		if !x.Submit.Equal(y.Submit) {
			return x.Submit.Before(y.Submit)
		}
		if x.Namespace != y.Namespace {
			return x.Namespace < y.Namespace
		}
		return x.Name < y.Name
	})
	return w, nil
}

// training replays a Philly-format trace (see docs/simulator.md for the
// mapping): a row submitted at trace time T runs in the simulation at
// start + (T - trace_start) / time_scale, for duration / time_scale, on
// ceil(num_gpus * gpu_scale) GPUs; jobs above 8 GPUs per node become gangs
// of whole-node allocations.
func (s *Scenario) training(w *Workload, t *Training, end time.Time) error {
	f, name, fallback, err := openFallback(s.src, t.Trace, t.Fallback)
	if err != nil {
		return &Error{Pos: t.TracePos, Msg: fmt.Sprintf("training %q: %v", t.Name, err)}
	}
	t.TraceRead, t.FallbackRead = name, fallback
	rows, err := trace.ReadPhilly(f, name, t.TraceZone)
	f.Close()
	if err != nil {
		return err
	}
	if t.ExpectRows > 0 && len(rows) != t.ExpectRows {
		return &Error{Pos: t.TracePos, Msg: fmt.Sprintf("training %q: %s has %d rows, expect_rows = %d: the trace is truncated or not the one meant",
			t.Name, name, len(rows), t.ExpectRows)}
	}
	perNode := 0
	for _, g := range s.Nodes {
		perNode = max(perNode, g.Whole())
	}
	vcs := map[string]string{}
	for _, m := range t.VCs {
		vcs[m.VC] = m.Namespace
	}
	scale := func(d time.Duration) time.Duration { return scaleDuration(d, t.TimeScale) }
	var (
		kept, unmapped, short, big, sampled, outside, inflight int
		last                                                   time.Time
		names                                                  = map[string]int{}
	)
	// Rows in time order (the trace is not sorted), ties by content, so that
	// a sample of the trace and the whole of it give the same jobs.
	idx := make([]int, len(rows))
	for i := range idx {
		idx[i] = i
	}
	keys := make([]string, len(rows))
	for i := range rows {
		keys[i] = rows[i].Key()
	}
	sort.SliceStable(idx, func(a, b int) bool {
		x, y := &rows[idx[a]], &rows[idx[b]]
		if !x.Submit.Equal(y.Submit) {
			return x.Submit.Before(y.Submit)
		}
		return keys[idx[a]] < keys[idx[b]]
	})
	for _, i := range idx {
		r := &rows[i]
		if r.Submit.After(last) {
			last = r.Submit
		}
		ns, ok := vcs[r.VC]
		if !ok {
			ns, ok = vcs["*"]
		}
		if !ok {
			unmapped++
			continue
		}
		if r.Duration < t.MinDuration {
			short++
			continue
		}
		// Per-row decisions use a source seeded by the scenario seed and the
		// row's content: the same row decides the same way in any file.
		h := fnv.New64a()
		h.Write([]byte(keys[i]))
		rng := rand.New(rand.NewPCG(s.Seed, h.Sum64()))
		if t.Sample < 1 && rng.Float64() >= t.Sample {
			sampled++
			continue
		}
		idle := rng.Float64() < t.IdleFraction
		pl := t.Placement
		if len(t.FlavorShares) > 0 {
			// Drawn after the row's other draws, so that a scenario
			// without flavor_shares decides every row as before.
			x, acc := rng.Float64(), 0.0
			pl.Flavors = t.FlavorShares[len(t.FlavorShares)-1].Flavors
			for _, fs := range t.FlavorShares {
				if acc += fs.Share; x < acc {
					pl.Flavors = fs.Flavors
					break
				}
			}
		}
		gpus := int(math.Ceil(float64(r.GPUs)*t.GPUScale - 1e-9))
		if gpus > t.MaxGPUs {
			big++
			continue
		}
		count, per := 1, gpus
		if perNode > 0 && gpus > perNode {
			count, per = (gpus+perNode-1)/perNode, perNode
		}
		submit := s.Start.Add(scale(r.Submit.Sub(t.TraceStart)))
		work := scale(r.Duration)
		inFlight := false
		if submit.Before(s.Start) {
			// Submitted before the window: it takes part only if it would
			// still be running at the start (in flight), with the work left.
			if !t.InFlight || !submit.Add(work).After(s.Start) {
				outside++
				continue
			}
			work -= s.Start.Sub(submit)
			inFlight = true
			inflight++
		} else if !submit.Before(end) {
			outside++
			continue
		}
		base := fmt.Sprintf("%s-%s", r.VC, r.Submit.Format("0102-150405"))
		names[base]++
		jn := base
		if n := names[base]; n > 1 {
			jn = fmt.Sprintf("%s-%d", base, n)
		}
		kind := "train"
		if idle {
			kind = "idle"
		}
		w.Jobs = append(w.Jobs, &JobSpec{
			Namespace: ns, Name: kind + "-" + jn, Group: "worker", Type: plan.JobBatch, Priority: t.Priority,
			Count: count, GPUs: per, Idle: idle, Gang: count > 1 && t.Gang == "flex",
			Submit: maxTime(submit, s.Start), Work: work, KillTimeout: t.KillTimeout, Checkpoint: t.Checkpoint, CheckpointWrite: t.CheckpointWrite,
			InFlight: inFlight, Training: true, Origin: fmt.Sprintf("%s:%d", name, r.Line), Placement: pl,
		})
		kept++
	}
	w.Notes = append(w.Notes, fmt.Sprintf(
		"training %q: %s: %d rows; %d jobs replayed (%d of them in flight at the start); left out: %d of unmapped virtual clusters, %d shorter than %s, %d above %d GPUs, %d by sampling, %d outside the simulated window",
		t.Name, name, len(rows), kept, inflight, unmapped, short, t.MinDuration, big, t.MaxGPUs, sampled, outside))
	if traceEnd := s.Start.Add(scale(last.Sub(t.TraceStart))); len(rows) > 0 && traceEnd.Before(end) {
		w.Notes = append(w.Notes, fmt.Sprintf(
			"training %q: WARNING: the trace ends at %s (simulated %s), before the end of the run (%s): no training arrives in the last %s",
			t.Name, last.Format(trace.PhillyLayout), traceEnd.Format(time.RFC3339), end.Format(time.RFC3339), end.Sub(traceEnd).Round(time.Minute)))
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// scaleDuration is a trace's duration d over time_scale (trace seconds
// per simulated second, at least 0.001), rounded to the nanosecond and
// saturated at the largest Duration (about 292 years): a trace's 100
// years over 0.001 overflow it, which wrapped negative.
func scaleDuration(d time.Duration, timeScale float64) time.Duration {
	f := math.Round(float64(d) / timeScale)
	switch {
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return time.Duration(f)
}
