package act

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/gputide/gputide/quota-broker/nomad/device"
	"github.com/gputide/gputide/quota-broker/nomad/watch"

	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

// Job status values the broker writes into gputide_status (only on jobs
// with no live allocations).
const (
	StatusWaiting = "waiting" // the job waits for quota or room; gputide_reason says why
	StatusError   = "error"   // a gputide meta value is invalid; gputide_reason names it
	StatusExpired = "expired" // a flex request waited longer than its max_wait
)

// DefaultWorkers is how many admissions an Actor sends to Nomad at once.
const DefaultWorkers = 16

// Actor carries out plans on Nomad (DESIGN §5): admission moves a job from
// the holding pool to its pool; preemption moves the victim's job to the
// holding pool, waits for Nomad's answer, then stops the allocation; a job
// registered straight into a real pool that L3 does not admit is suspended
// (moved to the holding pool, its allocations stopped). It keeps no facts
// between plans (issue 18): which allocations are stopping for whom, which
// jobs were admitted and when, and the holds are the broker's store
// records, read into each build and written through the Fence before each
// call; so are the status still to write on a job it stopped whole
// (JobView.Stopped) and since when an idle group has had allocations
// unplaced (IdleView.UnplacedSince). It counts and records nothing itself: Execute reports what it did
// in its Outcome, and the broker (package agent) feeds its metrics and
// preemption record from that.
type Actor struct {
	Client      *api.Client
	State       *watch.State // updated at once after each successful call
	HoldingPool string
	Logger      hclog.Logger
	// DryRun logs what would be done and calls nothing.
	DryRun  bool
	Now     func() time.Time
	Workers int
	// Settle is how long an idle group may have allocations unplaced
	// before its count is lowered (default DefaultSettle).
	Settle time.Duration
	// Fence, when set, is asked before each act on Nomad (the leader
	// check, then the intent written to the store, DESIGN L12).
	Fence Fence

	mu      sync.Mutex
	reasons map[plan.JobKey]string // last logged wait reason per job (logging only)
	// lastDeferred is the number of stops deferred by the last Execute
	// (logging only).
	lastDeferred int
}

// Outcome reports what an Execute call did: counts, and for the broker to
// count and record, each preemption, each job moved between pools and each
// failed call's action.
type Outcome struct {
	Admitted, Suspended, Stopped, MetaWrites, Expired int
	// ScaledDown counts idle groups whose count was lowered (step 8).
	ScaledDown int
	// JobsStopped, JobsSuspended and Held count the stop_job, suspend and
	// hold actions carried out (steps 2a-2c, calact.go).
	JobsStopped, JobsSuspended, Held int
	// Deferred counts stop actions held back because other allocations are
	// still stopping for a claimant the broker cannot name.
	Deferred int
	Errors   []error
	// Preempted lists the allocations stopped for a claimant, in the
	// plan's order (DESIGN L8). Empty in a dry run.
	Preempted []Stop
	// Moves lists the jobs registered into another node pool: admissions
	// to their pool, victims' jobs and suspended jobs to the holding pool.
	Moves []Move
	// Failed lists the action of each failed Nomad call ("stop", "admit",
	// "suspend", "expire", "meta", "scale"), in the order they failed.
	Failed []string
}

// Stop is one allocation the Actor stopped for a claimant (DESIGN L8).
type Stop struct {
	Time      time.Time     // when Nomad accepted the stop, UTC
	Claimant  plan.GroupKey // the plan's Action.For
	Namespace string        // the victim's
	Job       string
	Alloc     string
	Node      string
	GPUs      int
	Rule      plan.Rule
	Reason    string

	// Reservation is the plan's Action.Reservation: the booking a stop of
	// rule L10.drain or L10.start was made for (Claimant is then zero).
	Reservation string
}

// Move is one job the Actor registered into another node pool.
type Move struct {
	Namespace string
	Job       string
	Pool      string // the pool it went to
	// Admission: to the pool it asked for; else to the holding pool (a
	// victim's job, or a suspended straight registration).
	Admission bool
}

