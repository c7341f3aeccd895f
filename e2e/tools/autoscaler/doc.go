// Package autoscaler is a tools module that pins github.com/hashicorp/nomad-autoscaler
// v0.5.0 so that build.sh can build the real autoscaler agent for the end-to-end tests
// (issue 11 item 7). It has no code of its own; do not run `go mod tidy` here, which
// would drop the requirement (nothing imports the agent's main package).
package autoscaler
