package watch

import "github.com/gputide/gputide/quota-broker/nomad/internal/fakenomad"

// The fake Nomad and its helpers (quota-broker/nomad/internal/fakenomad).
type (
	fakeNomad  = fakenomad.Nomad
	request    = fakenomad.Request
	syncBuffer = fakenomad.SyncBuffer
)

var (
	newFakeNomad  = fakenomad.New
	eventLines    = fakenomad.EventLines
	registered    = fakenomad.Registered
	testLogger    = fakenomad.TestLogger
	jsonUnmarshal = fakenomad.JSONUnmarshal
	recorded      = fakenomad.Recorded
	e2eTree       = fakenomad.E2ETree
	at            = fakenomad.At
)

// The allocations and jobs of the recording.
const (
	node    = fakenomad.Node
	allocC1 = fakenomad.AllocC1
	allocC2 = fakenomad.AllocC2
	allocB  = fakenomad.AllocB
	allocA  = fakenomad.AllocA
)
