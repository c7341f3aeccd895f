package e2e

// Isolation end to end (issue 10, "Isolation e2e"; DESIGN §9): a Nomad dev
// agent with ACLs enabled and bootstrapped through the API, the reference
// namespaces and ACL policies (examples/reference/namespaces, acl/), a
// token per team and the bootstrap (management) token for the admin, and a
// broker whose own Nomad calls use the management token. Every right of
// the table in docs/api.md that a team or an anonymous caller meets is
// checked against the real agent: team B manages workspace-b and nothing
// else, sees team C's preemptions redacted, cannot write quotas; a job team
// B registers straight into a real pool while GPUs are being freed for
// another team's claimant is suspended at once (Nomad CE checks no
// node-pool ACL at registration) and the claimant gets the GPUs.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	brokerapi "github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/hashicorp/nomad/api"
)

// referenceDir is the reference scenario's folder.
const referenceDir = "../examples/reference"

func TestIsolation(t *testing.T) {
	start := time.Now()
	a := startGPUNomadACL(t, true)
	applyReferenceNamespaces(t, a)
	secrets := applyReferencePolicies(t, a.Client)
	b := startACLBroker(t, a)
	t.Cleanup(func() {
		for name, secret := range secrets {
			if strings.Contains(b.Log.String(), secret) {
				t.Errorf("the broker log shows %s's token", name)
			}
		}
	})
	t.Logf("agents ready after %s", time.Since(start).Round(time.Millisecond))

	admin := brokerClient(t, b, a.ManagementToken)
	teamB := brokerClient(t, b, secrets["team-b"])
	teamC := brokerClient(t, b, secrets["team-c"])
	anon := brokerClient(t, b, "")
	nomadA, nomadB, nomadC := nomadClient(t, a, secrets["team-a"]), nomadClient(t, a, secrets["team-b"]), nomadClient(t, a, secrets["team-c"])
	ctx := context.Background()

	t.Run("team B manages workspace-b", func(t *testing.T) {
		if _, err := teamB.Quotas(ctx); err != nil {
			t.Fatalf("quotas: %v", err)
		}
		if _, err := teamB.Queue(ctx, "workspace-b"); err != nil {
			t.Fatalf("queue: %v", err)
		}
		p, err := teamB.Plan(ctx, planBody(t, jobSpec{Namespace: "workspace-b", ID: "preview", Type: "batch", Priority: 50, Count: 1, GPUs: 1}))
		if err != nil {
			t.Fatalf("plan of a new workspace-b job: %v", err)
		}
		if p.Namespace != "workspace-b" || p.Job != "preview" || len(p.Actions) == 0 {
			t.Fatalf("plan = %+v", p)
		}
		r, err := teamB.CreateReservation(ctx, brokerapi.BookingRequest{ID: "b-night", Namespace: "workspace-b", GPUs: 1,
			Start: time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339), Duration: "1h"})
		if err != nil {
			t.Fatalf("booking in workspace-b: %v", err)
		}
		if r.Reservation.Namespace != "workspace-b" || r.Reservation.GPUs != 1 || r.Reservation.ID != "b-night" {
			t.Fatalf("booking = %+v", r.Reservation)
		}
		list, err := teamB.Reservations(ctx, "workspace-b")
		if err != nil || len(list.Reservations) != 1 || list.Reservations[0].ID != "b-night" {
			t.Fatalf("team B's bookings = %+v, %v", list, err)
		}
		// Team C cannot read it: another namespace's reservation is 404.
		_, err = teamC.Reservation(ctx, "b-night")
		wantStatus(t, "team C reads team B's booking", err, 404)
		// Team C can neither cancel it nor learn that it exists.
		_, err = teamC.CancelReservation(ctx, "b-night", false)
		wantStatus(t, "team C cancels team B's booking", err, 404)
		// Team C lists it redacted: namespace and GPUs only.
		all, err := teamC.Reservations(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range all.Reservations {
			if e.Namespace == "workspace-b" && (e.ID != "" || e.Start != nil || e.Node != "") {
				t.Fatalf("team C sees team B's booking unredacted: %+v", e)
			}
		}
		if _, err := teamB.CancelReservation(ctx, "b-night", false); err != nil {
			t.Fatalf("team B cancels its booking: %v", err)
		}
	})

	t.Run("team B is refused on workspace-c and on quota writes", func(t *testing.T) {
		_, err := teamB.CreateReservation(ctx, brokerapi.BookingRequest{Namespace: "workspace-c", GPUs: 1,
			Start: time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339), Duration: "1h"})
		wantStatus(t, "team B books in workspace-c", err, 403)
		_, err = teamB.Plan(ctx, planBody(t, jobSpec{Namespace: "workspace-c", ID: "preview", Type: "batch", Priority: 50, Count: 1, GPUs: 1}))
		wantStatus(t, "team B plans a workspace-c job", err, 403)
		_, err = teamB.QuotaMove(ctx, "Quota1.2", "Quota1.1", 1)
		wantStatus(t, "team B moves quota", err, 403)
		_, err = teamB.QuotaScale(ctx, "Quota1.1", 4)
		wantStatus(t, "team B scales a quota", err, 403)
		_, err = teamB.QuotaApply(ctx, []byte(fmt.Sprintf(e2eQuota, 4, 4)), "")
		wantStatus(t, "team B applies a tree", err, 403)
		for _, path := range []string{"/v1/plan", "/v1/snapshot"} {
			if got := brokerGet(t, b, path, secrets["team-b"]); got != 403 {
				t.Errorf("team B GET %s = %d, want 403", path, got)
			}
		}
	})

	t.Run("anonymous callers are refused", func(t *testing.T) {
		if got := brokerGet(t, b, "/v1/agent/health", ""); got != 200 {
			t.Errorf("anonymous health = %d, want 200 (needs nothing)", got)
		}
		for _, path := range []string{"/v1/quotas", "/v1/metrics", "/v1/queue", "/v1/preemptions", "/v1/reservations", "/v1/plan", "/v1/snapshot"} {
			if got := brokerGet(t, b, path, ""); got != 403 {
				t.Errorf("anonymous GET %s = %d, want 403", path, got)
			}
		}
		if got := brokerGet(t, b, "/v1/metrics", secrets["team-b"]); got != 200 {
			t.Errorf("team B GET /v1/metrics = %d, want 200 (any valid token)", got)
		}
		_, err := anon.CreateReservation(ctx, brokerapi.BookingRequest{Namespace: "workspace-b", GPUs: 1,
			Start: time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339), Duration: "1h"})
		wantStatus(t, "anonymous booking", err, 403)
		_, err = anon.QuotaMove(ctx, "Quota1.2", "Quota1.1", 1)
		wantStatus(t, "anonymous quota move", err, 403)
		_, err = anon.Plan(ctx, planBody(t, jobSpec{Namespace: "workspace-b", ID: "preview", Type: "batch", Priority: 50, Count: 1, GPUs: 1}))
		wantStatus(t, "anonymous plan", err, 403)
		_, err = anon.Quotas(ctx)
		wantStatus(t, "anonymous quotas", err, 403)
	})

	t.Run("the admin moves quota", func(t *testing.T) {
		// The admin (management token) moves one GPU live through the
		// Consul store's guarded write (L9), and moves it back.
		if _, err := admin.QuotaMove(ctx, "Quota1.2", "Quota1.1", 1); err != nil {
			t.Fatalf("admin quota move: %v", err)
		}
		nominal := func() map[string]int {
			q, err := admin.Quotas(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]int{}
			for _, n := range q.Quotas {
				out[n.Name] = n.NominalGPUs
			}
			return out
		}
		deadline := time.Now().Add(10 * time.Second)
		for got := nominal(); got["Quota1.1"] != 4 || got["Quota1.2"] != 4; got = nominal() {
			if time.Now().After(deadline) {
				t.Fatalf("nominals after the move: %v, want Quota1.1 = 4 and Quota1.2 = 4", got)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if _, err := admin.QuotaMove(ctx, "Quota1.1", "Quota1.2", 1); err != nil {
			t.Fatalf("admin quota move back: %v", err)
		}
		if got := brokerGet(t, b, "/v1/plan", a.ManagementToken); got != 200 {
			t.Fatalf("admin GET /v1/plan = %d, want 200", got)
		}
		// A holder of the admin_policy (gputide-admin) is an admin too: its
		// write passes the token check and is refused by L1 with the numbers.
		alice := brokerClient(t, b, secrets["gputide-admin"])
		_, err := alice.QuotaScale(ctx, "Quota1.1", 4)
		wantStatus(t, "gputide-admin quota scale", err, 409)
		if !strings.Contains(err.Error(), "Quota1") {
			t.Fatalf("gputide-admin quota scale: %v, want the L1 refusal naming Quota1", err)
		}
		if got := brokerGet(t, b, "/v1/snapshot", secrets["gputide-admin"]); got != 200 {
			t.Fatalf("gputide-admin GET /v1/snapshot = %d, want 200", got)
		}
	})

	t.Run("gputide_pool must name an existing pool listed in admit_pools", func(t *testing.T) {
		defer cleanJobs(t, a.Client)
		want := map[string]string{
			"gpu-a100":    `job meta gputide_pool = "gpu-a100": not one of the broker's admit_pools ["default" "gpu-missing"]`,
			"gpu-missing": `job meta gputide_pool = "gpu-missing": no such node pool in Nomad`,
		}
		for pool := range want {
			submit(t, nomadB, jobSpec{Namespace: "workspace-b", ID: "to-" + pool, Type: "batch", Priority: 50, Count: 1, GPUs: 1,
				Meta: map[string]string{"gputide_pool": pool}})
		}
		for pool, reason := range want {
			err := waitFor(20*time.Second, 100*time.Millisecond, func() error {
				j := jobInfo(t, a.Client, "workspace-b", "to-"+pool)
				if j.Meta["gputide_status"] != "error" || j.Meta["gputide_reason"] != reason {
					return fmt.Errorf("to-%s meta %v", pool, j.Meta)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if j := jobInfo(t, a.Client, "workspace-b", "to-"+pool); *j.NodePool != build.DefaultHoldingPool {
				t.Fatalf("to-%s moved to %q", pool, *j.NodePool)
			}
		}
	})

	t.Run("a straight registration is suspended and the claimant gets the freed GPUs", func(t *testing.T) {
		defer cleanJobs(t, a.Client)
		straightRegistrationDuringPreemption(t, a, nomadA, nomadB, nomadC)
		// Team B sees team C's preemptions with namespace and GPUs only;
		// team C sees its own in full.
		pb, err := teamB.Preemptions(ctx, "", "")
		if err != nil {
			t.Fatal(err)
		}
		pc, err := teamC.Preemptions(ctx, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if len(pb.Preemptions) != 2 || len(pc.Preemptions) != 2 {
			t.Fatalf("preemptions: team B sees %+v, team C sees %+v, want 2 each", pb.Preemptions, pc.Preemptions)
		}
		for _, p := range pb.Preemptions {
			if p != (brokerapi.PreemptionEntry{Namespace: "workspace-c", GPUs: 2}) {
				t.Fatalf("team B sees %+v, want only namespace workspace-c and 2 GPUs", p)
			}
		}
		// Team C reads its own stop in full, but its claimant only by the
		// claimant's namespace: team C has no read-job on workspace-a
		// (issue 16, attack list: a preemption record named a job of a
		// namespace the caller cannot read).
		for _, p := range pc.Preemptions {
			if p.Namespace != "workspace-c" || p.Job != "training" || p.For != "workspace-a" || p.Alloc == "" || p.At == nil {
				t.Fatalf("team C sees its own preemption %+v, want it in full with the claimant cut to workspace-a", p)
			}
		}
		// The plan of a waiting job needs read-job on its namespace.
		waiting := []byte(`{"Namespace": "workspace-c", "JobID": "training"}`)
		_, err = teamB.Plan(ctx, waiting)
		wantStatus(t, "team B plans team C's waiting job", err, 403)
		if p, err := teamC.Plan(ctx, waiting); err != nil || p.Job != "training" {
			t.Fatalf("team C plans its waiting job: %+v, %v", p, err)
		}
		// The queue: team C's waiting training is redacted for team B.
		q, err := teamB.Queue(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range q.Queue {
			if e.Namespace != "workspace-b" && (e.Job != "" || e.Reason != "") {
				t.Fatalf("team B sees %+v of another namespace unredacted", e)
			}
		}
	})
	t.Logf("isolation e2e took %s", time.Since(start).Round(time.Millisecond))
}

// straightRegistrationDuringPreemption: the node is full (team B's
// training 3, team C's training 2 x 2 and notebook 1). Team A's inference
// (4 GPUs, Quota1's child-level preemption) makes the broker stop team C's
// training, which takes 5 s to checkpoint. Meanwhile team B registers a
// job straight into "default" (its token may: Nomad CE checks no node-pool
// ACL). The broker checks it at once in L3 order: team B is at 3 of 3 and
// the GPUs being freed are held for the inference, so it is suspended
// (moved to the holding pool) within 2 s and never runs; the inference
// gets exactly the GPUs team C's training held, and nothing else stops.
func straightRegistrationDuringPreemption(t *testing.T, a *nomadAgent, nomadA, nomadB, nomadC *api.Client) {
	c := a.Client
	submit(t, nomadC, jobSpec{Namespace: "workspace-c", ID: "training", Type: "batch", Priority: 50, Count: 2, GPUs: 2,
		Checkpoint: "5", KillTimeout: 30 * time.Second})
	cTrain := waitRunning(t, c, "workspace-c", "training", 2, 30*time.Second)
	submit(t, nomadC, jobSpec{Namespace: "workspace-c", ID: "notebook", Type: "service", Priority: 60, Count: 1, GPUs: 1})
	cNote := waitRunning(t, c, "workspace-c", "notebook", 1, 30*time.Second)
	submit(t, nomadB, jobSpec{Namespace: "workspace-b", ID: "training", Type: "batch", Priority: 50, Count: 1, GPUs: 3})
	bTrain := waitRunning(t, c, "workspace-b", "training", 1, 30*time.Second)
	cGPUs := gpusOf(t, c, cTrain)
	before := stoppedAllocs(t, c)

	submit(t, nomadA, jobSpec{Namespace: "workspace-a", ID: "inference", Type: "service", Priority: 80, Count: 1, GPUs: 4})
	err := waitFor(30*time.Second, 50*time.Millisecond, func() error {
		if n := len(minus(stoppedAllocs(t, c), before)); n < 2 {
			return fmt.Errorf("%d stopped", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// While the victims checkpoint, team B registers straight into a real pool.
	registered := time.Now()
	submit(t, nomadB, jobSpec{Namespace: "workspace-b", ID: "sneak", Type: "batch", Priority: 90, Count: 1, GPUs: 1, Pool: "default"})
	err = waitFor(2*time.Second, 20*time.Millisecond, func() error {
		if p := *jobInfo(t, c, "workspace-b", "sneak").NodePool; p != build.DefaultHoldingPool {
			return fmt.Errorf("in pool %q", p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("team B's straight registration not suspended within 2 s: %v", err)
	}
	t.Logf("straight registration suspended %s after it was registered", time.Since(registered).Round(time.Millisecond))

	inf := waitRunning(t, c, "workspace-a", "inference", 1, 60*time.Second)
	if got := gpusOf(t, c, inf); !same(got, cGPUs) {
		t.Fatalf("inference holds %v, want the GPUs freed for it %v (L7)", got, cGPUs)
	}
	if got := minus(stoppedAllocs(t, c), before); !same(got, cTrain) {
		t.Fatalf("stopped %v, want exactly team C's training %v", got, cTrain)
	}
	err = waitFor(10*time.Second, 100*time.Millisecond, func() error {
		j := jobInfo(t, c, "workspace-b", "sneak")
		if j.Meta["gputide_status"] != "waiting" || !strings.Contains(j.Meta["gputide_reason"], "Quota1.1") {
			return fmt.Errorf("sneak meta %v", j.Meta)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := allocs(t, c, "workspace-b", "sneak"); len(got) != 0 {
		t.Fatalf("the straight registration got allocations: %d", len(got))
	}
	if !same(running(t, c, "workspace-b", "training"), bTrain) || !same(running(t, c, "workspace-c", "notebook"), cNote) {
		t.Fatal("an allocation outside the plan was touched")
	}
}

// applyReferenceNamespaces applies examples/reference/namespaces/*.hcl with
// the nomad CLI and the management token.
func applyReferenceNamespaces(t *testing.T, a *nomadAgent) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(referenceDir, "namespaces", "*.hcl"))
	if err != nil || len(files) != 3 {
		t.Fatalf("reference namespaces: %v %v", files, err)
	}
	for _, f := range files {
		cmd := exec.Command(a.Bin, "namespace", "apply", f)
		cmd.Env = append(agentEnv(), "NOMAD_ADDR="+a.Addr, "NOMAD_TOKEN="+a.ManagementToken)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nomad namespace apply %s: %v\n%s", f, err, out)
		}
	}
	ns, _, err := a.Client.Namespaces().Info("workspace-b", nil)
	if err != nil || ns.Meta["gputide_quota"] != "Quota1.1" {
		t.Fatalf("workspace-b = %+v, %v", ns, err)
	}
}

// applyReferencePolicies upserts the policies of examples/reference/acl/
// and creates a client token for each team policy; it returns the secrets
// by policy name.
func applyReferencePolicies(t *testing.T, c *api.Client) map[string]string {
	t.Helper()
	secrets := map[string]string{}
	for _, name := range []string{"team-a", "team-b", "team-c", "gputide-admin"} {
		rules, err := os.ReadFile(filepath.Join(referenceDir, "acl", name+".policy.hcl"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ACLPolicies().Upsert(&api.ACLPolicy{Name: name, Rules: string(rules)}, nil); err != nil {
			t.Fatalf("policy %s: %v", name, err)
		}
		tok, _, err := c.ACLTokens().Create(&api.ACLToken{Name: name, Type: "client", Policies: []string{name}}, nil)
		if err != nil {
			t.Fatalf("token %s: %v", name, err)
		}
		secrets[name] = tok.SecretID
	}
	return secrets
}

// startACLBroker runs the broker in-process on the ACL-enabled agent with
// the management token for its own Nomad calls and admin_policy =
// "gputide-admin", on its own Consul store (quota writes are live); reads
// need a token.
func startACLBroker(t *testing.T, a *nomadAgent) *broker {
	t.Helper()
	dir := t.TempDir()
	quotaFile := filepath.Join(dir, "quota.hcl")
	writeQuota(t, quotaFile, 3, 5)
	consulAddr := startConsul(t)
	cfg := filepath.Join(dir, "broker.hcl")
	src := fmt.Sprintf(`
nomad {
  address = %q
  token   = %q
}
consul {
  address = %q
  prefix  = "gputide-e2e-isolation/"
}
quota_file   = "quota.hcl"
interval     = "2s"
staleness    = "3s"
http_bind    = "127.0.0.1:%d"
log_level    = "debug"
admin_policy = "gputide-admin"
admit_pools  = ["default", "gpu-missing"]
`, a.Addr, a.ManagementToken, consulAddr, freePorts(t, 1)[0])
	if err := os.WriteFile(cfg, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	b := runBroker(t, cfg, quotaFile)
	t.Cleanup(func() {
		for name, secret := range map[string]string{"management": a.ManagementToken} {
			if strings.Contains(b.Log.String(), secret) {
				t.Errorf("the broker log shows the %s token", name)
			}
		}
	})
	return b
}

func brokerClient(t *testing.T, b *broker, token string) *brokerapi.Client {
	t.Helper()
	c, err := brokerapi.NewClient("http://"+b.Addr, token, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func nomadClient(t *testing.T, a *nomadAgent, token string) *api.Client {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: a.Addr, SecretID: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// planBody is the body of POST /v1/plan for a new job, as `nomad job run
// -output` writes it.
func planBody(t *testing.T, s jobSpec) []byte {
	t.Helper()
	body, err := json.Marshal(map[string]*api.Job{"Job": s.job()})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// wantStatus fails unless err is the broker client's *Error with the HTTP
// status.
func wantStatus(t *testing.T, what string, err error, status int) {
	t.Helper()
	var e *brokerapi.Error
	if !errors.As(err, &e) || e.Status != status {
		t.Fatalf("%s: %v, want HTTP %d", what, err, status)
	}
}

// brokerGet GETs path on the broker with token and returns the status.
func brokerGet(t *testing.T, b *broker, path, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+b.Addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
