package agent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/gputide/gputide/quota-broker/store"
)

func TestParseConfigAppliesDefaults(t *testing.T) {
	t.Setenv("NOMAD_ADDR", "")
	t.Setenv("NOMAD_TOKEN", "secret-from-env")
	t.Setenv("NOMAD_REGION", "")
	c, err := ParseConfig([]byte(`quota_file = "quota.hcl"`), "/etc/gputide/broker.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if c.QuotaFile != "/etc/gputide/quota.hcl" || c.Nomad.Address != DefaultNomadAddr || c.Nomad.Token != "secret-from-env" ||
		c.Interval != 30*time.Second || c.Staleness != 15*time.Second || c.HTTPBind != DefaultHTTPBind ||
		c.HoldingPool != "gputide-queue" || c.MinRuntime != nil || c.LogLevel != "info" {
		t.Fatalf("config = %+v", c)
	}
}

func TestParseConfigReadsEveryKey(t *testing.T) {
	src := `
nomad {
  address = "http://10.0.0.1:4646"
  token   = "t"
  region  = "eu"
}
quota_file   = "/q.hcl"
namespaces   = ["workspace-a"]
holding_pool = "hold"
interval     = "5s"
min_runtime  = "10m"
staleness    = "4s"
http_bind    = "[::1]:9000"
log_level    = "debug"
dump_dir     = "dump"
dump_max_files = 20
`
	c, err := ParseConfig([]byte(src), "/x/broker.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if c.Nomad.Address != "http://10.0.0.1:4646" || c.Nomad.Token != "t" || c.Nomad.Region != "eu" || c.QuotaFile != "/q.hcl" ||
		len(c.Namespaces) != 1 || c.HoldingPool != "hold" || c.Interval != 5*time.Second || *c.MinRuntime != 10*time.Minute ||
		c.Staleness != 4*time.Second || c.HTTPBind != "[::1]:9000" || c.LogLevel != "debug" || c.DumpDir != "/x/dump" || c.DumpMaxFiles != 20 {
		t.Fatalf("config = %+v", c)
	}
}

// Each bad value is a *ConfigError naming the file, the key and the value
// (issue 8, item 5): durations under the 1s floor (staleness = "1ns"
// panicked NewTicker; interval = "1ns" and staleness = "3ns" spun a core),
// addresses that are not http(s) with a host, unknown log levels, holding
// pools that are built in or not pool names.
func TestParseConfigRejectsBadValues(t *testing.T) {
	t.Setenv("NOMAD_ADDR", "")
	cases := map[string]struct {
		src  string
		want *ConfigError // File is always "broker.hcl"
		msg  string
	}{
		"negative dump_max_files": {`dump_max_files = -1`, &ConfigError{Key: "dump_max_files", Value: "-1", Err: ErrInvalid}, `broker.hcl: dump_max_files = "-1": want a count of files, 0 or more (0: never prune)`},
		"bad interval":            {`interval = "soon"`, &ConfigError{Key: "interval", Value: "soon", Err: ErrInvalid}, `broker.hcl: interval = "soon": want a non-negative duration such as "30s"`},
		"zero staleness":          {`staleness = "0s"`, &ConfigError{Key: "staleness", Value: "0s", Err: ErrTooShort}, `broker.hcl: staleness = "0s": must be at least 1s`},
		"1ns staleness":           {`staleness = "1ns"`, &ConfigError{Key: "staleness", Value: "1ns", Err: ErrTooShort}, `broker.hcl: staleness = "1ns": must be at least 1s`},
		"3ns staleness":           {`staleness = "3ns"`, &ConfigError{Key: "staleness", Value: "3ns", Err: ErrTooShort}, `broker.hcl: staleness = "3ns": must be at least 1s`},
		"1ns interval":            {`interval = "1ns"`, &ConfigError{Key: "interval", Value: "1ns", Err: ErrTooShort}, `broker.hcl: interval = "1ns": must be at least 1s`},
		"999ms interval":          {`interval = "999ms"`, &ConfigError{Key: "interval", Value: "999ms", Err: ErrTooShort}, `broker.hcl: interval = "999ms": must be at least 1s`},
		"negative min_runtime":    {`min_runtime = "-1m"`, &ConfigError{Key: "min_runtime", Value: "-1m", Err: ErrInvalid}, `broker.hcl: min_runtime = "-1m": want a non-negative duration such as "30s"`},
		"public bind":             {`http_bind = "0.0.0.0:4780"`, &ConfigError{Key: "http_bind", Value: "0.0.0.0:4780", Err: ErrInvalid}, `broker.hcl: http_bind = "0.0.0.0:4780": must be a loopback address, or listening beyond loopback needs tls { cert_file key_file }`},
		"port out of range":       {`http_bind = "127.0.0.1:99999"`, &ConfigError{Key: "http_bind", Value: "127.0.0.1:99999", Err: ErrInvalid}, `broker.hcl: http_bind = "127.0.0.1:99999": port 99999 is out of range: want 0 to 65535`},
		"half tls":                {"tls {\ncert_file = \"c\"\nkey_file = \"\"\n}", &ConfigError{Key: "tls", Value: `cert_file = "c", key_file = ""`, Err: ErrInvalid}, `broker.hcl: tls = "cert_file = \"c\", key_file = \"\"": give both`},
		"unix address":            {`nomad { address = "unix:///var/run/nomad.sock" }`, &ConfigError{Key: "nomad.address", Value: "unix:///var/run/nomad.sock", Err: ErrInvalid}, `broker.hcl: nomad.address = "unix:///var/run/nomad.sock": want an http or https URL such as http://127.0.0.1:4646`},
		"address without host":    {`nomad { address = "http://:4646" }`, &ConfigError{Key: "nomad.address", Value: "http://:4646", Err: ErrInvalid}, `broker.hcl: nomad.address = "http://:4646": the URL has no host`},
		"bare host":               {`nomad { address = "nomad.example:4646" }`, &ConfigError{Key: "nomad.address", Value: "nomad.example:4646", Err: ErrInvalid}, `broker.hcl: nomad.address = "nomad.example:4646": want an http or https URL such as http://127.0.0.1:4646`},
		"address with secret":     {`nomad { address = "ftp://user:secret@h" }`, &ConfigError{Key: "nomad.address", Value: "ftp://redacted@h", Err: ErrInvalid}, `broker.hcl: nomad.address = "ftp://redacted@h": want an http or https URL such as http://127.0.0.1:4646`},
		"scheme-less secret":      {`nomad { address = "user:pw@10.0.0.1:4646" }`, &ConfigError{Key: "nomad.address", Value: "redacted@10.0.0.1:4646", Err: ErrInvalid}, `broker.hcl: nomad.address = "redacted@10.0.0.1:4646": want an http or https URL such as http://127.0.0.1:4646`},
		"unknown log level":       {`log_level = "verbose"`, &ConfigError{Key: "log_level", Value: "verbose", Err: ErrInvalid}, `broker.hcl: log_level = "verbose": want trace, debug, info, warn, error or off`},
		"default pool":            {`holding_pool = "default"`, &ConfigError{Key: "holding_pool", Value: "default", Err: ErrInvalid}, `broker.hcl: holding_pool = "default": is one of Nomad's built-in pools, which hold nodes; the holding pool must have none`},
		"all pool":                {`holding_pool = "all"`, &ConfigError{Key: "holding_pool", Value: "all", Err: ErrInvalid}, `broker.hcl: holding_pool = "all": is one of Nomad's built-in pools, which hold nodes; the holding pool must have none`},
		"pool with a space":       {`holding_pool = "my pool"`, &ConfigError{Key: "holding_pool", Value: "my pool", Err: ErrInvalid}, `broker.hcl: holding_pool = "my pool": not a Nomad node pool name (1 to 128 letters, digits, '-' or '_')`},
		"pool too long":           {`holding_pool = "` + strings.Repeat("p", 129) + `"`, &ConfigError{Key: "holding_pool", Value: strings.Repeat("p", 129), Err: ErrInvalid}, ""},
		"empty namespace":         {`namespaces = [""]`, &ConfigError{Key: "namespaces", Value: "", Err: ErrInvalid}, `broker.hcl: namespaces = "": empty namespace name`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig([]byte(`quota_file = "q"`+"\n"+tc.src), "broker.hcl")
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *ConfigError", err)
			}
			type fields struct {
				File, Key, Value string
				Err              error
			}
			want := fields{"broker.hcl", tc.want.Key, tc.want.Value, tc.want.Err}
			got := fields{ce.File, ce.Key, ce.Value, ce.Err}
			if diff := cmp.Diff(want, got, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if tc.msg != "" && err.Error() != tc.msg {
				t.Errorf("message = %q, want %q", err.Error(), tc.msg)
			}
			if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "pw@") {
				t.Errorf("message %q shows the address's secret", err.Error())
			}
		})
	}
}

