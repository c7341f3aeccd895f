package e2e

// Point (d) of issue 17's e2e (DESIGN L13: "every figure is reported per
// flavor"): at the end of TestBrokerOnFlavors, `gputide quota status`, its
// -json and the broker's /metrics show each quota node's figures per
// flavor, with the values the scenario leaves.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/cli"

	brokerapi "github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/command"
)

// flavorFig is one quota node's figures in one flavor, in devices (a MIG
// flavor counts its slices). Queued is left 0 where a source does not
// show it (/metrics).
type flavorFig struct {
	Nominal, Used, NonIdle, Borrowed, Debt, Lendable, Queued int
}

// flavorFiguresAtEnd are the figures TestBrokerOnFlavors leaves, by
// "node/flavor" (tree h100 8/4/4, a100 6/6/0, a100-1g 14/0/7 for
// Quota1/Quota1.1/Quota1.2):
//   - h100: team A's inference (Quota1's own, 4) and team C's training
//     (Quota1.2, 2 x 2) run; team B's training (Quota1.1, 4) was the
//     victim of (b) (L5's key: the most recently started of the two
//     4-GPU batch units) and waits in the holding pool, its 4 GPUs queued
//     in h100, the only flavor it allows;
//   - a100: team B's "either" (4) runs;
//   - a100-1g: team C's 7 notebooks run and the 8th (1) waits.
//
// Used, NonIdle and Queued are subtree figures; Lendable = max(0,
// nominal - used) (L4); nothing is idle, so nothing is borrowed; no quota
// moved, so no debt.
var flavorFiguresAtEnd = map[string]flavorFig{
	"Quota1/h100":      {Nominal: 8, Used: 8, NonIdle: 8, Queued: 4},
	"Quota1/a100":      {Nominal: 6, Used: 4, NonIdle: 4, Lendable: 2},
	"Quota1/a100-1g":   {Nominal: 14, Used: 7, NonIdle: 7, Lendable: 7, Queued: 1},
	"Quota1.1/h100":    {Nominal: 4, Lendable: 4, Queued: 4},
	"Quota1.1/a100":    {Nominal: 6, Used: 4, NonIdle: 4, Lendable: 2},
	"Quota1.1/a100-1g": {},
	"Quota1.2/h100":    {Nominal: 4, Used: 4, NonIdle: 4},
	"Quota1.2/a100":    {},
	"Quota1.2/a100-1g": {Nominal: 7, Used: 7, NonIdle: 7, Queued: 1},
}

// flavorBarsAtEnd are the usage bars `quota status` draws for those
// figures (20 cells on max(nominal, used, 1): '#' non-idle, '.' free
// nominal, ' ' beyond the nominal), by "node/flavor".
var flavorBarsAtEnd = map[string]string{
	"Quota1/h100":      "[" + strings.Repeat("#", 20) + "]",
	"Quota1/a100":      "[" + strings.Repeat("#", 13) + strings.Repeat(".", 7) + "]", // 4 of 6: 13.3 cells
	"Quota1/a100-1g":   "[" + strings.Repeat("#", 10) + strings.Repeat(".", 10) + "]",
	"Quota1.1/h100":    "[" + strings.Repeat(".", 20) + "]",
	"Quota1.1/a100":    "[" + strings.Repeat("#", 13) + strings.Repeat(".", 7) + "]",
	"Quota1.1/a100-1g": "[" + strings.Repeat(" ", 20) + "]",
	"Quota1.2/h100":    "[" + strings.Repeat("#", 20) + "]",
	"Quota1.2/a100":    "[" + strings.Repeat(" ", 20) + "]",
	"Quota1.2/a100-1g": "[" + strings.Repeat("#", 20) + "]",
}

// flavorWorkspaces are the Workspaces column of each node.
var flavorWorkspaces = map[string]string{"Quota1": "workspace-a", "Quota1.1": "workspace-b", "Quota1.2": "workspace-c"}

// runQuotaStatus runs `gputide quota status` (with args) against the
// broker through the CLI's command and returns its output.
func runQuotaStatus(t *testing.T, b *broker, args ...string) (string, error) {
	t.Helper()
	ui := cli.NewMockUi()
	mk, ok := command.Commands(command.Meta{Ui: ui})["quota status"]
	if !ok {
		t.Fatal(`no "quota status" command`)
	}
	cmd, err := mk()
	if err != nil {
		t.Fatal(err)
	}
	if code := cmd.Run(append([]string{"-address", "http://" + b.Addr}, args...)); code != 0 {
		return "", fmt.Errorf("gputide quota status %v: exit %d\n%s%s", args, code, ui.OutputWriter.String(), ui.ErrorWriter.String())
	}
	return ui.OutputWriter.String(), nil
}

