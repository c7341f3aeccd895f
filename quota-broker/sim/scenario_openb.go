package sim

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math"
	"math/rand/v2"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/sim/trace"
)

// MIGLayout cuts some GPUs of each node of a group into MIG slices (a
// `mig` block of a `nodes` block): GPUs of the node's GPUs are cut, each
// into Slices instances of Profile; the rest stay whole. Each slice is a
// device instance (a plan.GPU) with the GPU's model and MIGProfile =
// Profile, as the device plugin reports a MIG device group "<model> MIG
// <profile>" (DESIGN L13, §7).
type MIGLayout struct {
	GPUs    int    // GPUs of each node cut into slices
	Profile string // e.g. "1g.10gb"
	Slices  int    // instances per cut GPU, e.g. 7
}

// MaxMIGSlices is the most compute slices one GPU has (NVIDIA's A100 and
// H100: seven 1g instances).
const MaxMIGSlices = 7

// migProfileRE is a MIG profile as NVIDIA names them: "<g>g.<mem>gb",
// optionally "+me" (1g.10gb, 3g.40gb, 1g.10gb+me).
var migProfileRE = regexp.MustCompile(`^([1-7])g\.([0-9]{1,3})gb(\+me)?$`)

// Whole is the GPUs of each node of the group that are not cut.
func (g *NodeGroup) Whole() int {
	if g.MIG == nil {
		return g.GPUs
	}
	return g.GPUs - g.MIG.GPUs
}

// Devices is the device instances of each node of the group: its whole
// GPUs, and Slices for each cut GPU.
func (g *NodeGroup) Devices() int {
	if g.MIG == nil {
		return g.GPUs
	}
	return g.Whole() + g.MIG.GPUs*g.MIG.Slices
}

func (s *Scenario) parseMIG(blk *hcl.Block, what string, g *NodeGroup) error {
	w := what + " mig"
	b, _, err := open(blk.Body, s.File, w, blk.DefRange, []string{"gpus", "profile", "slices"})
	if err != nil {
		return err
	}
	m := &MIGLayout{}
	m.GPUs = b.integer("gpus", true, 0, 1, g.GPUs)
	m.Profile = b.str("profile", true, "")
	m.Slices = b.integer("slices", true, 0, 1, MaxMIGSlices)
	if b.err != nil {
		return b.err
	}
	sm := migProfileRE.FindStringSubmatch(m.Profile)
	if sm == nil {
		b.fail(b.attrs["profile"].Range, "profile = %q: want a MIG profile such as \"1g.10gb\" or \"3g.40gb\"", m.Profile)
		return b.err
	}
	if c, _ := strconv.Atoi(sm[1]); c*m.Slices > MaxMIGSlices {
		b.fail(b.attrs["slices"].Range, "slices = %d: %d instances of %s take %d compute slices, a GPU has %d",
			m.Slices, m.Slices, m.Profile, c*m.Slices, MaxMIGSlices)
		return b.err
	}
	g.MIG = m
	return nil
}

// Inventory is a cluster built from a node list (an `inventory` block of
// the cluster): the openb trace's GPU nodes, one node group per model,
// each model's GPUs divided by ScaleDown.
type Inventory struct {
	Name      string // the block's label
	Nodes     string // the node list as written
	Read      string // the file it was read from
	ScaleDown int    // each model keeps 1/ScaleDown of its GPUs
	Rows      int    // rows of the node list
	NoGPU     int    // rows without GPUs, left out
	Models    []InventoryModel
	Pos       string // "file:line" of the block
}

// InventoryModel is one model of an inventory: the whole inventory's
// figures and what the scenario keeps.
type InventoryModel struct {
	trace.OpenbModel     // in the whole inventory
	Count            int // nodes kept
	PerNode          int // GPUs per node kept: Size, or fewer (scaleModel)
	GPUs             int // GPUs kept: Count * PerNode
}

// Scaled is the GPUs the inventory keeps.
func (inv *Inventory) Scaled() (nodes, gpus int) {
	for _, m := range inv.Models {
		nodes += m.Count
		gpus += m.GPUs
	}
	return
}

// Total is the whole inventory's nodes and GPUs.
func (inv *Inventory) Total() (nodes, gpus int) {
	for _, m := range inv.Models {
		nodes += m.Nodes
		gpus += m.OpenbModel.GPUs
	}
	return
}

// MaxScaleDown is the largest scale_down an inventory may give.
const MaxScaleDown = 100000

