// Package command holds gputide's CLI commands, in the style of the nomad
// CLI (github.com/hashicorp/cli): one type per command with Help, Synopsis
// and Run, a shared Meta for input and output, tables drawn by formatList
// and a -json flag where a command prints data.
//
// The command registry is Commands, in this file: a new command is one
// line there.
package command

import (
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/cli"

	"github.com/gputide/gputide/quota-broker/version"
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
	cmds := map[string]cli.CommandFactory{
		"agent":   func() (cli.Command, error) { return &AgentCommand{Meta: m}, nil },
		"plan":    func() (cli.Command, error) { return &PlanCommand{Meta: m}, nil },
		"sim":     func() (cli.Command, error) { return &SimCommand{Meta: m}, nil },
		"version": func() (cli.Command, error) { return &VersionCommand{Meta: m}, nil },

		"schedule":         func() (cli.Command, error) { return &ScheduleCommand{Meta: m}, nil },
		"schedule preview": func() (cli.Command, error) { return &SchedulePreviewCommand{Meta: m}, nil },
	}
	for name, f := range brokerCommands(m) {
		cmds[name] = f
	}
	return cmds
}

// Run runs the gputide CLI with args (without the program name) and
// returns the exit code, as the nomad CLI does:
//
//   - 0: success, and help or a version that was asked for ("gputide help",
//     "gputide help <command>", which is "gputide <command> -help",
//     -help, -version), printed to stdout;
//   - 1: an error (bad input, bad flags), or no command at all; errors and
//     the usage shown with them go to stderr;
//   - 1 also for an unknown subcommand of a command group ("gputide quota
//     bogus"): stderr names it, then shows the group's usage;
//   - 127: an unknown command: stderr names it, then lists the commands.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	m := Meta{
		Ui:    &cli.BasicUi{Reader: stdin, Writer: stdout, ErrorWriter: stderr},
		Stdin: stdin,
	}
	commands := Commands(m)
	if len(args) > 0 && args[0] == "help" {
		// "help [command...]" is "[command...] -help".
		args = append(append([]string(nil), args[1:]...), "-help")
	}
	help := cli.BasicHelpFunc("gputide")
	c := &cli.CLI{
		Name:     "gputide",
		Version:  "gputide " + version.String(),
		Args:     args,
		Commands: commands,
		HelpFunc: func(cs map[string]cli.CommandFactory) string {
			return help(cs) + "\n\nRun 'gputide help <command>' for a command's usage and options."
		},
		HelpWriter:  stdout,
		ErrorWriter: stderr,
	}
	if sub := c.Subcommand(); !c.IsHelp() || sub != "" {
		if _, ok := commands[sub]; !ok && !c.IsVersion() {
			switch {
			case sub != "":
				m.Ui.Error(fmt.Sprintf("gputide: unknown command %q\n", sub))
				m.Ui.Error(c.HelpFunc(commands))
				return 127
			case len(args) == 0:
				m.Ui.Error(c.HelpFunc(commands))
				return 1
			default:
				m.Ui.Error(fmt.Sprintf("gputide: unknown flag %q; give a command\n", args[0]))
				m.Ui.Error(c.HelpFunc(commands))
				return 1
			}
		}
	}
	if sub, arg, ok := unknownSubcommand(c, commands); ok {
		// The group's Run returns RunResultHelp: its usage follows on
		// stderr, with exit code 1.
		m.Ui.Error(fmt.Sprintf("gputide %s: unknown subcommand %q\n", sub, arg))
	}
	code, err := c.Run()
	if err != nil {
		m.Ui.Error("Error executing CLI: " + err.Error())
		return 1
	}
	return code
}

// unknownSubcommand reports whether the CLI's args name a command group
// ("quota", "job", "reservation", "schedule": a registered name that
// others extend with " <sub>") followed by a word that is not one of its
// subcommands: it returns the group and that word. Help and version
// requests, and flags after the group, are not reported.
func unknownSubcommand(c *cli.CLI, commands map[string]cli.CommandFactory) (group, arg string, ok bool) {
	group = c.Subcommand()
	if group == "" || c.IsHelp() || c.IsVersion() {
		return "", "", false
	}
	rest := c.SubcommandArgs()
	if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
		return "", "", false
	}
	for name := range commands {
		if strings.HasPrefix(name, group+" ") {
			return group, rest[0], true
		}
	}
	return "", "", false
}
