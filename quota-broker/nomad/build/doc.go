// Package build turns the watched Nomad state (quota-broker/nomad/watch)
// into the plan.Snapshot the planning core plans on: the building part of
// gputide's Nomad adapter (DESIGN §4, §5). From does it in named steps
// (snapshot.go); meta.go reads the gputide job meta, calendar.go the times
// the calendar rules need (kill_timeout, max_run, admitted_at, first sight,
// requeue) and prewarm.go the pre-warm entries.
//
// Scaling policies (policies.go, issue 11): a PolicyWatcher keeps the
// scaling policies of governed namespaces (blocking list, then each changed
// policy); groups with a gputide-idle policy become the snapshot's idle
// groups (act.Actor.Execute scales them down), and the gputide-schedule
// policies are kept for pre-warm.
package build