// scaleModel is what the cluster keeps of model m under scaleDown: its
// GPUs divided by scaleDown (the target), in nodes of its usual size
// (m.Size) rounded to the nearest node, half up. A model whose target
// rounds to no node keeps one node of its target's GPUs rounded (at least
// one), so that every model of the inventory stays in the cluster, as
// close to its share as a whole GPU allows (a quota file may then declare
// one flavor per model, none without devices). Under scale_down 200 the
// openb inventory keeps G2 3 x 8 (its target 21.96) and V100M32 1 x 1
// (its target 1.02).
func scaleModel(m trace.OpenbModel, scaleDown int) (count, perNode int) {
	target := float64(m.GPUs) / float64(scaleDown)
	if n := int(math.Floor(target/float64(m.Size) + 0.5)); n >= 1 {
		return n, m.Size
	}
	return 1, max(1, int(math.Floor(target+0.5)))
}

func (s *Scenario) parseInventory(blk *hcl.Block, what string, seen map[string]string) error {
	b, _, err := open(blk.Body, s.File, what, blk.DefRange, []string{"nodes", "scale_down", "datacenter", "node_pool"})
	if err != nil {
		return err
	}
	inv := &Inventory{Name: blk.Labels[0], Pos: posOf(blk.DefRange)}
	inv.Nodes = b.str("nodes", true, "")
	inv.ScaleDown = b.integer("scale_down", true, 0, 1, MaxScaleDown)
	dc := b.str("datacenter", false, "dc1")
	pool := b.str("node_pool", false, "default")
	if b.err != nil {
		return b.err
	}
	f, name, err := s.src.Open(inv.Nodes, MaxTraceBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w (the openb node list; see ../shared/traces/alibaba/README.md)", err)
		}
		return &Error{Pos: b.pos("nodes"), Msg: fmt.Sprintf("%s: nodes = %q: %v", what, inv.Nodes, err)}
	}
	list, err := trace.ReadOpenbNodes(f, name)
	f.Close()
	if err != nil {
		return err
	}
	inv.Read, inv.Rows, inv.NoGPU = name, list.Rows, list.NoGPU
	for _, m := range list.Models() {
		im := InventoryModel{OpenbModel: m}
		im.Count, im.PerNode = scaleModel(m, inv.ScaleDown)
		im.GPUs = im.Count * im.PerNode
		inv.Models = append(inv.Models, im)
		if prev, dup := seen[m.Model]; dup {
			return &Error{Pos: inv.Pos, Msg: fmt.Sprintf("%s: model %q of %s makes a node group of that name, already given at %s", what, m.Model, name, prev)}
		}
		seen[m.Model] = inv.Pos
		s.Nodes = append(s.Nodes, NodeGroup{Name: m.Model, Count: im.Count, GPUs: im.PerNode, Model: m.Model, Datacenter: dc, NodePool: pool})
	}
	if n, g := inv.Scaled(); n > MaxInventoryNodes {
		return &Error{Pos: b.pos("scale_down"), Msg: fmt.Sprintf("%s: scale_down = %d keeps %d nodes (%d GPUs) of %s, more than %d: raise scale_down",
			what, inv.ScaleDown, n, g, name, MaxInventoryNodes)}
	}
	s.Inventories = append(s.Inventories, inv)
	return nil
}

// MaxInventoryNodes is the most nodes an inventory may keep: a nodes
// block's largest count. The openb inventory has 1,213 nodes.
const MaxInventoryNodes = 100000

// Note is the inventory's line of the report's inputs: the scale and each
// model's share before and after.
func (inv *Inventory) Note() string {
	tn, tg := inv.Total()
	sn, sg := inv.Scaled()
	var parts []string
	for _, m := range inv.Models {
		parts = append(parts, fmt.Sprintf("%s %d GPUs (%.1f%%) -> %d nodes x %d = %d (%.1f%%)",
			m.Model, m.OpenbModel.GPUs, 100*float64(m.OpenbModel.GPUs)/float64(tg), m.Count, m.PerNode, m.GPUs, 100*float64(m.GPUs)/float64(sg)))
	}
	return fmt.Sprintf("cluster inventory %q: %s: %d GPU nodes with %d GPUs (%d rows, %d without GPUs left out), scaled down by %d to %d nodes with %d GPUs, one node group per model (each model's GPUs / %d in nodes of its usual size, or one smaller node when that rounds to none): %s",
		inv.Name, inv.Read, tn, tg, inv.Rows, inv.NoGPU, inv.ScaleDown, sn, sg, inv.ScaleDown, strings.Join(parts, "; "))
}

