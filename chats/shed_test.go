package chats

import (
	"testing"
	"time"
)

// TestShedUnloadsIdleChats (issue 20, item 2): Shed unloads the chats that
// are idle and unwatched, and only those done with for the quiet time asked
// for, long before limits.chat_idle; a chat shed works again at its next
// use, its conversation read back from the store.
func TestShedUnloadsIdleChats(t *testing.T) {
	e := manageEnv(t, time.Hour) // Idle: a minute
	a, b, watched := e.chat(), e.chat(), e.chat()
	e.talk(a.ID, "first of a")
	e.talk(b.ID, "first of b")
	s := newSub()
	if err := e.svc.Open(bg, watched.ID, nil, s, ""); err != nil {
		t.Fatal(err)
	}
	if got := e.svc.Live(); got != 3 {
		t.Fatalf("%d chats in memory; want 3", got)
	}
	if n := e.svc.Shed(time.Hour); n != 0 {
		t.Fatalf("Shed(an hour) unloaded %d chats just used; want none", n)
	}
	if n := e.svc.Shed(0); n != 2 {
		t.Fatalf("Shed(0) unloaded %d chats; want the 2 nobody watches", n)
	}
	if got := e.svc.Live(); got != 1 {
		t.Fatalf("%d chats in memory after Shed; want the watched one", got)
	}
	e.talk(a.ID, "second of a")
	if got := e.svc.Live(); got != 2 {
		t.Fatalf("%d chats in memory; want a back, with the watched one", got)
	}
	// The conversation came back from the store: a's next view holds what
	// the watched chat's, never unloaded, holds after the same two turns.
	e.talk(watched.ID, "first of watched")
	e.talk(watched.ID, "second of watched")
	msgs := func(id string) (n int) {
		if err := e.svc.do(bg, id, func(ac *actor) error { n = len(ac.msgs); return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got, want := msgs(a.ID), msgs(watched.ID); got != want || got == 0 {
		t.Fatalf("a's conversation holds %d messages after it was shed; the watched chat's %d", got, want)
	}
	e.svc.Unsubscribe(bg, watched.ID, s)
}
