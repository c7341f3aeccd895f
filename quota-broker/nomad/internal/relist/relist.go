// Package relist lets a watch loop (the Nomad watcher, the scaling policy
// watcher) end the request it is running and start over when asked.
package relist

import (
	"context"
	"sync"
)

// Relister lets a caller end the request a watch loop is running and make
// it start over (Watcher.Relist, PolicyWatcher.Relist). The zero value is
// ready.
type Relister struct {
	mu  sync.Mutex
	ch  chan struct{}
	why string
}

func (r *Relister) channel() chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ch == nil {
		r.ch = make(chan struct{}, 1)
	}
	return r.ch
}

// Ask ends the run under way (or the next one) with why.
func (r *Relister) Ask(why string) {
	if why == "" {
		why = "asked"
	}
	ch := r.channel()
	r.mu.Lock()
	r.why = why
	r.mu.Unlock()
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Run calls f with a context that Ask cancels, and returns the reason
// when ask ended it, else "". A request made before run started is
// dropped: f starts after it and sees what it asked for.
func (r *Relister) Run(ctx context.Context, f func(ctx context.Context)) (why string) {
	ch := r.channel()
	select {
	case <-ch:
	default:
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-ch:
			r.mu.Lock()
			why = r.why
			r.mu.Unlock()
			cancel()
		case <-done:
		}
	}()
	f(fctx)
	close(done)
	<-exited
	return why
}
