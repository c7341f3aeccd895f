package sim

import (
	"errors"
	"io/fs"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
)

// BenchmarkPhillyReplay replays the whole Philly trace (82,247 jobs over
// 3.5 months) on a 1,024-GPU modelled cluster with the reference tree scaled
// up 8x (testdata/philly-full), with the real planning core. Its numbers are
// in docs/benchmarks.md. It needs ../shared/traces.
func BenchmarkPhillyReplay(b *testing.B) {
	benchScenario(b, "testdata/philly-full/scenario.hcl")
}

// BenchmarkReference replays the reference scenario's two days (make demo).
func BenchmarkReference(b *testing.B) {
	benchScenario(b, referenceFile)
}

func benchScenario(b *testing.B, file string) {
	if _, err := os.Stat(sharedPhilly); errors.Is(err, fs.ErrNotExist) && file != referenceFile {
		b.Skip("no ../shared/traces beside the repository")
	}
	// As gputide sim does: a batch program with a small live heap.
	defer debug.SetGCPercent(debug.SetGCPercent(GCPercent))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(MemoryLimit))
	sc, err := LoadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	w, err := sc.Workload()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := Run(sc, w, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if len(r.Conflicts) > 0 {
			b.Fatalf("%d conflicts: %s", len(r.Conflicts), r.Conflicts[0])
		}
		b.ReportMetric(float64(r.Events)/r.Wall.Seconds(), "events/s")
		b.ReportMetric(float64(r.Plans), "plans")
		b.ReportMetric(float64(len(w.Jobs)), "jobs")
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.Sys)/(1<<20), "MiB-sys")
}

// BenchmarkMixed replays the mixed example's two days (examples/mixed:
// three flavors, `gputide sim -scenario examples/mixed/scenario.hcl`);
// its CPU time is in docs/benchmarks.md.
func BenchmarkMixed(b *testing.B) {
	benchScenario(b, "../../examples/mixed/scenario.hcl")
}
