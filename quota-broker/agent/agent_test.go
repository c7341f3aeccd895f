package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// recorded are responses captured from Nomad v1.11.3 (see its README.md).
const recorded = "../nomad/internal/fakenomad/testdata/nomad-1.11.3"

// fakeNomad serves the recorded lists, holds the event stream open, answers
// writes, and can go down (503 and closed streams) to test law L12.
type fakeNomad struct {
	srv    *httptest.Server
	mu     sync.Mutex
	down   bool
	writes []string
	kick   chan struct{} // closed to end the open streams
	// override serves other content for a recorded file (setJobMeta).
	override map[string][]byte
	// dynamic: a registered job is served as registered (its pool, its
	// meta) and a stopped allocation as stopping, to the next lister (a
	// successor broker); registered lists the jobs registered, ns/id.
	dynamic    bool
	registered []string
	// onWrite, when set, is called after each write is recorded, with the
	// number of writes so far (a test's kill -9 of the broker mid-act).
	onWrite func(n int)
}

// remember applies a write to what the fake serves next (dynamic only):
// PUT /v1/jobs serves the job as registered, PUT /v1/allocation/<id>/stop
// marks the allocation stopping (desired status stop). f.mu is held.
func (f *fakeNomad) remember(t *testing.T, r *http.Request, body []byte) {
	switch {
	case r.Method == http.MethodPut && r.URL.Path == "/v1/jobs":
		var req struct{ Job map[string]any }
		if err := json.Unmarshal(body, &req); err != nil || req.Job == nil {
			t.Errorf("register body: %v", err)
			return
		}
		ns, _ := req.Job["Namespace"].(string)
		id, _ := req.Job["ID"].(string)
		data, _ := json.Marshal(req.Job)
		f.setOverride("job-"+ns+"-"+id+".json", data)
		f.registered = append(f.registered, ns+"/"+id)
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/allocation/") && strings.HasSuffix(r.URL.Path, "/stop"):
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/allocation/"), "/stop")
		data, ok := f.override["allocations.json"]
		if !ok {
			var err error
			if data, err = os.ReadFile(filepath.Join(recorded, "allocations.json")); err != nil {
				t.Error(err)
				return
			}
		}
		var allocs []map[string]any
		if err := json.Unmarshal(data, &allocs); err != nil {
			t.Error(err)
			return
		}
		for _, al := range allocs {
			if al["ID"] == id {
				al["DesiredStatus"] = "stop"
			}
		}
		data, _ = json.Marshal(allocs)
		f.setOverride("allocations.json", data)
	}
}

// setAlloc serves the recorded allocation id changed by change (its
// stub as JSON: ClientStatus, DesiredStatus, TaskStates, ...).
func (f *fakeNomad) setAlloc(t *testing.T, id string, change func(al map[string]any)) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	data, ok := f.override["allocations.json"]
	if !ok {
		var err error
		if data, err = os.ReadFile(filepath.Join(recorded, "allocations.json")); err != nil {
			t.Fatal(err)
		}
	}
	var allocs []map[string]any
	if err := json.Unmarshal(data, &allocs); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, al := range allocs {
		if al["ID"] == id {
			change(al)
			found = true
		}
	}
	if !found {
		t.Fatalf("no recorded allocation %s", id)
	}
	data, _ = json.Marshal(allocs)
	f.setOverride("allocations.json", data)
}

func (f *fakeNomad) setOverride(name string, data []byte) {
	if f.override == nil {
		f.override = map[string][]byte{}
	}
	f.override[name] = data
}

