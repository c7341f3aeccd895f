package agent

// The scale benchmark of one broker cycle (issue 18, docs/benchmarks.md):
// everything but Nomad is real. A generated cluster (scalegen) is served
// by a fake Nomad whose lists and event stream the broker's own watcher
// reads and decodes; the store is a real Consul (or, in the short test
// without one, the memory store) filled through the store's own API; the
// broker is a real Agent that holds the leader lock, follows the store's
// tree and the Nomad stream, and plans and acts in Agent.cycle, the one
// method the benchmark drives. A measured cycle has one change: a new
// pending 4-GPU job that fits on free GPUs, which the cycle admits.

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/internal/scalegen"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/store"
	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
)

// scaleEnv is one broker on a generated cluster, its background work
// (the Nomad watcher, the store's watch, the leader lock) running.
type scaleEnv struct {
	c       *scalegen.Cluster
	a       *Agent
	st      store.Store
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	logs    *syncBuffer
	next    int             // the next submitted job's number
	cpu     []time.Duration // the CPU time of each measured cycle
	once    sync.Once
	closers []func() // run by close, last first

	consul bool
	fill   time.Duration // writing the store
	filled scalegen.Filled
	list   time.Duration // the watcher's first list of Nomad
}

// newScaleEnv generates a cluster of size, fills the store (Consul at
// consulAddr under a prefix of its own, deleted at the end; the memory
// store when consulAddr is ""), starts a broker on both and waits until it
// holds the lock and has listed Nomad, then runs cycles until one acts
// (the leader's first loads its memory and prunes the history), for at
// most a minute.
func newScaleEnv(tb testing.TB, size scalegen.Size, consulAddr string) *scaleEnv {
	tb.Helper()
	c, err := scalegen.New(size, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	e := &scaleEnv{c: c, logs: &syncBuffer{}, consul: consulAddr != ""}
	e.closers = append(e.closers, srv.Close)
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Log(e.logs.String())
		}
		e.close()
	})
	consulBlock := ""
	if e.consul {
		prefix := fmt.Sprintf("gputide-scale-%d-%d/", size.Nodes, time.Now().UnixNano())
		if e.st, err = store.NewConsul(store.ConsulConfig{Address: consulAddr, Prefix: prefix}); err != nil {
			tb.Fatal(err)
		}
		e.closers = append(e.closers, func() { deleteConsulPrefix(tb, consulAddr, prefix) })
		consulBlock = fmt.Sprintf("consul {\n  address = %q\n  prefix = %q\n}\n", consulAddr, prefix)
	} else {
		e.st = store.NewMemory()
	}
	start := time.Now()
	if e.filled, err = c.Fill(context.Background(), e.st, 16); err != nil {
		tb.Fatal(err)
	}
	e.fill = time.Since(start)

	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "quota.hcl"), []byte(scalegen.QuotaHCL(size)), 0o644); err != nil {
		tb.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(fmt.Sprintf("nomad { address = %q }\nquota_file = \"quota.hcl\"\nhttp_bind = \"127.0.0.1:0\"\n%s",
		srv.URL, consulBlock)), filepath.Join(dir, "broker.hcl"))
	if err != nil {
		tb.Fatal(err)
	}
	// Cycles run when the benchmark says: no interval, no staleness
	// (the probe's Touch is made before each cycle).
	cfg.Interval, cfg.Staleness = time.Hour, time.Hour
	opt := Options{Logger: hclog.New(&hclog.LoggerOptions{Output: e.logs, Level: hclog.Warn})}
	if !e.consul {
		opt.Store = e.st // the filled memory store; with Consul the agent opens its own client
	}
	if e.a, err = New(cfg, opt); err != nil {
		tb.Fatal(err)
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.background(tb)
	// The first cycles: the memory may not have read the bookings yet;
	// the leader's first loads the records and prunes the history.
	var h Health
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if h = e.cycle(tb); h.Acting && h.IsLeader {
			return e
		}
	}
	tb.Fatalf("after the first cycles: acting %v, leader %v (%s)", h.Acting, h.IsLeader, h.Why)
	return e
}

// background starts what Agent.Run starts besides its cycle loop, its HTTP
// server, its Nomad probe and its policy watcher (the cluster has no
// scaling policy): the store's watch (the tree with Consul, the bookings
// and records into the memory), the leader lock and the Nomad watcher, in
// that order, and waits for each.
func (e *scaleEnv) background(tb testing.TB) {
	tb.Helper()
	a := e.a
	a.holder = "scale-benchmark"
	e.wg.Add(1)
	if a.consul {
		go func() { defer e.wg.Done(); a.watchTree(e.ctx) }()
		eventually(tb, "the store's quota tree is read", time.Minute, func() bool {
			a.mu.Lock()
			defer a.mu.Unlock()
			return a.tree != nil
		})
	} else {
		go func() { defer e.wg.Done(); a.watchStore(e.ctx, nil) }()
	}
	e.wg.Add(2)
	go func() { defer e.wg.Done(); a.lead(e.ctx) }()
	start := time.Now()
	go func() { defer e.wg.Done(); _ = a.watcher.Run(e.ctx) }()
	eventually(tb, "the leader lock is held", time.Minute, func() bool { return a.IsLeader() })
	eventually(tb, "Nomad is listed", 10*time.Minute, func() bool {
		s := a.watcher.State()
		return s != nil && len(s.Allocs()) == e.c.Size.Allocs()
	})
	e.list = time.Since(start)
}

