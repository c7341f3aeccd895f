// Command gputide-apm is the Nomad Autoscaler APM plugin of that name
// (autoscaler-plugin/apmplugin). Put the binary in the agent's plugin_dir and
// declare it with `apm "gputide-apm" { driver = "gputide-apm" }`.
package main

import (
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad-autoscaler/plugins"

	"github.com/gputide/gputide/autoscaler-plugin/apmplugin"
)

func main() {
	plugins.Serve(func(log hclog.Logger) interface{} { return apmplugin.New(log, nil) })
}
