package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// startServeConfig runs `mirror serve --config FILE` as a child process
// with yaml as its runtime.yaml.
func startServeConfig(t *testing.T, yaml string) *proc {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "runtime.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "serve", "--config", cfg, "--data", filepath.Join(dir, "data"), "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "MIRROR_AS_MAIN=1", "MIRROR_TOKEN=test-token-0123456789abcdef")
	return startCmd(t, cmd)
}

// TestServeHoldsTheEdges runs the real process with small edge limits from
// runtime.yaml: a forged cross-site logout is refused and the same request
// from the gateway's origin works; a silent socket is closed with 4401; a
// slow login body is cut; past the queue cap a send is too_large and past
// the message rate rate_limited.
func TestServeHoldsTheEdges(t *testing.T) {
	p := startServeConfig(t, `providers: [{name: builtin, kind: builtin, delay: 5s}]
limits:
  pending_per_chat: 1
  messages_per_minute: 4
  auth_timeout: 300ms
  body_timeout: 300ms
`)
	base := "http://" + p.addr
	const token = "test-token-0123456789abcdef"
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 20 * time.Second}
	post := func(path, origin string) int {
		req, _ := http.NewRequest("POST", base+path, nil)
		req.Header.Set("Cookie", "mirror_token="+token)
		req.Header.Set("Origin", origin)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/logout", "http://127.0.0.1:1"); code != http.StatusForbidden {
		t.Fatalf("cross-site logout: %d, want 403", code)
	}
	if code := post("/logout", base); code != http.StatusSeeOther {
		t.Fatalf("same-origin logout: %d, want 303", code)
	}

	silent, _, err := websocket.DefaultDialer.Dial("ws://"+p.addr+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	_ = silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := silent.ReadMessage(); !websocket.IsCloseError(err, 4401) {
		t.Fatalf("silent socket: %v, want close 4401", err)
	}

	conn, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /login HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 500\r\n\r\n%s", p.addr, url.Values{"token": {"t"}}.Encode()[:3])
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // the body never comes
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("slow login body: %v %v", resp, err)
	}
	resp.Body.Close()

	c, _, err := websocket.DefaultDialer.Dial("ws://"+p.addr+"/ws", http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	next := func(types ...string) map[string]any {
		t.Helper()
		for {
			var m map[string]any
			if err := c.ReadJSON(&m); err != nil {
				t.Fatalf("waiting for %v: %v", types, err)
			}
			for _, typ := range types {
				if m["type"] == typ {
					return m
				}
			}
		}
	}
	_ = c.WriteJSON(map[string]any{"type": "chat.create"})
	id := next("chat.created")["chat"].(map[string]any)["id"].(string)
	send := func(i int) map[string]any {
		_ = c.WriteJSON(map[string]any{"type": "message.send", "chat": id, "client_id": fmt.Sprint("k", i), "req": fmt.Sprint(i),
			"text": "one two three four five six seven eight nine ten eleven twelve"})
		for {
			m := next("message.accepted", "error")
			if m["req"] == fmt.Sprint(i) {
				return m
			}
		}
	}
	for i, want := range []string{"", "", "too_large", "too_large", "rate_limited"} {
		m := send(i)
		switch {
		case want == "" && m["type"] != "message.accepted":
			t.Fatalf("message %d: %v", i, m)
		case want != "" && m["code"] != want:
			t.Fatalf("message %d: %v, want %s", i, m, want)
		}
	}
}
