package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each bad agent configuration exits 1 at once with an error naming the
// file, the key and the value (issue 8, item 5); none starts the agent.
func TestAgentRefusesBadConfiguration(t *testing.T) {
	t.Setenv("NOMAD_ADDR", "")
	dir := t.TempDir()
	quota := filepath.Join(dir, "quota.hcl")
	if err := os.WriteFile(quota, []byte(`quota "Q" {
  gpus       = 8
  namespaces = ["team-a"]
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("quota_file = \"quota.hcl\"\nhttp_bind = \"127.0.0.1:0\"\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := map[string]struct {
		path string
		want string
	}{
		"staleness 1ns":  {write("s1.hcl", `staleness = "1ns"`), `s1.hcl: staleness = "1ns": must be at least 1s`},
		"staleness 3ns":  {write("s3.hcl", `staleness = "3ns"`), `s3.hcl: staleness = "3ns": must be at least 1s`},
		"interval 1ns":   {write("i1.hcl", `interval = "1ns"`), `i1.hcl: interval = "1ns": must be at least 1s`},
		"/dev/zero":      {"/dev/zero", `/dev/zero: not a regular file`},
		"unix address":   {write("a.hcl", `nomad { address = "unix:///run/nomad.sock" }`), `a.hcl: nomad.address = "unix:///run/nomad.sock": want an http or https URL`},
		"no host":        {write("h.hcl", `nomad { address = "https://user:pw@" }`), `h.hcl: nomad.address = "https://redacted@": the URL has no host`},
		"log level":      {write("l.hcl", `log_level = "loud"`), `l.hcl: log_level = "loud": want trace, debug, info, warn, error or off`},
		"default pool":   {write("p.hcl", `holding_pool = "default"`), `p.hcl: holding_pool = "default": is one of Nomad's built-in pools`},
		"bad pool name":  {write("q.hcl", `holding_pool = "queue/1"`), `q.hcl: holding_pool = "queue/1": not a Nomad node pool name`},
		"unbound ns":     {write("n.hcl", `namespaces = ["team-b"]`), `quota.hcl: namespaces = "team-b": listed in the agent configuration's namespaces but bound to no quota`},
		"missing config": {filepath.Join(dir, "none.hcl"), `none.hcl: no such file or directory`},
	}
	zero := filepath.Join(dir, "z.hcl")
	if err := os.WriteFile(zero, []byte(`quota_file = "/dev/zero"`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases["quota file /dev/zero"] = struct {
		path string
		want string
	}{zero, `/dev/zero: quota file: not a regular file`}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := run(t, "", "agent", "-config", tc.path)
			if code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tc.want)
			}
			if strings.Contains(errOut, "pw@") || out != "" {
				t.Errorf("stdout %q, stderr %q", out, errOut)
			}
		})
	}
}
