package ws

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/tokens"
	bolt "go.etcd.io/bbolt"
)

// wait bounds every wait of these tests.
const wait = 20 * time.Second

// quick is a model that answers every turn at once, so a test can write a
// long record fast.
type quick struct{}

func (quick) Run(ctx context.Context, in runtime.TurnInput, onDelta func(string) error) (runtime.TurnResult, error) {
	_ = onDelta("ok, ")
	return runtime.TurnResult{Reply: "ok, noted.", End: runtime.Answered}, nil
}
func (quick) HasChain(name string) bool            { return name == "default" }
func (quick) ChatChain() string                    { return "default" }
func (quick) Prepare(in *runtime.TurnInput)        {}
func (quick) Counter(chain string) *tokens.Counter { return tokens.Get(tokens.O200kBase) }

// server is a Hub over a real chats service and bbolt file.
type server struct {
	hub  *Hub
	svc  *chats.Service
	addr string
}

func newServer(t *testing.T, buffer int) *server {
	t.Helper()
	return newServerWith(t, buffer, quick{})
}

// newServerWith is newServer with the chats' model.
func newServerWith(t *testing.T, buffer int, turner chats.Turner) *server {
	t.Helper()
	// NoSync: these tests write tens of thousands of rows; durability is
	// not what they test.
	db, err := bolt.Open(filepath.Join(t.TempDir(), "mirror.db"), 0o600, &bolt.Options{NoSync: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	store, err := chats.NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	svc := chats.New(chats.Options{Store: store, Turner: turner, Idle: time.Minute})
	hub := New(Options{Chats: svc, Buffer: buffer,
		Authenticate: func(*http.Request) (Who, bool) { return Who{Principal: "owner"}, true },
		CheckHello:   func(string) (Who, bool) { return Who{Principal: "owner"}, true },
		CheckOrigin:  func(*http.Request) bool { return true }})
	srv := httptest.NewServer(hub)
	t.Cleanup(func() {
		hub.Close()
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		svc.Close(ctx)
		store.Close()
		db.Close()
	})
	return &server{hub: hub, svc: svc, addr: strings.TrimPrefix(srv.URL, "http://")}
}

// turns is a subscriber that signals every turn's end.
type turns chan struct{}

func (w turns) Deliver(d chats.Delivery) {
	if d.Event != nil && (d.Event.Type == chats.EvTurnFinished || d.Event.Type == chats.EvTurnFailed) {
		w <- struct{}{}
	}
}

// pins grows chat's record to events rows by pinning and unpinning its
// message msg, one row a time: the cheapest row to write (a turn costs in
// proportion to the conversation, so 25k events of turns take minutes).
func (s *server) pins(t *testing.T, chat, msg string, events uint64) {
	t.Helper()
	ctx := context.Background()
	c, err := s.svc.Get(ctx, chat)
	if err != nil {
		t.Fatal(err)
	}
	for seq := c.Seq; seq < events; seq++ {
		if _, err := s.svc.Pin(ctx, chat, msg, seq%2 == 0, chats.Origin{}); err != nil {
			t.Fatal(err)
		}
	}
}

// fill sends messages to chat, each answered before the next, until the
// chat's record holds at least events rows. Every bigEvery-th message is
// big bytes long.
func (s *server) fill(t *testing.T, chat string, events uint64, bigEvery, big int) {
	t.Helper()
	ctx := context.Background()
	w := make(turns, 1)
	if err := s.svc.Open(ctx, chat, nil, w, ""); err != nil {
		t.Fatal(err)
	}
	defer s.svc.Unsubscribe(ctx, chat, w)
	for i := 0; ; i++ {
		if i%64 == 0 {
			c, err := s.svc.Get(ctx, chat)
			if err != nil {
				t.Fatal(err)
			}
			if c.Seq >= events {
				return
			}
		}
		text := fmt.Sprintf("message %d: <b>hello</b> & \"quotes\" — naïve\n", i)
		if bigEvery > 0 && i%bigEvery == bigEvery-1 {
			text = strings.Repeat("word ", big/5)
		}
		if _, err := s.svc.Send(ctx, chat, text, fmt.Sprintf("k%d-%d", events, i), "", chats.Origin{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w:
		case <-time.After(wait):
			t.Fatalf("message %d: no turn end", i)
		}
	}
}

// client is one test socket.
type client struct {
	t *testing.T
	c *websocket.Conn
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cl := &client{t: t, c: c}
	cl.send(`{"type":"hello","client":"test","watch":false}`)
	if f := cl.next(); f.Type != "welcome" {
		t.Fatalf("first frame %s", f.raw)
	}
	return cl
}

func (c *client) send(s string) {
	c.t.Helper()
	if err := c.c.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

type frame2 struct {
	Type string          `json:"type"`
	Chat json.RawMessage `json:"chat"`
	Seq  uint64          `json:"seq"`
	Req  string          `json:"req"`
	raw  []byte
}

// next reads one frame; a closed socket fails the test.
func (c *client) next() frame2 {
	c.t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(wait))
	_, b, err := c.c.ReadMessage()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	var f frame2
	if err := json.Unmarshal(b, &f); err != nil {
		c.t.Fatalf("frame %.200s: %v", b, err)
	}
	f.raw = b
	return f
}

func (s *server) conn(t *testing.T) *conn {
	t.Helper()
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	if len(s.hub.conns) != 1 {
		t.Fatalf("%d sockets, want 1", len(s.hub.conns))
	}
	for c := range s.hub.conns {
		return c
	}
	return nil
}

// A reader that falls behind while a 25k-event chat is replayed from
// since 0, and while the chat goes on meanwhile, gets every event once, in
// order, over its one connection; the replay is read page by page and
// never goes through the live buffer (64 frames here, where the whole
// replay once went and closed the socket with 1013).
func TestSlowReaderReplaysALongChatOverOneConnection(t *testing.T) {
	const events = 25_000
	s := newServer(t, 64)
	ctx := context.Background()
	ch, err := s.svc.Create(ctx, "long", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	s.fill(t, ch.ID, 800, 20, 100<<10) // turns, some of 100 KiB
	s.pins(t, ch.ID, "m2", events)
	s.fill(t, ch.ID, events+200, 20, 100<<10)

	cl := dial(t, s.addr)
	cl.send(fmt.Sprintf(`{"type":"chat.open","chat":%q,"since":0,"req":"o"}`, ch.ID))
	var seqs []uint64
	resumed := false
	take := func(f frame2) {
		switch {
		case f.Type == "chat.resumed":
			if f.Req != "o" {
				t.Fatalf("chat.resumed without the open's req: %s", f.raw)
			}
			resumed = true
		case f.Type == "reply.delta" || f.Type == "quota.wait":
		case f.Seq > 0:
			seqs = append(seqs, f.Seq)
		default:
			t.Fatalf("unexpected frame %.300s", f.raw)
		}
	}
	for range 200 {
		take(cl.next())
	}
	// The reader stops reading while the chat goes on: what is committed
	// meanwhile belongs to the replay or to the live events after it.
	s.fill(t, ch.ID, events+300, 0, 0)
	for !resumed {
		take(cl.next())
	}
	// Live from here on.
	s.fill(t, ch.ID, events+400, 0, 0)
	last, err := s.svc.Get(ctx, ch.ID)
	if err != nil {
		t.Fatal(err)
	}
	for len(seqs) == 0 || seqs[len(seqs)-1] < last.Seq {
		take(cl.next())
	}
	for i, seq := range seqs {
		if seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: lost, repeated or out of order", i+1, seq)
		}
	}
	c := s.conn(t)
	c.mu.Lock()
	maxPage, maxQueued := c.maxPage, c.maxQueued
	c.mu.Unlock()
	// One page is ReplayPage bytes, or one event when it alone is larger;
	// the replay never queues, so the queue holds live frames only.
	if maxPage > ReplayPage+200<<10 {
		t.Fatalf("a replay page was %d bytes; the bound is %d plus one event", maxPage, ReplayPage)
	}
	if maxQueued > 64<<10 {
		t.Fatalf("the send queue held %d bytes: the replay went through it", maxQueued)
	}
	t.Logf("%d events over one connection; largest page %d bytes, queue at most %d bytes", len(seqs), maxPage, maxQueued)
}
