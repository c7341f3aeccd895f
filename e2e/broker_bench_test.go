package e2e

// Speed of the broker on a real Nomad dev agent (issue 5, "Speed"; issue
// 18 item 5; numbers in docs/benchmarks.md, "Broker on Nomad" and
// "Preemption time-to-running"). TestBrokerSpeed runs in every e2e run in
// a short form: one trial of each way below and 100 admissions, no timing
// asserted, only that each way works and stops its victims. With
// GPUTIDE_BENCH=1 it runs the full form: 5 trials of each way (medians;
// GPUTIDE_BENCH_TRIALS=n for n), which allocations Nomad's preemption and
// the broker each stop when they differ, and 500 admissions;
// GPUTIDE_BENCH_WAYS=today,one-write runs only those ways (and Nomad's own);
// GPUTIDE_BENCH_CHECKPOINT=3 makes the victims checkpoint 3 s, not 0.5 s:
//
//	GPUTIDE_BENCH=1 NOMAD_BIN=... go test -count=1 -v -run TestBrokerSpeed ./e2e/
//
// On a full node (team C's training 2 x 2 GPUs and notebook 1 GPU, team
// B's training 3 GPUs), team A's inference (4 GPUs, priority 80) is
// registered and timed to its allocation running, in each of the ways of
// preemptionWays: Nomad's own preemption, the broker's mechanism and
// other orders of the same calls driven by hand on the broker's victims
// (team C's training), and the broker itself.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/act"
	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/hashicorp/nomad/api"
)

// benchTrials is how many times the full form runs each way.
const benchTrials = 5

func TestBrokerSpeed(t *testing.T) {
	full := os.Getenv("GPUTIDE_BENCH") != ""
	a := startGPUNomad(t)
	c := a.Client
	if _, err := c.NodePools().Register(&api.NodePool{Name: build.DefaultHoldingPool}, nil); err != nil {
		t.Fatal(err)
	}
	if self, err := c.Agent().Self(); err == nil {
		t.Logf("Nomad %v", self.Member.Tags["build"])
	}
	trials := 1
	if full {
		trials = benchTrials
		if n, err := strconv.Atoi(os.Getenv("GPUTIDE_BENCH_TRIALS")); err == nil && n > 0 {
			trials = n
		}
	}
	trialsOf := map[string][]trialTimes{}
	// The ways driven by hand run with the broker off, trial by trial
	// (so that a busy spell of the shared machine spreads over all of
	// them); then the broker starts for its own trials.
	ways := preemptionWays
	if full {
		ways = onlyWays(os.Getenv("GPUTIDE_BENCH_WAYS"))
	}
	var byHand, viaBroker []preemptionWay
	for _, w := range ways {
		if w.broker {
			viaBroker = append(viaBroker, w)
		} else {
			byHand = append(byHand, w)
		}
	}
	for i := 0; i < trials; i++ {
		for _, w := range byHand {
			trialsOf[w.name] = append(trialsOf[w.name], preemptionTrial(t, c, w))
		}
	}
	if len(viaBroker) > 0 {
		b := startBroker(t, a.Addr, 3, 5)
		for i := 0; i < trials; i++ {
			for _, w := range viaBroker {
				trialsOf[w.name] = append(trialsOf[w.name], preemptionTrial(t, c, w))
			}
		}
		b.stop()
	}
	logWays(t, ways, trialsOf)
	if full {
		victimChoice(t, a)
		cleanJobs(t, c)
		admissionRate(t, a, 500, true)
	} else {
		admissionRate(t, a, 100, false)
	}
}

