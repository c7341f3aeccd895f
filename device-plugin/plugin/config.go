package plugin

import (
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zclconf/go-cty/cty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"

	"github.com/gputide/gputide/device-plugin/health"
	"github.com/gputide/gputide/device-plugin/mockgpu"
	"github.com/gputide/gputide/device-plugin/proto/hclspecpb"
	"github.com/gputide/gputide/internal/regfile"
)

// Backend names for the backend option.
const (
	BackendNVML = "nvml"
	BackendMock = "mock"
)

// MinPeriod is the shortest fingerprint or health check period accepted.
const MinPeriod = 100 * time.Millisecond

// Config is the plugin's decoded agent config block. See docs/device-plugin.md
// for the operator's reference.
type Config struct {
	// Enabled false makes Fingerprint and Stats fail with "device is not
	// enabled", as the official plugin does.
	Enabled bool
	// IgnoredGPUIDs are GPU or MIG UUIDs left out of fingerprints and stats;
	// ignoring a GPU also ignores its MIG instances.
	IgnoredGPUIDs []string
	// FingerprintPeriod is how often the GPU inventory is re-read.
	FingerprintPeriod time.Duration
	// HealthCheckPeriod is how often every GPU is probed (and the mock's
	// fault file read).
	HealthCheckPeriod time.Duration
	// Backend is BackendNVML or BackendMock.
	Backend string
	// NVMLLibraryPath is libnvidia-ml's path; empty uses the loader path.
	NVMLLibraryPath string
	// MockProfile is the mock system, "dgxa100" or "dgxh100:4".
	MockProfile string
	// MockGPUName is the device name the mock's GPUs report instead of
	// go-nvml's, e.g. "NVIDIA A100-SXM4-40GB"; empty keeps go-nvml's.
	MockGPUName string
	// MockFaultFile is the mock's fault control file (absolute path).
	MockFaultFile string
	// MockMIG maps GPU index to MIG profile names for the mock, one name
	// per instance (mock_mig's "6-7:7x1g.5gb" gives 6 and 7 seven each).
	MockMIG map[int][]string
	// MockUUIDSeed seeds the mock's UUIDs; empty means the host name.
	MockUUIDSeed string
	// ExtraCriticalXids and IgnoredXids adjust the critical Xid list.
	ExtraCriticalXids []uint64
	IgnoredXids       []uint64
}

// DefaultConfig is the config an empty config block gives.
func DefaultConfig() Config {
	return Config{
		Enabled:           true,
		FingerprintPeriod: time.Minute,
		HealthCheckPeriod: 10 * time.Second,
		Backend:           BackendNVML,
		MockProfile:       "dgxa100",
	}
}

// XidPolicy is the config's Xid classification.
func (c Config) XidPolicy() health.XidPolicy {
	return health.XidPolicy{Extra: c.ExtraCriticalXids, Ignored: c.IgnoredXids}
}

// option is one key of the config block.
type option struct {
	name string
	// hclType is the HCL type expression sent in the spec.
	hclType string
	typ     cty.Type
	// literal is the default as an HCL expression.
	literal string
	// set parses a non-null value into c; errors name no option (the
	// caller adds the option name and value).
	set func(c *Config, v cty.Value) error
}

// options is the schema, in the order the docs list it.
var options = []option{
	{"enabled", "bool", cty.Bool, "true", func(c *Config, v cty.Value) error {
		c.Enabled = v.True()
		return nil
	}},
	{"ignored_gpu_ids", "list(string)", cty.List(cty.String), "[]", func(c *Config, v cty.Value) error {
		ids, err := stringList(v)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if strings.TrimSpace(id) == "" || strings.ContainsAny(id, ", \t") {
				return fmt.Errorf("GPU ID %q must be a GPU-... or MIG-... UUID", id)
			}
		}
		c.IgnoredGPUIDs = ids
		return nil
	}},
	{"fingerprint_period", "string", cty.String, `"1m"`, func(c *Config, v cty.Value) error {
		d, err := period(v.AsString())
		c.FingerprintPeriod = d
		return err
	}},
	{"health_check_period", "string", cty.String, `"10s"`, func(c *Config, v cty.Value) error {
		d, err := period(v.AsString())
		c.HealthCheckPeriod = d
		return err
	}},
	{"backend", "string", cty.String, `"nvml"`, func(c *Config, v cty.Value) error {
		switch s := v.AsString(); s {
		case BackendNVML, BackendMock:
			c.Backend = s
			return nil
		}
		return errors.New(`want "nvml" or "mock"`)
	}},
	{"nvml_library_path", "string", cty.String, `""`, func(c *Config, v cty.Value) error {
		c.NVMLLibraryPath = v.AsString()
		return nil
	}},
	{"mock_profile", "string", cty.String, `"dgxa100"`, func(c *Config, v cty.Value) error {
		if _, _, err := mockgpu.ParseProfile(v.AsString()); err != nil {
			return err
		}
		c.MockProfile = v.AsString()
		return nil
	}},
	{"mock_gpu_name", "string", cty.String, `""`, func(c *Config, v cty.Value) error {
		if s := v.AsString(); s != "" {
			if err := mockgpu.CheckGPUName(s); err != nil {
				return err
			}
		}
		c.MockGPUName = v.AsString()
		return nil
	}},
	{"mock_fault_file", "string", cty.String, `""`, func(c *Config, v cty.Value) error {
		s := v.AsString()
		if s == "" {
			c.MockFaultFile = s
			return nil
		}
		if !filepath.IsAbs(s) {
			return errors.New("must be an absolute path")
		}
		if strings.HasSuffix(s, "/") {
			return errors.New("names a folder: want the path of a regular file (it may not exist yet)")
		}
		// The file may appear later (a missing file means no faults), but
		// what is there must be a regular file: a folder, device or FIFO
		// would fail or block every health check.
		if err := regfile.Check(s); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		c.MockFaultFile = s
		return nil
	}},
	{"mock_mig", "list(string)", cty.List(cty.String), "[]", func(c *Config, v cty.Value) error {
		entries, err := stringList(v)
		if err != nil {
			return err
		}
		m, err := parseMockMIG(entries)
		c.MockMIG = m
		return err
	}},
	{"mock_uuid_seed", "string", cty.String, `""`, func(c *Config, v cty.Value) error {
		c.MockUUIDSeed = v.AsString()
		return nil
	}},
	{"extra_critical_xids", "list(number)", cty.List(cty.Number), "[]", func(c *Config, v cty.Value) error {
		x, err := xidList(v)
		c.ExtraCriticalXids = x
		return err
	}},
	{"ignored_xids", "list(number)", cty.List(cty.Number), "[]", func(c *Config, v cty.Value) error {
		x, err := xidList(v)
		c.IgnoredXids = x
		return err
	}},
}

