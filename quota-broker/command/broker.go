package command

// The commands that talk to a running broker through the API client
// (quota-broker/api, the only door): quota, queue, preemptions, job plan,
// reservation (DESIGN §9, issues 9 and 10). Flags as the nomad CLI:
// -address (GPUTIDE_ADDR), -token (NOMAD_TOKEN), -ca-cert
// (GPUTIDE_CACERT), -json.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/cli"

	"github.com/gputide/gputide/quota-broker/api"
)

// brokerTimeout bounds one API call of the CLI.
const brokerTimeout = 30 * time.Second

// apiHelp is the options text every broker command shares.
const apiHelp = `
API options:

  -address URL
    The broker's address. Default: GPUTIDE_ADDR, else http://127.0.0.1:4780.

  -token TOKEN
    The Nomad ACL token sent to the broker. Default: NOMAD_TOKEN.

  -ca-cert FILE
    PEM file of the CA that signed the broker's TLS certificate.
    Default: GPUTIDE_CACERT.

  -json
    Print the broker's answer as JSON.`

// brokerCmd holds what every broker command parses.
type brokerCmd struct {
	Meta
	name    string // "quota move"
	flags   *flag.FlagSet
	address string
	token   string
	caCert  string
	asJSON  bool
	// client, when set, replaces the client built from the flags (tests).
	client *api.Client
	// getenv reads the environment (os.Getenv when nil).
	getenv func(string) string
}

func (b *brokerCmd) env(k string) string {
	if b.getenv != nil {
		return b.getenv(k)
	}
	return os.Getenv(k)
}

// init makes the flag set with the API flags.
func (b *brokerCmd) init(name string) *flag.FlagSet {
	b.name = name
	b.flags = flag.NewFlagSet(name, flag.ContinueOnError)
	b.flags.SetOutput(io.Discard)
	b.flags.StringVar(&b.address, "address", "", "")
	b.flags.StringVar(&b.token, "token", "", "")
	b.flags.StringVar(&b.caCert, "ca-cert", "", "")
	b.flags.BoolVar(&b.asJSON, "json", false, "")
	return b.flags
}

// usage prints msg and the help hint; exit code 1.
func (b *brokerCmd) usage(msg string) int {
	b.Ui.Error(msg)
	b.Ui.Error(fmt.Sprintf("For additional help try 'gputide %s -help'", b.name))
	return 1
}

// parse parses args, flags before or after the positional arguments
// ("quota scale NAME -gpus N"), and wants exactly nargs positional ones.
func (b *brokerCmd) parse(args []string, nargs int, what string) ([]string, int, bool) {
	var pos []string
	for {
		if err := b.flags.Parse(args); err != nil {
			return nil, b.usage(fmt.Sprintf("Error parsing flags: %s", err)), false
		}
		rest := b.flags.Args()
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if len(pos) != nargs {
		if nargs == 0 {
			return nil, b.usage(fmt.Sprintf("This command takes no arguments, got %q", pos[0])), false
		}
		return nil, b.usage(fmt.Sprintf("This command takes one argument: %s", what)), false
	}
	return pos, 0, true
}

// api returns the client built from the flags and the environment.
func (b *brokerCmd) api() (*api.Client, error) {
	if b.client != nil {
		return b.client, nil
	}
	cfg := api.ClientConfig{Address: b.address, Token: b.token, CACert: b.caCert, Timeout: brokerTimeout}
	if cfg.Address == "" {
		cfg.Address = b.env("GPUTIDE_ADDR")
	}
	if cfg.Token == "" {
		cfg.Token = b.env("NOMAD_TOKEN")
	}
	if cfg.CACert == "" {
		cfg.CACert = b.env("GPUTIDE_CACERT")
	}
	return api.NewClientConfig(cfg)
}

// unreachableHint follows an error of a broker that did not answer.
const unreachableHint = "Is 'gputide agent' running there? Give its address (the agent's http_bind) with -address or GPUTIDE_ADDR."

// call runs fn with a client; errors print and give exit code 1.
func (b *brokerCmd) call(fn func(ctx context.Context, c *api.Client) error) int {
	c, err := b.api()
	if err != nil {
		b.Ui.Error("Error: " + err.Error())
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), brokerTimeout)
	defer cancel()
	if err := fn(ctx, c); err != nil {
		b.Ui.Error("Error: " + err.Error())
		var ae *api.Error
		if errors.As(err, &ae) && errors.Is(err, api.ErrConflict) && strings.Contains(ae.Message, "L1:") && !strings.Contains(ae.Message, "quota move") {
			b.Ui.Error("Move nominal GPUs between nodes with 'gputide quota move -from A -to B -gpus N'.")
		}
		if errors.Is(err, api.ErrUnreachable) {
			b.Ui.Error(unreachableHint)
		}
		return 1
	}
	return 0
}

