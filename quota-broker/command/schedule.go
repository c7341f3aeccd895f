package command

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
	_ "time/tzdata" // the same counts on every host, as the plugin gives them

	"github.com/hashicorp/cli"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/gputide/gputide/internal/redact"
	"github.com/gputide/gputide/internal/regfile"
	"github.com/gputide/gputide/quota-broker/scalingpolicy"
	"github.com/gputide/gputide/quota-broker/schedule"
)

// ScheduleCommand is the parent of the "gputide schedule" commands; it shows
// their list.
type ScheduleCommand struct {
	Meta
}

// Help returns the command's usage text.
func (c *ScheduleCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide schedule <subcommand> [options]

  Commands for gputide-schedule checks (day/night counts in local time).
`)
}

// Synopsis returns the one-line description shown in the command list.
func (c *ScheduleCommand) Synopsis() string { return "Day/night schedules of the autoscaler plugin" }

// Run shows the help: the parent does nothing by itself.
func (c *ScheduleCommand) Run([]string) int { return cli.RunResultHelp }

// SchedulePreviewCommand is "gputide schedule preview": the counts a
// gputide-schedule check gives over the next days (issue 11 item 2).
type SchedulePreviewCommand struct {
	Meta
	// now is the clock for the default -from (time.Now when nil).
	now func() time.Time
	// parseHCL turns an HCL jobspec into a job; nil: Nomad's /v1/jobs/parse
	// at NOMAD_ADDR with NOMAD_TOKEN.
	parseHCL func(src []byte) (*nomadapi.Job, error)
}

// maxPreviewDays bounds -days (a year and a day covers every holiday list).
const maxPreviewDays = 366

// nomadParseTimeout bounds the call to Nomad's /v1/jobs/parse.
const nomadParseTimeout = 10 * time.Second

// Help returns the command's usage text.
func (c *SchedulePreviewCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide schedule preview -policy FILE [options]

  Preview lists every change of the count that a gputide-schedule check
  gives from -from on, for -days days, in the schedule's local time and in
  UTC: first the count at -from, then each window boundary and each ramp
  step. It uses the same evaluation as the gputide-schedule strategy plugin,
  and refuses the same bad settings with the same errors.

  FILE is a Nomad Autoscaler policy file (scaling "name" { policy { check
  ... } }), or a jobspec: JSON as "nomad job run -output" writes it, or HCL,
  which is sent to Nomad's /v1/jobs/parse at NOMAD_ADDR with NOMAD_TOKEN
  (gputide does not parse HCL jobspecs itself). Exit code 0 on success, 1 on
  any error (the error names the file, the check, the key and the value).

Options:

  -policy FILE
    The policy file or jobspec. Required.

  -check NAME
    The check to preview; needed when the file has several gputide-schedule
    checks.

  -from RFC3339
    The first instant, e.g. 2026-03-02T00:00:00+01:00. Default: now.

  -days N
    How many days to list, 1..366. Default: 7.

  -json
    Print {"timezone": "...", "changes": [{"at": "<UTC>", "local":
    "<local>", "count": N, "window": "<name>"}]}; window is "default"
    outside all windows.
`)
}

// Synopsis returns the one-line description shown in the command list.
func (c *SchedulePreviewCommand) Synopsis() string {
	return "List the counts a gputide-schedule check gives over the next days"
}

// previewJSON is the -json output.
type previewJSON struct {
	TimeZone string              `json:"timezone"`
	Changes  []previewChangeJSON `json:"changes"`
}

type previewChangeJSON struct {
	At     string `json:"at"`    // UTC, RFC 3339
	Local  string `json:"local"` // the schedule's zone, RFC 3339
	Count  int    `json:"count"`
	Window string `json:"window"` // "default" outside all windows
}

// Run parses the flags, reads the check and prints its preview.
func (c *SchedulePreviewCommand) Run(args []string) int {
	var (
		file, check, from string
		days              int
		asJSON            bool
	)
	flags := flag.NewFlagSet("schedule preview", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	flags.StringVar(&file, "policy", "", "")
	flags.StringVar(&check, "check", "", "")
	flags.StringVar(&from, "from", "", "")
	flags.IntVar(&days, "days", 7, "")
	flags.BoolVar(&asJSON, "json", false, "")
	usage := func(msg string) int {
		c.Ui.Error(msg)
		c.Ui.Error(`For additional help try 'gputide schedule preview -help'`)
		return 1
	}
	if err := flags.Parse(args); err != nil {
		return usage(fmt.Sprintf("Error parsing flags: %s", err))
	}
	if flags.NArg() != 0 {
		return usage(fmt.Sprintf("This command takes no arguments, got %q: give the file with -policy", flags.Arg(0)))
	}
	if file == "" {
		return usage("Missing -policy FILE: the Autoscaler policy file or jobspec to preview")
	}
	if days < 1 || days > maxPreviewDays {
		return usage(fmt.Sprintf("Invalid -days %d: want 1..%d", days, maxPreviewDays))
	}
	start := time.Now()
	if c.now != nil {
		start = c.now()
	}
	if from != "" {
		t, err := time.Parse(time.RFC3339, from)
		if err != nil {
			return usage(fmt.Sprintf("Invalid -from %q: want RFC 3339, e.g. 2026-03-02T08:00:00+01:00", from))
		}
		start = t
	}
	sched, err := c.loadSchedule(file, check)
	if err != nil {
		c.Ui.Error("Error: " + err.Error())
		return 1
	}
	changes := sched.Changes(start, time.Duration(days)*24*time.Hour)
	if asJSON {
		out := previewJSON{TimeZone: sched.Location().String(), Changes: make([]previewChangeJSON, len(changes))}
		for i, ch := range changes {
			at := ceilSecond(ch.At)
			out.Changes[i] = previewChangeJSON{At: at.UTC().Format(time.RFC3339), Local: at.Format(time.RFC3339), Count: ch.Count, Window: windowLabel(ch.Window)}
		}
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			c.Ui.Error("Error encoding the preview: " + err.Error())
			return 1
		}
		c.Ui.Output(string(b))
		return 0
	}
	rows := [][]string{{"Local", "UTC", "Count", "Window"}}
	for _, ch := range changes {
		at := ceilSecond(ch.At)
		rows = append(rows, []string{at.Format("Mon 2006-01-02 15:04:05 MST"), at.UTC().Format(time.RFC3339), fmt.Sprint(ch.Count), windowLabel(ch.Window)})
	}
	span := fmt.Sprintf("%d days", days)
	if days == 1 {
		span = "1 day"
	}
	// The first row's instant, rounded up as the rows are: "now" has a
	// fraction of a second, which RFC 3339 would cut down.
	c.Ui.Output(fmt.Sprintf("Time zone %s, %s from %s\n\n%s", sched.Location(), span, ceilSecond(start).In(sched.Location()).Format(time.RFC3339), formatList(rows)))
	return 0
}

