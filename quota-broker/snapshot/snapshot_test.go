package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// base is a small valid snapshot; the error tests change one thing in it.
const base = `{
  "time": "2026-12-01T08:00:00Z",
  "quota": {"name": "Quota1", "gpus": 8, "child_preemption": true, "namespaces": ["workspace-a"],
            "children": [{"name": "Quota1.1", "gpus": 4, "namespaces": ["workspace-b"], "changed_at": "2026-12-01T07:55:00Z"},
                         {"name": "Quota1.2", "gpus": 4, "priority_preemption": true, "namespaces": ["workspace-c"]}]},
  "settings": {"min_runtime": "10m", "debt_grace": "5m", "settle": "45s", "drain_margin": "2m",
               "drain_horizon": "30m", "reservation_max_ahead": "48h", "reservation_min_duration": "2m",
               "autoscaler_evaluation_interval": "1m", "reservation_max_per_namespace": 50},
  "nodes": [{"id": "node-01", "datacenter": "dc1", "node_pool": "default",
             "gpus": [{"id": "GPU-01-0", "model": "NVIDIA H100 80GB HBM3", "healthy": true},
                      {"id": "GPU-01-1", "model": "NVIDIA H100 80GB HBM3", "healthy": false}]},
            {"id": "node-02", "datacenter": "dc2", "node_pool": "gpu",
             "gpus": [{"id": "GPU-02-0", "model": "NVIDIA A100-SXM4-40GB"},
                      {"id": "GPU-02-1", "model": "NVIDIA A100-SXM4-40GB", "healthy": true}]}],
  "allocations": [{"id": "alloc-1", "namespace": "workspace-b", "job": "train-1", "group": "worker",
                   "type": "batch", "priority": 50, "node": "node-01", "gpu_ids": ["GPU-01-0"],
                   "idle": false, "elastic": false, "reservation": "", "stopping_for": "",
                   "started_at": "2026-12-01T07:00:00Z", "kill_timeout": "30s", "max_run": "2h",
                   "admitted_at": "2026-12-01T06:59:00Z"},
                  {"id": "alloc-2", "namespace": "workspace-c", "job": "sweep", "group": "trial",
                   "type": "batch", "priority": 20, "node": "node-02", "gpu_ids": ["GPU-02-0", "GPU-02-1"],
                   "idle": true, "elastic": true, "reservation": "r-1", "stopping_for": "workspace-a/chat/server",
                   "started_at": "2026-12-01T06:30:00.5+01:00"}],
  "pending": [{"namespace": "workspace-a", "job": "chat", "group": "server", "type": "service",
               "priority": 80, "count": 2, "gpus": 1, "model": "", "datacenters": ["dc1"],
               "node_pool": "default", "idle": false, "elastic": false, "reservation": "",
               "submitted_at": "2026-12-01T07:59:00Z",
               "flex": {"max_wait": "24h", "max_run": "4h"}},
              {"namespace": "workspace-a", "job": "chat", "group": "cache", "type": "service",
               "priority": 80, "count": 1, "gpus": 1, "submitted_at": "2026-12-01T07:59:00Z",
               "flex": {"max_wait": "1440m", "max_run": "4h"}},
              {"namespace": "workspace-b", "job": "big", "group": "g", "type": "batch",
               "priority": 50, "count": 1, "gpus": 2, "submitted_at": "2026-12-01T07:00:00Z",
               "queued_at": "2026-12-01T07:30:00Z", "flex": {"max_run": "2h"}}],
  "reservations": [{"id": "r-1", "namespace": "workspace-b", "quota": "Quota1.1", "gpus": 2,
                    "alloc_gpus": 1, "model": "NVIDIA A100-SXM4-40GB", "node_pool": "gpu",
                    "start": "2026-12-01T00:00:00Z", "end": "2026-12-08T00:00:00Z"}],
  "holds": [{"for": {"reservation": "r-1"}, "node": "node-02", "gpu_ids": ["GPU-02-1"], "until": "2026-12-01T00:00:45Z"},
            {"for": {"namespace": "workspace-a", "job": "chat", "group": "server"}, "node": "node-01",
             "gpu_ids": ["GPU-01-0"], "until": "2026-12-01T09:00:00Z"}]
}`

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestUnmarshalFillsEveryField(t *testing.T) {
	s, err := Unmarshal([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	wantQuota := &quota.Node{
		Name: "Quota1", GPUs: quota.Plain(8), ChildPreemption: true, Namespaces: []string{"workspace-a"}, Pos: "quota",
		Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: quota.Plain(4), Namespaces: []string{"workspace-b"},
				ChangedAt: mustTime(t, "2026-12-01T07:55:00Z"), Pos: "quota.children[0]"},
			{Name: "Quota1.2", GPUs: quota.Plain(4), PriorityPreemption: true, Namespaces: []string{"workspace-c"},
				Pos: "quota.children[1]"},
		},
	}
	want := &plan.Snapshot{
		Time:  mustTime(t, "2026-12-01T08:00:00Z"),
		Quota: wantQuota,
		Settings: quota.Settings{MinRuntime: 10 * time.Minute, DebtGrace: 5 * time.Minute, Settle: 45 * time.Second,
			DrainMargin: 2 * time.Minute, DrainHorizon: 30 * time.Minute, ReservationMaxAhead: 48 * time.Hour,
			ReservationMinDuration: 2 * time.Minute, AutoscalerEvaluationInterval: time.Minute, ReservationMaxPerNamespace: 50},
		Nodes: []plan.Node{
			{ID: "node-01", Datacenter: "dc1", NodePool: "default", GPUs: []plan.GPU{
				{ID: "GPU-01-0", Model: "NVIDIA H100 80GB HBM3", Healthy: true},
				{ID: "GPU-01-1", Model: "NVIDIA H100 80GB HBM3", Healthy: false}}},
			{ID: "node-02", Datacenter: "dc2", NodePool: "gpu", GPUs: []plan.GPU{
				{ID: "GPU-02-0", Model: "NVIDIA A100-SXM4-40GB", Healthy: true},
				{ID: "GPU-02-1", Model: "NVIDIA A100-SXM4-40GB", Healthy: true}}},
		},
		Allocations: []plan.Allocation{
			{ID: "alloc-1", Namespace: "workspace-b", Job: "train-1", Group: "worker", Type: plan.JobBatch,
				Priority: 50, Node: "node-01", GPUIDs: []string{"GPU-01-0"},
				StartedAt: mustTime(t, "2026-12-01T07:00:00Z"), KillTimeout: 30 * time.Second, MaxRun: 2 * time.Hour,
				AdmittedAt: mustTime(t, "2026-12-01T06:59:00Z")},
			{ID: "alloc-2", Namespace: "workspace-c", Job: "sweep", Group: "trial", Type: plan.JobBatch,
				Priority: 20, Node: "node-02", GPUIDs: []string{"GPU-02-0", "GPU-02-1"},
				Idle: true, Elastic: true, Reservation: "r-1", StoppingFor: plan.GroupKey{Namespace: "workspace-a", Job: "chat", Group: "server"},
				StartedAt: mustTime(t, "2026-12-01T06:30:00.5+01:00"), KillTimeout: plan.DefaultKillTimeout},
		},
		Pending: []plan.Pending{
			{Namespace: "workspace-a", Job: "chat", Group: "server", Type: plan.JobService, Priority: 80,
				Count: 2, GPUs: 1, Datacenters: []string{"dc1"}, NodePool: "default",
				SubmittedAt: mustTime(t, "2026-12-01T07:59:00Z"), QueuedAt: mustTime(t, "2026-12-01T07:59:00Z"),
				Flex: &plan.Flex{MaxWait: 24 * time.Hour, MaxRun: 4 * time.Hour}},
			{Namespace: "workspace-a", Job: "chat", Group: "cache", Type: plan.JobService, Priority: 80,
				Count: 1, GPUs: 1, SubmittedAt: mustTime(t, "2026-12-01T07:59:00Z"), QueuedAt: mustTime(t, "2026-12-01T07:59:00Z"),
				Flex: &plan.Flex{MaxWait: 24 * time.Hour, MaxRun: 4 * time.Hour}},
			{Namespace: "workspace-b", Job: "big", Group: "g", Type: plan.JobBatch, Priority: 50,
				Count: 1, GPUs: 2, SubmittedAt: mustTime(t, "2026-12-01T07:00:00Z"), QueuedAt: mustTime(t, "2026-12-01T07:30:00Z"),
				Flex: &plan.Flex{MaxWait: 168 * time.Hour, MaxRun: 2 * time.Hour}},
		},
		Reservations: []plan.Reservation{
			{ID: "r-1", Namespace: "workspace-b", Quota: "Quota1.1", GPUs: 2, AllocGPUs: 1,
				Model: "NVIDIA A100-SXM4-40GB", NodePool: "gpu",
				Start: mustTime(t, "2026-12-01T00:00:00Z"), End: mustTime(t, "2026-12-08T00:00:00Z")},
		},
		Holds: []plan.Hold{
			{For: plan.HoldOwner{Reservation: "r-1"}, Node: "node-02", GPUIDs: []string{"GPU-02-1"},
				Until: mustTime(t, "2026-12-01T00:00:45Z")},
			{For: plan.HoldOwner{Group: plan.GroupKey{Namespace: "workspace-a", Job: "chat", Group: "server"}},
				Node: "node-01", GPUIDs: []string{"GPU-01-0"}, Until: mustTime(t, "2026-12-01T09:00:00Z")},
		},
	}
	if !reflect.DeepEqual(s.Quota, want.Quota) {
		t.Errorf("quota:\n got %#v\nwant %#v", s.Quota, want.Quota)
	}
	s.Quota, want.Quota = nil, nil
	if !reflect.DeepEqual(s, want) {
		t.Errorf("snapshot:\n got %+v\nwant %+v", s, want)
	}
}

