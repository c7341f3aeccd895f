// Command nomad-device-gputide is gputide's Nomad device plugin for NVIDIA
// GPUs. Nomad launches it from the client's plugin_dir when the agent config
// has a plugin "nomad-device-gputide" block; see docs/device-plugin.md.
//
// Run by hand it prints its version with -version; otherwise it refuses to
// run outside Nomad (go-plugin's magic cookie check).
package main

import (
	"fmt"
	"os"

	"github.com/gputide/gputide/device-plugin/plugin"
	"github.com/gputide/gputide/quota-broker/version"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-version" || os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Printf("nomad-device-gputide %s, plugin %s, device API %s\n", version.String(), plugin.PluginName, plugin.DeviceAPIVersion)
		return
	}
	log := plugin.NewLogger()
	plugin.Serve(plugin.New(log, nil), log)
}
