package command

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/gputide/gputide/internal/redact"
	"github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/scalingpolicy"
)

// barWidth is the width of a usage bar in quota status.
const barWidth = 20

// usageBar draws used GPUs against nominal: '#' non-idle, '+' idle
// (borrowing), '.' free nominal; a trailing '>' when use passes nominal.
func usageBar(q api.Quota) string {
	scale := max(q.NominalGPUs, q.UsedGPUs, 1)
	cells := func(n int) int { return (n*barWidth + scale/2) / scale }
	nonidle := cells(min(q.NonidleGPUs, q.UsedGPUs))
	used := cells(q.UsedGPUs)
	nominal := cells(q.NominalGPUs)
	var b strings.Builder
	b.WriteByte('[')
	for i := range barWidth {
		switch {
		case i < nonidle:
			b.WriteByte('#')
		case i < used:
			b.WriteByte('+')
		case i < nominal:
			b.WriteByte('.')
		default:
			b.WriteByte(' ')
		}
	}
	b.WriteByte(']')
	if q.UsedGPUs > q.NominalGPUs {
		b.WriteByte('>')
	}
	return b.String()
}

// QuotaStatusCommand is "gputide quota status": the tree with its figures.
type QuotaStatusCommand struct{ brokerCmd }

func (c *QuotaStatusCommand) Synopsis() string { return "Show the quota tree with usage" }
func (c *QuotaStatusCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide quota status [options]

  Shows every quota node, children under their parent marked "· " per
  level, with its nominal GPUs and a usage bar ('#' non-idle, '+' idle,
  '.' free nominal), borrowed, debt (L9), booked and displaced (L10),
  lendable and queued GPUs. Used GPUs of allocations the broker is
  already stopping show apart: "8 (+4 stopping)". Any valid token may
  read it. With several flavors (DESIGN L13) each node has one row per
  flavor, in tree order, and a Flavor column; -json has one entry per
  node and flavor, each with "flavor" ("gpu" for the implicit flavor).
  Devices of no flavor (ungoverned, left to Nomad) are listed under the
  tree by node, with the reason.

  Fair lending (DESIGN L14), per node and flavor: Weight (explicit, or
  "8 (nominal)" for the default), Fair share in GPUs ("-" where L14
  leaves it undefined: the root, and by day the children of a parent
  whose own work takes their GPUs), Borrowed share (borrowed GPUs /
  weight; "inf" for a weight-0 node that borrows) and Evicted, the use of
  the node's max_evict budget: "3 of 16 GPUs in 5m" counts the GPUs of
  every flavor stopped as victims of the node's subtree within the last
  5m ("-" without a budget).
` + apiHelp)
}

func (c *QuotaStatusCommand) Run(args []string) int {
	c.init("quota status")
	if _, code, ok := c.parse(args, 0, ""); !ok {
		return code
	}
	return c.call(func(ctx context.Context, cl *api.Client) error {
		res, err := cl.Quotas(ctx)
		if err != nil {
			return err
		}
		if c.asJSON {
			c.printJSON(res)
			return nil
		}
		rows := quotaStatusRows(res.Quotas)
		c.Ui.Output(formatList(rows))
		if len(res.Ungoverned) > 0 {
			c.Ui.Output("\nUngoverned devices (of no flavor: left to Nomad, never counted)\n" + formatList(ungovernedRows(res.Ungoverned)))
		}
		return nil
	})
}

// quotaStatusRows lays out "quota status": a header, then one row per
// quota node, children under their parent marked "· " per level. With
// several flavors (DESIGN L13) the API has one entry per node and flavor:
// each is its own row, the node's flavors one after another, with a
// Flavor column after Quota; a tree of one flavor (the implicit "gpu"
// included) keeps the table without that column.
func quotaStatusRows(qs []api.Quota) [][]string {
	flavors := map[string]bool{}
	for _, q := range qs {
		flavors[q.Flavor] = true
	}
	flavored := len(flavors) > 1
	head := []string{"Quota", "Nominal", "Used", "Usage", "Borrowed", "Debt", "Booked", "Displaced", "Lendable", "Queued",
		"Weight", "Fair share", "Borrowed share", "Evicted", "Workspaces"}
	if flavored {
		head = slices.Insert(head, 1, "Flavor")
	}
	rows := [][]string{head}
	depth := map[string]int{}
	for _, q := range qs {
		d := 0
		if q.Parent != "" {
			d = depth[q.Parent] + 1
		}
		depth[q.Name] = d
		row := []string{strings.Repeat("· ", d) + q.Name, strconv.Itoa(q.NominalGPUs), usedCell(q), usageBar(q),
			strconv.Itoa(q.BorrowedGPUs), strconv.Itoa(q.DebtGPUs), strconv.Itoa(q.BookedGPUs), strconv.Itoa(q.DisplacedGPUs),
			strconv.Itoa(q.LendableGPUs), strconv.Itoa(q.QueuedGPUs),
			api.WeightText(q), api.FairShareText(q), api.BorrowedShareText(q), api.EvictedText(q), strings.Join(q.Workspaces, ",")}
		if flavored {
			row = slices.Insert(row, 1, q.Flavor)
		}
		rows = append(rows, row)
	}
	return rows
}

// ungovernedRows lays out the devices of no flavor (DESIGN L13) that
// "quota status" lists under the tree: node, device (the model, with
// " MIG <profile>" for a MIG instance, as the device plugin names it),
// count and reason.
func ungovernedRows(us []api.Ungoverned) [][]string {
	rows := [][]string{{"Node", "Device", "Count", "Reason"}}
	for _, u := range us {
		dev := u.Model
		if u.MIGProfile != "" {
			dev += " MIG " + u.MIGProfile
		}
		rows = append(rows, []string{u.Node, dev, strconv.Itoa(u.Devices), u.Reason})
	}
	return rows
}

// usedCell is a node's used GPUs, those of allocations already being
// stopped apart: "8 (+4 stopping)" rather than 12 of a nominal 8
// mid-preemption (issue 20).
func usedCell(q api.Quota) string {
	if q.StoppingGPUs <= 0 {
		return strconv.Itoa(q.UsedGPUs)
	}
	return fmt.Sprintf("%d (+%d stopping)", q.UsedGPUs-q.StoppingGPUs, q.StoppingGPUs)
}

// QuotaMoveCommand is "gputide quota move -from A -to B -gpus N" (L9).
type QuotaMoveCommand struct{ brokerCmd }

func (c *QuotaMoveCommand) Synopsis() string { return "Move nominal GPUs between quota nodes" }
func (c *QuotaMoveCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide quota move -from NODE -to NODE -gpus N [options]

  Moves N GPUs of nominal quota from one node to another in one guarded
  write (DESIGN L9), validated by L1 and L10. Nothing restarts: usage above
  a lowered nominal becomes debt, shown in the next plan. Needs a
  management token or the admin policy.

Options:

  -from NODE   The node that gives GPUs. Required.
  -to NODE     The node that gets them. Required.
  -gpus N      How many, at least 1. Required.
  -flavor F    The flavor whose nominal moves (DESIGN L13). Required in a
               tree of several flavors; the error lists them.
` + apiHelp)
}

