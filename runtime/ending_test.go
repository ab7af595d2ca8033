package runtime

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/monitor"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
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

// A turn stopped while it streams says so itself; one the gateway
// interrupts says that instead.
func TestRunNamesAStop(t *testing.T) {
	e, err := NewEngine([]*Model{{Name: "m", ProvName: "builtin", Provider: builtin.New(time.Millisecond), Remote: "echo", Window: 128000}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cause error
		end   Ending
		class ErrorClass
	}{{ErrStopped, Stopped, ""}, {ErrInterrupted, Interrupted, ClassInterrupted}} {
		ctx, cancel := context.WithCancelCause(context.Background())
		res, err := e.Run(ctx, TurnInput{Chain: "default", History: []provider.Message{{Role: "user", Content: "tell me a long story about the sea"}}},
			func(string) error { cancel(c.cause); return nil })
		if err == nil || res.End != c.end || res.Class != c.class {
			t.Errorf("cancelled with %v: ended %s (%q), %v; want %s (%q)", c.cause, res.End, res.Class, err, c.end, c.class)
		}
	}
}
