package sim

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/gputide/gputide/internal/regfile"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/schedule"
)

// Scenario is a parsed scenario file: the quota tree, the modelled cluster,
// the broker's settings and the workloads. See docs/simulator.md for the
// language; examples/reference/scenario.hcl is the reference scenario.
type Scenario struct {
	Name     string
	File     string // the scenario file as named in messages
	src      Source // resolves the paths the file names
	Quota    *quota.Node
	QuotaPos string // "file:line" of the quota attribute
	Settings quota.Settings
	Zone     *time.Location
	Start    time.Time     // in Zone
	Length   time.Duration // simulated time
	Seed     uint64
	Broker   Broker
	Nodes    []NodeGroup
	Infer    []*Inference
	Training []*Training
	Dev      []*Dev
	Jobs     []*BatchJob
	Moves    []*QuotaMove
	// Reservations are the Calendar bookings made before the run (DESIGN
	// L10), in file order; each passed reservation.Prepare and the L10
	// check against the ones before it.
	Reservations []*Booking
	// Notes are warnings on values read as something other than written
	// ("file:line: ..."), e.g. a local time in a daylight-saving gap and
	// the instant used instead; the command prints them and Workload
	// passes them on to the report.
	Notes []string

	// Inventories are the cluster's inventory blocks (node lists made
	// into node groups, one per model), in file order.
	Inventories []*Inventory
	// Openb are the replays of Alibaba openb pod lists, in file order.
	Openb []*Openb
}

// Broker holds the broker's and the autoscaler's simulated settings.
type Broker struct {
	Interval    time.Duration // planning and autoscaler evaluation period (30s)
	KillTimeout time.Duration // default kill_timeout of training jobs (30s)
	Prewarm     bool          // drain borrowers ahead of scheduled scale-ups
}

// NodeGroup is a set of identical client nodes.
type NodeGroup struct {
	Name       string
	Count      int
	GPUs       int // per node
	Model      string
	Datacenter string
	NodePool   string
	// MIG cuts some GPUs of each node into MIG slices; nil: all whole.
	MIG *MIGLayout
}

// Placement are a workload's placement constraints.
type Placement struct {
	Datacenters []string
	NodePool    string
	Model       string
	// Flavors are the quota flavors the job may use, in the order it
	// tries them (DESIGN L13; the snapshot's pending flavors): names of
	// the tree's flavor blocks, nil for all of them in the tree's order.
	Flavors    []string
	FlavorsPos string // file:line of the flavors attribute, or ""
}

// Inference is an autoscaled inference service: its replica count follows a
// day/night schedule (package schedule), optionally plus extra replicas
// that follow a diurnal demand shape.
type Inference struct {
	Name, Namespace, Group string
	Priority               int
	GPUs                   int // per replica
	KillTimeout            time.Duration
	Schedule               *schedule.Schedule
	Windows                []string // as written, for the report
	Default                int
	Demand                 *Demand
	NamespacePos           string // "file:line" of the namespace attribute
	Placement
}

// Demand is the demand-shape part of an inference service.
type Demand struct {
	Trace, Fallback string
	Shift           time.Duration
	Extra           int // replicas added at the busiest hour
	Pos             string
}

// Training replays a Philly-format job trace.
type Training struct {
	// FlavorShares split the trace's jobs by the flavors they allow
	// (DESIGN L13): each job draws one entry with its share's
	// probability, in the entries' key order, and allows its flavors in
	// the listed order; none: every job allows Placement.Flavors.
	FlavorShares []FlavorShare

	Name            string
	Trace, Fallback string
	TracePos        string
	TraceZone       *time.Location
	TraceStart      time.Time
	TimeScale       float64 // trace seconds per simulated second
	GPUScale        float64 // multiplies each job's GPUs
	Sample          float64 // fraction of rows kept
	IdleFraction    float64 // fraction of jobs that are idle jobs
	MinDuration     time.Duration
	MaxGPUs         int
	Priority        int
	KillTimeout     time.Duration
	Checkpoint      time.Duration // 0: no checkpoints, a preempted run loses all its work
	// CheckpointWrite is how long a job takes to write a checkpoint when it
	// is stopped; when it fits in its kill_timeout (DESIGN L8 gives a victim
	// that long), a preempted job loses no work. 0: jobs checkpoint only
	// every Checkpoint.
	CheckpointWrite time.Duration
	InFlight        bool    // jobs running at trace_start start with the simulation
	Gang            string  // "flex" (all-or-nothing) or "partial"
	ExpectRows      int     // 0: not checked
	VCs             []VCMap // sorted by VC; "*" = any other VC
	Placement
	// TraceRead names the file the trace was read from (Trace, or
	// Fallback when Trace is missing), as Workload opened it; "" before.
	TraceRead string
	// FallbackRead says that TraceRead is Fallback: Trace was missing.
	FallbackRead bool
}

