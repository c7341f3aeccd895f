package e2e

// What "nomad job run" of an admitted job does (docs/nomad-integration.md,
// "Running an admitted job again"), measured on a real agent: the spec
// names the holding pool, so the job moves back there; Nomad applies the
// pool change in place and keeps the running allocation (also when the
// spec changed, as the replacement cannot be placed in a pool with no
// nodes); the job is not pending, so the broker does not admit it again
// while that allocation runs. Pins the behaviour the docs describe.

import (
	"slices"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/build"
)

func TestRerunOfAnAdmittedJob(t *testing.T) {
	a := startGPUNomad(t)
	c := a.Client
	startBroker(t, a.Addr, 3, 5)
	spec := jobSpec{Namespace: "workspace-b", ID: "training", Type: "batch", Priority: 50, Count: 1, GPUs: 2}
	submit(t, c, spec)
	first := waitRunning(t, c, "workspace-b", "training", 1, 30*time.Second)
	if j := jobInfo(t, c, "workspace-b", "training"); *j.NodePool != "default" {
		t.Fatalf("admitted job in pool %q, want default", *j.NodePool)
	}
	check := func(what string) {
		t.Helper()
		// Several planning cycles (interval 2s).
		time.Sleep(5 * time.Second)
		if j := jobInfo(t, c, "workspace-b", "training"); *j.NodePool != build.DefaultHoldingPool {
			t.Errorf("%s: job in pool %q, want the holding pool %q", what, *j.NodePool, build.DefaultHoldingPool)
		}
		if got := running(t, c, "workspace-b", "training"); !slices.Equal(got, first) {
			t.Errorf("%s: running %v, want the first allocation %v still running", what, got, first)
		}
	}
	submit(t, c, spec) // the same spec: only node_pool differs from Nomad's job
	check("same spec again")
	spec.Meta = map[string]string{"note": "v2"} // a destructive change
	submit(t, c, spec)
	check("changed spec")
}
