package runtime

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/mirror-gateway/mirror/monitor"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/view"
)

func TestEnding(t *testing.T) {
	live := context.Background()
	cancelled := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	expired, stop := context.WithTimeout(context.Background(), 0)
	defer stop()
	<-expired.Done()
	ended := &Boundary{Continued: false}
	went := &Boundary{Continued: true}
	over := &provider.Error{Provider: "p", Class: provider.ClassOverloaded}
	for _, c := range []struct {
		name  string
		ctx   context.Context
		out   TurnResult
		err   error
		end   Ending
		class ErrorClass
	}{
		{"answer", live, TurnResult{Reply: "hi"}, nil, Answered, ""},
		{"empty answer", live, TurnResult{}, nil, Answered, ""},
		{"work ended at a boundary", live, TurnResult{Boundary: ended}, nil, StoppedAtBoundary, ""},
		{"went on past a boundary", live, TurnResult{Boundary: went, Reply: "done"}, nil, Answered, ""},
		{"stopped", cancelled(ErrStopped), TurnResult{Reply: "part"}, context.Canceled, Stopped, ""},
		{"stopped at a boundary", cancelled(ErrStopped), TurnResult{Boundary: ended}, context.Canceled, StoppedAtBoundary, ""},
		{"interrupted", cancelled(ErrInterrupted), TurnResult{}, context.Canceled, Interrupted, ClassInterrupted},
		{"deadline", expired, TurnResult{}, fmt.Errorf("%w (x)", context.DeadlineExceeded), Failed, ClassInternal},
		{"provider", live, TurnResult{}, over, Failed, ErrorClass(provider.ClassOverloaded)},
		{"tool loop", live, TurnResult{}, &ToolLoopError{Tool: "shell"}, Failed, ClassToolLoop},
		{"budget", live, TurnResult{}, &view.BudgetError{Stage: "preflight"}, Failed, ClassBudget},
		{"boundary", live, TurnResult{}, fmt.Errorf("%w: disk", ErrBoundary), Failed, ClassBoundary},
		{"breaker", live, TurnResult{}, fmt.Errorf("x: %w", monitor.ErrOpen), Failed, ClassBreakerOpen},
		{"other", live, TurnResult{}, errors.New("journal full"), Failed, ClassInternal},
	} {
		end, class := ending(c.ctx, c.out, c.err)
		if end != c.end || class != c.class {
			t.Errorf("%s: ended %s (%q), want %s (%q)", c.name, end, class, c.end, c.class)
		}
	}
}