// VCMap maps one Philly virtual cluster to a workspace.
type VCMap struct {
	VC, Namespace string
	Pos           string // "file:line" of the mapping
}

// Dev is a set of long-running interactive services (notebooks).
type Dev struct {
	Name, Namespace string
	Count, GPUs     int
	Priority        int
	At              time.Time
	KillTimeout     time.Duration
	NamespacePos    string // "file:line" of the namespace attribute
	Placement
}

// BatchJob is one explicitly declared batch job.
type BatchJob struct {
	Name, Namespace string
	At              time.Time
	Count, GPUs     int
	Duration        time.Duration
	Priority        int
	Idle            bool
	KillTimeout     time.Duration
	Checkpoint      time.Duration
	NamespacePos    string // "file:line" of the namespace attribute
	// Reservation is the booking the job names (`reservation`), or "".
	Reservation    string
	ReservationPos string
	// Flex is the job's flex settings (DESIGN L11: flex_max_wait,
	// flex_max_run), or nil for a job that is not a flex request.
	Flex *plan.Flex
	Placement
}

// Booking is a Calendar booking of the scenario (a reservation block,
// DESIGN L10): GPUs of the quota node its namespace is bound to, over
// [Start, Start + Duration), in allocations of AllocGPUs GPUs. Jobs name it
// with `reservation = "ID"`.
type Booking struct {
	ID, Namespace string
	Quota         string // the quota node of Namespace
	GPUs          int
	AllocGPUs     int // divides GPUs; default the largest divisor up to 8
	Model         string
	// Flavor is the flavor booked (DESIGN L13, `flavor`): a flavor of the
	// tree, required when it declares several; the tree's only flavor
	// when it declares one; "" in a tree without flavor blocks (the
	// implicit flavor). A booking gives flavor or model, not both.
	Flavor   string
	NodePool string
	Start    time.Time // in the scenario's zone
	Duration time.Duration
	Pos      string // "file:line" of the block
}

// End is the first instant after the booking's window.
func (b *Booking) End() time.Time { return b.Start.Add(b.Duration) }

// QuotaMove changes nominal GPUs at a time, atomically (use case 2).
type QuotaMove struct {
	Name string
	At   time.Time
	GPUs []QuotaGPUs
	// Flavor is the flavor whose nominals the move sets (DESIGN L13):
	// the block's flavor attribute, by default the tree's first flavor.
	Flavor string
	Pos    string
}

// QuotaGPUs is one node's new nominal.
type QuotaGPUs struct {
	Quota string
	GPUs  int
}

// MaxSeed is the largest seed a scenario or -seed may give (2^53, so that
// every seed is exact in HCL's numbers).
const MaxSeed = 1 << 53

// Caps on the files a scenario reads (docs/simulator.md, "Input limits"):
// each is far above what a real file of its kind needs, and keeps what a
// wrong path (a device, a log file) or a hostile file costs in memory low.
const (
	// MaxScenarioBytes is the largest scenario file read (1 MiB); the
	// reference scenario is 4 KB.
	MaxScenarioBytes = 1 << 20
	// MaxQuotaBytes is the largest quota file read: the broker's own cap.
	MaxQuotaBytes = quota.MaxFileSize
	// MaxTraceBytes is the largest trace or fallback trace read (64 MiB):
	// the whole Philly job trace is 3.4 MB, the Alibaba GenAI request
	// trace 2 MB; the replay holds about 200 bytes per Philly row.
	MaxTraceBytes = 64 << 20
)

// Source opens the files a scenario names, relative to the scenario.
type Source interface {
	// Open returns the file at rel (relative to the scenario's folder, or
	// absolute) and the name to use for it in messages. Reading more than
	// limit bytes of it fails. An absent file's error wraps fs.ErrNotExist.
	Open(rel string, limit int64) (io.ReadCloser, string, error)
}

// osSource reads regular files only (package regfile): a device, FIFO or
// folder is refused before anything is read.
type osSource struct{ dir string }

func (s osSource) Open(rel string, limit int64) (io.ReadCloser, string, error) {
	p := rel
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.dir, rel)
	}
	f, err := regfile.Open(p, limit)
	if err != nil {
		return nil, p, err
	}
	return f, p, nil
}

type fsSource struct {
	fsys fs.FS
	dir  string
	tag  string
}

