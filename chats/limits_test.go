package chats

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestPendingCap: a chat's queue holds at most MaxPending messages; one more
// is refused with ErrTooLarge and stores nothing, a resend of a stored
// client_id still answers, and deleting one makes room again.
func TestPendingCap(t *testing.T) {
	e := newEnv(t, newGate(false))
	e.svc.opt.MaxPending = 3 // before any chat is loaded
	ctx := context.Background()
	c := e.chat()
	if _, err := e.svc.Send(ctx, c.ID, "first", "k0", "", Origin{}); err != nil {
		t.Fatal(err)
	}
	select { // the first is picked up at once and its turn is held
	case <-e.gate.started:
	case <-time.After(wait):
		t.Fatal("no turn started")
	}
	var waiting []Message
	for i := 1; i <= 3; i++ {
		m, err := e.svc.Send(ctx, c.ID, fmt.Sprint("queued ", i), fmt.Sprint("k", i), "", Origin{})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		waiting = append(waiting, m)
	}
	before := len(e.durable(c.ID))
	for _, mode := range []string{ModeQueue, ModeRedirect} {
		_, err := e.svc.Send(ctx, c.ID, "one too many", "k-over-"+mode, mode, Origin{})
		if !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrBadInput) {
			t.Fatalf("%s past the cap: %v, want ErrTooLarge", mode, err)
		}
	}
	if after := len(e.durable(c.ID)); after != before {
		t.Fatalf("a refused send stored %d events", after-before)
	}
	if m, err := e.svc.Send(ctx, c.ID, "queued 2", "k2", "", Origin{}); err != nil || m.ID != waiting[1].ID {
		t.Fatalf("resend of a stored client_id: %v %v", m, err)
	}
	if err := e.svc.Delete(ctx, c.ID, waiting[0].ID, Origin{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Send(ctx, c.ID, "fits again", "k-again", "", Origin{}); err != nil {
		t.Fatalf("after a delete: %v", err)
	}
	e.gate.release <- struct{}{}
}
