package command

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanShowsAUsageRowPerFlavor: a tree with flavors (DESIGN L13) gets a
// Flavor column and a usage row per quota node and flavor.
func TestPlanShowsAUsageRowPerFlavor(t *testing.T) {
	code, out, errOut := run(t, "", "plan", filepath.Join("..", "plan", "testdata", "planfuzz", "flavors-mixed-mig.json"))
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	usage := table(t, out, "Usage")
	if got := strings.Join(usage[0], "|"); got != "Quota|Flavor|Nominal|Used|NonIdle|Borrowed|Debt|Lendable" {
		t.Fatalf("usage header = %q", got)
	}
	var rows []string
	for _, r := range usage[1:4] {
		rows = append(rows, strings.Join(r[:3], " "))
	}
	if got := strings.Join(rows, ", "); got != "Quota1 h100 16, Quota1 a100-1g 14, Quota1 a100 8" {
		t.Errorf("Quota1's rows = %s", got)
	}
}
