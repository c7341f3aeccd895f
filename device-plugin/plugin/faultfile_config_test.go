package plugin

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// mock_fault_file must name a regular file or a path where one may appear:
// "/" was accepted, and a folder, a device or a FIFO fails or blocks every
// health check.
func TestMockFaultFileMustBeARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{"/", `invalid mock_fault_file "/": names a folder: want the path of a regular file (it may not exist yet)`},
		{dir + "/", `invalid mock_fault_file "` + dir + `/": names a folder: want the path of a regular file (it may not exist yet)`},
		{dir, `invalid mock_fault_file "` + dir + `": ` + dir + `: not a regular file (a folder): want a regular file`},
		{"/dev/zero", `invalid mock_fault_file "/dev/zero": /dev/zero: not a regular file (a character device): want a regular file`},
		{fifo, `invalid mock_fault_file "` + fifo + `": ` + fifo + `: not a regular file (a FIFO): want a regular file`},
	} {
		_, err := DecodeConfig(encode(t, `mock_fault_file = "`+tc.path+`"`))
		if err == nil || err.Error() != tc.want {
			t.Errorf("mock_fault_file = %q: error %v; want %q", tc.path, err, tc.want)
		}
	}
	// A file that does not exist yet is fine: it means no faults.
	absent := filepath.Join(dir, "faults")
	cfg, err := DecodeConfig(encode(t, `mock_fault_file = "`+absent+`"`))
	if err != nil || cfg.MockFaultFile != absent {
		t.Errorf("an absent file: config %q, error %v; want it accepted", cfg.MockFaultFile, err)
	}
}

// A FIFO that appears at mock_fault_file after the config was accepted
// does not block the first fingerprint (it did: the health check's read
// waited for a writer): the read is refused and all GPUs are reported.
func TestAFIFOAtTheFaultFileDoesNotBlockTheFirstFingerprint(t *testing.T) {
	faults := filepath.Join(t.TempDir(), "faults")
	p := newPlugin(t, "backend = \"mock\"\nmock_uuid_seed = \"f\"\nmock_fault_file = \""+faults+"\"")
	if err := syscall.Mkfifo(faults, 0o600); err != nil {
		t.Fatal(err)
	}
	r := next(t, fingerprints(t, p), 5*time.Second)
	if h, n := healthyCount(r); h != 8 || n != 8 {
		t.Errorf("first fingerprint: %d/%d healthy, want 8/8", h, n)
	}
}
