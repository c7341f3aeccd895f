// Package agent is the quota broker daemon, "gputide agent": it watches a
// Nomad cluster through package nomad, plans with package plan on every
// change and at least every interval, and carries the plans out (DESIGN
// §4, §5). It serves its reads (health, last plan, last snapshot,
// preemptions, Prometheus metrics) on a loopback HTTP address.
package agent

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gputide/gputide/internal/redact"
	brokerapi "github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/store"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Defaults of the agent configuration.
const (
	DefaultInterval  = 30 * time.Second
	DefaultStaleness = 15 * time.Second
	DefaultHTTPBind  = "127.0.0.1:4780"
	DefaultNomadAddr = "http://127.0.0.1:4646"
	DefaultPool      = "gputide-queue"

	// DefaultDumpMaxFiles bounds dump_dir: the agent writes two files
	// (snapshot-<stamp>.json, plan-<stamp>.json) for every plan with an
	// action, so 1000 files keep the last 500 such plans (at most about
	// 4 h of 30 s plans; a few MB to a few GB, by cluster size).
	DefaultDumpMaxFiles = 1000

	// MinPeriod is the floor of interval and staleness: the agent ticks at
	// interval and probes Nomad every staleness/3 (L12), so a shorter
	// value would spin a core (and staleness < 3ns panics NewTicker).
	MinPeriod = time.Second

	// MaxConfigBytes caps the configuration file read by LoadConfig: a
	// broker.hcl is a few hundred bytes; a larger file is refused unread.
	MaxConfigBytes = 1 << 20
)

// Errors of the configuration, for errors.Is; every one comes wrapped in a
// *ConfigError naming the file, the key and the value.
var (
	ErrInvalid     = errors.New("invalid value")
	ErrTooShort    = errors.New("below the floor")
	ErrNotRegular  = errors.New("not a regular file")
	ErrTooLarge    = errors.New("too large")
	ErrNotGoverned = errors.New("not bound in the quota tree")
)

// ConfigError is the one error shape of this package's configuration: the
// file, the key (empty for the file itself), the value and what is wrong.
type ConfigError struct {
	File  string
	Key   string // "interval", "nomad.address", ...
	Value string
	Err   error // one of the Err... sentinels, possibly wrapped
	Why   string
}

func (e *ConfigError) Error() string {
	msg := e.Err.Error()
	if e.Why != "" {
		msg = e.Why
	}
	if e.Key == "" {
		return fmt.Sprintf("%s: %s", e.File, msg)
	}
	return fmt.Sprintf("%s: %s = %q: %s", e.File, e.Key, e.Value, msg)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// poolName is Nomad's rule for node pool names: 1 to 128 letters, digits,
// '-' or '_'.
var poolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)

// reservedPools are Nomad's built-in node pools: a holding pool must be
// empty of nodes, and "default" and "all" never are.
var reservedPools = map[string]bool{"default": true, "all": true}

