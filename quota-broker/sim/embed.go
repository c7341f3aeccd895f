package sim

import (
	"embed"
	"io/fs"
)

// The reference scenario is embedded so that `gputide sim` works from any
// folder and on a fresh clone: a copy of examples/reference/{scenario,quota}.hcl
// and examples/traces-sample (kept identical by TestEmbeddedCopies; refresh
// with go generate).
//
//go:generate sh -c "cp ../../examples/reference/scenario.hcl ../../examples/reference/quota.hcl embedded/reference/ && cp ../../examples/traces-sample/*.csv embedded/traces-sample/"
//go:embed embedded
var embedded embed.FS

// ReferencePath is where the reference scenario lives in the repository.
const ReferencePath = "examples/reference/scenario.hcl"

// EmbeddedFS is the embedded copy of the reference scenario and the trace
// samples, rooted so that "reference/scenario.hcl" is the scenario.
func EmbeddedFS() fs.FS {
	sub, err := fs.Sub(embedded, "embedded")
	if err != nil {
		panic(err)
	}
	return sub
}

// LoadReference reads the embedded reference scenario. It reads its traces
// from the embedded samples.
func LoadReference() (*Scenario, error) {
	return LoadFS(EmbeddedFS(), "reference/scenario.hcl", "(embedded) ")
}
