package snapshot

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// Error is a problem in a snapshot document. Path is the JSON path of the
// offending value ("allocations[3].gpu_ids[1]", "settings.debt_grace";
// "" for the document as a whole); Message says what is wrong and quotes
// the value. Err is the underlying error where there is one (a
// *quota.ValidationError for a tree that breaks law L1), else nil.
type Error struct {
	Path    string
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

// Unwrap returns the underlying error, or nil.
func (e *Error) Unwrap() error { return e.Err }

// MaxSize is the largest snapshot document Decode reads: 256 MiB, about
// three times a cluster of 100,000 nodes of 8 GPUs, all of them held.
const MaxSize = 256 << 20

// maxSize is MaxSize, smaller in tests.
var maxSize = MaxSize

// Decode reads one snapshot document (a single JSON object, nothing after
// it but white space) from r and returns it as a plan.Snapshot. Errors are
// *Error values naming the field and the value (see the package doc and
// docs/snapshot-format.md), or the read error of r. A document larger than
// MaxSize is an error, and so is input that cannot start a JSON document
// (such as binary data), found without reading the rest. On error the
// snapshot is nil.
func Decode(r io.Reader) (*plan.Snapshot, error) {
	br := bufio.NewReaderSize(r, 4096)
	head, err := br.Peek(4096)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return nil, err
	}
	if i := bytes.IndexFunc(head, func(r rune) bool { return !strings.ContainsRune(" \t\r\n", r) }); i >= 0 && !startsValue(head[i]) {
		// The first byte cannot start a JSON document: the error is found
		// there and does not depend on the rest, which may be endless
		// (/dev/zero) or huge (a binary file).
		return Unmarshal(head)
	}
	data, err := io.ReadAll(io.LimitReader(br, int64(maxSize)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxSize {
		return nil, &Error{Message: fmt.Sprintf("the input is larger than %d MiB, the most a snapshot may be", maxSize>>20)}
	}
	return Unmarshal(data)
}

// Unmarshal is Decode for a document held in memory (of any size).
func Unmarshal(data []byte) (*plan.Snapshot, error) {
	var w wireSnapshot
	if err := decodeStrict(data, &w); err != nil {
		return nil, err
	}
	c := converter{}
	s, err := c.snapshot(&w)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// converter turns the wire form into the core types, checking the values
// and the references between them.
type converter struct {
	nodes  map[string]int          // node ID -> index
	gpus   map[string]gpuRef       // GPU ID -> where it is
	tree   map[string]*quota.Node  // quota name -> node
	bound  map[string]string       // namespace -> quota name
	parent map[string]*quota.Node  // quota name -> parent
	jobs   map[string]*wirePending // "ns/job" -> its first pending group
	jobAt  map[string]int          // "ns/job" -> index of that group
	asked  map[string]int64        // "ns/job" -> GPUs asked by its groups so far
}

type gpuRef struct {
	node   string // node ID
	ni, gi int    // where it is listed: nodes[ni].gpus[gi]
	holder int    // 1 + the index of the allocation holding it, or 0
}

// gpuPath is the JSON path of the ID of GPU gi of node ni.
func gpuPath(ni, gi int) string { return fmt.Sprintf("nodes[%d].gpus[%d].id", ni, gi) }

func errf(path, format string, args ...any) error {
	return &Error{Path: path, Message: fmt.Sprintf(format, args...)}
}

func (c *converter) snapshot(w *wireSnapshot) (*plan.Snapshot, error) {
	s := &plan.Snapshot{Settings: quota.DefaultSettings()}
	var err error
	if s.Time, err = parseTime("time", w.Time); err != nil {
		return nil, err
	}
	if w.Quota == nil {
		return nil, errf("quota", "missing: a snapshot needs the quota tree")
	}
	if s.Quota, err = c.quota(w.Quota, "quota", 1); err != nil {
		return nil, err
	}
	if err := quota.Validate(s.Quota); err != nil {
		var verr *quota.ValidationError
		if errors.As(err, &verr) {
			return nil, &Error{Path: verr.Pos, Message: fmt.Sprintf("quota %q: %s", verr.Node, verr.Message), Err: err}
		}
		return nil, &Error{Path: "quota", Message: err.Error(), Err: err}
	}
	c.indexTree(s.Quota)
	if w.Settings != nil {
		if w.Settings.MinRuntime != nil {
			if s.Settings.MinRuntime, err = parseDuration("settings.min_runtime", *w.Settings.MinRuntime); err != nil {
				return nil, err
			}
		}
		if w.Settings.DebtGrace != nil {
			if s.Settings.DebtGrace, err = parseDuration("settings.debt_grace", *w.Settings.DebtGrace); err != nil {
				return nil, err
			}
		}
	}
	if s.Nodes, err = c.nodeList(w.Nodes); err != nil {
		return nil, err
	}
	if s.Allocations, err = c.allocations(w.Allocations); err != nil {
		return nil, err
	}
	if s.Pending, err = c.pending(w.Pending); err != nil {
		return nil, err
	}
	if s.Reservations, err = c.reservations(w.Reservations); err != nil {
		return nil, err
	}
	return s, nil
}

// quota converts the quota node w at level depth of the tree (the root is
// at 1) and its subtree.
func (c *converter) quota(w *wireQuota, path string, depth int) (*quota.Node, error) {
	if depth > quota.MaxDepth {
		return nil, errf(path, "the quota tree is more than %d levels deep", quota.MaxDepth)
	}
	if w.GPUs > quota.MaxGPUs {
		return nil, errf(path+".gpus", "%d is too large (at most %d)", w.GPUs, quota.MaxGPUs)
	}
	if w.GPUs < -quota.MaxGPUs {
		return nil, errf(path+".gpus", "%d is negative", w.GPUs)
	}
	n := &quota.Node{
		Name:               w.Name,
		GPUs:               int(w.GPUs),
		ChildPreemption:    w.ChildPreemption,
		PriorityPreemption: w.PriorityPreemption,
		Namespaces:         w.Namespaces,
		Pos:                path,
	}
	if w.ChangedAt != "" {
		t, err := parseTime(path+".changed_at", w.ChangedAt)
		if err != nil {
			return nil, err
		}
		n.ChangedAt = t
	}
	for i := range w.Children {
		ch, err := c.quota(&w.Children[i], fmt.Sprintf("%s.children[%d]", path, i), depth+1)
		if err != nil {
			return nil, err
		}
		n.Children = append(n.Children, ch)
	}
	return n, nil
}

func (c *converter) indexTree(root *quota.Node) {
	c.tree = map[string]*quota.Node{}
	c.parent = map[string]*quota.Node{}
	root.Walk(func(n *quota.Node) {
		c.tree[n.Name] = n
		for _, ch := range n.Children {
			c.parent[ch.Name] = n
		}
	})
	c.bound = quota.Namespaces(root)
}

func (c *converter) nodeList(ws []wireNode) ([]plan.Node, error) {
	total := 0
	for _, w := range ws {
		total += len(w.GPUs)
	}
	c.nodes = make(map[string]int, len(ws))
	c.gpus = make(map[string]gpuRef, total)
	var out []plan.Node
	if len(ws) > 0 {
		out = make([]plan.Node, 0, len(ws))
	}
	for i, w := range ws {
		if w.ID == "" {
			return nil, errf(fmt.Sprintf("nodes[%d].id", i), "must not be empty")
		}
		if j, dup := c.nodes[w.ID]; dup {
			return nil, errf(fmt.Sprintf("nodes[%d].id", i), "node %s is listed twice (also nodes[%d])", quoteShort(w.ID), j)
		}
		c.nodes[w.ID] = i
		n := plan.Node{ID: w.ID, Datacenter: w.Datacenter, NodePool: w.NodePool}
		if len(w.GPUs) > 0 {
			n.GPUs = make([]plan.GPU, 0, len(w.GPUs))
		}
		for k, g := range w.GPUs {
			if g.ID == "" {
				return nil, errf(gpuPath(i, k), "must not be empty")
			}
			if prev, dup := c.gpus[g.ID]; dup {
				return nil, errf(gpuPath(i, k), "GPU %s is listed twice (also %s)", quoteShort(g.ID), gpuPath(prev.ni, prev.gi))
			}
			c.gpus[g.ID] = gpuRef{node: w.ID, ni: i, gi: k}
			healthy := true
			if g.Healthy != nil {
				healthy = *g.Healthy
			}
			n.GPUs = append(n.GPUs, plan.GPU{ID: g.ID, Model: g.Model, Healthy: healthy})
		}
		out = append(out, n)
	}
	return out, nil
}

func (c *converter) allocations(ws []wireAllocation) ([]plan.Allocation, error) {
	ids := make(map[string]int, len(ws))
	jobs := map[string]int{} // "ns/job" -> index of its first allocation
	var out []plan.Allocation
	if len(ws) > 0 {
		out = make([]plan.Allocation, 0, len(ws))
	}
	for i, w := range ws {
		path := "allocations[" + strconv.Itoa(i) + "]"
		if err := nonEmpty(path, "id", w.ID, "namespace", w.Namespace, "job", w.Job, "group", w.Group); err != nil {
			return nil, err
		}
		if j, dup := ids[w.ID]; dup {
			return nil, errf(path+".id", "allocation %s is listed twice (also allocations[%d])", quoteShort(w.ID), j)
		}
		ids[w.ID] = i
		typ, err := jobType(path+".type", w.Type)
		if err != nil {
			return nil, err
		}
		if err := priority(path+".priority", w.Priority); err != nil {
			return nil, err
		}
		if w.Node == "" {
			return nil, errf(path+".node", "must not be empty")
		}
		if _, ok := c.nodes[w.Node]; !ok {
			return nil, errf(path+".node", "unknown node %s", quoteShort(w.Node))
		}
		for k, id := range w.GPUIDs {
			gpath := func() string { return fmt.Sprintf("%s.gpu_ids[%d]", path, k) }
			ref, ok := c.gpus[id]
			switch {
			case !ok:
				return nil, errf(gpath(), "GPU %s is not on node %s (no node has it)", quoteShort(id), quoteShort(w.Node))
			case ref.node != w.Node:
				return nil, errf(gpath(), "GPU %s is not on node %s (it is on node %s)", quoteShort(id), quoteShort(w.Node), quoteShort(ref.node))
			case ref.holder == i+1:
				return nil, errf(gpath(), "GPU %s is listed twice in this allocation", quoteShort(id))
			case ref.holder != 0:
				return nil, errf(gpath(), "GPU %s is used twice (also by allocations[%d])", quoteShort(id), ref.holder-1)
			}
			ref.holder = i + 1
			c.gpus[id] = ref
		}
		stoppingFor, err := claimant(path+".stopping_for", w.StoppingFor)
		if err != nil {
			return nil, err
		}
		started, err := parseTime(path+".started_at", w.StartedAt)
		if err != nil {
			return nil, err
		}
		// idle and elastic are job meta (gputide_idle, gputide_elastic):
		// every allocation of a job has the same, as the Nomad adapter
		// writes them. The planner preempts a batch job as one unit and
		// relies on it.
		jobKey := w.Namespace + "/" + w.Job
		if j, ok := jobs[jobKey]; !ok {
			jobs[jobKey] = i
		} else if first := &ws[j]; w.Idle != first.Idle || w.Elastic != first.Elastic {
			field, got, want := "idle", w.Idle, first.Idle
			if w.Idle == first.Idle {
				field, got, want = "elastic", w.Elastic, first.Elastic
			}
			return nil, errf(path+"."+field, "%v differs from %v in allocations[%d], an allocation of the same job %s",
				got, want, j, quoteShort(jobKey))
		}
		out = append(out, plan.Allocation{
			ID: w.ID, Namespace: w.Namespace, Job: w.Job, Group: w.Group,
			Type: typ, Priority: int(w.Priority), Node: w.Node,
			GPUIDs: append([]string{}, w.GPUIDs...),
			Idle:   w.Idle, Elastic: w.Elastic, Reservation: w.Reservation,
			StoppingFor: stoppingFor, StartedAt: started,
		})
	}
	return out, nil
}

func (c *converter) pending(ws []wirePending) ([]plan.Pending, error) {
	groups := map[string]int{}
	c.jobs = map[string]*wirePending{}
	c.jobAt = map[string]int{}
	c.asked = map[string]int64{}
	var out []plan.Pending
	for i := range ws {
		w := &ws[i]
		path := fmt.Sprintf("pending[%d]", i)
		if err := nonEmpty(path, "namespace", w.Namespace, "job", w.Job, "group", w.Group); err != nil {
			return nil, err
		}
		key := w.Namespace + "/" + w.Job + "/" + w.Group
		if j, dup := groups[key]; dup {
			return nil, errf(path, "group %s is listed twice (also pending[%d])", quoteShort(key), j)
		}
		groups[key] = i
		typ, err := jobType(path+".type", w.Type)
		if err != nil {
			return nil, err
		}
		if err := priority(path+".priority", w.Priority); err != nil {
			return nil, err
		}
		if err := positive(path+".count", w.Count); err != nil {
			return nil, err
		}
		if err := positive(path+".gpus", w.GPUs); err != nil {
			return nil, err
		}
		// Both are at most MaxGPUs, so the product fits in an int64; the
		// planner adds up the GPUs a job asks for, which must not overflow.
		if n := w.Count * w.GPUs; n > quota.MaxGPUs {
			return nil, errf(path, "count %d x gpus %d asks for %d GPUs, more than %d", w.Count, w.GPUs, n, quota.MaxGPUs)
		}
		jobKey := w.Namespace + "/" + w.Job
		if c.asked[jobKey] += w.Count * w.GPUs; c.asked[jobKey] > quota.MaxGPUs {
			return nil, errf(path, "the groups of job %s ask for %d GPUs in all, more than %d", quoteShort(jobKey), c.asked[jobKey], quota.MaxGPUs)
		}
		for k, dc := range w.Datacenters {
			if dc == "" {
				return nil, errf(fmt.Sprintf("%s.datacenters[%d]", path, k), "must not be empty")
			}
		}
		submitted, err := parseTime(path+".submitted_at", w.SubmittedAt)
		if err != nil {
			return nil, err
		}
		p := plan.Pending{
			Namespace: w.Namespace, Job: w.Job, Group: w.Group, Type: typ,
			Priority: int(w.Priority), Count: int(w.Count), GPUs: int(w.GPUs),
			Model: w.Model, Datacenters: append([]string(nil), w.Datacenters...),
			NodePool: w.NodePool, Idle: w.Idle, Elastic: w.Elastic,
			Reservation: w.Reservation, SubmittedAt: submitted,
		}
		if w.Flex != nil {
			if w.Idle {
				return nil, errf(path+".flex", "an idle job (idle: true) cannot be a flex request")
			}
			f := &plan.Flex{MaxWait: plan.MaxFlexWait}
			if w.Flex.MaxWait != nil {
				if f.MaxWait, err = parseDuration(path+".flex.max_wait", *w.Flex.MaxWait); err != nil {
					return nil, err
				}
				if f.MaxWait == 0 {
					return nil, errf(path+".flex.max_wait", "%s must be positive (leave max_wait out for the default 168h)", quoteShort(*w.Flex.MaxWait))
				}
				if f.MaxWait > plan.MaxFlexWait {
					return nil, errf(path+".flex.max_wait", "%s is above the maximum of 168h", quoteShort(*w.Flex.MaxWait))
				}
			}
			if w.Flex.MaxRun != nil {
				if f.MaxRun, err = parseDuration(path+".flex.max_run", *w.Flex.MaxRun); err != nil {
					return nil, err
				}
			}
			p.Flex = f
		}
		if err := c.sameJob(path, w, i); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// sameJob checks that the pending groups of one job agree on what is set
// per job in Nomad: type, priority, idle, elastic, reservation, submission
// time and flex settings.
func (c *converter) sameJob(path string, w *wirePending, i int) error {
	key := w.Namespace + "/" + w.Job
	first, ok := c.jobs[key]
	if !ok {
		c.jobs[key] = w
		c.jobAt[key] = i
		return nil
	}
	at := c.jobAt[key]
	differ := func(field string, got, want any) error {
		return errf(path+"."+field, "%v differs from %v in pending[%d], a group of the same job %s", got, want, at, quoteShort(key))
	}
	switch {
	case w.Type != first.Type:
		return differ("type", quoteShort(w.Type), quoteShort(first.Type))
	case w.Priority != first.Priority:
		return differ("priority", w.Priority, first.Priority)
	case w.Idle != first.Idle:
		return differ("idle", w.Idle, first.Idle)
	case w.Elastic != first.Elastic:
		return differ("elastic", w.Elastic, first.Elastic)
	case w.Reservation != first.Reservation:
		return differ("reservation", quoteShort(w.Reservation), quoteShort(first.Reservation))
	case w.SubmittedAt != first.SubmittedAt:
		return differ("submitted_at", quoteShort(w.SubmittedAt), quoteShort(first.SubmittedAt))
	case flexText(w.Flex) != flexText(first.Flex):
		return differ("flex", flexText(w.Flex), flexText(first.Flex))
	}
	return nil
}

// flexText renders flex settings for comparison and messages.
func flexText(f *wireFlex) string {
	if f == nil {
		return "no flex"
	}
	s := func(p *string, def string) string {
		if p == nil {
			return def
		}
		if d, err := time.ParseDuration(*p); err == nil {
			return d.String()
		}
		return *p
	}
	return fmt.Sprintf("flex {max_wait %s, max_run %s}", s(f.MaxWait, plan.MaxFlexWait.String()), s(f.MaxRun, "0s"))
}

func (c *converter) reservations(ws []wireReservation) ([]plan.Reservation, error) {
	ids := map[string]int{}
	var out []plan.Reservation
	for i, w := range ws {
		path := fmt.Sprintf("reservations[%d]", i)
		if err := nonEmpty(path, "id", w.ID, "namespace", w.Namespace, "quota", w.Quota); err != nil {
			return nil, err
		}
		if j, dup := ids[w.ID]; dup {
			return nil, errf(path+".id", "reservation %s is listed twice (also reservations[%d])", quoteShort(w.ID), j)
		}
		ids[w.ID] = i
		q, ok := c.tree[w.Quota]
		if !ok {
			return nil, errf(path+".quota", "unknown quota %s", quoteShort(w.Quota))
		}
		if !c.within(c.bound[w.Namespace], q) {
			owner := "no quota"
			if b, ok := c.bound[w.Namespace]; ok {
				owner = "quota " + quoteShort(b)
			}
			return nil, errf(path+".namespace", "namespace %s is bound to %s, not to quota %s or below it", quoteShort(w.Namespace), owner, quoteShort(w.Quota))
		}
		if err := positive(path+".gpus", w.GPUs); err != nil {
			return nil, err
		}
		start, err := parseTime(path+".start", w.Start)
		if err != nil {
			return nil, err
		}
		end, err := parseTime(path+".end", w.End)
		if err != nil {
			return nil, err
		}
		if !end.After(start) {
			return nil, errf(path+".end", "%s is not after start %s", quoteShort(w.End), quoteShort(w.Start))
		}
		out = append(out, plan.Reservation{ID: w.ID, Namespace: w.Namespace, Quota: w.Quota,
			GPUs: int(w.GPUs), Start: start, End: end})
	}
	return out, nil
}

// within reports whether the quota node called name is q or below it.
func (c *converter) within(name string, q *quota.Node) bool {
	for n := c.tree[name]; n != nil; n = c.parent[n.Name] {
		if n == q {
			return true
		}
	}
	return false
}

// claimant converts a claimant reference. The object form needs its three
// keys non-empty; the older string form "namespace/job/group" must have
// exactly three non-empty parts, so an ID or group name that contains "/"
// (a periodic or dispatched child job) can only be given as an object.
func claimant(path string, w wireClaimant) (plan.GroupKey, error) {
	if w.Key != nil {
		if err := nonEmpty(path, "namespace", w.Key.Namespace, "job", w.Key.Job, "group", w.Key.Group); err != nil {
			return plan.GroupKey{}, err
		}
		return plan.GroupKey{Namespace: w.Key.Namespace, Job: w.Key.Job, Group: w.Key.Group}, nil
	}
	if w.Text == "" {
		return plan.GroupKey{}, nil
	}
	parts := strings.Split(w.Text, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return plan.GroupKey{}, errf(path, "%s is not a claimant of the form \"namespace/job/group\" (three non-empty parts; "+
			"a job ID or group with \"/\" needs the object form {\"namespace\": ..., \"job\": ..., \"group\": ...})", quoteShort(w.Text))
	}
	return plan.GroupKey{Namespace: parts[0], Job: parts[1], Group: parts[2]}, nil
}

// nonEmpty checks pairs of (key, value) for empty strings.
func nonEmpty(path string, kv ...string) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			return errf(path+"."+kv[i], "must not be empty")
		}
	}
	return nil
}

func jobType(path, v string) (plan.JobType, error) {
	t := plan.JobType(v)
	if !t.Valid() {
		return "", errf(path, "%s is not a job type (service, batch, system or sysbatch)", quoteShort(v))
	}
	return t, nil
}

func priority(path string, v int64) error {
	if v < 1 || v > 100 {
		return errf(path, "%d is outside 1-100", v)
	}
	return nil
}

func positive(path string, v int64) error {
	if v < 1 {
		return errf(path, "must be at least 1, not %d", v)
	}
	if v > quota.MaxGPUs {
		return errf(path, "must be at most %d, not %d", quota.MaxGPUs, v)
	}
	return nil
}

func parseTime(path, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, errf(path, "%s is not an RFC 3339 time (such as \"2026-12-01T08:00:00Z\")", quoteShort(v))
	}
	return t, nil
}

func parseDuration(path, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errf(path, "%s is not a Go duration (such as \"90s\", \"10m\" or \"1h30m\")", quoteShort(v))
	}
	if d < 0 {
		return 0, errf(path, "%s is negative", quoteShort(v))
	}
	return d, nil
}