func (a *Actor) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Actor) holding() string {
	if a.HoldingPool == "" {
		return build.DefaultHoldingPool
	}
	return a.HoldingPool
}

// Execute carries out p, made from b, in these steps (each a method of
// execution below):
//
//  1. deferStops: if b has allocations stopping for a claimant the broker
//     cannot name, every stop is deferred (and its claimant not admitted)
//     until those are gone, so that nothing is stopped twice;
//  2. announce: with a Fence, the intent of every stop is written before
//     the first call (L12), so that a successor finishes a preemption this
//     broker began instead of choosing other victims; a claimant whose
//     intent cannot be written is skipped;
//     2a. stopJobs: stop_job actions (L10.end, L11.max_run) stop their
//     whole job (deregister, no purge), once, the status to write
//     recorded first through the Fence;
//     2b. suspendJobs: suspend actions (L11.settle) suspend their whole
//     job as step 5 suspends a straight registration;
//     2c. countHolds: hold actions are counted (the broker records them
//     in its store before Execute);
//  3. preempt: in the plan's order, for each stop the victim's job is moved
//     to the holding pool (once per job) and, after Nomad's 200, the
//     allocation is stopped; the intents of stops not made are withdrawn;
//  4. admit, concurrently: jobs in the holding pool move to their pool
//     (claimants whose stops failed or were deferred are skipped), and so
//     do jobs there that ask for no GPU; a job registered straight into a
//     real pool is accepted as it is;
//  5. waitOrExpire: a job registered straight into a real pool that must
//     wait is suspended; a job waiting in the holding pool with no live
//     allocation gets the reason in its meta; an expired flex request is
//     stopped (Stop = true) with its status in meta;
//  6. reportMetaErrors: jobs with a bad meta value in the holding pool get
//     the error in their meta, and straight registrations with one are
//     suspended;
//     6a. queueStoppedStatus: jobs stopped whole (in 2a, by this broker or
//     its predecessor: JobView.Stopped) with no live allocation left get
//     gputide_status = stopped and the rule as reason;
//  7. writeMeta, concurrently: the status meta of steps 5, 6 and 6a;
//  8. scaleDown: idle groups with an allocation stopped in step 3, or with
//     allocations unplaced for Settle since IdleView.UnplacedSince, get
//     their count lowered to their live allocations, never below 1
//     (scaledown.go).
//
// Errors of single calls are collected in the outcome; the rest of the
// plan is still carried out.
func (a *Actor) Execute(ctx context.Context, p *plan.Plan, b *build.Build) Outcome {
	x := &execution{a: a, p: p, b: b, skip: map[plan.GroupKey]bool{}, admitted: map[plan.JobKey]bool{}, pins: map[plan.JobKey]*quota.Flavor{}, metaText: map[plan.JobKey][2]string{}}
	x.deferStops()
	x.announce(ctx)
	x.stopJobs(ctx)
	x.suspendJobs(ctx)
	x.countHolds()
	x.preempt(ctx)
	x.admit(ctx)
	x.waitOrExpire(ctx)
	x.reportMetaErrors(ctx)
	x.queueStoppedStatus(ctx)
	x.writeMeta(ctx)
	x.scaleDown(ctx)
	return x.out
}

// execution is the state of one Execute call.
type execution struct {
	a *Actor
	p *plan.Plan
	b *build.Build

	mu  sync.Mutex // guards out in the concurrent steps
	out Outcome

	skip      map[plan.GroupKey]bool        // claimants not to admit now
	announced map[string]bool               // allocations whose stop intent step 2 wrote
	admitted  map[plan.JobKey]bool          // jobs admitted or accepted in step 3
	metaJobs  []*build.JobView              // jobs whose status meta step 6 writes
	pins      map[plan.JobKey]*quota.Flavor // the flavor each admission of step 4 pins
	metaText  map[plan.JobKey][2]string
}

