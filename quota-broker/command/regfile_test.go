package command

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The files a command reads (schedule preview -policy, quota apply, job
// plan, plan) are regular files: a FIFO with no writer, or a device, is refused
// at once naming the path, instead of blocking the command in open(2) or
// reading a device.
func TestCommandFilesAreRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "policy.hcl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	t.Setenv("GPUTIDE_ADDR", "http://127.0.0.1:1")
	for _, args := range [][]string{
		{"schedule", "preview", "-policy", fifo},
		{"quota", "apply", fifo},
		{"job", "plan", fifo},
		{"plan", fifo},
		{"plan", "/dev/zero"},
		{"schedule", "preview", "-policy", "/dev/zero"},
	} {
		done := make(chan [3]string, 1)
		go func() {
			code, out, errOut := runCLI(t, args...)
			done <- [3]string{string(rune('0' + code)), out, errOut}
		}()
		select {
		case r := <-done:
			path := args[len(args)-1]
			if want := path + ": not a regular file"; r[0] != "1" || !strings.Contains(r[2], want) {
				t.Errorf("gputide %s: exit %s, stderr %q; want 1 and %q", strings.Join(args, " "), r[0], r[2], want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("gputide %s: still blocked after 5 s", strings.Join(args, " "))
		}
	}
}
