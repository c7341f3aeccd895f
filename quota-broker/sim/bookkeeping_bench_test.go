package sim

import (
	"errors"
	"io/fs"
	"os"
	"runtime/debug"
	"testing"
)

// BenchmarkReportBookkeeping replays a scenario under gputide with the
// report's bookkeeping of issue 12 (what bound each wait, losses per hour
// and rule, the queue per sample) and without it (Options.noBookkeeping),
// and reports each replay's process CPU time (cpu-ns/op): their difference
// is what the bookkeeping costs. The reference's two days, and the whole
// Philly trace on 768 GPUs (testdata/philly-3q) when ../shared/traces is
// there. Numbers in docs/benchmarks.md.
func BenchmarkReportBookkeeping(b *testing.B) {
	for _, c := range []struct{ name, file string }{
		{"reference", referenceFile},
		{"philly-3q", "testdata/philly-3q/scenario.hcl"},
	} {
		b.Run(c.name, func(b *testing.B) {
			if _, err := os.Stat(sharedPhilly); errors.Is(err, fs.ErrNotExist) && c.file != referenceFile {
				b.Skip("no ../shared/traces beside the repository")
			}
			defer debug.SetGCPercent(debug.SetGCPercent(400)) // as gputide sim does
			sc, err := LoadFile(c.file)
			if err != nil {
				b.Fatal(err)
			}
			w, err := sc.Workload()
			if err != nil {
				b.Fatal(err)
			}
			for _, off := range []bool{false, true} {
				name := "on"
				if off {
					name = "off"
				}
				b.Run(name, func(b *testing.B) {
					cpu0, n := processCPU(), 0
					for b.Loop() {
						r, err := Run(sc, w, Options{noBookkeeping: off})
						if err != nil {
							b.Fatal(err)
						}
						if len(r.Conflicts) > 0 {
							b.Fatalf("%d conflicts: %s", len(r.Conflicts), r.Conflicts[0])
						}
						bound := false // some wait bound by something: the bookkeeping ran
						for _, g := range r.WaitGroups {
							bound = bound || g.Bound != BoundNone
						}
						if bound == off {
							b.Fatalf("bookkeeping %s, but some wait bound: %v", name, bound)
						}
						n++
					}
					b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(n), "cpu-ns/op")
				})
			}
		})
	}
}
