package regfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestReadsARegularFileUpToItsCap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Read(p, 5)
	if err != nil || string(b) != "12345" {
		t.Fatalf("Read at the cap: %q, %v; want 12345", b, err)
	}
	_, err = Read(p, 4)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrTooLarge) || e.Size != 5 || e.Limit != 4 {
		t.Fatalf("Read over the cap: %v; want ErrTooLarge with size 5 and limit 4", err)
	}
	if want := p + ": larger than 4 bytes, the most this kind of file may be (5 bytes or more)"; err.Error() != want {
		t.Errorf("message %q; want it to start with %q", err, want)
	}
}

// Each is refused before a byte is read: /dev/zero would never end, and
// a FIFO without a writer would block the open.
func TestRefusesDevicesFoldersAndFIFOsAtOnce(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ path, kind string }{
		{"/dev/zero", "a character device"},
		{dir, "a folder"},
		{"/", "a folder"},
	}
	if fifo := mkfifo(t, dir); fifo != "" {
		cases = append(cases, struct{ path, kind string }{fifo, "a FIFO"})
	}
	for _, tc := range cases {
		done := make(chan error, 1)
		go func() { _, err := Read(tc.path, 1<<20); done <- err }()
		select {
		case err := <-done:
			want := tc.path + ": not a regular file (" + tc.kind + "): want a regular file"
			if !errors.Is(err, ErrNotRegular) || err.Error() != want {
				t.Errorf("Read(%s): %v; want %q", tc.path, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Read(%s) still reading after 5 s", tc.path)
		}
	}
}

func TestAMissingFileIsErrNotExist(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "absent"), 10)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open of a missing file: %v; want fs.ErrNotExist", err)
	}
}

// A file that grows after it was opened is cut at the cap with an error,
// not read on.
func TestAFileThatGrowsPastTheCapFails(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte("abc"), 0o644)
	f, err := Open(p, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.WriteFile(p, []byte("abcdefgh"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	if string(b) != "abcd" || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("read %q, %v; want abcd and ErrTooLarge", b, err)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{300: "300 bytes", 64 << 10: "64 KiB", 1 << 20: "1 MiB", 3 << 19: "1.5 MiB", 64 << 20: "64 MiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q; want %q", n, got, want)
		}
	}
}
