package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/gateway/ws"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
)

// closeError waits (bounded) for the socket to close and returns how.
func (cl *client) closeError() *websocket.CloseError {
	cl.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-cl.in:
			if !ok {
				cl.t.Fatal("socket ended without a close")
			}
			switch m["type"] {
			case "_closed":
				var ce *websocket.CloseError
				if err, _ := m["err"].(error); err != nil && asClose(err, &ce) {
					return ce
				}
				cl.t.Fatalf("socket ended without a close frame: %v", m["err"])
			case "message.accepted":
				cl.t.Fatalf("a frame was answered after the revoke: %v", m)
			}
		case <-deadline:
			cl.t.Fatal("the socket was not closed")
		}
	}
}

// TestRevokeClosesTheirSockets: revoking bob closes both his sockets (one
// authenticated at the upgrade, one by hello) at once with 4401 and
// "signed out", a message he sends right after is not answered or stored,
// his token is refused from then on, and alice's socket goes on.
func TestRevokeClosesTheirSockets(t *testing.T) {
	f := newFolks(t, false)
	hello, _, err := f.dial(nil)
	if err != nil {
		t.Fatal(err)
	}
	hello.send(map[string]any{"type": "hello", "token": f.bobToken})
	hello.expect("welcome")
	if code, body := f.ask("POST", "/api/people/bob/revoke", testToken, ""); code != 200 {
		t.Fatalf("revoke: %d %s", code, body)
	}
	// The frame races the close: it is refused whichever is first.
	_ = f.bobSock.c.WriteJSON(map[string]any{"type": "message.send", "chat": f.bobChat.ID, "text": "after the revoke", "client_id": "late"})
	for _, cl := range []*client{f.bobSock, hello} {
		ce := cl.closeError()
		if ce.Code != ws.CloseUnauthorized || !strings.Contains(ce.Text, "signed out") {
			t.Fatalf("closed with %d %q, want 4401 signed out", ce.Code, ce.Text)
		}
	}
	frames, err := f.svc.Events(context.Background(), f.bobChat.ID, 0, 1<<20)
	if err != nil || len(frames) == 0 {
		t.Fatalf("bob's record: %v %v", frames, err)
	}
	for _, fr := range frames {
		if strings.Contains(string(fr.Raw), "after the revoke") {
			t.Fatalf("bob's message after the revoke was stored: %s", fr.Raw)
		}
	}
	if _, resp, err := f.dial(bearerOf(f.bobToken)); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("bob's token after the revoke: %v %v", err, resp)
	}
	f.aliceSock.send(map[string]any{"type": "chat.list", "req": "l"})
	if m := f.aliceSock.expect("chat.list"); m["req"] != "l" {
		t.Fatalf("alice's socket: %v", m)
	}
}

// toolsModel is a fake OpenAI server that keeps the tools array of each
// request and answers "ok".
type toolsModel struct {
	srv   *httptest.Server
	mu    sync.Mutex
	tools []string
}

func newToolsModel(t *testing.T) *toolsModel {
	m := &toolsModel{}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Tools json.RawMessage `json:"tools"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, 400)
			return
		}
		m.mu.Lock()
		m.tools = append(m.tools, string(body.Tools))
		m.mu.Unlock()
		providertest.StreamOpenAI(w, "ok", nil, 100, 1)
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *toolsModel) last() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tools[len(m.tools)-1]
}

// TestRoleDeniedToolsAreNotOffered: with people.policies denying members
// shell (and every github__ tool), a member's chat offers neither, in the
// request the provider receives; the list is that of the chat's owner, so
// it is byte for byte the same when an owner speaks in it next (the
// provider's prefix cache stays warm); an owner's own chat offers shell.
func TestRoleDeniedToolsAreNotOffered(t *testing.T) {
	m := newToolsModel(t)
	pols := map[string]map[string]string{"member": {"shell": "deny", "github__*": "deny"}}
	e := newEdge(t, edgeOpts{people: true,
		mutate: func(c *config.Config) {
			c.Providers = append(c.Providers, config.Provider{Name: "fake", Kind: "openai", BaseURL: m.srv.URL + "/v1"})
			c.Models[0].Provider, c.Models[0].Model = "fake", "fake-model"
		},
		chatsOpt: func(o *chats.Options) { o.RolePolicies = pols }})
	_, tok, err := e.people.Add("mia", people.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	mia, _ := e.connectAs(tok)
	owner, _ := e.connectAs(testToken)
	n := 0
	say := func(cl *client, chat any, text string) string {
		n++
		cl.send(map[string]any{"type": "chat.open", "chat": chat})
		cl.expect("chat.snapshot")
		cl.send(map[string]any{"type": "message.send", "chat": chat, "text": text, "client_id": fmt.Sprint(n)})
		cl.expect("turn.finished")
		return m.last()
	}
	create := func(cl *client) any {
		cl.send(map[string]any{"type": "chat.create", "req": "c"})
		return cl.expect("chat.created")["chat"].(map[string]any)["id"]
	}
	miaChat := create(mia)
	first := say(mia, miaChat, "hello")
	if strings.Contains(first, `"shell"`) || !strings.Contains(first, `"list_dir"`) || !strings.Contains(first, `"recall_memory"`) {
		t.Fatalf("the member's chat offers: %s", first)
	}
	if again := say(owner, miaChat, "hello from the owner"); again != first {
		t.Fatalf("the tools changed when the owner spoke:\n%s\n%s", first, again)
	}
	if own := say(owner, create(owner), "hello"); !strings.Contains(own, `"shell"`) {
		t.Fatalf("the owner's chat lacks shell: %s", own)
	}
}

// TestPeopleUsageShowsCost: the Monitor's people usage carries what each
// person's requests cost, from the ledger's person key.
func TestPeopleUsageShowsCost(t *testing.T) {
	e := newEdge(t, edgeOpts{people: true, mutate: func(c *config.Config) {
		c.Models[0].Prices = config.Prices{Input: 2, Output: 10}
	}})
	bob, _, err := e.people.Add("bob", people.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.mon.RecordCostBy("c_1", bob.ID, e.cfg.Models[0].Name, 1_000_000, 100_000, 0); err != nil {
		t.Fatal(err)
	}
	code, body := (&folks{edge: e}).ask("GET", "/api/people/usage", testToken, "")
	var got struct {
		Usage []struct {
			Name string `json:"name"`
			Cost *struct {
				Requests int64   `json:"requests"`
				Cost     float64 `json:"cost"`
			} `json:"cost"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil {
		t.Fatalf("usage: %d %v %s", code, err, body)
	}
	for _, u := range got.Usage {
		if u.Name == "bob" && u.Cost != nil && u.Cost.Requests == 1 && u.Cost.Cost == 3 {
			return
		}
	}
	t.Fatalf("bob's cost is not shown: %s", body)
}
