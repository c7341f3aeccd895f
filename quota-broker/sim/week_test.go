package sim

import (
	"errors"
	"io/fs"
	"os"
	"sync"
	"testing"
)

// The reference over a week the cluster can serve (scenario-week.hcl: the
// Philly week of 2017-10-30, 60% of its rows): every training job starts
// under gputide and the Kueue-like policy (the queue stays bounded), and
// gputide's claims hold as numbers: utilisation above both peers, no wait
// at a scheduled inference scale-up, and non-idle training jobs waiting no
// longer than under Kueue-like. Its mean wait over all jobs and its work
// lost are not claimed (docs/benchmarks.md gives them). Needs
// ../shared/traces.
func TestReferenceWeekClaims(t *testing.T) {
	if _, err := os.Stat(sharedPhilly); errors.Is(err, fs.ErrNotExist) {
		t.Skip("no ../shared/traces beside the repository")
	}
	sc, err := LoadFile("../../examples/reference/scenario-week.hcl")
	if err != nil {
		t.Fatal(err)
	}
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	sh := PolicyShares(sc, w)
	policies := []Policy{NewStatic(sh), NewKueue(sh), Gputide{}}
	rs := make([]*Result, len(policies))
	errs := make([]error, len(policies))
	var wg sync.WaitGroup
	for i, p := range policies {
		wg.Add(1)
		go func() { defer wg.Done(); rs[i], errs[i] = Run(sc, w, Options{Policy: p}) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	static, kueue, g := rs[0], rs[1], rs[2]
	nonIdle := func(r *Result) float64 {
		sum, n := 0.0, 0
		for _, x := range r.WaitGroups {
			if !x.Idle {
				sum, n = sum+x.Seconds, n+x.Jobs()
			}
		}
		return sum / float64(max(n, 1))
	}
	for _, r := range rs {
		t.Logf("%-8s utilisation %.1f%%, longest scheduled scale-up wait %s, training wait %s (non-idle %.0fs), never started %d, work lost %.1f GPU-h",
			r.Policy, 100*r.Utilisation(), r.MaxBoundaryWait(), r.TrainingWait(), nonIdle(r), r.Waiting(), r.LostGPUh)
	}
	if g.Waiting() != 0 || kueue.Waiting() != 0 {
		t.Errorf("jobs never started: gputide %d, kueue %d; want a bounded queue", g.Waiting(), kueue.Waiting())
	}
	if !(g.Utilisation() > kueue.Utilisation() && g.Utilisation() > static.Utilisation()) {
		t.Errorf("utilisation: gputide %.3f, kueue %.3f, static %.3f; want gputide above both", g.Utilisation(), kueue.Utilisation(), static.Utilisation())
	}
	if g.MaxBoundaryWait() != 0 {
		t.Errorf("gputide: a scheduled scale-up waited %s", g.MaxBoundaryWait())
	}
	if nonIdle(g) > nonIdle(kueue) {
		t.Errorf("non-idle training wait: gputide %.0fs, kueue %.0fs; want gputide no longer", nonIdle(g), nonIdle(kueue))
	}
	noConflicts(t, g)
}