func TestParseConfigRejectsABadNomadAddrFromTheEnvironment(t *testing.T) {
	t.Setenv("NOMAD_ADDR", "127.0.0.1:4646")
	_, err := ParseConfig([]byte(`quota_file = "q"`), "broker.hcl")
	want := `broker.hcl: NOMAD_ADDR = "127.0.0.1:4646": not a URL; want an http or https URL such as http://127.0.0.1:4646`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
}

func TestParseConfigAcceptsTheFloor(t *testing.T) {
	c, err := ParseConfig([]byte(`quota_file = "q"`+"\n"+`interval = "1s"`+"\n"+`staleness = "1s"`+"\n"+`log_level = "TRACE"`), "broker.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if c.Interval != time.Second || c.Staleness != time.Second {
		t.Fatalf("interval %s, staleness %s, want 1s each", c.Interval, c.Staleness)
	}
}

func TestParseConfigRejectsUnknownKeysAndAMissingQuotaFile(t *testing.T) {
	cases := map[string]struct{ src, want string }{
		"missing quota file": {``, `quota_file is required without a consul block`},
		"unknown key":        {`quota_file = "q"` + "\n" + `colour = "blue"`, "Unsupported argument"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.src), "broker.hcl")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "broker.hcl") {
				t.Fatalf("err = %v, want it to name broker.hcl and contain %q", err, tc.want)
			}
		})
	}
}

