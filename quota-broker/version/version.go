// Package version is gputide's one version, shared by the gputide CLI and
// the Nomad device plugin. It imports nothing of the project, so that every
// binary can import it.
package version

// Number is the release version without a leading "v": a semantic version
// that github.com/hashicorp/go-version parses, as Nomad does with the device
// plugin's PluginInfo.plugin_version.
const Number = "0.1.0-dev"

// Commit is the git commit the binary was built from, empty unless the
// build sets it: make build passes
// -ldflags "-X github.com/gputide/gputide/quota-broker/version.Commit=<sha>".
var Commit = ""

// String is the version as the binaries print it: "v0.1.0-dev (<commit>)"
// when the build set Commit, otherwise "v0.1.0-dev".
func String() string {
	if Commit == "" {
		return "v" + Number
	}
	return "v" + Number + " (" + Commit + ")"
}
