// Package agent is the quota broker daemon, "gputide agent": it watches a
// Nomad cluster through package nomad, plans with package plan on every
// change and at least every interval, and carries the plans out (DESIGN
// §4, §5). It serves its reads (health, last plan, last snapshot,
// preemptions, Prometheus metrics) on a loopback HTTP address.
package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	brokerapi "github.com/gputide/gputide/quota-broker/api"
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
)

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
//	interval     = "30s"                 # plan at least this often
//	min_runtime  = "10m"                 # overrides the tree's settings when set
//	staleness    = "15s"                 # L12: never act on state older than this
//	http_bind    = "127.0.0.1:4780"      # the API; beyond loopback only with tls
//	tls {                                # serve the API over TLS (DESIGN §9)
//	  cert_file = "broker.pem"
//	  key_file  = "broker-key.pem"
//	}
//	log_level    = "info"
//	dump_dir     = ""                    # write each snapshot and plan here (for gputide plan)
//	admin_policy = "gputide-admin"       # Nomad policy whose holders are broker admins (DESIGN §9)
//	admin_token  = ""                    # the broker's admin token, only while Nomad ACLs are off; default GPUTIDE_ADMIN_TOKEN
//	open_reads_without_acl = false       # with Nomad ACLs off, serve reads without the admin token
//
// Relative paths are relative to the configuration file.
type Config struct {
	Nomad       NomadConfig
	QuotaFile   string
	Namespaces  []string
	HoldingPool string
	Interval    time.Duration
	MinRuntime  *time.Duration
	Staleness   time.Duration
	HTTPBind    string
	LogLevel    string
	DumpDir     string
	// AdminPolicy, AdminToken (never logged) and OpenReadsWithoutACL are
	// the API's token settings (DESIGN §9, docs/acl.md).
	AdminPolicy         string
	AdminToken          string
	OpenReadsWithoutACL bool
	// TLSCertFile and TLSKeyFile serve the API over TLS; both or neither.
	TLSCertFile string
	TLSKeyFile  string
}

// NomadConfig is how the agent reaches Nomad.
type NomadConfig struct {
	Address string
	Token   string // never logged
	Region  string
}

type fileConfig struct {
	Nomad       *fileNomad `hcl:"nomad,block"`
	QuotaFile   string     `hcl:"quota_file"`
	Namespaces  []string   `hcl:"namespaces,optional"`
	HoldingPool string     `hcl:"holding_pool,optional"`
	Interval    string     `hcl:"interval,optional"`
	MinRuntime  string     `hcl:"min_runtime,optional"`
	Staleness   string     `hcl:"staleness,optional"`
	HTTPBind    string     `hcl:"http_bind,optional"`
	LogLevel    string     `hcl:"log_level,optional"`
	DumpDir     string     `hcl:"dump_dir,optional"`
	AdminPolicy string     `hcl:"admin_policy,optional"`
	AdminToken  string     `hcl:"admin_token,optional"`
	OpenReads   bool       `hcl:"open_reads_without_acl,optional"`
	TLS         *fileTLS   `hcl:"tls,block"`
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
// leaves them unset). Errors name the file position or the key and value.
func LoadConfig(path string) (*Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(src, path)
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
	c := &Config{QuotaFile: fc.QuotaFile, Namespaces: fc.Namespaces, HoldingPool: fc.HoldingPool,
		HTTPBind: fc.HTTPBind, LogLevel: fc.LogLevel, DumpDir: fc.DumpDir,
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
	dur := func(key, v string, def time.Duration) (time.Duration, error) {
		if v == "" {
			return def, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("%s: %s = %q: want a non-negative duration such as \"30s\"", filename, key, v)
		}
		return d, nil
	}
	var err error
	if c.Interval, err = dur("interval", fc.Interval, DefaultInterval); err != nil {
		return nil, err
	}
	if c.Interval == 0 {
		return nil, fmt.Errorf("%s: interval = %q: must be positive", filename, fc.Interval)
	}
	if c.Staleness, err = dur("staleness", fc.Staleness, DefaultStaleness); err != nil {
		return nil, err
	}
	if c.Staleness == 0 {
		return nil, fmt.Errorf("%s: staleness = %q: must be positive", filename, fc.Staleness)
	}
	if fc.MinRuntime != "" {
		d, err := dur("min_runtime", fc.MinRuntime, 0)
		if err != nil {
			return nil, err
		}
		c.MinRuntime = &d
	}
	if err := c.applyDefaults(); err != nil {
		return nil, fmt.Errorf("%s: %w", filename, err)
	}
	return c, nil
}

func (c *Config) applyDefaults() error {
	if c.QuotaFile == "" {
		return fmt.Errorf("quota_file is required")
	}
	if c.Nomad.Address == "" {
		c.Nomad.Address = os.Getenv("NOMAD_ADDR")
	}
	if c.Nomad.Address == "" {
		c.Nomad.Address = DefaultNomadAddr
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
		c.HoldingPool = "gputide-queue"
	}
	if c.HTTPBind == "" {
		c.HTTPBind = DefaultHTTPBind
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return fmt.Errorf("tls: cert_file = %q, key_file = %q: give both", c.TLSCertFile, c.TLSKeyFile)
	}
	if err := brokerapi.CheckListen(c.HTTPBind, c.TLSCertFile != ""); err != nil {
		return err
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	return nil
}