func (s fsSource) Open(rel string, limit int64) (io.ReadCloser, string, error) {
	p := path.Clean(path.Join(s.dir, rel))
	name := s.tag + p
	if path.IsAbs(rel) || !fs.ValidPath(p) {
		return nil, name, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	f, err := s.fsys.Open(p) // embedded files are part of the binary: no cap
	return f, name, err
}

// LoadFile reads the scenario file at p, a regular file of at most
// MaxScenarioBytes; the paths it names are relative to its folder.
func LoadFile(p string) (*Scenario, error) {
	src, err := regfile.Read(p, MaxScenarioBytes)
	if err != nil {
		return nil, err
	}
	return Parse(src, p, osSource{dir: filepath.Dir(p)})
}

// LoadFS reads the scenario file at p in fsys (e.g. the embedded copy of
// the reference scenario); tag prefixes its name in messages.
func LoadFS(fsys fs.FS, p, tag string) (*Scenario, error) {
	src, err := fs.ReadFile(fsys, p)
	if err != nil {
		return nil, err
	}
	return Parse(src, tag+p, fsSource{fsys: fsys, dir: path.Dir(p), tag: tag})
}

// openFallback opens primary, or fallback when primary does not exist;
// usedFallback says which.
func openFallback(src Source, primary, fallback string) (f io.ReadCloser, name string, usedFallback bool, err error) {
	f, name, err = src.Open(primary, MaxTraceBytes)
	if err == nil || fallback == "" || !errors.Is(err, fs.ErrNotExist) {
		return f, name, false, err
	}
	f, name, err = src.Open(fallback, MaxTraceBytes)
	return f, name, true, err
}

// Parse reads a scenario from HCL source. file names it in messages; src
// opens the files it names (the quota tree here; the traces later, in
// Workload). Every error names the file and the line.
func Parse(text []byte, file string, src Source) (*Scenario, error) {
	f, diags := hclsyntax.ParseConfig(text, file, hcl.InitialPos)
	if err := diagError(diags, file); err != nil {
		return nil, err
	}
	top, blocks, err := open(f.Body, file, "", hcl.Range{Filename: file, Start: hcl.InitialPos},
		[]string{"name", "quota", "time_zone", "start", "length", "seed"},
		hcl.BlockHeaderSchema{Type: "broker"},
		hcl.BlockHeaderSchema{Type: "cluster"},
		hcl.BlockHeaderSchema{Type: "inference", LabelNames: []string{"name"}},
		hcl.BlockHeaderSchema{Type: "training", LabelNames: []string{"name"}},
		hcl.BlockHeaderSchema{Type: "dev", LabelNames: []string{"name"}},
		hcl.BlockHeaderSchema{Type: "job", LabelNames: []string{"name"}},
		hcl.BlockHeaderSchema{Type: "openb", LabelNames: []string{"name"}},
		hcl.BlockHeaderSchema{Type: "quota_move", LabelNames: []string{"name"}},
		hcl.BlockHeaderSchema{Type: "reservation", LabelNames: []string{"id"}},
	)
	if err != nil {
		return nil, err
	}
	s := &Scenario{File: file, src: src}
	s.Name = top.str("name", false, "scenario")
	quotaFile := top.str("quota", true, "")
	s.QuotaPos = top.pos("quota")
	zone := top.str("time_zone", true, "")
	if top.err != nil {
		return nil, top.err
	}
	if s.Zone, err = loadZone(zone); err != nil {
		top.fail(top.attrs["time_zone"].Range, "time_zone = %q: %v", zone, err)
		return nil, top.err
	}
	s.Start = top.instant("start", true, time.Time{}, s.Zone)
	s.Length = top.duration("length", true, 0, time.Minute, 5*366*24*time.Hour)
	s.Seed = uint64(top.integer("seed", false, 1, 0, MaxSeed))
	if top.err != nil {
		return nil, top.err
	}
	s.Notes = append(s.Notes, top.notes...)

	// The quota tree.
	qf, qname, err := src.Open(quotaFile, MaxQuotaBytes)
	if err != nil {
		return nil, &Error{Pos: s.QuotaPos, Msg: fmt.Sprintf("quota = %q: %v", quotaFile, err)}
	}
	qsrc, err := io.ReadAll(qf)
	qf.Close()
	if err != nil {
		return nil, &Error{Pos: s.QuotaPos, Msg: fmt.Sprintf("quota = %q: %v", quotaFile, err)}
	}
	if s.Quota, s.Settings, err = quota.Parse(qsrc, qname); err != nil {
		return nil, err
	}

	s.Broker = Broker{Interval: 30 * time.Second, KillTimeout: 30 * time.Second, Prewarm: true}
	counts := map[string]int{}
	names := map[string]string{}
	for _, blk := range blocks {
		counts[blk.Type]++
		what := blk.Type
		if len(blk.Labels) > 0 {
			what = fmt.Sprintf("%s %q", blk.Type, blk.Labels[0])
			key := blk.Type + "/" + blk.Labels[0]
			if blk.Type == "inference" || blk.Type == "dev" || blk.Type == "job" {
				key = "workload/" + blk.Labels[0]
			}
			if prev, dup := names[key]; dup {
				return nil, &Error{Pos: posOf(blk.DefRange), Msg: fmt.Sprintf("%s: name used twice (first at %s)", what, prev)}
			}
			names[key] = posOf(blk.DefRange)
		}
		var err error
		switch blk.Type {
		case "broker":
			err = s.parseBroker(blk, what)
		case "cluster":
			err = s.parseCluster(blk, what)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, t := range []string{"broker", "cluster"} {
		if counts[t] > 1 {
			return nil, &Error{Pos: file, Msg: fmt.Sprintf("more than one %s block", t)}
		}
	}
	if counts["cluster"] == 0 {
		return nil, &Error{Pos: file, Msg: "missing cluster block"}
	}
	for _, blk := range blocks {
		what := blk.Type
		if len(blk.Labels) > 0 {
			what = fmt.Sprintf("%s %q", blk.Type, blk.Labels[0])
		}
		var err error
		switch blk.Type {
		case "inference":
			err = s.parseInference(blk, what)
		case "training":
			err = s.parseTraining(blk, what)
		case "dev":
			err = s.parseDev(blk, what)
		case "job":
			err = s.parseJob(blk, what)
		case "openb":
			err = s.parseOpenb(blk, what)
		case "quota_move":
			err = s.parseMove(blk, what)
		case "reservation":
			err = s.parseReservation(blk, what)
		}
		if err != nil {
			return nil, err
		}
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	return s, nil
}

func loadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("want an IANA zone name such as \"Europe/Berlin\"")
	}
	return time.LoadLocation(name)
}

func (s *Scenario) parseBroker(blk *hcl.Block, what string) error {
	b, _, err := open(blk.Body, s.File, what, blk.DefRange, []string{"interval", "kill_timeout", "prewarm"})
	if err != nil {
		return err
	}
	s.Broker.Interval = b.duration("interval", false, s.Broker.Interval, time.Second, time.Hour)
	s.Broker.KillTimeout = b.duration("kill_timeout", false, s.Broker.KillTimeout, 0, 24*time.Hour)
	s.Broker.Prewarm = b.boolean("prewarm", s.Broker.Prewarm)
	return b.err
}

func (s *Scenario) parseCluster(blk *hcl.Block, what string) error {
	_, nodes, err := open(blk.Body, s.File, what, blk.DefRange, nil,
		hcl.BlockHeaderSchema{Type: "nodes", LabelNames: []string{"name"}},
		hcl.BlockHeaderSchema{Type: "inventory", LabelNames: []string{"name"}})
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return &Error{Pos: posOf(blk.DefRange), Msg: what + `: no nodes or inventory block; write nodes "gpu" { count = 16  gpus = 8 }`}
	}
	seen := map[string]string{} // node group name -> where it was given
	for _, nb := range nodes {
		if nb.Type == "inventory" {
			if err := s.parseInventory(nb, fmt.Sprintf("inventory %q", nb.Labels[0]), seen); err != nil {
				return err
			}
			continue
		}
		w := fmt.Sprintf("nodes %q", nb.Labels[0])
		if prev, dup := seen[nb.Labels[0]]; dup {
			return &Error{Pos: posOf(nb.DefRange), Msg: fmt.Sprintf("%s: name used twice (first at %s)", w, prev)}
		}
		seen[nb.Labels[0]] = posOf(nb.DefRange)
		b, subs, err := open(nb.Body, s.File, w, nb.DefRange, []string{"count", "gpus", "model", "datacenter", "node_pool"},
			hcl.BlockHeaderSchema{Type: "mig"})
		if err != nil {
			return err
		}
		g := NodeGroup{Name: nb.Labels[0]}
		g.Count = b.integer("count", true, 0, 1, 100000)
		g.GPUs = b.integer("gpus", true, 0, 1, 64)
		g.Model = b.str("model", false, "NVIDIA H100 80GB HBM3")
		g.Datacenter = b.str("datacenter", false, "dc1")
		g.NodePool = b.str("node_pool", false, "default")
		if b.err != nil {
			return b.err
		}
		if len(subs) > 1 {
			return &Error{Pos: posOf(subs[1].DefRange), Msg: w + ": more than one mig block"}
		}
		for _, mb := range subs {
			if err := s.parseMIG(mb, w, &g); err != nil {
				return err
			}
		}
		s.Nodes = append(s.Nodes, g)
	}
	count, devices := 0, 0
	for _, g := range s.Nodes {
		count += g.Count
		devices += g.Count * g.Devices()
	}
	if devices > MaxClusterDevices {
		return &Error{Pos: posOf(blk.DefRange), Msg: fmt.Sprintf("%s: %d nodes with %d GPU devices (MIG slices counted apart), more than %d the simulator lays out",
			what, count, devices, MaxClusterDevices)}
	}
	return nil
}

// MaxClusterDevices is the most GPU device instances (whole GPUs and MIG
// slices) a scenario's cluster may have: each is laid out when the run
// begins. A nodes block may give 100,000 nodes of 64 GPUs cut into 7
// slices each, so blocks alone do not bound it.
const MaxClusterDevices = 1 << 20

func (b *block) placement() Placement {
	return Placement{Datacenters: b.strings("datacenters"), NodePool: b.str("node_pool", false, ""), Model: b.str("model", false, ""),
		Flavors: b.strings("flavors"), FlavorsPos: b.pos("flavors")}
}

var placementAttrs = []string{"datacenters", "node_pool", "model", "flavors"}

// checkFlavors validates a workload's flavors against the tree's
// (DESIGN L13): each names a flavor block of the quota file, once.
func (s *Scenario) checkFlavors(what string, pl Placement) error {
	names := quota.FlavorNames(s.Quota)
	seen := map[string]bool{}
	for _, f := range pl.Flavors {
		if !slices.Contains(names, f) {
			return &Error{Pos: pl.FlavorsPos, Msg: fmt.Sprintf("%s: flavors: %q is not a flavor of the quota tree (flavors: %s)",
				what, f, strings.Join(names, ", "))}
		}
		if seen[f] {
			return &Error{Pos: pl.FlavorsPos, Msg: fmt.Sprintf("%s: flavors: %q named twice", what, f)}
		}
		seen[f] = true
	}
	return nil
}

func (s *Scenario) parseInference(blk *hcl.Block, what string) error {
	b, subs, err := open(blk.Body, s.File, what, blk.DefRange,
		append([]string{"namespace", "group", "priority", "gpus", "kill_timeout", "default", "windows", "holidays", "ramp"}, placementAttrs...),
		hcl.BlockHeaderSchema{Type: "demand"})
	if err != nil {
		return err
	}
	in := &Inference{Name: blk.Labels[0]}
	in.Namespace = b.str("namespace", true, "")
	in.NamespacePos = b.pos("namespace")
	in.Group = b.str("group", false, "server")
	in.Priority = b.integer("priority", false, 80, 1, 100)
	in.GPUs = b.integer("gpus", true, 0, 1, 64)
	in.KillTimeout = b.duration("kill_timeout", false, 5*time.Second, 0, time.Hour)
	in.Default = b.integer("default", false, 0, 0, 100000)
	in.Placement = b.placement()
	cfg := schedule.Config{TimeZone: s.Zone.String(), Default: in.Default, Holidays: b.strings("holidays")}
	cfg.Ramp = b.duration("ramp", false, 0, 0, 24*time.Hour)
	wins := b.entries("windows", true)
	for _, e := range wins {
		spec := b.entryString("windows", e)
		if b.err != nil {
			return b.err
		}
		wc, err := schedule.ParseWindow(spec)
		if err != nil {
			b.fail(e.Pos, "windows[%q] = %q: %v", e.Key, spec, err)
			return b.err
		}
		wc.Name = e.Key
		cfg.Windows = append(cfg.Windows, wc)
		in.Windows = append(in.Windows, fmt.Sprintf("%s = %q", e.Key, spec))
	}
	if b.err != nil {
		return b.err
	}
	if len(cfg.Windows) == 0 {
		b.fail(b.attrs["windows"].Range, "windows: give at least one window, e.g. { day = \"mon-fri 08:00-22:00 4\" }")
		return b.err
	}
	if in.Schedule, err = schedule.New(cfg); err != nil {
		b.fail(b.attrs["windows"].Range, "schedule: %v", err)
		return b.err
	}
	if len(subs) > 1 {
		b.fail(subs[1].DefRange, "more than one demand block")
		return b.err
	}
	for _, sb := range subs {
		d, _, err := open(sb.Body, s.File, what+" demand", sb.DefRange, []string{"trace", "fallback", "shift", "extra"})
		if err != nil {
			return err
		}
		in.Demand = &Demand{Pos: posOf(sb.DefRange)}
		in.Demand.Trace = d.str("trace", true, "")
		in.Demand.Fallback = d.str("fallback", false, "")
		in.Demand.Shift = d.duration("shift", false, 0, -24*time.Hour, 24*time.Hour)
		in.Demand.Extra = d.integer("extra", true, 0, 0, 100000)
		if d.err != nil {
			return d.err
		}
	}
	s.Infer = append(s.Infer, in)
	return b.err
}

func (s *Scenario) parseTraining(blk *hcl.Block, what string) error {
	b, _, err := open(blk.Body, s.File, what, blk.DefRange, append([]string{
		"trace", "fallback", "trace_time_zone", "trace_start", "time_scale", "gpu_scale", "sample",
		"idle_fraction", "min_duration", "max_gpus", "priority", "kill_timeout", "checkpoint",
		"checkpoint_write", "in_flight", "gang", "expect_rows", "workspaces", "flavor_shares"}, placementAttrs...))
	if err != nil {
		return err
	}
	t := &Training{Name: blk.Labels[0]}
	t.Trace = b.str("trace", true, "")
	t.TracePos = b.pos("trace")
	t.Fallback = b.str("fallback", false, "")
	tz := b.str("trace_time_zone", false, "America/Los_Angeles")
	if b.err != nil {
		return b.err
	}
	if t.TraceZone, err = loadZone(tz); err != nil {
		b.fail(b.attrs["trace_time_zone"].Range, "trace_time_zone = %q: %v", tz, err)
		return b.err
	}
	t.TraceStart = b.instant("trace_start", true, time.Time{}, t.TraceZone)
	t.TimeScale = b.number("time_scale", 1, 1e-3, 1e6)
	t.GPUScale = b.number("gpu_scale", 1, 1e-3, 1e3)
	t.Sample = b.number("sample", 1, 0, 1)
	t.IdleFraction = b.number("idle_fraction", 0.5, 0, 1)
	t.MinDuration = b.duration("min_duration", false, 0, 0, 365*24*time.Hour)
	t.MaxGPUs = b.integer("max_gpus", false, 64, 1, 1<<20)
	t.Priority = b.integer("priority", false, 50, 1, 100)
	t.KillTimeout = b.duration("kill_timeout", false, s.Broker.KillTimeout, 0, 24*time.Hour)
	t.Checkpoint = b.duration("checkpoint", false, 30*time.Minute, 0, 365*24*time.Hour)
	t.CheckpointWrite = b.duration("checkpoint_write", false, 0, 0, 24*time.Hour)
	t.InFlight = b.boolean("in_flight", true)
	t.Gang = b.str("gang", false, "flex")
	t.ExpectRows = b.integer("expect_rows", false, 0, 0, 1<<40)
	t.Placement = b.placement()
	sum := 0.0
	for _, e := range b.entries("flavor_shares", false) {
		f := b.entryNumber("flavor_shares", e, 0, 1)
		var fl []string
		for _, n := range strings.Split(e.Key, ",") {
			fl = append(fl, strings.TrimSpace(n))
		}
		t.FlavorShares = append(t.FlavorShares, FlavorShare{Flavors: fl, Share: f, Pos: posOf(e.Pos)})
		sum += f
	}
	if b.err == nil && len(t.FlavorShares) > 0 {
		switch {
		case t.Placement.Flavors != nil:
			b.fail(b.attrs["flavor_shares"].Range, "flavor_shares: give either flavors or flavor_shares, not both")
		case math.Abs(sum-1) > 1e-9:
			b.fail(b.attrs["flavor_shares"].Range, "flavor_shares: the shares add up to %s, want 1", number(sum))
		}
		sort.SliceStable(t.FlavorShares, func(i, j int) bool {
			return strings.Join(t.FlavorShares[i].Flavors, ",") < strings.Join(t.FlavorShares[j].Flavors, ",")
		})
	}
	if b.err == nil && t.Gang != "flex" && t.Gang != "partial" {
		b.fail(b.attrs["gang"].Range, "gang = %q: want \"flex\" (all-or-nothing) or \"partial\"", t.Gang)
	}
	for _, e := range b.entries("workspaces", true) {
		ns := b.entryString("workspaces", e)
		t.VCs = append(t.VCs, VCMap{VC: e.Key, Namespace: ns, Pos: posOf(e.Pos)})
	}
	if b.err != nil {
		return b.err
	}
	if len(t.VCs) == 0 {
		b.fail(b.attrs["workspaces"].Range, "workspaces: map at least one virtual cluster, e.g. { \"6c71a0\" = \"workspace-b\" }")
		return b.err
	}
	sort.Slice(t.VCs, func(i, j int) bool { return t.VCs[i].VC < t.VCs[j].VC })
	s.Training = append(s.Training, t)
	s.Notes = append(s.Notes, b.notes...)
	return nil
}

func (s *Scenario) parseDev(blk *hcl.Block, what string) error {
	b, _, err := open(blk.Body, s.File, what, blk.DefRange,
		append([]string{"namespace", "count", "gpus", "priority", "at", "kill_timeout"}, placementAttrs...))
	if err != nil {
		return err
	}
	d := &Dev{Name: blk.Labels[0]}
	d.Namespace = b.str("namespace", true, "")
	d.NamespacePos = b.pos("namespace")
	d.Count = b.integer("count", true, 0, 1, 100000)
	d.GPUs = b.integer("gpus", false, 1, 1, 64)
	d.Priority = b.integer("priority", false, 60, 1, 100)
	d.At = b.instant("at", false, s.Start, s.Zone)
	d.KillTimeout = b.duration("kill_timeout", false, 5*time.Second, 0, time.Hour)
	d.Placement = b.placement()
	s.Dev = append(s.Dev, d)
	s.Notes = append(s.Notes, b.notes...)
	return b.err
}

func (s *Scenario) parseJob(blk *hcl.Block, what string) error {
	b, _, err := open(blk.Body, s.File, what, blk.DefRange,
		append([]string{"namespace", "at", "count", "gpus", "duration", "priority", "idle", "kill_timeout", "checkpoint",
			"reservation", "flex_max_wait", "flex_max_run"}, placementAttrs...))
	if err != nil {
		return err
	}
	j := &BatchJob{Name: blk.Labels[0]}
	j.Namespace = b.str("namespace", true, "")
	j.NamespacePos = b.pos("namespace")
	j.At = b.instant("at", false, s.Start, s.Zone)
	j.Count = b.integer("count", false, 1, 1, 100000)
	j.GPUs = b.integer("gpus", true, 0, 1, 64)
	j.Duration = b.duration("duration", true, 0, 0, 10*366*24*time.Hour)
	j.Priority = b.integer("priority", false, 50, 1, 100)
	j.Idle = b.boolean("idle", false)
	j.KillTimeout = b.duration("kill_timeout", false, s.Broker.KillTimeout, 0, 24*time.Hour)
	j.Checkpoint = b.duration("checkpoint", false, 30*time.Minute, 0, 365*24*time.Hour)
	j.Placement = b.placement()
	j.Reservation = b.str("reservation", false, "")
	j.ReservationPos = b.pos("reservation")
	j.Flex = b.flex(j.Idle, j.Reservation != "")
	s.Jobs = append(s.Jobs, j)
	s.Notes = append(s.Notes, b.notes...)
	return b.err
}

func (s *Scenario) parseMove(blk *hcl.Block, what string) error {
	b, _, err := open(blk.Body, s.File, what, blk.DefRange, []string{"at", "gpus", "flavor"})
	if err != nil {
		return err
	}
	m := &QuotaMove{Name: blk.Labels[0], Pos: posOf(blk.DefRange)}
	m.At = b.instant("at", true, time.Time{}, s.Zone)
	names := quota.FlavorNames(s.Quota)
	m.Flavor = b.str("flavor", false, names[0])
	if b.err == nil && !slices.Contains(names, m.Flavor) {
		b.fail(b.attrs["flavor"].Range, "flavor = %q: not a flavor of the quota tree (flavors: %s)", m.Flavor, strings.Join(names, ", "))
		return b.err
	}
	for _, e := range b.entries("gpus", true) {
		n := b.entryInt("gpus", e, 0, quota.MaxGPUs)
		if b.err != nil {
			return b.err
		}
		if s.Quota.Find(e.Key) == nil {
			b.fail(e.Pos, "gpus: no quota node %q in %s", e.Key, s.QuotaPos)
			return b.err
		}
		m.GPUs = append(m.GPUs, QuotaGPUs{Quota: e.Key, GPUs: n})
	}
	if b.err != nil {
		return b.err
	}
	if len(m.GPUs) == 0 {
		b.fail(b.attrs["gpus"].Range, "gpus: name at least one quota node")
		return b.err
	}
	s.Moves = append(s.Moves, m)
	s.Notes = append(s.Notes, b.notes...)
	return nil
}

// FlavorShare is one entry of a training block's flavor_shares: the share
// of the trace's jobs (0 to 1) that allow Flavors, in that order.
type FlavorShare struct {
	Flavors []string
	Share   float64
	Pos     string // file:line of the entry
}

type namedPlacement struct {
	what string
	pl   Placement
}

// placements lists every workload block's placement, named as errors
// name the block.
func (s *Scenario) placements() []namedPlacement {
	var out []namedPlacement
	for _, in := range s.Infer {
		out = append(out, namedPlacement{fmt.Sprintf("inference %q", in.Name), in.Placement})
	}
	for _, t := range s.Training {
		out = append(out, namedPlacement{fmt.Sprintf("training %q", t.Name), t.Placement})
	}
	for _, d := range s.Dev {
		out = append(out, namedPlacement{fmt.Sprintf("dev %q", d.Name), d.Placement})
	}
	for _, j := range s.Jobs {
		out = append(out, namedPlacement{fmt.Sprintf("job %q", j.Name), j.Placement})
	}
	for _, o := range s.Openb {
		out = append(out, namedPlacement{fmt.Sprintf("openb %q", o.Name), o.Placement})
	}
	return out
}

// check validates what spans blocks: namespaces bound in the tree, node
// constraints that some node meets, quota moves that keep law L1.
func (s *Scenario) check() error {
	bound := quota.Namespaces(s.Quota)
	ns := func(pos, what, n string) error {
		if _, ok := bound[n]; !ok {
			return &Error{Pos: pos, Msg: fmt.Sprintf("%s: namespace %q is not bound to any quota node (bound: %s)",
				what, n, strings.Join(quota.SortedNamespaces(s.Quota), ", "))}
		}
		return nil
	}
	for _, in := range s.Infer {
		if err := ns(in.NamespacePos, fmt.Sprintf("inference %q", in.Name), in.Namespace); err != nil {
			return err
		}
	}
	for _, c := range s.placements() {
		if err := s.checkFlavors(c.what, c.pl); err != nil {
			return err
		}
	}
	for _, t := range s.Training {
		for _, fs := range t.FlavorShares {
			what := fmt.Sprintf("training %q flavor_shares[%q]", t.Name, strings.Join(fs.Flavors, ","))
			if err := s.checkFlavors(what, Placement{Flavors: fs.Flavors, FlavorsPos: fs.Pos}); err != nil {
				return err
			}
		}
	}
	for _, d := range s.Dev {
		if err := ns(d.NamespacePos, fmt.Sprintf("dev %q", d.Name), d.Namespace); err != nil {
			return err
		}
	}
	for _, j := range s.Jobs {
		if err := ns(j.NamespacePos, fmt.Sprintf("job %q", j.Name), j.Namespace); err != nil {
			return err
		}
	}
	for _, t := range s.Training {
		for _, m := range t.VCs {
			if err := ns(m.Pos, fmt.Sprintf("training %q workspaces[%q]", t.Name, m.VC), m.Namespace); err != nil {
				return err
			}
		}
	}
	for _, o := range s.Openb {
		for _, m := range o.QoS {
			if err := ns(m.Pos, fmt.Sprintf("openb %q workspaces[%q]", o.Name, m.VC), m.Namespace); err != nil {
				return err
			}
		}
	}
	if err := s.checkBookings(); err != nil {
		return err
	}
	// Replay the quota moves on a copy of the tree: each must keep L1.
	moves := append([]*QuotaMove(nil), s.Moves...)
	sort.SliceStable(moves, func(i, j int) bool { return moves[i].At.Before(moves[j].At) })
	tree := s.Quota.Clone()
	for _, m := range moves {
		if m.At.Before(s.Start) {
			return &Error{Pos: m.Pos, Msg: fmt.Sprintf("quota_move %q: at %s is before the start %s", m.Name, m.At, s.Start)}
		}
		for _, g := range m.GPUs {
			n := tree.Find(g.Quota)
			n.GPUs = n.GPUs.Clone().Set(m.Flavor, g.GPUs)
		}
		if err := quota.Validate(tree); err != nil {
			return &Error{Pos: m.Pos, Msg: fmt.Sprintf("quota_move %q breaks the tree: %v", m.Name, err)}
		}
	}
	return nil
}

// GPUs is the number of GPU device instances in the modelled cluster: a
// GPU cut into MIG slices counts as its slices, as the planning core
// counts devices without flavors (DESIGN L2).
func (s *Scenario) GPUs() int {
	n := 0
	for _, g := range s.Nodes {
		n += g.Count * g.Devices()
	}
	return n
}

// End is the end of the simulated time.
func (s *Scenario) End() time.Time { return s.Start.Add(s.Length) }

// MinLength is the shortest run the simulator accepts: a minute (the
// shortest length a scenario file may give), and at least two broker
// intervals, so that the broker plans more than once and the occupancy
// chart has a time range.
func (s *Scenario) MinLength() time.Duration { return max(time.Minute, 2*s.Broker.Interval) }