// Openb replays the pods of an Alibaba openb pod list (an `openb` block):
// each pod that ran on GPUs becomes a batch job of one allocation of its
// num_gpu GPUs, submitted at start + (creation_time - trace_start) /
// time_scale, that
// needs (deletion_time - scheduled_time) / time_scale of run time. Its
// workspace is chosen by its QoS class. Pods name no model (gpu_spec is
// empty in the trace), so each may run on every model.
type Openb struct {
	Name            string
	Trace, Fallback string
	TracePos        string
	// TraceStart is the trace time that maps to the scenario's start
	// (seconds from the trace's first second, as a duration); pods created
	// before it are left out.
	TraceStart  time.Duration
	TimeScale   float64
	Priority    int
	KillTimeout time.Duration
	Checkpoint  time.Duration
	ExpectRows  int
	// QoS maps a QoS class (LS, BE, Burstable, Guaranteed; "*" = any
	// other) to a workspace, sorted by class.
	QoS []VCMap
	// Idle is the fraction of each QoS class's pods that are idle jobs
	// (gputide_idle), by class; a class not listed has none.
	Idle map[string]float64
	Placement
}

// OpenbCounts is what a replay of an openb pod list read, kept and left
// out: the report's line for it.
type OpenbCounts struct {
	Name     string
	File     string // the pod list read
	Rows     int    // pod rows
	NeverRan int    // no scheduled_time: left out
	NoGPU    int    // num_gpu 0: left out
	Shared   int    // gpu_milli < 1000: replayed on one whole GPU each
	Unmapped int    // QoS class with no workspace: left out
	TooBig   int    // more GPUs than any node has whole: left out
	Before   int    // created before trace_start: left out
	After    int    // created at or after the end of the run: left out
	Jobs     int    // jobs replayed
	Idle     int    // of which idle jobs
	GPUh     float64
}

func (s *Scenario) parseOpenb(blk *hcl.Block, what string) error {
	b, _, err := open(blk.Body, s.File, what, blk.DefRange, append([]string{
		"trace", "fallback", "trace_start", "time_scale", "priority", "kill_timeout", "checkpoint", "expect_rows", "workspaces", "idle_fraction"},
		placementAttrs...))
	if err != nil {
		return err
	}
	o := &Openb{Name: blk.Labels[0], Idle: map[string]float64{}}
	o.Trace = b.str("trace", true, "")
	o.TracePos = b.pos("trace")
	o.Fallback = b.str("fallback", false, "")
	o.TraceStart = b.duration("trace_start", false, 0, 0, trace.MaxOpenbSeconds*time.Second)
	o.TimeScale = b.number("time_scale", 1, 1e-3, 1e6)
	o.Priority = b.integer("priority", false, 50, 1, 100)
	o.KillTimeout = b.duration("kill_timeout", false, s.Broker.KillTimeout, 0, 24*time.Hour)
	o.Checkpoint = b.duration("checkpoint", false, 30*time.Minute, 0, 365*24*time.Hour)
	o.ExpectRows = b.integer("expect_rows", false, 0, 0, 1<<40)
	o.Placement = b.placement()
	for _, e := range b.entries("workspaces", true) {
		ns := b.entryString("workspaces", e)
		o.QoS = append(o.QoS, VCMap{VC: e.Key, Namespace: ns, Pos: posOf(e.Pos)})
	}
	for _, e := range b.entries("idle_fraction", false) {
		f := b.entryNumber("idle_fraction", e, 0, 1)
		o.Idle[e.Key] = f
	}
	if b.err != nil {
		return b.err
	}
	if len(o.QoS) == 0 {
		b.fail(b.attrs["workspaces"].Range, "workspaces: map at least one QoS class, e.g. { LS = \"workspace-a\" }")
		return b.err
	}
	sort.Slice(o.QoS, func(i, j int) bool { return o.QoS[i].VC < o.QoS[j].VC })
	s.Openb = append(s.Openb, o)
	return nil
}

// entryNumber returns e's value as a number in [lo, hi], or fails.
func (b *block) entryNumber(name string, e entry, lo, hi float64) float64 {
	if e.Val.Type() != cty.Number || e.Val.IsNull() {
		b.fail(e.Pos, "%s[%q]: want a number", name, e.Key)
		return 0
	}
	f, _ := e.Val.AsBigFloat().Float64()
	if f < lo || f > hi {
		b.fail(e.Pos, "%s[%q] = %s: want a number from %s to %s", name, e.Key, number(f), number(lo), number(hi))
		return 0
	}
	return f
}

