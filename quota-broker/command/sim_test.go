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
	for _, f := range []string{"report.md", "report.html", "occupancy.svg", "queue.svg", "losses.svg", "events.jsonl", "occupancy-static.svg", "occupancy-kueue.svg",
		"occupancy-gputide-fifo.svg"} {
		if st, err := os.Stat(filepath.Join(dir, "o", f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, want := range []string{"gputide sim: reference", "utilisation", "| | static | kueue | gputide-fifo | gputide |", "report: o/report.md"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.HasSuffix(out.String(), "report: o/report.html\n") {
		t.Errorf("summary does not end with the HTML report's path:\n%s", out.String())
	}
	if !strings.Contains(errb.String(), "100%") {
		t.Errorf("no progress on stderr: %q", errb.String())
	}
	// The same folder without -compare: the compared charts go, other files stay.
	os.WriteFile(filepath.Join(dir, "o", "notes.txt"), []byte("mine"), 0o644)
	if code := Run([]string{"sim", "-days", "0.05", "-out", "o"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	for _, f := range []string{"occupancy-static.svg", "occupancy-kueue.svg", "occupancy-gputide-fifo.svg"} {
		if _, err := os.Stat(filepath.Join(dir, "o", f)); err == nil {
			t.Errorf("%s left from the -compare run", f)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "o", "notes.txt")); string(b) != "mine" {
		t.Errorf("notes.txt: %q, %v; want it left alone", b, err)
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
		{[]string{"sim", "-policy", "fifo"}, `Invalid -policy="fifo": want gputide, gputide-fifo or gputide-heads`},
		{[]string{"sim", "-scenario", bad}, "bad.hcl:5"},
		{[]string{"sim", "-scenario", filepath.Join(dir, "none.hcl")}, "none.hcl"},
	} {
		var out, errb bytes.Buffer
		if code := Run(tc.args, nil, &out, &errb); code != 1 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

// -policy gputide-fifo runs the core before DESIGN L14 as the main run;
// with -compare gputide runs beside it (its charts named after it), and
// the report has its Fair lending table per run.
func TestSimCommandPolicy(t *testing.T) {
	out := filepath.Join(t.TempDir(), "o")
	var stdout, errb bytes.Buffer
	if code := Run([]string{"sim", "-days", "0.05", "-out", out, "-policy", "gputide-fifo", "-compare"}, nil, &stdout, &errb); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), errb.String())
	}
	for _, want := range []string{"policy gputide-fifo", "| | static | kueue | gputide | gputide-fifo |"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout.String())
		}
	}
	if _, err := os.Stat(filepath.Join(out, "occupancy-gputide.svg")); err != nil {
		t.Errorf("gputide's chart: %v", err)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"policy **gputide-fifo**", "\n## Fair lending\n\n| workspace | quota | fair share GPU-h | held GPU-h | below fair share GPU-h |\n",
		"| below fair share GPU-h | quota | static | kueue | gputide | gputide-fifo |\n"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
}

// A run of a quarter of an hour works; one shorter than the minimum is
// refused before anything is written.
func TestSimCommandShort(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "o")
	var stdout, errb bytes.Buffer
	if code := Run([]string{"sim", "-days", "0.01", "-out", out}, nil, &stdout, &errb); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), errb.String())
	}
	if st, err := os.Stat(filepath.Join(out, "occupancy.svg")); err != nil || st.Size() < 1000 {
		t.Errorf("occupancy.svg: %v", err)
	}
	if !strings.Contains(errb.String(), "100% (14m24s of 14m24s)") {
		t.Errorf("progress %q, want 14m24s of 14m24s", errb.String())
	}
	out2 := filepath.Join(dir, "o2")
	stdout.Reset()
	errb.Reset()
	code := Run([]string{"sim", "-days", "0.0005", "-out", out2}, nil, &stdout, &errb)
	if want := "Invalid -days=0.0005: that is 43s of simulated time; want at least 1m00s"; code != 1 || !strings.Contains(errb.String(), want) {
		t.Errorf("exit %d, stderr %q; want 1 and %q", code, errb.String(), want)
	}
	if _, err := os.Stat(out2); err == nil {
		t.Errorf("a refused run created %s", out2)
	}
}

// -h says what -days 0 means and the shortest run.
func TestSimHelpDays(t *testing.T) {
	h := (&SimCommand{}).Help()
	for _, want := range []string{"0, the default, runs the scenario's length", "At least a minute and two\n    broker intervals"} {
		if !strings.Contains(h, want) {
			t.Errorf("help lacks %q:\n%s", want, h)
		}
	}
}

// -compare-quota runs a what-if tree beside the scenario's in one report;
// -quota runs it instead; a tree that cannot replace it is refused.
func TestSimCommandWhatIf(t *testing.T) {
	whatif, err := filepath.Abs("../../examples/reference/quota-whatif.hcl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "o")
	var stdout, errb bytes.Buffer
	if code := Run([]string{"sim", "-days", "0.1", "-out", out, "-compare-quota", whatif}, nil, &stdout, &errb); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), errb.String())
	}
	for _, f := range []string{"occupancy-whatif.svg", "queue-whatif.svg", "losses-whatif.svg"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, "report.md"))
	for _, want := range []string{"| quota nominal (GPUs at the start) | gputide | whatif |", "| Quota1.1 | 48 | 56 |",
		"- **whatif**: gputide with the quota tree of `" + whatif + "`", "|  | gputide | whatif | best | why |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	stdout.Reset()
	if code := Run([]string{"sim", "-days", "0.05", "-out", out, "-quota", whatif}, nil, &stdout, &errb); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), errb.String())
	}
	if md, _ := os.ReadFile(filepath.Join(out, "report.md")); !strings.Contains(string(md), "| Quota1.1 | 56 |") {
		t.Errorf("-quota: report.md does not show Quota1.1 at 56")
	} else if want := "- quota tree: " + whatif + " (-quota), instead of the scenario's\n"; !strings.Contains(string(md), want) {
		t.Errorf("-quota: report.md's inputs lack %q", want)
	}
	if _, err := os.Stat(filepath.Join(out, "occupancy-whatif.svg")); err == nil {
		t.Error("occupancy-whatif.svg left from the -compare-quota run")
	}
	bad := filepath.Join(dir, "flat.hcl")
	os.WriteFile(bad, []byte("quota \"Quota1\" {\n  gpus = 128\n  namespaces = [\"workspace-a\", \"workspace-b\", \"workspace-c\"]\n}\n"), 0o644)
	errb.Reset()
	if code := Run([]string{"sim", "-days", "0.05", "-out", out, "-compare-quota", bad}, nil, &stdout, &errb); code != 1 ||
		!strings.Contains(errb.String(), "-compare-quota="+bad) || !strings.Contains(errb.String(), `no quota node "Quota1.1"`) {
		t.Errorf("a flat tree: exit %d, stderr %q", code, errb.String())
	}
}
