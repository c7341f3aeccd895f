// Package watchtest holds the test helpers that the act and build
// packages share on top of the fake Nomad: a State listed from the
// recording, and its maps for tests that shape a state by hand. It is
// apart from fakenomad because the watch package's own tests use
// fakenomad, which therefore may not import watch.
package watchtest

import (
	"context"
	"testing"

	"github.com/gputide/gputide/quota-broker/nomad/internal/fakenomad"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
)

// ListRecorded lists the recording through a new fake Nomad.
func ListRecorded(t *testing.T) (*fakenomad.Nomad, *watch.State) {
	t.Helper()
	f := fakenomad.New(t)
	s, err := watch.ListAll(context.Background(), f.Client(), func(string) bool { return true })
	if err != nil {
		t.Fatalf("ListAll: %v", err)
	}
	return f, s
}

// Raw returns the maps of s, for tests that shape a state by hand before
// anything else reads it.
func Raw(s *watch.State) watch.View {
	var v watch.View
	s.Edit(func(x watch.View) { v = x })
	return v
}
