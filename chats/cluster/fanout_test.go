package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// got is what one watcher received, as "seq" for stored events and
// "seq~text" for live ones.
type got struct {
	mu  sync.Mutex
	evs []string
	ch  chan struct{} // a signal per event
}

func newGot() *got { return &got{ch: make(chan struct{}, 1024)} }

func (g *got) fn(e *chats.Event) {
	s := fmt.Sprint(e.Seq)
	if d, ok := e.Payload.(*chats.ReplyDelta); ok {
		s += "~" + d.Text
	}
	g.mu.Lock()
	g.evs = append(g.evs, s)
	g.mu.Unlock()
	g.ch <- struct{}{}
}

// wait waits (bounded) until n entries arrived and returns them.
func (g *got) wait(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		g.mu.Lock()
		have := len(g.evs)
		out := append([]string(nil), g.evs...)
		g.mu.Unlock()
		if have >= n {
			return out
		}
		select {
		case <-g.ch:
		case <-deadline:
			t.Fatalf("%d of %d events within 20s: %v", have, n, out)
		}
	}
}

func seqList(from, to uint64, extra ...string) []string {
	var out []string
	for s := from; s <= to; s++ {
		out = append(out, fmt.Sprint(s))
	}
	return append(out, extra...)
}

// owner appends and publishes one chat's events on node a.
type owner struct {
	t   *testing.T
	fan *Fanout
	n   *Node
	at  uint64
}

func (o *owner) store(chat string, from, to uint64) {
	o.t.Helper()
	evs := events(chat, from, to)
	at, err := o.n.Records().Append(ctx(o.t), chat, o.at, flushEvents(chat, evs))
	if err != nil {
		o.t.Fatal(err)
	}
	o.at = at
	if err := o.fan.Stored(chat, evs...); err != nil {
		o.t.Fatal(err)
	}
}

func (o *owner) live(chat string, seq uint64, text string) {
	o.t.Helper()
	e := chats.NewEvent(chat, seq, time.Unix(1700000000, 0).UTC(), &chats.ReplyDelta{Turn: "t1", Text: text})
	if err := o.fan.Live(chat, e); err != nil {
		o.t.Fatal(err)
	}
}

// TestFanoutAcrossNodes: watchers on other nodes than the owner's get its
// stored events in order, none missing, none twice, and live text after
// the stored event it follows: when a live message is lost (the one of
// seq 5, and the one of seq 8 before a live delta of seq 8), the missing
// events are read from the record; a watcher that starts with since=N on
// a third node gets N+1 on. One subscription per chat per node, however
// many watchers; it ends with the last one.
func TestFanoutAcrossNodes(t *testing.T) {
	tc := newCluster(t, 3)
	const chat = "c_fan00001"
	a, b, c := tc.nodes[0], tc.nodes[1], tc.nodes[2]
	// a owns the chat through its router, so that new watchers sync
	// with it; the test appends and publishes as its owner.
	fo := newFakeOwner(a)
	ra, rb, rc := a.NewRouter(fo), b.NewRouter(nil), c.NewRouter(nil)
	t.Cleanup(func() { ra.Close(); rb.Close(); rc.Close() })
	if _, err := ra.take(ctx(t), chat); err != nil {
		t.Fatal(err)
	}
	o := &owner{t: t, fan: a.NewFanout(ra), n: a, at: fo.chats[chat].at}
	fb := b.NewFanout(rb)
	var dropped sync.Map // stored seqs lost once on their way to b
	var drops atomic.Int32
	fb.drop = func(e *chats.Event) bool {
		if _, stored := e.Payload.(*chats.TurnFailed); stored && (e.Seq == 5 || e.Seq == 8) {
			if _, again := dropped.LoadOrStore(e.Seq, true); !again {
				drops.Add(1)
				return true
			}
		}
		return false
	}
	g1, g2 := newGot(), newGot()
	w1, err := fb.Watch(ctx(t), chat, 0, g1.fn)
	if err != nil {
		t.Fatal(err)
	}
	o.store(chat, 1, 2)
	o.live(chat, 2, "Hel")
	o.store(chat, 3, 3)
	o.store(chat, 4, 5) // 5 is lost on its way to b
	o.store(chat, 6, 7)
	if got := g1.wait(t, 8); fmt.Sprint(got) != fmt.Sprint(seqList(1, 2, "2~Hel", "3", "4", "5", "6", "7")) {
		t.Fatalf("watcher 1: %v", got)
	}
	w2, err := fb.Watch(ctx(t), chat, 6, g2.fn)
	if err != nil {
		t.Fatal(err)
	}
	if n, ws := fb.Watched(); n != 1 || ws != 2 {
		t.Fatalf("watched %d chats, %d watchers: want one subscription for two watchers", n, ws)
	}
	// The fill that the live text of 8 starts reads the record only
	// once 9 is stored too: the fill must not supersede that text.
	stored9 := make(chan struct{})
	var held atomic.Bool
	fb.beforeFill = func(from uint64) {
		if from == 8 && held.CompareAndSwap(false, true) {
			select {
			case <-stored9:
			case <-time.After(20 * time.Second):
			}
		}
	}
	o.store(chat, 8, 8) // lost on its way to b; the live text after it is not
	o.live(chat, 8, "lo")
	o.store(chat, 9, 9)
	close(stored9)
	if got := g1.wait(t, 11); fmt.Sprint(got[8:]) != "[8 8~lo 9]" || len(got) != 11 {
		t.Fatalf("watcher 1: %v", got)
	}
	if got := g2.wait(t, 4); fmt.Sprint(got) != "[7 8 8~lo 9]" {
		t.Fatalf("watcher 2 (since 6): %v", got)
	}
	if drops.Load() != 2 {
		t.Fatalf("%d messages dropped, want 2", drops.Load())
	}

	// since=N on a third node while the owner goes on storing.
	fc := c.NewFanout(rc)
	g3 := newGot()
	var wg sync.WaitGroup
	wg.Go(func() {
		for s := uint64(10); s <= 30; s++ {
			o.store(chat, s, s)
		}
	})
	w3, err := fc.Watch(ctx(t), chat, 4, g3.fn)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := g3.wait(t, 26); fmt.Sprint(got) != fmt.Sprint(seqList(5, 30)) {
		t.Fatalf("watcher 3 (since 4): %v", got)
	}
	if got := g1.wait(t, 32); fmt.Sprint(got[11:]) != fmt.Sprint(seqList(10, 30)) || len(got) != 32 {
		t.Fatalf("watcher 1: %v", got)
	}

	w1.Close()
	w1.Close() // twice is harmless
	if n, ws := fb.Watched(); n != 1 || ws != 1 {
		t.Fatalf("watched %d, %d after one close", n, ws)
	}
	w2.Close()
	w3.Close()
	if n, ws := fb.Watched(); n != 0 || ws != 0 {
		t.Fatalf("watched %d, %d after the last close: want no subscription", n, ws)
	}
}