// fail records a failed call of the given action.
func (x *execution) fail(action string, err error) {
	x.mu.Lock()
	x.out.Errors = append(x.out.Errors, err)
	x.out.Failed = append(x.out.Failed, action)
	x.mu.Unlock()
	x.a.Logger.Error("failed to carry out a plan action", "action", action, "error", err)
}

// moved records a job registered into another pool.
func (x *execution) moved(m Move) {
	x.mu.Lock()
	x.out.Moves = append(x.out.Moves, m)
	x.mu.Unlock()
}

// deferStops is step 1.
func (x *execution) deferStops() {
	a := x.a
	if len(x.b.UnknownStopping) == 0 {
		a.mu.Lock()
		a.lastDeferred = 0
		a.mu.Unlock()
		return
	}
	for _, act := range x.p.Actions {
		if act.Action == plan.ActionStop {
			x.skip[act.For] = true
			x.out.Deferred++
		}
	}
	a.mu.Lock()
	changed := a.lastDeferred != x.out.Deferred
	a.lastDeferred = x.out.Deferred
	a.mu.Unlock()
	if x.out.Deferred > 0 && changed {
		a.Logger.Info("deferring preemption until allocations already stopping are gone",
			"stopping", len(x.b.UnknownStopping), "deferred_stops", x.out.Deferred)
	}
}

// announce is step 2.
func (x *execution) announce(ctx context.Context) {
	x.announced = map[string]bool{}
	if x.a.Fence == nil || x.a.DryRun {
		return
	}
	for _, act := range x.p.Actions {
		if act.Action != plan.ActionStop || x.skip[act.For] {
			continue
		}
		if err := x.a.beforeStop(ctx, act); err != nil {
			x.skip[act.For] = true
			x.fail("stop", fmt.Errorf("not preempting allocation %s of job %s/%s: %w", act.Alloc, act.Namespace, act.Job, err))
			continue
		}
		x.announced[act.Alloc] = true
	}
}

