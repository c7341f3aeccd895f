package command

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/gputide/gputide/quota-broker/acl"
	"github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
	"github.com/gputide/gputide/quota-broker/reservation"
	"github.com/gputide/gputide/quota-broker/snapshot"
	"github.com/gputide/gputide/quota-broker/store"
)

// refBackend serves the reference scenario's snapshot and plan.
type refBackend struct{ st api.BrokerState }

func (b refBackend) State() api.BrokerState { return b.st }
func (refBackend) IsLeader() bool           { return true }
func (refBackend) Health() any              { return map[string]any{} }
func (refBackend) PendingOf(job *nomadapi.Job, now time.Time) ([]plan.Pending, error) {
	return api.PendingOfJob(job, now)
}

// startBroker runs an API server on the reference scenario, with Nomad
// ACLs off (the recorded pseudo-token answer) and the admin token "adm".
func startBroker(t *testing.T) string {
	t.Helper()
	return startBrokerWith(t, httptest.NewServer)
}

func startBrokerWith(t *testing.T, serve func(http.Handler) *httptest.Server) string {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash("../../examples/reference/snapshot.json"))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Compute(snap)
	if err != nil {
		t.Fatal(err)
	}
	return serveBroker(t, serve, snap, p, snap.Time.Add(time.Second))
}

