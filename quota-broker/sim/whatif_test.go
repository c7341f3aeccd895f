package sim

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A what-if tree replaces the scenario's: the same cluster, workload and
// moves; a tree that lacks a moved node or a used namespace is refused,
// naming the file and what it lacks.
func TestWithQuotaFile(t *testing.T) {
	sc, err := LoadFile(referenceFile)
	if err != nil {
		t.Fatal(err)
	}
	w, err := sc.WithQuotaFile("../../examples/reference/quota-whatif.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Quota.Find("Quota1.1").GPUs; got != 56 {
		t.Errorf("what-if Quota1.1 = %d, want 56", got)
	}
	if sc.Quota.Find("Quota1.1").GPUs != 48 || len(w.Moves) != len(sc.Moves) || w.Length != sc.Length {
		t.Errorf("the scenario changed, or the copy lost its moves")
	}
	dir := t.TempDir()
	for name, c := range map[string]struct{ src, want string }{
		"no moved node": {`quota "Quota1" {
  gpus = 128
  namespaces = ["workspace-a", "workspace-b", "workspace-c"]
}`, `no quota node "Quota1.1", which quota_move`},
		"unbound namespace": {`quota "Quota1" {
  gpus = 128
  namespaces = ["workspace-a"]
  quota "Quota1.1" {
    gpus = 48
    namespaces = ["workspace-b"]
  }
  quota "Quota1.2" {
    gpus = 80
    namespaces = ["workspace-x"]
  }
}`, `namespace "workspace-c" is not bound`},
	} {
		f := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".hcl")
		if err := os.WriteFile(f, []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := sc.WithQuotaFile(f)
		if !errors.Is(err, ErrQuotaFile) || !strings.Contains(err.Error(), f) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want ErrQuotaFile naming %s and %q", name, err, f, c.want)
		}
	}
	if _, err := sc.WithQuotaFile(filepath.Join(dir, "absent.hcl")); err == nil {
		t.Error("a missing file: no error")
	}
}