// preempt is step 3.
func (x *execution) preempt(ctx context.Context) {
	moved := map[plan.JobKey]bool{}
	for _, act := range x.p.Actions {
		if act.Action != plan.ActionStop {
			continue
		}
		if x.skip[act.For] {
			if x.announced[act.Alloc] {
				x.a.withdraw(ctx, act.Alloc)
			}
			continue
		}
		stop, err := x.a.preempt(ctx, act, x.b, moved)
		if err != nil {
			x.skip[act.For] = true
			x.fail("stop", err)
			if x.announced[act.Alloc] {
				x.a.withdraw(ctx, act.Alloc)
			}
			continue
		}
		x.out.Stopped++
		if stop != nil {
			x.out.Preempted = append(x.out.Preempted, *stop)
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(moved), plan.JobKey.Compare) {
		if moved[k] {
			ns, id := k.Namespace, k.Job
			x.moved(Move{Namespace: ns, Job: id, Pool: x.a.holding()})
		}
	}
}

// admit is step 4.
func (x *execution) admit(ctx context.Context) {
	a, b := x.a, x.b
	var admits []*build.JobView
	for _, act := range x.p.Actions {
		k := plan.JobKey{Namespace: act.Namespace, Job: act.Job}
		if act.Action != plan.ActionAdmit || x.admitted[k] || x.skip[plan.GroupKey{Namespace: act.Namespace, Job: act.Job, Group: act.Group}] {
			continue
		}
		x.admitted[k] = true
		v := b.Jobs[k]
		if v == nil {
			continue
		}
		switch {
		case v.Direct:
			if err := a.beforeJob(ctx, k, WriteAdmit); err != nil {
				x.fail("admit", fmt.Errorf("not accepting job %s: %w", k, err))
				continue
			}
			a.Logger.Info("accepted a job registered straight into its pool", "job", k.String(), "pool", v.Pool, "reason", act.Reason)
		case v.Holding:
			admits = append(admits, v)
			if f, ok := pinFlavor(b, act.Flavor); ok {
				x.pins[k] = &f
			}
		}
	}
	for _, k := range slices.Concat(b.NoGPU, b.Ungoverned) {
		if v := b.Jobs[k]; v != nil && !x.admitted[k] {
			x.admitted[k] = true
			admits = append(admits, v)
		}
	}
	a.parallel(admits, func(v *build.JobView) {
		if err := a.admit(ctx, v, x.pins[v.Key]); err != nil {
			x.fail("admit", err)
			return
		}
		x.mu.Lock()
		x.out.Admitted++
		x.mu.Unlock()
		if !a.DryRun {
			ns, id := v.Key.Namespace, v.Key.Job
			x.moved(Move{Namespace: ns, Job: id, Pool: v.Options.Pool, Admission: true})
		}
	})
}

// waitOrExpire is step 5.
func (x *execution) waitOrExpire(ctx context.Context) {
	a := x.a
	waited := map[plan.JobKey]bool{}
	for _, act := range x.p.Actions {
		k := plan.JobKey{Namespace: act.Namespace, Job: act.Job}
		v := x.b.Jobs[k]
		if v == nil || x.admitted[k] || waited[k] {
			continue
		}
		switch act.Action {
		case plan.ActionWait:
			waited[k] = true
			a.logWait(k, act)
			switch {
			case v.Direct:
				x.suspend(ctx, v, act.Reason)
			case v.Holding && v.Live == 0:
				x.metaJobs = append(x.metaJobs, v)
				x.metaText[k] = [2]string{StatusWaiting, waitText(act)}
			}
		case plan.ActionExpire:
			waited[k] = true
			if v.Holding && v.Live == 0 {
				if err := a.expire(ctx, v, act); err != nil {
					x.fail("expire", err)
				} else {
					x.out.Expired++
				}
			}
		}
	}
}

// suspend suspends one job for step 4 or 5 and records it.
func (x *execution) suspend(ctx context.Context, v *build.JobView, reason string) {
	moved, err := x.a.suspend(ctx, v, reason)
	if moved {
		ns, id := v.Key.Namespace, v.Key.Job
		x.moved(Move{Namespace: ns, Job: id, Pool: x.a.holding()})
	}
	if err != nil {
		x.fail("suspend", err)
		return
	}
	x.out.Suspended++
}

// reportMetaErrors is step 6.
func (x *execution) reportMetaErrors(ctx context.Context) {
	var bad []plan.JobKey // sorted after: a few of thousands of jobs
	for k, v := range x.b.Jobs {
		if v.MetaErr != nil {
			bad = append(bad, k)
		}
	}
	slices.SortFunc(bad, plan.JobKey.Compare)
	for _, k := range bad {
		v := x.b.Jobs[k]
		x.a.logWait(k, plan.Action{Rule: "meta", Reason: v.MetaErr.Error()})
		switch {
		case v.Direct:
			x.suspend(ctx, v, v.MetaErr.Error())
		case v.Holding && v.Live == 0:
			x.metaJobs = append(x.metaJobs, v)
			x.metaText[k] = [2]string{StatusError, v.MetaErr.Error()}
		}
	}
}

// writeMeta is step 7.
func (x *execution) writeMeta(ctx context.Context) {
	x.a.parallel(x.metaJobs, func(v *build.JobView) {
		t := x.metaText[v.Key]
		wrote, err := x.a.writeStatus(ctx, v, t[0], t[1], false)
		if err != nil {
			x.fail("meta", err)
			return
		}
		if t[0] == StatusStopped && !v.Stopped.IsZero() && !x.a.DryRun {
			x.a.forgetStop(ctx, v.Key) // the status a stop_job left to write is written
		}
		if wrote {
			x.mu.Lock()
			x.out.MetaWrites++
			x.mu.Unlock()
		}
	})
}

// waitText is a wait's gputide_reason: "<rule>: <reason>", the reason led
// by its flavor when the core tried one flavor ("L3: a100-1g: Quota1.2: 7
// of 7 GPUs in use; 1 more needed"; a wait across several names each in
// its reason already, DESIGN L13).
func waitText(act plan.Action) string {
	if act.Flavor != "" && act.Reasons == nil {
		return string(act.Rule) + ": " + act.Flavor + ": " + act.Reason
	}
	return string(act.Rule) + ": " + act.Reason
}

// logWait logs a job's wait reason when it changed since the last time.
func (a *Actor) logWait(k plan.JobKey, act plan.Action) {
	a.mu.Lock()
	if a.reasons == nil {
		a.reasons = map[plan.JobKey]string{}
	}
	text := waitText(act)
	changed := a.reasons[k] != text
	a.reasons[k] = text
	a.mu.Unlock()
	if changed {
		a.Logger.Info("job waits", "job", k.String(), "rule", act.Rule, "flavor", act.Flavor, "reason", act.Reason)
	}
}

func (a *Actor) parallel(jobs []*build.JobView, fn func(*build.JobView)) {
	workers := a.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	next := make(chan *build.JobView)
	var wg sync.WaitGroup
	for i := 0; i < workers && i < len(jobs); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := range next {
				fn(v)
			}
		}()
	}
	for _, v := range jobs {
		next <- v
	}
	close(next)
	wg.Wait()
}

