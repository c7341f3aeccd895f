package command

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The CLI never prints the userinfo of an address (issue 16): a password
// or token in GPUTIDE_ADDR, -address or NOMAD_ADDR is replaced by
// "redacted" (redact.Address, the agent's rule) in every error, a 403 or
// an unreachable server alike.
func TestCLIRedactsAddressUserinfo(t *testing.T) {
	const secret = "S3cretPW"
	forbidURL, closed, hcl := redactFixture(t)
	withUser := func(base string) string { return strings.Replace(base, "http://", "http://admin:"+secret+"@", 1) }
	tokenOnly := func(base string) string { return strings.Replace(base, "http://", "http://"+secret+"@", 1) }
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"GPUTIDE_ADDR 403", map[string]string{"GPUTIDE_ADDR": withUser(forbidURL)}, []string{"quota", "status"}},
		{"GPUTIDE_ADDR token 403", map[string]string{"GPUTIDE_ADDR": tokenOnly(forbidURL)}, []string{"queue"}},
		{"GPUTIDE_ADDR unreachable", map[string]string{"GPUTIDE_ADDR": withUser("http://" + closed)}, []string{"quota", "status"}},
		{"GPUTIDE_ADDR token unreachable", map[string]string{"GPUTIDE_ADDR": tokenOnly("http://" + closed)}, []string{"reservation", "list"}},
		{"-address 403 write", nil, []string{"quota", "move", "-address", withUser(forbidURL), "-from", "a", "-to", "b", "-gpus", "1"}},
		{"-address bad URL", nil, []string{"queue", "-address", "ftp://admin:" + secret + "@x"}},
		{"job plan NOMAD_ADDR 403", map[string]string{"NOMAD_ADDR": withUser(forbidURL), "GPUTIDE_ADDR": "http://" + closed}, []string{"job", "plan", hcl}},
		{"job plan NOMAD_ADDR token unreachable", map[string]string{"NOMAD_ADDR": tokenOnly("http://" + closed), "GPUTIDE_ADDR": "http://" + closed}, []string{"job", "plan", hcl}},
		{"schedule preview NOMAD_ADDR 403", map[string]string{"NOMAD_ADDR": withUser(forbidURL)}, []string{"schedule", "preview", "-policy", hcl}},
		{"schedule preview NOMAD_ADDR token unreachable", map[string]string{"NOMAD_ADDR": tokenOnly("http://" + closed)}, []string{"schedule", "preview", "-policy", hcl}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runWithAddresses(t, tc.env, tc.args...)
			if code != 1 {
				t.Errorf("exit %d, want 1; stderr:\n%s", code, errOut)
			}
			if strings.Contains(out+errOut, secret) {
				t.Errorf("the secret is printed:\n%s%s", out, errOut)
			}
			if !strings.Contains(errOut, "redacted@") && tc.name != "-address bad URL" {
				t.Errorf("no redacted address in:\n%s", errOut)
			}
		})
	}
}

// redactFixture serves the address-redaction tests: a server that answers
// every request 403, the host:port of a closed loopback port, and a small
// job file; NOMAD_TOKEN is set for the test.
func redactFixture(t *testing.T) (forbidURL, closed, jobFile string) {
	t.Helper()
	forbid := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"error":"Permission denied"}`))
	}))
	t.Cleanup(forbid.Close)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed = l.Addr().String()
	l.Close()
	jobFile = filepath.Join(t.TempDir(), "job.nomad.hcl")
	if err := os.WriteFile(jobFile, []byte("job \"x\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n    }\n  }\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOMAD_TOKEN", "adm")
	return forbid.URL, closed, jobFile
}

// runWithAddresses runs the CLI with GPUTIDE_ADDR and NOMAD_ADDR cleared,
// then env set.
func runWithAddresses(t *testing.T, env map[string]string, args ...string) (code int, out, errOut string) {
	t.Helper()
	t.Setenv("GPUTIDE_ADDR", "")
	t.Setenv("NOMAD_ADDR", "")
	for k, v := range env {
		t.Setenv(k, v)
	}
	return run(t, "", args...)
}