// printJSON prints v indented.
func (b *brokerCmd) printJSON(v any) {
	out, _ := json.MarshalIndent(v, "", "  ")
	b.Ui.Output(string(out))
}

// intFlag parses a whole-number flag value: `-gpus "x": not a whole number`.
func intFlag(name, v string, min int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("-%s %q: not a whole number", name, v)
	}
	if n < min {
		return 0, fmt.Errorf("-%s %q: must be at least %d", name, v, min)
	}
	return n, nil
}

// parent is the help-only parent of a command group.
type parent struct {
	Meta
	help, synopsis string
}

func (p *parent) Help() string     { return strings.TrimSpace(p.help) }
func (p *parent) Synopsis() string { return p.synopsis }
func (p *parent) Run([]string) int { return cli.RunResultHelp }

// brokerCommands are the registry entries of this file.
func brokerCommands(m Meta) map[string]cli.CommandFactory {
	return map[string]cli.CommandFactory{
		"quota": func() (cli.Command, error) {
			return &parent{Meta: m, synopsis: "Read and change the quota tree of a broker",
				help: "Usage: gputide quota <subcommand> [options]\n\n  status, move, scale, apply: the quota tree of a running broker."}, nil
		},
		"quota status": func() (cli.Command, error) { return &QuotaStatusCommand{brokerCmd: brokerCmd{Meta: m}}, nil },
		"quota move":   func() (cli.Command, error) { return &QuotaMoveCommand{brokerCmd: brokerCmd{Meta: m}}, nil },
		"quota scale":  func() (cli.Command, error) { return &QuotaScaleCommand{brokerCmd: brokerCmd{Meta: m}}, nil },
		"quota apply":  func() (cli.Command, error) { return &QuotaApplyCommand{brokerCmd: brokerCmd{Meta: m}}, nil },
		"queue":        func() (cli.Command, error) { return &QueueCommand{brokerCmd: brokerCmd{Meta: m}}, nil },
		"preemptions":  func() (cli.Command, error) { return &PreemptionsCommand{brokerCmd: brokerCmd{Meta: m}}, nil },
		"job": func() (cli.Command, error) {
			return &parent{Meta: m, synopsis: "Preview jobs against a broker",
				help: "Usage: gputide job <subcommand> [options]\n\n  plan: what the broker would do with a job now.\n  status: one job's whole story: its place, what binds it, what next."}, nil
		},
		"job plan":   func() (cli.Command, error) { return &JobPlanCommand{brokerCmd: brokerCmd{Meta: m}}, nil },
		"job status": func() (cli.Command, error) { return &JobStatusCommand{brokerCmd: brokerCmd{Meta: m}}, nil },
		"reservation": func() (cli.Command, error) {
			return &parent{Meta: m, synopsis: "Calendar bookings of GPUs (DESIGN L10)",
				help: "Usage: gputide reservation <subcommand> [options]\n\n  create, list, show, cancel: Calendar bookings."}, nil
		},
		"reservation create": func() (cli.Command, error) { return &ReservationCreateCommand{brokerCmd: brokerCmd{Meta: m}}, nil },
		"reservation list":   func() (cli.Command, error) { return &ReservationListCommand{brokerCmd: brokerCmd{Meta: m}}, nil },
		"reservation show":   func() (cli.Command, error) { return &ReservationShowCommand{brokerCmd: brokerCmd{Meta: m}}, nil },
		"reservation cancel": func() (cli.Command, error) { return &ReservationCancelCommand{brokerCmd: brokerCmd{Meta: m}}, nil },
	}
}
