// Package act carries out plans on Nomad: it is the acting part of
// gputide's Nomad adapter (DESIGN §4, §5), next to quota-broker/nomad/watch
// (the State) and quota-broker/nomad/build (the snapshot), whose types it
// uses; neither imports it (the agent does, and quota-broker/history and
// quota-broker/metrics for its Outcome).
//
// Acting (act.go): Nomad CE places a job the moment it is registered, so
// governed jobs wait in a holding node pool with no nodes ("gputide-queue").
//
//   - admission moves a job from the holding pool to its pool (job meta
//     gputide_pool, default "default");
//   - suspension moves it back to the holding pool;
//   - preemption moves each victim's job to the holding pool, waits for
//     Nomad's answer, and only then stops the victim allocation. Stopping
//     first would let Nomad place the victim's replacement on the GPUs
//     meant for the claimant within about 20 ms (measured on Nomad 1.11.3,
//     see docs/nomad-integration.md); with the job in an empty pool the
//     replacement waits there until the broker admits it again (law L7).
//     The claimant is admitted in the same Execute, after all its stops
//     succeeded: its evaluation waits blocked, and Nomad places it in the
//     Raft apply that records the victims complete. No other order was
//     faster on Nomad 1.11.3 (issue 18: the claimant first, one write with
//     stop = true, the kill signal sent directly, registering once the
//     victims are complete; docs/benchmarks.md, "Preemption
//     time-to-running"): Nomad places a claimant only once its client has
//     reported the victims complete, and then reports the new allocation
//     running at its next 1 s batch, whatever the broker does.
//
// Idle groups (scaledown.go, issue 11): Actor.Execute lowers the count of
// a group with a gputide-idle policy (policies.IdleView) to its live
// allocations (never below 1) after stopping one of them or when some stay
// unplaced for Settle (since policies.IdleView.UnplacedSince, the broker's
// record).
//
// Calendar actions (calact.go): stop_job records the status to write
// through the Fence, deregisters a job whole and writes that status once
// its allocations are gone (build.JobView.Stopped, the broker's record); suspend moves a flex job whole
// to the holding pool; hold actions are only counted (the agent records
// them in its store).
//
// Intents (fence.go): before each Nomad call the Actor asks its Fence, so
// that only the lock holder acts and each call is recorded first (L12).
//
// Memory: the Actor keeps no facts between plans (issue 18). Which
// allocations stop for whom, which jobs were admitted and when, the holds,
// the status still to write on a job stopped whole and since when an idle
// group has had allocations unplaced are the agent's store records: the
// Fence (or the agent's record step) writes them before each call, and the
// agent reads them back into the next build.Input, so a successor carries
// on from them. The Actor keeps only what it last logged (a wait reason, a
// deferral), so as not to repeat it.
//
// Job meta is written only on jobs with no live allocations: a meta change
// is a destructive update that would replace running allocations.
//
// Reporting: the adapter counts and records nothing. Actor.Execute returns
// an Outcome listing each preemption, each job moved between pools and each
// failed call; the agent feeds the Prometheus metrics
// (quota-broker/metrics) and the preemption record (quota-broker/history)
// from it.
package act