func (c *QuotaMoveCommand) Run(args []string) int {
	f := c.init("quota move")
	var from, to, gpus, flavor string
	f.StringVar(&from, "from", "", "")
	f.StringVar(&to, "to", "", "")
	f.StringVar(&gpus, "gpus", "", "")
	f.StringVar(&flavor, "flavor", "", "")
	if _, code, ok := c.parse(args, 0, ""); !ok {
		return code
	}
	if from == "" || to == "" || gpus == "" {
		return c.usage("Missing -from, -to or -gpus: all three are required")
	}
	n, err := intFlag("gpus", gpus, 1)
	if err != nil {
		return c.usage(err.Error())
	}
	return c.call(func(ctx context.Context, cl *api.Client) error {
		res, err := cl.QuotaMoveFlavor(ctx, from, to, flavor, n)
		if err != nil {
			return err
		}
		if c.asJSON {
			c.printJSON(res)
			return nil
		}
		c.Ui.Output(fmt.Sprintf("Moved %d GPUs%s from %s to %s (%s now %d, %s now %d) at %s",
			n, flavorWords(res, flavor), from, to, from, nominalOf(res, from, flavor), to, nominalOf(res, to, flavor),
			res.ChangedAt.Format(time.RFC3339)))
		return nil
	})
}

