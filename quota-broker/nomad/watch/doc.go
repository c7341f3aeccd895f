// Package watch is the reading part of gputide's Nomad adapter (DESIGN
// §4, §5): it watches a Nomad cluster through github.com/hashicorp/nomad/api
// and keeps a State of the nodes, allocations, jobs and job summaries the
// planning core needs. quota-broker/nomad/build turns the State into a
// plan.Snapshot and quota-broker/nomad/act carries out plans; both import
// this package, never the other way round.
//
// Reading (watch.go, list.go, state.go, events.go, nswatch.go): a full list
// at start (nodes with their device instances, allocations with their
// allocated devices, jobs, job summaries, blocked evaluations, namespaces),
// then the event stream
// (topics Job, Allocation, Evaluation, Node, Namespace) from the list's
// index. When the stream breaks the watcher reconnects and lists again, so
// the GPU ledger is re-derived from Nomad's live allocations each time (law
// L2); differences from the previous state are logged and the live state
// wins.
//
// The job meta and scaling policies are read by quota-broker/nomad/build.
package watch
