package apmplugin

import (
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/nomad-autoscaler/sdk"
)

// BenchmarkQueryLoopback is one broker query (lendable_gpus of a quota, GET
// /v1/quotas) over loopback HTTP to a stand-in broker, parse included; it
// reports the median and p99 latency of the calls (issue 11).
func BenchmarkQueryLoopback(b *testing.B) {
	srv := httptest.NewServer(&fakeBroker{})
	defer srv.Close()
	a := New(nil, nil)
	if err := a.SetConfig(map[string]string{"address": srv.URL}); err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := a.Query(`lendable_gpus{quota="Quota1.1"}`, sdk.TimeRange{}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkQuerySchedule is the local `schedule` query.
func BenchmarkQuerySchedule(b *testing.B) {
	a := New(nil, nil)
	for b.Loop() {
		if _, err := a.Query("schedule", sdk.TimeRange{}); err != nil {
			b.Fatal(err)
		}
	}
}
