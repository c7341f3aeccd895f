package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// newNomadClient starts a client-only Nomad agent on loopback joined to
// server (a dev agent from newNomadAgent) and waits until the server lists
// its node, named name, as ready: a second GPU node with its own
// plugin_dir and plugin config (opts.Plugins, opts.ExtraConfig; ACL and
// ReadyTimeout as for newNomadAgent, ACL agents are not supported). Its
// Client talks to its own HTTP port, which forwards to the server; Stop,
// registered as cleanup, stops it as it stops a dev agent. Both agents
// run on this machine, so node attributes other than the devices are the
// same; the node name tells them apart.
func newNomadClient(t testing.TB, server *nomadAgent, name string, opts nomadOptions) *nomadAgent {
	t.Helper()
	if opts.ACL {
		t.Fatal("newNomadClient: ACL agents are not supported")
	}
	a := prepareAgent(t, opts.Plugins)
	ports := freePorts(t, 3)
	a.Addr = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	extra := fmt.Sprintf(`
name = %q

advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}

client {
  enabled           = true
  servers           = [%q]
  network_interface = "lo"
}
%s`, name, server.RPCAddr, opts.ExtraConfig)
	a.launch(agentConfig(a, ports, extra))
	timeout := opts.ReadyTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	err := waitFor(timeout, 250*time.Millisecond, func() error {
		if err := a.exitedEarly(); err != nil {
			return err
		}
		nodes, _, err := server.Client.Nodes().List(nil)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.Name == name && n.Status == api.NodeStatusReady {
				a.NodeID = n.ID
				return nil
			}
		}
		return fmt.Errorf("no ready node %q yet", name)
	})
	if err != nil {
		t.Fatalf("nomad client %q not ready: %v\n%s", name, err, tail(a.log.String(), 4000))
	}
	return a
}
