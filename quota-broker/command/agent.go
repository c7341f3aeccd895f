package command

import (
	"context"
	"flag"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/gputide/gputide/quota-broker/agent"
	"github.com/hashicorp/go-hclog"
)

// AgentCommand is "gputide agent": the quota broker daemon.
type AgentCommand struct {
	Meta
}

// Help returns the command's usage text.
func (c *AgentCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide agent -config <broker.hcl> [-dry-run]

  Agent runs the quota broker against a Nomad cluster. It lists Nomad's
  nodes, allocations, jobs and evaluations, follows the event stream, plans
  on every change and at least every interval, and carries the plans out:
  it admits queued jobs (moves them from the holding pool to their pool),
  suspends jobs that may not run, and stops the allocations chosen as
  victims, after moving their jobs to the holding pool so that Nomad does
  not place them back on the freed GPUs.

  It never acts on state older than the configured staleness bound and
  stops acting while Nomad is unreachable. With a consul block several
  agents may run: the holder of the Consul session lock acts, the others
  plan, serve reads and take over when it stops (L12). It stops gracefully
  on SIGINT or SIGTERM, releasing the lock. See
  examples/reference/broker.hcl for the configuration.

Agent Options:

  -config=<path>
    The agent configuration file (HCL). Required.

  -dry-run
    Plan and log the plans, but change nothing in Nomad.
`)
}

// Synopsis returns the one-line description.
func (c *AgentCommand) Synopsis() string { return "Run the quota broker against Nomad" }

// Run runs the agent until SIGINT or SIGTERM. It returns 0 after a graceful
// stop and 1 on a configuration or start-up error.
func (c *AgentCommand) Run(args []string) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var path string
	var dry bool
	fs.StringVar(&path, "config", "", "")
	fs.BoolVar(&dry, "dry-run", false, "")
	if err := fs.Parse(args); err != nil {
		c.Ui.Error(err.Error())
		c.Ui.Error(c.Help())
		return 1
	}
	if path == "" || fs.NArg() > 0 {
		c.Ui.Error("agent needs -config <file> and no arguments")
		c.Ui.Error(c.Help())
		return 1
	}
	cfg, err := agent.LoadConfig(path)
	if err != nil {
		c.Ui.Error("Error: " + err.Error())
		return 1
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "gputide", Level: hclog.LevelFromString(cfg.LogLevel), Output: os.Stderr})
	a, err := agent.New(cfg, agent.Options{DryRun: dry, Logger: log})
	if err != nil {
		c.Ui.Error("Error: " + err.Error())
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := a.Run(ctx); err != nil {
		c.Ui.Error("Error: " + err.Error())
		return 1
	}
	return 0
}
