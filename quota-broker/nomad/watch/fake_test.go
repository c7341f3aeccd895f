package watch

import "github.com/gputide/gputide/quota-broker/nomad/internal/fakenomad"

// The fake Nomad and its helpers (quota-broker/nomad/internal/fakenomad).
type (
	fakeNomad  = fakenomad.Nomad
	syncBuffer = fakenomad.SyncBuffer
)

var (
	newFakeNomad  = fakenomad.New
	eventLines    = fakenomad.EventLines
	testLogger    = fakenomad.TestLogger
	jsonUnmarshal = fakenomad.JSONUnmarshal
)

// The allocations and jobs of the recording.
const (
	node    = fakenomad.Node
	allocC1 = fakenomad.AllocC1
	allocC2 = fakenomad.AllocC2
	allocB  = fakenomad.AllocB
	allocA  = fakenomad.AllocA
)
