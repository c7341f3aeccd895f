package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/reservation"
)

// Tests with real processes: two store clients in two processes racing,
// a leader killed with SIGKILL, Consul restarted during bookings. The test
// binary re-runs itself as the helper process (GPUTIDE_STORE_HELPER).

func TestMain(m *testing.M) {
	switch os.Getenv("GPUTIDE_STORE_HELPER") {
	case "":
		os.Exit(m.Run())
	case "race":
		os.Exit(helperRace())
	case "lock":
		os.Exit(helperLock())
	default:
		fmt.Fprintln(os.Stderr, "unknown GPUTIDE_STORE_HELPER")
		os.Exit(2)
	}
}

func helperStore() (*KV, error) {
	return NewConsul(ConsulConfig{Address: os.Getenv("GPUTIDE_HELPER_ADDR"), Prefix: os.Getenv("GPUTIDE_HELPER_PREFIX")})
}

// helperRace reads "round kind startUnixNano" lines; at the start time it
// books 16 GPUs of Quota1.1 (kind "book") or moves 16 GPUs of nominal
// from Quota1.1 to Quota1.2 (kind "move"), and prints "round ok" or
// "round refused <reason>" or "round error <err>".
func helperRace() int {
	s, err := helperStore()
	if err != nil {
		fmt.Println("0 error", err)
		return 1
	}
	me := os.Getenv("GPUTIDE_HELPER_NAME")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) != 3 {
			continue
		}
		at, _ := strconv.ParseInt(f[2], 10, 64)
		time.Sleep(time.Until(time.Unix(0, at)))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var err error
		if f[1] == "book" {
			_, err = s.Guarded(ctx, bookFn(booking(fmt.Sprintf("r%s-%s", f[0], me), 16, 7)))
		} else {
			_, err = s.Guarded(ctx, moveFn("Quota1.1", "Quota1.2", 16))
		}
		cancel()
		var re *reservation.Error
		switch {
		case err == nil:
			fmt.Println(f[0], "ok")
		case errors.As(err, &re) || errors.Is(err, ErrConflict):
			fmt.Println(f[0], "refused", err)
		default:
			fmt.Println(f[0], "error", err)
		}
	}
	return 0
}

// helperLock takes the leader lock, prints "locked" and waits to be killed.
func helperLock() int {
	s, err := helperStore()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	l, err := s.Lock(context.Background(), "helper")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("locked")
	<-l.Lost()
	fmt.Println("lost")
	return 0
}

type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

func startHelper(t *testing.T, kind, name, addr, prefix string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GPUTIDE_STORE_HELPER="+kind, "GPUTIDE_HELPER_NAME="+name,
		"GPUTIDE_HELPER_ADDR="+addr, "GPUTIDE_HELPER_PREFIX="+prefix)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return h
}

func (h *helper) line(t *testing.T, within time.Duration) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		if h.out.Scan() {
			got <- h.out.Text()
		} else {
			got <- "EOF"
		}
	}()
	select {
	case l := <-got:
		return l
	case <-time.After(within):
		t.Fatalf("helper said nothing within %s", within)
		return ""
	}
}

