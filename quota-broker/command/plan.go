package command

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/gputide/gputide/internal/regfile"
	"github.com/gputide/gputide/quota-broker/agent"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/snapshot"
)

// PlanCommand is "gputide plan": a dry run of the quota broker on one
// snapshot of the cluster.
type PlanCommand struct {
	Meta
	// Planner overrides plan.ComputeFair (tests: a planner that panics).
	Planner agent.Planner
}

// Help returns the command's usage text.
func (c *PlanCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide plan [options] <snapshot.json>

  Plan shows what the quota broker would do for one snapshot of the
  cluster: which queued work it admits and on which nodes, which waits or
  expires and why, which allocations it stops and for whom, and each quota's
  usage afterwards. Every action names the rule of the broker's laws that
  justifies it. Nothing is changed: this is a dry run, like "nomad job plan".

  The snapshot is a JSON document (see docs/snapshot-format.md); "-" reads
  it from standard input. Exit code 0 means a plan was computed, 1 that the
  snapshot or the arguments are invalid (the error names the field and the
  value) or that the planner failed (a panic prints its message and stack).

Plan Options:

  -json
    Print the plan as JSON ({"actions": [...], "usage": [...],
    "warnings": [...]}) instead of tables.

  -verbose
    Print full allocation IDs instead of their first 8 characters, and
    every node of an admit instead of the first 3 and how many more.
`)
}

// Synopsis returns the one-line description shown in the command list.
func (c *PlanCommand) Synopsis() string {
	return "Show what the quota broker would do for a cluster snapshot"
}

// Run reads the snapshot named by the one argument, plans it and prints the
// plan; see Help for the flags and exit codes.
func (c *PlanCommand) Run(args []string) int {
	var asJSON, verbose bool
	flags := flag.NewFlagSet("plan", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	flags.BoolVar(&asJSON, "json", false, "")
	flags.BoolVar(&verbose, "verbose", false, "")
	if err := flags.Parse(args); err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing flags: %s", err))
		c.Ui.Error(`For additional help try 'gputide plan -help'`)
		return 1
	}
	if flags.NArg() != 1 {
		c.Ui.Error("This command takes one argument: <snapshot.json> (or - for standard input)")
		c.Ui.Error(`For additional help try 'gputide plan -help'`)
		return 1
	}
	name := flags.Arg(0)
	snap, err := c.readSnapshot(name)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error reading snapshot %s: %s", displayName(name), err))
		return 1
	}
	p, err := agent.PlanSafely(c.Planner, snap)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error planning snapshot %s: %s", displayName(name), err))
		if pe := (*agent.PanicError)(nil); errors.As(err, &pe) {
			c.Ui.Error("This is a bug in the planner; please report it with the snapshot and this stack:")
			c.Ui.Error(strings.TrimSuffix(string(pe.Stack), "\n"))
		}
		return 1
	}
	if asJSON {
		var buf bytes.Buffer
		if err := snapshot.EncodePlan(&buf, p); err != nil {
			c.Ui.Error(fmt.Sprintf("Error encoding the plan: %s", err))
			return 1
		}
		c.Ui.Output(strings.TrimSuffix(buf.String(), "\n"))
		return 0
	}
	c.Ui.Output(formatPlan(snap, p, verbose))
	return 0
}

func displayName(name string) string {
	if name == "-" {
		return "from standard input"
	}
	return strconv.Quote(name)
}

func (c *PlanCommand) readSnapshot(name string) (*plan.Snapshot, error) {
	if name == "-" {
		in := c.Stdin
		if in == nil {
			in = os.Stdin
		}
		return snapshot.Decode(in)
	}
	// A regular file only (regfile, as every other file argument): a FIFO
	// without a writer or a device is refused at once naming the path,
	// instead of blocking in open(2) or reading without end.
	f, err := regfile.Open(name, snapshot.MaxSize)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return snapshot.Decode(f)
}

// formatPlan renders a plan as the text of "gputide plan": a summary line,
// the Actions table, the Usage table and the warnings.
func formatPlan(snap *plan.Snapshot, p *plan.Plan, verbose bool) string {
	var b strings.Builder
	counts := map[plan.ActionKind]int{}
	for _, a := range p.Actions {
		counts[a.Action]++
	}
	fmt.Fprintf(&b, "Plan at %s: %s, %s, %s, %s\n\n",
		snap.Time.Format("2006-01-02T15:04:05Z07:00"),
		plural(counts[plan.ActionAdmit], "admit"), plural(counts[plan.ActionStop], "stop"),
		plural(counts[plan.ActionWait], "wait"), plural(counts[plan.ActionExpire], "expire"))

	b.WriteString("Actions\n")
	if len(p.Actions) == 0 {
		b.WriteString("No actions: nothing to admit, stop or expire\n")
	} else {
		rows := [][]string{{"Action", "Rule", "Namespace/Job/Group or Alloc", "Node(s)", "GPUs", "For", "Reason"}}
		for _, a := range p.Actions {
			rows = append(rows, actionRow(a, verbose))
		}
		b.WriteString(formatList(rows))
		b.WriteString("\n")
	}

	b.WriteString("\nUsage\n")
	rows := [][]string{{"Quota", "Nominal", "Used", "NonIdle", "Borrowed", "Debt", "Lendable"}}
	// A tree with flavors has a row per node and flavor (DESIGN L13).
	flavors := slices.ContainsFunc(p.Usage, func(u plan.Usage) bool { return u.Flavor != "" })
	if flavors {
		rows[0] = slices.Insert(rows[0], 1, "Flavor")
	}
	for _, u := range p.Usage {
		row := []string{u.Quota, strconv.Itoa(u.Nominal), strconv.Itoa(u.Used),
			strconv.Itoa(u.NonIdle), strconv.Itoa(u.Borrowed), strconv.Itoa(u.Debt), strconv.Itoa(u.Lendable)}
		if flavors {
			row = slices.Insert(row, 1, printable(u.Flavor))
		}
		rows = append(rows, row)
	}
	b.WriteString(formatList(rows))
	b.WriteString("\n")

	if len(p.Warnings) > 0 {
		b.WriteString("\nWarnings\n")
		for _, w := range p.Warnings {
			b.WriteString("* " + printable(w.Message) + "\n")
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// actionRow is one line of the Actions table.
func actionRow(a plan.Action, verbose bool) []string {
	what := a.Namespace + "/" + a.Job
	if a.Group != "" {
		what += "/" + a.Group
	}
	if a.Alloc != "" {
		what = shortID(a.Alloc, verbose) + " (" + what + ")"
	}
	nodes := a.Node
	if len(a.Nodes) > 0 {
		nodes = nodeList(a.Nodes, verbose)
	}
	gpus := ""
	switch {
	case a.Action == plan.ActionStop:
		gpus = strconv.Itoa(a.GPUs)
	case a.Count > 0 && a.GPUs > 0:
		gpus = fmt.Sprintf("%d x %d", a.Count, a.GPUs)
	case a.GPUs > 0:
		gpus = strconv.Itoa(a.GPUs)
	}
	claimant := ""
	if !a.For.IsZero() {
		claimant = a.For.String()
	}
	return []string{string(a.Action), string(a.Rule), what, nodes, gpus, claimant, a.Reason}
}

// shownNodes is how many distinct nodes of an admit the table lists
// without -verbose.
const shownNodes = 3

// nodeList renders the nodes of an admit (one entry per allocation): all
// of them with -verbose or when there are at most shownNodes, else the
// first shownNodes distinct nodes with their allocation counts and how
// many nodes more ("node-01 x8,node-02 x8,node-03 x8 +747 more nodes"),
// so that a wide admit keeps the table narrow.
func nodeList(nodes []string, verbose bool) string {
	if verbose || len(nodes) <= shownNodes {
		return strings.Join(nodes, ",")
	}
	count := map[string]int{}
	var order []string
	for _, n := range nodes {
		if count[n] == 0 {
			order = append(order, n)
		}
		count[n]++
	}
	var b strings.Builder
	for i, n := range order[:min(shownNodes, len(order))] {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n)
		if c := count[n]; c > 1 {
			b.WriteString(" x" + strconv.Itoa(c))
		}
	}
	if rest := len(order) - shownNodes; rest > 0 {
		b.WriteString(" +" + plural(rest, "more node"))
	}
	return b.String()
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
