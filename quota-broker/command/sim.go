package command

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/cli"

	"github.com/gputide/gputide/quota-broker/sim"
	"github.com/gputide/gputide/quota-broker/sim/report"
)

// SimCommand is "gputide sim": the simulator, gputide's embedded demo.
type SimCommand struct {
	Meta
	// Stderr receives the progress indication; nil: os.Stderr.
	Stderr io.Writer
}

// Help returns the command's usage text.
func (c *SimCommand) Help() string {
	return strings.TrimSpace(`
Usage: gputide sim [options]

  Sim replays a scenario (a quota tree, a modelled Nomad cluster of GPU
  nodes, inference services on day/night schedules, training replayed from
  the Philly trace, dev instances, quota moves) in simulated time against
  the real planning core, and writes what happened to the output folder:

    report.md       utilisation per quota and overall, GPU-hours used, idle
                    and lent, preemptions by rule, inference waits at each
                    scale-up, training queue waits, work lost to preemption
    report.html     the same report with the charts inline, one file a
                    browser opens from disk (its path is printed last)
    occupancy.svg   GPUs in use over time, stacked by workspace, and each
                    child quota's use against its nominal
    queue.svg       GPUs waiting over time by workspace
    losses.svg      GPU-hours lost to preemption per hour, by rule
    events.jsonl    every plan action with its rule, and every lifecycle
                    event of the modelled cluster

  No Nomad, Consul or GPU is needed. Without -scenario it runs the reference
  scenario: examples/reference/scenario.hcl when run from the repository,
  else the copy built into the binary. See docs/simulator.md.

Sim Options:

  -scenario=FILE
    The scenario file (HCL). Paths in it are relative to it.

  -out=DIR
    The output folder (created if needed). Default: out/sim.

  -days=N
    Simulate N days (a decimal number), instead of the scenario's length.
    0, the default, runs the scenario's length. At least a minute and two
    broker intervals (0.0007 days on the reference).

  -seed=N
    The seed of the workload's random choices, instead of the scenario's:
    a whole number from 0 to 2^53.

  -policy=NAME
    The planning core's policy: gputide (the default: the core with
    DESIGN L14's fair lending of idle GPUs) or gputide-fifo (idle jobs
    in submission order, no give-back: the core before L14).

  -compare
    Also run the same workload under static quotas, a Kueue-like policy
    and the other of gputide and gputide-fifo, and add a side-by-side
    table to the report and the summary.

  -quota=FILE
    Run the scenario with the quota tree of FILE (a quota file, as the
    scenario's quota attribute names) instead of its own: what if the
    quotas were these? The tree must bind the scenario's namespaces and
    hold the nodes its quota moves change.

  -compare-quota=FILE
    Also run gputide with the quota tree of FILE, and put it beside the
    scenario's tree (or -quota's) in one report: a column "whatif" in the
    comparison, and its charts as <chart>-whatif.svg.
`)
}

// Synopsis returns the one-line description shown in the command list.
func (c *SimCommand) Synopsis() string {
	return "Simulate a scenario against the quota broker and report"
}

