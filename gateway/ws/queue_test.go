package ws

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

func delta(turn string, off int, text string) chats.Delivery {
	return chats.Delivery{Event: chats.NewEvent("c", 0, time.Time{}, &chats.ReplyDelta{Turn: turn, Offset: off, Text: text})}
}

func TestQueueMergesDeltasAndKeepsDurableEvents(t *testing.T) {
	c := &conn{hub: &Hub{opt: Options{Buffer: 8}}, wake: make(chan struct{}, 1)}
	c.Deliver(delta("t1", 0, "Hel"))
	c.Deliver(delta("t1", 3, "lo"))
	c.Deliver(delta("t1", 5, " wörld 😀"))
	c.Deliver(chats.Delivery{Event: chats.NewEvent("c", 9, time.Time{}, &chats.TurnFinished{})})
	c.Deliver(delta("t2", 0, "a"))
	c.Deliver(delta("t3", 0, "b")) // another turn: not merged
	if len(c.q) != 4 {
		t.Fatalf("queue has %d items, want 4", len(c.q))
	}
	var d map[string]any
	if err := json.Unmarshal(c.q[0].delta.JSON(), &d); err != nil {
		t.Fatal(err)
	}
	if d["text"] != "Hello wörld 😀" || d["offset"].(float64) != 0 {
		t.Fatalf("merged delta %v", d)
	}
	if c.q[1].raw == nil {
		t.Fatal("durable event was not kept")
	}
}

func TestQueueOverflowDisconnectsInsteadOfDropping(t *testing.T) {
	c := &conn{hub: &Hub{opt: Options{Buffer: 3}}, wake: make(chan struct{}, 1)}
	for i := range 4 {
		c.Deliver(chats.Delivery{Event: chats.NewEvent("c", uint64(i+1), time.Time{}, &chats.MessageAccepted{})})
	}
	if c.closeCode != CloseTooSlow || len(c.q) != 0 {
		t.Fatalf("close %d, queue %d", c.closeCode, len(c.q))
	}
	// Nothing more is queued for a socket that is going away.
	c.Deliver(delta("t", 0, "x"))
	if len(c.q) != 0 {
		t.Fatal("queued after overflow")
	}
}

// The send queue is bounded in bytes as well as in frames: a socket whose
// queue would pass QueueBytes is closed with 1013 (it resumes with since),
// and the queue never holds more than the bound.
func TestQueueBytesBound(t *testing.T) {
	c := &conn{hub: &Hub{opt: Options{Buffer: 1000, QueueBytes: 10 << 10}}, wake: make(chan struct{}, 1)}
	text := strings.Repeat("x", 3<<10)
	for i := range 4 {
		c.Deliver(chats.Delivery{Event: chats.NewEvent("c", uint64(i+1), time.Time{},
			&chats.MessageAccepted{Message: &chats.Message{ID: "m", Text: text}})})
	}
	if c.closeCode != CloseTooSlow || len(c.q) != 0 || c.queued != 0 {
		t.Fatalf("close %d, queue %d frames, %d bytes", c.closeCode, len(c.q), c.queued)
	}
	if c.maxQueued > 10<<10 {
		t.Fatalf("the queue held %d bytes; the bound is %d", c.maxQueued, 10<<10)
	}
}