// Config is the agent's configuration, read from HCL:
//
//	nomad {
//	  address = "http://127.0.0.1:4646"  # default; NOMAD_ADDR if unset
//	  token   = ""                       # default: NOMAD_TOKEN
//	  region  = ""                       # default: the agent's region
//	}
//	quota_file   = "quota.hcl"           # required: the quota tree (reloaded when it changes)
//	namespaces   = ["workspace-a"]       # namespaces to govern; default: every namespace in the tree
//	holding_pool = "gputide-queue"       # default; created by the broker
//	admit_pools  = ["default"]           # default; the pools gputide_pool may name
//	interval     = "30s"                 # plan at least this often; at least 1s
//	min_runtime  = "10m"                 # overrides the tree's settings when set
//	staleness    = "15s"                 # L12: never act on state older than this; at least 1s
//	http_bind    = "127.0.0.1:4780"      # the API; beyond loopback only with tls
//	tls {                                # serve the API over TLS (DESIGN §9)
//	  cert_file = "broker.pem"
//	  key_file  = "broker-key.pem"
//	}
//	log_level    = "info"                # trace, debug, info, warn, error or off
//	dump_dir     = ""                    # write each snapshot and plan here (for gputide plan)
//	dump_max_files = 1000                # keep at most this many dump files, oldest removed first; 0: never pruned
//	admin_policy = "gputide-admin"       # Nomad policy whose holders are broker admins (DESIGN §9)
//	admin_token  = ""                    # the broker's admin token, only while Nomad ACLs are off; default GPUTIDE_ADMIN_TOKEN
//	open_reads_without_acl = false       # with Nomad ACLs off, serve reads without the admin token
//	history_retention = "2160h"          # the leader prunes preemption history older than this
//	consul {                             # optional: the durable store and the leader lock (DESIGN §6, L12)
//	  address = "127.0.0.1:8500"         # default: CONSUL_HTTP_ADDR, else 127.0.0.1:8500
//	  token   = ""                       # default: CONSUL_HTTP_TOKEN; never logged
//	  prefix  = "gputide/"               # every key lives under it; ends with "/"
//	}
//
// Without a consul block the agent keeps its state in memory (bookings and
// history die with it) and quota_file is the tree, reloaded when it
// changes. With one, quota_file (then optional) only seeds an absent tree
// key; the tree is read from Consul and watched.
//
// Relative paths are relative to the configuration file. The address is
// http or https with a host; its userinfo, if any, is never printed
// (redact.Address). The holding pool is a valid Nomad pool name other than
// "default" and "all". Every listed namespace must be bound in the quota
// tree (checked by New, which reads the tree).
type Config struct {
	Nomad       NomadConfig
	QuotaFile   string
	Namespaces  []string
	HoldingPool string
	// AdmitPools are the node pools a job may name in gputide_pool
	// (default ["default"]); a job naming another pool, or one Nomad does
	// not have, gets a meta error and is left unadmitted (issue 10 item 4:
	// Nomad CE checks no node-pool ACL at registration).
	AdmitPools []string
	Interval   time.Duration
	MinRuntime *time.Duration
	Staleness  time.Duration
	HTTPBind   string
	LogLevel   string
	DumpDir    string
	// DumpMaxFiles bounds the snapshot-*.json and plan-*.json files in
	// DumpDir: after each dump the oldest (by the UTC stamp in the name)
	// are removed down to it. Default DefaultDumpMaxFiles; 0 never prunes.
	DumpMaxFiles int
	// AdminPolicy, AdminToken (never logged) and OpenReadsWithoutACL are
	// the API's token settings (DESIGN §9, docs/acl.md).
	AdminPolicy         string
	AdminToken          string
	OpenReadsWithoutACL bool
	// TLSCertFile and TLSKeyFile serve the API over TLS; both or neither.
	TLSCertFile string
	TLSKeyFile  string
	// Consul is the consul block; nil: the in-memory store.
	Consul *store.ConsulConfig
	// HistoryRetention: the leader prunes history older than this (and
	// beyond store.DefaultHistoryMax entries). Default
	// store.DefaultHistoryRetention (2160h, DESIGN §6).
	HistoryRetention time.Duration
}

// NomadConfig is how the agent reaches Nomad.
type NomadConfig struct {
	Address string
	Token   string // never logged
	Region  string
}

type fileConfig struct {
	Nomad       *fileNomad          `hcl:"nomad,block"`
	QuotaFile   string              `hcl:"quota_file,optional"`
	Namespaces  []string            `hcl:"namespaces,optional"`
	HoldingPool string              `hcl:"holding_pool,optional"`
	AdmitPools  []string            `hcl:"admit_pools,optional"`
	Interval    string              `hcl:"interval,optional"`
	MinRuntime  string              `hcl:"min_runtime,optional"`
	Staleness   string              `hcl:"staleness,optional"`
	HTTPBind    string              `hcl:"http_bind,optional"`
	LogLevel    string              `hcl:"log_level,optional"`
	DumpDir     string              `hcl:"dump_dir,optional"`
	DumpMax     *int                `hcl:"dump_max_files,optional"`
	AdminPolicy string              `hcl:"admin_policy,optional"`
	AdminToken  string              `hcl:"admin_token,optional"`
	OpenReads   bool                `hcl:"open_reads_without_acl,optional"`
	TLS         *fileTLS            `hcl:"tls,block"`
	Consul      *store.ConsulConfig `hcl:"consul,block"`
	Retention   string              `hcl:"history_retention,optional"`
}

