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
	closed := l.Addr().String()
	l.Close()
	withUser := func(base string) string { return strings.Replace(base, "http://", "http://admin:"+secret+"@", 1) }
	tokenOnly := func(base string) string { return strings.Replace(base, "http://", "http://"+secret+"@", 1) }
	dir := t.TempDir()
	hcl := filepath.Join(dir, "job.nomad.hcl")
	if err := os.WriteFile(hcl, []byte("job \"x\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n    }\n  }\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOMAD_TOKEN", "adm")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"GPUTIDE_ADDR 403", map[string]string{"GPUTIDE_ADDR": withUser(forbid.URL)}, []string{"quota", "status"}},
		{"GPUTIDE_ADDR token 403", map[string]string{"GPUTIDE_ADDR": tokenOnly(forbid.URL)}, []string{"queue"}},
		{"GPUTIDE_ADDR unreachable", map[string]string{"GPUTIDE_ADDR": withUser("http://" + closed)}, []string{"quota", "status"}},
		{"GPUTIDE_ADDR token unreachable", map[string]string{"GPUTIDE_ADDR": tokenOnly("http://" + closed)}, []string{"reservation", "list"}},
		{"-address 403 write", nil, []string{"quota", "move", "-address", withUser(forbid.URL), "-from", "a", "-to", "b", "-gpus", "1"}},
		{"-address bad URL", nil, []string{"queue", "-address", "ftp://admin:" + secret + "@x"}},
		{"job plan NOMAD_ADDR 403", map[string]string{"NOMAD_ADDR": withUser(forbid.URL), "GPUTIDE_ADDR": "http://" + closed}, []string{"job", "plan", hcl}},
		{"job plan NOMAD_ADDR token unreachable", map[string]string{"NOMAD_ADDR": tokenOnly("http://" + closed), "GPUTIDE_ADDR": "http://" + closed}, []string{"job", "plan", hcl}},
		{"schedule preview NOMAD_ADDR 403", map[string]string{"NOMAD_ADDR": withUser(forbid.URL)}, []string{"schedule", "preview", "-policy", hcl}},
		{"schedule preview NOMAD_ADDR token unreachable", map[string]string{"NOMAD_ADDR": tokenOnly("http://" + closed)}, []string{"schedule", "preview", "-policy", hcl}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GPUTIDE_ADDR", "")
			t.Setenv("NOMAD_ADDR", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			code, out, errOut := run(t, "", tc.args...)
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