// preempt moves the victim's job to the holding pool (once per job per
// Execute: moved[job] is set true when this call moved it), waits for the
// answer, and stops the allocation. It returns the stop done, nil in a dry
// run.
func (a *Actor) preempt(ctx context.Context, act plan.Action, b *build.Build, moved map[plan.JobKey]bool) (*Stop, error) {
	k := plan.JobKey{Namespace: act.Namespace, Job: act.Job}
	v := b.Jobs[k]
	if v == nil {
		return nil, fmt.Errorf("failed to preempt allocation %s: job %s is not known", act.Alloc, k)
	}
	if a.DryRun {
		a.Logger.Info("dry run: would preempt", "alloc", act.Alloc, "job", k, "gpus", act.GPUs, "claimant", act.For, "rule", act.Rule, "reason", act.Reason)
		return nil, nil
	}
	if err := a.check(ctx); err != nil {
		return nil, fmt.Errorf("not preempting allocation %s of job %s: %w", act.Alloc, k, err)
	}
	if _, done := moved[k]; !done && !v.Holding {
		if err := a.beforeJob(ctx, k, WriteRequeue); err != nil {
			return nil, fmt.Errorf("not moving victim job %s to the holding pool: %w", k, err)
		}
		if _, err := a.register(ctx, v, a.holding(), nil, false); err != nil {
			return nil, fmt.Errorf("failed to move victim job %s to the holding pool: %w", k, err)
		}
		moved[k] = true
	} else if !done {
		moved[k] = false // already in the holding pool
	}
	if err := a.check(ctx); err != nil {
		return nil, fmt.Errorf("not stopping allocation %s of job %s: %w", act.Alloc, k, err)
	}
	q := (&api.QueryOptions{Namespace: act.Namespace}).WithContext(ctx)
	if _, err := a.Client.Allocations().Stop(&api.Allocation{ID: act.Alloc}, q); err != nil {
		return nil, fmt.Errorf("failed to stop allocation %s of job %s: %w", act.Alloc, k, err)
	}
	if a.State != nil {
		a.State.MarkStopping(act.Alloc)
	}
	a.Logger.Info("preempted", "alloc", act.Alloc, "job", k, "node", act.Node, "gpus", act.GPUs,
		"claimant", act.For, "rule", act.Rule, "reason", act.Reason)
	return &Stop{Time: a.now().UTC(), Claimant: act.For, Reservation: act.Reservation, Namespace: act.Namespace, Job: act.Job, Alloc: act.Alloc,
		Node: act.Node, GPUs: act.GPUs, Rule: act.Rule, Reason: act.Reason}, nil
}

