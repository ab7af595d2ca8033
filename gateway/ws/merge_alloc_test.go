package ws

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// TestQueueMergeIsLinear: merging the deltas of a long reply behind a slow
// writer copies the text about once, not once per delta (the merged text
// was rebuilt by concatenation at each merge: quadratic bytes), and the
// merged frame is still the whole text under the last delta's seq.
func TestQueueMergeIsLinear(t *testing.T) {
	const n, piece = 2000, "piece of é text 😀 "
	c := &conn{hub: &Hub{opt: Options{Buffer: 8, QueueBytes: 1 << 30}}, wake: make(chan struct{}, 1)}
	evs := make([]chats.Delivery, n)
	runes := len([]rune(piece))
	for i := range evs {
		evs[i] = chats.Delivery{Event: chats.NewEvent("c", uint64(i+1), time.Time{}, &chats.ReplyDelta{Turn: "t", Offset: i * runes, Text: piece})}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, d := range evs {
		c.Deliver(d)
	}
	runtime.ReadMemStats(&after)
	if len(c.q) != 1 {
		t.Fatalf("queue has %d items, want 1", len(c.q))
	}
	text := strings.Repeat(piece, n)
	// Linear: a few copies of the text plus a small event per merge. The
	// quadratic way allocated n*len(text)/2, about 22 MB here.
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(8*len(text)+n*512); got > limit {
		t.Fatalf("merging %d deltas allocated %d bytes, want at most %d", n, got, limit)
	}
	var d map[string]any
	if err := json.Unmarshal(c.q[0].frame(), &d); err != nil {
		t.Fatal(err)
	}
	if d["text"] != text || d["offset"].(float64) != 0 || d["seq"].(float64) != n {
		t.Fatalf("merged frame: offset %v seq %v, text of %d bytes", d["offset"], d["seq"], len(d["text"].(string)))
	}
}
