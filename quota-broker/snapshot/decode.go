package snapshot

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
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
	hint, tooLarge := sizeHint(r)
	if tooLarge {
		// A regular file whose size is over the limit is refused before
		// reading it: reading it would cost up to three times the limit
		// in memory and seconds of copying for the same error.
		return nil, errTooLarge()
	}
	data, err := readAll(br, hint)
	if err != nil {
		return nil, err
	}
	if len(data) > maxSize {
		return nil, errTooLarge()
	}
	w, err := decodeWire(&data)
	if err != nil {
		return nil, err
	}
	return convert(w)
}

// errTooLarge is the error for a document over maxSize.
func errTooLarge() error {
	return &Error{Message: fmt.Sprintf("the input is larger than %d MiB, the most a snapshot may be", maxSize>>20)}
}

// sizeHint is the size of r when it is a regular file (os.File), else 0;
// tooLarge reports a regular file larger than maxSize.
func sizeHint(r io.Reader) (hint int, tooLarge bool) {
	st, ok := r.(interface{ Stat() (fs.FileInfo, error) })
	if !ok {
		return 0, false
	}
	fi, err := st.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return 0, false
	}
	if fi.Size() > int64(maxSize) {
		return 0, true
	}
	return int(fi.Size()), false
}

// readAll reads r up to maxSize+1 bytes into a buffer of size hint+1 when
// the size is known, so that a large file is not copied through doubling
// buffers (which would hold up to three times its size at once).
func readAll(r io.Reader, hint int) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, hint+bytes.MinRead))
	_, err := buf.ReadFrom(io.LimitReader(r, int64(maxSize)+1))
	return buf.Bytes(), err
}

// Unmarshal is Decode for a document held in memory (of any size).
func Unmarshal(data []byte) (*plan.Snapshot, error) {
	w, err := decodeWire(&data)
	if err != nil {
		return nil, err
	}
	return convert(w)
}

// decodeWire reads the document into its wire form and clears *data: the
// wire form holds copies of its strings, so the text can be collected
// while the snapshot is converted and checked.
func decodeWire(data *[]byte) (*wireSnapshot, error) {
	w := &wireSnapshot{}
	err := decodeStrict(*data, w)
	*data = nil
	if err != nil {
		return nil, err
	}
	return w, nil
}

