package trace

import (
	"strings"
	"testing"
)

// A header naming a column the reader needs twice is ambiguous: an error
// naming the column, not the later one read silently.
func TestHeaderWithARequiredColumnTwice(t *testing.T) {
	_, err := ReadOpenbNodes(strings.NewReader("sn,gpu,model,gpu\nn0,8,G2,0\n"), "nodes.csv")
	if err == nil || !strings.Contains(err.Error(), `nodes.csv:1: header "sn,gpu,model,gpu" names column "gpu" twice (columns 2 and 4)`) {
		t.Errorf("error %v", err)
	}
	// Columns the reader ignores may repeat.
	if _, err := ReadOpenbNodes(strings.NewReader("sn,x,gpu,model,x\nn0,1,8,G2,2\n"), "nodes.csv"); err != nil {
		t.Errorf("repeated ignored column: %v", err)
	}
}

// A UTF-8 byte order mark before the header (a spreadsheet's export) is
// not part of the first column's name.
func TestHeaderAfterAByteOrderMark(t *testing.T) {
	inv, err := ReadOpenbNodes(strings.NewReader("\ufeffsn,gpu,model\r\nn0,8,G2\r\n"), "nodes.csv")
	if err != nil || len(inv.Nodes) != 1 || inv.Nodes[0].Name != "n0" {
		t.Fatalf("inventory %+v, error %v", inv, err)
	}
}
