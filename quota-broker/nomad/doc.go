// Package nomad is gputide's Nomad adapter (DESIGN §4, §5): it watches a
// Nomad cluster through github.com/hashicorp/nomad/api, keeps a State of
// the nodes, allocations, jobs and job summaries the planning core needs,
// builds a plan.Snapshot from it, and carries out plans.
//
// Reading (watch.go, list.go, state.go): a full list at start (nodes with
// their device instances, allocations with their allocated devices, jobs,
// job summaries, blocked evaluations, namespaces), then the event stream
// (topics Job, Allocation, Evaluation, Node, Namespace) from the list's
// index. When the stream breaks the watcher reconnects and lists again, so
// the GPU ledger is re-derived from Nomad's live allocations each time (law
// L2); differences from the previous state are logged and the live state
// wins.
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
// Scaling policies (policies.go, scaledown.go, issue 11): a PolicyWatcher
// keeps the scaling policies of governed namespaces (blocking list, then
// each changed policy); groups with a gputide-idle policy become the
// snapshot's idle groups, and Actor.Execute lowers their count to their live
// allocations (never below 1) after stopping one of them or when some stay
// unplaced for Settle. The gputide-schedule policies are kept for pre-warm.
//
// Job meta is written only on jobs with no live allocations: a meta change
// is a destructive update that would replace running allocations.
//
// Reporting: the adapter counts and records nothing. Actor.Execute returns
// an Outcome listing each preemption, each job moved between pools and each
// failed call; the agent feeds the Prometheus metrics
// (quota-broker/metrics) and the preemption record (quota-broker/history)
// from it.
package nomad