// TestFanoutCatchesUpLostLast: when the chat's last stored event is lost
// on its way to a node, nothing later shows the gap; the feed's look at
// the record's last seq still delivers it, once and in order.
func TestFanoutCatchesUpLostLast(t *testing.T) {
	tc := newCluster(t, 2)
	const chat = "c_fan00002"
	a, b := tc.nodes[0], tc.nodes[1]
	fo := newFakeOwner(a)
	ra, rb := a.NewRouter(fo), b.NewRouter(nil)
	t.Cleanup(func() { ra.Close(); rb.Close() })
	if _, err := ra.take(ctx(t), chat); err != nil {
		t.Fatal(err)
	}
	o := &owner{t: t, fan: a.NewFanout(ra), n: a, at: fo.chats[chat].at}
	fb := b.NewFanout(rb)
	fb.every = 50 * time.Millisecond
	var dropped atomic.Bool
	fb.drop = func(e *chats.Event) bool {
		_, stored := e.Payload.(*chats.TurnFailed)
		return stored && e.Seq == 3 && dropped.CompareAndSwap(false, true)
	}
	g := newGot()
	w, err := fb.Watch(ctx(t), chat, 0, g.fn)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	o.store(chat, 1, 3) // 3 is lost on its way to b, and nothing follows it
	if got := g.wait(t, 3); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("watcher: %v", got)
	}
	if !dropped.Load() {
		t.Fatal("3 was not dropped")
	}
	o.store(chat, 4, 4) // once each: a second 3 would come before it
	if got := g.wait(t, 4); fmt.Sprint(got) != "[1 2 3 4]" {
		t.Fatalf("watcher: %v", got)
	}
	if w.Last() != 4 {
		t.Fatalf("last %d, want 4", w.Last())
	}
}

// TestFanoutRefusesBadInput: a chat id that cannot name a subject, and an
// event of another chat, are refused.
func TestFanoutRefusesBadInput(t *testing.T) {
	tc := newCluster(t, 1)
	f := tc.nodes[0].NewFanout(nil)
	if _, err := f.Watch(context.Background(), "c.x", 0, func(*chats.Event) {}); !errors.Is(err, chats.ErrBadInput) {
		t.Fatalf("watch c.x: %v", err)
	}
	if err := f.Stored("c_a", events("c_b", 1, 1)...); !errors.Is(err, chats.ErrBadInput) {
		t.Fatalf("publish another chat's event: %v", err)
	}
	if err := f.Live("c >", events("c >", 1, 1)...); !errors.Is(err, chats.ErrBadInput) {
		t.Fatalf("publish to c >: %v", err)
	}
}