// close stops the broker (its last cycle has run: the background work
// ends, the lock is released), closes the fake Nomad, deletes the store's
// keys, and drops the references to all of it, so that a larger size
// measured next in the same process does not count this one's memory.
func (e *scaleEnv) close() {
	e.once.Do(func() {
		if e.cancel != nil {
			e.cancel()
			e.wg.Wait()
			e.a.releaseLock()
		}
		for i := len(e.closers) - 1; i >= 0; i-- {
			e.closers[i]()
		}
		e.a, e.c, e.st, e.closers = nil, nil, nil, nil
	})
}

// cycle runs one cycle as the Nomad probe had just answered, and returns
// the agent's health after it.
func (e *scaleEnv) cycle(tb testing.TB) Health {
	tb.Helper()
	e.a.watcher.Touch()
	e.a.cycle(e.ctx)
	return e.a.Health()
}

// newJob is the namespace of the jobs step submits (team-00: 75% of its
// nominal in use, so a 4-GPU job is entitled) and their GPUs.
const (
	newJobNS   = "team-00"
	newJobGPUs = 4
)

// step submits one new pending job, runs the measured cycle (which must
// register it into the default pool), then purges the job and runs a
// cycle that forgets it, so that every step starts from the same state.
// It returns the measured cycle's duration.
func (e *scaleEnv) step(tb testing.TB) time.Duration {
	tb.Helper()
	id := fmt.Sprintf("new-%05d", e.next)
	e.next++
	before := len(e.c.Registered())
	e.c.Submit(newJobNS, id, newJobGPUs)
	s := e.a.watcher.State()
	eventually(tb, "the new job's event is applied", time.Minute, func() bool { return s.Job(newJobNS, id) != nil })
	e.a.watcher.Touch()
	b, bench := tb.(*testing.B)
	if bench {
		b.StartTimer()
	}
	start, cpu0 := time.Now(), cpuTime()
	// The label lets a CPU profile show the measured cycles alone
	// (go tool pprof -tagfocus cycle=measured).
	pprof.Do(e.ctx, pprof.Labels("cycle", "measured"), func(ctx context.Context) { e.a.cycle(ctx) })
	took, cpu := time.Since(start), cpuTime()-cpu0
	if bench {
		b.StopTimer()
	}
	e.cpu = append(e.cpu, cpu)
	regs := e.c.Registered()[before:]
	want := []scalegen.Register{{Namespace: newJobNS, Job: id, NodePool: "default", EnforceIndex: true}}
	if diff := cmp.Diff(want, regs, cmpIgnoreIndex); diff != "" {
		var actions []plan.Action
		if _, p := lastOf(e.a); p != nil {
			actions = p.Actions
		}
		tb.Fatalf("the cycle's registers (-want +got):\n%s\nwhy not acting: %q\nthe plan's actions: %+v", diff, e.a.Health().Why, actions)
	}
	e.c.Purge(newJobNS, id)
	eventually(tb, "the purge is applied", time.Minute, func() bool {
		j := s.Job(newJobNS, id)
		return j != nil && j.Stop != nil && *j.Stop
	})
	e.cycle(tb)
	if j := s.Job(newJobNS, id); j != nil {
		tb.Fatalf("job %s/%s is still in the state after its purge", newJobNS, id)
	}
	return took
}

// cpuTime is the CPU time the process used so far (user and system, all
// threads: the broker's, and the fake Nomad's few answers during a
// cycle). Consul's is not counted.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cmpIgnoreIndex compares registers without the enforced index, which the
// fake chose.
var cmpIgnoreIndex = cmp.Transformer("noIndex", func(r scalegen.Register) scalegen.Register {
	r.JobModifyIndex = 0
	return r
})

// scaleMemory is the process's memory after a full GC with freed memory
// returned to the OS: the Go heap in use and the resident set, in MiB,
// and the peak resident set so far.
func scaleMemory() (heapMiB, rssMiB, peakMiB float64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapMiB = float64(ms.HeapInuse) / (1 << 20)
	data, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rssMiB = kb / 1024
		case "VmHWM:":
			peakMiB = kb / 1024
		}
	}
	return heapMiB, rssMiB, peakMiB
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func deleteConsulPrefix(tb testing.TB, addr, prefix string) {
	cfg := consulapi.DefaultConfig()
	cfg.Address = addr
	c, err := consulapi.NewClient(cfg)
	if err == nil {
		_, err = c.KV().DeleteTree(prefix, nil)
	}
	if err != nil {
		tb.Logf("could not delete the benchmark's keys under %s: %v", prefix, err)
	}
}

