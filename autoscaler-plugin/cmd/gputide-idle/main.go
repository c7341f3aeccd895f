// Command gputide-idle is the Nomad Autoscaler strategy plugin of that name
// (autoscaler-plugin/idlestrategy). Put the binary in the agent's plugin_dir
// and declare it with `strategy "gputide-idle" { driver = "gputide-idle" }`.
package main

import (
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad-autoscaler/plugins"

	"github.com/gputide/gputide/autoscaler-plugin/idlestrategy"
)

func main() {
	plugins.Serve(func(log hclog.Logger) interface{} { return idlestrategy.New(log) })
}
