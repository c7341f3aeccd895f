package sim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"testing"
)

// The reference over a week the cluster can serve (scenario-week.hcl: the
// Philly week of 2017-10-30, 60% of its rows; min_runtime 1h; victims that
// checkpoint in their kill_timeout), for seeds 1 to 3: every training job
// starts under gputide and the Kueue-like policy (the queue stays bounded),
// and gputide's claims hold as numbers (docs/benchmarks.md): utilisation
// above both peers, no wait at a scheduled inference scale-up, no more work
// lost and a mean training wait no longer than Kueue-like's, and non-idle
// jobs waiting no longer either; every plan action of every policy is
// applied. Needs ../shared/traces.
func TestReferenceWeekClaims(t *testing.T) {
	if _, err := os.Stat(sharedPhilly); errors.Is(err, fs.ErrNotExist) {
		t.Skip("no ../shared/traces beside the repository")
	}
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { weekClaims(t, seed) })
	}
}

func weekClaims(t *testing.T, seed uint64) {
	sc, err := LoadFile("../../examples/reference/scenario-week.hcl")
	if err != nil {
		t.Fatal(err)
	}
	sc.Seed = seed
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
	for _, r := range rs {
		noConflicts(t, r) // every plan action applied, under every policy
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
	if g.LostGPUh > kueue.LostGPUh {
		t.Errorf("work lost: gputide %.1f GPU-h, kueue %.1f; want gputide no more", g.LostGPUh, kueue.LostGPUh)
	}
	if g.TrainingWait() > kueue.TrainingWait() {
		t.Errorf("training wait: gputide %s, kueue %s; want gputide no longer", g.TrainingWait(), kueue.TrainingWait())
	}
	if nonIdle(g) > nonIdle(kueue) {
		t.Errorf("non-idle training wait: gputide %.0fs, kueue %.0fs; want gputide no longer", nonIdle(g), nonIdle(kueue))
	}
}
