package build

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// jobmeta.CheckAdmitPool (issue 10 item 4): the pool must be listed in admit_pools
// (nil: ["default"]) and, when Nomad's pools are known, exist there.
func TestCheckAdmitPool(t *testing.T) {
	nomadPools := map[string]bool{"all": true, "default": true, "gpu-a100": true}
	for _, tc := range []struct {
		pool  string
		admit []string
		pools map[string]bool
		want  string
	}{
		{"default", nil, nomadPools, ""},
		{"gpu-a100", nil, nomadPools, `job meta gputide_pool = "gpu-a100": not one of the broker's admit_pools ["default"]`},
		{"gpu-a100", []string{"default", "gpu-a100"}, nomadPools, ""},
		{"gpu-h100", []string{"gpu-h100"}, nomadPools, `job meta gputide_pool = "gpu-h100": no such node pool in Nomad`},
		{"gpu-h100", []string{"gpu-h100"}, nil, ""}, // pools not listed: not checked
		{"default", []string{"gpu-a100"}, nomadPools, `job meta gputide_pool = "default": not one of the broker's admit_pools ["gpu-a100"]`},
	} {
		got := ""
		if err := jobmeta.CheckAdmitPool(tc.pool, tc.admit, tc.pools); err != nil {
			got = err.Error()
			if _, ok := err.(*jobmeta.MetaError); !ok {
				t.Errorf("%s %v: error %T, want *jobmeta.MetaError", tc.pool, tc.admit, err)
			}
		}
		if got != tc.want {
			t.Errorf("jobmeta.CheckAdmitPool(%q, %v) = %q, want %q", tc.pool, tc.admit, got, tc.want)
		}
	}
}

// ListAll reads Nomad's pools; Build gives a job whose gputide_pool is not
// admitted, or not in Nomad, a meta error and no pending groups; Refresh
// lists the pools again when a changed job names an unknown one.
func TestBuildChecksTheAdmitPool(t *testing.T) {
	f, s := listRecorded(t)
	if diff := cmp.Diff(map[string]bool{"all": true, "default": true}, raw(s).Pools); diff != "" {
		t.Fatalf("pools (-want +got):\n%s", diff)
	}
	k := plan.JobKey{Namespace: "workspace-b", Job: "training"}
	build := func(admit []string) *Build {
		return From(s, Input{Now: at(t), Quota: e2eTree(), Settings: quota.DefaultSettings(),
			Accepted: func(plan.JobKey) bool { return true }, AdmitPools: admit})
	}
	metaErr := func(b *Build) string {
		if err := b.Jobs[k].MetaErr; err != nil {
			return err.Error()
		}
		return ""
	}
	if b := build(nil); metaErr(b) != "" || len(b.Snapshot.Pending) != 1 {
		t.Fatalf("default pool: meta error %q, pending %+v", metaErr(b), b.Snapshot.Pending)
	}
	b := build([]string{"gpu-a100"})
	if got, want := metaErr(b), `job meta gputide_pool = "default": not one of the broker's admit_pools ["gpu-a100"]`; got != want {
		t.Fatalf("meta error = %q, want %q", got, want)
	}
	if len(b.Snapshot.Pending) != 0 {
		t.Fatalf("pending = %+v, want none", b.Snapshot.Pending)
	}

	// The job now names gpu-a100, which Nomad lacks: a meta error.
	j := *raw(s).Jobs[k]
	j.Meta = map[string]string{jobmeta.MetaPool: "gpu-a100"}
	raw(s).Jobs[k] = &j
	b = build([]string{"default", "gpu-a100"})
	if got, want := metaErr(b), `job meta gputide_pool = "gpu-a100": no such node pool in Nomad`; got != want {
		t.Fatalf("meta error = %q, want %q", got, want)
	}
	// The pool is created; the job's next change lists the pools again.
	f.Mu.Lock()
	f.Files["/v1/node/pools"] = withPool(t, "gpu-a100")
	f.Mu.Unlock()
	before := f.Count("GET", "/v1/node/pools")
	raw(s).Dirty[k] = true
	_ = s.Refresh(context.Background(), f.Client())
	if got := f.Count("GET", "/v1/node/pools"); got != before+1 {
		t.Fatalf("pool lists = %d, want %d", got, before+1)
	}
	if got := metaErr(build([]string{"default", "gpu-a100"})); got != "" {
		t.Fatalf("meta error after the pool was created = %q", got)
	}
	// A change of a job naming a known pool lists nothing.
	raw(s).Dirty[k] = true
	_ = s.Refresh(context.Background(), f.Client())
	if got := f.Count("GET", "/v1/node/pools"); got != before+1 {
		t.Fatalf("pool lists = %d, want still %d", got, before+1)
	}
}

// withPool writes the recorded pool list plus a pool named name into a
// temporary file and returns its path relative to the recorded folder, for
// fakeNomad.files.
func withPool(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(recorded, "node-pools.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pools []map[string]any
	if err := json.Unmarshal(raw, &pools); err != nil {
		t.Fatal(err)
	}
	pools = append(pools, map[string]any{"Name": name, "Description": "", "CreateIndex": 200, "ModifyIndex": 200})
	out, _ := json.Marshal(pools)
	path := filepath.Join(t.TempDir(), "node-pools.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	base, err := filepath.Abs(recorded)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(base, path)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}
