package acl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"
)

// The rules table against a real Nomad with ACLs on: each case becomes
// real policies, roles and a token; Nomad's answers (GET /v1/job/<id> for
// read-job, POST /v1/job/<id>/plan for submit-job) must equal both the
// table and the broker's Resolver. With GPUTIDE_ACL_RECORD=1 the Nomad
// answers the Resolver read are written to testdata/<version>/recorded.json
// (secrets replaced by fixed fakes) for replay_test.go.
//
// Needs NOMAD_BIN (CI sets it from ../shared/nomad/nomad-bin); without it
// the test skips, and fails under CI.

func nomadBin(t *testing.T) string {
	t.Helper()
	p := os.Getenv("NOMAD_BIN")
	if p == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but NOMAD_BIN is not: the ACL conformance test needs a real Nomad (NOMAD_BIN=$(../shared/nomad/nomad-bin))")
		}
		t.Skip("no NOMAD_BIN: set NOMAD_BIN=$(../shared/nomad/nomad-bin) to run the ACL conformance test against a real Nomad")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("NOMAD_BIN=%s: %v", p, err)
	}
	return p
}

// devAgent is a Nomad dev agent (server only) on loopback.
type devAgent struct {
	addr string
	cmd  *exec.Cmd
	log  bytes.Buffer
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startAgent starts `nomad agent -dev` on 127.0.0.1 with extra config,
// AWS_CA_BUNDLE removed from its environment, and waits for a leader.
func startAgent(t *testing.T, bin, extra string) *devAgent {
	t.Helper()
	dir := t.TempDir()
	h, r, s := freePort(t), freePort(t), freePort(t)
	cfg := fmt.Sprintf("data_dir = %q\nports {\n  http = %d\n  rpc = %d\n  serf = %d\n}\nclient { enabled = false }\n%s\n",
		filepath.Join(dir, "data"), h, r, s, extra)
	if err := os.WriteFile(filepath.Join(dir, "agent.hcl"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a := &devAgent{addr: fmt.Sprintf("http://127.0.0.1:%d", h)}
	a.cmd = exec.Command(bin, "agent", "-dev", "-bind", "127.0.0.1", "-config", filepath.Join(dir, "agent.hcl"))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_CA_BUNDLE=") && !strings.HasPrefix(kv, "NOMAD_") {
			a.cmd.Env = append(a.cmd.Env, kv)
		}
	}
	a.cmd.Stdout, a.cmd.Stderr = &a.log, &a.log
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = a.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = a.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = a.cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(a.addr + "/v1/status/leader")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && len(bytes.Trim(b, "\"\n ")) > 0 {
				return a
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("nomad agent not ready: %v\n%s", err, a.log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// recorder captures the raw answers of token/self, policies and roles.
type recorder struct {
	next http.RoundTripper
	rec  *recording
	fake map[string]string // real secret -> fake secret
}

// recording is testdata/<version>/recorded.json.
type recording struct {
	NomadVersion string `json:"nomad_version"`
	// TokenSelf maps a (fake) secret to token/self's answer for it.
	TokenSelf map[string]json.RawMessage `json:"token_self"`
	// ACLDisabledSelf is token/self's answer while ACLs are off.
	ACLDisabledSelf json.RawMessage `json:"acl_disabled_self"`
	// ExpiredSelf is token/self's answer for a token past its expiry.
	ExpiredSelf json.RawMessage            `json:"expired_self"`
	Policies    map[string]json.RawMessage `json:"policies"`
	Roles       map[string]json.RawMessage `json:"roles"`
	// Cases holds, per table case, the fake secret and Nomad's answers.
	Cases []recordedCase `json:"cases"`
}

type recordedCase struct {
	Name   string `json:"name"`
	Secret string `json:"secret"`
	// Nomad maps namespace -> "r"/"s"/"rs" as Nomad itself answered.
	Nomad map[string]string `json:"nomad"`
	// CheckedAt is when Nomad was asked (after expiry for the expired case).
	CheckedAt time.Time `json:"checked_at"`
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	secret := req.Header.Get("X-Nomad-Token")
	stored := body
	for real, fake := range r.fake {
		stored = bytes.ReplaceAll(stored, []byte(real), []byte(fake))
	}
	var compact bytes.Buffer
	if json.Compact(&compact, stored) == nil {
		stored = compact.Bytes()
	}
	p := req.URL.Path
	switch {
	case p == "/v1/acl/token/self":
		// Nomad's hash of the secret is dropped from the recording.
		var m map[string]json.RawMessage
		if json.Unmarshal(stored, &m) == nil {
			delete(m, "Hash")
			stored, _ = json.Marshal(m)
		}
		r.rec.TokenSelf[r.fake[secret]] = stored
	case strings.HasPrefix(p, "/v1/acl/policy/"):
		r.rec.Policies[strings.TrimPrefix(p, "/v1/acl/policy/")] = stored
	case strings.HasPrefix(p, "/v1/acl/role/"):
		r.rec.Roles[strings.TrimPrefix(p, "/v1/acl/role/")] = stored
	}
	return resp, nil
}

func TestConformanceWithNomad(t *testing.T) {
	bin := nomadBin(t)
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	version := strings.Fields(string(out))[1] // "Nomad v1.11.3"
	rec := &recording{NomadVersion: strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]),
		TokenSelf: map[string]json.RawMessage{}, Policies: map[string]json.RawMessage{}, Roles: map[string]json.RawMessage{}}

	// ACLs off: token/self's exact answer, and the Resolver reads it so.
	off := startAgent(t, bin, "")
	rec.ACLDisabledSelf = rawGet(t, off.addr, "/v1/acl/token/self", "00000000-0000-0000-0000-000000000001")
	resOff, err := NewResolver(Config{Address: off.addr, AdminToken: "broker-admin"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resOff.Resolve(context.Background(), "00000000-0000-0000-0000-000000000001"); !isKind(err, ErrACLDisabled) {
		t.Fatalf("ACLs off: want ErrACLDisabled, got %v", err)
	}
	if a, err := resOff.Resolve(context.Background(), "broker-admin"); err != nil || !a.IsAdmin() {
		t.Fatalf("ACLs off, admin token: want admin, got %v %v", a, err)
	}

	agent := startAgent(t, bin, "acl {\n  enabled = true\n  token_min_expiration_ttl = \"1s\"\n}\n")
	cfg := api.DefaultConfig()
	cfg.Address = agent.addr
	c, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	boot, _, err := c.ACLTokens().Bootstrap(nil)
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	c.SetSecretID(boot.SecretID)
	setupNamespacesAndJobs(t, c)
	for name, rules := range tablePolicies {
		if _, err := c.ACLPolicies().Upsert(&api.ACLPolicy{Name: name, Rules: rules}, nil); err != nil {
			t.Fatalf("policy %s: %v", name, err)
		}
	}
	// Expansions: Nomad's own RulesJSON for each disposition equals ours.
	checkExpansions(t, agent.addr, boot.SecretID)

	fake := map[string]string{}
	tr := &recorder{next: http.DefaultTransport, rec: rec, fake: fake}
	res, err := NewResolver(Config{Address: agent.addr, HTTPClient: &http.Client{Transport: tr}, AdminToken: "broker-admin"})
	if err != nil {
		t.Fatal(err)
	}
	cases := tableCases
	for i, tc := range cases {
		secret := makeToken(t, c, i, tc)
		fake[secret] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1)
		if tc.expires {
			// Resolved (and recorded) once while valid, then asked again
			// after its expiry.
			pre, _ := NewResolver(Config{Address: agent.addr, HTTPClient: &http.Client{Transport: tr}})
			if _, err := pre.Resolve(context.Background(), secret); err != nil {
				t.Fatalf("%s: before expiry: %v", tc.name, err)
			}
			time.Sleep(2500 * time.Millisecond)
			rec.ExpiredSelf = rawGet(t, agent.addr, "/v1/acl/token/self", secret)
		}
		nomadSays := nomadMatrix(t, agent.addr, secret)
		a, err := res.Resolve(context.Background(), secret)
		if tc.expires {
			if !isKind(err, ErrDenied) {
				t.Errorf("%s: want ErrDenied, got %v", tc.name, err)
			}
		} else if err != nil {
			t.Errorf("%s: resolve: %v", tc.name, err)
			continue
		}
		ours := answer(a.Allowed)
		if diff := cmp.Diff(normalize(tc.want), nomadSays); diff != "" {
			t.Errorf("%s: Nomad differs from the table (-table +nomad):\n%s", tc.name, diff)
		}
		if diff := cmp.Diff(nomadSays, ours); diff != "" {
			t.Errorf("%s: the broker differs from Nomad (-nomad +broker):\n%s", tc.name, diff)
		}
		rec.Cases = append(rec.Cases, recordedCase{Name: tc.name, Secret: fake[secret], Nomad: nomadSays, CheckedAt: time.Now().UTC()})
	}
	checkExamples(t, c, agent.addr, res)
	// The broker's admin token is refused with ACLs on.
	if _, err := res.Resolve(context.Background(), "broker-admin"); !isKind(err, ErrDenied) {
		t.Errorf("admin token with ACLs on: want ErrDenied, got %v", err)
	}
	// A token Nomad does not know (a UUID, and not even a UUID).
	for _, bad := range []string{"00000000-0000-0000-0000-00000000dead", "not-a-token"} {
		if _, err := res.Resolve(context.Background(), bad); !isKind(err, ErrDenied) {
			t.Errorf("unknown token: want ErrDenied, got %v", err)
		}
	}
	if os.Getenv("GPUTIDE_ACL_RECORD") != "" {
		dir := filepath.Join("testdata", "nomad-"+strings.TrimPrefix(version, "v"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := json.MarshalIndent(rec, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "recorded.json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %s", filepath.Join(dir, "recorded.json"))
	}
}

func isKind(err, kind error) bool {
	e, ok := err.(*Error)
	return ok && e.Kind == kind
}

func rawGet(t *testing.T, addr, path, token string) json.RawMessage {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, addr+path, nil)
	req.Header.Set("X-Nomad-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out, _ := json.Marshal(map[string]any{"status": resp.StatusCode, "body": string(b)})
	return out
}

func setupNamespacesAndJobs(t *testing.T, c *api.Client) {
	t.Helper()
	for _, ns := range tableNamespaces {
		if ns != "default" {
			if _, err := c.Namespaces().Register(&api.Namespace{Name: ns}, nil); err != nil {
				t.Fatalf("namespace %s: %v", ns, err)
			}
		}
		if _, _, err := c.Jobs().Register(probeJob(ns), nil); err != nil {
			t.Fatalf("job in %s: %v", ns, err)
		}
	}
}

func probeJob(ns string) *api.Job {
	j := api.NewBatchJob("probe", "probe", "global", 50)
	j.Namespace = &ns
	task := api.NewTask("t", "raw_exec").SetConfig("command", "/bin/true")
	j.AddTaskGroup(api.NewTaskGroup("g", 1).AddTask(task))
	return j
}

func makeToken(t *testing.T, c *api.Client, i int, tc tableCase) string {
	t.Helper()
	tok := &api.ACLToken{Name: fmt.Sprintf("case-%d", i), Type: "client", Policies: tc.policies}
	if tc.management {
		tok.Type, tok.Policies = "management", nil
	}
	for j, pols := range tc.roles {
		role := &api.ACLRole{Name: fmt.Sprintf("case-%d-role-%d", i, j)}
		for _, p := range pols {
			role.Policies = append(role.Policies, &api.ACLRolePolicyLink{Name: p})
		}
		got, _, err := c.ACLRoles().Create(role, nil)
		if err != nil {
			t.Fatalf("%s: role: %v", tc.name, err)
		}
		tok.Roles = append(tok.Roles, &api.ACLTokenRoleLink{ID: got.ID})
	}
	if tc.expires {
		tok.ExpirationTTL = 2 * time.Second
	} else {
		tok.ExpirationTTL = time.Hour
	}
	got, _, err := c.ACLTokens().Create(tok, nil)
	if err != nil {
		t.Fatalf("%s: token: %v", tc.name, err)
	}
	return got.SecretID
}

// nomadMatrix asks Nomad what secret may do in each namespace.
func nomadMatrix(t *testing.T, addr, secret string) matrix {
	t.Helper()
	return answer(func(ns string, c Capability) bool { return nomadSays(t, addr, secret, ns, c) })
}

// nomadAllowed gives Nomad's (read-job, submit-job) answers in ns.
func nomadAllowed(t *testing.T, addr, secret, ns string) [2]bool {
	return [2]bool{nomadSays(t, addr, secret, ns, CapReadJob), nomadSays(t, addr, secret, ns, CapSubmitJob)}
}

// nomadSays asks Nomad whether secret holds c (read-job or submit-job) in
// ns: 200 yes, 403 no, anything else fails the test.
func nomadSays(t *testing.T, addr, secret, ns string, c Capability) bool {
	t.Helper()
	var req *http.Request
	switch c {
	case CapReadJob:
		req, _ = http.NewRequest(http.MethodGet, addr+"/v1/job/probe?namespace="+ns, nil)
	case CapSubmitJob:
		body, _ := json.Marshal(map[string]any{"Job": probeJob(ns), "Diff": false})
		req, _ = http.NewRequest(http.MethodPost, addr+"/v1/job/probe/plan?namespace="+ns, bytes.NewReader(body))
	}
	req.Header.Set("X-Nomad-Token", secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case 200:
		return true
	case 403:
		return false
	}
	t.Fatalf("%s %s: unexpected %d %s", req.Method, req.URL.Path, resp.StatusCode, b)
	return false
}

// checkExpansions compares Nomad's RulesJSON capabilities for read, write
// and scale with Disposition.Expand.
func checkExpansions(t *testing.T, addr, mgmt string) {
	t.Helper()
	rules := "namespace \"r\" { policy = \"read\" }\nnamespace \"w\" { policy = \"write\" }\nnamespace \"s\" { policy = \"scale\" }"
	body, _ := json.Marshal(map[string]string{"Name": "expansions", "Rules": rules})
	req, _ := http.NewRequest(http.MethodPost, addr+"/v1/acl/policy/expansions", bytes.NewReader(body))
	req.Header.Set("X-Nomad-Token", mgmt)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req, _ = http.NewRequest(http.MethodGet, addr+"/v1/acl/policy/expansions", nil)
	req.Header.Set("X-Nomad-Token", mgmt)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		RulesJSON struct {
			Namespaces []struct {
				Name         string
				Capabilities []Capability
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	byName := map[string]Disposition{"r": DispositionRead, "w": DispositionWrite, "s": DispositionScale}
	for _, n := range got.RulesJSON.Namespaces {
		want, _ := byName[n.Name].Expand()
		nomad := slices.Compact(slices.Sorted(slices.Values(n.Capabilities)))
		ours := slices.Sorted(slices.Values(want))
		if diff := cmp.Diff(nomad, ours); diff != "" {
			t.Errorf("policy = %q expands differently (-nomad +broker):\n%s", byName[n.Name], diff)
		}
	}
	if len(got.RulesJSON.Namespaces) != 3 {
		t.Errorf("RulesJSON has %d namespace rules, want 3", len(got.RulesJSON.Namespaces))
	}
}

// checkExamples applies examples/reference/acl in Nomad (which must accept
// them) and compares team B's rights on workspace-b and workspace-c, as
// Nomad answers them, with the broker's.
func checkExamples(t *testing.T, c *api.Client, addr string, res *Resolver) {
	t.Helper()
	for _, name := range []string{"team-a", "team-b", "team-c", "gputide-admin"} {
		b, err := os.ReadFile(filepath.Join(examplesDir, name+".policy.hcl"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ACLPolicies().Upsert(&api.ACLPolicy{Name: name, Rules: string(b)}, nil); err != nil {
			t.Fatalf("Nomad refuses examples/reference/acl/%s.policy.hcl: %v", name, err)
		}
	}
	for _, ns := range []string{"workspace-b", "workspace-c"} {
		if _, err := c.Namespaces().Register(&api.Namespace{Name: ns}, nil); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Jobs().Register(probeJob(ns), nil); err != nil {
			t.Fatal(err)
		}
	}
	tok, _, err := c.ACLTokens().Create(&api.ACLToken{Name: "team-b", Type: "client", Policies: []string{"team-b"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := res.Resolve(context.Background(), tok.SecretID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"workspace-b", "workspace-c"} {
		nomad := nomadAllowed(t, addr, tok.SecretID, ns)
		ours := [2]bool{a.Allowed(ns, CapReadJob), a.Allowed(ns, CapSubmitJob)}
		want := [2]bool{ns == "workspace-b", ns == "workspace-b"}
		if nomad != want || ours != want {
			t.Errorf("team-b on %s: Nomad %v, broker %v, want %v (read-job, submit-job)", ns, nomad, ours, want)
		}
	}
}