// Run runs the simulation; see Help. Exit code 0 on success, 1 on bad
// flags, a bad scenario or trace (the error names the file and line), or a
// failed run.
func (c *SimCommand) Run(args []string) int {
	var (
		scenario, out string
		days          float64
		seed          int64
		compare       bool
		quotaFile     string
		compareQuota  string
		policyName    string
	)
	flags := flag.NewFlagSet("sim", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	flags.StringVar(&scenario, "scenario", "", "")
	flags.StringVar(&out, "out", filepath.Join("out", "sim"), "")
	flags.Float64Var(&days, "days", 0, "")
	flags.Int64Var(&seed, "seed", 0, "")
	flags.BoolVar(&compare, "compare", false, "")
	flags.StringVar(&quotaFile, "quota", "", "")
	flags.StringVar(&compareQuota, "compare-quota", "", "")
	flags.StringVar(&policyName, "policy", sim.Gputide{}.Name(), "")
	if err := flags.Parse(args); err != nil {
		c.Ui.Error(fmt.Sprintf("Error parsing flags: %s", err))
		c.Ui.Error(`For additional help try 'gputide sim -help'`)
		return 1
	}
	if flags.NArg() != 0 {
		c.Ui.Error("This command takes no arguments; give the scenario with -scenario=FILE")
		return 1
	}
	core, ok := sim.CorePolicy(policyName)
	if !ok {
		c.Ui.Error(fmt.Sprintf("Invalid -policy=%q: want %s or %s", policyName, sim.Gputide{}.Name(), sim.GputideFIFO{}.Name()))
		return 1
	}
	if math.IsNaN(days) || days < 0 || days > 5*366 {
		c.Ui.Error(fmt.Sprintf("Invalid -days=%v: want a number of days from 0 (the scenario's length) to %d", days, 5*366))
		return 1
	}
	seedSet := false
	flags.Visit(func(f *flag.Flag) { seedSet = seedSet || f.Name == "seed" })
	if seedSet && (seed < 0 || seed > sim.MaxSeed) {
		c.Ui.Error(fmt.Sprintf("Invalid -seed=%d: want a whole number from 0 to %d", seed, int64(sim.MaxSeed)))
		return 1
	}
	// The simulator is a batch program with a small live heap: trade memory
	// for less collection, within a soft limit (sim.GCPercent).
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(sim.GCPercent)
		debug.SetMemoryLimit(sim.MemoryLimit)
	}

	sc, err := loadScenario(scenario)
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error loading scenario: %s", err))
		return 1
	}
	for _, n := range sc.Notes {
		c.Ui.Warn("Warning: " + n)
	}
	if days > 0 {
		sc.Length = time.Duration(days * float64(24*time.Hour))
		if min := sc.MinLength(); sc.Length < min {
			c.Ui.Error(fmt.Sprintf("Invalid -days=%v: that is %s of simulated time; want at least %s (%.4g days: a minute, and two broker intervals of %s)",
				days, report.Dur(sc.Length), report.Dur(min), min.Hours()/24, sc.Broker.Interval))
			return 1
		}
	} else if min := sc.MinLength(); sc.Length < min {
		c.Ui.Error(fmt.Sprintf("Invalid scenario length %s: want at least %s (a minute, and two broker intervals of %s)",
			report.Dur(sc.Length), report.Dur(min), sc.Broker.Interval))
		return 1
	}
	if seedSet {
		sc.Seed = uint64(seed)
	}
	if quotaFile != "" {
		if sc, err = sc.WithQuotaFile(quotaFile); err != nil {
			c.Ui.Error(fmt.Sprintf("Error reading -quota=%s: %s", quotaFile, err))
			return 1
		}
	}
	var whatif *sim.Scenario
	if compareQuota != "" {
		if whatif, err = sc.WithQuotaFile(compareQuota); err != nil {
			c.Ui.Error(fmt.Sprintf("Error reading -compare-quota=%s: %s", compareQuota, err))
			return 1
		}
	}
	w, err := sc.Workload()
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error reading the workload: %s", err))
		return 1
	}
	if quotaFile != "" {
		// The report's inputs name the tree that ran, so that a -quota
		// report is not read as the scenario's own.
		w.Notes = append([]string{fmt.Sprintf("quota tree: %s (-quota), instead of the scenario's", quotaFile)}, w.Notes...)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		c.Ui.Error(fmt.Sprintf("Error creating %s: %s", out, err))
		return 1
	}
	ev, err := os.Create(filepath.Join(out, report.EventsFile))
	if err != nil {
		c.Ui.Error(fmt.Sprintf("Error creating %s: %s", report.EventsFile, err))
		return 1
	}
	defer ev.Close()

	stderr := c.Stderr
	if bu, ok := c.Ui.(*cli.BasicUi); stderr == nil && ok && bu.ErrorWriter != nil {
		stderr = bu.ErrorWriter
	}
	if stderr == nil {
		stderr = os.Stderr
	}
	prog := &progress{w: stderr, name: sc.Name, length: sc.Length, tty: isTerminal(stderr)}
	var policies []sim.Policy
	if compare {
		sh := sim.PolicyShares(sc, w)
		// The other core policy last, beside the main run: the
		// comparison's columns end with gputide-fifo and gputide.
		other := sim.Policy(sim.GputideFIFO{})
		if core.Name() == other.Name() {
			other = sim.Gputide{}
		}
		policies = []sim.Policy{sim.NewStatic(sh), sim.NewKueue(sh), other}
	}
	results := make([]*sim.Result, len(policies)+2)
	errs := make([]error, len(policies)+2)
	var wg sync.WaitGroup
	for i, p := range policies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = sim.Run(sc, w, sim.Options{Policy: p})
		}()
	}
	main := len(policies)
	if whatif != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := sim.Run(whatif, w, sim.Options{Policy: core})
			if r != nil {
				r.Label, r.LabelText = "whatif", fmt.Sprintf("%s with the quota tree of `%s` instead of the scenario's", core.Name(), compareQuota)
			}
			results[main+1], errs[main+1] = r, err
		}()
	}
	results[main], errs[main] = sim.Run(sc, w, sim.Options{Policy: core, Events: ev, Progress: prog.update})
	prog.done()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Ui.Error(fmt.Sprintf("Error simulating: %s", err))
		return 1
	}
	if err := ev.Close(); err != nil {
		c.Ui.Error(fmt.Sprintf("Error writing %s: %s", report.EventsFile, err))
		return 1
	}
	var compared []*sim.Result
	if compare || whatif != nil {
		compared = results[:main+1]
		if whatif != nil {
			compared = results
		}
	}
	if err := report.Write(out, results[main], compared, w.Notes); err != nil {
		c.Ui.Error(fmt.Sprintf("Error writing the report: %s", err))
		return 1
	}
	var b strings.Builder
	report.Summary(&b, results[main], compared, w.Notes, out)
	c.Ui.Output(strings.TrimRight(b.String(), "\n"))
	return 0
}