type fileTLS struct {
	CertFile string `hcl:"cert_file"`
	KeyFile  string `hcl:"key_file"`
}

type fileNomad struct {
	Address string `hcl:"address,optional"`
	Token   string `hcl:"token,optional"`
	Region  string `hcl:"region,optional"`
}

// LoadConfig reads the configuration file at path and applies the defaults
// and the environment (NOMAD_ADDR, NOMAD_TOKEN, NOMAD_REGION where the file
// leaves them unset). The file must be a regular file of at most
// MaxConfigBytes. Errors name the file position or the key and value.
func LoadConfig(path string) (*Config, error) {
	src, err := readConfigFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(src, path)
}

// readConfigFile reads a regular file of at most MaxConfigBytes; a device,
// FIFO or directory is refused before reading (/dev/zero would never end).
func readConfigFile(path string) ([]byte, error) {
	notRegular := func(st os.FileInfo) error {
		if st.Mode().IsRegular() {
			return nil
		}
		return &ConfigError{File: path, Err: ErrNotRegular, Why: fmt.Sprintf("not a regular file (%s)", st.Mode().Type())}
	}
	// Stat before opening: opening a FIFO blocks until a writer comes.
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := notRegular(st); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil { // the file opened may not be the one stat saw
		return nil, err
	}
	if err := notRegular(st); err != nil {
		return nil, err
	}
	src, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", path, err)
	}
	if len(src) > MaxConfigBytes {
		return nil, &ConfigError{File: path, Err: ErrTooLarge, Why: fmt.Sprintf("larger than the %d-byte cap of a configuration file", MaxConfigBytes)}
	}
	return src, nil
}

// ParseConfig parses HCL configuration source; filename is used for
// positions and as the base of relative paths.
func ParseConfig(src []byte, filename string) (*Config, error) {
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("failed to parse %s: %s", filename, diags.Error())
	}
	var fc fileConfig
	if diags := gohcl.DecodeBody(file.Body, nil, &fc); diags.HasErrors() {
		return nil, fmt.Errorf("failed to decode %s: %s", filename, diags.Error())
	}
	c := &Config{QuotaFile: fc.QuotaFile, Namespaces: fc.Namespaces, HoldingPool: fc.HoldingPool, AdmitPools: fc.AdmitPools,
		HTTPBind: fc.HTTPBind, LogLevel: fc.LogLevel, DumpDir: fc.DumpDir, Consul: fc.Consul,
		AdminPolicy: fc.AdminPolicy, AdminToken: fc.AdminToken, OpenReadsWithoutACL: fc.OpenReads}
	if fc.Nomad != nil {
		c.Nomad = NomadConfig{Address: fc.Nomad.Address, Token: fc.Nomad.Token, Region: fc.Nomad.Region}
	}
	base := filepath.Dir(filename)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	if fc.TLS != nil {
		c.TLSCertFile, c.TLSKeyFile = rel(fc.TLS.CertFile), rel(fc.TLS.KeyFile)
	}
	c.QuotaFile = rel(c.QuotaFile)
	c.DumpDir = rel(c.DumpDir)
	if err := c.parseTimes(&fc, filename); err != nil {
		return nil, err
	}
	if err := c.applyDefaults(filename); err != nil {
		return nil, err
	}
	return c, nil
}