// TestTwoProcessesRace: two store clients in two processes race 100 times
// for Quota1.1's last 16 GPUs (48 nominal, 32 booked): in even rounds both
// book 16, in odd rounds one books 16 while the other moves 16 of
// Quota1.1's nominal to Quota1.2. Exactly one wins each round, the other
// gets the reason (the L10 refusal, or ErrConflict), and the calendar is
// never over a nominal.
func TestTwoProcessesRace(t *testing.T) {
	addr := consulAddr(t)
	s := newConsulStore(t, addr)
	prefix := s.b.(*consul).prefix
	ctx := ctxT(t, 10*time.Minute)
	putTree(ctx, t, s, treeRec())
	if _, err := s.Guarded(ctx, bookFn(booking("base", 32, 7))); err != nil {
		t.Fatal(err)
	}
	a := startHelper(t, "race", "a", addr, prefix)
	b := startHelper(t, "race", "b", addr, prefix)
	rounds := 100
	if testing.Short() {
		rounds = 20
	}
	reasons := map[string]int{}
	for r := range rounds {
		kindB := "book"
		if r%2 == 1 {
			kindB = "move"
		}
		at := time.Now().Add(30 * time.Millisecond).UnixNano()
		fmt.Fprintf(a.stdin, "%d book %d\n", r, at)
		fmt.Fprintf(b.stdin, "%d %s %d\n", r, kindB, at)
		la, lb := a.line(t, time.Minute), b.line(t, time.Minute)
		okA, okB := strings.HasPrefix(la, fmt.Sprint(r, " ok")), strings.HasPrefix(lb, fmt.Sprint(r, " ok"))
		if okA == okB {
			t.Fatalf("round %d (%s): a %q, b %q: want exactly one winner", r, kindB, la, lb)
		}
		loser := lb
		if okB {
			loser = la
		}
		if !strings.HasPrefix(loser, fmt.Sprint(r, " refused ")) {
			t.Fatalf("round %d: the loser says %q, want a reason", r, loser)
		}
		switch reason := strings.SplitN(loser, " ", 3)[2]; {
		case strings.HasPrefix(reason, "Quota1.1 at 2026-12-07T09:00+09:00: 48 of 48 GPUs booked, 16 asked"):
			reasons["booked out"]++
		case strings.HasPrefix(reason, "Quota1.1 at 2026-12-07T09:00+09:00: 48 of 32 GPUs booked"):
			reasons["move refused"]++
		case strings.HasPrefix(reason, "Quota1.1 at 2026-12-07T09:00+09:00: 32 of 32 GPUs booked, 16 asked"):
			reasons["booking after the move"]++
		case strings.Contains(reason, ErrConflict.Error()):
			reasons["conflict"]++
		default:
			t.Fatalf("round %d: unexpected reason %q", r, reason)
		}
		// Never over nominal; then put the round's winner back.
		st, err := s.ReadGuarded(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := reservation.NewTree(st.Tree.Root)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Fits(st.Reservations); err != nil {
			t.Fatalf("round %d: over nominal: %v", r, err)
		}
		if n, _ := tr.Nominal("Quota1.1", ""); n == 32 {
			if _, err := s.Guarded(ctx, moveFn("Quota1.2", "Quota1.1", 16)); err != nil {
				t.Fatal(err)
			}
		}
		for _, bk := range st.Reservations {
			if bk.ID != "base" {
				if _, err := s.Guarded(ctx, cancelFn(bk.ID, time.Now())); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	t.Logf("%d rounds, the losers' reasons: %v", rounds, reasons)
}

// TestLockKilledHolder: the leader lock's holder is another process,
// killed with SIGKILL; its session is no longer renewed, and this process
// holds the lock within 25 s (DESIGN L12).
func TestLockKilledHolder(t *testing.T) {
	addr := consulAddr(t)
	s := newConsulStore(t, addr)
	h := startHelper(t, "lock", "holder", addr, s.b.(*consul).prefix)
	if l := h.line(t, 30*time.Second); l != "locked" {
		t.Fatalf("helper: %q", l)
	}
	ctx := ctxT(t, time.Minute)
	got := make(chan *Lock, 1)
	go func() {
		l, err := s.Lock(ctx, "survivor")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("lock taken while the holder lives")
	default:
	}
	start := time.Now()
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var l *Lock
	select {
	case l = <-got:
	case <-time.After(25 * time.Second):
		t.Fatalf("no takeover within 25 s of the kill")
	}
	took := time.Since(start)
	t.Logf("takeover %s after kill -9 (session TTL %s, lock-delay %s)", took, SessionTTL, LockDelay)
	if l == nil || l.Verify(ctx) != nil {
		t.Fatal("the survivor does not hold the lock")
	}
	_ = l.Release(ctx)
}

// TestConsulRestartDuringBooking: a private Consul server with a data
// directory is killed (SIGKILL) while a client books: the booking in
// flight fails with ErrUnavailable, nothing is half-written, every booking
// reported written is there after the restart, and a retry succeeds.
func TestConsulRestartDuringBooking(t *testing.T) {
	a := startConsul(t)
	s := newConsulStore(t, a.addr())
	ctx := ctxT(t, 3*time.Minute)
	putTree(ctx, t, s, treeRec())

	type result struct {
		id  string
		err error
	}
	results := make(chan result, 1000)
	stopBooking := make(chan struct{})
	go func() {
		defer close(results)
		for i := 0; ; i++ {
			select {
			case <-stopBooking:
				return
			default:
			}
			id := fmt.Sprint("r-", i)
			// 1 GPU for 1 hour each, one hour apart: they all fit.
			b := booking(id, 1, 7)
			b.Start = b.Start.Add(time.Duration(i) * time.Hour)
			b.End = b.Start.Add(time.Hour)
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := s.Guarded(cctx, bookFn(b))
			cancel()
			results <- result{id, err}
			if err != nil {
				return
			}
		}
	}()
	time.Sleep(700 * time.Millisecond)
	a.kill(true)
	var written []string
	var failure error
	for r := range results {
		if r.err != nil {
			failure = r.err
			break
		}
		written = append(written, r.id)
	}
	close(stopBooking)
	if failure == nil || !errors.Is(failure, ErrUnavailable) {
		t.Fatalf("the booking in flight: %v, want ErrUnavailable", failure)
	}
	t.Logf("%d bookings written before the kill; the one in flight: %v", len(written), failure)

	a.start(t)
	var st *Guarded
	var err error
	for range 100 { // the restarted server may answer 500 until it has caught up
		if st, err = s.ReadGuarded(ctx); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	got := ids(st.Reservations)
	// Every booking reported written is there. The one in flight may have
	// committed before the kill (its answer was lost) but then whole: its
	// reservation and its guard increment together.
	for _, id := range written {
		if !slices.Contains(got, id) {
			t.Fatalf("booking %s reported written is gone after the restart: %v", id, got)
		}
	}
	if len(got) > len(written)+1 {
		t.Fatalf("%d reservations, %d written", len(got), len(written))
	}
	if st.Counter != uint64(1+len(got)) {
		t.Fatalf("guard counter %d for 1 tree write and %d bookings: half-written", st.Counter, len(got))
	}
	tr, _ := reservation.NewTree(st.Tree.Root)
	if err := tr.Fits(st.Reservations); err != nil {
		t.Fatal(err)
	}
	// The retry succeeds (a fresh ID, in case the one in flight committed).
	retry := booking("r-retry", 1, 20)
	if _, err := s.Guarded(ctx, bookFn(retry)); err != nil {
		t.Fatalf("retry after the restart: %v", err)
	}
}