// pinFlavor returns the flavor an admit action of b's plan chose
// (plan.Action.Flavor, "" in a tree without flavor blocks: its implicit
// flavor), as the tree declares it; false when the tree has no such
// flavor (nothing is pinned then).
func pinFlavor(b *build.Build, name string) (quota.Flavor, bool) {
	var root *quota.Node
	if b.Snapshot != nil {
		root = b.Snapshot.Quota
	}
	name, err := quota.FlavorChoice(root, name)
	if err != nil {
		return quota.Flavor{}, false
	}
	for _, f := range quota.TreeFlavors(root) {
		if f.Name == name {
			return f, true
		}
	}
	return quota.Flavor{}, false
}

// admit moves a job from the holding pool to its pool, clearing the
// broker's status meta when the job has no live allocation. With pin
// set, the same register pins the job's GPU requests to that flavor
// (device.PinJob, DESIGN L13), unless the job already pinned it itself,
// or has live allocations: a changed device request is a destructive
// update, so such a job is moved unpinned (DESIGN §5).
func (a *Actor) admit(ctx context.Context, v *build.JobView, pin *quota.Flavor) error {
	if a.DryRun {
		a.Logger.Info("dry run: would admit", "job", v.Key.String(), "pool", v.Options.Pool)
		return nil
	}
	if err := a.beforeJob(ctx, v.Key, WriteAdmit); err != nil {
		return fmt.Errorf("not admitting job %s: %w", v.Key, err)
	}
	var meta map[string]*string
	if v.Live == 0 {
		meta = map[string]*string{jobmeta.MetaStatus: nil, jobmeta.MetaReason: nil}
	}
	if pin != nil && (v.Live > 0 || a.liveAllocs(v.Key) > 0) {
		a.Logger.Warn("admitting a job with live allocations without pinning its flavor (a destructive update)",
			"job", v.Key.String(), "flavor", pin.Name)
		pin = nil
	}
	if _, err := a.registerWith(ctx, v, v.Options.Pool, meta, false, pin); err != nil {
		return fmt.Errorf("failed to admit job %s into node pool %q: %w", v.Key, v.Options.Pool, err)
	}
	a.Logger.Debug("admitted", "job", v.Key, "pool", v.Options.Pool)
	return nil
}

// suspend moves a job to the holding pool and stops its live allocations.
// It reports whether the job was moved (even when a stop then failed).
func (a *Actor) suspend(ctx context.Context, v *build.JobView, reason string) (bool, error) {
	if a.DryRun {
		a.Logger.Info("dry run: would suspend", "job", v.Key, "reason", reason)
		return false, nil
	}
	if err := a.beforeJob(ctx, v.Key, WriteRequeue); err != nil {
		return false, fmt.Errorf("not suspending job %s: %w", v.Key, err)
	}
	if _, err := a.register(ctx, v, a.holding(), nil, false); err != nil {
		return false, fmt.Errorf("failed to suspend job %s: %w", v.Key, err)
	}
	ns, id := v.Key.Namespace, v.Key.Job
	var errs []error
	for _, al := range a.State.Allocs() {
		if al.Namespace != ns || al.JobID != id || !al.Live() || al.Stopping() {
			continue
		}
		if err := a.check(ctx); err != nil {
			errs = append(errs, fmt.Errorf("not stopping allocation %s of suspended job %s: %w", al.ID, v.Key, err))
			break
		}
		q := (&api.QueryOptions{Namespace: ns}).WithContext(ctx)
		if _, err := a.Client.Allocations().Stop(&api.Allocation{ID: al.ID}, q); err != nil {
			errs = append(errs, fmt.Errorf("failed to stop allocation %s of suspended job %s: %w", al.ID, v.Key, err))
			continue
		}
		a.State.MarkStopping(al.ID)
	}
	a.Logger.Info("suspended a job registered straight into a pool", "job", v.Key, "reason", reason)
	return true, errors.Join(errs...)
}

