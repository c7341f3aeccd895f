// Package pluginconf checks the config map that the Nomad Autoscaler v0.5.0 agent
// gives a plugin's SetConfig: the agent's plugin block (`config = {...}`) with the
// agent's own Nomad settings merged in under keys that start with "nomad_"
// (nomad_address, nomad_token, ...; DESIGN §8). Our plugins ignore those keys
// unless they name them, and refuse any other key they do not know, by name, so
// that a misspelt setting is not silently ignored (issue 11).
package pluginconf

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// NomadPrefix starts the keys the agent merges into every plugin block.
const NomadPrefix = "nomad_"

// ErrUnknownKey is wrapped by the error Check returns for a key the plugin does
// not know.
var ErrUnknownKey = errors.New("unknown key")

// Error is a bad plugin-block setting. Error() reads
// "<plugin>: config key <Key>: <Reason>".
type Error struct {
	Plugin string // the plugin's name, e.g. "gputide-apm"
	Key    string // the key as written in the plugin block
	Reason string
	Err    error // a sentinel such as ErrUnknownKey, or nil
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: config key %q: %s", e.Plugin, e.Key, e.Reason)
}

func (e *Error) Unwrap() error { return e.Err }

// Check refuses the first key of cfg, in sorted order, that neither starts with
// NomadPrefix nor is one of known. The error names the key and lists the known
// ones.
func Check(plugin string, cfg map[string]string, known ...string) error {
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		if strings.HasPrefix(k, NomadPrefix) || slices.Contains(known, k) {
			continue
		}
		reason := "unknown key; this plugin takes no keys here"
		if len(known) > 0 {
			reason = "unknown key; known keys are " + strings.Join(known, ", ")
		}
		return &Error{Plugin: plugin, Key: k, Reason: reason, Err: ErrUnknownKey}
	}
	return nil
}