func newFakeNomad(t *testing.T) *fakeNomad {
	f := &fakeNomad{kick: make(chan struct{})}
	files := map[string]string{"/v1/namespaces": "namespaces.json", "/v1/nodes": "nodes.json",
		"/v1/allocations": "allocations.json", "/v1/jobs": "jobs.json", "/v1/evaluations": "evaluations-blocked.json",
		"GET /v1/node/pools": "node-pools.json"}
	for _, j := range []string{"workspace-a/inference", "workspace-b/training", "workspace-c/training", "workspace-c/bad-idle", "workspace-c/bad-maxrun"} {
		ns, id, _ := strings.Cut(j, "/")
		files["/v1/job/"+id+"?"+ns] = "job-" + ns + "-" + id + ".json"
		files["/v1/job/"+id+"/summary?"+ns] = "summary-" + ns + "-" + id + ".json"
	}
	done := make(chan struct{})
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Method != http.MethodGet {
			body, _ = io.ReadAll(r.Body)
		}
		f.mu.Lock()
		down, kick, onWrite, n := f.down, f.kick, f.onWrite, 0
		if !down && r.Method != http.MethodGet {
			f.writes = append(f.writes, r.Method+" "+r.URL.Path)
			n = len(f.writes)
			if f.dynamic {
				f.remember(t, r, body)
			}
		}
		f.mu.Unlock()
		if onWrite != nil && n > 0 {
			onWrite(n)
		}
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("X-Nomad-Index", "100")
		switch {
		case r.URL.Path == "/v1/event/stream":
			w.WriteHeader(http.StatusOK)
			fmt.Fprintln(w, "{}")
			w.(http.Flusher).Flush()
			select {
			case <-kick:
			case <-done:
			}
			return
		case r.URL.Path == "/v1/acl/token/self": // Nomad's exact answer with ACLs off
			http.Error(w, "ACL support disabled", http.StatusBadRequest)
			return
		case r.URL.Path == "/v1/status/leader":
			fmt.Fprint(w, `"127.0.0.1:4647"`)
			return
		case r.URL.Path == "/v1/node/pool/gputide-queue":
			fmt.Fprint(w, `{"Name":"gputide-queue"}`)
			return
		case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/allocation/") && strings.HasSuffix(r.URL.Path, "/stop"):
			fmt.Fprint(w, `{"EvalID":"e","Index":501}`)
			return
		case r.Method == http.MethodPut && r.URL.Path == "/v1/jobs":
			fmt.Fprint(w, `{"EvalID":"e","JobModifyIndex":500}`)
			return
		}
		key := r.URL.Path
		if strings.HasPrefix(key, "/v1/job/") {
			key += "?" + r.URL.Query().Get("namespace")
		}
		if r.Method == http.MethodGet && key == "/v1/node/pools" {
			key = "GET /v1/node/pools"
		}
		name, ok := files[key]
		if !ok {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		f.mu.Lock()
		data, ok := f.override[name]
		f.mu.Unlock()
		if !ok {
			var err error
			if data, err = os.ReadFile(filepath.Join(recorded, name)); err != nil {
				t.Error(err)
			}
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(func() { close(done); f.srv.Close() })
	return f
}

// setJobMeta serves the recorded job ns/id with meta key set to value.
func (f *fakeNomad) setJobMeta(t *testing.T, ns, id, key, value string) {
	t.Helper()
	name := "job-" + ns + "-" + id + ".json"
	data, err := os.ReadFile(filepath.Join(recorded, name))
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]any
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	meta, _ := j["Meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta[key] = value
	j["Meta"] = meta
	if data, err = json.Marshal(j); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setOverride(name, data)
}

func (f *fakeNomad) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
	if down {
		close(f.kick)
	} else {
		f.kick = make(chan struct{})
	}
}

func (f *fakeNomad) writeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.writes)
}

const e2eQuota = `
quota "Quota1" {
  gpus             = 8
  child_preemption = true
  namespaces       = ["workspace-a"]
  quota "Quota1.1" {
    gpus       = 3
    namespaces = ["workspace-b"]
  }
  quota "Quota1.2" {
    gpus       = 5
    namespaces = ["workspace-c"]
  }
}
`

