package reservation

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzPrepare: a booking's validation (DESIGN L10, issue 9 items 3 and 8)
// never panics, whatever the ID, namespace, counts, start and duration;
// every refusal is an *Error of kind ErrInvalid whose message starts with
// the field and its quoted value; what it accepts keeps the rules (valid
// ID, the namespace's node, 0 < gpus, alloc_gpus dividing gpus, start in
// (now, now + max_ahead], duration from min_duration to MaxDuration).
func FuzzPrepare(f *testing.F) {
	f.Add("r-1", "workspace-b", 16, 0, int64(6*24*3600), int64(168*3600))
	f.Add("Bad_ID", "workspace-b", 16, 5, int64(-60), int64(-1))
	f.Add("r-2", "nowhere", 0, -8, int64(0), int64(3600))
	f.Add("r-3", "workspace-a", 1<<31-1, 1, int64(1344*3600), int64(2160*3600))
	f.Add("r-4", "workspace-b", 12, 24, int64(1344*3600+1), int64(59*60))
	f.Fuzz(func(t *testing.T, id, ns string, gpus, alloc int, startSec, durSec int64) {
		tr := testTree(t)
		now := time.Date(2026, 12, 1, 9, 0, 0, 0, tokyo)
		start := now.Add(time.Duration(startSec%(1<<33)) * time.Second)
		b := Booking{ID: id, Namespace: ns, GPUs: gpus, AllocGPUs: alloc, Start: start,
			End: start.Add(time.Duration(durSec%(1<<33)) * time.Second)}
		lim := DefaultLimits()
		got, err := Prepare(tr, b, now, lim)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) || e.Field == "" {
				t.Fatalf("Prepare(%+v): %T %v, want an invalid *Error naming a field", b, err, err)
			}
			if want := e.Field + " " + strconv.Quote(e.Value) + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("Prepare(%+v) = %q, want it to start with %q", b, err, want)
			}
			return
		}
		node, _ := tr.NodeOf(ns)
		d := got.End.Sub(got.Start)
		switch {
		case ValidID(got.ID) != nil || got.ID != id:
			t.Fatalf("accepted ID %q", got.ID)
		case got.Node != node || node == "":
			t.Fatalf("accepted node %q for namespace %q (bound to %q)", got.Node, ns, node)
		case got.GPUs <= 0 || got.AllocGPUs <= 0 || got.GPUs%got.AllocGPUs != 0:
			t.Fatalf("accepted gpus %d, alloc_gpus %d", got.GPUs, got.AllocGPUs)
		case alloc == 0 && got.AllocGPUs != DefaultAllocGPUs(gpus):
			t.Fatalf("default alloc_gpus %d for %d GPUs", got.AllocGPUs, gpus)
		case !got.Start.After(now) || got.Start.After(now.Add(lim.MaxAhead)):
			t.Fatalf("accepted start %s at %s", got.Start, now)
		case d < lim.MinDuration || d > MaxDuration:
			t.Fatalf("accepted duration %s", d)
		}
	})
}
