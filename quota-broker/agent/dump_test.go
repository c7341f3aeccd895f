package agent

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/go-hclog"
)

func TestDumpsToRemoveTakesTheOldestPairsFirst(t *testing.T) {
	names := []string{
		"plan-20261201T120002.000000000.json", "snapshot-20261201T120002.000000000.json",
		"snapshot-20261201T120000.000000000.json", "plan-20261201T120000.000000000.json",
		"plan-20261201T120001.000000000.json", "snapshot-20261201T120001.000000000.json",
		"notes.txt", "snapshot-.json", "plan-x.yaml", "mine.json",
	}
	cases := map[string]struct {
		max  int
		want []string
	}{
		"0 never prunes":  {0, nil},
		"under the bound": {6, nil},
		"one pair over":   {4, []string{"plan-20261201T120000.000000000.json", "snapshot-20261201T120000.000000000.json"}},
		"odd bound": {3, []string{"plan-20261201T120000.000000000.json", "snapshot-20261201T120000.000000000.json",
			"plan-20261201T120001.000000000.json"}},
		"keep one": {1, []string{"plan-20261201T120000.000000000.json", "snapshot-20261201T120000.000000000.json",
			"plan-20261201T120001.000000000.json", "snapshot-20261201T120001.000000000.json",
			"plan-20261201T120002.000000000.json"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if d := cmp.Diff(c.want, dumpsToRemove(names, c.max)); d != "" {
				t.Errorf("dumpsToRemove(max %d) (-want +got):\n%s", c.max, d)
			}
		})
	}
}

// The agent's dump keeps dump_dir at dump_max_files: the newest pairs stay,
// files it did not write are left alone.
func TestAgentDumpIsBoundedByDumpMaxFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a := &Agent{cfg: &Config{DumpDir: dir, DumpMaxFiles: 4}, log: hclog.NewNullLogger(), now: func() time.Time { return clock }}
	s := &plan.Snapshot{Time: clock}
	p := &plan.Plan{}
	for i := 0; i < 5; i++ {
		a.dump(s, p, nil)
		clock = clock.Add(time.Second)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	sort.Strings(got)
	want := []string{"README",
		"plan-20261201T120003.000000000.json", "plan-20261201T120004.000000000.json",
		"snapshot-20261201T120003.000000000.json", "snapshot-20261201T120004.000000000.json"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("dump_dir after 5 dumps with dump_max_files = 4 (-want +got):\n%s", d)
	}
}

func TestPruneDumpsNamesTheDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	n, err := pruneDumps(dir, 10)
	if err == nil || n != 0 {
		t.Fatalf("pruneDumps(absent dir) = %d, %v; want 0 and an error", n, err)
	}
	if want := "failed to list dump_dir " + dir; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Errorf("error = %q; want it to start with %q", err, want)
	}
}

func TestDumpMaxFilesDefaultsAndZero(t *testing.T) {
	t.Setenv("NOMAD_ADDR", "")
	for src, want := range map[string]int{`quota_file = "q.hcl"`: DefaultDumpMaxFiles, "quota_file = \"q.hcl\"\ndump_max_files = 0": 0} {
		c, err := ParseConfig([]byte(src), "broker.hcl")
		if err != nil {
			t.Fatal(err)
		}
		if c.DumpMaxFiles != want {
			t.Errorf("%q: DumpMaxFiles = %d; want %d", src, c.DumpMaxFiles, want)
		}
	}
}
