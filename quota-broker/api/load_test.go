package api

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLoad runs 200 concurrent clients on loopback for
// GPUTIDE_LOAD_SECONDS (default 2 s; 30 s for docs/benchmarks.md): reads
// (quotas, queue, reservations) and plan previews (one request in five),
// token checks on the fake Nomad's answers with a warm cache. Every answer
// must be 200; the p50/p99 latencies are logged.
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test skipped with -short")
	}
	secs := 2
	if v := os.Getenv("GPUTIDE_LOAD_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("GPUTIDE_LOAD_SECONDS %q: want a whole number of seconds", v)
		}
		secs = n
	}
	h := newHarness(t, options{staleness: time.Hour})
	job := `{"Job":{"ID":"probe","Namespace":"workspace-b","Type":"batch","Datacenters":["dc1"],"TaskGroups":[{"Name":"g","Count":2,"Tasks":[{"Name":"t","Resources":{"Devices":[{"Name":"nvidia/gpu","Count":8}]}}]}]}}`
	tokens := []string{tokTeamB, tokTeamC, tokReadB, tokMgmt}
	reads := []string{"/v1/quotas", "/v1/queue", "/v1/reservations", "/v1/preemptions"}
	tr := &http.Transport{MaxIdleConns: 400, MaxIdleConnsPerHost: 400}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	// Warm the token cache.
	for _, tok := range tokens {
		if code, body := h.do(t, "GET", "/v1/quotas", tok, ""); code != 200 {
			t.Fatalf("warm-up: %d %s", code, body)
		}
	}
	var (
		mu       sync.Mutex
		readLat  []time.Duration
		planLat  []time.Duration
		failures []string
	)
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var myReads, myPlans []time.Duration
			var myFail []string
			tok := tokens[i%len(tokens)]
			for n := 0; time.Now().Before(deadline); n++ {
				preview := n%5 == 4 && tok == tokTeamB || n%5 == 4 && tok == tokMgmt
				var req *http.Request
				if preview {
					req, _ = http.NewRequest("POST", h.url+"/v1/plan", strings.NewReader(job))
				} else {
					req, _ = http.NewRequest("GET", h.url+reads[n%len(reads)], nil)
				}
				req.Header.Set("X-Nomad-Token", tok)
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					myFail = append(myFail, err.Error())
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				d := time.Since(start)
				if resp.StatusCode != 200 {
					myFail = append(myFail, fmt.Sprintf("%s %s: %d", req.Method, req.URL.Path, resp.StatusCode))
				}
				if preview {
					myPlans = append(myPlans, d)
				} else {
					myReads = append(myReads, d)
				}
			}
			mu.Lock()
			readLat, planLat, failures = append(readLat, myReads...), append(planLat, myPlans...), append(failures, myFail...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Errorf("%d failed requests, first: %s", len(failures), failures[0])
	}
	pct := func(d []time.Duration, p float64) time.Duration {
		if len(d) == 0 {
			return 0
		}
		slices.Sort(d)
		return d[min(len(d)-1, int(float64(len(d))*p))]
	}
	t.Logf("%d s, 200 clients: reads %d (%.0f/s) p50 %v p99 %v; previews %d (%.0f/s) p50 %v p99 %v",
		secs, len(readLat), float64(len(readLat))/float64(secs), pct(readLat, 0.5), pct(readLat, 0.99),
		len(planLat), float64(len(planLat))/float64(secs), pct(planLat, 0.5), pct(planLat, 0.99))
}
