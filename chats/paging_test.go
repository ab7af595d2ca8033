package chats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// sendAndWait sends text to chat and waits for the turn it starts to end.
func sendAndWait(t *testing.T, e *env, s *sub, chat, text string) {
	t.Helper()
	n := count(s.events(), EvTurnFinished) + count(s.events(), EvTurnFailed)
	if _, err := e.svc.Send(bg, chat, text, fmt.Sprintf("k%d", len(s.events())), "", Origin{}); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "turn end", func(evs []*Event) bool { return count(evs, EvTurnFinished)+count(evs, EvTurnFailed) > n })
}

// Each text a person sends is held once by the database, however many rows
// name it (accepted, picked, carried over a boundary, archived, indexed):
// every value of every bucket is searched for each message's own marker.
// Before, a message crossing a boundary was stored five times.
func TestEachTextIsStoredOnce(t *testing.T) {
	e := newToolEnv(t) // the builtin model; 128k window, so these messages cross hard
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	const n = 3
	for i := range n {
		// The builtin model quotes the first 120 characters; the marker
		// comes after them.
		sendAndWait(t, e, s, c.ID, strings.Repeat("lorem ipsum <dolor> & sit amet ", 4000)+fmt.Sprintf(" MARKER-%d-END", i))
	}
	if count(e.durable(c.ID), EvBoundary) == 0 {
		t.Fatal("no boundary: the test does not cover the archive")
	}
	found := map[string]int{}
	var walk func(b *bolt.Bucket)
	walk = func(b *bolt.Bucket) {
		_ = b.ForEach(func(k, v []byte) error {
			if v == nil {
				walk(b.Bucket(k))
				return nil
			}
			for i := range n {
				m := fmt.Sprintf("MARKER-%d-END", i)
				found[m] += bytes.Count(v, []byte(m))
			}
			return nil
		})
	}
	_ = e.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error { walk(b); return nil })
	})
	for i := range n {
		if m := fmt.Sprintf("MARKER-%d-END", i); found[m] != 1 {
			t.Errorf("%s is stored %d times", m, found[m])
		}
	}
	// Read back, every row names its text again: the record as loaded
	// holds each message's text in its picked row.
	for _, ev := range e.durable(c.ID) {
		if ev.Type == EvMessagePicked && !strings.Contains(ev.Message().Text, "MARKER-") {
			t.Fatalf("picked row %d lost its text", ev.Seq)
		}
		if fin := pay[*TurnFinished](ev); fin != nil && fin.Message != nil && fin.Message.Text != fin.Reply {
			t.Fatalf("turn.finished %d: message %q, reply %q", ev.Seq, fin.Message.Text, fin.Reply)
		}
	}
}

// What Events reads back from the store is what subscribers were sent
// live, event for event, though rows name texts instead of repeating them.
func TestReplayedFramesAreTheLiveOnes(t *testing.T) {
	e := newEnv(t, newGate(true))
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		sendAndWait(t, e, s, c.ID, fmt.Sprintf("message <%d> & \"more\" — naïve", i))
	}
	m, err := e.svc.Send(bg, c.ID, "edited later", "kx", "", Origin{})
	if err != nil {
		t.Fatal(err)
	}
	_ = m
	live := map[uint64][]byte{}
	for _, ev := range s.events() {
		if ev.Type != EvReplyDelta {
			live[ev.Seq] = ev.JSON()
		}
	}
	frames, err := e.svc.Events(bg, c.ID, 1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) == 0 {
		t.Fatal("no frames")
	}
	for _, f := range frames {
		want, ok := live[f.Seq]
		if !ok {
			continue // committed after the live copy was taken
		}
		var a, b any
		_ = json.Unmarshal(f.Raw, &a)
		_ = json.Unmarshal(want, &b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seq %d replays as\n%s\nwas sent as\n%s", f.Seq, f.Raw, want)
		}
		if bytes.Contains(f.Raw, textRef) {
			t.Fatalf("seq %d: text_at reached the wire: %s", f.Seq, f.Raw)
		}
	}
	// Pages are bounded: one small page holds one event at least, and
	// follows on from where the last ended.
	one, err := e.svc.Events(bg, c.ID, 1, 1)
	if err != nil || len(one) != 1 || one[0].Seq != 2 {
		t.Fatalf("a 1-byte page: %d frames, %v", len(one), err)
	}
}

// A snapshot carries the newest page of the transcript; chat.history pages
// through the rest, which together with it is the whole transcript, once.
func TestSnapshotIsBoundedAndHistoryPagesTheRest(t *testing.T) {
	e := newEnv(t, newGate(true))
	c := e.chat()
	s := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("word ", 30<<10) // 150 KiB
	const n = 6
	for i := range n {
		sendAndWait(t, e, s, c.ID, fmt.Sprintf("%d %s", i, big))
	}
	s2 := newSub()
	if err := e.svc.Open(bg, c.ID, nil, s2, ""); err != nil {
		t.Fatal(err)
	}
	var sn *Snapshot
	for _, d := range s2.got {
		if d.Snapshot != nil {
			sn = d.Snapshot
		}
	}
	size := 0
	for _, m := range sn.Messages {
		size += len(m.Text)
	}
	if !sn.More || sn.Before == 0 || size > PageBytes+MaxTextBytes || len(sn.Messages) == 0 {
		t.Fatalf("snapshot: %d messages, %d bytes, more %v, before %d", len(sn.Messages), size, sn.More, sn.Before)
	}
	all := sn.Messages
	before := sn.Before
	pages := 0
	for ; before != 0; pages++ {
		if pages > 2*n {
			t.Fatal("history does not end")
		}
		h, err := e.svc.History(bg, c.ID, before, "r")
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Messages) == 0 || h.Req != "r" || h.Type != "chat.history" {
			t.Fatalf("page %d: %+v", pages, h)
		}
		all = append(h.Messages, all...)
		before = h.Before
		if h.More != (before != 0) {
			t.Fatalf("more %v with before %d", h.More, before)
		}
	}
	// Every message the person sent is there (a boundary lists a message
	// it carried again after itself), and an answer to each, once: pages
	// that overlapped would list some reply twice.
	picked := map[string]bool{}
	replies := 0
	for _, m := range all {
		switch {
		case m.Role == "user" && m.State == MsgPicked:
			picked[strings.SplitN(m.Text, " ", 2)[0]] = true
		case m.Role == "assistant":
			replies++
		}
	}
	if pages < 2 || len(picked) != n || replies != n {
		t.Fatalf("%d pages after the snapshot, %d user messages and %d replies, want %d each", pages, len(picked), replies, n)
	}
}