// parseTimes reads the durations and counts of fc into c: interval and
// staleness (at least MinPeriod), history_retention (positive),
// dump_max_files (0 or more) and min_runtime. A bad value is a
// *ConfigError naming the key and the value.
func (c *Config) parseTimes(fc *fileConfig, filename string) error {
	bad := func(key, v string, err error, why string) error {
		return &ConfigError{File: filename, Key: key, Value: v, Err: err, Why: why}
	}
	dur := func(key, v string, def time.Duration) (time.Duration, error) {
		if v == "" {
			return def, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return 0, bad(key, v, ErrInvalid, `want a non-negative duration such as "30s"`)
		}
		return d, nil
	}
	// period reads interval or staleness: at least MinPeriod.
	period := func(key, v string, def time.Duration) (time.Duration, error) {
		d, err := dur(key, v, def)
		if err != nil {
			return 0, err
		}
		if d < MinPeriod {
			return 0, bad(key, v, ErrTooShort, fmt.Sprintf("must be at least %s", MinPeriod))
		}
		return d, nil
	}
	var err error
	if c.Interval, err = period("interval", fc.Interval, DefaultInterval); err != nil {
		return err
	}
	if c.Staleness, err = period("staleness", fc.Staleness, DefaultStaleness); err != nil {
		return err
	}
	if c.HistoryRetention, err = dur("history_retention", fc.Retention, store.DefaultHistoryRetention); err != nil {
		return err
	}
	if c.HistoryRetention == 0 {
		return bad("history_retention", fc.Retention, ErrInvalid, "must be positive")
	}
	c.DumpMaxFiles = DefaultDumpMaxFiles
	if fc.DumpMax != nil {
		if *fc.DumpMax < 0 {
			return bad("dump_max_files", strconv.Itoa(*fc.DumpMax), ErrInvalid, "want a count of files, 0 or more (0: never prune)")
		}
		c.DumpMaxFiles = *fc.DumpMax
	}
	if fc.MinRuntime != "" {
		d, err := dur("min_runtime", fc.MinRuntime, 0)
		if err != nil {
			return err
		}
		c.MinRuntime = &d
	}
	return nil
}

// applyDefaults fills what the file left unset and checks every value;
// filename goes into the errors.
func (c *Config) applyDefaults(filename string) error {
	bad := func(key, v string, why string) error {
		return &ConfigError{File: filename, Key: key, Value: v, Err: ErrInvalid, Why: why}
	}
	if c.QuotaFile == "" && c.Consul == nil {
		return &ConfigError{File: filename, Err: ErrInvalid, Why: "quota_file is required without a consul block"}
	}
	if c.Consul != nil {
		if err := checkConsul(c.Consul, filename); err != nil {
			return err
		}
	}
	addrKey := "nomad.address"
	if c.Nomad.Address == "" {
		c.Nomad.Address = os.Getenv("NOMAD_ADDR")
		addrKey = "NOMAD_ADDR"
	}
	if c.Nomad.Address == "" {
		c.Nomad.Address = DefaultNomadAddr
	}
	if why := checkAddress(c.Nomad.Address); why != "" {
		return bad(addrKey, redact.Address(c.Nomad.Address), why)
	}
	if c.Nomad.Token == "" {
		c.Nomad.Token = os.Getenv("NOMAD_TOKEN")
	}
	if c.Nomad.Region == "" {
		c.Nomad.Region = os.Getenv("NOMAD_REGION")
	}
	if c.AdminToken == "" {
		c.AdminToken = adminTokenFromEnv()
	}
	if c.HoldingPool == "" {
		c.HoldingPool = DefaultPool
	}
	if reservedPools[c.HoldingPool] {
		return bad("holding_pool", c.HoldingPool, "is one of Nomad's built-in pools, which hold nodes; the holding pool must have none")
	}
	if !poolName.MatchString(c.HoldingPool) {
		return bad("holding_pool", c.HoldingPool, "not a Nomad node pool name (1 to 128 letters, digits, '-' or '_')")
	}
	if err := c.checkAdmitPools(filename); err != nil {
		return err
	}
	if c.HTTPBind == "" {
		c.HTTPBind = DefaultHTTPBind
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return bad("tls", fmt.Sprintf("cert_file = %q, key_file = %q", c.TLSCertFile, c.TLSKeyFile), "give both")
	}
	_, port, err := net.SplitHostPort(c.HTTPBind)
	if err != nil {
		return bad("http_bind", c.HTTPBind, err.Error())
	}
	// A numeric port must fit 16 bits (was found only at listen, after
	// start-up, without the key); a service name is left to the listener.
	if isDigits(port) {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return bad("http_bind", c.HTTPBind, fmt.Sprintf("port %s is out of range: want 0 to 65535", port))
		}
	}
	if err := brokerapi.CheckListen(c.HTTPBind, c.TLSCertFile != ""); err != nil {
		return bad("http_bind", c.HTTPBind, "must be a loopback address, or listening beyond loopback needs tls { cert_file key_file }")
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if hclog.LevelFromString(c.LogLevel) == hclog.NoLevel {
		return bad("log_level", c.LogLevel, "want trace, debug, info, warn, error or off")
	}
	for _, ns := range c.Namespaces {
		if ns == "" {
			return bad("namespaces", ns, "empty namespace name")
		}
	}
	return nil
}