// openb maps the pods of o's pod list to jobs (see Openb): a pod created
// before the end of the run whose QoS class has a workspace and whose
// GPUs fit a node whole. Idle jobs are drawn per pod from a source seeded
// by the scenario's seed and the pod's name.
func (s *Scenario) openb(w *Workload, o *Openb, end time.Time) error {
	f, name, _, err := openFallback(s.src, o.Trace, o.Fallback)
	if err != nil {
		if o.Fallback == "" && errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w (the openb pod list; see ../shared/traces/alibaba/README.md)", err)
		}
		return &Error{Pos: o.TracePos, Msg: fmt.Sprintf("openb %q: %v", o.Name, err)}
	}
	pods, err := trace.ReadOpenbPods(f, name)
	f.Close()
	if err != nil {
		return err
	}
	if o.ExpectRows > 0 && pods.Rows != o.ExpectRows {
		return &Error{Pos: o.TracePos, Msg: fmt.Sprintf("openb %q: %s has %d rows, expect_rows = %d: the trace is truncated or not the one meant",
			o.Name, name, pods.Rows, o.ExpectRows)}
	}
	whole := 0
	for _, g := range s.Nodes {
		whole = max(whole, g.Whole())
	}
	ns := map[string]string{}
	for _, m := range o.QoS {
		ns[m.VC] = m.Namespace
	}
	c := OpenbCounts{Name: o.Name, File: name, Rows: pods.Rows, NeverRan: pods.NeverRan, NoGPU: pods.NoGPU}
	scale := func(d time.Duration) time.Duration { return scaleDuration(d, o.TimeScale) }
	for i := range pods.Pods {
		p := &pods.Pods[i]
		if p.Spec != "" {
			return &Error{Pos: o.TracePos, Msg: fmt.Sprintf("openb %q: %s:%d: gpu_spec %q: pods that name GPU models are not replayed (every pod here may use every model)",
				o.Name, name, p.Line, p.Spec)}
		}
		n, ok := ns[p.QoS]
		if !ok {
			n, ok = ns["*"]
		}
		if !ok {
			c.Unmapped++
			continue
		}
		if p.GPUs > whole {
			c.TooBig++
			continue
		}
		if p.Created < o.TraceStart {
			c.Before++
			continue
		}
		submit := s.Start.Add(scale(p.Created - o.TraceStart))
		if !submit.Before(end) {
			c.After++
			continue
		}
		if p.Milli < 1000 {
			c.Shared++
		}
		idle := false
		if fr, ok := o.Idle[p.QoS]; ok && fr > 0 {
			h := fnv.New64a()
			h.Write([]byte(p.Name))
			idle = rand.New(rand.NewPCG(s.Seed, h.Sum64())).Float64() < fr
		}
		kind := "pod"
		if idle {
			kind = "idle"
			c.Idle++
		}
		work := scale(p.Duration())
		c.Jobs++
		c.GPUh += float64(p.GPUs) * work.Hours()
		w.Jobs = append(w.Jobs, &JobSpec{
			Namespace: n, Name: kind + "-" + p.Name, Group: "worker", Type: plan.JobBatch, Priority: o.Priority,
			Count: 1, GPUs: p.GPUs, Idle: idle, Submit: submit, Work: work, KillTimeout: o.KillTimeout, Checkpoint: o.Checkpoint,
			Training: true, Origin: fmt.Sprintf("%s:%d", name, p.Line), Placement: o.Placement,
		})
	}
	w.Openb = append(w.Openb, c)
	w.Notes = append(w.Notes, c.Note(whole))
	return nil
}

// Note is the count's line of the report's inputs.
func (c *OpenbCounts) Note(whole int) string {
	return fmt.Sprintf("openb %q: %s: %d pods; %d jobs replayed (%d idle, %.0f GPU-hours of work), %d of them sharing a GPU (gpu_milli < 1000) counted as one whole GPU; left out: %d never ran (no scheduled_time), %d without GPUs, %d of unmapped QoS classes, %d above %d GPUs, %d created before trace_start, %d created after the end of the run",
		c.Name, c.File, c.Rows, c.Jobs, c.Idle, c.GPUh, c.Shared, c.NeverRan, c.NoGPU, c.Unmapped, c.TooBig, whole, c.Before, c.After)
}
