// Package fakenomad is the Nomad the adapter's tests talk to: it replays
// the responses Recorded from Nomad v1.11.3 (testdata/nomad-1.11.3) through
// an httptest server and records the requests it receives.
package fakenomad

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad/api"
)

// Recorded is the folder of responses captured from Nomad v1.11.3 (see its
// README.md), as an absolute path.
var Recorded = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "nomad-1.11.3")
}()

// The allocations and jobs of the recording (Recorded/README.md).
const (
	Node      = "292c925c-0664-98f4-0f8d-63cdbfd840e1"
	AllocC1   = "1bdfc0b1-95aa-947a-4125-104f338209f0" // workspace-c/training, 2 GPUs
	AllocC2   = "2b70b577-7405-16fd-d6c5-6b9f12d1bf62" // workspace-c/training, 2 GPUs
	AllocB    = "1b43c480-eb67-e215-31e7-cc0ac6da9d1f" // workspace-b/training, stopped, complete
	AllocA    = "573417c7-7c93-1df1-3528-3c2427f1651a" // workspace-a/inference, 4 GPUs
	RecordedT = "2026-11-29T21:13:00Z"
)

// E2ETree is the tree the recording was made with.
func E2ETree() *quota.Node {
	return &quota.Node{Name: "Quota1", GPUs: quota.Plain(8), ChildPreemption: true, Namespaces: []string{"workspace-a"},
		Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: quota.Plain(3), Namespaces: []string{"workspace-b"}},
			{Name: "Quota1.2", GPUs: quota.Plain(5), Namespaces: []string{"workspace-c"}},
		}}
}

// At is the time of the recording.
func At(t *testing.T) time.Time {
	tm, err := time.Parse(time.RFC3339, RecordedT)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// ClaimTree binds workspace-b to a root with child-level preemption over
// workspace-c and workspace-a, so that the waiting workspace-b/training of
// the recording may take GPUs back from them (L5 step 2).
func ClaimTree() *quota.Node {
	return &quota.Node{Name: "Root", GPUs: quota.Plain(8), ChildPreemption: true, Namespaces: []string{"workspace-b"},
		Children: []*quota.Node{
			{Name: "C", GPUs: quota.Plain(4), Namespaces: []string{"workspace-c"}},
			{Name: "A", GPUs: quota.Plain(4), Namespaces: []string{"workspace-a"}},
		}}
}

// JobC is workspace-c/training of the recording.
var JobC = plan.JobKey{Namespace: "workspace-c", Job: "training"}

// TrainingC is the task group of workspace-c/training.
var TrainingC = plan.GroupKey{Namespace: "workspace-c", Job: "training", Group: "worker"}

// ServePolicies makes the fake Nomad answer the scaling policy endpoints:
// an idle policy on workspace-c/training/worker (max 6), a schedule policy
// on workspace-a/inference/server, and one in an ungoverned namespace.
func ServePolicies(f *Nomad, idleModify uint64) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	f.Bodies = map[string]string{
		"/v1/scaling/policies": `[
 {"ID": "pol-idle", "Enabled": true, "Type": "horizontal", "ModifyIndex": ` + itoa(idleModify) + `,
  "Target": {"Namespace": "workspace-c", "Job": "training", "Group": "worker"}},
 {"ID": "pol-sched", "Enabled": true, "Type": "horizontal", "ModifyIndex": 30,
  "Target": {"Namespace": "workspace-a", "Job": "inference", "Group": "server"}},
 {"ID": "pol-other", "Enabled": true, "Type": "horizontal", "ModifyIndex": 31,
  "Target": {"Namespace": "elsewhere", "Job": "x", "Group": "y"}}]`,
		"/v1/scaling/policy/pol-idle": `{"ID": "pol-idle", "Namespace": "workspace-c", "Enabled": true, "Type": "horizontal",
  "Min": 1, "Max": 6, "ModifyIndex": ` + itoa(idleModify) + `,
  "Target": {"Namespace": "workspace-c", "Job": "training", "Group": "worker"},
  "Policy": {"evaluation_interval": "1m", "cooldown_on_scale_up": "2m",
             "check": [{"fit": [{"source": "gputide-apm", "query": "idle_fit{namespace=\"workspace-c\",job=\"training\",group=\"worker\"}",
                                 "strategy": [{"gputide-idle": [{}]}]}]}]}}`,
		"/v1/scaling/policy/pol-sched": `{"ID": "pol-sched", "Namespace": "workspace-a", "Enabled": true, "Type": "horizontal",
  "Min": 1, "Max": 8, "ModifyIndex": 30,
  "Target": {"Namespace": "workspace-a", "Job": "inference", "Group": "server"},
  "Policy": {"evaluation_interval": "1m",
             "check": [{"day-night": [{"source": "gputide-apm", "query": "schedule",
                                       "strategy": [{"gputide-schedule": [{"window_day": "mon-fri 08:00-22:00 4", "default_count": 1}]}]}]}]}}`,
	}
}