// convert turns the wire form into a checked snapshot.
func convert(w *wireSnapshot) (*plan.Snapshot, error) {
	c := converter{}
	s, err := c.snapshot(w)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// converter turns the wire form into the core types: it parses times and
// durations and checks what only the wire form shows (the depth of the
// tree, numbers in range, the text of flex durations). The structural
// rules (references, duplicates, ranges of the core's values) are
// plan.Snapshot.Validate's, called on the result.
type converter struct {
	flexText map[string]string // JSON path of a flex duration -> its text
	// flavors are the document's declared flavors (top-level "flavors"),
	// read before the tree: a plain gpus number is the only flavor's.
	flavors []quota.Flavor
}

// flavorList converts the declared flavors at path ("flavors"); their
// rules (names, models, a model in one flavor) are quota.Validate's.
func (c *converter) flavorList(ws []wireFlavor, path string) error {
	if len(ws) > maxFlavors {
		return errf(path, "%d flavors, more than %d", len(ws), maxFlavors)
	}
	for i, w := range ws {
		c.flavors = append(c.flavors, quota.Flavor{Name: w.Name, Models: append([]string(nil), w.Models...),
			MIGProfile: w.MIGProfile, Pos: fmt.Sprintf("%s[%d]", path, i)})
	}
	return nil
}

// maxFlavors bounds a tree's declared flavors: far above the models and
// MIG profiles of any fleet, it keeps the planner's work per flavor
// bounded.
const maxFlavors = 64

// nominal converts a node's gpus at path (DESIGN L13): a plain number is
// the nominal of the tree's only flavor (an error in a tree of several);
// an object names flavors of the tree.
func (c *converter) nominal(w wireNominal, path string) (quota.Nominal, error) {
	check := func(p string, v int64) error {
		if v > quota.MaxGPUs {
			return errf(p, "%d is too large (at most %d)", v, quota.MaxGPUs)
		}
		if v < -quota.MaxGPUs {
			return errf(p, "%d is negative", v)
		}
		return nil
	}
	names := make([]string, 0, len(c.flavors))
	for _, f := range c.flavors {
		names = append(names, f.Name)
	}
	if w.Plain != nil {
		if err := check(path, *w.Plain); err != nil {
			return nil, err
		}
		switch len(c.flavors) {
		case 0:
			return quota.Plain(int(*w.Plain)), nil
		case 1:
			return quota.Nominal{c.flavors[0].Name: int(*w.Plain)}, nil
		}
		return nil, errf(path, "%d is a plain number, but the tree declares %d flavors (%s): give an object by flavor, {%q: %d}",
			*w.Plain, len(c.flavors), strings.Join(names, ", "), names[0], *w.Plain)
	}
	n := quota.Nominal{}
	for _, f := range w.ByFlavor {
		p := path + "." + f.Flavor
		known := slices.Contains(names, f.Flavor) || len(c.flavors) == 0 && f.Flavor == quota.ImplicitFlavor
		if !known {
			declared := "none declared: the tree's one flavor is the implicit \"gpu\""
			if len(names) > 0 {
				declared = strings.Join(names, ", ")
			}
			return nil, errf(p, "flavor %s is not a flavor of the tree (%s)", plan.Quote(f.Flavor), declared)
		}
		if err := check(p, f.GPUs); err != nil {
			return nil, err
		}
		n[f.Flavor] = int(f.GPUs)
	}
	return n, nil
}

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
	if err := c.flavorList(w.Flavors, "flavors"); err != nil {
		return nil, err
	}
	if s.Quota, err = c.quota(w.Quota, "quota", 1); err != nil {
		return nil, err
	}
	if err := c.settings(w.Settings, &s.Settings); err != nil {
		return nil, err
	}
	// Each wire list is let go once converted, so that the garbage
	// collector may take it back while the next one is converted: the
	// peak is then one list in both forms, not the whole document.
	s.Nodes, w.Nodes = c.nodeList(w.Nodes), nil
	if s.Allocations, err = c.allocations(w.Allocations); err != nil {
		return nil, err
	}
	w.Allocations = nil
	if s.Pending, err = c.pending(w.Pending); err != nil {
		return nil, err
	}
	w.Pending = nil
	if s.Reservations, err = c.reservations(w.Reservations); err != nil {
		return nil, err
	}
	if s.Holds, err = c.holds(w.Holds); err != nil {
		return nil, err
	}
	if s.IdleGroups, err = c.idleGroups(w.IdleGroups); err != nil {
		return nil, err
	}
	if s.Prewarm, err = c.prewarms(w.Prewarm); err != nil {
		return nil, err
	}
	if s.Evictions, err = c.evictions(w.Evictions, s.Quota); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		var f *plan.Fault
		if errors.As(err, &f) {
			msg := f.Message
			var fe *plan.FlexError
			if text, ok := c.flexText[f.Path]; ok && errors.As(err, &fe) {
				msg = fe.Message(plan.Quote(text)) // the value as given
			}
			return nil, &Error{Path: f.Path, Message: msg, Err: err}
		}
		return nil, &Error{Message: err.Error(), Err: err}
	}
	return s, nil
}