// serveBroker runs an API server on snap and its plan p at now, as
// startBrokerWith does.
func serveBroker(t *testing.T, serve func(http.Handler) *httptest.Server, snap *plan.Snapshot, p *plan.Plan, now time.Time) string {
	t.Helper()
	nomad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"AccessorID":"acls-disabled","SecretID":"","Name":"ACLs disabled token","Type":"client"}`)
	}))
	t.Cleanup(nomad.Close)
	res, err := acl.NewResolver(acl.Config{Address: nomad.URL, AdminToken: "adm"})
	if err != nil {
		t.Fatal(err)
	}
	kv := store.NewMemory()
	if _, _, err := kv.SeedTree(context.Background(), store.TreeRecord{Root: snap.Quota.Clone(), Settings: snap.Settings}); err != nil {
		t.Fatal(err)
	}
	srv, err := api.NewServer(api.Config{Backend: refBackend{api.BrokerState{Snapshot: snap, Plan: p, SyncedAt: now.Add(-time.Second)}},
		Store: kv, Resolver: res, QuotaWrites: true, Staleness: time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	hs := serve(srv.Handler())
	t.Cleanup(hs.Close)
	if hs.TLS != nil {
		ca := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("TEST_CA", ca)
	}
	return hs.URL
}

// -ca-cert / GPUTIDE_CACERT: the CLI trusts the broker's CA, and without
// it refuses the certificate.
func TestBrokerCommandsTLS(t *testing.T) {
	addr := startBrokerWith(t, httptest.NewTLSServer)
	t.Setenv("GPUTIDE_ADDR", addr)
	t.Setenv("NOMAD_TOKEN", "adm")
	if code, _, errOut := runCLI(t, "quota", "status"); code != 1 || !strings.Contains(errOut, "certificate") {
		t.Errorf("without the CA: exit %d %s", code, errOut)
	}
	if code, out, errOut := runCLI(t, "quota", "status", "-ca-cert", os.Getenv("TEST_CA")); code != 0 || !strings.Contains(out, "Quota1.2") {
		t.Errorf("-ca-cert: exit %d %s %s", code, out, errOut)
	}
	t.Setenv("GPUTIDE_CACERT", os.Getenv("TEST_CA"))
	if code, out, errOut := runCLI(t, "queue", "-json"); code != 0 || !strings.Contains(out, `"state_age_seconds": 1`) {
		t.Errorf("GPUTIDE_CACERT: exit %d %s %s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, "queue", "-ca-cert", "/nonexistent.pem"); code != 1 || !strings.Contains(errOut, `CA certificate "/nonexistent.pem"`) {
		t.Errorf("missing CA file: exit %d %s", code, errOut)
	}
}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestBrokerCommands(t *testing.T) {
	addr := startBroker(t)
	t.Setenv("GPUTIDE_ADDR", addr)
	t.Setenv("NOMAD_TOKEN", "adm")
	jobFile := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(jobFile, []byte(`{"Job":{"ID":"probe","Namespace":"workspace-b","Type":"batch","Datacenters":["dc1"],"TaskGroups":[{"Name":"g","Count":1,"Tasks":[{"Name":"t","Resources":{"Devices":[{"Name":"nvidia/gpu","Count":8}]}}]}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{"quota", "status"}, 0, "· Quota1.1  48       40    [#################...]", ""},
		{[]string{"quota", "scale", "Quota1.1", "-gpus", "56"}, 1, "", "Quota1: children 56 + 80 = 136 > 128"},
		{[]string{"quota", "scale", "Quota1.1", "-gpus", "x"}, 1, "", `-gpus "x": not a whole number`},
		{[]string{"quota", "move", "-from", "Quota1.2", "-to", "Quota1.1", "-gpus", "8"}, 0, "Moved 8 GPUs from Quota1.2 to Quota1.1 (Quota1.2 now 72, Quota1.1 now 56)", ""},
		{[]string{"quota", "move", "-from", "Quota1.2", "-to", "Quota1.1"}, 1, "", "Missing -from, -to or -gpus"},
		{[]string{"quota", "status", "-token", "wrong"}, 1, "", "HTTP 403: Nomad ACLs are off: this request needs the broker's admin_token"},
		{[]string{"reservation", "create", "-namespace", "workspace-b", "-gpus", "16", "-start", "2026-12-07T08:00:00+09:00", "-duration", "90d"}, 1, "", `-duration "90d": not a Go duration`},
		{[]string{"reservation", "create", "-namespace", "workspace-b", "-gpus", "16", "-alloc-gpus", "5", "-start", "2026-12-07T08:00:00+09:00", "-duration", "1h"}, 1, "", `-alloc-gpus "5": must divide -gpus (16)`},
		{[]string{"reservation", "create", "-namespace", "workspace-b", "-gpus", "16", "-start", "2026-12-07T08:00:00+09:00", "-duration", "168h", "-id", "rb"}, 0, `Reservation "rb" booked: 16 GPUs (2x8) of Quota1.1 for workspace-b, 2026-12-07T08:00+09:00 to 2026-12-14T08:00+09:00`, ""},
		{[]string{"reservation", "create", "-namespace", "workspace-b", "-gpus", "48", "-start", "2026-12-08T09:00:00+09:00", "-duration", "1h"}, 1, "", "Quota1.1 at 2026-12-08T09:00+09:00: 16 of 56 GPUs booked, 48 asked; earliest start that fits: 2026-12-14T08:00+09:00"},
		{[]string{"reservation", "list"}, 0, "rb", ""},
		{[]string{"reservation", "show", "-json", "rb"}, 0, `"node": "Quota1.1"`, ""},
		{[]string{"reservation", "show", "nope"}, 1, "", "not found"},
		{[]string{"reservation", "cancel", "rb"}, 0, `Reservation "rb" cancelled`, ""},
		{[]string{"reservation", "show", "rb"}, 0, "Outcome              = cancelled", ""},
		{[]string{"reservation", "list", "-json"}, 0, `"reservations": []`, ""},
		{[]string{"queue"}, 0, "llama-ft-13b", ""},
		{[]string{"preemptions", "-since", "yesterday"}, 1, "", `-since "yesterday"`},
		{[]string{"preemptions", "-since", "24h"}, 0, "At", ""},
		{[]string{"job", "plan", jobFile}, 0, `Job "probe" in namespace "workspace-b"`, ""},
		{[]string{"job", "status", "workspace-b/llama-ft-13b"}, 0,
			"worker  16 (2x8)  1 of 2  0           20m1s   wait    L3    Quota1.1: 40 of 48 GPUs in use; 8 more needed for 16 asked", ""},
		{[]string{"job", "status", "workspace-b/hparam-sweep"}, 0, "df1c3d1f  trial  node-09  1     yes   2026-12-01T06:10:00Z  -             L5.1", ""},
		{[]string{"job", "status", "-json", "workspace-b/llama-ft-13b"}, 0, `"position": 1,`, ""},
		{[]string{"job", "status", "llama-ft-13b"}, 1, "", `job "llama-ft-13b": want NAMESPACE/JOB`},
	}
	for _, c := range cases {
		code, out, errOut := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(out, c.out) || !strings.Contains(errOut, c.err) {
			t.Errorf("gputide %s: exit %d\nstdout: %s\nstderr: %s\nwant exit %d, stdout with %q, stderr with %q",
				strings.Join(c.args, " "), code, out, errOut, c.code, c.out, c.err)
		}
	}
	// reservation show starts with its first field, not a stray line.
	if _, out, _ := runCLI(t, "reservation", "show", "rb"); !strings.HasPrefix(out, "ID                   = rb\n") {
		t.Errorf("reservation show's first line: %q", strings.SplitN(out, "\n", 2)[0])
	}
	t.Setenv("NOMAD_TOKEN", "")
	if code, _, errOut := runCLI(t, "quota", "status"); code != 1 || !strings.Contains(errOut, "HTTP 403") {
		t.Errorf("no token: exit %d %s", code, errOut)
	}
}