// nominalOf returns node name's nominal of flavor in a write's answer
// ("" for the tree's only flavor).
func nominalOf(res *api.TreeWriteResponse, name, flavor string) int {
	if flavor == "" {
		flavor, _ = quota.OnlyFlavor(res.Root)
	}
	if n := res.Root.Find(name); n != nil {
		return n.GPUs.Of(flavor)
	}
	return 0
}

// flavorWords names the flavor in an answer of a tree that declares
// flavors (" of flavor h100"), "" otherwise.
func flavorWords(res *api.TreeWriteResponse, flavor string) string {
	if res.Root == nil || len(res.Root.Flavors) == 0 {
		return ""
	}
	if flavor == "" {
		flavor, _ = quota.OnlyFlavor(res.Root)
	}
	return fmt.Sprintf(" of flavor %s", flavor)
}

// QuotaScaleCommand is "gputide quota scale NAME -gpus N".
type QuotaScaleCommand struct{ brokerCmd }

func (c *QuotaScaleCommand) Synopsis() string { return "Set one quota node's nominal GPUs" }
func (c *QuotaScaleCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide quota scale NAME -gpus N [options]

  Sets the nominal GPUs of one node. A change that breaks law L1 is refused
  with the numbers ("Quota1: children 56 + 80 = 136 > 128"); move GPUs
  between siblings with 'gputide quota move' instead.

Options:

  -gpus N     The new nominal, at least 0. Required.
  -flavor F   The flavor whose nominal is set (DESIGN L13). Required in a
              tree of several flavors; the error lists them.
` + apiHelp)
}

func (c *QuotaScaleCommand) Run(args []string) int {
	f := c.init("quota scale")
	var gpus, flavor string
	f.StringVar(&gpus, "gpus", "", "")
	f.StringVar(&flavor, "flavor", "", "")
	rest, code, ok := c.parse(args, 1, "the quota node's name")
	if !ok {
		return code
	}
	if gpus == "" {
		return c.usage("Missing -gpus N")
	}
	n, err := intFlag("gpus", gpus, 0)
	if err != nil {
		return c.usage(err.Error())
	}
	return c.call(func(ctx context.Context, cl *api.Client) error {
		res, err := cl.QuotaScaleFlavor(ctx, rest[0], flavor, n)
		if err != nil {
			return err
		}
		if c.asJSON {
			c.printJSON(res)
			return nil
		}
		c.Ui.Output(fmt.Sprintf("%s now has %d GPUs%s nominal (at %s)", rest[0], n, flavorWords(res, flavor), res.ChangedAt.Format(time.RFC3339)))
		return nil
	})
}

// QuotaApplyCommand is "gputide quota apply FILE".
type QuotaApplyCommand struct{ brokerCmd }

func (c *QuotaApplyCommand) Synopsis() string { return "Write a whole quota tree file" }
func (c *QuotaApplyCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide quota apply FILE [options]

  Writes the tree of FILE (the quota file's HCL, or JSON {"root": ...,
  "settings": ...} when FILE ends in .json) through PUT /v1/quotas: one
  guarded write validated by L1 and L10. Needs the Consul store.
` + apiHelp)
}

func (c *QuotaApplyCommand) Run(args []string) int {
	c.init("quota apply")
	rest, code, ok := c.parse(args, 1, "the tree file")
	if !ok {
		return code
	}
	src, err := readBounded(rest[0])
	if err != nil {
		return c.usage(err.Error())
	}
	ct := "text/plain"
	if strings.EqualFold(filepath.Ext(rest[0]), ".json") {
		ct = "application/json"
	}
	return c.call(func(ctx context.Context, cl *api.Client) error {
		res, err := cl.QuotaApply(ctx, src, ct)
		if err != nil {
			return err
		}
		if c.asJSON {
			c.printJSON(res)
			return nil
		}
		c.Ui.Output(fmt.Sprintf("Quota tree from %s written (guard %d, at %s)", rest[0], res.Guard, res.ChangedAt.Format(time.RFC3339)))
		return nil
	})
}

// QueueCommand is "gputide queue".
type QueueCommand struct{ brokerCmd }