func TestUnmarshalAppliesDefaults(t *testing.T) {
	doc := `{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1, "namespaces": ["ns"]},
	  "nodes": [{"id": "n", "gpus": [{"id": "g"}]}],
	  "pending": [{"namespace": "ns", "job": "j", "group": "g", "type": "batch", "priority": 1,
	               "count": 1, "gpus": 1, "submitted_at": "2026-12-01T07:00:00Z", "flex": {"max_run": "1h"}}]}`
	s, err := Unmarshal([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if s.Settings != quota.DefaultSettings() {
		t.Errorf("settings = %+v, want min_runtime 0 and debt_grace 10m", s.Settings)
	}
	if !s.Nodes[0].GPUs[0].Healthy {
		t.Errorf("a GPU without \"healthy\" should be healthy")
	}
	if f := s.Pending[0].Flex; f == nil || f.MaxWait != 168*time.Hour || f.MaxRun != time.Hour {
		t.Errorf("flex = %+v, want max_wait 168h (the default) and max_run 1h", f)
	}
	if s.Allocations != nil || s.Reservations != nil {
		t.Errorf("absent lists should decode as nil: allocations %v, reservations %v", s.Allocations, s.Reservations)
	}
	if s.Pending[0].Datacenters != nil || s.Pending[0].NodePool != "" || s.Pending[0].Model != "" {
		t.Errorf("absent datacenters/node_pool/model should stay empty: %+v", s.Pending[0])
	}
}

func TestUnmarshalOfPartialSettingsKeepsTheOtherDefault(t *testing.T) {
	doc := `{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1}, "settings": {"min_runtime": "90s"}}`
	s, err := Unmarshal([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if want := quota.DefaultSettings(); s.Settings != (quota.Settings{MinRuntime: 90 * time.Second, DebtGrace: 10 * time.Minute,
		Settle: want.Settle, DrainMargin: want.DrainMargin, DrainHorizon: want.DrainHorizon,
		ReservationMaxAhead: want.ReservationMaxAhead, ReservationMinDuration: want.ReservationMinDuration,
		AutoscalerEvaluationInterval: want.AutoscalerEvaluationInterval, ReservationMaxPerNamespace: want.ReservationMaxPerNamespace}) {
		t.Errorf("settings = %+v, want min_runtime 90s and debt_grace 10m", s.Settings)
	}
}

// edit decodes base into generic JSON, applies fn and encodes it again.
func edit(t *testing.T, fn func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(base), &m); err != nil {
		t.Fatal(err)
	}
	fn(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// at walks a path of keys (string) and indexes (int) in generic JSON.
func at(m map[string]any, path ...any) map[string]any {
	var cur any = m
	for _, p := range path {
		switch k := p.(type) {
		case string:
			cur = cur.(map[string]any)[k]
		case int:
			cur = cur.([]any)[k]
		}
	}
	return cur.(map[string]any)
}

func TestUnmarshalRejectsBadSnapshots(t *testing.T) {
	tests := []struct {
		name string
		fn   func(m map[string]any)
		want string
	}{
		// Unknown, missing and mistyped keys.
		{"an unknown top-level key is rejected",
			func(m map[string]any) { m["nodez"] = []any{} },
			`nodez: unknown key "nodez" (did you mean "nodes"?)`},
		{"an unknown key deep in an allocation is rejected with its path",
			func(m map[string]any) { at(m, "allocations", 1)["gpus"] = 2 },
			`allocations[1].gpus: unknown key "gpus"`},
		{"an unknown key in a nested quota is rejected with its path",
			func(m map[string]any) { at(m, "quota", "children", 1)["limit"] = 3 },
			`quota.children[1].limit: unknown key "limit"`},
		{"an unknown key in flex is rejected",
			func(m map[string]any) { at(m, "pending", 0, "flex")["deadline"] = "1h" },
			`pending[0].flex.deadline: unknown key "deadline"`},
		{"a missing time is rejected",
			func(m map[string]any) { delete(m, "time") },
			`time: missing required key "time"`},
		{"a missing quota is rejected",
			func(m map[string]any) { delete(m, "quota") },
			`quota: missing required key "quota"`},
		{"a null quota is rejected",
			func(m map[string]any) { m["quota"] = nil },
			`quota: missing: a snapshot needs the quota tree`},
		{"an allocation without gpu_ids is rejected",
			func(m map[string]any) { delete(at(m, "allocations", 0), "gpu_ids") },
			`allocations[0].gpu_ids: missing required key "gpu_ids"`},
		{"a quota node without gpus is rejected",
			func(m map[string]any) { delete(at(m, "quota", "children", 0), "gpus") },
			`quota.children[0].gpus: missing required key "gpus"`},
		{"a string priority is rejected with its value",
			func(m map[string]any) { at(m, "allocations", 0)["priority"] = "high" },
			`allocations[0].priority: want a whole number, not the string "high"`},
		{"a fractional count is rejected with its value",
			func(m map[string]any) { at(m, "pending", 0)["count"] = 1.5 },
			`pending[0].count: 1.5 is not a whole number`},
		{"a count beyond int64 is rejected with its value",
			func(m map[string]any) { at(m, "pending", 0)["count"] = json.Number("99999999999999999999") },
			`pending[0].count: 99999999999999999999 is out of range`},
		{"gpu_ids given as a string is rejected",
			func(m map[string]any) { at(m, "allocations", 0)["gpu_ids"] = "GPU-01-0" },
			`allocations[0].gpu_ids: want an array, not the string "GPU-01-0"`},
		{"a number in gpu_ids is rejected with its index",
			func(m map[string]any) { at(m, "allocations", 1)["gpu_ids"] = []any{"GPU-02-0", 7} },
			`allocations[1].gpu_ids[1]: want a string, not the number 7`},
		{"a string for a boolean is rejected",
			func(m map[string]any) { at(m, "allocations", 0)["idle"] = "true" },
			`allocations[0].idle: want true or false, not the string "true"`},
		{"null for a string is rejected",
			func(m map[string]any) { at(m, "allocations", 0)["reservation"] = nil },
			`allocations[0].reservation: null is not allowed here; want a string`},
		{"an object for nodes is rejected",
			func(m map[string]any) { m["nodes"] = map[string]any{} },
			`nodes: want an array, not an object`},

		// Times and durations.
		{"a time that is not RFC 3339 is rejected with its value",
			func(m map[string]any) { m["time"] = "2026-12-01 08:00" },
			`time: "2026-12-01 08:00" is not an RFC 3339 time (such as "2026-12-01T08:00:00Z")`},
		{"a bad started_at is rejected with its path",
			func(m map[string]any) { at(m, "allocations", 1)["started_at"] = "yesterday" },
			`allocations[1].started_at: "yesterday" is not an RFC 3339 time (such as "2026-12-01T08:00:00Z")`},
		{"a bad changed_at is rejected with its path",
			func(m map[string]any) { at(m, "quota", "children", 0)["changed_at"] = "2026-13-01T00:00:00Z" },
			`quota.children[0].changed_at: "2026-13-01T00:00:00Z" is not an RFC 3339 time (such as "2026-12-01T08:00:00Z")`},
		{"a bad submitted_at is rejected",
			func(m map[string]any) { at(m, "pending", 2)["submitted_at"] = "" },
			`pending[2].submitted_at: "" is not an RFC 3339 time (such as "2026-12-01T08:00:00Z")`},
		{"a duration without unit is rejected with its value",
			func(m map[string]any) { at(m, "settings")["min_runtime"] = "10" },
			`settings.min_runtime: "10" is not a Go duration (such as "90s", "10m" or "1h30m")`},
		{"a negative debt grace is rejected",
			func(m map[string]any) { at(m, "settings")["debt_grace"] = "-1m" },
			`settings.debt_grace: "-1m" is negative`},
		{"reservation_max_per_namespace 0 is rejected with the bounds",
			func(m map[string]any) { at(m, "settings")["reservation_max_per_namespace"] = 0 },
			`settings.reservation_max_per_namespace: 0 must be a whole number from 1 to 10000`},
		{"reservation_max_per_namespace above the bound is rejected",
			func(m map[string]any) { at(m, "settings")["reservation_max_per_namespace"] = 10001 },
			`settings.reservation_max_per_namespace: 10001 must be a whole number from 1 to 10000`},
		{"a max_wait above 168h is rejected",
			func(m map[string]any) { at(m, "pending", 0, "flex")["max_wait"] = "169h" },
			`pending[0].flex.max_wait: "169h" is above the maximum of 168h`},
		{"a max_wait of eight days in minutes is rejected",
			func(m map[string]any) { at(m, "pending", 2, "flex")["max_wait"] = "11520m" },
			`pending[2].flex.max_wait: "11520m" is above the maximum of 168h`},
		{"a zero max_wait is rejected",
			func(m map[string]any) { at(m, "pending", 2, "flex")["max_wait"] = "0s" },
			`pending[2].flex.max_wait: "0s" must be more than 0 (leave max_wait out for the default 168h)`},
		{"a bad max_run is rejected",
			func(m map[string]any) { at(m, "pending", 2, "flex")["max_run"] = "4 hours" },
			`pending[2].flex.max_run: "4 hours" is not a Go duration (such as "90s", "10m" or "1h30m")`},
		{"a reservation that ends before it starts is rejected",
			func(m map[string]any) { at(m, "reservations", 0)["end"] = "2026-11-30T00:00:00Z" },
			`reservations[0].end: "2026-11-30T00:00:00Z" is not after start "2026-12-01T00:00:00Z"`},

		// Types and ranges.
		{"an unknown job type is rejected with its value",
			func(m map[string]any) { at(m, "allocations", 0)["type"] = "batc" },
			`allocations[0].type: "batc" is not a job type (service, batch, system or sysbatch)`},
		{"an empty pending type is rejected",
			func(m map[string]any) { at(m, "pending", 2)["type"] = "" },
			`pending[2].type: "" is not a job type (service, batch, system or sysbatch)`},
		{"a priority of 0 is rejected",
			func(m map[string]any) { at(m, "allocations", 1)["priority"] = 0 },
			`allocations[1].priority: 0 is outside 1-100`},
		{"a priority of 101 is rejected",
			func(m map[string]any) { at(m, "pending", 2)["priority"] = 101 },
			`pending[2].priority: 101 is outside 1-100`},
		{"a zero count is rejected",
			func(m map[string]any) { at(m, "pending", 2)["count"] = 0 },
			`pending[2].count: must be at least 1, not 0`},
		{"a negative gpus per allocation is rejected",
			func(m map[string]any) { at(m, "pending", 2)["gpus"] = -8 },
			`pending[2].gpus: must be at least 1, not -8`},
		{"a huge gpus per allocation is rejected",
			func(m map[string]any) { at(m, "pending", 2)["gpus"] = 1 << 40 },
			`pending[2].gpus: must be at most 2147483647, not 1099511627776`},
		{"a zero-GPU reservation is rejected",
			func(m map[string]any) { at(m, "reservations", 0)["gpus"] = 0 },
			`reservations[0].gpus: must be at least 1, not 0`},
		{"a huge quota nominal is rejected",
			func(m map[string]any) { at(m, "quota")["gpus"] = 1 << 40 },
			`quota.gpus: 1099511627776 is too large (at most 2147483647)`},
		{"an empty datacenter is rejected",
			func(m map[string]any) { at(m, "pending", 0)["datacenters"] = []any{"dc1", ""} },
			`pending[0].datacenters[1]: must not be empty`},

		// The quota tree (law L1).
		{"a namespace bound twice is rejected by L1 with the JSON path of the node",
			func(m map[string]any) { at(m, "quota", "children", 1)["namespaces"] = []any{"workspace-a"} },
			`quota.children[1]: quota "Quota1.2": namespace "workspace-a" is already bound to quota "Quota1"`},
		{"children above their parent's nominal are rejected by L1 with the numbers",
			func(m map[string]any) { at(m, "quota", "children", 0)["gpus"] = 6 },
			`quota: quota "Quota1": children's nominal GPUs sum to 10 (Quota1.1 6 + Quota1.2 4), more than its nominal 8`},
		{"a quota name used twice is rejected by L1",
			func(m map[string]any) { at(m, "quota", "children", 1)["name"] = "Quota1.1" },
			`quota.children[1]: quota "Quota1.1": name used twice (first at quota.children[0])`},
		{"a negative quota nominal is rejected by L1",
			func(m map[string]any) { at(m, "quota", "children", 1)["gpus"] = -1 },
			`quota.children[1]: quota "Quota1.2": gpus = -1 is negative`},

		// References and duplicates.
		{"a node ID listed twice is rejected",
			func(m map[string]any) { at(m, "nodes", 1)["id"] = "node-01" },
			`nodes[1].id: node "node-01" is listed twice (also nodes[0])`},
		{"an empty node ID is rejected",
			func(m map[string]any) { at(m, "nodes", 0)["id"] = "" },
			`nodes[0].id: must not be empty`},
		{"a GPU ID on two nodes is rejected",
			func(m map[string]any) { at(m, "nodes", 1, "gpus", 0)["id"] = "GPU-01-1" },
			`nodes[1].gpus[0].id: GPU "GPU-01-1" is listed twice (also nodes[0].gpus[1].id)`},
		{"an allocation on an unknown node is rejected",
			func(m map[string]any) { at(m, "allocations", 0)["node"] = "node-99" },
			`allocations[0].node: unknown node "node-99"`},
		{"a GPU that is on another node is rejected",
			func(m map[string]any) { at(m, "allocations", 0)["gpu_ids"] = []any{"GPU-02-1"} },
			`allocations[0].gpu_ids[0]: GPU "GPU-02-1" is not on node "node-01" (it is on node "node-02")`},
		{"a GPU that no node has is rejected",
			func(m map[string]any) { at(m, "allocations", 1)["gpu_ids"] = []any{"GPU-02-0", "GPU-09-9"} },
			`allocations[1].gpu_ids[1]: GPU "GPU-09-9" is not on node "node-02" (no node has it)`},
		{"a GPU held by two allocations is rejected",
			func(m map[string]any) {
				a := at(m, "allocations", 1)
				a["node"], a["gpu_ids"] = "node-01", []any{"GPU-01-1", "GPU-01-0"}
			},
			`allocations[1].gpu_ids[1]: GPU "GPU-01-0" is used twice (also by allocations[0])`},
		{"a GPU listed twice in one allocation is rejected",
			func(m map[string]any) { at(m, "allocations", 1)["gpu_ids"] = []any{"GPU-02-0", "GPU-02-0"} },
			`allocations[1].gpu_ids[1]: GPU "GPU-02-0" is listed twice in this allocation`},
		{"an allocation ID listed twice is rejected",
			func(m map[string]any) { at(m, "allocations", 1)["id"] = "alloc-1" },
			`allocations[1].id: allocation "alloc-1" is listed twice (also allocations[0])`},
		{"an allocation without a job name is rejected",
			func(m map[string]any) { at(m, "allocations", 1)["job"] = "" },
			`allocations[1].job: must not be empty`},
		{"a stopping_for that is not namespace/job/group is rejected",
			func(m map[string]any) { at(m, "allocations", 1)["stopping_for"] = "chat/server" },
			`allocations[1].stopping_for: "chat/server" is not a claimant of the form "namespace/job/group" (three non-empty parts; a job ID or group with "/" needs the object form {"namespace": ..., "job": ..., "group": ...})`},
		{"a stopping_for string with four parts is rejected, not read as a group with \"/\"",
			func(m map[string]any) { at(m, "allocations", 1)["stopping_for"] = "a/b/c/d" },
			`allocations[1].stopping_for: "a/b/c/d" is not a claimant of the form "namespace/job/group" (three non-empty parts; a job ID or group with "/" needs the object form {"namespace": ..., "job": ..., "group": ...})`},
		{"a stopping_for object without a group is rejected",
			func(m map[string]any) {
				at(m, "allocations", 1)["stopping_for"] = map[string]any{"namespace": "workspace-a", "job": "chat"}
			},
			`allocations[1].stopping_for.group: must not be empty`},
		{"a stopping_for naming a reservation and a claimant is rejected",
			func(m map[string]any) {
				at(m, "allocations", 1)["stopping_for"] = map[string]any{"reservation": "r-1", "job": "chat"}
			},
			`allocations[1].stopping_for: names both reservation "r-1" and a claimant; give one`},
		{"a stopping_for object with an empty job is rejected",
			func(m map[string]any) {
				at(m, "allocations", 1)["stopping_for"] = map[string]any{"namespace": "workspace-a", "job": "", "group": "g"}
			},
			`allocations[1].stopping_for.job: must not be empty`},
		{"a stopping_for of another JSON type is rejected",
			func(m map[string]any) { at(m, "allocations", 1)["stopping_for"] = 7 },
			`allocations[1].stopping_for: want an object, not the number 7`},
		{"a pending group listed twice is rejected",
			func(m map[string]any) { at(m, "pending", 1)["group"] = "server" },
			`pending[1]: group "workspace-a/chat/server" is listed twice (also pending[0])`},
		{"groups of one job with different priorities are rejected",
			func(m map[string]any) { at(m, "pending", 1)["priority"] = 70 },
			`pending[1].priority: 70 differs from 80 in pending[0], a group of the same job "workspace-a/chat"`},
		{"groups of one job with different flex settings are rejected",
			func(m map[string]any) { at(m, "pending", 1, "flex")["max_run"] = "5h" },
			`pending[1].flex: flex {max_wait 24h0m0s, max_run 5h0m0s} differs from flex {max_wait 24h0m0s, max_run 4h0m0s} in pending[0], a group of the same job "workspace-a/chat"`},
		{"an idle flex request is rejected",
			func(m map[string]any) { at(m, "pending", 2)["idle"] = true },
			`pending[2].flex: an idle job (idle: true) cannot be a flex request`},
		{"a reservation ID listed twice is rejected",
			func(m map[string]any) {
				m["reservations"] = append(m["reservations"].([]any), at(m, "reservations", 0))
			},
			`reservations[1].id: reservation "r-1" is listed twice (also reservations[0])`},
		{"a reservation in an unknown quota is rejected",
			func(m map[string]any) { at(m, "reservations", 0)["quota"] = "Quota9" },
			`reservations[0].quota: unknown quota "Quota9"`},
		{"a reservation for a namespace of another quota is rejected",
			func(m map[string]any) { at(m, "reservations", 0)["namespace"] = "workspace-c" },
			`reservations[0].namespace: namespace "workspace-c" is bound to quota "Quota1.2", not to quota "Quota1.1" or below it`},
		{"a reservation for an unbound namespace is rejected",
			func(m map[string]any) { at(m, "reservations", 0)["namespace"] = "elsewhere" },
			`reservations[0].namespace: namespace "elsewhere" is bound to no quota, not to quota "Quota1.1" or below it`},
		// Calendar and Flex fields (DESIGN L10, L11).
		{"an alloc_gpus that does not divide gpus is rejected",
			func(m map[string]any) { at(m, "reservations", 0)["alloc_gpus"] = 3 },
			`reservations[0].alloc_gpus: 3 does not divide gpus 2`},
		{"a zero alloc_gpus is rejected",
			func(m map[string]any) { at(m, "reservations", 0)["alloc_gpus"] = 0 },
			`reservations[0].alloc_gpus: must be at least 1, not 0`},
		{"a negative kill_timeout is rejected",
			func(m map[string]any) { at(m, "allocations", 0)["kill_timeout"] = "-5s" },
			`allocations[0].kill_timeout: "-5s" is negative`},
		{"a max_run above 168h is rejected",
			func(m map[string]any) { at(m, "allocations", 0)["max_run"] = "169h" },
			`allocations[0].max_run: "169h0m0s" is above the maximum of 168h`},
		{"a bad admitted_at is rejected",
			func(m map[string]any) { at(m, "allocations", 0)["admitted_at"] = "yesterday" },
			`allocations[0].admitted_at: "yesterday" is not an RFC 3339 time (such as "2026-12-01T08:00:00Z")`},
		{"a queued_at before submitted_at is rejected",
			func(m map[string]any) { at(m, "pending", 2)["queued_at"] = "2026-12-01T06:00:00Z" },
			`pending[2].queued_at: "2026-12-01T06:00:00Z" is before submitted_at "2026-12-01T07:00:00Z"`},
		{"a flex request naming a reservation is rejected",
			func(m map[string]any) { at(m, "pending", 2)["reservation"] = "r-1" },
			`pending[2].reservation: "r-1": a flex request cannot name a reservation (L11)`},
		{"a negative settle is rejected",
			func(m map[string]any) { at(m, "settings")["settle"] = "-1s" },
			`settings.settle: "-1s" is negative`},
		{"a hold of an unknown reservation is rejected",
			func(m map[string]any) { at(m, "holds", 0, "for")["reservation"] = "r-9" },
			`holds[0].for.reservation: unknown reservation "r-9"`},
		{"a hold naming both a reservation and a claimant is rejected",
			func(m map[string]any) { at(m, "holds", 0, "for")["job"] = "chat" },
			`holds[0].for: names both reservation "r-1" and a claimant; give one`},
		{"a hold with a claimant of two names is rejected",
			func(m map[string]any) { delete(at(m, "holds", 1, "for"), "group") },
			`holds[1].for.group: must not be empty`},
		{"a hold of a GPU of another node is rejected",
			func(m map[string]any) { at(m, "holds", 0)["gpu_ids"] = []any{"GPU-01-0"} },
			`holds[0].gpu_ids[0]: GPU "GPU-01-0" is not on node "node-02"`},
		{"a hold without until is rejected",
			func(m map[string]any) { delete(at(m, "holds", 0), "until") },
			`holds[0].until: missing required key "until"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Unmarshal(edit(t, tt.fn))
			if err == nil {
				t.Fatalf("no error; want %s", tt.want)
			}
			if s != nil {
				t.Errorf("a snapshot came back with the error")
			}
			if err.Error() != tt.want {
				t.Errorf("err =\n%s\nwant\n%s", err, tt.want)
			}
			var serr *Error
			if !errors.As(err, &serr) {
				t.Errorf("err is %T, want *snapshot.Error", err)
			}
		})
	}
}

func TestUnmarshalRejectsBadDocuments(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{"an empty input is rejected",
			"  \n",
			`empty input: a snapshot is one JSON object`},
		{"an array at the top is rejected",
			`[]`,
			`want an object, not an array`},
		{"a syntax error is reported with line and column",
			"{\n  \"time\": \"2026-12-01T08:00:00Z\",\n  \"quota\": {\"name\" \"Q\"}\n}",
			`JSON syntax error at line 3, column 20: invalid character '"' after object key`},
		{"a truncated document is rejected",
			`{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1}`,
			`unexpected end of the JSON input`},
		{"a second object after the first is rejected as trailing data",
			`{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1}} {}`,
			`trailing data after the JSON object at line 1, column 69: "{}"`},
		{"garbage after the object is rejected as trailing data",
			"{\"time\": \"2026-12-01T08:00:00Z\", \"quota\": {\"name\": \"Q\", \"gpus\": 1}}\nxyz",
			`trailing data after the JSON object at line 2, column 1: "xyz"`},
		{"a key given twice is rejected",
			`{"time": "2026-12-01T08:00:00Z", "time": "2026-12-01T09:00:00Z", "quota": {"name": "Q", "gpus": 1}}`,
			`time: key "time" is given twice`},
		{"a quota tree nested too deep is rejected",
			`{"time": "2026-12-01T08:00:00Z", "quota": ` + strings.Repeat(`{"name": "Q", "gpus": 1, "children": [`, 40) +
				strings.Repeat(`]}`, 40) + `}`,
			`quota` + strings.Repeat(`.children[0]`, 35) + `.children: nested more than 72 levels deep`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Unmarshal([]byte(tt.doc))
			if err == nil {
				t.Fatalf("no error; want %s", tt.want)
			}
			if s != nil {
				t.Errorf("a snapshot came back with the error")
			}
			if err.Error() != tt.want {
				t.Errorf("err =\n%s\nwant\n%s", err, tt.want)
			}
		})
	}
}

func TestDecodeReturnsTheReadError(t *testing.T) {
	boom := errors.New("disk on fire")
	s, err := Decode(iotest.ErrReader(boom))
	if !errors.Is(err, boom) || s != nil {
		t.Fatalf("Decode = %v, %v; want nil, %v", s, err, boom)
	}
}

func TestEncodeThenDecodeGivesTheSameSnapshot(t *testing.T) {
	s, err := Unmarshal([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Encode(&buf, s); err != nil {
		t.Fatal(err)
	}
	back, err := Decode(&buf)
	if err != nil {
		t.Fatalf("decoding Encode's output: %v\n%s", err, buf.String())
	}
	if !reflect.DeepEqual(back, s) {
		t.Errorf("round trip changed the snapshot:\n got %+v\nwant %+v", back, s)
	}
}

func TestAStopForAReservationSurvivesTheRoundTrip(t *testing.T) {
	m := map[string]any{}
	if err := json.Unmarshal([]byte(base), &m); err != nil {
		t.Fatal(err)
	}
	at(m, "allocations", 0)["stopping_for"] = map[string]any{"reservation": "r-1"}
	doc, _ := json.Marshal(m)
	s, err := Unmarshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if a := s.Allocations[0]; a.StoppingForReservation != "r-1" || !a.StoppingFor.IsZero() {
		t.Fatalf("allocation = %+v, want stopping for reservation r-1", a)
	}
	out, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Errorf("round trip changed the snapshot:\n got %+v\nwant %+v", back, s)
	}
}

func TestAClaimantWithSlashesNeedsAndSurvivesTheObjectForm(t *testing.T) {
	// A periodic child job's ID and a group name may contain "/".
	want := plan.GroupKey{Namespace: "workspace-a", Job: "nightly/periodic-1764576000", Group: "shard/0"}
	doc := edit(t, func(m map[string]any) {
		at(m, "allocations", 1)["stopping_for"] = map[string]any{"namespace": want.Namespace, "job": want.Job, "group": want.Group}
	})
	s, err := Unmarshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Allocations[1].StoppingFor; got != want {
		t.Fatalf("StoppingFor = %#v, want %#v", got, want)
	}
	var buf bytes.Buffer
	if err := Encode(&buf, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"stopping_for": {
        "namespace": "workspace-a",
        "job": "nightly/periodic-1764576000",
        "group": "shard/0"
      }`) {
		t.Errorf("Encode did not write the object form:\n%s", buf.String())
	}
	back, err := Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Allocations[1].StoppingFor; got != want {
		t.Fatalf("after a round trip StoppingFor = %#v, want %#v", got, want)
	}
}

func TestEncodeWritesStableIndentedJSON(t *testing.T) {
	s := &plan.Snapshot{
		Time:     time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC),
		Quota:    &quota.Node{Name: "Q", GPUs: quota.Plain(8), Namespaces: []string{"ns"}},
		Settings: quota.DefaultSettings(),
		Nodes:    []plan.Node{{ID: "n1", Datacenter: "dc1", GPUs: []plan.GPU{{ID: "g0", Model: "m", Healthy: true}}}},
		Pending: []plan.Pending{{Namespace: "ns", Job: "j", Group: "g", Type: plan.JobBatch, Priority: 50,
			Count: 1, GPUs: 1, SubmittedAt: time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC),
			Flex: &plan.Flex{MaxWait: 72 * time.Hour}}},
	}
	want := `{
  "time": "2026-12-01T08:00:00Z",
  "quota": {
    "name": "Q",
    "gpus": 8,
    "namespaces": [
      "ns"
    ]
  },
  "settings": {
    "min_runtime": "0s",
    "debt_grace": "10m0s",
    "settle": "30s",
    "drain_margin": "1m0s",
    "drain_horizon": "1h0m0s",
    "reservation_max_ahead": "1344h0m0s",
    "reservation_min_duration": "1h0m0s",
    "autoscaler_evaluation_interval": "10s",
    "reservation_max_per_namespace": 100
  },
  "nodes": [
    {
      "id": "n1",
      "datacenter": "dc1",
      "node_pool": "",
      "gpus": [
        {
          "id": "g0",
          "model": "m",
          "healthy": true
        }
      ]
    }
  ],
  "allocations": [],
  "pending": [
    {
      "namespace": "ns",
      "job": "j",
      "group": "g",
      "type": "batch",
      "priority": 50,
      "count": 1,
      "gpus": 1,
      "model": "",
      "datacenters": [],
      "node_pool": "",
      "idle": false,
      "elastic": false,
      "reservation": "",
      "submitted_at": "2026-12-01T07:00:00Z",
      "flex": {
        "max_wait": "72h0m0s"
      }
    }
  ],
  "reservations": []
}
`
	for i := 0; i < 2; i++ {
		out, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != want {
			t.Fatalf("Marshal (run %d) =\n%s\nwant\n%s", i, out, want)
		}
	}
}

func TestEncodePlanWritesTheDocumentedShape(t *testing.T) {
	p := &plan.Plan{
		Actions: []plan.Action{
			{Action: plan.ActionStop, Alloc: "alloc-7", Namespace: "workspace-c", Job: "train-9", Group: "w",
				Node: "node-03", GPUs: 8, Rule: plan.RuleChild, For: plan.GroupKey{Namespace: "workspace-a", Job: "chat", Group: "server"},
				Reason: "child-level preemption for Quota1"},
			{Action: plan.ActionAdmit, Namespace: "workspace-a", Job: "chat", Group: "server", Count: 2,
				Nodes: []string{"node-03", "node-07"}, GPUs: 8, Rule: plan.RuleAdmission},
		},
		Usage: []plan.Usage{{Quota: "Quota1", Nominal: 128, Used: 120, NonIdle: 112, Lendable: 8}},
	}
	var buf bytes.Buffer
	if err := EncodePlan(&buf, p); err != nil {
		t.Fatal(err)
	}
	want := `{
  "actions": [
    {
      "action": "stop",
      "alloc": "alloc-7",
      "namespace": "workspace-c",
      "job": "train-9",
      "group": "w",
      "node": "node-03",
      "gpus": 8,
      "rule": "L5.2",
      "for": {
        "namespace": "workspace-a",
        "job": "chat",
        "group": "server"
      },
      "reason": "child-level preemption for Quota1"
    },
    {
      "action": "admit",
      "namespace": "workspace-a",
      "job": "chat",
      "group": "server",
      "nodes": [
        "node-03",
        "node-07"
      ],
      "count": 2,
      "gpus": 8,
      "rule": "L3"
    }
  ],
  "usage": [
    {
      "quota": "Quota1",
      "flavor": "gpu",
      "nominal": 128,
      "used": 120,
      "nonidle": 112,
      "borrowed": 0,
      "debt": 0,
      "lendable": 8,
      "booked": 0,
      "displaced": 0
    }
  ]
}
`
	if buf.String() != want {
		t.Errorf("EncodePlan =\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestEncodePlanOfAnEmptyPlanWritesEmptyLists(t *testing.T) {
	for _, p := range []*plan.Plan{nil, {}} {
		var buf bytes.Buffer
		if err := EncodePlan(&buf, p); err != nil {
			t.Fatal(err)
		}
		if want := "{\n  \"actions\": [],\n  \"usage\": []\n}\n"; buf.String() != want {
			t.Errorf("EncodePlan(%v) = %q, want %q", p, buf.String(), want)
		}
	}
}

func TestTheReferenceSnapshotDecodes(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "..", "examples", "reference", "snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Nodes) != 16 {
		t.Errorf("%d nodes, want 16", len(s.Nodes))
	}
	held := map[string]int{}
	total := 0
	for _, a := range s.Allocations {
		held[a.Namespace] += a.GPUs()
		total += a.GPUs()
	}
	if total != 128 {
		t.Errorf("allocations hold %d GPUs, want all 128", total)
	}
	for _, ns := range []string{"workspace-a", "workspace-b", "workspace-c"} {
		if held[ns] == 0 {
			t.Errorf("namespace %s holds no GPUs", ns)
		}
	}
	found := false
	for _, p := range s.Pending {
		if p.Namespace == "workspace-a" && p.Type == plan.JobService && p.Priority == 80 && p.Count*p.GPUs == 16 {
			found = true
		}
	}
	if !found {
		t.Errorf("no pending team A inference group of 16 GPUs at priority 80: %+v", s.Pending)
	}
	if s.Quota.Name != "Quota1" || s.Quota.GPUs.Of(quota.ImplicitFlavor) != 128 || !s.Quota.ChildPreemption || len(s.Quota.Children) != 2 {
		t.Errorf("quota tree is not the reference tree: %+v", s.Quota)
	}
}

// FuzzDecode checks that no input makes Unmarshal panic, that it never
// returns a snapshot with an error, and that an accepted snapshot survives
// Encode and Decode unchanged.
func FuzzDecode(f *testing.F) {
	ref, err := os.ReadFile(filepath.Join("..", "..", "examples", "reference", "snapshot.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ref)
	f.Add([]byte(base))
	f.Add([]byte(withIdle))
	f.Add([]byte(flavorDoc))
	f.Add([]byte(withBudgets))
	f.Add([]byte(`{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1, "max_evict": {"gpus": 0, "per": "24h"}}, "evictions": [{"quota": "Q", "gpus": 1, "time": "2026-12-01T08:00:00Z"}]}`))
	f.Add([]byte(`{"time": "2026-12-01T08:00:00Z", "flavors": [{"name": "x", "models": ["X"]}], "quota": {"name": "Q", "gpus": {"x": 1, "y": 2}}}`))
	f.Add([]byte(`{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1}}`))
	f.Add([]byte(`{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1}} []`))
	f.Add([]byte(`[{"a": [1, 2.5, null, true, "x"]}]`))
	f.Add([]byte(`{"time": "2026-12-01T08:00:00Z", "quota": {"name": "Q", "gpus": 1, "namespaces": ["\ud83d\ude00", "a\u0000"]}}`))
	f.Add([]byte("{\"time\": \"2026-12-01T08:00:00Z\", \"quota\": {\"name\": \"Q\xff\", \"gpus\": -0}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Unmarshal(data)
		if err != nil {
			if s != nil {
				t.Fatalf("a snapshot came back with the error %v", err)
			}
			return
		}
		if s == nil || s.Quota == nil {
			t.Fatalf("nil snapshot or tree without an error")
		}
		// The decoder's own scanner accepts only JSON.
		if !json.Valid(data) {
			t.Fatalf("accepted a document that is not JSON")
		}
		// The planner takes every snapshot the decoder accepts.
		if _, err := plan.Compute(s); err != nil {
			t.Fatalf("plan.Compute of an accepted snapshot: %v", err)
		}
		out, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Unmarshal(out)
		if err != nil {
			t.Fatalf("Encode's output does not decode: %v\n%s", err, out)
		}
		out2, err := Marshal(back)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, out2) {
			t.Fatalf("encoding is not stable:\n%s\n---\n%s", out, out2)
		}
	})
}

func TestEncodePlanWritesHoldsJobStopsAndWakeAt(t *testing.T) {
	until := time.Date(2026, 12, 1, 9, 0, 30, 0, time.UTC)
	p := &plan.Plan{
		Actions: []plan.Action{
			{Action: plan.ActionHold, Namespace: "workspace-b", Node: "node-01", GPUs: 2, GPUIDs: []string{"g0", "g1"},
				Rule: plan.RuleReservation, Reservation: "r-1", Until: until},
			{Action: plan.ActionStopJob, Namespace: "workspace-b", Job: "train", GPUs: 8, Rule: plan.RuleEnd, Reservation: "r-1"},
		},
		Usage:  []plan.Usage{},
		WakeAt: until,
	}
	var buf bytes.Buffer
	if err := EncodePlan(&buf, p); err != nil {
		t.Fatal(err)
	}
	want := `{
  "actions": [
    {
      "action": "hold",
      "namespace": "workspace-b",
      "job": "",
      "node": "node-01",
      "gpus": 2,
      "rule": "L10",
      "reservation": "r-1",
      "gpu_ids": [
        "g0",
        "g1"
      ],
      "until": "2026-12-01T09:00:30Z"
    },
    {
      "action": "stop_job",
      "namespace": "workspace-b",
      "job": "train",
      "gpus": 8,
      "rule": "L10.end",
      "reservation": "r-1"
    }
  ],
  "usage": [],
  "wake_at": "2026-12-01T09:00:30Z"
}
`
	if buf.String() != want {
		t.Errorf("EncodePlan =\n%s\nwant\n%s", buf.String(), want)
	}
}
