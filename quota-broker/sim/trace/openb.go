package trace

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// The Alibaba openb trace (clusterdata cluster-trace-gpu-v2023, the FGD
// paper, ATC'23; ../shared/traces/alibaba/README.md): a heterogeneous
// cluster of 6,212 GPUs on 1,213 nodes of seven models, and 8,152 pods over
// 149.3 days. Times are whole seconds from the trace's start.

// OpenbNode is one row of an openb node list (openb_node_list_gpu_node.csv:
// sn, cpu_milli, memory_mib, gpu, model).
type OpenbNode struct {
	Line  int    // line in the file, for messages
	Name  string // sn
	GPUs  int    // gpu: whole GPUs on the node
	Model string // model, e.g. "V100M16"; "" on a node without GPUs
}

// OpenbInventory is an openb node list: its GPU nodes in file order and
// the nodes left out.
type OpenbInventory struct {
	Nodes []OpenbNode // nodes with at least one GPU, in file order
	Rows  int         // rows read (header and comments excluded)
	NoGPU int         // rows with gpu = 0 (CPU nodes of the all-node list), left out
}

// MaxOpenbNodeGPUs is the most GPUs an openb node row may give (64: the
// trace's nodes have 1 to 8).
const MaxOpenbNodeGPUs = 64

// ReadOpenbNodes reads an openb node list. file names the source in
// errors. The header must name the columns sn, gpu and model (others are
// ignored); a bad row is an error naming file:line, the column and the
// value. A node with GPUs must name its model; node names are unique. A
// list with no GPU node is an error.
func ReadOpenbNodes(r io.Reader, file string) (*OpenbInventory, error) {
	var (
		cols  map[string]int
		n     int
		hline int
		inv   = &OpenbInventory{}
		seen  = map[string]int{}
	)
	err := lines(r, file, func(no int, line string) error {
		if strings.HasPrefix(line, "#") {
			return nil
		}
		if cols == nil {
			c, err := header(file, no, line, "sn", "gpu", "model")
			if err != nil {
				return err
			}
			cols, n, hline = c, strings.Count(line, ",")+1, no
			return nil
		}
		f, err := split(file, no, line, n)
		if err != nil {
			return err
		}
		inv.Rows++
		bad := badColumn(file, no, cols, f)
		name := strings.TrimSpace(f[cols["sn"]])
		if name == "" {
			return bad("sn", "empty node name")
		}
		if prev, dup := seen[name]; dup {
			return bad("sn", fmt.Sprintf("node listed twice (first at line %d)", prev))
		}
		seen[name] = no
		gpus, err := strconv.Atoi(strings.TrimSpace(f[cols["gpu"]]))
		if err != nil || gpus < 0 || gpus > MaxOpenbNodeGPUs {
			return bad("gpu", fmt.Sprintf("want a whole number of GPUs from 0 to %d", MaxOpenbNodeGPUs))
		}
		model := strings.TrimSpace(f[cols["model"]])
		if gpus == 0 {
			inv.NoGPU++
			return nil
		}
		if model == "" {
			return bad("model", fmt.Sprintf("empty model on a node of %d GPUs", gpus))
		}
		inv.Nodes = append(inv.Nodes, OpenbNode{Line: no, Name: name, GPUs: gpus, Model: model})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if cols == nil {
		return nil, &Error{File: file, Msg: "empty node list: no header"}
	}
	if len(inv.Nodes) == 0 {
		return nil, &Error{File: file, Line: hline, Msg: fmt.Sprintf("no GPU node: %d rows, none with gpu > 0", inv.Rows)}
	}
	return inv, nil
}

// OpenbModel is one GPU model of an inventory: its nodes and GPUs, and
// the node size (GPUs per node) that holds most of its GPUs.
type OpenbModel struct {
	Model string
	Nodes int
	GPUs  int
	// Size is the GPUs per node of the nodes that hold most of the model's
	// GPUs (ties: the larger size): 8 for G2, 2 for T4, 4 for V100M16.
	Size int
}

// Models sums the inventory by model, in the order each model first
// appears in the file.
func (inv *OpenbInventory) Models() []OpenbModel {
	var out []OpenbModel
	at := map[string]int{}
	bySize := map[string]map[int]int{} // model -> node size -> GPUs
	for _, nd := range inv.Nodes {
		i, ok := at[nd.Model]
		if !ok {
			i = len(out)
			at[nd.Model] = i
			out = append(out, OpenbModel{Model: nd.Model})
			bySize[nd.Model] = map[int]int{}
		}
		out[i].Nodes++
		out[i].GPUs += nd.GPUs
		bySize[nd.Model][nd.GPUs] += nd.GPUs
	}
	for i := range out {
		best, bestGPUs := 0, -1
		for size, g := range bySize[out[i].Model] {
			if g > bestGPUs || (g == bestGPUs && size > best) {
				best, bestGPUs = size, g
			}
		}
		out[i].Size = best
	}
	return out
}

// OpenbPod is one pod of an openb pod list that ran and holds GPUs.
type OpenbPod struct {
	Line int    // line in the file, for messages
	Name string // name
	// GPUs are the whole GPUs the pod holds: num_gpu. A pod that shares
	// its GPU (gpu_milli < 1000) holds it whole here: the simulator, as
	// Nomad's device scheduler, gives devices out whole.
	GPUs int
	// Milli is gpu_milli: the thousandths of one GPU a GPU-sharing pod
	// uses (1000: whole GPUs).
	Milli int
	Spec  string // gpu_spec: the models the pod may use, "" for any
	QoS   string // qos: LS, BE, Burstable or Guaranteed
	// Created, Scheduled and Deleted are creation_time, scheduled_time
	// and deletion_time: offsets from the trace's start.
	Created, Scheduled, Deleted time.Duration
}

// Duration is how long the pod ran: deletion_time - scheduled_time.
func (p *OpenbPod) Duration() time.Duration { return p.Deleted - p.Scheduled }

// OpenbPods is an openb pod list: the pods that ran and hold GPUs, and
// the counts of the rows left out or read as something else.
type OpenbPods struct {
	Pods []OpenbPod // in file order
	Rows int        // pod rows read (header and comments excluded)
	// NeverRan are the rows without scheduled_time (phase Pending: the
	// pod was never placed), left out.
	NeverRan int
	// NoGPU are the rows with num_gpu = 0 (CPU-only pods), left out.
	NoGPU int
	// Shared are the pods kept whose gpu_milli is below 1000 (a
	// GPU-sharing pod), each counted as its num_gpu whole GPUs.
	Shared int
}

// Bounds of an openb pod row: num_gpu up to MaxOpenbNodeGPUs (the trace's
// pods ask for 0 to 8), gpu_milli 0..1000, times 0..MaxOpenbSeconds.
const MaxOpenbSeconds = 100 * 366 * 24 * 3600

// ReadOpenbPods reads an openb pod list. file names the source in errors.
// The header must name the columns name, num_gpu, gpu_milli, gpu_spec,
// qos, creation_time, deletion_time and scheduled_time (others are
// ignored). Pod names are unique. Pods without scheduled_time never ran and are counted, not
// returned; so are pods with num_gpu 0. A bad row is an error naming
// file:line, the column and the value: a time that is not a whole number
// of seconds, a pod scheduled before it was created or deleted before it
// was scheduled, a gpu_milli outside 0..1000. A list with no pod that ran
// on GPUs is an error.
func ReadOpenbPods(r io.Reader, file string) (*OpenbPods, error) {
	var (
		cols  map[string]int
		n     int
		hline int
		out   = &OpenbPods{}
		seen  = map[string]int{}
	)
	err := lines(r, file, func(no int, line string) error {
		if strings.HasPrefix(line, "#") {
			return nil
		}
		if cols == nil {
			c, err := header(file, no, line, "name", "num_gpu", "gpu_milli", "gpu_spec", "qos",
				"creation_time", "deletion_time", "scheduled_time")
			if err != nil {
				return err
			}
			cols, n, hline = c, strings.Count(line, ",")+1, no
			return nil
		}
		f, err := split(file, no, line, n)
		if err != nil {
			return err
		}
		out.Rows++
		bad := badColumn(file, no, cols, f)
		p := OpenbPod{Line: no, Name: strings.TrimSpace(f[cols["name"]]), Spec: strings.TrimSpace(f[cols["gpu_spec"]]),
			QoS: strings.TrimSpace(f[cols["qos"]])}
		if p.Name == "" {
			return bad("name", "empty pod name")
		}
		if prev, dup := seen[p.Name]; dup {
			return bad("name", fmt.Sprintf("pod listed twice (first at line %d)", prev))
		}
		seen[p.Name] = no
		if p.GPUs, err = strconv.Atoi(strings.TrimSpace(f[cols["num_gpu"]])); err != nil || p.GPUs < 0 || p.GPUs > MaxOpenbNodeGPUs {
			return bad("num_gpu", fmt.Sprintf("want a whole number of GPUs from 0 to %d", MaxOpenbNodeGPUs))
		}
		if p.Milli, err = strconv.Atoi(strings.TrimSpace(f[cols["gpu_milli"]])); err != nil || p.Milli < 0 || p.Milli > 1000 {
			return bad("gpu_milli", "want thousandths of a GPU, 0 to 1000")
		}
		if p.QoS == "" {
			return bad("qos", "empty QoS class")
		}
		secs := func(col string, empty bool) (time.Duration, bool, error) {
			v := strings.TrimSpace(f[cols[col]])
			if v == "" && empty {
				return 0, false, nil
			}
			s, err := strconv.ParseInt(v, 10, 64)
			if err != nil || s < 0 || s > MaxOpenbSeconds {
				return 0, false, bad(col, fmt.Sprintf("want whole seconds from the trace's start, 0 to %d", MaxOpenbSeconds))
			}
			return time.Duration(s) * time.Second, true, nil
		}
		var ran bool
		if p.Created, _, err = secs("creation_time", false); err != nil {
			return err
		}
		if p.Scheduled, ran, err = secs("scheduled_time", true); err != nil {
			return err
		}
		if p.Deleted, _, err = secs("deletion_time", false); err != nil {
			return err
		}
		if !ran {
			out.NeverRan++
			return nil
		}
		if p.Scheduled < p.Created {
			return bad("scheduled_time", fmt.Sprintf("before creation_time %d", int64(p.Created/time.Second)))
		}
		if p.Deleted < p.Scheduled {
			return bad("deletion_time", fmt.Sprintf("before scheduled_time %d", int64(p.Scheduled/time.Second)))
		}
		if p.GPUs == 0 {
			out.NoGPU++
			return nil
		}
		if p.Milli < 1000 {
			out.Shared++
		}
		out.Pods = append(out.Pods, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if cols == nil {
		return nil, &Error{File: file, Msg: "empty pod list: no header"}
	}
	if len(out.Pods) == 0 {
		return nil, &Error{File: file, Line: hline, Msg: fmt.Sprintf(
			"no pod ran on GPUs: %d rows, %d never ran, %d without GPUs", out.Rows, out.NeverRan, out.NoGPU)}
	}
	return out, nil
}

// badColumn returns a function that makes the error for a bad value of a
// column of row f at line no: "file:line: column 4 (num_gpu) "x": why".
func badColumn(file string, no int, cols map[string]int, f []string) func(col, why string) error {
	return func(col, why string) error {
		i := cols[col]
		return &Error{File: file, Line: no, Msg: fmt.Sprintf("column %d (%s) %q: %s", i+1, col, clip(f[i]), why)}
	}
}