// settings overlays the keys of w (nil: none) on s, which holds the
// defaults: a key left out keeps its default.
func (c *converter) settings(w *wireSettings, s *quota.Settings) error {
	if w == nil {
		return nil
	}
	for _, f := range []struct {
		key  string
		text *string
		dst  *time.Duration
	}{
		{"min_runtime", w.MinRuntime, &s.MinRuntime},
		{"debt_grace", w.DebtGrace, &s.DebtGrace},
		{"settle", w.Settle, &s.Settle},
		{"drain_margin", w.DrainMargin, &s.DrainMargin},
		{"drain_horizon", w.DrainHorizon, &s.DrainHorizon},
		{"reservation_max_ahead", w.ReservationMaxAhead, &s.ReservationMaxAhead},
		{"reservation_min_duration", w.ReservationMinDuration, &s.ReservationMinDuration},
		{"autoscaler_evaluation_interval", w.AutoscalerEvaluationInterval, &s.AutoscalerEvaluationInterval},
	} {
		if f.text == nil {
			continue
		}
		d, err := parseDuration("settings."+f.key, *f.text)
		if err != nil {
			return err
		}
		*f.dst = d
	}
	if n := w.ReservationMaxPerNamespace; n != nil {
		if problem := quota.CheckMaxPerNamespace(*n); problem != "" {
			return errf("settings.reservation_max_per_namespace", "%d %s", *n, problem)
		}
		s.ReservationMaxPerNamespace = int(*n)
	}
	return nil
}

