package mockgpu

import (
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// eventQueueSize bounds the undelivered events of one set; older events are
// dropped when it is full (the real driver also drops under pressure).
const eventQueueSize = 256

// eventSet is a mock NVML event set: Wait blocks on a queue filled by fault
// injection, with the timeout NVML's nvmlEventSetWait takes.
type eventSet struct {
	*mock.EventSet
	ch   chan nvml.EventData
	once sync.Once
	done chan struct{}
}

var _ nvml.EventSet = (*eventSet)(nil)

func newEventSet() *eventSet {
	s := &eventSet{EventSet: &mock.EventSet{}, ch: make(chan nvml.EventData, eventQueueSize), done: make(chan struct{})}
	s.WaitFunc = func(timeoutms uint32) (nvml.EventData, nvml.Return) {
		select { // a queued event wins over an expired timeout
		case ev := <-s.ch:
			return ev, nvml.SUCCESS
		default:
		}
		t := time.NewTimer(time.Duration(timeoutms) * time.Millisecond)
		defer t.Stop()
		select {
		case ev := <-s.ch:
			return ev, nvml.SUCCESS
		case <-s.done:
			return nvml.EventData{}, nvml.ERROR_UNINITIALIZED
		case <-t.C:
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
	}
	s.FreeFunc = func() nvml.Return {
		s.once.Do(func() { close(s.done) })
		return nvml.SUCCESS
	}
	return s
}

func (s *eventSet) push(ev nvml.EventData) {
	for {
		select {
		case s.ch <- ev:
			return
		default:
		}
		select { // full: drop the oldest
		case <-s.ch:
		default:
		}
	}
}

// Wait implements nvml.EventSet without recording the call.
func (s *eventSet) Wait(timeoutms uint32) (nvml.EventData, nvml.Return) { return s.WaitFunc(timeoutms) }

// Free implements nvml.EventSet without recording the call.
func (s *eventSet) Free() nvml.Return { return s.FreeFunc() }
