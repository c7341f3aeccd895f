package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bookingFlavorTree is the reference tree with two flavors (DESIGN L13).
const bookingFlavorTree = `
flavor "h100" {
  models = ["NVIDIA H100 80GB HBM3"]
}
flavor "a100" {
  models = ["NVIDIA A100-SXM4-40GB"]
}
quota "Quota1" {
  gpus             = { h100 = 64, a100 = 64 }
  child_preemption = true
  namespaces       = ["workspace-a"]
  quota "Quota1.1" {
    gpus       = { h100 = 24, a100 = 24 }
    namespaces = ["workspace-b"]
  }
  quota "Quota1.2" {
    gpus       = { h100 = 40, a100 = 40 }
    namespaces = ["workspace-c"]
  }
}
`

// reservation create -flavor (issue 17 item 4): in a tree of two flavors
// the flavor is required (the error names the choices), checked per
// flavor (a100 refused against a100's bookings, with the earliest a100
// start; h100 beside it fits), and shown by create, list and show.
func TestReservationCreateFlavor(t *testing.T) {
	addr := startBroker(t)
	t.Setenv("GPUTIDE_ADDR", addr)
	t.Setenv("NOMAD_TOKEN", "adm")
	file := filepath.Join(t.TempDir(), "quota.hcl")
	if err := os.WriteFile(file, []byte(bookingFlavorTree), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "quota", "apply", file); code != 0 {
		t.Fatalf("quota apply: exit %d %s %s", code, out, errOut)
	}
	create := func(extra ...string) []string {
		return append([]string{"reservation", "create", "-namespace", "workspace-b", "-gpus", "16",
			"-start", "2026-12-07T08:00:00+09:00", "-duration", "24h"}, extra...)
	}
	for _, tc := range []struct {
		args     []string
		code     int
		out, err string
	}{
		{create(), 1, "", `flavor "": is missing: the tree has 2 flavors (h100, a100), name one`},
		{create("-flavor", "v100"), 1, "", `flavor "v100": is not a flavor of the tree (h100, a100)`},
		{create("-flavor", "a100", "-model", "NVIDIA A100-SXM4-40GB"), 1, "",
			`-flavor "a100": given with -model "NVIDIA A100-SXM4-40GB": a booking gives flavor or model, not both`},
		{create("-flavor", "a 100"), 1, "", `-flavor "a 100": not a flavor name`},
		{create("-flavor", "a100", "-id", "ra"), 0,
			`Reservation "ra" booked: 16 a100 GPUs (2x8) of Quota1.1 for workspace-b, 2026-12-07T08:00+09:00 to 2026-12-08T08:00+09:00`, ""},
		{create("-flavor", "a100"), 1, "",
			"Quota1.1 at 2026-12-07T08:00+09:00: 16 of 24 a100 GPUs booked, 16 asked; earliest start that fits: 2026-12-08T08:00+09:00"},
		{create("-flavor", "h100", "-id", "rh"), 0, `Reservation "rh" booked: 16 h100 GPUs (2x8)`, ""},
		{[]string{"reservation", "show", "ra"}, 0, "Flavor               = a100", ""},
		{[]string{"reservation", "show", "-json", "rh"}, 0, `"flavor": "h100"`, ""},
	} {
		code, out, errOut := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errOut, tc.err) {
			t.Errorf("%v: exit %d\nstdout %s\nstderr %s\nwant exit %d, stdout with %q, stderr with %q", tc.args, code, out, errOut, tc.code, tc.out, tc.err)
		}
	}
	code, out, _ := runCLI(t, "reservation", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.Contains(lines[0], "Flavor") ||
		!strings.Contains(lines[1], "ra") || !strings.Contains(lines[1], "a100") ||
		!strings.Contains(lines[2], "rh") || !strings.Contains(lines[2], "h100") {
		t.Errorf("reservation list: exit %d\n%s", code, out)
	}
}