// quota converts the quota node w at level depth of the tree (the root is
// at 1) and its subtree.
func (c *converter) quota(w *wireQuota, path string, depth int) (*quota.Node, error) {
	if depth > quota.MaxDepth {
		return nil, errf(path, "the quota tree is more than %d levels deep", quota.MaxDepth)
	}
	if len(w.Flavors) > 0 {
		if depth > 1 || len(c.flavors) > 0 {
			return nil, errf(path+".flavors", "flavors are declared once, at the top level of the document (or on a quota object standing alone, its root)")
		}
		if err := c.flavorList(w.Flavors, path+".flavors"); err != nil {
			return nil, err
		}
	}
	gpus, err := c.nominal(w.GPUs, path+".gpus")
	if err != nil {
		return nil, err
	}
	var weight quota.Nominal
	if w.Weight != nil {
		if weight, err = c.nominal(*w.Weight, path+".weight"); err != nil {
			return nil, err
		}
		for _, f := range slices.Sorted(maps.Keys(weight)) {
			if v := weight[f]; v < 0 || v > quota.MaxWeight {
				return nil, errf(path+".weight", "weight %d of flavor %s is out of range (0..%d; DESIGN L14)", v, plan.Quote(f), quota.MaxWeight)
			}
		}
	}
	maxEvict, err := evictBudget(w.MaxEvict, path)
	if err != nil {
		return nil, err
	}
	n := &quota.Node{
		Name:               w.Name,
		GPUs:               gpus,
		Weight:             weight,
		MaxEvict:           maxEvict,
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
	if depth == 1 && len(c.flavors) > 0 {
		n.Flavors = c.flavors
	}
	return n, nil
}

// nodeList converts the nodes; all GPUs share one backing array.
func (c *converter) nodeList(ws []wireNode) []plan.Node {
	if len(ws) == 0 {
		return nil
	}
	total := 0
	for i := range ws {
		total += len(ws[i].GPUs)
	}
	gpus := make([]plan.GPU, 0, total)
	out := make([]plan.Node, 0, len(ws))
	for i := range ws {
		w := &ws[i]
		n := plan.Node{ID: w.ID, Datacenter: w.Datacenter, NodePool: w.NodePool}
		at := len(gpus)
		for _, g := range w.GPUs {
			healthy := true
			if g.Healthy != nil {
				healthy = *g.Healthy
			}
			gpus = append(gpus, plan.GPU{ID: g.ID, Model: g.Model, Healthy: healthy, MIGProfile: g.MIGProfile})
		}
		if len(w.GPUs) > 0 {
			n.GPUs = gpus[at:len(gpus):len(gpus)]
		}
		out = append(out, n)
	}
	return out
}

func (c *converter) allocations(ws []wireAllocation) ([]plan.Allocation, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	out := make([]plan.Allocation, 0, len(ws))
	for i := range ws {
		w := &ws[i]
		path := "allocations[" + strconv.Itoa(i) + "]"
		if err := priority(path+".priority", w.Priority); err != nil {
			return nil, err
		}
		stoppingFor, stoppingRes, err := claimant(path+".stopping_for", w.StoppingFor)
		if err != nil {
			return nil, err
		}
		started, err := parseTime(path+".started_at", w.StartedAt)
		if err != nil {
			return nil, err
		}
		a := plan.Allocation{
			ID: w.ID, Namespace: w.Namespace, Job: w.Job, Group: w.Group,
			Type: plan.JobType(w.Type), Priority: int(w.Priority), Node: w.Node,
			GPUIDs: w.GPUIDs, Idle: w.Idle, Elastic: w.Elastic, Reservation: w.Reservation,
			StoppingFor: stoppingFor, StoppingForReservation: stoppingRes, StartedAt: started, KillTimeout: plan.DefaultKillTimeout,
		}
		if w.KillTimeout != nil {
			if a.KillTimeout, err = parseDuration(path+".kill_timeout", *w.KillTimeout); err != nil {
				return nil, err
			}
		}
		if w.MaxRun != nil {
			if a.MaxRun, err = parseDuration(path+".max_run", *w.MaxRun); err != nil {
				return nil, err
			}
		}
		if w.AdmittedAt != "" {
			if a.AdmittedAt, err = parseTime(path+".admitted_at", w.AdmittedAt); err != nil {
				return nil, err
			}
		}
		out = append(out, a)
	}
	return out, nil
}

func (c *converter) pending(ws []wirePending) ([]plan.Pending, error) {
	var out []plan.Pending
	for i := range ws {
		w := &ws[i]
		path := "pending[" + strconv.Itoa(i) + "]"
		if err := priority(path+".priority", w.Priority); err != nil {
			return nil, err
		}
		if err := positive(path+".count", w.Count); err != nil {
			return nil, err
		}
		if err := positive(path+".gpus", w.GPUs); err != nil {
			return nil, err
		}
		submitted, err := parseTime(path+".submitted_at", w.SubmittedAt)
		if err != nil {
			return nil, err
		}
		p := plan.Pending{
			Namespace: w.Namespace, Job: w.Job, Group: w.Group, Type: plan.JobType(w.Type),
			Priority: int(w.Priority), Count: int(w.Count), GPUs: int(w.GPUs),
			Model: w.Model, Flavors: nilIfEmpty(w.Flavors), Datacenters: nilIfEmpty(w.Datacenters),
			NodePool: w.NodePool, Idle: w.Idle, Elastic: w.Elastic,
			Reservation: w.Reservation, SubmittedAt: submitted, QueuedAt: submitted,
		}
		if w.QueuedAt != "" {
			if p.QueuedAt, err = parseTime(path+".queued_at", w.QueuedAt); err != nil {
				return nil, err
			}
		}
		if w.Flex != nil {
			if p.Flex, err = c.flex(path+".flex", w.Flex); err != nil {
				return nil, err
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// flex converts flex settings: max_wait defaults to plan.DefaultFlexWait.
// Their rule is plan.Flex.Check's (DESIGN L11), applied by Validate; the
// texts are kept to quote a bad value as given.
func (c *converter) flex(path string, w *wireFlex) (*plan.Flex, error) {
	f := &plan.Flex{MaxWait: plan.DefaultFlexWait}
	var err error
	if c.flexText == nil {
		c.flexText = map[string]string{}
	}
	if w.MaxWait != nil {
		if f.MaxWait, err = parseDuration(path+".max_wait", *w.MaxWait); err != nil {
			return nil, err
		}
		c.flexText[path+".max_wait"] = *w.MaxWait
	}
	if w.MaxRun != nil {
		if f.MaxRun, err = parseDuration(path+".max_run", *w.MaxRun); err != nil {
			return nil, err
		}
		c.flexText[path+".max_run"] = *w.MaxRun
	}
	return f, nil
}

func (c *converter) reservations(ws []wireReservation) ([]plan.Reservation, error) {
	var out []plan.Reservation
	for i, w := range ws {
		path := fmt.Sprintf("reservations[%d]", i)
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
		r := plan.Reservation{ID: w.ID, Namespace: w.Namespace, Quota: w.Quota,
			GPUs: int(w.GPUs), Model: w.Model, Flavor: w.Flavor, NodePool: w.NodePool, Start: start, End: end}
		if w.AllocGPUs != nil {
			if err := positive(path+".alloc_gpus", *w.AllocGPUs); err != nil {
				return nil, err
			}
			r.AllocGPUs = int(*w.AllocGPUs)
		} else {
			r.AllocGPUs, _ = r.Shape()
		}
		out = append(out, r)
	}
	return out, nil
}

// holds converts the holds; their owner is {"reservation": ID} or a
// claimant object, exactly one of the two.
func (c *converter) holds(ws []wireHold) ([]plan.Hold, error) {
	var out []plan.Hold
	for i := range ws {
		w := &ws[i]
		path := fmt.Sprintf("holds[%d]", i)
		h := plan.Hold{Node: w.Node, GPUIDs: w.GPUIDs}
		o := w.For
		switch {
		case o.Reservation != "" && (o.Namespace != "" || o.Job != "" || o.Group != ""):
			return nil, errf(path+".for", "names both reservation %s and a claimant; give one", plan.Quote(o.Reservation))
		case o.Reservation != "":
			h.For.Reservation = o.Reservation
		default:
			if err := nonEmpty(path+".for", "namespace", o.Namespace, "job", o.Job, "group", o.Group); err != nil {
				return nil, err
			}
			h.For.Group = plan.GroupKey{Namespace: o.Namespace, Job: o.Job, Group: o.Group}
		}
		var err error
		if h.Until, err = parseTime(path+".until", w.Until); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// nilIfEmpty returns nil for an empty list, so that "[]" and no key read
// the same.
func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// claimant converts a claimant reference, a task group or (the object
// {"reservation": ID} alone) a reservation. The group object form needs
// its three keys; the older string form "namespace/job/group" must have
// exactly three non-empty parts, so an ID or group name that contains "/"
// (a periodic or dispatched child job) can only be given as an object.
func claimant(path string, w wireClaimant) (plan.GroupKey, string, error) {
	if k := w.Key; k != nil {
		if k.Reservation != "" {
			if k.Namespace != "" || k.Job != "" || k.Group != "" {
				return plan.GroupKey{}, "", errf(path, "names both reservation %s and a claimant; give one", plan.Quote(k.Reservation))
			}
			return plan.GroupKey{}, k.Reservation, nil
		}
		for _, f := range [][2]string{{"namespace", k.Namespace}, {"job", k.Job}, {"group", k.Group}} {
			if f[1] == "" {
				return plan.GroupKey{}, "", errf(path+"."+f[0], "must not be empty")
			}
		}
		return plan.GroupKey{Namespace: k.Namespace, Job: k.Job, Group: k.Group}, "", nil
	}
	if w.Text == "" {
		return plan.GroupKey{}, "", nil
	}
	parts := strings.Split(w.Text, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return plan.GroupKey{}, "", errf(path, "%s is not a claimant of the form \"namespace/job/group\" (three non-empty parts; "+
			"a job ID or group with \"/\" needs the object form {\"namespace\": ..., \"job\": ..., \"group\": ...})", plan.Quote(w.Text))
	}
	return plan.GroupKey{Namespace: parts[0], Job: parts[1], Group: parts[2]}, "", nil
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
		return time.Time{}, errf(path, "%s is not an RFC 3339 time (such as \"2026-12-01T08:00:00Z\")", plan.Quote(v))
	}
	return t, nil
}

func parseDuration(path, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errf(path, "%s is not a Go duration (such as \"90s\", \"10m\" or \"1h30m\")", plan.Quote(v))
	}
	if d < 0 {
		return 0, errf(path, "%s is negative", plan.Quote(v))
	}
	return d, nil
}
