package api

import (
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/prometheus/client_golang/prometheus"
)

// queueWaitBuckets are the bounds of gputide_queue_wait_seconds: 10 s to
// about 7 days (the flex max_wait bound, L11).
var queueWaitBuckets = prometheus.ExponentialBuckets(10, 4, 9)

// serverMetrics are the API's own metrics (DESIGN §9: labels quota,
// namespace, rule, action, result only; never a job, allocation, node or
// token).
type serverMetrics struct {
	tokenChecks *prometheus.CounterVec
}

var (
	descBooked = prometheus.NewDesc("gputide_quota_booked_gpus",
		"GPUs of the Calendar bookings active now in the quota node's subtree (L10).", []string{"quota", "flavor"}, nil)
	descDisplaced = prometheus.NewDesc("gputide_quota_displaced_gpus",
		"GPUs of allocations displaced by active bookings in the quota node's subtree (L10).", []string{"quota", "flavor"}, nil)
	descQueueWait = prometheus.NewDesc("gputide_queue_wait_seconds",
		"How long the task groups waiting now have waited, by the quota node of their namespace.", []string{"quota"}, nil)
)

// stateCollector computes the quota and queue metrics from the broker's
// state at each scrape (no goroutine, no stale series): the quota gauges
// by quota and flavor (DESIGN L13, "gpu" for the implicit flavor), the
// queue wait by quota.
type stateCollector struct{ s *Server }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descBooked
	ch <- descDisplaced
	ch <- descQueueWait
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.cfg.Backend.State()
	if st.Snapshot == nil {
		return
	}
	now := c.s.cfg.Now()
	for _, q := range QuotaFigures(st.Snapshot, st.Plan, now) {
		ch <- prometheus.MustNewConstMetric(descBooked, prometheus.GaugeValue, float64(q.BookedGPUs), q.Name, q.Flavor)
		ch <- prometheus.MustNewConstMetric(descDisplaced, prometheus.GaugeValue, float64(q.DisplacedGPUs), q.Name, q.Flavor)
	}
	nsNode := quota.Namespaces(st.Snapshot.Quota)
	type hist struct {
		count   uint64
		sum     float64
		buckets map[float64]uint64
	}
	byQuota := map[string]*hist{}
	for _, p := range st.Snapshot.Pending {
		name, ok := nsNode[p.Namespace]
		if !ok || p.SubmittedAt.IsZero() {
			continue
		}
		h := byQuota[name]
		if h == nil {
			h = &hist{buckets: map[float64]uint64{}}
			byQuota[name] = h
		}
		wait := max(now.Sub(p.SubmittedAt).Seconds(), 0)
		h.count++
		h.sum += wait
		for _, b := range queueWaitBuckets {
			if wait <= b {
				h.buckets[b]++
			}
		}
	}
	for name, h := range byQuota {
		ch <- prometheus.MustNewConstHistogram(descQueueWait, h.count, h.sum, h.buckets, name)
	}
}

func newServerMetrics(reg prometheus.Registerer, s *Server) (*serverMetrics, error) {
	m := &serverMetrics{tokenChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gputide_token_checks_total",
		Help: "Token checks of API requests by result: allowed, denied, unavailable (Nomad not answering), acl_disabled.",
	}, []string{"result"})}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.tokenChecks, stateCollector{s}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