func (c *QueueCommand) Synopsis() string { return "List the jobs waiting for GPUs" }
func (c *QueueCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide queue [-namespace NS] [options]

  Lists the task groups waiting in the holding pool, oldest first, with the
  rule and reason of the last plan, flex times and how long they waited,
  then the plan's warnings (a booking that cannot be placed, GPUs held for
  a booking or a pre-warm). Groups and warnings of namespaces the token
  cannot read show only namespace and GPUs. 'gputide job status NS/JOB'
  tells one job's whole story.
` + apiHelp)
}

func (c *QueueCommand) Run(args []string) int {
	f := c.init("queue")
	var ns string
	f.StringVar(&ns, "namespace", "", "")
	if _, code, ok := c.parse(args, 0, ""); !ok {
		return code
	}
	return c.call(func(ctx context.Context, cl *api.Client) error {
		res, err := cl.Queue(ctx, ns)
		if err != nil {
			return err
		}
		if c.asJSON {
			c.printJSON(res)
			return nil
		}
		rows := [][]string{{"Namespace", "Job", "Group", "Quota", "GPUs", "Action", "Rule", "Waited", "Flex expires", "Reason"}}
		for _, e := range res.Queue {
			waited, exp := "", ""
			if e.SubmittedAt != nil {
				waited = (time.Duration(e.WaitedSeconds) * time.Second).String()
			}
			if e.FlexExpiresAt != nil {
				exp = e.FlexExpiresAt.Format(time.RFC3339)
			}
			rows = append(rows, []string{e.Namespace, e.Job, e.Group, e.Quota, gpusCell(e.GPUs, e.Count, e.AllocGPUs), e.Action, e.Rule, waited, exp, e.Reason})
		}
		c.Ui.Output(formatList(rows) + warningLines(res.Warnings))
		return nil
	})
}

func gpusCell(total, count, per int) string {
	if count == 0 {
		return strconv.Itoa(total)
	}
	return fmt.Sprintf("%d (%dx%d)", total, count, per)
}

// PreemptionsCommand is "gputide preemptions".
type PreemptionsCommand struct{ brokerCmd }

func (c *PreemptionsCommand) Synopsis() string { return "List the broker's preemptions" }
func (c *PreemptionsCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide preemptions [-namespace NS] [-since T] [options]

  Lists the allocations the broker stopped, oldest first, from the store's
  history. -since is RFC 3339 or a duration back from now (24h). Entries of
  namespaces the token cannot read show only namespace and GPUs.
` + apiHelp)
}

func (c *PreemptionsCommand) Run(args []string) int {
	f := c.init("preemptions")
	var ns, since string
	f.StringVar(&ns, "namespace", "", "")
	f.StringVar(&since, "since", "", "")
	if _, code, ok := c.parse(args, 0, ""); !ok {
		return code
	}
	if since != "" {
		if _, err := time.Parse(time.RFC3339, since); err != nil {
			if d, err := time.ParseDuration(since); err != nil || d < 0 {
				return c.usage(fmt.Sprintf("-since %q: not an RFC 3339 time nor a duration back from now (24h)", since))
			}
		}
	}
	return c.call(func(ctx context.Context, cl *api.Client) error {
		res, err := cl.Preemptions(ctx, ns, since)
		if err != nil {
			return err
		}
		if c.asJSON {
			c.printJSON(res)
			return nil
		}
		rows := [][]string{{"At", "Namespace", "Job", "Alloc", "GPUs", "Rule", "For"}}
		for _, p := range res.Preemptions {
			at := ""
			if p.At != nil {
				at = p.At.Format(time.RFC3339)
			}
			rows = append(rows, []string{at, p.Namespace, p.Job, shortID(p.Alloc, false), strconv.Itoa(p.GPUs), p.Rule, p.For})
		}
		c.Ui.Output(formatList(rows))
		return nil
	})
}

// JobPlanCommand is "gputide job plan FILE".
type JobPlanCommand struct {
	brokerCmd
	// parseHCL replaces Nomad's /v1/jobs/parse in tests.
	parseHCL func(src []byte, token string) (*nomadapi.Job, error)
}

