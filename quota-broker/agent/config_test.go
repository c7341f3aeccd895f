package agent

import (
	"strings"
	"testing"
	"time"
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
`
	c, err := ParseConfig([]byte(src), "/x/broker.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if c.Nomad.Address != "http://10.0.0.1:4646" || c.Nomad.Token != "t" || c.Nomad.Region != "eu" || c.QuotaFile != "/q.hcl" ||
		len(c.Namespaces) != 1 || c.HoldingPool != "hold" || c.Interval != 5*time.Second || *c.MinRuntime != 10*time.Minute ||
		c.Staleness != 4*time.Second || c.HTTPBind != "[::1]:9000" || c.LogLevel != "debug" || c.DumpDir != "/x/dump" {
		t.Fatalf("config = %+v", c)
	}
}

func TestParseConfigRejectsBadValues(t *testing.T) {
	cases := map[string]struct{ src, want string }{
		"missing quota file":   {``, `The argument "quota_file" is required`},
		"bad interval":         {`quota_file = "q"` + "\n" + `interval = "soon"`, `interval = "soon": want a non-negative duration`},
		"zero staleness":       {`quota_file = "q"` + "\n" + `staleness = "0s"`, `staleness = "0s": must be positive`},
		"negative min_runtime": {`quota_file = "q"` + "\n" + `min_runtime = "-1m"`, `min_runtime = "-1m"`},
		"public bind":          {`quota_file = "q"` + "\n" + `http_bind = "0.0.0.0:4780"`, "must be a loopback address"},
		"half tls":             {`quota_file = "q"` + "\n" + `tls {` + "\n" + `cert_file = "c"` + "\n" + `key_file = ""` + "\n}", "give both"},
		"unknown key":          {`quota_file = "q"` + "\n" + `colour = "blue"`, "Unsupported argument"},
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
