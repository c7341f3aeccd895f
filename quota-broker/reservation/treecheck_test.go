package reservation

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/quota"
)

// CheckTree (issue 16, attack list High #1): a tree that would leave a
// booking's namespace outside the booking's node, drop the node, break L1
// or leave bookings above a nominal is refused, naming the namespace or
// the numbers; a booking that has ended does not count.
func TestCheckTreeAgainstTheBookings(t *testing.T) {
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	tree := func(mod func(root *quota.Node)) *quota.Node {
		root := &quota.Node{Name: "Quota1", GPUs: quota.Plain(8), Namespaces: []string{"workspace-a"}, Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: quota.Plain(3), Namespaces: []string{"workspace-b"}},
			{Name: "Quota1.2", GPUs: quota.Plain(5), Namespaces: []string{"workspace-c"}},
		}}
		if mod != nil {
			mod(root)
		}
		return root
	}
	c := Booking{ID: "r-c", Namespace: "workspace-c", Node: "Quota1.2", GPUs: 4, AllocGPUs: 4, Start: now.Add(time.Hour), End: now.Add(3 * time.Hour)}
	ended := c
	ended.ID, ended.Start, ended.End = "r-old", now.Add(-3*time.Hour), now
	for _, tt := range []struct {
		name     string
		root     *quota.Node
		bookings []Booking
		kind     error // nil: accepted
		want     string
	}{
		{"unchanged", tree(nil), []Booking{c}, nil, ""},
		{"rebound elsewhere", tree(func(r *quota.Node) {
			r.Children[1].Namespaces = []string{"workspace-x"}
			r.Namespaces = []string{"workspace-a", "workspace-c"}
		}),
			[]Booking{c}, ErrUnbound,
			`namespace "workspace-c": its booking "r-c" is in quota "Quota1.2" and this tree binds it to quota "Quota1"`},
		{"unbound", tree(func(r *quota.Node) { r.Children[1].Namespaces = []string{"workspace-x"} }), []Booking{c}, ErrUnbound,
			`namespace "workspace-c": its booking "r-c" is in quota "Quota1.2" and this tree binds it to no quota node`},
		{"node removed", tree(func(r *quota.Node) { r.Children = r.Children[:1]; r.Namespaces = append(r.Namespaces, "workspace-c") }),
			[]Booking{c}, ErrUnbound, `namespace "workspace-c": its booking "r-c" is in quota "Quota1.2", which this tree removes`},
		{"bound below the node", tree(func(r *quota.Node) {
			r.Children[1].Namespaces = nil
			r.Children[1].Children = []*quota.Node{{Name: "Quota1.2.1", GPUs: quota.Plain(5), Namespaces: []string{"workspace-c"}}}
		}), []Booking{c}, nil, ""},
		{"above a nominal", tree(func(r *quota.Node) { r.Children[1].GPUs = quota.Plain(3) }), []Booking{c}, ErrRefused,
			"Quota1.2 at 2026-12-01T09:00Z: 4 of 3 GPUs booked"},
		{"L1", tree(func(r *quota.Node) { r.Children[1].GPUs = quota.Plain(6) }), []Booking{c}, nil, `quota "Quota1": `},
		{"an ended booking does not count", tree(func(r *quota.Node) { r.Children[1].Namespaces = []string{"workspace-x"} }),
			[]Booking{ended}, nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckTree(tt.root, tt.bookings, now)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("err = %v, want nil", err)
			case tt.want == "":
				return
			case err == nil:
				t.Fatalf("err = nil, want %q", tt.want)
			case tt.kind != nil && !errors.Is(err, tt.kind):
				t.Errorf("err = %v, want kind %v", err, tt.kind)
			case tt.kind == nil:
				var ve *quota.ValidationError
				if !errors.As(err, &ve) {
					t.Errorf("err = %#v, want a *quota.ValidationError", err)
				}
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}
