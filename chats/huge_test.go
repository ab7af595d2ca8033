package chats

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestHugeUnbrokenMessage: a message of the largest size made of one
// letter, which once took minutes to count (the send timed out and the
// message was lost), is acknowledged, stored and answered. The fake model
// echoes it, so a reply just as degenerate is counted and stored too.
func TestHugeUnbrokenMessage(t *testing.T) {
	e := newEnv(t, newGate(true))
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, "r1"); err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("a", MaxTextBytes)
	// Every wait is bounded, generously: the race detector and a busy
	// machine slow counting down; without the bound on pre-tokens it took
	// minutes.
	ctx, cancel := context.WithTimeout(bg, 2*time.Minute)
	defer cancel()
	m, err := e.svc.Send(ctx, c.ID, text, "huge-1", "", Origin{Sub: s, Req: "r2"})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	if m.State != MsgPending || len(m.Text) != MaxTextBytes || m.Tokens <= 0 || m.Tokens > MaxTextBytes/4 {
		t.Fatalf("accepted message: state %s, %d bytes, %d tokens", m.State, len(m.Text), m.Tokens)
	}
	var evs []*Event
	for evs = s.events(); !has(EvTurnFinished, 1)(evs); evs = s.events() {
		select {
		case <-s.notify:
		case <-ctx.Done():
			t.Fatalf("no answer: %s", typesOf(evs))
		}
	}
	fin := evs[len(evs)-1]
	if fin.Type != EvTurnFinished || !strings.HasSuffix(pay[*TurnFinished](fin).Reply, text) {
		t.Fatalf("last event %s, reply of %d bytes", fin.Type, len(pay[*TurnFinished](fin).Reply))
	}
	stored := false
	for _, ev := range e.durable(c.ID) {
		if ev.Type == EvMessageAccepted && ev.Message() != nil && ev.Message().Text == text {
			stored = true
		}
	}
	if !stored {
		t.Fatal("the message was not stored")
	}
}
