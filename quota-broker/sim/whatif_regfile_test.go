package sim

import (
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gputide/gputide/internal/regfile"
)

// `gputide sim -quota FILE` (issue 12 item 5) reads a regular file only: a
// FIFO with no writer or a device is refused at once naming the path, as
// the scenario's own files are, instead of blocking in open(2).
func TestWithQuotaFileRegularOnly(t *testing.T) {
	sc, err := LoadFile(referenceFile)
	if err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "quota.hcl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	for _, p := range []string{fifo, "/dev/zero"} {
		done := make(chan error, 1)
		go func() { _, err := sc.WithQuotaFile(p); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, regfile.ErrNotRegular) || !strings.Contains(err.Error(), p+": not a regular file") {
				t.Errorf("WithQuotaFile(%s): %v, want ErrNotRegular naming the path", p, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("WithQuotaFile(%s): still blocked after 5 s", p)
		}
	}
}