func (c *JobPlanCommand) Synopsis() string { return "Preview what the broker does with a job now" }
func (c *JobPlanCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide job plan FILE [options]

  Shows the plan the broker makes now with the job pending: admitted or
  waiting (rule and reason) and the allocations it would stop. FILE is JSON
  as "nomad job run -output" writes it, sent as is, or HCL, parsed by
  Nomad's /v1/jobs/parse at NOMAD_ADDR with the caller's token, which needs
  parse-job on NOMAD_NAMESPACE (default "default"). Needs submit-job on the
  job's namespace.
` + apiHelp)
}

func (c *JobPlanCommand) Run(args []string) int {
	c.init("job plan")
	rest, code, ok := c.parse(args, 1, "the jobspec file")
	if !ok {
		return code
	}
	src, err := readBounded(rest[0])
	if err != nil {
		return c.usage(err.Error())
	}
	token := c.token
	if token == "" {
		token = c.env("NOMAD_TOKEN")
	}
	body := src
	if scalingpolicy.Sniff(rest[0], src) != scalingpolicy.KindJSONJob {
		parse := c.parseHCL
		if parse == nil {
			parse = parseHCLAs
		}
		job, err := parse(src, token)
		if err != nil {
			c.Ui.Error(fmt.Sprintf("Error: %s: an HCL jobspec is parsed by Nomad's /v1/jobs/parse: %v; or give it as JSON (nomad job run -output)", rest[0], err))
			return 1
		}
		body = jsonOf(map[string]any{"Job": job})
	}
	return c.call(func(ctx context.Context, cl *api.Client) error {
		res, err := cl.Plan(ctx, body)
		if err != nil {
			return err
		}
		if c.asJSON {
			c.printJSON(res)
			return nil
		}
		c.Ui.Output(fmt.Sprintf("Job %q in namespace %q:", res.Job, res.Namespace))
		if len(res.Actions) == 0 && len(res.Stops) == 0 {
			c.Ui.Output(noPlanNote(res.Namespace))
			return nil
		}
		rows := [][]string{{"Action", "Group", "Count", "GPUs", "Rule", "Reason"}}
		for _, a := range res.Actions {
			rows = append(rows, []string{string(a.Action), a.Group, strconv.Itoa(a.Count), strconv.Itoa(a.GPUs), string(a.Rule), a.Reason})
		}
		c.Ui.Output(formatList(rows))
		if len(res.Stops) > 0 {
			c.Ui.Output("\nStops it causes:")
			rows = [][]string{{"Namespace", "Job", "Alloc", "GPUs", "Rule"}}
			for _, s := range res.Stops {
				rows = append(rows, []string{s.Namespace, s.Job, shortID(s.Alloc, false), strconv.Itoa(s.GPUs), s.Rule})
			}
			c.Ui.Output(formatList(rows))
		}
		return nil
	})
}

// noPlanNote says why a preview has no action, instead of an empty table:
// the core plans only GPU task groups of namespaces bound in the quota tree
// (DESIGN L1, L3); anything else Nomad places without the broker.
func noPlanNote(namespace string) string {
	return fmt.Sprintf("No action: the broker does not plan this job. Either namespace %q is bound to no quota node "+
		"(the broker does not govern it; see \"gputide quota status\"), or no task group asks for a GPU.", namespace)
}

// parseHCLAs sends an HCL jobspec to Nomad's /v1/jobs/parse at NOMAD_ADDR
// with the caller's token.
func parseHCLAs(src []byte, token string) (*nomadapi.Job, error) {
	cfg := nomadapi.DefaultConfig()
	hc := &http.Client{Timeout: nomadParseTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()}
	if err := nomadapi.ConfigureTLS(hc, cfg.TLSConfig); err != nil {
		return nil, err
	}
	cfg.HttpClient = hc
	if token != "" {
		cfg.SecretID = token
	}
	client, err := nomadapi.NewClient(cfg)
	if err != nil {
		return nil, redact.AddressIn(redact.URLError(err), cfg.Address)
	}
	job, err := client.Jobs().ParseHCLOpts(&nomadapi.JobsParseRequest{JobHCL: string(src)})
	if err != nil {
		return nil, parseError(cfg.Address, err)
	}
	if job == nil || job.ID == nil {
		return nil, fmt.Errorf("nomad at %s returned no job", redact.Address(cfg.Address))
	}
	return job, nil
}
