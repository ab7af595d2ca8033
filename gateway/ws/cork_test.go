package ws

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mirror-gateway/mirror/chats"
)

// corkPair upgrades one socket through corkingWriter, as Hub.ServeHTTP
// does, and returns the server's conn (only what the writer uses) and the
// client's end.
func corkPair(t *testing.T) (*conn, *websocket.Conn) {
	t.Helper()
	got := make(chan *conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &corkingWriter{ResponseWriter: w}
		u := websocket.Upgrader{ReadBufferSize: 4096, WriteBufferSize: 4096}
		wc, err := u.Upgrade(cw, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		got <- &conn{ws: wc, cork: cw.conn}
	}))
	t.Cleanup(srv.Close)
	cl, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	select {
	case c := <-got:
		t.Cleanup(func() { c.ws.Close() })
		return c, cl
	case <-time.After(10 * time.Second):
		t.Fatal("no upgrade")
	}
	return nil, nil
}

// A batch of frames that queued while the writer was busy goes out in as
// few socket writes as the cork's bound allows (one for a streamed reply),
// and a reader that only starts reading afterwards gets every frame,
// whole and in order; one frame alone is written at once.
func TestWriteBatchMergesFramesInOrder(t *testing.T) {
	for _, tc := range []struct {
		name      string
		frames    int
		size      int
		maxWrites int
	}{
		{"one frame", 1, 100, 1},
		{"a streamed reply", 25, 150, 1},
		{"deltas and events", 60, 40, 1},
		{"more than the bound", 200, 1 << 10, 200<<10/corkLimit + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cl := corkPair(t)
			var batch []item
			var want []string
			for i := range tc.frames {
				if i%3 == 1 { // a delta, as the queue keeps them
					rd := &chats.ReplyDelta{Turn: "t", Offset: i, Text: strings.Repeat("d", tc.size)}
					ev := chats.NewEvent("c", 0, time.Time{}, rd)
					batch = append(batch, item{delta: ev, rd: rd})
					want = append(want, string(ev.JSON()))
					continue
				}
				raw := fmt.Sprintf(`{"type":"x","n":%d,"pad":%q}`, i, strings.Repeat("p", tc.size))
				batch = append(batch, item{raw: []byte(raw)})
				want = append(want, raw)
			}
			before := c.cork.writes
			if !c.writeBatch(batch) {
				t.Fatal("writeBatch failed")
			}
			if n := c.cork.writes - before; n > tc.maxWrites || n < 1 {
				t.Fatalf("%d frames took %d socket writes, want 1..%d", tc.frames, n, tc.maxWrites)
			}
			_ = cl.SetReadDeadline(time.Now().Add(10 * time.Second))
			for i, w := range want {
				typ, data, err := cl.ReadMessage()
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if typ != websocket.TextMessage || string(data) != w {
					t.Fatalf("frame %d: got %.80q, want %.80q", i, data, w)
				}
			}
		})
	}
}

// A control frame written while the writer is corked (a pong from the
// read loop) goes out after the frames collected before it, never inside
// one; after uncork, writes pass straight through again.
func TestCorkKeepsControlFramesWhole(t *testing.T) {
	c, cl := corkPair(t)
	c.cork.cork()
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.ws.WriteControl(websocket.PingMessage, []byte("p"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(`{"n":2}`)); err != nil {
		t.Fatal(err)
	}
	before := c.cork.writes
	if err := c.cork.uncork(); err != nil {
		t.Fatal(err)
	}
	if c.cork.writes != before+1 {
		t.Fatalf("uncork made %d writes", c.cork.writes-before)
	}
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(`{"n":3}`)); err != nil {
		t.Fatal(err)
	}
	pinged := make(chan string, 1)
	cl.SetPingHandler(func(s string) error { pinged <- s; return nil })
	_ = cl.SetReadDeadline(time.Now().Add(10 * time.Second))
	for _, w := range []string{`{"n":1}`, `{"n":2}`, `{"n":3}`} {
		_, data, err := cl.ReadMessage()
		if err != nil || string(data) != w {
			t.Fatalf("got %q %v, want %s", data, err, w)
		}
		if w == `{"n":2}` {
			select {
			case p := <-pinged:
				if p != "p" {
					t.Fatalf("ping %q", p)
				}
			default:
				t.Fatal("the ping was not between the two frames")
			}
		}
	}
}
