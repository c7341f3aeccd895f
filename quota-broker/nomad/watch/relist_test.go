package watch

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// governedLater governs nothing until set, then the three workspaces: the
// agent's Governed before and after it reads its quota tree.
type governedLater struct{ on atomic.Bool }

func (g *governedLater) governed(ns string) bool { return g.on.Load() && governedABC(ns) }

// Issue 16, attack list High #2: the list that ran before the governed
// namespaces were known kept no job, and nothing listed again while the
// stream stayed open. Relist ends the stream and lists at once, keeping
// the jobs of the namespaces governed now.
func TestWatcherRelistReadsTheJobsOfNamespacesGovernedSinceTheList(t *testing.T) {
	f := newFakeNomad(t) // the stream stays open after its (no) lines
	log, buf := testLogger(t)
	g := &governedLater{}
	w := &Watcher{Client: f.Client(), Governed: g.governed, Logger: log, Backoff: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; status %+v\n%s", what, w.Status(), buf.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("the first list", func() bool { return w.Status().Connected })
	if j := w.State().Job("workspace-c", "training"); j != nil {
		t.Fatal("a job of a namespace not governed yet was kept")
	}
	g.on.Store(true)
	time.Sleep(50 * time.Millisecond)
	if j := w.State().Job("workspace-c", "training"); j != nil || w.Status().Relists != 1 {
		t.Fatalf("listed again (%d lists) before Relist", w.Status().Relists)
	}
	w.Relist("the governed namespaces changed (test)")
	waitFor("the job after Relist", func() bool {
		st := w.State()
		return st != nil && st.Job("workspace-c", "training") != nil && st.Job("workspace-b", "training") != nil && w.Status().Connected
	})
	if n := w.Status().Relists; n != 2 {
		t.Errorf("lists = %d, want 2", n)
	}
	out := buf.String()
	if !strings.Contains(out, `listing Nomad again: reason="the governed namespaces changed (test)"`) {
		t.Errorf("no log of the relist:\n%s", out)
	}
	if strings.Contains(out, "lost the Nomad event stream") {
		t.Errorf("a relist is logged as a lost stream:\n%s", out)
	}
}

func governedABC(ns string) bool {
	return ns == "workspace-a" || ns == "workspace-b" || ns == "workspace-c"
}
