package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"

	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/store"
)

// apiAgent starts an agent with the admin token "adm" (Nomad's ACLs are
// off in the fake) on the store st; withConsul adds a consul block (the
// store stays st: a Consul store as the agent sees it).
func apiAgent(t *testing.T, f *fakeNomad, st store.Store, withConsul bool) *Agent {
	t.Helper()
	return apiAgentWith(t, f, st, withConsul, "")
}

// apiAgentWith is apiAgent with more lines of agent configuration.
func apiAgentWith(t *testing.T, f *fakeNomad, st store.Store, withConsul bool, extra string) *Agent {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "quota.hcl"), []byte(e2eQuota), 0o644); err != nil {
		t.Fatal(err)
	}
	consul := ""
	if withConsul {
		consul = `consul { address = "127.0.0.1:1" }`
	}
	cfg, err := ParseConfig([]byte(fmt.Sprintf(`
nomad { address = %q }
%s
quota_file  = "quota.hcl"
http_bind   = "127.0.0.1:0"
admin_token = "adm"
%s
`, f.srv.URL, consul, extra)), filepath.Join(dir, "broker.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Interval, cfg.Staleness = 50*time.Millisecond, 300*time.Millisecond
	a, err := New(cfg, Options{Logger: hclog.NewNullLogger(), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	until(t, "the HTTP address", 10*time.Second, func() bool { return a.Addr() != "" })
	return a
}

// call sends method path with the admin token and body; it returns the
// status and the body.
func call(t *testing.T, a *Agent, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+a.Addr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Nomad-Token", "adm")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// apiHealth is the part of GET /v1/agent/health this test reads.
type apiHealth struct {
	Leader   string `json:"leader"`
	IsLeader bool   `json:"is_leader"`
	Store    string `json:"store"`
}

func healthOf(t *testing.T, a *Agent) apiHealth {
	t.Helper()
	code, body := call(t, a, "GET", "/v1/agent/health", "")
	var h apiHealth
	if err := json.Unmarshal(body, &h); code != http.StatusOK || err != nil {
		t.Fatalf("health: %d %s (%v)", code, body, err)
	}
	return h
}

// The API runs on the agent's store and lock (DESIGN §6, §9, L12):
// is_leader follows the lock (false on a standby, true once it holds it),
// leader names the holder, /v1/preemptions reads the store's history, and
// quota writes answer 409 on the memory store.
func TestAPIOnTheAgentsMemoryStoreAndLock(t *testing.T) {
	f := newFakeNomad(t)
	st := store.NewMemory()
	ctx := context.Background()
	other, err := st.Lock(ctx, "other-broker")
	if err != nil {
		t.Fatal(err)
	}
	p := store.Preemption{At: time.Now().UTC().Truncate(time.Second), Alloc: "alloc-1", Namespace: "workspace-c",
		Job: "training", GPUs: 2, For: "workspace-a/inference/main", Rule: "L5.2"}
	if err := st.AddPreemption(ctx, other, p); err != nil {
		t.Fatal(err)
	}
	a := apiAgent(t, f, st, false)
	until(t, "standby", 10*time.Second, func() bool { return a.Health().Leader == "other-broker" })
	if diff := cmp.Diff(apiHealth{Leader: "other-broker", IsLeader: false, Store: "memory"}, healthOf(t, a)); diff != "" {
		t.Errorf("standby health (-want +got):\n%s", diff)
	}
	code, body := call(t, a, "GET", "/v1/preemptions", "")
	if code != http.StatusOK || !strings.Contains(string(body), `"alloc": "alloc-1"`) {
		t.Errorf("GET /v1/preemptions: %d %s, want the store's entry", code, body)
	}
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, "leading", 10*time.Second, func() bool { return a.IsLeader() })
	if h := healthOf(t, a); !h.IsLeader || h.Leader == "" || h.Leader == "other-broker" || h.Store != "memory" {
		t.Errorf("leader health = %+v", h)
	}
	code, body = call(t, a, "PUT", "/v1/quota/Quota1.1", `{"gpus": 2}`)
	if code != http.StatusConflict || !strings.Contains(string(body), "no consul store") {
		t.Errorf("quota write on the memory store: %d %s, want 409", code, body)
	}
}

// With the Consul store quota writes are taken: the write lands in the
// agent's store and its tree watch applies it (DESIGN §6).
func TestAPIQuotaWriteWithConsulReachesTheAgentsTree(t *testing.T) {
	f := newFakeNomad(t)
	st := store.NewMemory()
	a := apiAgent(t, f, st, true)
	gpus := func() int {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.tree == nil {
			return -1
		}
		return a.tree.Find("Quota1.1").GPUs.Of(quota.ImplicitFlavor)
	}
	until(t, "the seeded tree", 10*time.Second, func() bool { return gpus() == 3 })
	if h := healthOf(t, a); h.Store != "consul" {
		t.Fatalf("health = %+v, want store consul", h)
	}
	code, body := call(t, a, "PUT", "/v1/quota/Quota1.1", `{"gpus": 2}`)
	if code != http.StatusOK {
		t.Fatalf("quota write: %d %s", code, body)
	}
	g, err := st.ReadGuarded(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := g.Tree.Root.Find("Quota1.1"); n == nil || n.GPUs.Of(quota.ImplicitFlavor) != 2 {
		t.Fatalf("store tree Quota1.1 = %+v, want 2 GPUs", n)
	}
	until(t, "the written tree", 10*time.Second, func() bool { return gpus() == 2 })
}
