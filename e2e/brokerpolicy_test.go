package e2e

// The broker's own Nomad token need not be a management token: with a
// token of examples/reference/acl/gputide-broker.policy.hcl alone, on a
// Nomad dev agent with ACLs enabled, the broker creates its holding pool,
// watches (event stream, lists, scaling policies), admits jobs and
// preempts for another team (job register into the holding pool, then
// alloc stop), and no Nomad call of it is refused.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/hashicorp/nomad/api"
)

func TestBrokerWithItsReferencePolicy(t *testing.T) {
	a := startGPUNomadACL(t, true)
	applyReferenceNamespaces(t, a)
	c := a.Client // management: the test's own submissions
	rules, err := os.ReadFile(filepath.Join(referenceDir, "acl", "gputide-broker.policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ACLPolicies().Upsert(&api.ACLPolicy{Name: "gputide-broker", Rules: string(rules)}, nil); err != nil {
		t.Fatalf("policy gputide-broker: %v", err)
	}
	tok, _, err := c.ACLTokens().Create(&api.ACLToken{Name: "gputide-broker", Type: "client", Policies: []string{"gputide-broker"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.NodePools().Info(build.DefaultHoldingPool, nil); err == nil {
		t.Fatalf("the holding pool exists before the broker starts; the test would not check that the broker may create it")
	}

	dir := t.TempDir()
	quotaFile := filepath.Join(dir, "quota.hcl")
	writeQuota(t, quotaFile, 3, 5)
	cfg := filepath.Join(dir, "broker.hcl")
	src := fmt.Sprintf(`
nomad {
  address = %q
  token   = %q
}
quota_file   = "quota.hcl"
interval     = "2s"
staleness    = "3s"
http_bind    = "127.0.0.1:%d"
log_level    = "debug"
admin_policy = "gputide-admin"
`, a.Addr, tok.SecretID, freePorts(t, 1)[0])
	if err := os.WriteFile(cfg, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b := runBroker(t, cfg, quotaFile) // waits until it acts: the holding pool was created
	if _, _, err := c.NodePools().Info(build.DefaultHoldingPool, nil); err != nil {
		t.Fatalf("holding pool: %v", err)
	}

	// Admissions into a full node, then team A's inference preempts team
	// C's training (use case 1): register into the holding pool, alloc stop.
	_, cTrain, _ := fill(t, c)
	submit(t, c, jobSpec{Namespace: "workspace-a", ID: "inference", Type: "service", Priority: 80, Count: 1, GPUs: 4})
	waitRunning(t, c, "workspace-a", "inference", 1, 60*time.Second)
	if j := jobInfo(t, c, "workspace-c", "training"); *j.NodePool != build.DefaultHoldingPool {
		t.Fatalf("the victim's job is in pool %q, want the holding pool", *j.NodePool)
	}
	for _, id := range cTrain {
		al, _, err := c.Allocations().Info(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		if al.DesiredStatus != api.AllocDesiredStatusStop {
			t.Errorf("victim %s desired status %q, want stop", id, al.DesiredStatus)
		}
	}
	// Two more planning cycles, then no refusal anywhere in the log (scaling
	// policies and lists included). Nomad's API client words a refusal
	// "Unexpected response code: 403 (Permission denied)"; a bare "403"
	// also matches node and allocation IDs (one CI run failed on node
	// 84f8d5e8-38be-a894-1403-...).
	time.Sleep(5 * time.Second)
	log := b.Log.String()
	for _, refused := range []string{"code: 403", "ermission denied", "cannot reach Nomad"} {
		if strings.Contains(log, refused) {
			t.Errorf("the broker log shows %q: a call its policy does not allow:\n%s", refused, tail(log, 6000))
			break
		}
	}
	// Nomad gives the event stream's Namespace topic (watch.NamespaceTopic)
	// to management tokens only and closes at once a stream of this token
	// that asks for it: the broker leaves the topic out for such a token
	// and lists namespaces at each cycle instead, so its stream stays open
	// (before that, 6 to 9 times in 13 to 15 s).
	reopened := strings.Count(log, "lost the Nomad event stream")
	t.Logf("event stream reopened %d times in %s", reopened, time.Since(start).Round(time.Second))
	if reopened > 1 {
		t.Errorf("the event stream was reopened %d times (at most 1 expected): the broker polls instead of watching:\n%s", reopened, tail(log, 6000))
	}
	if !strings.Contains(log, "watching namespaces by listing them at each planning cycle") {
		t.Errorf("the broker does not log that it lists namespaces for its client token:\n%s", tail(log, 6000))
	}
	if strings.Contains(log, tok.SecretID) {
		t.Error("the broker log shows its token")
	}
}