// logWays logs, for each way, the median time to running and each
// segment's median, against Nomad's own preemption (the first way).
func logWays(t *testing.T, ways []preemptionWay, trialsOf map[string][]trialTimes) {
	nomad := trialsOf[preemptionWays[0].name]
	ratio := func(tt []trialTimes, f func(trialTimes) time.Duration) string {
		m := median(segment(tt, f))
		return fmt.Sprintf("%s (%.2fx Nomad's own)", m, float64(m)/float64(median(segment(nomad, f))))
	}
	for _, w := range ways {
		tt := trialsOf[w.name]
		t.Logf("%-14s median %s, all %v; medians: kill reaches the client %s, victims' checkpoint %s, "+
			"exit to complete at the server %s, complete to placed %s, task started %s after register, reported running %s later: %s",
			w.name, ratio(tt, trialTimes.total), segment(tt, trialTimes.total),
			median(segment(tt, trialTimes.toKill)), median(segment(tt, trialTimes.checkpoint)),
			median(segment(tt, trialTimes.toComplete)), median(segment(tt, trialTimes.toPlaced)),
			ratio(tt, trialTimes.toStarted), median(segment(tt, trialTimes.toReported)), w.what)
	}
}

// onlyWays returns Nomad's own preemption (the yardstick) and the ways
// named in the comma-separated list; all ways when it is empty.
func onlyWays(list string) []preemptionWay {
	if list == "" {
		return preemptionWays
	}
	ways := preemptionWays[:1:1]
	for _, w := range preemptionWays[1:] {
		if slices.Contains(strings.Split(list, ","), w.name) {
			ways = append(ways, w)
		}
	}
	return ways
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2].Round(time.Millisecond)
}

// preemptionWay is one way to free GPUs for team A's inference on the
// node fillDirect filled.
type preemptionWay struct {
	name, what string
	// broker: the fill and the inference go into the holding pool and
	// the broker does the rest (run is nil).
	broker bool
	// nomad: Nomad's own preemption (on for the trial); the victims are
	// Nomad's choice, not checked.
	nomad bool
	// run frees the GPUs of victims (team C's training allocations) for
	// the inference job claimant, already registered into the holding
	// pool; victimJob is team C's training job as read before.
	run func(t *testing.T, c *api.Client, claimant, victimJob *api.Job, victims []string)
}

// preemptionWays are the ways TestBrokerSpeed measures (issue 18 item 5;
// docs/benchmarks.md, "Preemption time-to-running", says which was
// adopted and why the others were not). The first is Nomad's own
// preemption, the yardstick.
var preemptionWays = []preemptionWay{
	{name: "nomad", nomad: true,
		what: "Nomad's own preemption (service and batch preemption on, broker off)"},
	{name: "today", run: today,
		what: "the broker's order (kept, issue 18) by hand: victim job to the holding pool, its 200, stop each victim, then the inference into its pool"},
	{name: "claimant-first", run: claimantFirst,
		what: "the inference into its pool first (its evaluation blocks), then the victim job to the holding pool, its 200, stop each victim"},
	{name: "after-exit", run: afterExit,
		what: "as today, but the inference registered into its pool only once Nomad shows every victim complete"},
	{name: "one-write", run: oneWrite,
		what: "the inference into its pool first, then the victim job to the holding pool with stop = true: one write stops its allocations"},
	{name: "signal-first", run: signalFirst,
		what: "as claimant-first, and each victim's task sent its kill signal directly (alloc signal) at the same time as the stops"},
	{name: "broker", broker: true,
		what: "the broker: everything submitted into the holding pool, the rest automatic"},
}