// expire stops a flex request that waited too long and says so in its meta.
func (a *Actor) expire(ctx context.Context, v *build.JobView, act plan.Action) error {
	reason := act.Reason
	if a.DryRun {
		a.Logger.Info("dry run: would expire", "job", v.Key.String(), "reason", reason)
		return nil
	}
	_, err := a.writeStatus(ctx, v, StatusExpired, string(act.Rule)+": "+reason, true)
	if err == nil {
		a.Logger.Info("flex request expired", "job", v.Key.String(), "reason", reason)
	}
	return err
}

// writeStatus writes gputide_status and gputide_reason into the meta of a
// job with no live allocations (and, with stop, stops it). It writes nothing
// when the meta already says the same. It reports whether it wrote.
func (a *Actor) writeStatus(ctx context.Context, v *build.JobView, status, reason string, stop bool) (bool, error) {
	if v.Live > 0 {
		return false, nil
	}
	if !stop && v.Job.Meta[jobmeta.MetaStatus] == status && v.Job.Meta[jobmeta.MetaReason] == reason {
		return false, nil
	}
	if a.DryRun {
		a.Logger.Info("dry run: would write job status", "job", v.Key.String(), "status", status, "reason", reason)
		return false, nil
	}
	if err := a.beforeJob(ctx, v.Key, WriteStatus); err != nil {
		return false, fmt.Errorf("not writing the status of job %s: %w", v.Key, err)
	}
	meta := map[string]*string{jobmeta.MetaStatus: &status, jobmeta.MetaReason: &reason}
	if _, err := a.register(ctx, v, "", meta, stop); err != nil {
		return false, fmt.Errorf("failed to write the status of job %s: %w", v.Key, err)
	}
	return true, nil
}

// register registers the job again with the given node pool ("" keeps
// it), meta changes (nil value: delete) and stop flag, from the spec the
// broker already holds (the watcher's State, kept current from the event
// stream and the broker's own writes), with that spec's job modify index
// enforced and the current counts preserved: a job changed since (by a user,
// or anyone) fails the call instead of being overwritten. On that conflict
// the job is read again and registered once more from the fresh spec; a
// second conflict is returned, for the next plan to try again. A spec the
// broker lacks is read once and kept. It refuses to change the meta of a
// job with live allocations: that would be a destructive update.
func (a *Actor) register(ctx context.Context, v *build.JobView, pool string, meta map[string]*string, stop bool) (*api.Job, error) {
	return a.registerWith(ctx, v, pool, meta, stop, nil)
}

// registerWith is register that also pins the job's GPU requests to
// flavor pin when it is not nil (changed); the caller checks that the job
// has no live allocation.
func (a *Actor) registerWith(ctx context.Context, v *build.JobView, pool string, meta map[string]*string, stop bool, pin *quota.Flavor) (*api.Job, error) {
	if len(meta) > 0 {
		if live := a.liveAllocs(v.Key); live > 0 {
			return nil, fmt.Errorf("refusing to change the meta of job %s: it has %d live allocations", v.Key, live)
		}
	}
	spec := a.heldSpec(v)
	if spec == nil {
		var err error
		if spec, err = a.readJob(ctx, v.Key); err != nil {
			return nil, err
		}
	}
	j := changed(spec, pool, meta, stop, pin)
	resp, err := a.registerAt(ctx, v.Key, j)
	if isIndexConflict(err) {
		a.Logger.Debug("job changed since the broker's copy of it; reading it again", "job", v.Key, "error", err)
		fresh, rerr := a.readJob(ctx, v.Key)
		if rerr != nil {
			return nil, fmt.Errorf("%w; reading it again: %w", err, rerr)
		}
		j = changed(fresh, pool, meta, stop, pin)
		if resp, err = a.registerAt(ctx, v.Key, j); isIndexConflict(err) {
			err = fmt.Errorf("job %s changed again after it was read (left for the next plan): %w", v.Key, err)
		}
	}
	if err != nil {
		return nil, err
	}
	if a.State != nil {
		a.State.NoteJob(v.Key, j, resp.JobModifyIndex)
	}
	a.registered(ctx, v.Key, resp.JobModifyIndex)
	return j, nil
}

