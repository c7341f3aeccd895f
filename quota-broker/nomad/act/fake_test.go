package act

import (
	"context"
	"testing"

	"github.com/gputide/gputide/quota-broker/nomad/internal/fakenomad"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
)

// The fake Nomad and its helpers (quota-broker/nomad/internal/fakenomad).
type (
	fakeNomad  = fakenomad.Nomad
	request    = fakenomad.Request
	syncBuffer = fakenomad.SyncBuffer
)

var (
	newFakeNomad  = fakenomad.New
	registered    = fakenomad.Registered
	testLogger    = fakenomad.TestLogger
	recorded      = fakenomad.Recorded
	e2eTree       = fakenomad.E2ETree
	at            = fakenomad.At
	claimTree     = fakenomad.ClaimTree
	jobC          = fakenomad.JobC
	trainingC     = fakenomad.TrainingC
	servePolicies = fakenomad.ServePolicies
	governedABC   = fakenomad.GovernedABC
)

// The allocations and jobs of the recording.
const (
	node    = fakenomad.Node
	allocC1 = fakenomad.AllocC1
	allocC2 = fakenomad.AllocC2
	allocB  = fakenomad.AllocB
	allocA  = fakenomad.AllocA
)

func everything(string) bool { return true }

// listRecorded lists the recording through the fake Nomad.
func listRecorded(t *testing.T) (*fakeNomad, *watch.State) {
	t.Helper()
	f := newFakeNomad(t)
	s, err := watch.ListAll(context.Background(), f.Client(), everything)
	if err != nil {
		t.Fatalf("ListAll: %v", err)
	}
	return f, s
}

// raw returns the maps of s, for tests that shape a state by hand before
// anything else reads it.
func raw(s *watch.State) watch.View {
	var v watch.View
	s.Edit(func(x watch.View) { v = x })
	return v
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