func eventually(tb testing.TB, what string, timeout time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting until %s", timeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// The short form of the scale benchmark, run by go test so that it cannot
// rot: 50 nodes (100 jobs, 200 allocations, 100 job records, 10 bookings,
// 200 history entries) on CI's Consul (GPUTIDE_CONSUL_ADDR), else the
// memory store. The broker lists what the fake Nomad generated, plans on
// all of it, admits the one new job of a step into the default pool and
// forgets it once purged, twice over; the store keeps what was filled.
func TestCycleScaleShort(t *testing.T) {
	size := scalegen.Size{Nodes: 50}
	e := newScaleEnv(t, size, os.Getenv("GPUTIDE_CONSUL_ADDR"))
	type counts struct {
		Nodes, Allocs, Jobs, Pending, Records, Bookings, Preemptions, EndedBookings, FreeGPUs int
	}
	got := func() counts {
		snap, _ := lastOf(e.a)
		ctx := context.Background()
		recs, err := e.st.Jobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		g, err := e.st.ReadGuarded(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pre, err := e.st.Preemptions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hist, err := e.st.ReservationHistory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		free := 0
		used := map[string]bool{}
		for _, al := range snap.Allocations {
			for _, id := range al.GPUIDs {
				used[id] = true
			}
		}
		for _, n := range snap.Nodes {
			for _, g := range n.GPUs {
				if g.Healthy && !used[g.ID] {
					free++
				}
			}
		}
		jobs := 0
		e.a.watcher.State().Read(func(v watch.View) { jobs = len(v.Jobs) })
		return counts{Nodes: len(snap.Nodes), Allocs: len(snap.Allocations), Jobs: jobs,
			Pending: len(snap.Pending), Records: len(recs), Bookings: len(g.Reservations), Preemptions: len(pre),
			EndedBookings: len(hist), FreeGPUs: free}
	}
	want := counts{Nodes: 50, Allocs: 200, Jobs: 100, Records: 100, Bookings: 10, Preemptions: 190, EndedBookings: 10,
		FreeGPUs: 100}
	if diff := cmp.Diff(want, got()); diff != "" {
		t.Fatalf("after the first cycle (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(scalegen.Filled{Records: 100, Bookings: 10, Preemptions: 190, EndedBookings: 10}, e.filled); diff != "" {
		t.Fatalf("filled (-want +got):\n%s", diff)
	}
	for range 2 {
		e.step(t)
	}
	if diff := cmp.Diff(want, got()); diff != "" {
		t.Fatalf("after two steps (-want +got):\n%s", diff)
	}
}

// BenchmarkCycleScale measures one broker cycle with one change (a new
// pending job that fits on free GPUs, admitted by the cycle) at the node
// counts of GPUTIDE_SCALE_NODES (comma-separated, multiples of 10; default
// 500), everything else scaled with them (scalegen.Size), on a real Consul
// (GPUTIDE_CONSUL_ADDR, else one started from CONSUL_BIN; skipped without
// either). ns/op is the mean cycle; it also reports the median cycle
// (ms/cycle-median) and its CPU time (cpu-ms/cycle-median: the test
// process's, which a loaded machine stretches less than the wall time;
// Consul's own is not in it), the heap in use and resident set after a GC
// (heap-MiB, rss-MiB), the peak resident set of the process so far
// (peak-rss-MiB), and the setup: the store fill and the watcher's first
// list (fill-s, list-s). docs/benchmarks.md has the command and numbers.
func BenchmarkCycleScale(b *testing.B) {
	addr := scalegen.Consul(b)
	if addr == "" {
		b.Skip("no Consul: set GPUTIDE_CONSUL_ADDR or CONSUL_BIN (bash e2e/tools/consul/build.sh builds it)")
	}
	sizes := os.Getenv("GPUTIDE_SCALE_NODES")
	if sizes == "" {
		sizes = "500"
	}
	for _, f := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			b.Fatalf("GPUTIDE_SCALE_NODES=%q: %q is not a node count", sizes, f)
		}
		size := scalegen.Size{Nodes: n}
		if err := size.Check(); err != nil {
			b.Fatalf("GPUTIDE_SCALE_NODES=%q: %v", sizes, err)
		}
		e := newScaleEnv(b, size, addr)
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			ds := make([]time.Duration, 0, b.N)
			e.cpu = e.cpu[:0]
			b.StopTimer()
			b.ResetTimer()
			for range b.N {
				ds = append(ds, e.step(b)) // times only the measured cycle
			}
			heap, rss, peak := scaleMemory()
			b.ReportMetric(float64(median(ds).Microseconds())/1000, "ms/cycle-median")
			b.ReportMetric(float64(median(e.cpu).Microseconds())/1000, "cpu-ms/cycle-median")
			b.ReportMetric(heap, "heap-MiB")
			b.ReportMetric(rss, "rss-MiB")
			b.ReportMetric(peak, "peak-rss-MiB")
			b.ReportMetric(e.fill.Seconds(), "fill-s")
			b.ReportMetric(e.list.Seconds(), "list-s")
		})
		e.close()
	}
}
