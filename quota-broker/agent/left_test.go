package agent

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/hashicorp/go-hclog"
)

func TestAnItemLeftOutIsLoggedOnceWhileItStaysOut(t *testing.T) {
	var out bytes.Buffer
	a := &Agent{log: hclog.New(&hclog.LoggerOptions{Output: &out})}
	node := &plan.Fault{Path: "nodes[1].gpus[8].id", Message: `GPU "GPU-1" is listed twice (also nodes[1].gpus[0].id)`,
		Item: plan.ItemNode, Index: 1, ID: "node-2"}
	alloc := &plan.Fault{Path: "allocations[4].node", Message: `unknown node "node-2"`, Item: plan.ItemAllocation,
		Index: 4, ID: "a4", Job: plan.JobKey{Namespace: "workspace-b", Job: "train"}}
	a.logLeft([]*plan.Fault{node, alloc})
	a.logLeft([]*plan.Fault{node, alloc})
	a.logLeft([]*plan.Fault{node})
	a.logLeft([]*plan.Fault{node, alloc}) // back again: logged again
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (node, allocation, allocation again):\n%s", len(lines), out.String())
	}
	for i, want := range []string{`id=node-2`, `id=a4`, `id=a4`} {
		if !strings.Contains(lines[i], "left out of the plan") || !strings.Contains(lines[i], want) {
			t.Errorf("line %d = %s; want it to name %s", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[1], `job=workspace-b/train`) || !strings.Contains(lines[1], `path=allocations[4].node`) {
		t.Errorf("the allocation's line does not name its job and path: %s", lines[1])
	}
}
