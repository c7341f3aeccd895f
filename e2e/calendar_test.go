package e2e

// A Calendar booking end to end (DESIGN L10, issue 9): the broker on a
// Consul store with reservation_min_duration = "2m", a Nomad dev agent with
// 8 mock GPUs. A 2-minute booking of workspace-b starting 60 s ahead; its
// batch job, submitted into the holding pool at once, is not placed before
// the start (rule L10), runs within 2 s of the start (the agent plans at the
// plan's wake_at), and has no live allocation at the end: it is stopped at
// end - kill_timeout (rule L10.end, a job stop, no purge, then
// gputide_status = stopped). Needs NOMAD_BIN
// and CONSUL_BIN; without them it skips (fails under CI).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	brokerapi "github.com/gputide/gputide/quota-broker/api"
	"github.com/gputide/gputide/quota-broker/nomad/act"
	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/hashicorp/nomad/api"
)

// Bounds of the calendar e2e test.
const (
	calendarLead      = 60 * time.Second // booking start after the booking
	calendarDuration  = 2 * time.Minute  // the tree's reservation_min_duration
	calendarStartedBy = 2 * time.Second  // issue 9: jobs run within 2 s of the start
	calendarKill      = 5 * time.Second  // the job's kill_timeout
)

func TestCalendarBookingRunsAtStartAndStopsByEnd(t *testing.T) {
	nomadBinary(t)
	consulAddr := startConsul(t)
	a := startGPUNomad(t)
	b := startCalendarBroker(t, a.Addr, consulAddr)
	broker := brokerClient(t, b, calendarAdminToken)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	start := time.Now().Add(calendarLead).Truncate(time.Second)
	end := start.Add(calendarDuration)
	r, err := broker.CreateReservation(ctx, brokerapi.BookingRequest{ID: "e2e-cal", Namespace: "workspace-b",
		GPUs: 2, AllocGPUs: 2, NodePool: "default", Start: start.UTC().Format(time.RFC3339), Duration: calendarDuration.String()})
	if err != nil {
		t.Fatalf("booking: %v", err)
	}
	if r.Reservation.ID != "e2e-cal" || r.Reservation.GPUs != 2 || r.Reservation.Node != "Quota1.1" {
		t.Fatalf("booking = %+v", r.Reservation)
	}

	const ns, id = "workspace-b", "booked"
	submit(t, a.Client, jobSpec{Namespace: ns, ID: id, Type: "batch", Priority: 50, Count: 1, GPUs: 2,
		KillTimeout: calendarKill, Meta: map[string]string{"gputide_reservation": "e2e-cal"}})
	submitted := time.Now()
	if !submitted.Before(start.Add(-10 * time.Second)) {
		t.Fatalf("setup too slow: job submitted at %s, start %s", submitted.Format(time.RFC3339Nano), start.Format(time.RFC3339))
	}
	// A job naming no booking of its namespace is a meta error (issue 9
	// item 4): gputide_status = error, the reason naming key and ID.
	submit(t, a.Client, jobSpec{Namespace: ns, ID: "unbooked", Type: "batch", Priority: 50, Count: 1, GPUs: 2,
		KillTimeout: calendarKill, Meta: map[string]string{"gputide_reservation": "r-nope"}})
	err = waitFor(10*time.Second, 200*time.Millisecond, func() error {
		j := jobInfo(t, a.Client, ns, "unbooked")
		if j.Meta[jobmeta.MetaStatus] != act.StatusError {
			return fmt.Errorf("gputide_status = %q, gputide_reason = %q", j.Meta[jobmeta.MetaStatus], j.Meta[jobmeta.MetaReason])
		}
		if want := `job meta gputide_reservation = "r-nope": no unended booking of namespace "workspace-b" has this ID`; j.Meta[jobmeta.MetaReason] != want {
			return fmt.Errorf("gputide_reason = %q, want %q", j.Meta[jobmeta.MetaReason], want)
		}
		return nil
	})
	if err != nil {
		t.Errorf("job naming an unknown booking: %v", err)
	}

	// Before the start: no allocation at all (rule L10: the job waits).
	for time.Until(start) > 300*time.Millisecond {
		if as := allocs(t, a.Client, ns, id); len(as) > 0 {
			t.Fatalf("%s before the booking's start (%s): allocation %s %s/%s", time.Until(start), start.Format(time.RFC3339), as[0].ID, as[0].DesiredStatus, as[0].ClientStatus)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// From the start: running within calendarStartedBy.
	var allocID string
	err = waitFor(time.Until(start)+15*time.Second, 50*time.Millisecond, func() error {
		ids := running(t, a.Client, ns, id)
		if len(ids) != 1 {
			return fmt.Errorf("%d running allocations", len(ids))
		}
		allocID = ids[0]
		return nil
	})
	seen := time.Now()
	if err != nil {
		t.Fatalf("booked job not running 15 s after the start: %v", err)
	}
	alloc, _, err := a.Client.Allocations().Info(allocID, &api.QueryOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Unix(0, alloc.CreateTime)
	var taskStarted time.Time
	if ts := alloc.TaskStates["work"]; ts != nil {
		taskStarted = ts.StartedAt
	}
	t.Logf("start %s: allocation created at start%+.3fs, task started at start%+.3fs, seen running at start%+.3fs",
		start.Format(time.RFC3339), created.Sub(start).Seconds(), taskStarted.Sub(start).Seconds(), seen.Sub(start).Seconds())
	if created.Before(start) {
		t.Errorf("allocation created %s before the start", start.Sub(created))
	}
	if taskStarted.IsZero() || taskStarted.Sub(start) > calendarStartedBy {
		t.Errorf("task started at start%+.3fs, want within %s", taskStarted.Sub(start).Seconds(), calendarStartedBy)
	}
	if got := gpusOf(t, a.Client, []string{allocID}); len(got) != 2 {
		t.Errorf("booked allocation holds GPUs %v, want 2", got)
	}
	if alloc.NodeID != a.NodeID {
		t.Errorf("allocation on node %s, want %s", alloc.NodeID, a.NodeID)
	}

	// The end: stopped at end - kill_timeout (rule L10.end), gone by the end.
	stopAt := end.Add(-calendarKill)
	for time.Until(stopAt) > 2*time.Second {
		if ids := running(t, a.Client, ns, id); len(ids) != 1 {
			t.Fatalf("%s before end - kill_timeout: %d running allocations, want 1", time.Until(stopAt), len(ids))
		}
		time.Sleep(time.Second)
	}
	var gone time.Time
	err = waitFor(time.Until(end)+15*time.Second, 50*time.Millisecond, func() error {
		for _, al := range allocs(t, a.Client, ns, id) {
			if al.ClientStatus == api.AllocClientStatusRunning || al.ClientStatus == api.AllocClientStatusPending {
				return fmt.Errorf("allocation %s still %s (desired %s)", al.ID, al.ClientStatus, al.DesiredStatus)
			}
		}
		gone = time.Now()
		return nil
	})
	if err != nil {
		t.Fatalf("booked job still live 15 s after the end: %v", err)
	}
	t.Logf("end %s: last allocation gone at end%+.3fs (stop due at end-%s)", end.Format(time.RFC3339), gone.Sub(end).Seconds(), calendarKill)
	if gone.After(end) {
		t.Errorf("booked job still live %s after the end", gone.Sub(end))
	}
	if gone.Before(stopAt.Add(-time.Second)) {
		t.Errorf("booked job gone at end%+.3fs, before end - kill_timeout", gone.Sub(end).Seconds())
	}
	// A job stop, no purge; then gputide_status = stopped with the reason.
	var j *api.Job
	err = waitFor(15*time.Second, 200*time.Millisecond, func() error {
		j = jobInfo(t, a.Client, ns, id)
		if j.Meta[jobmeta.MetaStatus] != act.StatusStopped {
			return fmt.Errorf("gputide_status = %q, gputide_reason = %q", j.Meta[jobmeta.MetaStatus], j.Meta[jobmeta.MetaReason])
		}
		return nil
	})
	if err != nil {
		t.Errorf("stopped job's status not written 15 s after the end: %v", err)
	}
	if j.Stop == nil || !*j.Stop {
		t.Errorf("job %s/%s not stopped (Stop = %v)", ns, id, j.Stop)
	}
	if got := j.Meta[jobmeta.MetaReason]; !strings.Contains(got, "reservation e2e-cal ends at") {
		t.Errorf("gputide_reason = %q, want the booking's end named", got)
	}
	if got := j.Meta["gputide_reservation"]; got != "e2e-cal" {
		t.Errorf("job meta gputide_reservation = %q", got)
	}
	// The booking goes to history (leader, DESIGN L10 "End"): out of the
	// list, still shown by ID with outcome ended.
	err = waitFor(15*time.Second, 200*time.Millisecond, func() error {
		hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer hcancel()
		list, err := broker.Reservations(hctx, "")
		if err != nil {
			return err
		}
		if len(list.Reservations) != 0 {
			return fmt.Errorf("list still shows %+v", list.Reservations)
		}
		got, err := broker.Reservation(hctx, "e2e-cal")
		if err != nil {
			return err
		}
		if got.Reservation.Outcome != "ended" || got.Reservation.EndedAt == nil || !got.Reservation.EndedAt.Equal(end) {
			return fmt.Errorf("show = %+v", got.Reservation)
		}
		return nil
	})
	if err != nil {
		t.Errorf("ended booking not in history 15 s after its jobs were stopped: %v", err)
	}
	if t.Failed() {
		t.Logf("nomad log:\n%s", tail(a.Logs(), 4000))
	}
}

// calendarAdminToken is the broker's admin token while Nomad ACLs are off:
// bookings need submit-job, which an open read does not give.
const calendarAdminToken = "e2e-calendar-admin-token"

// startCalendarBroker runs the broker in-process on nomadAddr with the
// Consul store at consulAddr; its quota file (Quota1.1 = 4, Quota1.2 = 4
// GPUs) sets reservation_min_duration = "2m" and seeds the store's tree.
func startCalendarBroker(t *testing.T, nomadAddr, consulAddr string) *broker {
	t.Helper()
	dir := t.TempDir()
	quotaFile := filepath.Join(dir, "quota.hcl")
	tree := fmt.Sprintf(e2eQuota, 4, 4) + `
settings {
  reservation_min_duration = "2m"
}
`
	if err := os.WriteFile(quotaFile, []byte(tree), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "broker.hcl")
	src := fmt.Sprintf(`
nomad {
  address = %q
}
consul {
  address = %q
  prefix  = "gputide-e2e-calendar/"
}
quota_file  = "quota.hcl"
interval    = "2s"
staleness   = "3s"
http_bind   = "127.0.0.1:%d"
log_level   = "debug"
admin_token = %q
open_reads_without_acl = true
`, nomadAddr, consulAddr, freePorts(t, 1)[0], calendarAdminToken)
	if err := os.WriteFile(cfg, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return runBroker(t, cfg, quotaFile)
}
