package ws

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime"
)

// gated is quick, except that preparing a turn of a held chat waits until
// the chat is let go: the chat's actor, and so every request to that chat,
// stands still meanwhile.
type gated struct {
	quick
	mu      sync.Mutex
	held    map[string]chan struct{}
	waiting chan string // the chat whose turn waits
}

func (g *gated) hold(chat string) {
	g.mu.Lock()
	g.held[chat] = make(chan struct{})
	g.mu.Unlock()
}

func (g *gated) release(chat string) {
	g.mu.Lock()
	close(g.held[chat])
	delete(g.held, chat)
	g.mu.Unlock()
}

func (g *gated) Prepare(in *runtime.TurnInput) {
	g.mu.Lock()
	ch := g.held[in.Chat]
	g.mu.Unlock()
	if ch != nil {
		g.waiting <- in.Chat
		select {
		case <-ch:
		case <-time.After(wait):
		}
	}
}

// chatOf is the chat id of an event frame, or of chat.created's chat.
func (f frame2) chatOf() string {
	var id string
	if json.Unmarshal(f.Chat, &id) == nil {
		return id
	}
	var o struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(f.Chat, &o)
	return o.ID
}

// One socket carries many chats' requests at once: while one chat cannot
// answer (its actor is busy), messages to the socket's other chats are
// accepted and answered; the stuck chat's own messages wait their turn and
// are accepted in the order they were sent once it moves again.
func TestOneSocketCarriesManyChatsAtOnce(t *testing.T) {
	g := &gated{held: map[string]chan struct{}{}, waiting: make(chan string, 4)}
	s := newServerWith(t, 1024, g)
	cl := dial(t, s.addr)
	var ids []string
	for i := range 3 {
		cl.send(fmt.Sprintf(`{"type":"chat.create","title":"c%d","req":"c%d"}`, i, i))
		for {
			if f := cl.next(); f.Type == "chat.created" {
				ids = append(ids, f.chatOf())
				break
			}
		}
	}
	for _, id := range ids {
		cl.send(fmt.Sprintf(`{"type":"chat.open","chat":%q}`, id))
		for cl.next().Type != "chat.snapshot" {
		}
	}
	stuck := ids[0]
	g.hold(stuck)
	send := func(chat, key string) {
		cl.send(fmt.Sprintf(`{"type":"message.send","chat":%q,"text":"hi","client_id":%q,"req":%q}`, chat, key, key))
	}
	send(stuck, "s1") // its pickup waits in Prepare: this Send does not return
	select {
	case <-g.waiting:
	case <-time.After(wait):
		t.Fatal("the held chat's turn did not start")
	}
	send(stuck, "s2")
	send(stuck, "s3")
	send(ids[1], "a1")
	send(ids[2], "b1")
	// The other chats finish their turns while the stuck one still waits.
	finished := map[string]bool{}
	var accepted []string // of the stuck chat, in order
	for !finished[ids[1]] || !finished[ids[2]] {
		f := cl.next()
		switch {
		case f.chatOf() == stuck:
			t.Fatalf("the held chat answered while held: %.200s", f.raw)
		case f.Type == "turn.finished":
			finished[f.chatOf()] = true
		}
	}
	g.release(stuck)
	for len(accepted) < 3 {
		f := cl.next()
		if f.chatOf() == stuck && f.Type == "message.accepted" {
			accepted = append(accepted, f.Req)
		}
		if f.Type == "error" {
			t.Fatalf("error: %s", f.raw)
		}
	}
	if fmt.Sprint(accepted) != "[s1 s2 s3]" {
		t.Fatalf("the held chat's messages were accepted in the order %v", accepted)
	}
}
