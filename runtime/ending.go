package runtime

import (
	"context"
	"errors"

	"github.com/mirror-gateway/mirror/monitor"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// Ending says how a turn ended, so that the chat records it without
// guessing from an empty reply.
type Ending string

// How a turn ends.
const (
	// Answered: the model answered (after its tool calls, or across a
	// boundary whose fresh conversation went on).
	Answered Ending = "answered"
	// Stopped: the person stopped the turn; Reply is what it had.
	Stopped Ending = "stopped"
	// StoppedAtBoundary: the work ended at a boundary and the turn with it;
	// the record opening the cleared conversation says so, and there is
	// no answer to add.
	StoppedAtBoundary Ending = "stopped_at_boundary"
	// Interrupted: the gateway stopped while the turn ran; it is answered
	// again at the next start.
	Interrupted Ending = "interrupted"
	// Failed: the turn failed; Class says how.
	Failed Ending = "failed"
)

// ErrorClass is how a turn failed, as turn.failed events name it: a
// provider's class (provider.Class) or one of the runtime's below.
type ErrorClass string

// The runtime's own failure classes.
const (
	ClassInterrupted ErrorClass = "interrupted"    // the gateway stopped during the turn
	ClassToolLoop    ErrorClass = "tool_loop"      // the same call kept failing
	ClassBudget      ErrorClass = "budget"         // the request cannot fit; nothing was sent
	ClassBoundary    ErrorClass = "boundary"       // a boundary could not happen
	ClassBreakerOpen ErrorClass = "breaker_open"   // every model's breaker is open
	ClassSpending    ErrorClass = "spending_limit" // a daily budget is spent; nothing was sent
	ClassInternal    ErrorClass = "internal"       // anything else
)

// Causes a chat cancels a turn's context with (context.WithCancelCause):
// they tell a stop from an interruption.
var (
	ErrStopped     = errors.New("stopped by the person")
	ErrInterrupted = errors.New("the gateway is shutting down")
)

// ClassOf is the class of a turn's failure.
func ClassOf(err error) ErrorClass {
	if c := provider.ClassOf(err); c != "" {
		return ErrorClass(c)
	}
	var loop *ToolLoopError
	var budget *view.BudgetError
	switch {
	case errors.As(err, &loop):
		return ClassToolLoop
	case errors.As(err, &budget):
		return ClassBudget
	case errors.Is(err, ErrBoundary):
		return ClassBoundary
	case errors.Is(err, monitor.ErrOpen):
		return ClassBreakerOpen
	case errors.Is(err, monitor.ErrSpendingLimit):
		return ClassSpending
	case errors.Is(err, ErrInterrupted):
		return ClassInterrupted
	}
	return ClassInternal
}

// ending is how a turn that returned out and err ended, given its
// context: a cancelled turn's error stands for its cause (a stop, an
// interruption, the turn's deadline), not for what it cut short.
func ending(ctx context.Context, out TurnResult, err error) (Ending, ErrorClass) {
	if err != nil && ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = cause
		}
	}
	stopped := errors.Is(err, ErrStopped)
	switch {
	case (err == nil || stopped) && out.Boundary != nil && !out.Boundary.Continued && out.Reply == "":
		return StoppedAtBoundary, ""
	case stopped:
		return Stopped, ""
	case err == nil:
		return Answered, ""
	case errors.Is(err, ErrInterrupted):
		return Interrupted, ClassInterrupted
	}
	return Failed, ClassOf(err)
}
