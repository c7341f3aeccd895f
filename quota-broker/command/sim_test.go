package command

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gputide sim runs the embedded reference scenario from any folder and
// writes the report, the chart and the events.
func TestSimCommand(t *testing.T) {
	dir := t.TempDir()
	wd, _ := os.Getwd()
	t.Cleanup(func() { os.Chdir(wd) })
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := Run([]string{"sim", "-days", "0.5", "-out", "o", "-compare", "-seed", "3"}, nil, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	for _, f := range []string{"report.md", "occupancy.svg", "events.jsonl", "occupancy-static.svg", "occupancy-kueue.svg"} {
		if st, err := os.Stat(filepath.Join(dir, "o", f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, want := range []string{"gputide sim: reference", "utilisation", "| | static | kueue | gputide |", "report: o/report.md"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errb.String(), "100%") {
		t.Errorf("no progress on stderr: %q", errb.String())
	}
}

func TestSimCommandErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.hcl")
	os.WriteFile(bad, []byte("quota = \"q.hcl\"\ntime_zone = \"UTC\"\nstart = \"2026-01-01\"\nlength = \"1h\"\nbogus = 1\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "-days", "-1"}, "Invalid -days"},
		{[]string{"sim", "-nope"}, "Error parsing flags"},
		{[]string{"sim", "extra"}, "takes no arguments"},
		{[]string{"sim", "-scenario", bad}, "bad.hcl:5"},
		{[]string{"sim", "-scenario", filepath.Join(dir, "none.hcl")}, "none.hcl"},
	} {
		var out, errb bytes.Buffer
		if code := Run(tc.args, nil, &out, &errb); code != 1 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}