// loadScenario reads the named scenario, or the reference scenario: the
// repository's file when run from the repository, else the embedded copy.
func loadScenario(name string) (*sim.Scenario, error) {
	if name != "" {
		return sim.LoadFile(name)
	}
	if _, err := os.Stat(sim.ReferencePath); err == nil {
		return sim.LoadFile(sim.ReferencePath)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return sim.LoadReference()
}

// progress shows how far a run is: on a terminal one line updated every
// percent, elsewhere a line every quarter.
type progress struct {
	w      io.Writer
	name   string
	length time.Duration // simulated time
	tty    bool
	last   int
	shown  bool
}

func (p *progress) update(frac float64) {
	pc := int(frac * 100)
	if p.shown && (pc == p.last || !p.tty && pc/25 == p.last/25) {
		return
	}
	p.last, p.shown = pc, true
	// Days for a run of a day or more, else the simulated time itself.
	where := fmt.Sprintf("day %.1f of %.1f", frac*p.length.Hours()/24, p.length.Hours()/24)
	if p.length < 24*time.Hour {
		where = fmt.Sprintf("%s of %s", report.Dur(time.Duration(frac*float64(p.length))), report.Dur(p.length))
	}
	if p.tty {
		fmt.Fprintf(p.w, "\rsimulating %s: %3d%% (%s)", p.name, pc, where)
		return
	}
	fmt.Fprintf(p.w, "simulating %s: %3d%% (%s)\n", p.name, pc, where)
}

func (p *progress) done() {
	if p.shown && p.tty {
		fmt.Fprintln(p.w)
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
