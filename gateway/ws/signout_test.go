package ws

import (
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
)

// SignOut marks and closes only the sockets of the person revoked: what
// waits for them is dropped, the close is 4401 "signed out", and a frame
// they send afterwards is not answered (handle ends the socket before it
// reads the frame's type).
func TestSignOutClosesOnlyThatPersonsSockets(t *testing.T) {
	h := &Hub{opt: Options{Buffer: 8}, conns: map[*conn]struct{}{}}
	mk := func(id string) *conn {
		c := &conn{hub: h, wake: make(chan struct{}, 1)}
		c.person.Store(&id)
		c.auth.Store(authOK)
		h.conns[c] = struct{}{}
		return c
	}
	bob, bob2, alice := mk("p_bob"), mk("p_bob"), mk("p_alice")
	bob.Deliver(chats.Delivery{Event: chats.NewEvent("c", 1, time.Time{}, &chats.MessageAccepted{})})
	if n := h.SignOut("p_bob"); n != 2 {
		t.Fatalf("closed %d sockets, want 2", n)
	}
	for _, c := range []*conn{bob, bob2} {
		if c.closeCode != CloseUnauthorized || c.closeMsg != CloseSignedOut || len(c.q) != 0 || !c.signedOut.Load() {
			t.Fatalf("bob's socket: close %d %q, %d queued", c.closeCode, c.closeMsg, len(c.q))
		}
	}
	if alice.closeCode != 0 || alice.signedOut.Load() {
		t.Fatal("alice's socket was closed")
	}
	// Any frame, even one that would change a chat, ends bob's socket
	// unanswered; the service it would reach is not even there.
	if bob.handle([]byte(`{"type":"message.send","chat":"c","text":"late","client_id":"x"}`)) {
		t.Fatal("a frame of a signed-out socket was handled")
	}
	if len(bob.q) != 0 {
		t.Fatal("a frame of a signed-out socket was answered")
	}
	if h.SignOut("") != 0 {
		t.Fatal("the empty id closed sockets")
	}
}
