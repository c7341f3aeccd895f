//go:build unix

package regfile

import (
	"path/filepath"
	"syscall"
	"testing"
)

// mkfifo makes a FIFO in dir and returns its path.
func mkfifo(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
