package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
)

// twoChains adds a second builtin model on a chain of its own, "other".
func twoChains(c *config.Config) {
	m := c.Models[0]
	m.Name = "second"
	c.Models = append(c.Models, m)
	c.Chains["other"] = []string{"second"}
}

// TestPatchChatChain: PATCH /api/chats/{id} {"chain"} sets the chain the
// chat's next turn asks (the answer names its model), tells list watchers
// (chat.updated), and an unknown chain is refused with nothing applied.
func TestPatchChatChain(t *testing.T) {
	st := newStack(t, twoChains)
	watcher := st.connect()
	c, err := st.svc.Create(t.Context(), "picker", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	watcher.expect("chat.created")
	patch := func(body string) (int, string) {
		req, _ := http.NewRequest("PATCH", st.http.URL+"/api/chats/"+c.ID, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		body, has string
		code      int
	}{
		{`{"chain":"nope","title":"not applied"}`, "no chain", 400},
		{`{"chain":7}`, "chain", 400},
		{`{"chain":"other"}`, `"chain":"other"`, 200},
	} {
		code, body := patch(tc.body)
		if code != tc.code || !strings.Contains(body, tc.has) {
			t.Fatalf("PATCH %s: %d %s", tc.body, code, body)
		}
	}
	if got, _ := st.svc.Get(t.Context(), c.ID); got.Title != "picker" || got.Chain != "other" {
		t.Fatalf("after the patches: %+v", got)
	}
	up := watcher.expect("chat.updated")
	if ch, _ := up["chat"].(map[string]any); ch["chain"] != "other" {
		t.Fatalf("chat.updated %v", up)
	}
	cl := st.connect()
	cl.send(map[string]any{"type": "chat.open", "chat": c.ID})
	cl.expect("chat.snapshot")
	cl.send(map[string]any{"type": "message.send", "chat": c.ID, "text": "which model?", "client_id": "k1"})
	fin := cl.expect("turn.finished")
	if fin["model"] != "second" {
		t.Fatalf("the turn was answered by %v, want the other chain's model", fin["model"])
	}
	// "" goes back to the chat role's chain.
	if code, body := patch(`{"chain":""}`); code != 200 || !strings.Contains(body, `"chain":"default"`) {
		t.Fatalf("reset: %d %s", code, body)
	}
}

// TestChatListSaysWhatWaits: a chat whose tool call waits for approval is
// sent to list watchers with waiting "approval" and listed so by GET
// /api/chats and chat.list; answered, the field is sent empty.
func TestChatListSaysWhatWaits(t *testing.T) {
	st := newStack(t, nil)
	watcher := st.connect()
	cl := st.connect()
	cl.send(map[string]any{"type": "chat.create", "title": "tools"})
	id := cl.expect("chat.created")["chat"].(map[string]any)["id"].(string)
	cl.send(map[string]any{"type": "chat.open", "chat": id})
	cl.expect("chat.snapshot")
	cl.send(map[string]any{"type": "message.send", "chat": id, "text": `/tool shell {"command":"echo hi"}`, "client_id": "k1"})
	ap := cl.expect("approval.requested")
	for {
		up := watcher.expect("chat.updated")
		if ch := up["chat"].(map[string]any); ch["id"] == id && ch["waiting"] == chats.WaitApproval {
			break
		}
	}
	listed := func() map[string]any {
		req, _ := http.NewRequest("GET", st.http.URL+"/api/chats", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var page struct{ Chats []map[string]any }
		if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Chats {
			if c["id"] == id {
				return c
			}
		}
		t.Fatalf("chat %s not listed", id)
		return nil
	}
	if c := listed(); c["waiting"] != chats.WaitApproval {
		t.Fatalf("GET /api/chats lists %v", c)
	}
	watcher.send(map[string]any{"type": "chat.list", "req": "l"})
	page := watcher.expect("chat.list")
	found := false
	for _, c := range page["chats"].([]any) {
		if c := c.(map[string]any); c["id"] == id {
			found = c["waiting"] == chats.WaitApproval
		}
	}
	if !found {
		t.Fatalf("chat.list %v", page)
	}
	approval := ap["approval"].(map[string]any)["id"].(string)
	cl.send(map[string]any{"type": "approval.answer", "approval": approval, "allow": true})
	cl.expect("turn.finished")
	for {
		up := watcher.expect("chat.updated")
		if ch := up["chat"].(map[string]any); ch["id"] == id && ch["waiting"] == "" && ch["state"] == chats.StateIdle {
			// Sent empty, not left out: a client merging updates sees the
			// wait end.
			break
		}
	}
	if c := listed(); c["waiting"] != "" {
		t.Fatalf("still listed waiting: %v", c)
	}
}