// checkAdmitPools defaults admit_pools to ["default"] and checks each
// name: a Nomad pool name, not the holding pool (jobs wait there; they are
// never admitted into it). An empty list is refused: it would admit
// nothing.
func (c *Config) checkAdmitPools(filename string) error {
	if c.AdmitPools == nil {
		c.AdmitPools = []string{jobmeta.DefaultAdmitPool}
		return nil
	}
	bad := func(v, why string) error {
		return &ConfigError{File: filename, Key: "admit_pools", Value: v, Err: ErrInvalid, Why: why}
	}
	if len(c.AdmitPools) == 0 {
		return bad("[]", "empty: no job could be admitted; leave it unset for [\"default\"]")
	}
	for _, p := range c.AdmitPools {
		switch {
		case !poolName.MatchString(p):
			return bad(p, "not a Nomad node pool name (1 to 128 letters, digits, '-' or '_')")
		case p == c.HoldingPool:
			return bad(p, "is the holding pool, where jobs wait; a job is never admitted into it")
		}
	}
	return nil
}

// checkAddress says what is wrong with a Nomad address, or "": it must be
// an absolute http or https URL with a host.
func checkAddress(addr string) string {
	u, err := url.Parse(addr)
	if err != nil {
		return "not a URL; want an http or https URL such as " + DefaultNomadAddr
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "want an http or https URL such as " + DefaultNomadAddr
	}
	if u.Hostname() == "" {
		return "the URL has no host"
	}
	return ""
}

// CheckNamespaces checks that every namespace the configuration lists is
// bound in the quota tree (bound: the tree's namespace set, from
// quota.Namespaces); file names the quota file in the error.
func (c *Config) CheckNamespaces(bound map[string]string, quotaFile string) error {
	for _, ns := range c.Namespaces {
		if _, ok := bound[ns]; !ok {
			return &ConfigError{File: quotaFile, Key: "namespaces", Value: ns, Err: ErrNotGoverned,
				Why: "listed in the agent configuration's namespaces but bound to no quota in this tree"}
		}
	}
	return nil
}

// checkConsul checks the consul block: the address is host:port or an
// http, https or unix URL; the prefix ends with "/" and does not start with
// one (default store.DefaultPrefix). Empty address and token are left for
// the Consul client, which reads CONSUL_HTTP_ADDR and CONSUL_HTTP_TOKEN.
func checkConsul(c *store.ConsulConfig, filename string) error {
	bad := func(key, v, why string) error {
		return &ConfigError{File: filename, Key: key, Value: v, Err: ErrInvalid, Why: why}
	}
	if c.Address != "" {
		if strings.Contains(c.Address, "://") {
			u, err := url.Parse(c.Address)
			switch {
			case err != nil:
				return bad("consul.address", redact.Address(c.Address), "not a URL")
			case u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "unix":
				return bad("consul.address", redact.Address(c.Address), "want host:port or an http, https or unix URL")
			case u.Scheme != "unix" && u.Hostname() == "":
				return bad("consul.address", redact.Address(c.Address), "the URL has no host")
			}
		} else if _, port, err := net.SplitHostPort(c.Address); err != nil || port == "" {
			return bad("consul.address", c.Address, "want host:port such as 127.0.0.1:8500, or an http or https URL")
		}
	}
	if c.Prefix == "" {
		c.Prefix = store.DefaultPrefix
	}
	if !strings.HasSuffix(c.Prefix, "/") || strings.HasPrefix(c.Prefix, "/") || strings.Contains(c.Prefix, "//") {
		return bad("consul.prefix", c.Prefix, `must end with "/", not start with one, and have no empty segment`)
	}
	return nil
}

// isDigits reports whether s is one or more ASCII digits.
func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}
