package plan

import (
	"testing"
	"time"
)

func TestGPUCountIsSingularForOne(t *testing.T) {
	for _, c := range []struct {
		n    int
		adj  []string
		want string
	}{
		{1, nil, "1 GPU"}, {8, nil, "8 GPUs"}, {0, nil, "0 GPUs"},
		{1, []string{"free"}, "1 free GPU"}, {2, []string{"free"}, "2 free GPUs"},
	} {
		if got := gpuCount(c.n, c.adj...); got != c.want {
			t.Errorf("gpuCount(%d, %q) = %q, want %q", c.n, c.adj, got, c.want)
		}
	}
}

// A one-GPU group that finds no room waits with "1 free GPU", not "1 free
// GPUs": every GPU of the only node is held for a reservation (L10), and
// the wait says so (issue 16 item 6).
func TestWaitReasonSaysOneFreeGPU(t *testing.T) {
	start := t0.Add(-time.Minute)
	build := func(idle bool) *Snapshot {
		s := newSnap(referenceTree()).nodes(1, 8, h100).
			booking("r-b", "workspace-b", "Quota1.1", 8, start, start.Add(time.Hour)).build()
		s.Holds = []Hold{{For: HoldOwner{Reservation: "r-b"}, Node: "node-01",
			GPUIDs: []string{"node-01-gpu0", "node-01-gpu1", "node-01-gpu2", "node-01-gpu3",
				"node-01-gpu4", "node-01-gpu5", "node-01-gpu6", "node-01-gpu7"}, Until: t0.Add(time.Minute)}}
		s.Pending = []Pending{{Namespace: "workspace-c", Job: "j", Group: "g", Type: JobBatch, Priority: 50, Count: 1,
			GPUs: 1, NodePool: "default", Idle: idle, SubmittedAt: t0}}
		return s
	}
	for idle, want := range map[bool]string{
		false: `no node has 1 free GPU in any datacenter, node pool "default", even with preemption; 8 GPUs held for reservation r-b`,
		true:  `idle job: no node has 1 free GPU in any datacenter, node pool "default", even with fair give-back (L14); 8 GPUs held for reservation r-b`,
	} {
		p := mustPlan(t, build(idle))
		if w := actionsOf(p, ActionWait); len(w) != 1 || w[0].Reason != want {
			t.Errorf("idle %v: actions %+v, want one wait with reason %q", idle, p.Actions, want)
		}
	}
}