func itoa(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// GovernedABC governs the three workspaces of the recording.
func GovernedABC(ns string) bool {
	return ns == "workspace-a" || ns == "workspace-b" || ns == "workspace-c"
}

// Request is one call the fake Nomad received.
type Request struct {
	Method, Path, Query string
	Body                []byte
}

func (r Request) String() string { return r.Method + " " + r.Path }

// Nomad replays Recorded responses through an httptest server and
// records the requests it receives. Writes (job register, allocation stop)
// are answered like Nomad answers them.
type Nomad struct {
	T   *testing.T
	Srv *httptest.Server

	Mu       sync.Mutex
	Requests []Request
	Files    map[string]string // path (with "?namespace=x" for job reads) -> file
	// Bodies are answers given as they are, by path, before files.
	Bodies map[string]string
	// Streams holds the event lines to send on each stream request, in
	// order; after the last, a stream request gets lines nil.
	Streams [][]string
	// HoldStream keeps a stream open after its lines (until the test ends);
	// otherwise the stream is closed, as when the connection breaks.
	HoldStream bool
	StreamsN   int
	Down       bool // answer everything with 503
	// Reject, when set, is asked about each job register (the job's
	// namespace and ID, and the job modify index it enforces, 0 when
	// none): a non-empty answer is sent back as Nomad refuses a register,
	// an HTTP 500 with that text.
	Reject  func(namespace, id string, index uint64) string
	Closing chan struct{}
}

func New(t *testing.T) *Nomad {
	f := &Nomad{T: t, Closing: make(chan struct{}), HoldStream: true, Files: map[string]string{
		"/v1/namespaces":  "namespaces.json",
		"/v1/nodes":       "nodes.json",
		"/v1/allocations": "allocations.json",
		"/v1/jobs":        "jobs.json",
		"/v1/evaluations": "evaluations-blocked.json",
		"/v1/node/pools":  "node-pools.json",
	}}
	for _, j := range []string{"workspace-a/inference", "workspace-b/training", "workspace-c/training", "workspace-c/bad-idle", "workspace-c/bad-maxrun"} {
		ns, id, _ := strings.Cut(j, "/")
		f.Files["/v1/job/"+id+"?namespace="+ns] = "job-" + ns + "-" + id + ".json"
		f.Files["/v1/job/"+id+"/summary?namespace="+ns] = "summary-" + ns + "-" + id + ".json"
	}
	f.Srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		close(f.Closing)
		f.Srv.Close()
	})
	return f
}

func (f *Nomad) Client() *api.Client {
	cfg := api.DefaultConfig()
	cfg.Address = f.Srv.URL
	c, err := api.NewClient(cfg)
	if err != nil {
		f.T.Fatal(err)
	}
	return c
}

