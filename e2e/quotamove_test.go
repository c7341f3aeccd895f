package e2e

// Use case 2 of issue 10 on the Consul store (DESIGN §1, L9): an admin
// moves one GPU from Quota1.2 to Quota1.1 with `gputide quota move` while
// both teams use all of their quota. The move is one guarded write: the
// tree is 4/4 at once and team C holds 1 GPU of debt. Team B's next 1-GPU
// job waits out debt_grace, then gets the GPU of the allocation that is
// team C's debt (L5 step 1); nothing else is stopped. Needs NOMAD_BIN and
// CONSUL_BIN; without them it skips (fails under CI).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	brokerapi "github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/command"
	"github.com/hashicorp/cli"
)

// moveGrace is the tree's debt_grace in this test (the default is 10m).
const moveGrace = 30 * time.Second

// moveAdminToken is the broker's admin_token: the test Nomad runs without
// ACLs, so quota writes need it (docs/api.md).
const moveAdminToken = "e2e-quota-move-admin"

func TestQuotaMove(t *testing.T) {
	consulAddr := startConsul(t)
	a := startGPUNomad(t)
	c := a.Client
	defer cleanJobs(t, c)

	dir := t.TempDir()
	quotaFile := filepath.Join(dir, "quota.hcl")
	src := fmt.Sprintf("settings {\n  debt_grace = %q\n}\n", moveGrace.String()) + fmt.Sprintf(e2eQuota, 3, 5)
	if err := os.WriteFile(quotaFile, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePorts(t, 1)[0]
	cfg := filepath.Join(dir, "broker.hcl")
	conf := fmt.Sprintf(`
nomad {
  address = %q
}
consul {
  address = %q
  prefix  = "gputide-e2e-move/"
}
quota_file  = "quota.hcl"
interval    = "2s"
staleness   = "3s"
http_bind   = "127.0.0.1:%d"
log_level   = "debug"
admin_token = %q
open_reads_without_acl = true
`, a.Addr, consulAddr, port, moveAdminToken)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	b := runBroker(t, cfg, quotaFile)
	if h, err := b.health(); err != nil || h.Store != "consul" {
		t.Fatalf("broker health %+v %v, want the consul store", h, err)
	}

	bTrain, cTrain, cNote := fill(t, c) // 3 of 3 and 5 of 5: 8 of 8 GPUs
	noteGPUs := gpusOf(t, c, cNote)
	before := stoppedAllocs(t, c)

	// The move through the CLI's command, against the broker's API.
	ui := cli.NewMockUi()
	cmds := command.Commands(command.Meta{Ui: ui})
	mk, ok := cmds["quota move"]
	if !ok {
		t.Fatal(`no "quota move" command`)
	}
	cmd, err := mk()
	if err != nil {
		t.Fatal(err)
	}
	moved := time.Now()
	if code := cmd.Run([]string{"-address", "http://" + b.Addr, "-token", moveAdminToken,
		"-from", "Quota1.2", "-to", "Quota1.1", "-gpus", "1"}); code != 0 {
		t.Fatalf("gputide quota move: exit %d\n%s%s", code, ui.OutputWriter.String(), ui.ErrorWriter.String())
	}
	t.Logf("gputide quota move: %s", strings.TrimSpace(ui.OutputWriter.String()))

	// 4/4 at once, debt 1 on Quota1.2 (the next plan, within a few seconds).
	cl, err := brokerapi.NewClient("http://"+b.Addr, "", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	type fig struct{ Nominal, Used, Nonidle, Debt int }
	want := map[string]fig{"Quota1": {8, 8, 8, 1}, "Quota1.1": {4, 3, 3, 0}, "Quota1.2": {4, 5, 5, 1}}
	var got map[string]fig
	err = waitFor(5*time.Second, 100*time.Millisecond, func() error {
		qs, err := cl.Quotas(context.Background())
		if err != nil {
			return err
		}
		got = map[string]fig{}
		for _, q := range qs.Quotas {
			got[q.Name] = fig{q.NominalGPUs, q.UsedGPUs, q.NonidleGPUs, q.DebtGPUs}
		}
		if d := cmp.Diff(want, got); d != "" {
			return fmt.Errorf("/v1/quotas (-want +got):\n%s", d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("figures as wanted %s after the move", time.Since(moved).Round(time.Millisecond))

	// Team B's next 1-GPU job waits out the grace: nothing is stopped for it.
	submit(t, c, jobSpec{Namespace: "workspace-b", ID: "extra", Type: "batch", Priority: 50, Count: 1, GPUs: 1})
	var reason string
	for time.Since(moved) < moveGrace-3*time.Second {
		if m := jobInfo(t, c, "workspace-b", "extra").Meta; m["gputide_status"] == "waiting" {
			reason = m["gputide_reason"]
		}
		if got := running(t, c, "workspace-b", "extra"); len(got) != 0 {
			t.Fatalf("extra runs %s after the move, within the %s debt grace: %v", time.Since(moved), moveGrace, got)
		}
		if got := minus(stoppedAllocs(t, c), before); len(got) != 0 {
			t.Fatalf("stopped %v within the debt grace", got)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if reason == "" {
		t.Fatal("extra was never marked waiting (gputide_status) during the debt grace")
	}
	t.Logf("extra waits during the grace: %q", reason)
	// Then it gets exactly the allocation that is team C's debt: the
	// notebook, the newest of Quota1.2's allocations, which does not fit
	// its 4 GPUs after the two older 2-GPU training allocations (L9 ledger).
	extra := waitRunning(t, c, "workspace-b", "extra", 1, 45*time.Second)
	after := time.Since(moved)
	t.Logf("extra runs %s after the move (grace %s)", after.Round(time.Millisecond), moveGrace)
	if after < moveGrace {
		t.Fatalf("extra ran %s after the move, before the %s grace ended", after, moveGrace)
	}
	if stopped := minus(stoppedAllocs(t, c), before); !same(stopped, cNote) {
		t.Fatalf("stopped %v, want exactly team C's debt, its notebook %v", stopped, cNote)
	}
	if g := gpusOf(t, c, extra); !same(g, noteGPUs) {
		t.Fatalf("extra holds %v, want the notebook's GPUs %v", g, noteGPUs)
	}
	if !same(running(t, c, "workspace-c", "training"), cTrain) || !same(running(t, c, "workspace-b", "training"), bTrain) {
		t.Fatal("the training of team B or team C changed")
	}
	rec := b.preemptions(t)
	if len(rec) != 1 || rec[0].Alloc != cNote[0] || rec[0].Rule != "L5.1" || rec[0].GPUs != 1 ||
		rec[0].For != "workspace-b/extra/main" {
		t.Fatalf("preemptions %+v, want the notebook %s once, L5.1, for workspace-b/extra/main", rec, cNote[0])
	}
}