// schemaType is the cty object type Nomad encodes the config block as.
var schemaType = func() cty.Type {
	attrs := make(map[string]cty.Type, len(options))
	for _, o := range options {
		attrs[o.name] = o.typ
	}
	return cty.Object(attrs)
}()

// SchemaType returns the cty object type of the config block.
func SchemaType() cty.Type { return schemaType }

// ConfigSpec is the hclspec the plugin returns from ConfigSchema: an Object
// whose every key is a Default of an optional Attr and a Literal default.
func ConfigSpec() *hclspecpb.Spec {
	attrs := make(map[string]*hclspecpb.Spec, len(options))
	for _, o := range options {
		attrs[o.name] = &hclspecpb.Spec{Block: &hclspecpb.Spec_Default{Default: &hclspecpb.Default{
			Primary: &hclspecpb.Spec{Block: &hclspecpb.Spec_Attr{Attr: &hclspecpb.Attr{Name: o.name, Type: o.hclType}}},
			Default: &hclspecpb.Spec{Block: &hclspecpb.Spec_Literal{Literal: &hclspecpb.Literal{Value: o.literal}}},
		}}}
	}
	return &hclspecpb.Spec{Block: &hclspecpb.Spec_Object{Object: &hclspecpb.Object{Attributes: attrs}}}
}

// DecodeConfig decodes SetConfig's msgpack_config: go-cty msgpack of the
// config block decoded against ConfigSpec (Nomad encodes it with
// msgpack.Marshal(val, val.Type())). Empty input, a null object and
// missing or null attributes give the defaults. Errors name the option and
// its value, e.g. `invalid fingerprint_period "5x": ...`.
func DecodeConfig(b []byte) (Config, error) {
	cfg := DefaultConfig()
	if len(b) == 0 {
		return cfg, nil
	}
	val, err := ctymsgpack.Unmarshal(b, schemaType)
	if err != nil {
		return Config{}, fmt.Errorf("failed to decode plugin config: %w", err)
	}
	if val.IsNull() || !val.IsKnown() {
		return cfg, nil
	}
	for _, o := range options {
		if !val.Type().HasAttribute(o.name) {
			continue
		}
		v := val.GetAttr(o.name)
		if v.IsNull() || !v.IsWhollyKnown() {
			continue
		}
		if err := o.set(&cfg, v); err != nil {
			return Config{}, fmt.Errorf("invalid %s %s: %w", o.name, showValue(v), err)
		}
	}
	if cfg.Backend == BackendMock {
		// Build the mock once to check the MIG layout against the model.
		if _, err := mockgpu.NewLib(cfg.mockOptions(nil)); err != nil {
			return Config{}, fmt.Errorf("invalid mock_mig %s for mock_profile %q: %w",
				showMIG(cfg.MockMIG), cfg.MockProfile, err)
		}
	}
	return cfg, nil
}

// mockOptions gives the mock backend's options for this config.
func (c Config) mockOptions(critical func(uint64) bool) mockgpu.Options {
	return mockgpu.Options{
		Profile:   c.MockProfile,
		GPUName:   c.MockGPUName,
		UUIDSeed:  c.MockUUIDSeed,
		MIG:       c.MockMIG,
		FaultFile: c.MockFaultFile,
		Critical:  critical,
	}
}

func period(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf(`not a duration such as "30s" or "1m"`)
	}
	if d < MinPeriod {
		return 0, fmt.Errorf("must be at least %s", MinPeriod)
	}
	return d, nil
}