func (f *Nomad) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.Mu.Lock()
	f.Requests = append(f.Requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: body})
	down := f.Down
	f.Mu.Unlock()
	if down {
		http.Error(w, "nomad is down", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("X-Nomad-Index", "100")
	switch {
	case r.URL.Path == "/v1/event/stream":
		f.stream(w)
		return
	case r.Method == http.MethodPut && r.URL.Path == "/v1/jobs":
		if msg := f.rejected(r, body); msg != "" {
			http.Error(w, msg, http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, `{"EvalID":"eval-register","JobModifyIndex":500}`)
		return
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/job/") && strings.HasSuffix(r.URL.Path, "/scale"):
		fmt.Fprint(w, `{"EvalID":"eval-scale","JobModifyIndex":600}`)
		return
	case r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/stop"):
		fmt.Fprint(w, `{"EvalID":"eval-stop"}`)
		return
	case r.URL.Path == "/v1/status/leader":
		fmt.Fprint(w, `"127.0.0.1:4647"`)
		return
	}
	key := r.URL.Path
	if strings.HasPrefix(key, "/v1/job/") {
		key += "?namespace=" + r.URL.Query().Get("namespace")
	}
	f.Mu.Lock()
	name := f.Files[key]
	answer, inline := f.Bodies[r.URL.Path]
	f.Mu.Unlock()
	if inline {
		fmt.Fprint(w, answer)
		return
	}
	if name == "" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	data, err := os.ReadFile(filepath.Join(Recorded, name))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = w.Write(data)
}

// rejected is Reject's answer to a register request ("" without Reject).
func (f *Nomad) rejected(r *http.Request, body []byte) string {
	f.Mu.Lock()
	reject := f.Reject
	f.Mu.Unlock()
	if reject == nil {
		return ""
	}
	var req api.JobRegisterRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Job == nil {
		return "bad register body"
	}
	ns := r.URL.Query().Get("namespace")
	if req.Job.Namespace != nil && *req.Job.Namespace != "" {
		ns = *req.Job.Namespace
	}
	id := ""
	if req.Job.ID != nil {
		id = *req.Job.ID
	}
	var index uint64
	if req.EnforceIndex {
		index = req.JobModifyIndex
	}
	return reject(ns, id, index)
}

func (f *Nomad) stream(w http.ResponseWriter) {
	f.Mu.Lock()
	var lines []string
	if f.StreamsN < len(f.Streams) {
		lines = f.Streams[f.StreamsN]
	}
	f.StreamsN++
	hold := f.HoldStream
	f.Mu.Unlock()
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fmt.Fprintln(w, "{}")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	fl.Flush()
	if hold {
		<-f.Closing
	}
}

// writes returns the requests that change something, in order.
func (f *Nomad) Writes() []Request {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var out []Request
	for _, r := range f.Requests {
		if r.Method != http.MethodGet {
			out = append(out, r)
		}
	}
	return out
}

func (f *Nomad) Count(method, path string) int {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	n := 0
	for _, r := range f.Requests {
		if r.Method == method && r.Path == path {
			n++
		}
	}
	return n
}

// EventLines reads the Recorded event stream, without keep-alives.
func EventLines(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(Recorded, "events.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && l != "{}" {
			out = append(out, l)
		}
	}
	return out
}

// Registered decodes the job of a PUT /v1/jobs Request.
func Registered(t *testing.T, r Request) (*api.Job, bool, uint64) {
	t.Helper()
	var req api.JobRegisterRequest
	if err := json.Unmarshal(r.Body, &req); err != nil {
		t.Fatalf("bad register body: %v", err)
	}
	return req.Job, req.EnforceIndex, req.JobModifyIndex
}

func TestLogger(t *testing.T) (hclog.Logger, *SyncBuffer) {
	buf := &SyncBuffer{}
	return hclog.New(&hclog.LoggerOptions{Output: buf, Level: hclog.Debug}), buf
}

type SyncBuffer struct {
	Mu sync.Mutex
	B  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.B.Write(p)
}

func (s *SyncBuffer) String() string {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	return s.B.String()
}

func JSONUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