// preemptionTrial fills the node, registers the inference into the
// holding pool (or, for Nomad's own preemption, into "default"), lets w free
// the GPUs, and returns the time from the register call to the inference's
// allocation running as the server sees it. It checks what was stopped
// (team C's training, both allocations, except for Nomad's own choice),
// logs a timeline from Nomad's own times, and cleans the node.
func preemptionTrial(t *testing.T, c *api.Client, w preemptionWay) trialTimes {
	t.Helper()
	pool := "default"
	if w.broker {
		pool = "" // the holding pool
	}
	victims := fillDirect(t, c, pool)
	victimJob := jobInfo(t, c, "workspace-c", "training")
	before := stoppedAllocs(t, c)
	if w.nomad {
		setNomadPreemption(t, c, true)
		defer setNomadPreemption(t, c, false)
	}
	claimant := jobSpec{Namespace: "workspace-a", ID: "inference", Type: "service", Priority: 80, Count: 1, GPUs: 4, Pool: pool}.job()
	if !w.nomad && !w.broker {
		claimant.NodePool = new(build.DefaultHoldingPool)
	}
	start := time.Now()
	resp, _, err := c.Jobs().Register(claimant, &api.WriteOptions{Namespace: "workspace-a"})
	if err != nil {
		t.Fatalf("%s: register the inference: %v", w.name, err)
	}
	claimant.JobModifyIndex = &resp.JobModifyIndex
	if w.run != nil {
		w.run(t, c, claimant, victimJob, victims)
	}
	var took time.Duration
	for {
		if len(running(t, c, "workspace-a", "inference")) == 1 {
			took = time.Since(start)
			break
		}
		if time.Since(start) > 60*time.Second {
			t.Fatalf("%s: inference not running after 60s", w.name)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopped := minus(stoppedAllocs(t, c), before)
	if !w.nomad && !same(stopped, victims) {
		t.Errorf("%s stopped %v, want team C's training %v", w.name, stopped, victims)
	}
	if len(stopped) == 0 {
		t.Errorf("%s stopped nothing", w.name)
	}
	tl := readTimeline(t, c, start, took, stopped)
	if tl.started <= tl.exited {
		t.Errorf("%s: the inference started (%s) before the last victim exited (%s): two jobs on the same GPUs",
			w.name, tl.at(start, tl.started), tl.at(start, tl.exited))
	}
	t.Logf("%s: %s (%s)", w.name, took.Round(time.Millisecond), tl.String(start))
	cleanJobs(t, c)
	return tl
}

// today is the broker's order before issue 18, by hand.
func today(t *testing.T, c *api.Client, claimant, victimJob *api.Job, victims []string) {
	suspendVictim(t, c, victimJob, false)
	stopAllocs(t, c, victims)
	admitClaimant(t, c, claimant)
}

func claimantFirst(t *testing.T, c *api.Client, claimant, victimJob *api.Job, victims []string) {
	admitClaimant(t, c, claimant)
	suspendVictim(t, c, victimJob, false)
	stopAllocs(t, c, victims)
}

func afterExit(t *testing.T, c *api.Client, claimant, victimJob *api.Job, victims []string) {
	suspendVictim(t, c, victimJob, false)
	stopAllocs(t, c, victims)
	err := waitFor(60*time.Second, 10*time.Millisecond, func() error {
		for _, id := range victims {
			a, _, err := c.Allocations().Info(id, nil)
			if err != nil {
				return err
			}
			if !a.ClientTerminalStatus() {
				return fmt.Errorf("victim %s still %s", id, a.ClientStatus)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	admitClaimant(t, c, claimant)
}

func oneWrite(t *testing.T, c *api.Client, claimant, victimJob *api.Job, victims []string) {
	admitClaimant(t, c, claimant)
	suspendVictim(t, c, victimJob, true)
}

func signalFirst(t *testing.T, c *api.Client, claimant, victimJob *api.Job, victims []string) {
	admitClaimant(t, c, claimant)
	suspendVictim(t, c, victimJob, false)
	var wg sync.WaitGroup
	for _, id := range victims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Allocations().Signal(&api.Allocation{ID: id}, &api.QueryOptions{Namespace: "workspace-c"}, "work", "SIGINT"); err != nil {
				t.Errorf("signal %s: %v", id, err)
			}
		}()
	}
	stopAllocs(t, c, victims)
	wg.Wait()
}

// suspendVictim registers the victim's job into the holding pool from the
// spec read before the trial (its modify index enforced, counts kept), as
// the broker's Actor does; with stop, also stopped (the job's allocations
// stop in the same write).
func suspendVictim(t *testing.T, c *api.Client, j *api.Job, stop bool) {
	t.Helper()
	v := *j
	v.NodePool = new(build.DefaultHoldingPool)
	if stop {
		v.Stop = new(true)
	}
	opts := &api.RegisterOptions{EnforceIndex: true, ModifyIndex: *j.JobModifyIndex, PreserveCounts: true}
	if _, _, err := c.Jobs().RegisterOpts(&v, opts, &api.WriteOptions{Namespace: *j.Namespace}); err != nil {
		t.Fatalf("suspend %s: %v", *j.ID, err)
	}
}

// stopAllocs stops the allocations one after the other, as the Actor does.
func stopAllocs(t *testing.T, c *api.Client, ids []string) {
	t.Helper()
	for _, id := range ids {
		if _, err := c.Allocations().Stop(&api.Allocation{ID: id}, &api.QueryOptions{Namespace: "workspace-c"}); err != nil {
			t.Fatal(err)
		}
	}
}

// admitClaimant registers the inference (registered into the holding pool
// at the trial's start) into "default", as the Actor admits a job.
func admitClaimant(t *testing.T, c *api.Client, j *api.Job) {
	t.Helper()
	v := *j
	v.NodePool = new("default")
	opts := &api.RegisterOptions{EnforceIndex: true, ModifyIndex: *j.JobModifyIndex, PreserveCounts: true}
	if _, _, err := c.Jobs().RegisterOpts(&v, opts, &api.WriteOptions{Namespace: *j.Namespace}); err != nil {
		t.Fatalf("admit %s: %v", *j.ID, err)
	}
}

// trialTimes are instants of one trial, Unix nanoseconds from Nomad.
type trialTimes struct {
	start    time.Time     // the inference's register call
	took     time.Duration // from start to the test's poll seeing it running
	killed   int64         // the first Killing event of a victim's task
	exited   int64         // the last Terminated event of a victim's task
	complete int64         // the last victim's modify time once complete: when the server learnt it
	placed   int64         // the inference's allocation created
	started  int64         // its task's Started event
	running  int64         // its modify time once running: when the server learnt it
}

// readTimeline reads a trial's instants from Nomad: the victims'
// (stopped) task events and modify times, the inference's allocation.
func readTimeline(t *testing.T, c *api.Client, start time.Time, took time.Duration, stopped []string) trialTimes {
	t.Helper()
	tl := trialTimes{start: start, took: took}
	for _, id := range stopped {
		a, _, err := c.Allocations().Info(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, ts := range a.TaskStates {
			for _, e := range ts.Events {
				switch e.Type {
				case api.TaskKilling:
					if tl.killed == 0 || e.Time < tl.killed {
						tl.killed = e.Time
					}
				case api.TaskTerminated:
					tl.exited = max(tl.exited, e.Time)
				}
			}
		}
		if a.ClientTerminalStatus() {
			tl.complete = max(tl.complete, a.ModifyTime)
		}
	}
	for _, stub := range allocs(t, c, "workspace-a", "inference") {
		a, _, err := c.Allocations().Info(stub.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a.ClientStatus != api.AllocClientStatusRunning {
			continue
		}
		tl.placed, tl.running = a.CreateTime, a.ModifyTime
		for _, ts := range a.TaskStates {
			for _, e := range ts.Events {
				if e.Type == api.TaskStarted {
					tl.started = e.Time
				}
			}
		}
	}
	return tl
}

// The segments of a trial TestBrokerSpeed reports (medians).
func (tl trialTimes) total() time.Duration      { return tl.took }
func (tl trialTimes) toKill() time.Duration     { return tl.since(tl.start.UnixNano(), tl.killed) }
func (tl trialTimes) checkpoint() time.Duration { return tl.since(tl.killed, tl.exited) }
func (tl trialTimes) toComplete() time.Duration { return tl.since(tl.exited, tl.complete) }
func (tl trialTimes) toPlaced() time.Duration   { return tl.since(tl.complete, tl.placed) }
func (tl trialTimes) toStarted() time.Duration  { return tl.since(tl.start.UnixNano(), tl.started) }
func (tl trialTimes) toReported() time.Duration { return tl.since(tl.started, tl.running) }

func (tl trialTimes) since(from, to int64) time.Duration { return time.Duration(to - from) }

// segment is f of each trial.
func segment(tt []trialTimes, f func(trialTimes) time.Duration) []time.Duration {
	out := make([]time.Duration, len(tt))
	for i, tl := range tt {
		out[i] = f(tl).Round(time.Millisecond)
	}
	return out
}

// at gives the instant ns in seconds after start ("-" when unknown).
func (tl trialTimes) at(start time.Time, ns int64) string {
	if ns == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.2fs", time.Unix(0, ns).Sub(start).Seconds())
}

func (tl trialTimes) String(start time.Time) string {
	return fmt.Sprintf("victims killed %s, exited %s, complete at the server %s; inference placed %s, started %s, running at the server %s",
		tl.at(start, tl.killed), tl.at(start, tl.exited), tl.at(start, tl.complete),
		tl.at(start, tl.placed), tl.at(start, tl.started), tl.at(start, tl.running))
}

// fillDirect fills the node with team C's training (2 x 2 GPUs, the
// victims) and notebook (1 GPU) and team B's training (3 GPUs), registered
// into pool ("" for the holding pool, where the broker admits them).
// All three are submitted at once (the node holds them all) and are
// running when it returns. Their tasks checkpoint promptly (jobSpec.Prompt),
// for GPUTIDE_BENCH_CHECKPOINT seconds (default 0.5).
func fillDirect(t *testing.T, c *api.Client, pool string) (cTrain []string) {
	cp := os.Getenv("GPUTIDE_BENCH_CHECKPOINT") // seconds; default 0.5
	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "training", Type: "batch", Priority: 50, Count: 2, GPUs: 2, Pool: pool, Prompt: true, Checkpoint: cp})
	submit(t, c, jobSpec{Namespace: "workspace-c", ID: "notebook", Type: "service", Priority: 60, Count: 1, GPUs: 1, Pool: pool, Prompt: true, Checkpoint: cp})
	submit(t, c, jobSpec{Namespace: "workspace-b", ID: "training", Type: "batch", Priority: 50, Count: 1, GPUs: 3, Pool: pool, Prompt: true, Checkpoint: cp})
	cTrain = waitRunning(t, c, "workspace-c", "training", 2, 30*time.Second)
	waitRunning(t, c, "workspace-c", "notebook", 1, 30*time.Second)
	waitRunning(t, c, "workspace-b", "training", 1, 30*time.Second)
	return cTrain
}

func setNomadPreemption(t *testing.T, c *api.Client, on bool) {
	t.Helper()
	cfg, _, err := c.Operator().SchedulerGetConfiguration(nil)
	if err != nil {
		t.Fatal(err)
	}
	sc := cfg.SchedulerConfig
	sc.PreemptionConfig.ServiceSchedulerEnabled = on
	sc.PreemptionConfig.BatchSchedulerEnabled = on
	if _, _, err := c.Operator().SchedulerSetConfiguration(sc, nil); err != nil {
		t.Fatal(err)
	}
}

// timeToRunning registers the inference job into pool and returns the time
// from the call to its allocation running, as the server sees it.
func timeToRunning(t *testing.T, c *api.Client, pool string) time.Duration {
	t.Helper()
	start := time.Now()
	submit(t, c, jobSpec{Namespace: "workspace-a", ID: "inference", Type: "service", Priority: 80, Count: 1, GPUs: 4, Pool: pool})
	for {
		if len(running(t, c, "workspace-a", "inference")) == 1 {
			return time.Since(start)
		}
		if time.Since(start) > 60*time.Second {
			t.Fatal("inference not running after 60s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// victimChoice shows, on one full node, which allocation Nomad's own
// preemption stops and which the broker stops, when team C's training
// (priority 50) runs within team C's quota and team B's idle job (priority
// 60) borrows the rest.
func victimChoice(t *testing.T, a *nomadAgent) {
	c := a.Client
	run := func(pool string) (stopped []string, cTrain, borrow []string) {
		submit(t, c, jobSpec{Namespace: "workspace-c", ID: "training", Type: "batch", Priority: 50, Count: 2, GPUs: 2, Pool: pool})
		cTrain = waitRunning(t, c, "workspace-c", "training", 2, 30*time.Second)
		submit(t, c, jobSpec{Namespace: "workspace-b", ID: "borrow", Type: "batch", Priority: 60, Count: 4, GPUs: 1, Pool: pool,
			Meta: map[string]string{"gputide_idle": "true", "gputide_elastic": "true"}})
		borrow = waitRunning(t, c, "workspace-b", "borrow", 4, 30*time.Second)
		before := stoppedAllocs(t, c)
		timeToRunning(t, c, pool)
		return minus(stoppedAllocs(t, c), before), cTrain, borrow
	}
	setNomadPreemption(t, c, true)
	stopped, cTrain, borrow := run("default")
	setNomadPreemption(t, c, false)
	t.Logf("Nomad's preemption stopped %d allocations: %d of team C's in-quota training, %d of team B's idle job",
		len(stopped), len(intersect(stopped, cTrain)), len(intersect(stopped, borrow)))
	cleanJobs(t, c)
	b := startBroker(t, a.Addr, 3, 5)
	stopped, cTrain, borrow = run("")
	b.stop()
	t.Logf("the broker stopped %d allocations: %d of team C's in-quota training, %d of team B's idle job",
		len(stopped), len(intersect(stopped, cTrain)), len(intersect(stopped, borrow)))
	if len(intersect(stopped, cTrain)) != 0 || len(intersect(stopped, borrow)) != 4 {
		t.Errorf("the broker's victims are not team B's idle workers")
	}
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// admissionRate queues n small jobs (no GPU) in the holding pool, with
// gputide_pool naming an empty pool (listed in the broker's admit_pools) so
// that Nomad accepts every admission without n processes starting on the
// test machine, then starts the broker and waits until every job is
// admitted (register calls Nomad accepted), timing it when timed. Before the
// broker starts, the same agent takes n raw register calls that make the
// same move (rawRegisterRate), so the broker's rate is compared with
// Nomad's in the same run.
func admissionRate(t *testing.T, a *nomadAgent, n int, timed bool) {
	c := a.Client
	if _, err := c.NodePools().Register(&api.NodePool{Name: "bench-empty"}, nil); err != nil {
		t.Fatal(err)
	}
	queueSmall(t, c, "small-", n)
	raw, rawSpread := rawRegisterRate(t, c, n)
	start := time.Now()
	cfgPath, quotaFile := brokerConfig(t, a.Addr, 3, 5)
	appendConfig(t, cfgPath, `admit_pools = ["default", "bench-empty"]`)
	b := runBroker(t, cfgPath, quotaFile)
	var last time.Time
	got, limit := 0, 120*time.Second
	if !timed {
		limit = 60 * time.Second // 100 took 2.2 s on a loaded 2-core machine
	}
	for time.Since(start) < limit {
		if got = admissions(b); got >= n {
			last = time.Now()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.stop()
	if last.IsZero() {
		t.Fatalf("only %d of %d admitted", got, n)
	}
	// The metric counts a plan's admissions when its Execute ends, all at
	// once: the rate is read from Nomad, by the submit times of the
	// broker's register calls (each admission moves a job to its pool).
	moved, spread := submitSpread(t, c, "small-", start)
	if moved != n {
		t.Errorf("%d of %d jobs registered again since the broker started", moved, n)
	}
	for _, i := range []int{0, n - 1} { // in the pool the broker moved them to
		j := jobInfo(t, c, "workspace-b", fmt.Sprintf("small-%03d", i))
		if j.NodePool == nil || *j.NodePool != "bench-empty" {
			t.Errorf("small-%03d is in pool %v, want bench-empty", i, j.NodePool)
		}
	}
	rate := float64(n-1) / spread.Seconds()
	if timed {
		t.Logf("admitted %d jobs: %.0f per second from the first admission to the last (%s, Nomad's submit times), %s from broker start (list, plan and act)",
			n, rate, spread.Round(time.Millisecond), last.Sub(start).Round(time.Millisecond))
	} else {
		t.Logf("admitted %d jobs in %s from broker start (%s from the first admission to the last)", n,
			last.Sub(start).Round(time.Millisecond), spread.Round(time.Millisecond))
	}
	t.Logf("admission rate against raw register calls on the same agent: broker %.0f/s, raw %.0f/s (%s for %d), ratio %.2fx",
		rate, raw, rawSpread.Round(time.Millisecond), n, rate/raw)
	for i := 0; i < n; i++ {
		_, _, _ = c.Jobs().Deregister(fmt.Sprintf("small-%03d", i), true, &api.WriteOptions{Namespace: "workspace-b"})
	}
}

// smallJob is job i of admissionRate's queue: no GPU, gputide_pool naming
// the empty pool, in the holding pool.
func smallJob(prefix string, i int) *api.Job {
	s := jobSpec{Namespace: "workspace-b", ID: fmt.Sprintf("%s%03d", prefix, i), Type: "batch", Priority: 50, Count: 1,
		Meta: map[string]string{"gputide_pool": "bench-empty"}}
	j := s.job()
	j.TaskGroups[0].Tasks[0].Resources.Devices = nil
	return j
}

// queueSmall registers n small jobs into the holding pool, 8 in flight,
// and returns the job modify index Nomad gave each.
func queueSmall(t *testing.T, c *api.Client, prefix string, n int) []uint64 {
	t.Helper()
	index := make([]uint64, n)
	forEach(n, 8, func(i int) {
		resp, _, err := c.Jobs().Register(smallJob(prefix, i), &api.WriteOptions{Namespace: "workspace-b"})
		if err != nil {
			t.Error(err)
			return
		}
		index[i] = resp.JobModifyIndex
	})
	return index
}

// forEach calls fn(0..n-1) with workers calls in flight.
func forEach(n, workers int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// rawRegisterRate queues n jobs like admissionRate's, then makes the move an
// admission makes with plain register calls: each job registered again
// into bench-empty from the spec the test holds, its job modify index
// enforced and counts preserved, as many in flight as the broker's Actor
// (act.DefaultWorkers). It returns the rate from Nomad's submit times,
// first to last, and that spread; the jobs are purged before it returns.
func rawRegisterRate(t *testing.T, c *api.Client, n int) (float64, time.Duration) {
	t.Helper()
	index := queueSmall(t, c, "raw-", n)
	start := time.Now()
	forEach(n, act.DefaultWorkers, func(i int) {
		j := smallJob("raw-", i)
		j.NodePool = new("bench-empty")
		opts := &api.RegisterOptions{EnforceIndex: true, ModifyIndex: index[i], PreserveCounts: true}
		if _, _, err := c.Jobs().RegisterOpts(j, opts, &api.WriteOptions{Namespace: "workspace-b"}); err != nil {
			t.Error(err)
		}
	})
	moved, spread := submitSpread(t, c, "raw-", start)
	if moved != n {
		t.Errorf("%d of %d raw registers seen by Nomad", moved, n)
	}
	forEach(n, 8, func(i int) {
		_, _, _ = c.Jobs().Deregister(fmt.Sprintf("raw-%03d", i), true, &api.WriteOptions{Namespace: "workspace-b"})
	})
	return float64(n-1) / spread.Seconds(), spread
}

// submitSpread returns how many workspace-b jobs named prefix... were
// registered since since, and the time from the first such submit to the
// last (Nomad's submit times).
func submitSpread(t *testing.T, c *api.Client, prefix string, since time.Time) (int, time.Duration) {
	t.Helper()
	stubs, _, err := c.Jobs().List(&api.QueryOptions{Namespace: "workspace-b", Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	var firstAt, lastAt int64
	moved := 0
	for _, j := range stubs {
		if j.SubmitTime < since.UnixNano() {
			continue
		}
		moved++
		if firstAt == 0 || j.SubmitTime < firstAt {
			firstAt = j.SubmitTime
		}
		lastAt = max(lastAt, j.SubmitTime)
	}
	return moved, time.Duration(lastAt - firstAt)
}

// appendConfig appends HCL lines to a broker config file.
func appendConfig(t *testing.T, cfgPath, hcl string) {
	t.Helper()
	f, err := os.OpenFile(cfgPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintln(f, hcl); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// admissions reads gputide_admissions_total from the broker's metrics.
func admissions(b *broker) int {
	resp, err := http.Get("http://" + b.Addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	total := 0
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "gputide_admissions_total{") {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			total += int(v)
		}
	}
	return total
}
