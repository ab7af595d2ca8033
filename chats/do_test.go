package chats

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// handedOver is a context that ends on its second Done call: after the
// caller has handed its task to the chat's goroutine and waits for the
// reply, so the actor is still running (or about to run) the task when the
// caller gives up.
type handedOver struct {
	context.Context
	calls        atomic.Int32
	open, closed chan struct{}
}

func newHandedOver() *handedOver {
	c := &handedOver{Context: context.Background(), open: make(chan struct{}), closed: make(chan struct{})}
	close(c.closed)
	return c
}

func (c *handedOver) Done() <-chan struct{} {
	if c.calls.Add(1) >= 2 {
		return c.closed
	}
	return c.open
}

func (c *handedOver) Err() error {
	if c.calls.Load() >= 2 {
		return context.Canceled
	}
	return nil
}

// A request whose context ends while the chat's goroutine runs its task
// gets either the whole answer or the zero value with the context's error,
// never a value the actor is still writing (-race catches the latter).
func TestResultsNotReadWhileTheActorWrites(t *testing.T) {
	e := newEnv(t, newGate(true))
	c := e.chat()
	cases := []struct {
		name string
		// partial: an answer may come with the error (Export stops when
		// ctx ends, with the chat it began).
		partial bool
		call    func(ctx context.Context) (zero bool, err error)
	}{
		{"status", false, func(ctx context.Context) (bool, error) {
			out, err := e.svc.Command(ctx, c.ID, "/status", Origin{})
			return out == "", err
		}},
		{"mcp", false, func(ctx context.Context) (bool, error) {
			out, err := e.svc.Command(ctx, c.ID, "/mcp", Origin{})
			return out == "", err
		}},
		{"get", false, func(ctx context.Context) (bool, error) {
			got, err := e.svc.Get(ctx, c.ID)
			return got.ID == "", err
		}},
		{"history", false, func(ctx context.Context) (bool, error) {
			h, err := e.svc.History(ctx, c.ID, 0, "r")
			return h == nil, err
		}},
		{"export", true, func(ctx context.Context) (bool, error) {
			got, err := e.svc.Export(ctx, c.ID, nil, func(Message) error { return nil })
			return got.ID == "", err
		}},
		{"new", false, func(ctx context.Context) (bool, error) {
			out, err := e.svc.Command(ctx, c.ID, "/new", Origin{})
			return out == "", err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cancelled := 0
			for range 200 {
				zero, err := tc.call(newHandedOver())
				switch {
				case err == nil && zero:
					t.Fatal("no error, but no answer either")
				case err != nil && !errors.Is(err, context.Canceled):
					t.Fatal(err)
				case err != nil && !zero && !tc.partial:
					t.Fatalf("%v, with an answer the actor may still be writing", err)
				case err != nil:
					cancelled++
				}
			}
			if cancelled == 0 {
				t.Fatal("the context never ended first: the test exercised nothing")
			}
		})
	}
}