// ceilSecond rounds t up to a whole second: a ramp step may fall inside a
// second, and from the printed second on the new count holds.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}

func windowLabel(name string) string {
	if name == "" {
		return "default"
	}
	return name
}

// loadSchedule reads file, picks the gputide-schedule check (the one named
// check, if given) and parses its strategy block as the plugin does.
func (c *SchedulePreviewCommand) loadSchedule(file, check string) (*schedule.Schedule, error) {
	src, err := readBounded(file)
	if err != nil {
		return nil, err
	}
	var checks []scalingpolicy.Check
	switch scalingpolicy.Sniff(file, src) {
	case scalingpolicy.KindJSONJob:
		checks, err = scalingpolicy.FromJSONJob(file, src)
	case scalingpolicy.KindHCLJob:
		var job *nomadapi.Job
		parse := c.parseHCL
		if parse == nil {
			parse = parseHCLWithNomad
		}
		if job, err = parse(src); err != nil {
			return nil, fmt.Errorf("%s: an HCL jobspec is parsed by Nomad's /v1/jobs/parse, which failed: %w; give the job as JSON instead (nomad job run -output %s > job.json)", file, err, file)
		}
		checks = scalingpolicy.FromJob(job)
	default:
		checks, err = scalingpolicy.FromPolicyFile(file, src)
	}
	if err != nil {
		return nil, err
	}
	ck, err := scalingpolicy.Select(file, checks, scalingpolicy.ScheduleStrategy, check)
	if err != nil {
		return nil, err
	}
	sched, err := schedule.Parse(ck.Config)
	if err != nil {
		return nil, fmt.Errorf("%s: %s check %q: %w", file, ck.Where(), ck.Name, err)
	}
	return sched, nil
}

// readBounded reads the regular file at file, at most
// scalingpolicy.MaxFile bytes (regfile: a FIFO, device or folder is
// refused before any read, so the command never blocks in open(2)).
func readBounded(file string) ([]byte, error) {
	return regfile.Read(file, scalingpolicy.MaxFile)
}

// parseHCLWithNomad sends an HCL jobspec to Nomad's /v1/jobs/parse at
// NOMAD_ADDR with NOMAD_TOKEN (and the NOMAD_CA* TLS settings).
func parseHCLWithNomad(src []byte) (*nomadapi.Job, error) {
	cfg := nomadapi.DefaultConfig()
	hc := &http.Client{Timeout: nomadParseTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()}
	if err := nomadapi.ConfigureTLS(hc, cfg.TLSConfig); err != nil {
		return nil, err
	}
	cfg.HttpClient = hc
	client, err := nomadapi.NewClient(cfg)
	if err != nil {
		return nil, redact.AddressIn(redact.URLError(err), cfg.Address)
	}
	job, err := client.Jobs().ParseHCLOpts(&nomadapi.JobsParseRequest{JobHCL: string(src)})
	if err != nil {
		return nil, parseError(cfg.Address, err)
	}
	if job == nil || job.ID == nil {
		return nil, errors.New("nomad at " + redact.Address(cfg.Address) + " returned no job")
	}
	return job, nil
}

// parseError is the error of Nomad's /v1/jobs/parse at addr (its userinfo
// redacted, redact.Address, in the address and in err's URL). Nomad checks
// parse-job on the request's namespace (NOMAD_NAMESPACE, else "default"),
// not the jobspec's: a team token with parse-job on its own workspace only
// gets a 403 until NOMAD_NAMESPACE names it, which a 403 says.
func parseError(addr string, err error) error {
	err = redact.AddressIn(redact.URLError(err), addr)
	addr = redact.Address(addr)
	code := 0
	var ue nomadapi.UnexpectedResponseError
	var up *nomadapi.UnexpectedResponseError
	switch {
	case errors.As(err, &ue):
		code = ue.StatusCode()
	case errors.As(err, &up):
		code = up.StatusCode()
	}
	if code != http.StatusForbidden {
		return fmt.Errorf("nomad at %s: %w", addr, err)
	}
	ns := os.Getenv("NOMAD_NAMESPACE")
	if ns == "" {
		ns = "default"
	}
	return fmt.Errorf("nomad at %s: %w: Nomad checks parse-job on namespace %q (NOMAD_NAMESPACE, default \"default\"), not on the jobspec's; set NOMAD_NAMESPACE to the job's namespace", addr, err, ns)
}