// heldSpec returns the broker's own copy of the job's spec: the State's
// (newest: it has the broker's earlier writes of this plan), else the
// view's; nil when neither has one with a job modify index to enforce.
func (a *Actor) heldSpec(v *build.JobView) *api.Job {
	if a.State != nil {
		if j := a.State.Job(v.Key.Namespace, v.Key.Job); hasIndex(j) {
			return j
		}
	}
	if hasIndex(v.Job) {
		return v.Job
	}
	return nil
}

func hasIndex(j *api.Job) bool { return j != nil && j.JobModifyIndex != nil && *j.JobModifyIndex > 0 }

// readJob reads the job from Nomad and keeps it in the State.
func (a *Actor) readJob(ctx context.Context, key plan.JobKey) (*api.Job, error) {
	j, _, err := a.Client.Jobs().Info(key.Job, (&api.QueryOptions{Namespace: key.Namespace}).WithContext(ctx))
	if err != nil {
		return nil, err
	}
	if a.State != nil {
		a.State.KeepJob(key, j)
	}
	return j, nil
}

// changed returns a copy of spec with the node pool ("" keeps it), the
// meta changes, the stop flag and the flavor pin (nil: none;
// device.PinJob, on a deep copy of the task groups) applied; spec itself
// is left as it is (it may be the State's).
func changed(spec *api.Job, pool string, meta map[string]*string, stop bool, pin *quota.Flavor) *api.Job {
	j := *spec
	if pin != nil {
		if groups, ok := copyGroups(spec.TaskGroups); ok {
			j.TaskGroups = groups
			device.PinJob(&j, *pin)
		}
	}
	if len(meta) > 0 {
		m := make(map[string]string, len(spec.Meta)+len(meta))
		maps.Copy(m, spec.Meta)
		if _, ok := m[jobmeta.MetaSubmitted]; !ok {
			m[jobmeta.MetaSubmitted] = jobmeta.Submitted(spec).Format(time.RFC3339Nano)
		}
		for k, val := range meta {
			if val == nil {
				delete(m, k)
			} else {
				m[k] = *val
			}
		}
		j.Meta = m
	}
	if pool != "" {
		j.NodePool = &pool
	}
	if stop {
		t := true
		j.Stop = &t
	}
	return &j
}

// copyGroups returns a deep copy of groups (through JSON, as Nomad's api
// types have no Copy); false when they cannot be copied, which leaves the
// job unpinned rather than changing the State's copy.
func copyGroups(groups []*api.TaskGroup) ([]*api.TaskGroup, bool) {
	raw, err := json.Marshal(groups)
	if err != nil {
		return nil, false
	}
	var out []*api.TaskGroup
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, false
	}
	return out, true
}

// registerAt registers j with its own job modify index enforced and the
// current counts preserved.
func (a *Actor) registerAt(ctx context.Context, key plan.JobKey, j *api.Job) (*api.JobRegisterResponse, error) {
	opts := &api.RegisterOptions{EnforceIndex: true, PreserveCounts: true}
	if j.JobModifyIndex != nil {
		opts.ModifyIndex = *j.JobModifyIndex
	}
	wo := (&api.WriteOptions{Namespace: key.Namespace}).WithContext(ctx)
	resp, _, err := a.Client.Jobs().RegisterOpts(j, opts, wo)
	return resp, err
}

// isIndexConflict reports whether err is Nomad's answer to a register whose
// enforced job modify index is not the job's ("Enforcing job modify index
// 12: job exists with conflicting job modify index: 15", or "... job does
// not exist"), which the api returns as an HTTP 500 with that text.
func isIndexConflict(err error) bool {
	return err != nil && strings.Contains(err.Error(), api.RegisterEnforceIndexErrPrefix)
}

func (a *Actor) liveAllocs(key plan.JobKey) int {
	if a.State == nil {
		return 0
	}
	return a.State.LiveAllocs(key)
}
