package command

import (
	"strings"

	"github.com/gputide/gputide/quota-broker/version"
)

// VersionCommand is "gputide version": it prints the version.
type VersionCommand struct {
	Meta
}

// Help returns the command's usage text.
func (c *VersionCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide version

  Prints the version of gputide.
`)
}

// Synopsis returns the one-line description shown in the command list.
func (c *VersionCommand) Synopsis() string { return "Print the gputide version" }

// Run prints "gputide <version>" (see version.String) and returns 0; extra arguments are an
// error (1).
func (c *VersionCommand) Run(args []string) int {
	if len(args) != 0 {
		c.Ui.Error("This command takes no arguments")
		c.Ui.Error(`For additional help try 'gputide version -help'`)
		return 1
	}
	c.Ui.Output("gputide " + version.String())
	return 0
}
