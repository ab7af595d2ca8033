package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// wsClient is a socket with a bounded reader.
type wsClient struct {
	t *testing.T
	c *websocket.Conn
}

func dialWS(t *testing.T, addr string) *wsClient {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer test-token-0123456789abcdef"}}
	c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/ws", h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	return &wsClient{t: t, c: c}
}

func (w *wsClient) send(v map[string]any) {
	w.t.Helper()
	if err := w.c.WriteJSON(v); err != nil {
		w.t.Fatal(err)
	}
}

// next returns the next frame of type typ; seen, when set, gets every frame.
func (w *wsClient) next(typ string, seen func(map[string]any)) map[string]any {
	w.t.Helper()
	for {
		var m map[string]any
		if err := w.c.ReadJSON(&m); err != nil {
			w.t.Fatalf("waiting for %s: %v", typ, err)
		}
		if seen != nil {
			seen(m)
		}
		if m["type"] == typ {
			return m
		}
		if m["type"] == "error" {
			w.t.Fatalf("waiting for %s: %v", typ, m)
		}
	}
}

// TestRecoveryAfterKillMinusNine runs the gateway as a real process: the
// builtin model calls shell with a long sleep, the person allows it, the
// process is killed with SIGKILL and started again. Exactly one recovery is
// asked for; a second socket answers it; repeat asks for approval again; the
// chat finishes; the record holds the call once.
func TestRecoveryAfterKillMinusNine(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	p := startServe(t, data)
	a := dialWS(t, p.addr)
	a.send(map[string]any{"type": "hello", "client": "a"})
	a.next("welcome", nil)
	a.send(map[string]any{"type": "chat.create", "title": "recover"})
	chat := a.next("chat.created", nil)["chat"].(map[string]any)["id"].(string)
	a.send(map[string]any{"type": "chat.open", "chat": chat})
	a.next("chat.snapshot", nil)
	cmd := `/tool shell {"command":"test -f marker || (touch marker; sleep 60)"}`
	a.send(map[string]any{"type": "message.send", "chat": chat, "text": cmd, "client_id": "k1"})
	ap := a.next("approval.requested", nil)["approval"].(map[string]any)
	a.send(map[string]any{"type": "approval.answer", "approval": ap["id"], "allow": true})
	a.next("approval.resolved", nil)

	// The shell is running once its marker exists.
	marker := filepath.Join(filepath.Dir(data), "workspace", "marker")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the shell call never started")
		}
		time.Sleep(10 * time.Millisecond) // polling a file, bounded
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()

	p = startServe(t, data)
	b := dialWS(t, p.addr)
	b.send(map[string]any{"type": "chat.open", "chat": chat, "since": 0})
	recoveries := map[string]bool{}
	var calls []string
	count := func(m map[string]any) {
		switch m["type"] {
		case "recovery.requested":
			recoveries[m["recovery"].(map[string]any)["id"].(string)] = true
		case "tool.call":
			calls = append(calls, m["call"].(map[string]any)["id"].(string))
		}
	}
	rec := b.next("recovery.requested", count)["recovery"].(map[string]any)
	b.next("chat.resumed", count)

	// A second socket, with no chat open, answers for the owner.
	c := dialWS(t, p.addr)
	c.send(map[string]any{"type": "recovery.answer", "recovery": rec["id"], "action": "repeat", "req": "r"})
	if ans := c.next("recovery.answered", nil); ans["delivered"] != true || ans["req"] != "r" {
		t.Fatalf("answer %v", ans)
	}
	// A second answer never runs the call twice.
	c.send(map[string]any{"type": "recovery.answer", "recovery": rec["id"], "action": "repeat", "req": "again"})
	for {
		var m map[string]any
		if err := c.c.ReadJSON(&m); err != nil {
			t.Fatal(err)
		}
		if m["type"] == "error" && m["req"] == "again" {
			break
		}
	}

	// Repeat asks for permission again.
	ap2 := b.next("approval.requested", count)["approval"].(map[string]any)
	if ap2["id"] == ap["id"] {
		t.Fatal("the repeat reused the old approval")
	}
	b.send(map[string]any{"type": "approval.answer", "approval": ap2["id"], "allow": true})
	res := b.next("tool.result", count)["result"].(map[string]any)
	if res["call_id"] != rec["call"].(map[string]any)["id"] {
		t.Fatalf("result for %v, want the recovered call", res["call_id"])
	}
	b.next("turn.finished", count)
	if len(recoveries) != 1 {
		t.Fatalf("%d recoveries, want exactly one", len(recoveries))
	}
	if len(calls) != 1 {
		t.Fatalf("the record holds %d tool.call rows, want one: %v", len(calls), calls)
	}

	// The API lists the chat idle again.
	req, _ := http.NewRequest("GET", "http://"+p.addr+"/api/chats", nil)
	req.Header.Set("Authorization", "Bearer test-token-0123456789abcdef")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Chats []struct{ State string } }
	_ = json.NewDecoder(resp.Body).Decode(&list)
	if len(list.Chats) != 1 || list.Chats[0].State != "idle" {
		t.Fatalf("chats %+v", list)
	}
	p.stop(t)
}
