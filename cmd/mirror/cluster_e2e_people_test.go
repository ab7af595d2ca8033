package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestClusterPeopleAcrossNodes: a person added through n1's API is known
// by their token on n3 at once (its socket connects and its chats are its
// own), a chat the first owner created on n2 and shared on n1 opens for
// them on n3, and a revocation made on n2 shuts them out of n1. Real
// processes: the people registry is the cluster's, not one node's file.
func TestClusterPeopleAcrossNodes(t *testing.T) {
	c := startE2E(t, e2eOpts{})
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	call := func(method, addr, path, token string, body any) (int, map[string]any) {
		t.Helper()
		var in bytes.Buffer
		if body != nil {
			_ = json.NewEncoder(&in).Encode(body)
		}
		req, err := http.NewRequest(method, "http://"+addr+path, &in)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}

	code, added := call("POST", n1.p.addr, "/api/people", e2eToken, map[string]string{"name": "erin"})
	tok, _ := added["token"].(string)
	if code != http.StatusCreated || tok == "" {
		t.Fatalf("add a person on n1: %d %v", code, added)
	}
	if code, me := call("GET", n3.p.addr, "/api/me", tok, nil); code != http.StatusOK || me["person"].(map[string]any)["name"] != "erin" {
		t.Fatalf("erin's token on n3: %d %v", code, me)
	}
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+n3.p.addr+"/ws", http.Header{"Authorization": {"Bearer " + tok}})
	if err != nil {
		t.Fatalf("erin's socket on n3: %v", err)
	}
	erin := &e2eSock{t: t, node: n3.name, c: ws, changed: make(chan struct{}), waiting: map[string]chan frame{}}
	t.Cleanup(func() { ws.Close() })
	go erin.read()

	chat := dialNode(t, n2).create("team")
	if f := erin.call(map[string]any{"type": "chat.open", "chat": chat}, e2eWait); f.typ() == "chat.snapshot" {
		t.Fatalf("erin opened a chat nobody shared with her: %v", f)
	}
	if code, g := call("PUT", n1.p.addr, "/api/chats/"+chat+"/grants/erin", e2eToken, map[string]string{"level": "read"}); code != http.StatusOK {
		t.Fatalf("share on n1: %d %v", code, g)
	}
	deadline := time.Now().Add(e2eWait)
	for {
		f := erin.call(map[string]any{"type": "chat.open", "chat": chat}, e2eWait)
		if f.typ() == "chat.snapshot" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a chat shared on n1 never opened for erin on n3: %v", f)
		}
		time.Sleep(100 * time.Millisecond) // a bounded poll: n3 follows the grant
	}

	if code, r := call("POST", n2.p.addr, "/api/people/erin/revoke", e2eToken, nil); code != http.StatusOK {
		t.Fatalf("revoke on n2: %d %v", code, r)
	}
	for deadline := time.Now().Add(e2eWait); ; {
		if code, _ := call("GET", n1.p.addr, "/api/me", tok, nil); code == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("erin's token still works on n1 after a revocation on n2")
		}
		time.Sleep(100 * time.Millisecond) // a bounded poll: n1 follows the revocation
	}
}
