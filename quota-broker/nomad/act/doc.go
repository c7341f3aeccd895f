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
//
// Idle groups (scaledown.go, issue 11): Actor.Execute lowers the count of
// a group with a gputide-idle policy (build.IdleView) to its live
// allocations (never below 1) after stopping one of them or when some stay
// unplaced for Settle.
//
// Calendar actions (calact.go): stop_job deregisters a job whole and writes
// its status once its allocations are gone; suspend moves a flex job whole
// to the holding pool; hold actions are only counted (the agent records
// them in its store).
//
// Intents (fence.go): before each Nomad call the Actor asks its Fence, so
// that only the lock holder acts and each call is recorded first (L12).
//
// Memory: the Actor keeps no facts between plans (issue 18). Which
// allocations stop for whom, which jobs were admitted and when, and the
// holds are the agent's store records: the Fence writes them before each
// call, and the agent reads them back into the next build.Input. What it
// keeps is the status meta still to write of a job stopped whole (calact.go),
// since when an idle group has had allocations unplaced (scaledown.go), and
// what it last logged (a wait reason, a deferral), so as not to repeat it.
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
