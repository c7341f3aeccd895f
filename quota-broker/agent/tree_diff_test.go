package agent

import (
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// With the Consul store the quota file only seeds an absent tree; when the
// store's tree differs, the agent warns naming the first difference
// (issue 10 item 1). treeDiff finds it, ignoring change times.
func TestTreeDiffNamesTheFirstDifference(t *testing.T) {
	tree := func(b1, b2 int) *quota.Node {
		return &quota.Node{Name: "Quota1", GPUs: quota.Plain(128), ChildPreemption: true, Namespaces: []string{"workspace-a"},
			Children: []*quota.Node{
				{Name: "Quota1.1", GPUs: quota.Plain(b1), Namespaces: []string{"workspace-b"}},
				{Name: "Quota1.2", GPUs: quota.Plain(b2), Namespaces: []string{"workspace-c"}, ChangedAt: time.Now()},
			}}
	}
	s := quota.DefaultSettings()
	if d := treeDiff(tree(48, 80), s, tree(48, 80), s); d != "" {
		t.Errorf("same trees: %q", d)
	}
	if d, want := treeDiff(tree(48, 80), s, tree(56, 72), s), "Quota1.1: 48 GPUs in the file, 56 in the store"; d != want {
		t.Errorf("moved quota: %q, want %q", d, want)
	}
	other := s
	other.DebtGrace = time.Minute
	if d := treeDiff(tree(48, 80), s, tree(48, 80), other); d == "" {
		t.Error("different settings: no difference found")
	}
}