func TestUsageBar(t *testing.T) {
	for _, c := range []struct {
		q    api.Quota
		want string
	}{
		{api.Quota{NominalGPUs: 48, UsedGPUs: 24, NonidleGPUs: 12}, "[#####+++++..........]"},
		{api.Quota{NominalGPUs: 10, UsedGPUs: 20, NonidleGPUs: 20}, "[####################]>"},
		{api.Quota{}, "[                    ]"},
	} {
		if got := usageBar(c.q); got != c.want {
			t.Errorf("usageBar(%+v) = %q, want %q", c.q, got, c.want)
		}
	}
}

// Reservation flags: every bad value is an error naming the flag and its
// value, never a panic; a good set gives the request as typed.
func FuzzReservationFlags(f *testing.F) {
	f.Add("16", "", "2026-12-07T08:00:00+09:00", "168h", "")
	f.Add("x", "5", "tomorrow", "90d", "Bad_ID")
	f.Add("16", "0", "2026-12-07T08:00:00Z", "-1h", "r-1")
	f.Fuzz(func(t *testing.T, gpus, alloc, start, duration, id string) {
		req, err := bookingFromFlags("workspace-b", gpus, alloc, "", "", "", start, duration, id)
		if err != nil {
			msg := err.Error()
			if strings.HasPrefix(msg, "missing flags") {
				if gpus != "" && start != "" && duration != "" {
					t.Fatalf("error %q with every required flag given", msg)
				}
				return
			}
			// The flag and its value as typed: -duration "90d": ...
			vals := map[string]string{"gpus": gpus, "alloc-gpus": alloc, "start": start, "duration": duration, "id": id}
			flag, rest, _ := strings.Cut(strings.TrimPrefix(msg, "-"), " ")
			v, known := vals[flag]
			if !strings.HasPrefix(msg, "-") || !known || !strings.HasPrefix(rest, strconv.Quote(v)+": ") {
				t.Fatalf("error %q does not start with a flag and its quoted value", msg)
			}
			return
		}
		d, _ := time.ParseDuration(duration)
		if req.Start != start || req.Duration != duration || req.GPUs <= 0 || req.ID != id ||
			(req.AllocGPUs != 0 && req.GPUs%req.AllocGPUs != 0) || d <= 0 || d > reservation.MaxDuration {
			t.Fatalf("request %+v from %q %q %q %q %q", req, gpus, alloc, start, duration, id)
		}
	})
}

