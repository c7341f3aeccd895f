//go:build !unix

package regfile

import "testing"

// mkfifo: no FIFOs here.
func mkfifo(t *testing.T, dir string) string { return "" }