// statusJSONFigures reads `gputide quota status -json` by "node/flavor",
// with each entry's workspaces.
func statusJSONFigures(t *testing.T, b *broker) (map[string]flavorFig, map[string]string, error) {
	t.Helper()
	out, err := runQuotaStatus(t, b, "-json")
	if err != nil {
		return nil, nil, err
	}
	var res brokerapi.QuotasResponse
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		return nil, nil, fmt.Errorf("quota status -json: %w\n%s", err, out)
	}
	if len(res.Ungoverned) != 0 {
		return nil, nil, fmt.Errorf("quota status -json lists ungoverned devices %+v: every device has a flavor", res.Ungoverned)
	}
	figs, ws := map[string]flavorFig{}, map[string]string{}
	for _, q := range res.Quotas {
		k := q.Name + "/" + q.Flavor
		if _, dup := figs[k]; dup {
			return nil, nil, fmt.Errorf("quota status -json has %s twice", k)
		}
		if q.StoppingGPUs != 0 {
			return nil, nil, fmt.Errorf("%s: %d GPUs still stopping", k, q.StoppingGPUs)
		}
		figs[k] = flavorFig{Nominal: q.NominalGPUs, Used: q.UsedGPUs, NonIdle: q.NonidleGPUs, Borrowed: q.BorrowedGPUs,
			Debt: q.DebtGPUs, Lendable: q.LendableGPUs, Queued: q.QueuedGPUs}
		ws[k] = strings.Join(q.Workspaces, ",")
	}
	return figs, ws, nil
}

// statusRow is one row of the `quota status` table, by column.
type statusRow struct {
	Nominal, Used, Bar, Borrowed, Debt, Booked, Displaced, Lendable, Queued, Workspaces string
}

// statusColumns are the `quota status` columns point (d) reads, in the
// order the table has them; other columns (DESIGN L14's, say) may come
// between them.
var statusColumns = []string{"Quota", "Flavor", "Nominal", "Used", "Usage", "Borrowed", "Debt", "Booked", "Displaced",
	"Lendable", "Queued", "Workspaces"}

// headerCell is one header name: words joined by single spaces, columns
// two spaces or more apart (formatList).
var headerCell = regexp.MustCompile(`\S+( \S+)*`)

// statusTextRows parses the `quota status` table of a flavored tree: the
// header, then one row per node and flavor ("· " per level before the
// name), by "node/flavor" in the order of the rows. Each cell is cut at
// its header's column (in runes: "·" is one), so cells with spaces (the
// usage bar) read whole.
func statusTextRows(out string) (map[string]statusRow, []string, error) {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	head := []rune(lines[0])
	var names []string
	var starts []int
	for _, m := range headerCell.FindAllStringIndex(string(head), -1) {
		names = append(names, string(head)[m[0]:m[1]])
		starts = append(starts, utf8.RuneCountInString(string(head)[:m[0]]))
	}
	col := map[string]int{}
	last := -1
	for _, want := range statusColumns {
		i := slices.Index(names, want)
		if i <= last {
			return nil, nil, fmt.Errorf("header %q: no column %q after the columns before it", lines[0], want)
		}
		col[want], last = i, i
	}
	rows := map[string]statusRow{}
	var order []string
	for n, l := range lines[1:] {
		r := []rune(l)
		cell := func(name string) string {
			i := col[name]
			from, to := min(starts[i], len(r)), len(r)
			if i+1 < len(starts) {
				to = min(starts[i+1], len(r))
			}
			return strings.TrimSpace(string(r[from:to]))
		}
		if strings.TrimSpace(l) == "" {
			return nil, nil, fmt.Errorf("line %d is empty (an ungoverned devices section?)", n+2)
		}
		k := strings.TrimLeft(cell("Quota"), "· ") + "/" + cell("Flavor")
		if _, dup := rows[k]; dup {
			return nil, nil, fmt.Errorf("%s twice", k)
		}
		rows[k] = statusRow{Nominal: cell("Nominal"), Used: cell("Used"), Bar: cell("Usage"), Borrowed: cell("Borrowed"),
			Debt: cell("Debt"), Booked: cell("Booked"), Displaced: cell("Displaced"), Lendable: cell("Lendable"),
			Queued: cell("Queued"), Workspaces: cell("Workspaces")}
		order = append(order, k)
	}
	return rows, order, nil
}

