package mockgpu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/internal/regfile"
)

// A line over MaxFaultLineBytes is reported with its number and skipped;
// the lines after it are still read (bufio.Scanner stopped at it and
// dropped them all).
func TestALongFaultLineIsReportedAndTheRestRead(t *testing.T) {
	l := newLib(t, Options{})
	text := "1 xid 13\n" + strings.Repeat("x", MaxFaultLineBytes+1) + "\n3 xid 79\r\n4 lost\n"
	got, errs := l.parseFaults([]byte(text))
	want := map[string]faultSpec{"gpu/1": {xids: []uint64{13}}, "gpu/3": {xids: []uint64{79}}, "gpu/4": {lost: true}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(faultSpec{})); diff != "" {
		t.Errorf("faults (-want +got):\n%s", diff)
	}
	wantErr := fmt.Sprintf("line 2 %q...: longer than 64 KiB (%d bytes), the most a line may be", strings.Repeat("x", 40), MaxFaultLineBytes+1)
	if len(errs) != 1 || errs[0].Error() != wantErr {
		t.Errorf("errors %v; want [%s]", errs, wantErr)
	}
	// A line of exactly the cap is read as usual.
	ok := "2 xid 31" + strings.Repeat(" ", MaxFaultLineBytes-len("2 xid 31"))
	if got, errs := l.parseFaults([]byte(ok + "\n")); len(errs) != 0 || len(got["gpu/2"].xids) != 1 {
		t.Errorf("a line of %d bytes: faults %v, errors %v; want Xid 31 on GPU 2", len(ok), got, errs)
	}
}

// A fault file that is not a regular file is an error naming it, found at
// once without reading it (/dev/zero grew to gigabytes; a FIFO blocked the
// first fingerprint), and the faults stay as they were.
func TestAFaultFileThatIsNotARegularFileIsRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, kind string }{
		{"/dev/zero", "a character device"},
		{fifo, "a FIFO"},
		{"/", "a folder"},
	} {
		l := newLib(t, Options{FaultFile: tc.path})
		if err := l.ApplyFaults([]byte("3 xid 79\n")); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		go func() { done <- l.ApplyFaultFile() }()
		select {
		case err := <-done:
			runtime.ReadMemStats(&after)
			want := "failed to read mock fault file: " + tc.path + ": not a regular file (" + tc.kind + "): want a regular file"
			if err == nil || err.Error() != want || !errors.Is(err, regfile.ErrNotRegular) {
				t.Errorf("%s: error %v; want %q", tc.path, err, want)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Errorf("%s: allocated %d bytes; want under 1 MiB", tc.path, n)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: ApplyFaultFile still running after 5 s", tc.path)
		}
		if got := l.applied["gpu/3"]; len(got.xids) != 1 || got.xids[0] != 79 {
			t.Errorf("%s: faults after the failed read %+v; want GPU 3's Xid 79 kept", tc.path, l.applied)
		}
	}
}

// A fault file over MaxFaultFileBytes is refused with its name and the cap.
func TestAFaultFileOverTheCapIsRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "faults")
	if err := os.WriteFile(p, make([]byte, MaxFaultFileBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	l := newLib(t, Options{FaultFile: p})
	err := l.ApplyFaultFile()
	want := fmt.Sprintf("failed to read mock fault file: %s: larger than 1 MiB, the most this kind of file may be (%d bytes or more)", p, MaxFaultFileBytes+1)
	if err == nil || err.Error() != want || !errors.Is(err, regfile.ErrTooLarge) {
		t.Errorf("error %v; want %q", err, want)
	}
}