// job plan FILE with HCL: Nomad's /v1/jobs/parse at NOMAD_ADDR parses it
// with the caller's token, then the broker previews it.
func TestJobPlanHCL(t *testing.T) {
	addr := startBroker(t)
	var gotToken string
	nomad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/jobs/parse" {
			http.NotFound(w, r)
			return
		}
		gotToken = r.Header.Get("X-Nomad-Token")
		_, _ = io.WriteString(w, `{"ID":"probe-hcl","Namespace":"workspace-b","Type":"batch","Datacenters":["dc1"],"TaskGroups":[{"Name":"g","Count":1,"Tasks":[{"Name":"t","Resources":{"Devices":[{"Name":"nvidia/gpu","Count":8}]}}]}]}`)
	}))
	t.Cleanup(nomad.Close)
	t.Setenv("NOMAD_ADDR", nomad.URL)
	t.Setenv("GPUTIDE_ADDR", addr)
	t.Setenv("NOMAD_TOKEN", "")
	file := filepath.Join(t.TempDir(), "job.nomad.hcl")
	if err := os.WriteFile(file, []byte("job \"probe-hcl\" {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "job", "plan", "-token", "adm", file)
	if code != 0 || !strings.Contains(out, `Job "probe-hcl" in namespace "workspace-b"`) || gotToken != "adm" {
		t.Errorf("exit %d, token %q\n%s%s", code, gotToken, out, errOut)
	}
}

// A job the broker does not govern (its namespace bound to no quota node)
// gets a sentence saying so, not an empty table.
func TestJobPlanUngoverned(t *testing.T) {
	addr := startBroker(t)
	t.Setenv("GPUTIDE_ADDR", addr)
	t.Setenv("NOMAD_TOKEN", "")
	file := filepath.Join(t.TempDir(), "job.json")
	job := `{"Job":{"ID":"free","Namespace":"default","Type":"batch","Datacenters":["dc1"],"TaskGroups":[{"Name":"g","Count":1,"Tasks":[{"Name":"t","Resources":{"Devices":[{"Name":"nvidia/gpu","Count":8}]}}]}]}}`
	if err := os.WriteFile(file, []byte(job), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "job", "plan", "-token", "adm", file)
	want := "Job \"free\" in namespace \"default\":\n" + noPlanNote("default") + "\n"
	if code != 0 || out != want {
		t.Errorf("exit %d\ngot:\n%s\nwant:\n%s%s", code, out, want, errOut)
	}
}

// A 403 of Nomad's /v1/jobs/parse says that Nomad checks parse-job on
// NOMAD_NAMESPACE, not the jobspec's namespace (a team token with
// parse-job on its own workspace only is refused on "default").
func TestJobPlanHCLParseDenied(t *testing.T) {
	var gotNS string
	nomad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotNS = r.URL.Query().Get("namespace")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, "Permission denied")
	}))
	t.Cleanup(nomad.Close)
	t.Setenv("NOMAD_ADDR", nomad.URL)
	t.Setenv("NOMAD_NAMESPACE", "")
	t.Setenv("NOMAD_TOKEN", "")
	_, err := parseHCLAs([]byte("job \"x\" {}\n"), "team-b")
	want := `nomad at ` + nomad.URL + `: Unexpected response code: 403 (Permission denied): Nomad checks parse-job on namespace "default" ` +
		`(NOMAD_NAMESPACE, default "default"), not on the jobspec's; set NOMAD_NAMESPACE to the job's namespace`
	if err == nil || err.Error() != want {
		t.Errorf("error\n got: %v\nwant: %s", err, want)
	}
	t.Setenv("NOMAD_NAMESPACE", "workspace-b")
	if _, err := parseHCLAs([]byte("job \"x\" {}\n"), "team-b"); err == nil || !strings.Contains(err.Error(), `namespace "workspace-b"`) || gotNS != "workspace-b" {
		t.Errorf("with NOMAD_NAMESPACE=workspace-b: Nomad got namespace %q, error %v", gotNS, err)
	}
}