func until(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// L12: the agent acts while its state is current, stops acting (and
// writing) while Nomad is unreachable but keeps serving its reads, and
// resumes after a full re-list.
func TestAgentStopsActingWhileNomadIsUnreachable(t *testing.T) {
	f := newFakeNomad(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "quota.hcl"), []byte(e2eQuota), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(fmt.Sprintf(`
nomad { address = %q }
quota_file = "quota.hcl"
http_bind  = "127.0.0.1:0"
admin_token = "adm"
`, f.srv.URL)), filepath.Join(dir, "broker.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	// Below the configuration's 1s floor, to keep the test short: set on
	// the parsed value, as no file may.
	cfg.Interval, cfg.Staleness = 50*time.Millisecond, 300*time.Millisecond
	a, err := New(cfg, Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	until(t, "acting", 10*time.Second, func() bool { return a.Health().Acting })
	// The API: the admin token (ACLs off) reads the plan; no token is refused.
	if code := getStatus(t, a.Addr(), "/v1/plan", "adm"); code != http.StatusOK {
		t.Errorf("GET /v1/plan with the admin token: %d", code)
	}
	if code := getStatus(t, a.Addr(), "/v1/plan", ""); code != http.StatusForbidden {
		t.Errorf("GET /v1/plan without a token: %d, want 403", code)
	}
	// The two jobs with bad meta get their error written: the agent acts.
	until(t, "the meta writes", 10*time.Second, func() bool { return f.writeCount() >= 2 })

	f.setDown(true)
	// Well under the 15s default staleness, which would be ignoring ours.
	until(t, "not acting", 10*time.Second, func() bool { return !a.Health().Acting })
	if h := a.Health(); h.Connected || h.Why == "" {
		t.Fatalf("health while down = %+v", h)
	}
	n := f.writeCount()
	time.Sleep(500 * time.Millisecond)
	if f.writeCount() != n {
		t.Fatal("wrote while Nomad was unreachable")
	}
	// Health is still served; reads of the state answer 503 once it is
	// older than the staleness bound (DESIGN §9), never a stale answer.
	resp, err := http.Get("http://" + a.Addr() + "/v1/agent/health")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/agent/health while down: %v %v", resp, err)
	}
	resp.Body.Close()
	until(t, "stale reads refused", 10*time.Second, func() bool { return getStatus(t, a.Addr(), "/v1/plan", "adm") == http.StatusServiceUnavailable })

	f.setDown(false)
	// The watcher reconnects with backoff (1s, 2s, 4s, ...): allow for a
	// loaded machine stretching the outage over a few of them.
	until(t, "acting again", 20*time.Second, func() bool { return a.Health().Acting })
	if h := a.Health(); h.Relists < 2 {
		t.Fatalf("relists = %d, want a full list after reconnecting (L2)", h.Relists)
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The Nomad address's userinfo is printed nowhere: not at start, not when
// Nomad cannot be reached, not on the retries (issue 8, item 5).
func TestAgentNeverPrintsTheAddressUserinfo(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "quota.hcl"), []byte(e2eQuota), 0o644); err != nil {
		t.Fatal(err)
	}
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cfg, err := ParseConfig([]byte(fmt.Sprintf(`
nomad { address = "http://alice:s3cr3t-pw@127.0.0.1:%d" }
quota_file = "quota.hcl"
http_bind  = "127.0.0.1:0"
`, port)), filepath.Join(dir, "broker.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Interval, cfg.Staleness = 50*time.Millisecond, 300*time.Millisecond
	var logs syncBuffer
	a, err := New(cfg, Options{Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: &logs})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	// The first failure, then a retry after the 1s backoff.
	until(t, "a retry", 10*time.Second, func() bool { return strings.Contains(logs.String(), "Nomad still unreachable") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	for _, want := range []string{
		fmt.Sprintf("nomad=http://redacted@127.0.0.1:%d", port),
		fmt.Sprintf("cannot reach Nomad at http://redacted@127.0.0.1:%d", port),
		fmt.Sprintf("address=http://redacted@127.0.0.1:%d", port),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	for _, secret := range []string{"s3cr3t-pw", "alice"} {
		if strings.Contains(out, secret) {
			t.Errorf("log shows %q:\n%s", secret, out)
		}
	}
	if h := a.Health(); strings.Contains(h.Error, "s3cr3t") || strings.Contains(h.Why, "s3cr3t") {
		t.Errorf("health shows the secret: %+v", h)
	}
}

// A namespace the configuration governs must be bound in the quota tree:
// New refuses it, naming the key and the namespace; a reload that unbinds
// it keeps the running tree.
func TestNewRefusesAGovernedNamespaceNotInTheTree(t *testing.T) {
	dir := t.TempDir()
	quotaFile := filepath.Join(dir, "quota.hcl")
	if err := os.WriteFile(quotaFile, []byte(e2eQuota), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(`
quota_file = "quota.hcl"
namespaces = ["workspace-a", "workspace-z"]
`), filepath.Join(dir, "broker.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(cfg, Options{Logger: hclog.NewNullLogger()})
	var ce *ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, ErrNotGoverned) || ce.Key != "namespaces" || ce.Value != "workspace-z" || ce.File != quotaFile {
		t.Fatalf("err = %#v, want a ConfigError for namespaces = workspace-z in %s", err, quotaFile)
	}
	want := quotaFile + `: namespaces = "workspace-z": listed in the agent configuration's namespaces but bound to no quota in this tree`
	if !strings.Contains(err.Error(), want) {
		t.Errorf("message = %q, want it to contain %q", err, want)
	}

	cfg.Namespaces = []string{"workspace-b"}
	a, err := New(cfg, Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	unbound := strings.Replace(e2eQuota, `namespaces = ["workspace-b"]`, `namespaces = ["workspace-x"]`, 1)
	if err := os.WriteFile(quotaFile, []byte(unbound), 0o644); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(quotaFile, future, future); err != nil {
		t.Fatal(err)
	}
	if err := a.loadQuota(); !errors.Is(err, ErrNotGoverned) {
		t.Fatalf("reload err = %v, want ErrNotGoverned", err)
	}
	if got := a.tree.Find("Quota1.1").Namespaces; len(got) != 1 || got[0] != "workspace-b" {
		t.Fatalf("running tree's Quota1.1 namespaces = %v, want the old [workspace-b]", got)
	}
}

// The agent says it acts only once the holding pool exists: jobs are
// submitted into it, and Nomad refuses a job in a pool it lacks (seen as a
// flaky e2e start). Here Nomad refuses to create the pool.
func TestAgentDoesNotActWithoutItsHoldingPool(t *testing.T) {
	f := newFakeNomad(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "quota.hcl"), []byte(e2eQuota), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(fmt.Sprintf(`
nomad { address = %q }
quota_file   = "quota.hcl"
holding_pool = "missing-pool"
http_bind    = "127.0.0.1:0"
`, f.srv.URL)), filepath.Join(dir, "broker.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Interval, cfg.Staleness = 50*time.Millisecond, 300*time.Millisecond
	a, err := New(cfg, Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	until(t, "a refused pool", 10*time.Second, func() bool {
		return strings.Contains(a.Health().Why, `failed to create the holding pool "missing-pool"`)
	})
	time.Sleep(300 * time.Millisecond)
	if h := a.Health(); h.Acting {
		t.Fatalf("health = %+v, want not acting", h)
	}
	f.mu.Lock()
	writes := append([]string(nil), f.writes...)
	f.mu.Unlock()
	for _, w := range writes {
		if w != "PUT /v1/node/pools" {
			t.Fatalf("wrote %s without a holding pool; all writes: %v", w, writes)
		}
	}
}

// getStatus GETs path on the agent with token and returns the status.
func getStatus(t *testing.T, addr, path, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A reloaded quota file reaches the API's store, so bookings validate
// against the tree the agent plans with.
func TestQuotaReloadReachesTheAPIStore(t *testing.T) {
	dir := t.TempDir()
	qf := filepath.Join(dir, "quota.hcl")
	if err := os.WriteFile(qf, []byte(e2eQuota), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte("quota_file = \"quota.hcl\"\nhttp_bind = \"127.0.0.1:0\"\n"), filepath.Join(dir, "broker.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg, Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(strings.Replace(e2eQuota, "gpus       = 3", "gpus       = 4", 1), "gpus       = 5", "gpus       = 4", 1)
	if err := os.WriteFile(qf, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(qf, later, later); err != nil {
		t.Fatal(err)
	}
	if err := a.loadQuota(); err != nil {
		t.Fatal(err)
	}
	g, err := a.store.ReadGuarded(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := g.Tree.Root.Find("Quota1.1"); n == nil || n.GPUs != 4 || n.ChangedAt.IsZero() {
		t.Fatalf("store tree Quota1.1 = %+v, want 4 GPUs with a change time", n)
	}
}