func stringList(v cty.Value) ([]string, error) {
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() {
			return nil, errors.New("null element")
		}
		out = append(out, e.AsString())
	}
	return out, nil
}

func xidList(v cty.Value) ([]uint64, error) {
	var out []uint64
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() {
			return nil, errors.New("null element")
		}
		bf := e.AsBigFloat()
		if !bf.IsInt() {
			return nil, fmt.Errorf("%s is not a whole number", bf.Text('g', 10))
		}
		n, acc := bf.Int64()
		if acc != big.Exact || n < 1 || n > 999 {
			return nil, fmt.Errorf("%s is out of range (Xids are 1 to 999)", bf.Text('g', 10))
		}
		out = append(out, uint64(n))
	}
	return out, nil
}

// maxMIGPerGPU bounds a mock_mig repeat count: no GPU has more than 7
// slices, so a larger count is a typo (the slice check names the sum).
const maxMIGPerGPU = 7

// parseMockMIG parses mock_mig entries "<gpus>:<profile>[,<profile>...]":
// <gpus> is a GPU index or an inclusive range "6-7", and each profile may
// carry a repeat count, "7x1g.5gb" being seven 1g.5gb instances. So
// ["0:3g.20gb,3g.20gb", "6-7:7x1g.5gb"] gives GPU 0 two 3g.20gb instances
// and GPUs 6 and 7 seven 1g.5gb each. Errors quote the entry; whether the
// profiles exist for the model and fit is checked when the mock is built.
func parseMockMIG(entries []string) (map[int][]string, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	out := map[int][]string{}
	for _, e := range entries {
		idx, list, ok := strings.Cut(e, ":")
		first, last, err := gpuRange(idx)
		if !ok || err != nil {
			why := ""
			if ok {
				why = err.Error() + "; "
			}
			return nil, fmt.Errorf(`entry %q: %swant "<gpu index>[-<last index>]:[<count>x]<profile>[,...]", e.g. "0:3g.20gb,3g.20gb" or "6-7:7x1g.5gb"`, e, why)
		}
		if last >= mockgpu.MaxGPUs {
			return nil, fmt.Errorf("entry %q: GPU %d: the mock has at most %d GPUs, 0 to %d", clipEntry(e), last, mockgpu.MaxGPUs, mockgpu.MaxGPUs-1)
		}
		var names []string
		for _, p := range strings.Split(list, ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			n := 1
			if count, profile, ok := strings.Cut(p, "x"); ok && count != "" && strings.Trim(count, "0123456789") == "" {
				n, err = strconv.Atoi(count)
				if err != nil || n < 1 || n > maxMIGPerGPU || profile == "" {
					return nil, fmt.Errorf("entry %q: %q: want a count of 1 to %d before x and a profile after it, e.g. \"7x1g.5gb\"", e, p, maxMIGPerGPU)
				}
				p = profile
			}
			if len(names)+n > maxMIGPerGPU {
				return nil, fmt.Errorf("entry %q: more than %d MIG instances per GPU: no GPU has more", clipEntry(e), maxMIGPerGPU)
			}
			for ; n > 0; n-- {
				names = append(names, p)
			}
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("entry %q: no MIG profiles", e)
		}
		for i := first; i <= last; i++ {
			if _, dup := out[i]; dup {
				return nil, fmt.Errorf("entry %q: GPU %d listed twice", e, i)
			}
			out[i] = names
		}
	}
	return out, nil
}

// clipEntry shortens a long mock_mig entry for a message.
func clipEntry(e string) string {
	if len(e) > 80 {
		return e[:80] + "..."
	}
	return e
}

// gpuRange parses "3" or "6-7" into an inclusive range of GPU indexes.
func gpuRange(s string) (first, last int, err error) {
	a, b, isRange := strings.Cut(strings.TrimSpace(s), "-")
	if first, err = strconv.Atoi(strings.TrimSpace(a)); err != nil || first < 0 {
		return 0, 0, errors.New("bad GPU index")
	}
	last = first
	if isRange {
		if last, err = strconv.Atoi(strings.TrimSpace(b)); err != nil {
			return 0, 0, errors.New("bad GPU range")
		}
		if last < first {
			return 0, 0, fmt.Errorf("GPU range %d-%d runs backwards: write the lower index first, %d-%d", first, last, last, first)
		}
	}
	return first, last, nil
}

func showMIG(m map[int][]string) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%q", fmt.Sprintf("%d:%s", k, strings.Join(m[k], ",")))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// showValue prints a config value the way an operator wrote it.
func showValue(v cty.Value) string {
	switch {
	case v.IsNull():
		return "null"
	case v.Type() == cty.String:
		return strconv.Quote(v.AsString())
	case v.Type() == cty.Bool:
		return strconv.FormatBool(v.True())
	case v.Type() == cty.Number:
		return v.AsBigFloat().Text('g', 10)
	case v.Type().IsListType() || v.Type().IsSetType() || v.Type().IsTupleType():
		var parts []string
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			parts = append(parts, showValue(e))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return v.GoString()
}