// metricsLine is one per-quota gauge of /metrics; Prometheus writes the
// labels in name order.
var metricsLine = regexp.MustCompile(`^gputide_quota_([a-z]+)_gpus\{flavor="([^"]*)",quota="([^"]*)"\} (\S+)$`)

// metricsFigures reads the broker's gputide_quota_*_gpus gauges by
// "node/flavor" (Queued is not a metric: left 0).
func metricsFigures(b *broker) (map[string]flavorFig, error) {
	resp, err := http.Get("http://" + b.Addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := map[string]flavorFig{}
	for _, l := range strings.Split(string(body), "\n") {
		m := metricsLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[4], 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", l, err)
		}
		k := m[3] + "/" + m[2]
		f := out[k]
		switch m[1] {
		case "nominal":
			f.Nominal = int(v)
		case "used":
			f.Used = int(v)
		case "nonidle":
			f.NonIdle = int(v)
		case "borrowed":
			f.Borrowed = int(v)
		case "debt":
			f.Debt = int(v)
		case "lendable":
			f.Lendable = int(v)
		default:
			continue
		}
		out[k] = f
	}
	return out, nil
}

// checkFlavorFigures is point (d): `quota status -json`, `quota status`
// and /metrics show flavorFiguresAtEnd, each flavor apart and no series
// of the implicit flavor "gpu". It waits a few plans for the figures
// (the last victim's stop and the 8th notebook's wait settle in the next
// plan).
func checkFlavorFigures(t *testing.T, b *broker) {
	t.Helper()
	err := waitFor(15*time.Second, 250*time.Millisecond, func() error {
		got, ws, err := statusJSONFigures(t, b)
		if err != nil {
			return err
		}
		if d := cmp.Diff(flavorFiguresAtEnd, got); d != "" {
			return fmt.Errorf("quota status -json by node/flavor (-want +got):\n%s", d)
		}
		for k, w := range ws {
			if want := flavorWorkspaces[strings.Split(k, "/")[0]]; w != want {
				return errStop{fmt.Errorf("quota status -json %s: workspaces %q, want %q", k, w, want)}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("(d) %v", err)
	}

	out, err := runQuotaStatus(t, b)
	if err != nil {
		t.Fatalf("(d) %v", err)
	}
	rows, order, err := statusTextRows(out)
	if err != nil {
		t.Fatalf("(d) quota status: %v\n%s", err, out)
	}
	want := map[string]statusRow{}
	for k, f := range flavorFiguresAtEnd {
		want[k] = statusRow{Nominal: strconv.Itoa(f.Nominal), Used: strconv.Itoa(f.Used), Bar: flavorBarsAtEnd[k],
			Borrowed: strconv.Itoa(f.Borrowed), Debt: strconv.Itoa(f.Debt), Booked: "0", Displaced: "0",
			Lendable: strconv.Itoa(f.Lendable), Queued: strconv.Itoa(f.Queued), Workspaces: flavorWorkspaces[strings.Split(k, "/")[0]]}
	}
	if d := cmp.Diff(want, rows); d != "" {
		t.Fatalf("(d) quota status rows by node/flavor (-want +got):\n%s\n%s", d, out)
	}
	// The rows go node by node in tree order, each node's flavors in the
	// tree's order.
	wantOrder := []string{"Quota1/h100", "Quota1/a100", "Quota1/a100-1g", "Quota1.1/h100", "Quota1.1/a100", "Quota1.1/a100-1g",
		"Quota1.2/h100", "Quota1.2/a100", "Quota1.2/a100-1g"}
	if d := cmp.Diff(wantOrder, order); d != "" {
		t.Fatalf("(d) quota status row order (-want +got):\n%s\n%s", d, out)
	}

	metricsWant := map[string]flavorFig{}
	for k, f := range flavorFiguresAtEnd {
		f.Queued = 0
		metricsWant[k] = f
	}
	got, err := metricsFigures(b)
	if err != nil {
		t.Fatalf("(d) %v", err)
	}
	if d := cmp.Diff(metricsWant, got); d != "" {
		t.Fatalf("(d) /metrics gputide_quota_*_gpus by quota/flavor (-want +got):\n%s", d)
	}
	t.Logf("(d) quota status:\n%s", out)
}
