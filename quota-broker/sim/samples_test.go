package sim

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/sim/trace"
)

// The shipped samples in examples/traces-sample are made by this test from
// the shared traces:
//
//	GPUTIDE_WRITE_SAMPLES=1 go test ./quota-broker/sim -run TestWriteSamples
//
// The Philly sample holds the rows of the reference scenario's virtual
// clusters that run at its trace_start or are submitted in the 7 days after
// it (CC-BY-4.0 data: shipped with its attribution). The Alibaba GenAI
// trace may not be shipped (research use only), so only its derived hourly
// request counts are.

const (
	sharedPhilly  = "../../../shared/traces/philly/philly.csv"
	sharedAlibaba = "../../../shared/traces/alibaba/v2026-genai/lora_request_trace.csv"
	sampleDir     = "../../examples/traces-sample"
	sampleDays    = 7 // the sample covers runs this long
	sampleWindow  = 8 // days of submissions in it: one more, so that a 7-day run reaches no end of the trace
)

func TestWriteSamples(t *testing.T) {
	if os.Getenv("GPUTIDE_WRITE_SAMPLES") == "" {
		t.Skip("set GPUTIDE_WRITE_SAMPLES=1 to rewrite examples/traces-sample from ../shared/traces")
	}
	sc, err := LoadFile(referenceFile)
	if err != nil {
		t.Fatal(err)
	}
	tr := sc.Training[0]
	src, err := os.ReadFile(filepath.Join("../../examples/reference", tr.Trace))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := trace.ReadPhilly(strings.NewReader(string(src)), tr.Trace, tr.TraceZone)
	if err != nil {
		t.Fatal(err)
	}
	vcs := map[string]bool{}
	for _, m := range tr.VCs {
		vcs[m.VC] = true
	}
	end := tr.TraceStart.Add(sampleWindow * 24 * time.Hour)
	lines := strings.Split(strings.TrimRight(string(src), "\n"), "\n")
	var out strings.Builder
	fmt.Fprintf(&out, `# Sample of the Microsoft Philly DNN-training job trace, for the gputide reference scenario.
# Rows of the virtual clusters %s that run at %s (US-Pacific)
# or are submitted in the %d days after it, unchanged and in trace order.
# Source: Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training
# Workloads", USENIX ATC'19; https://github.com/msr-fiddle/philly-traces (CC-BY-4.0), in the
# job-level flattening of the Pollux (OSDI'21) artifact, https://github.com/petuum/adaptdl
# branch osdi21-artifact, simulator/traces/philly.csv. Licence: CC-BY-4.0.
`, strings.Join(sortedKeys(vcs), ", "), tr.TraceStart.Format(trace.PhillyLayout), sampleWindow)
	out.WriteString(lines[0] + "\n")
	n := 0
	for _, r := range rows {
		if !vcs[r.VC] {
			continue
		}
		running := r.Submit.Before(tr.TraceStart) && r.Submit.Add(r.Duration).After(tr.TraceStart)
		inWindow := !r.Submit.Before(tr.TraceStart) && r.Submit.Before(end)
		if running || inWindow {
			out.WriteString(lines[r.Line-1] + "\n")
			n++
		}
	}
	if err := os.WriteFile(filepath.Join(sampleDir, "philly-sample.csv"), []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("philly-sample.csv: %d rows", n)

	f, err := os.Open(filepath.Join("../../examples/reference", sc.Infer[0].Demand.Trace))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	shift := sc.Infer[0].Demand.Shift
	shape, err := trace.ReadShape(bufio.NewReader(f), sharedAlibaba, shift)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	fmt.Fprintf(&out, `# Diurnal request shape of an image-generation (Stable Diffusion) serving service:
# requests per local hour of the day, summed over the %d requests of the Alibaba GenAI
# trace (cluster-trace-v2026-GenAI, lora_request_trace.csv, gmt_create), its anonymised
# clock shifted by %s so that its quiet hours fall at night. A derived aggregate: the trace's
# rows are for research or study use only and are not shipped.
# Source: https://github.com/alibaba/clusterdata (commit 7a6c496e4f4b6ce6150be8f881cb051bf2abff42),
# GenTD26 (SoCC'25 / EuroSys'26).
hour,requests
`, shape.Samples, shift)
	for h, c := range shape.Counts {
		fmt.Fprintf(&out, "%d,%d\n", h, int(c))
	}
	if err := os.WriteFile(filepath.Join(sampleDir, "alibaba-genai-hourly.csv"), []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
