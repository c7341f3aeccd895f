package act

import (
	"github.com/gputide/gputide/quota-broker/nomad/internal/fakenomad"
	"github.com/gputide/gputide/quota-broker/nomad/internal/watchtest"
)

// The fake Nomad and its helpers (quota-broker/nomad/internal/fakenomad).
type (
	fakeNomad  = fakenomad.Nomad
	request    = fakenomad.Request
	syncBuffer = fakenomad.SyncBuffer
)

var (
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

// Shared with the build and act tests (internal/watchtest).
var (
	listRecorded = watchtest.ListRecorded
	raw          = watchtest.Raw
)

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