// LoadConfig reads regular files of at most MaxConfigBytes: /dev/zero,
// a FIFO (which would block) or a directory are refused unread, naming
// the file.
func TestLoadConfigReadsRegularFilesOnlyWithinTheCap(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.hcl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.hcl")
	pad := "# " + strings.Repeat("x", MaxConfigBytes) + "\n"
	if err := os.WriteFile(big, []byte(`quota_file = "q"`+"\n"+pad), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		path string
		want error
		msg  string
	}{
		"/dev/zero": {"/dev/zero", ErrNotRegular, "/dev/zero: not a regular file (Dcrw-rw-rw-)"},
		"fifo":      {fifo, ErrNotRegular, fifo + ": not a regular file (p---------)"},
		"directory": {dir, ErrNotRegular, dir + ": not a regular file (d---------)"},
		"over cap":  {big, ErrTooLarge, big + ": larger than the 1048576-byte cap of a configuration file"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, err := LoadConfig(tc.path); done <- err }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("LoadConfig blocked")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.path+": ") {
				t.Errorf("message %q does not start with the file's name", err)
			}
			if name != "/dev/zero" && err.Error() != tc.msg {
				t.Errorf("message = %q, want %q", err, tc.msg)
			}
		})
	}
}

func TestParseConfigReadsTheConsulBlock(t *testing.T) {
	src := `consul {
  address = "127.0.0.1:8500"
  token   = "secret"
}
history_retention = "720h"
`
	c, err := ParseConfig([]byte(src), "/etc/gputide/broker.hcl")
	if err != nil {
		t.Fatal(err)
	}
	want := &store.ConsulConfig{Address: "127.0.0.1:8500", Token: "secret", Prefix: "gputide/"}
	if diff := cmp.Diff(want, c.Consul); diff != "" {
		t.Errorf("consul (-want +got):\n%s", diff)
	}
	if c.QuotaFile != "" || c.HistoryRetention != 720*time.Hour {
		t.Errorf("quota_file %q, history_retention %s; want none (the store holds the tree) and 720h", c.QuotaFile, c.HistoryRetention)
	}
	c, err = ParseConfig([]byte(`quota_file = "q"`), "broker.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if c.Consul != nil || c.HistoryRetention != store.DefaultHistoryRetention {
		t.Errorf("without a consul block: consul %+v, history_retention %s", c.Consul, c.HistoryRetention)
	}
}

