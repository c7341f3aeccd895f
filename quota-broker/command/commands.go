// Package command holds gputide's CLI commands, in the style of the nomad
// CLI (github.com/hashicorp/cli): one type per command with Help, Synopsis
// and Run, a shared Meta for input and output, tables drawn with columnize
// and a -json flag where a command prints data.
//
// The command registry is Commands, in this file: a new command is one
// line there.
package command

import (
	"io"

	"github.com/hashicorp/cli"

	"github.com/gputide/gputide/internal/version"
)

// Meta is what every command is given: where to read standard input from
// (for "-" arguments) and the UI to write to (Output goes to standard
// output, Error to standard error).
type Meta struct {
	Ui    cli.Ui
	Stdin io.Reader
}

// Commands returns the command registry: the name a user types (nested
// commands as "quota status", with a parent "quota" command) mapped to a
// factory. Add a command with one line here.
func Commands(m Meta) map[string]cli.CommandFactory {
	return map[string]cli.CommandFactory{
		"agent":   func() (cli.Command, error) { return &AgentCommand{Meta: m}, nil },
		"plan":    func() (cli.Command, error) { return &PlanCommand{Meta: m}, nil },
		"sim":     func() (cli.Command, error) { return &SimCommand{Meta: m}, nil },
		"version": func() (cli.Command, error) { return &VersionCommand{Meta: m}, nil },
	}
}

// Run runs the gputide CLI with args (without the program name) and
// returns the exit code: 0 on success, 1 on an error (bad input, bad
// flags), 127 for an unknown command. Normal output and requested help
// (-help, -version) go to stdout; errors, and the help shown for a wrong
// command, to stderr.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	m := Meta{
		Ui:    &cli.BasicUi{Reader: stdin, Writer: stdout, ErrorWriter: stderr},
		Stdin: stdin,
	}
	c := &cli.CLI{
		Name:        "gputide",
		Version:     "gputide " + version.String(),
		Args:        args,
		Commands:    Commands(m),
		HelpFunc:    cli.BasicHelpFunc("gputide"),
		HelpWriter:  stdout,
		ErrorWriter: stderr,
	}
	code, err := c.Run()
	if err != nil {
		m.Ui.Error("Error executing CLI: " + err.Error())
		return 1
	}
	return code
}
