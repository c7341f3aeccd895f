package command

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/api"
)

// JobStatusCommand is "gputide job status NS/JOB": one job's whole story
// (GET /v1/job/<ns>/<job>).
type JobStatusCommand struct{ brokerCmd }

func (c *JobStatusCommand) Synopsis() string {
	return "Explain one job: its place, what binds it, what next"
}
func (c *JobStatusCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide job status NAMESPACE/JOB [options]

  Tells one job's whole story in the broker's last plan: each waiting
  group's place in the order (and the GPUs of the groups ahead of it),
  the plan's answer with the rule and what binds it, with the numbers;
  its running allocations and the stops the plan makes of them; what it
  waits for next and when (a booking's start or end, a debt grace
  ending, a hold's end, its flex deadline, the broker's next plan); and
  the plan's warnings about it. Needs read-job on the namespace; others'
  jobs and bookings are named by their namespace only.
` + apiHelp)
}

func (c *JobStatusCommand) Run(args []string) int {
	c.init("job status")
	rest, code, ok := c.parse(args, 1, "the job as NAMESPACE/JOB")
	if !ok {
		return code
	}
	ns, job, found := strings.Cut(rest[0], "/")
	if !found || ns == "" || job == "" {
		return c.usage(fmt.Sprintf("job %q: want NAMESPACE/JOB, such as workspace-b/llama-ft-13b", rest[0]))
	}
	return c.call(func(ctx context.Context, cl *api.Client) error {
		res, err := cl.Job(ctx, ns, job)
		if err != nil {
			return err
		}
		if c.asJSON {
			c.printJSON(res)
			return nil
		}
		c.Ui.Output(formatJobStory(res))
		return nil
	})
}

// formatJobStory draws a job's story for people.
func formatJobStory(r *api.JobResponse) string {
	var b strings.Builder
	b.WriteString(formatKV([][2]string{{"Job", r.Namespace + "/" + r.Job}, {"Quota", r.Quota}}))
	if !r.Found {
		b.WriteString("\n\nThe broker sees no waiting group and no allocation of this job (not governed, ended, or not yet seen).")
	}
	if len(r.Waiting) > 0 {
		rows := [][]string{{"Group", "GPUs", "Place", "GPUs ahead", "Waited", "Action", "Rule", "Why"}}
		for _, w := range r.Waiting {
			rows = append(rows, []string{w.Group, gpusCell(w.GPUs, w.Count, w.AllocGPUs), fmt.Sprintf("%d of %d", w.Position, w.Of),
				strconv.Itoa(w.AheadGPUs), (time.Duration(w.WaitedSeconds) * time.Second).String(), w.Action, w.Rule, w.Reason})
		}
		b.WriteString("\n\nWaiting\n" + formatList(rows))
	}
	if len(r.Running) > 0 {
		rows := [][]string{{"Alloc", "Group", "Node", "GPUs", "Idle", "Started", "Stopping for", "Stop rule", "Stop reason"}}
		for _, a := range r.Running {
			started := ""
			if !a.StartedAt.IsZero() {
				started = a.StartedAt.Format(time.RFC3339)
			}
			rows = append(rows, []string{shortID(a.ID, false), a.Group, a.Node, strconv.Itoa(a.GPUs), yesNo(a.Idle), started,
				a.StoppingFor, a.StopRule, a.StopReason})
		}
		b.WriteString("\n\nRunning\n" + formatList(rows))
	}
	if len(r.Next) > 0 {
		rows := [][]string{{"When", "What"}}
		for _, e := range r.Next {
			rows = append(rows, []string{e.At.Format(time.RFC3339), e.What})
		}
		b.WriteString("\n\nWaits for next\n" + formatList(rows))
	}
	b.WriteString(warningLines(r.Warnings))
	return b.String()
}

func yesNo(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}

// warningLine renders one warning: its message, or, for a namespace the
// token cannot read, its kind, namespace and GPUs.
func warningLine(w api.WarningEntry) string {
	if w.Message != "" {
		return "Warning: " + w.Message
	}
	what := strings.ReplaceAll(w.Kind, "_", " ")
	if w.Namespace != "" {
		what += " in " + w.Namespace
	}
	if w.GPUs > 0 {
		what += fmt.Sprintf(" (%d GPUs)", w.GPUs)
	}
	return "Warning: " + what
}

// warningLines renders ws one a line, after a blank line; "" for none.
func warningLines(ws []api.WarningEntry) string {
	if len(ws) == 0 {
		return ""
	}
	lines := make([]string, len(ws))
	for i, w := range ws {
		lines[i] = warningLine(w)
	}
	return "\n\n" + strings.Join(lines, "\n")
}
