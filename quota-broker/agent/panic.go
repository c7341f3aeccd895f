package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/gputide/gputide/quota-broker/plan"
)

// PanicError is a panic recovered from the planner or from a step of the
// broker's cycle: its value and the goroutine's stack where it was
// recovered.
type PanicError struct {
	Step  string // the step of the cycle ("plan", "act", ...); "" for PlanSafely
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	if e.Step != "" {
		return fmt.Sprintf("panic in step %q of the cycle: %v", e.Step, e.Value)
	}
	return fmt.Sprintf("the planner panicked: %v", e.Value)
}

// PlanSafely runs planner on s (plan.ComputeFair, the broker's planner, when nil) and turns a panic
// into a *PanicError carrying the stack, so that no caller (the agent's
// cycle, gputide plan) dies of the planner.
func PlanSafely(planner Planner, s *plan.Snapshot) (p *plan.Plan, err error) {
	if planner == nil {
		planner = plan.ComputeFair
	}
	defer func() {
		if v := recover(); v != nil {
			p, err = nil, &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return planner(s)
}

// cycleRun is what one cycle is doing, for the report of a panic: the step
// and the snapshot it built, once built.
type cycleRun struct {
	step string
	snap *plan.Snapshot
}

// recoverCycle ends a cycle that panicked (deferred by cycle): the broker
// stops acting until a later plan succeeds (L12), counts the panic
// (gputide_cycle_panics_total), and, the first time in a streak of the same
// panic, logs it once with the stack and dumps the snapshot with the panic
// into dump_dir. A panic repeated cycle after cycle is counted and logged
// at debug level only. The HTTP reads keep the last good plan.
func (a *Agent) recoverCycle(run *cycleRun) {
	v := recover()
	if v == nil {
		return
	}
	pe := &PanicError{Step: run.step, Value: v, Stack: debug.Stack()}
	a.metrics.CyclePanics.Inc()
	a.setActing(false, pe.Error()+"; not acting until a plan succeeds", run.step)
	msg := fmt.Sprint(v)
	if msg == a.lastPanic {
		a.log.Debug("the cycle panicked again (logged with its stack before)", "step", run.step, "panic", msg)
		return
	}
	a.lastPanic = msg
	var files []string
	if a.cfg.DumpDir != "" {
		files = a.dump(run.snap, nil, pe)
	}
	a.log.Error("recovered from a panic in the cycle: not acting until a plan succeeds (L12)",
		"step", run.step, "panic", msg, "dump", files, "stack", string(pe.Stack))
}

// panicDump is the JSON of a panic-<stamp>.json dump file.
type panicDump struct {
	Step  string `json:"step"`
	Panic string `json:"panic"`
	Stack string `json:"stack"`
}

func writePanicDump(path string, pe *PanicError) error {
	data, err := json.MarshalIndent(panicDump{Step: pe.Step, Panic: fmt.Sprint(pe.Value), Stack: string(pe.Stack)}, "", "  ")
	if err != nil {
		return fmt.Errorf("failed to encode the panic: %w", err)
	}
	if err := os.WriteFile(filepath.Clean(path), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("failed to write the panic dump: %w", err)
	}
	return nil
}