// A broker that does not answer: the error, then where to point the CLI.
func TestBrokerUnreachableHint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	t.Setenv("GPUTIDE_ADDR", addr)
	code, _, errOut := runCLI(t, "quota", "status")
	if code != 1 || !strings.HasPrefix(errOut, "Error: GET /v1/quotas "+addr+": no answer: ") || !strings.HasSuffix(errOut, "\n"+unreachableHint+"\n") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}

// TestUsedCellShowsStoppingApart (issue 20): mid-preemption a node's used
// GPUs show those being stopped apart.
func TestUsedCellShowsStoppingApart(t *testing.T) {
	if got := usedCell(api.Quota{NominalGPUs: 8, UsedGPUs: 12, StoppingGPUs: 4}); got != "8 (+4 stopping)" {
		t.Errorf("usedCell = %q", got)
	}
	if got := usedCell(api.Quota{NominalGPUs: 8, UsedGPUs: 6}); got != "6" {
		t.Errorf("usedCell = %q", got)
	}
}

// TestWarningsRendered (issue 20 item 3): the plan's warnings a response
// carries are printed under the table, cut to kind, namespace and GPUs
// where the API cut them; a response without any prints nothing more.
func TestWarningsRendered(t *testing.T) {
	res := api.QueueResponse{Warnings: []api.WarningEntry{
		{Kind: "unplaceable", Namespace: "workspace-b", Reservation: "rb", GPUs: 8, Message: "reservation rb: 1 of its 2 allocations of 8 GPUs cannot be placed"},
		{Kind: "held", Namespace: "workspace-c", GPUs: 4},
	}}
	want := "\n\nWarning: reservation rb: 1 of its 2 allocations of 8 GPUs cannot be placed\nWarning: held in workspace-c (4 GPUs)"
	if got := warningLines(res.Warnings); got != want {
		t.Errorf("warnings:\n%q\nwant\n%q", got, want)
	}
	if got := warningLines(api.ReservationResponse{}.Warnings); got != "" {
		t.Errorf("no warnings: %q", got)
	}
}

// TestQuotaStatusRowsPerFlavor: with several flavors "quota status" has a
// Flavor column and one row per node and flavor, figures of that flavor
// (issue 17 item 5); one flavor keeps the table as it was.
func TestQuotaStatusRowsPerFlavor(t *testing.T) {
	qs := []api.Quota{
		{Name: "Quota1", Flavor: "h100", NominalGPUs: 16, UsedGPUs: 16, NonidleGPUs: 16, Workspaces: []string{"workspace-a"}},
		{Name: "Quota1", Flavor: "a100", NominalGPUs: 8, UsedGPUs: 2, NonidleGPUs: 0, LendableGPUs: 6, Workspaces: []string{"workspace-a"}},
		{Name: "Quota1.1", Parent: "Quota1", Flavor: "h100", NominalGPUs: 4, UsedGPUs: 8, NonidleGPUs: 8, BorrowedGPUs: 4, StoppingGPUs: 2, QueuedGPUs: 3, Workspaces: []string{"workspace-b"}},
		{Name: "Quota1.1", Parent: "Quota1", Flavor: "a100", NominalGPUs: 8, UsedGPUs: 2, BookedGPUs: 2, Workspaces: []string{"workspace-b"}},
	}
	want := [][]string{
		{"Quota", "Flavor", "Nominal", "Used", "Usage", "Borrowed", "Debt", "Booked", "Displaced", "Lendable", "Queued",
			"Weight", "Fair share", "Borrowed share", "Evicted", "Workspaces"},
		{"Quota1", "h100", "16", "16", usageBar(qs[0]), "0", "0", "0", "0", "0", "0", "0 (nominal)", "-", "0", "-", "workspace-a"},
		{"Quota1", "a100", "8", "2", usageBar(qs[1]), "0", "0", "0", "0", "6", "0", "0 (nominal)", "-", "0", "-", "workspace-a"},
		{"· Quota1.1", "h100", "4", "6 (+2 stopping)", usageBar(qs[2]), "4", "0", "0", "0", "0", "3", "0 (nominal)", "-", "0", "-", "workspace-b"},
		{"· Quota1.1", "a100", "8", "2", usageBar(qs[3]), "0", "0", "2", "0", "0", "0", "0 (nominal)", "-", "0", "-", "workspace-b"},
	}
	if diff := cmp.Diff(want, quotaStatusRows(qs)); diff != "" {
		t.Errorf("rows per flavor (-want +got):\n%s", diff)
	}
	one := []api.Quota{{Name: "Quota1", Flavor: "gpu", NominalGPUs: 8, UsedGPUs: 4, NonidleGPUs: 4}}
	wantOne := [][]string{
		{"Quota", "Nominal", "Used", "Usage", "Borrowed", "Debt", "Booked", "Displaced", "Lendable", "Queued",
			"Weight", "Fair share", "Borrowed share", "Evicted", "Workspaces"},
		{"Quota1", "8", "4", "[##########..........]", "0", "0", "0", "0", "0", "0", "0 (nominal)", "-", "0", "-", ""},
	}
	if diff := cmp.Diff(wantOne, quotaStatusRows(one)); diff != "" {
		t.Errorf("one flavor (-want +got):\n%s", diff)
	}
}

