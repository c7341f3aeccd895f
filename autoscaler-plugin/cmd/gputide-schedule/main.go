// Command gputide-schedule is the Nomad Autoscaler strategy plugin of that
// name (autoscaler-plugin/schedulestrategy). Put the binary in the agent's
// plugin_dir and declare it with `strategy "gputide-schedule" { driver =
// "gputide-schedule" }`.
package main

import (
	_ "time/tzdata" // the same counts on every host, whatever its zone files

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad-autoscaler/plugins"

	"github.com/gputide/gputide/autoscaler-plugin/schedulestrategy"
)

func main() {
	plugins.Serve(func(log hclog.Logger) interface{} { return schedulestrategy.New(log, nil) })
}
