package sim

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
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
	if got := w.Quota.Find("Quota1.1").GPUs.Of(quota.ImplicitFlavor); got != 56 {
		t.Errorf("what-if Quota1.1 = %d, want 56", got)
	}
	if sc.Quota.Find("Quota1.1").GPUs.Of(quota.ImplicitFlavor) != 48 || len(w.Moves) != len(sc.Moves) || w.Length != sc.Length {
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

// A victim whose checkpoint write fits in its kill_timeout (DESIGN L8)
// loses no work; one whose write does not fit loses the work since its
// last periodic checkpoint.
func TestCheckpointWrite(t *testing.T) {
	for _, c := range []struct {
		kill time.Duration
		want time.Duration
	}{{30 * time.Second, 0}, {10 * time.Second, 10 * time.Minute}} {
		s := &sim{sc: &Scenario{Zone: time.UTC}, res: &Result{rules: map[string]*RuleStats{}}, now: int64(time.Hour)}
		j := &job{spec: &JobSpec{Checkpoint: 25 * time.Minute, CheckpointWrite: 20 * time.Second, KillTimeout: c.kill, GPUs: 8, Idle: true},
			desired: 1, progressing: true, remaining: 10 * time.Hour}
		s.halt(j, plan.RuleIdleDebt)
		if want := c.want.Hours() * 8; math.Abs(s.res.LostGPUh-want) > 1e-9 || j.remaining != 9*time.Hour+c.want {
			t.Errorf("kill_timeout %s: lost %.3f GPU-h, %s left; want %.3f and %s", c.kill, s.res.LostGPUh, j.remaining, want, 9*time.Hour+c.want)
		}
		if c.want > 0 && (len(s.res.Losses) != 1 || !s.res.Losses[0].Borrowing || s.res.rules["L5.1"].LostBorrowing != c.want.Hours()*8) {
			t.Errorf("kill_timeout %s: losses %+v, want one by a borrowing victim", c.kill, s.res.Losses)
		}
	}
}