// TestQuotaStatusFairLending: quota status shows DESIGN L14's figures per
// node: the weight (explicit, or the nominal by default), the fair share
// to one decimal or "-" where undefined, the borrowed share to two
// decimals or "inf", and the eviction budget's use or "-" without one;
// -json writes the API's fields as they are.
func TestQuotaStatusFairLending(t *testing.T) {
	share := func(x float64) *float64 { return &x }
	qs := []api.Quota{
		{Name: "Quota1", Flavor: "gpu", NominalGPUs: 8, UsedGPUs: 8, Weight: 8,
			MaxEvict: &api.EvictBudget{GPUs: 16, Per: "5m", PerSeconds: 300, EvictedGPUs: 3}},
		{Name: "Quota1.1", Parent: "Quota1", Flavor: "gpu", NominalGPUs: 2, UsedGPUs: 3, BorrowedGPUs: 1, Weight: 3, WeightExplicit: true,
			FairShare: share(3.5), BorrowedShare: api.Share(1.0 / 3)},
		{Name: "Quota1.2", Parent: "Quota1", Flavor: "gpu", NominalGPUs: 2, UsedGPUs: 5, BorrowedGPUs: 3, Weight: 0, WeightExplicit: true,
			FairShare: share(4.46), BorrowedShare: api.Share(math.Inf(1)),
			MaxEvict: &api.EvictBudget{GPUs: 2, Per: "1h30m", PerSeconds: 5400, EvictedGPUs: 0}},
	}
	var got [][]string
	for _, r := range quotaStatusRows(qs) {
		got = append(got, r[10:14])
	}
	want := [][]string{
		{"Weight", "Fair share", "Borrowed share", "Evicted"},
		{"8 (nominal)", "-", "0", "3 of 16 GPUs in 5m"},
		{"3", "3.5", "0.33", "-"},
		{"0", "4.5", "inf", "0 of 2 GPUs in 1h30m"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("L14 columns (-want +got):\n%s", diff)
	}
}

// TestUngovernedRows: quota status lists devices of no flavor by node,
// named as the device plugin names them, with the count and the reason
// (DESIGN L13).
func TestUngovernedRows(t *testing.T) {
	got := ungovernedRows([]api.Ungoverned{
		{Node: "n1", Model: "NVIDIA A100-SXM4-40GB", MIGProfile: "1g.5gb", Devices: 7, Reason: `MIG 1g.5gb instance: the implicit flavor "gpu" takes whole GPUs only`},
		{Node: "n2", Model: "NVIDIA L4", Devices: 2, Reason: `model "NVIDIA L4" is in no flavor of the tree (h100, a100)`},
	})
	want := [][]string{
		{"Node", "Device", "Count", "Reason"},
		{"n1", "NVIDIA A100-SXM4-40GB MIG 1g.5gb", "7", `MIG 1g.5gb instance: the implicit flavor "gpu" takes whole GPUs only`},
		{"n2", "NVIDIA L4", "2", `model "NVIDIA L4" is in no flavor of the tree (h100, a100)`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ungoverned rows (-want +got):\n%s", diff)
	}
}

// TestQuotaStatusFairLendingCLI: "quota status" and its -json against a
// broker at night on 8 GPUs (DESIGN L14): Quota1.1 (nominal 2, weight 1)
// holds 5 and asks for 2 more, Quota1.2 (nominal 2, weight 0) holds 3;
// Quota1 lends 4, all to Quota1.1 (fair shares 6 and 2, borrowed shares 3
// and +Inf), and its budget of 16 per 5m has 3 used by stops of its
// children's allocations.
func TestQuotaStatusFairLendingCLI(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	root := &quota.Node{Name: "Quota1", GPUs: quota.Plain(8), Namespaces: []string{"workspace-a"},
		MaxEvict: &quota.EvictBudget{GPUs: 16, Per: 5 * time.Minute}, Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: quota.Plain(2), Weight: quota.Plain(1), Namespaces: []string{"workspace-b"}},
			{Name: "Quota1.2", GPUs: quota.Plain(2), Weight: quota.Plain(0), Namespaces: []string{"workspace-c"}},
		}}
	snap := &plan.Snapshot{Time: now, Quota: root,
		Pending: []plan.Pending{{Namespace: "workspace-b", Job: "sweep", Group: "g", Count: 1, GPUs: 2, Idle: true}},
		Evictions: []plan.Eviction{
			{Quota: "Quota1.1", GPUs: 2, Time: now.Add(-time.Minute)},
			{Quota: "Quota1.2", GPUs: 1, Time: now.Add(-4 * time.Minute)},
			{Quota: "Quota1.2", GPUs: 4, Time: now.Add(-6 * time.Minute)},
		}}
	p := &plan.Plan{Usage: []plan.Usage{
		{Quota: "Quota1", Nominal: 8, Used: 8},
		{Quota: "Quota1.1", Nominal: 2, Used: 5, Borrowed: 3},
		{Quota: "Quota1.2", Nominal: 2, Used: 3, Borrowed: 1},
	}}
	t.Setenv("GPUTIDE_ADDR", serveBroker(t, httptest.NewServer, snap, p, now))
	t.Setenv("NOMAD_TOKEN", "adm")
	code, out, errOut := runCLI(t, "quota", "status")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got [][]string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
		got = append(got, f[len(f)-5:len(f)-1])
	}
	want := [][]string{
		{"Weight", "Fair share", "Borrowed share", "Evicted"},
		{"8 (nominal)", "-", "0", "3 of 16 GPUs in 5m"},
		{"1", "6", "3", "-"},
		{"0", "2", "inf", "-"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("quota status L14 columns (-want +got):\n%s\n%s", diff, out)
	}
	code, out, errOut = runCLI(t, "quota", "status", "-json")
	if code != 0 {
		t.Fatalf("-json: exit %d: %s", code, errOut)
	}
	for _, s := range []string{`"borrowed_share": "+Inf"`, `"fair_share": 6,`, `"weight_explicit": true`,
		"\"max_evict\": {\n        \"gpus\": 16,\n        \"per\": \"5m\",\n        \"per_seconds\": 300,\n        \"evicted_gpus\": 3\n      }"} {
		if !strings.Contains(out, s) {
			t.Errorf("-json: no %q in\n%s", s, out)
		}
	}
	var res api.QuotasResponse
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(api.QuotaFigures(snap, p, now), res.Quotas); diff != "" {
		t.Errorf("-json quotas (-want +got):\n%s", diff)
	}
}