func TestParseConfigRejectsBadConsulValues(t *testing.T) {
	cases := map[string]struct{ src, want string }{
		"prefix without slash": {`consul { prefix = "gputide" }`, `broker.hcl: consul.prefix = "gputide": must end with "/"`},
		"prefix from root":     {`consul { prefix = "/gputide/" }`, `consul.prefix = "/gputide/"`},
		"address scheme":       {`consul { address = "ftp://c:8500" }`, `consul.address = "ftp://c:8500": want host:port or an http, https or unix URL`},
		"address no port":      {`consul { address = "consul.service" }`, `consul.address = "consul.service": want host:port`},
		"unknown key":          {`consul { adress = "127.0.0.1:8500" }`, `Unsupported argument`},
		"retention":            {`consul {}` + "\n" + `history_retention = "90d"`, `history_retention = "90d"`},
		"zero retention":       {`consul {}` + "\n" + `history_retention = "0s"`, `history_retention = "0s": must be positive`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.src), "broker.hcl")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// DESIGN §9: a listener beyond loopback needs TLS.
func TestParseConfigPublicBindWithTLS(t *testing.T) {
	c, err := ParseConfig([]byte("quota_file = \"q\"\nhttp_bind = \"0.0.0.0:4780\"\ntls {\n  cert_file = \"b.pem\"\n  key_file = \"k.pem\"\n}\nadmin_policy = \"gputide-admin\"\nopen_reads_without_acl = true\n"), "/x/broker.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if c.TLSCertFile != "/x/b.pem" || c.TLSKeyFile != "/x/k.pem" || c.AdminPolicy != "gputide-admin" || !c.OpenReadsWithoutACL {
		t.Fatalf("config = %+v", c)
	}
}

// admit_pools (issue 10 item 4): default ["default"]; a list is kept as
// written; an empty list, a name that is no pool name, or the holding pool
// is a *ConfigError naming the key and the value.
func TestParseConfigAdmitPools(t *testing.T) {
	t.Setenv("NOMAD_ADDR", "")
	for _, tc := range []struct {
		src  string
		want []string
		msg  string
	}{
		{``, []string{"default"}, ""},
		{`admit_pools = ["gpu-a100", "default"]`, []string{"gpu-a100", "default"}, ""},
		{`admit_pools = []`, nil, `broker.hcl: admit_pools = "[]": empty: no job could be admitted; leave it unset for ["default"]`},
		{`admit_pools = ["a b"]`, nil, `broker.hcl: admit_pools = "a b": not a Nomad node pool name (1 to 128 letters, digits, '-' or '_')`},
		{`admit_pools = ["default", "gputide-queue"]`, nil, `broker.hcl: admit_pools = "gputide-queue": is the holding pool, where jobs wait; a job is never admitted into it`},
	} {
		c, err := ParseConfig([]byte(`quota_file = "q"`+"\n"+tc.src), "broker.hcl")
		if tc.msg != "" {
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != "admit_pools" || !errors.Is(err, ErrInvalid) || err.Error() != tc.msg {
				t.Errorf("%s: err = %v, want %q", tc.src, err, tc.msg)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		if diff := cmp.Diff(tc.want, c.AdmitPools); diff != "" {
			t.Errorf("%s: admit_pools (-want +got):\n%s", tc.src, diff)
		}
	}
}
