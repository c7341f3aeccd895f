package act

import (
	"context"
	"errors"
	"fmt"

	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/gputide/gputide/quota-broker/plan"
)

// ErrNotActing is returned for an act the Actor skipped because its Fence
// refused it (the broker does not hold the leader lock, DESIGN L12).
var ErrNotActing = errors.New("not acting: the leader lock is not held")

// JobWrite is what the Actor is about to do to one job, told to the Fence
// before the Nomad call (DESIGN L12: the intent is written first).
type JobWrite int

// The job writes a Fence is told about.
const (
	// WriteAdmit: the job moves from the holding pool to its pool, or a job
	// registered straight into its pool is accepted (admitted_at).
	WriteAdmit JobWrite = iota + 1
	// WriteRequeue: the job moves to the holding pool (a victim's job or a
	// suspended straight registration): it queues again (queued_at) and is
	// no longer admitted.
	WriteRequeue
	// WriteStatus: only the job's status meta (or its stop flag) changes.
	WriteStatus
)

func (w JobWrite) String() string {
	switch w {
	case WriteAdmit:
		return "admit"
	case WriteRequeue:
		return "requeue"
	case WriteStatus:
		return "status"
	}
	return fmt.Sprintf("JobWrite(%d)", int(w))
}

// Fence is the leader check and the intent log of DESIGN L12. The Actor
// calls Check before each act on Nomad and the Before... method before the
// call; an error from either skips the act (it is reported in the outcome
// wrapped with ErrNotActing when it came from Check) and every later act of
// the same Execute is checked again, so a broker that loses the lock
// mid-plan stops acting at its next act. After a register Nomad accepted,
// Registered reports the JobModifyIndex Nomad answered. A nil Fence lets
// every act through (a single broker without a store, tests).
type Fence interface {
	// Check returns nil while this broker may act (it holds the lock).
	Check(ctx context.Context) error
	// BeforeStop records the claimant of a stop (intents/<alloc>). Execute
	// announces every stop of a claimant before its first call, so that a
	// successor can finish a preemption its predecessor began.
	BeforeStop(ctx context.Context, act plan.Action) error
	// Withdraw drops the intent of an announced stop that was not made
	// (an earlier stop of its claimant failed, or the lock was lost).
	Withdraw(ctx context.Context, alloc string)
	// BeforeJob records a write to the job key names.
	BeforeJob(ctx context.Context, key plan.JobKey, w JobWrite) error
	// Registered records the JobModifyIndex Nomad gave the broker's write.
	Registered(ctx context.Context, key plan.JobKey, jobModifyIndex uint64)
	// BeforeStopJob records the status to write on a job about to be
	// stopped whole (stop_job), for this broker's next plans and its
	// successor's (build.JobRecord.Stopped).
	BeforeStopJob(ctx context.Context, key plan.JobKey, st build.StopStatus) error
	// ForgetStop drops the status recorded by BeforeStopJob: it is
	// written, or the job runs again.
	ForgetStop(ctx context.Context, key plan.JobKey)
	// BeforeScale records that an idle group's count is about to be
	// lowered: since when it has had allocations unplaced is dropped
	// (build.Input.UnplacedSince), so that a group still seen unplaced
	// afterwards waits Settle again.
	BeforeScale(ctx context.Context, group plan.GroupKey) error
}

// check is the L12 check before one act: nil without a Fence.
func (a *Actor) check(ctx context.Context) error {
	if a.Fence == nil {
		return nil
	}
	if err := a.Fence.Check(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrNotActing, err)
	}
	return nil
}

// beforeStop checks the lock and records the intent of a stop.
func (a *Actor) beforeStop(ctx context.Context, act plan.Action) error {
	if err := a.check(ctx); err != nil {
		return err
	}
	if a.Fence == nil {
		return nil
	}
	if err := a.Fence.BeforeStop(ctx, act); err != nil {
		return fmt.Errorf("failed to record the intent to stop allocation %s: %w", act.Alloc, err)
	}
	return nil
}

// beforeJob checks the lock and records the intent of a job write.
func (a *Actor) beforeJob(ctx context.Context, key plan.JobKey, w JobWrite) error {
	if err := a.check(ctx); err != nil {
		return err
	}
	if a.Fence == nil {
		return nil
	}
	if err := a.Fence.BeforeJob(ctx, key, w); err != nil {
		return fmt.Errorf("failed to record the %s of job %s: %w", w, key, err)
	}
	return nil
}

func (a *Actor) withdraw(ctx context.Context, alloc string) {
	if a.Fence != nil {
		a.Fence.Withdraw(ctx, alloc)
	}
}

func (a *Actor) registered(ctx context.Context, key plan.JobKey, index uint64) {
	if a.Fence != nil && index > 0 {
		a.Fence.Registered(ctx, key, index)
	}
}

// beforeStopJob checks the lock and records the status to write on a job
// about to be stopped whole.
func (a *Actor) beforeStopJob(ctx context.Context, key plan.JobKey, st build.StopStatus) error {
	if err := a.check(ctx); err != nil {
		return err
	}
	if a.Fence == nil {
		return nil
	}
	if err := a.Fence.BeforeStopJob(ctx, key, st); err != nil {
		return fmt.Errorf("failed to record the stop of job %s: %w", key, err)
	}
	return nil
}

func (a *Actor) forgetStop(ctx context.Context, key plan.JobKey) {
	if a.Fence != nil {
		a.Fence.ForgetStop(ctx, key)
	}
}

// beforeScale checks the lock and records the scale-down of an idle group.
func (a *Actor) beforeScale(ctx context.Context, group plan.GroupKey) error {
	if err := a.check(ctx); err != nil {
		return err
	}
	if a.Fence == nil {
		return nil
	}
	if err := a.Fence.BeforeScale(ctx, group); err != nil {
		return fmt.Errorf("failed to record the scale-down of group %s: %w", group, err)
	}
	return nil
}
