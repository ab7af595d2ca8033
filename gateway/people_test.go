package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/config/datadir"
	"github.com/mirror-gateway/mirror/runtime/ids"
)

// folks is a gateway with an owner (the test token) and two members,
// alice and bob, each with a chat of their own made over their own
// socket, and alice's chat waiting for the approval of a shell call.
type folks struct {
	*edge
	alice, bob             people.Person
	aliceToken, bobToken   string
	aliceChat, bobChat     chats.Chat
	aliceSock, bobSock     *client
	approval               string // waiting in aliceChat
	aliceSecret, bobSecret string // each chat's title: never shown to the other
}

func bearerOf(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

// connectAs dials with tok and says hello.
func (st *stack) connectAs(tok string) (*client, map[string]any) {
	st.t.Helper()
	cl, _, err := st.dial(bearerOf(tok))
	if err != nil {
		st.t.Fatal(err)
	}
	cl.send(map[string]any{"type": "hello", "client": "test"})
	return cl, cl.expect("welcome")
}

func newFolks(t *testing.T, telegram bool) *folks {
	t.Helper()
	return newFolksWith(t, edgeOpts{people: true, telegram: telegram})
}

func newFolksWith(t *testing.T, o edgeOpts) *folks {
	t.Helper()
	e := newEdge(t, o)
	f := &folks{edge: e, aliceSecret: "alice-secret-plans", bobSecret: "bob-secret-plans"}
	var err error
	if f.alice, f.aliceToken, err = e.people.Add("alice", ""); err != nil {
		t.Fatal(err)
	}
	if f.bob, f.bobToken, err = e.people.Add("bob", people.RoleMember); err != nil {
		t.Fatal(err)
	}
	f.aliceSock, _ = e.connectAs(f.aliceToken)
	f.bobSock, _ = e.connectAs(f.bobToken)
	create := func(cl *client, title string) chats.Chat {
		cl.send(map[string]any{"type": "chat.create", "title": title, "req": "c"})
		var ch chats.Chat
		b, _ := json.Marshal(cl.expect("chat.created")["chat"])
		if err := json.Unmarshal(b, &ch); err != nil {
			t.Fatal(err)
		}
		return ch
	}
	f.aliceChat, f.bobChat = create(f.aliceSock, f.aliceSecret), create(f.bobSock, f.bobSecret)
	// Alice asks for a shell call: its policy is ask, so it waits.
	f.aliceSock.send(map[string]any{"type": "chat.open", "chat": f.aliceChat.ID})
	f.aliceSock.expect("chat.snapshot")
	f.aliceSock.send(map[string]any{"type": "message.send", "chat": f.aliceChat.ID, "text": `/tool shell {"command":"echo hi"}`, "client_id": "a1"})
	ap := f.aliceSock.expect("approval.requested")["approval"].(map[string]any)
	f.approval = ap["id"].(string)
	return f
}

// clientTypes reads the client → server frame types from docs/protocol.md,
// so a frame type documented there is tried here as soon as it is added.
func clientTypes(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## Client → server")
	end := strings.Index(doc[start:], "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([a-z.]+)` \\|")
	var out []string
	for _, m := range row.FindAllStringSubmatch(doc[start:start+end], -1) {
		out = append(out, m[1])
	}
	if len(out) < 10 {
		t.Fatalf("read only %v from protocol.md", out)
	}
	return out
}

// TestPeopleFramesTable: bob sends every frame type of the protocol at
// alice's chat (its id, its pending message, its waiting approval, a
// recovery id of it): each is answered not_found, as for a chat that does
// not exist, nothing in alice's record is caused by bob, alice's approval
// still waits, and nothing bob receives names her chat. An owner reaches
// it. A frame type nobody classified fails the test.
func TestPeopleFramesTable(t *testing.T) {
	f := newFolks(t, false)
	a := f.aliceChat.ID
	// A message of alice's that waits behind her turn (which waits for
	// its approval), so edit and delete would succeed if allowed.
	f.aliceSock.send(map[string]any{"type": "message.send", "chat": a, "text": "queued", "client_id": "a2", "req": "q"})
	queued := f.aliceSock.expect("message.accepted")["message"].(map[string]any)["id"].(string)
	yes := true
	frames := map[string]map[string]any{
		"chat.open":          {"chat": a},
		"chat.history":       {"chat": a, "before": 100},
		"chat.close":         {"chat": a},
		"message.send":       {"chat": a, "text": "from bob", "client_id": "b1"},
		"message.edit":       {"chat": a, "message": queued, "text": "edited by bob"},
		"message.delete":     {"chat": a, "message": queued},
		"turn.stop":          {"chat": a},
		"approval.answer":    {"approval": f.approval, "allow": yes},
		"recovery.answer":    {"recovery": ids.NewRecovery(a), "action": "skip"},
		"message.pin":        {"chat": a, "message": queued, "pinned": yes},
		"chat.command":       {"chat": a, "text": "/clear"},
		"tool.revoke":        {"chat": a, "tool": "shell"},
		"message.regenerate": {"chat": a, "message": queued, "client_id": "b2"},
	}
	// Frames that name no chat of anyone: what they answer is checked
	// below to hold nothing of alice's.
	own := map[string]string{"hello": "welcome", "chat.create": "chat.created", "chat.list": "chat.list"}
	var bobSaw []map[string]any
	for _, typ := range clientTypes(t) {
		t.Run(typ, func(t *testing.T) {
			fr, chatBound := frames[typ]
			want, ownBound := own[typ]
			if !chatBound && !ownBound {
				t.Fatalf("frame type %q is not classified: add how it could reach another person's chat", typ)
			}
			m := map[string]any{"type": typ, "req": typ}
			for k, v := range fr {
				m[k] = v
			}
			f.bobSock.send(m)
			if !chatBound {
				bobSaw = append(bobSaw, f.bobSock.expect(want))
				return
			}
			got := f.bobSock.expect("error")
			bobSaw = append(bobSaw, got)
			if got["code"] != "not_found" || got["req"] != typ {
				t.Fatalf("%s at alice's chat answered %v, want not_found", typ, got)
			}
		})
	}
	// A chat that does not exist answers the same: no hint.
	f.bobSock.send(map[string]any{"type": "chat.open", "chat": ids.NewChat(), "req": "x"})
	ghost := f.bobSock.expect("error")
	if ghost["code"] != "not_found" {
		t.Fatalf("unknown chat: %v", ghost)
	}
	// Bob's socket got nothing naming alice's chat: not the chat.created
	// of her chat, not its updates while her turn ran, not her title.
	drain(f.bobSock, func(m map[string]any) { bobSaw = append(bobSaw, m) })
	for _, m := range bobSaw {
		b, _ := json.Marshal(m)
		if m["type"] == "error" {
			// An error names the chat bob named himself; nothing more.
			if strings.Contains(string(b), f.aliceSecret) {
				t.Fatalf("bob received %s", b)
			}
			continue
		}
		if strings.Contains(string(b), a) || strings.Contains(string(b), f.aliceSecret) {
			t.Fatalf("bob received %s", b)
		}
	}
	// Nothing in alice's record was caused by bob.
	frames2, err := f.svc.Events(t.Context(), a, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, fr := range frames2 {
		if strings.Contains(string(fr.Raw), f.bob.ID) || strings.Contains(string(fr.Raw), "edited by bob") || strings.Contains(string(fr.Raw), "from bob") {
			t.Fatalf("bob changed alice's chat: %s", fr.Raw)
		}
	}
	// Her approval still waits: an owner answers it, and the row says who.
	owner, _ := f.connectAs(testToken)
	owner.send(map[string]any{"type": "chat.open", "chat": a})
	snap := owner.expect("chat.snapshot")
	if aps, _ := snap["approvals"].([]any); len(aps) != 1 {
		t.Fatalf("alice's approval no longer waits: %v", snap["approvals"])
	}
	owner.send(map[string]any{"type": "approval.answer", "approval": f.approval, "allow": true})
	res := owner.expect("approval.resolved")
	first, _ := f.people.First()
	if res["by"] != first.ID {
		t.Fatalf("approval.resolved by %v, want the owner %s", res["by"], first.ID)
	}
}

// drain takes what a socket received so far, up to a bounded quiet moment
// after a round trip (a ping frame it answers).
func drain(cl *client, each func(map[string]any)) {
	cl.send(map[string]any{"type": "chat.create", "title": "marker", "req": "marker"})
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-cl.in:
			if !ok {
				return
			}
			each(m)
			if m["type"] == "chat.created" && m["req"] == "marker" {
				return
			}
		case <-deadline:
			cl.t.Fatal("no answer to the marker")
		}
	}
}

// routeClass says what a route can show of a chat, and so how the table
// tries it.
type routeClass int

const (
	routePublic  routeClass = iota // no token needed, nothing of a chat
	routeGlobal                    // the token needed, nothing of any chat
	routeChat                      // names a chat: not_found for one not visible
	routeList                      // lists chats: only the visible ones
	routeOwner                     // owners only: 403 to members
	routeMemory                    // memory notes: the person's own
	routeBlob                      // attachments: named by a visible chat
	routeSocket                    // the WebSocket: TestPeopleFramesTable
	routeWebhook                   // Telegram's webhook: its own secret
	routeSelf                      // the person's own record
)

// TestPeopleRoutesTable: bob asks every route of the router for alice's
// chat, her memory note and her attachment; the router's own list of
// patterns is read, so a route added later fails this test until it is
// classified. Chat routes answer 404 to bob (as for a chat that does not
// exist) and work for alice; lists and streams carry only bob's chats;
// owner routes answer 403 to members and work for the owner; no answer
// bob gets holds alice's chat id or title.
func TestPeopleRoutesTable(t *testing.T) {
	f := newFolks(t, true)
	a := f.aliceChat.ID
	// A memory note a boundary of alice's chat wrote.
	mem := filepath.Join(f.dataDir, "memory")
	if err := os.MkdirAll(mem, 0o700); err != nil {
		t.Fatal(err)
	}
	note := "2026-12-03-alice.md"
	if err := datadir.WriteFile(mem, note, []byte("# "+f.aliceSecret+"\n\nWhat alice taught.\n\n---\nFrom chat "+a+", the boundary at event 3, 2026-12-03.\n")); err != nil {
		t.Fatal(err)
	}
	// An attachment only alice's chat names.
	sum := f.aliceAttachment(t)
	if _, _, err := f.people.Add("carol", ""); err != nil {
		t.Fatal(err)
	}

	class := map[string]routeClass{
		"GET /healthz": routePublic, "GET /login": routePublic, "POST /login": routePublic, "POST /logout": routePublic,
		"GET /static/": routeGlobal, "GET /{$}": routeGlobal, "GET /monitor": routeGlobal, "GET /api/breakers": routeGlobal,
		"GET /metrics": routeGlobal, "GET /api/quotas": routeGlobal, "GET /api/models": routeGlobal, "GET /api/chains": routeGlobal,
		"GET /api/uploads/limits": routeGlobal, "POST /api/uploads": routeGlobal,
		"GET /api/chats": routeList, "GET /api/monitor/events": routeList,
		"GET /api/monitor/aggregates": routeGlobal, "GET /api/mcp": routeGlobal, // providers and servers, no chat
		"GET /api/chats/{id}/handoffs": routeChat, "GET /api/chats/{id}/replay": routeChat,
		"GET /api/chats/{id}/grants": routeChat, "PUT /api/chats/{id}/grants/{name}": routeChat,
		"GET /api/memory": routeMemory, "GET /api/memory/{name}": routeMemory,
		"GET /api/blobs/{sha256}": routeBlob,
		"PATCH /api/chats/{id}":   routeChat, "DELETE /api/chats/{id}": routeChat, "POST /api/chats/{id}/restore": routeChat,
		"GET /api/chats/{id}/export": routeChat, "GET /api/chats/{id}/cost": routeChat, "GET /api/search": routeList,
		"GET /ws":                      routeSocket,
		"POST /api/breakers/{rest...}": routeOwner, "PUT /api/models/{name}/context_limit": routeOwner,
		"PUT /api/models/{name}/compaction": routeOwner, "/api/telegram/": routeOwner,
		"GET /api/people": routeOwner, "POST /api/people": routeOwner, "POST /api/people/{name}/link": routeOwner,
		"POST /api/people/{name}/revoke": routeOwner, "GET /api/backup": routeOwner, "GET /api/check": routeOwner,
		"GET /api/me": routeSelf, "GET /api/people/usage": routeOwner,
		"POST /telegram/webhook": routeWebhook,
	}
	values := map[string]string{"id": a, "name": "default", "sha256": sum, "rest": "provider:nope/reset"}
	bodies := map[string]string{
		"PUT /api/chats/{id}/grants/{name}":    `{"level":"write"}`,
		"PATCH /api/chats/{id}":                `{"archived":false}`,
		"PUT /api/models/{name}/context_limit": `{"context_limit":"auto"}`,
		"PUT /api/models/{name}/compaction":    `{"soft_ratio":0.2,"hard_ratio":0.25}`,
		"POST /api/people":                     `{"name":"dave"}`,
		"POST /api/people/{name}/link":         `{"telegram":4242}`,
	}
	for _, p := range f.srv.mux.patterns {
		t.Run(p, func(t *testing.T) {
			c, ok := class[p]
			if !ok {
				t.Fatalf("route %q is not classified: say what it can show of a chat", p)
			}
			method, path, found := strings.Cut(p, " ")
			if !found {
				method, path = "GET", p+"pairing"
			}
			path = strings.TrimSuffix(path, "{$}")
			path = anyWildcard.ReplaceAllStringFunc(path, func(w string) string {
				name := anyWildcard.FindStringSubmatch(w)[1]
				if name == "name" && strings.Contains(p, "/grants/") {
					return "bob"
				}
				if name == "name" && strings.Contains(p, "/memory/") {
					return note
				}
				if name == "name" && strings.Contains(p, "/people/") {
					return "carol" // linked, then revoked: not a person the table needs
				}
				return values[name]
			})
			if path == "/static/" {
				path = "/static/app.js"
			}
			if path == "/api/search" {
				path += "?q=file" // alice's message "see the file"
			}
			body := bodies[p]
			bob, bobBody := f.ask(method, path, f.bobToken, body)
			if strings.Contains(bobBody, a) || strings.Contains(bobBody, f.aliceSecret) {
				t.Fatalf("bob's answer (%d) holds alice's chat: %.300s", bob, bobBody)
			}
			switch c {
			case routeChat, routeBlob:
				if bob != http.StatusNotFound {
					t.Fatalf("bob: %d %.200s, want 404", bob, bobBody)
				}
				// Alice reaches it (a delete of her chat while it waits for
				// an approval is refused 409: reached, not hidden).
				if got, b := f.ask(method, path, f.aliceToken, body); got == http.StatusNotFound || got == http.StatusUnauthorized || got == http.StatusForbidden || got >= 500 {
					t.Fatalf("alice: %d %.200s", got, b)
				}
			case routeMemory:
				if strings.Contains(path, note) && bob != http.StatusNotFound {
					t.Fatalf("bob read alice's note: %d", bob)
				}
				if got, b := f.ask(method, path, f.aliceToken, body); got != 200 || !strings.Contains(b, f.aliceSecret) {
					t.Fatalf("alice: %d %.200s", got, b)
				}
			case routeList:
				if got, b := f.ask(method, path, f.aliceToken, body); got == 200 && !strings.Contains(b, a) {
					t.Fatalf("alice's list lacks her chat: %.300s", b)
				}
				if bob == 200 && !strings.Contains(bobBody, f.bobChat.ID) && !strings.HasPrefix(path, "/api/search") {
					t.Fatalf("bob's list lacks his chat: %.300s", bobBody)
				}
			case routeOwner:
				if bob != http.StatusForbidden {
					t.Fatalf("bob: %d %.200s, want 403", bob, bobBody)
				}
				if got, b := f.ask(method, path, testToken, body); got == http.StatusForbidden || got == http.StatusUnauthorized {
					t.Fatalf("the owner: %d %.200s", got, b)
				}
			case routeSelf:
				if bob != 200 || !strings.Contains(bobBody, f.bob.ID) {
					t.Fatalf("bob: %d %s", bob, bobBody)
				}
			}
		})
	}
}

// ask sends one request with tok and returns its status and what of the
// body arrives within two seconds (a stream never ends).
func (f *folks) ask(method, path, tok, body string) (int, string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, f.http.URL+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// aliceAttachment uploads a file as alice and sends it in her chat.
func (f *folks) aliceAttachment(t *testing.T) string {
	t.Helper()
	req, _ := http.NewRequest("POST", f.http.URL+"/api/uploads?name=plan.txt", strings.NewReader(f.aliceSecret+" in a file"))
	req.Header.Set("Authorization", "Bearer "+f.aliceToken)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var up struct {
		Attachment chats.Attachment `json:"attachment"`
	}
	err = json.NewDecoder(resp.Body).Decode(&up)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %v", resp.StatusCode, err)
	}
	f.aliceSock.send(map[string]any{"type": "message.send", "chat": f.aliceChat.ID, "text": "see the file", "client_id": "att",
		"attachments": []string{up.Attachment.SHA256}, "req": "att"})
	for {
		if m := f.aliceSock.expect("message.accepted"); m["req"] == "att" {
			break
		}
	}
	// Collected as referenced: no longer a live upload anyone may name.
	return up.Attachment.SHA256
}

// TestSharedChatVisibleWithItsGrant: alice shares her chat with bob, read
// only: bob lists and opens it but cannot send; with write he can send;
// with the grant taken away it is gone again. Only its owner shares it.
func TestSharedChatVisibleWithItsGrant(t *testing.T) {
	f := newFolks(t, false)
	a := f.aliceChat.ID
	grant := func(tok, level string) int {
		code, _ := f.ask("PUT", "/api/chats/"+a+"/grants/bob", tok, `{"level":"`+level+`"}`)
		return code
	}
	listed := func() bool {
		_, b := f.ask("GET", "/api/chats", f.bobToken, "")
		return strings.Contains(b, a)
	}
	send := func(id string) string {
		f.bobSock.send(map[string]any{"type": "message.send", "chat": a, "text": "hi from bob", "client_id": id, "req": id})
		for {
			m := f.bobSock.expect2("message.accepted", "error")
			if m["req"] == id {
				if m["type"] == "error" {
					return m["code"].(string)
				}
				return "ok"
			}
		}
	}
	if code := grant(f.bobToken, "write"); code != http.StatusNotFound {
		t.Fatalf("bob shared alice's chat with himself: %d", code)
	}
	if listed() {
		t.Fatal("listed before any grant")
	}
	if code := grant(f.aliceToken, "read"); code != 200 {
		t.Fatalf("alice's grant: %d", code)
	}
	if !listed() {
		t.Fatal("not listed with a read grant")
	}
	f.bobSock.send(map[string]any{"type": "chat.open", "chat": a})
	if snap := f.bobSock.expect("chat.snapshot"); !strings.Contains(fmt.Sprint(snap["chat"]), f.aliceSecret) {
		t.Fatalf("snapshot: %v", snap["chat"])
	}
	if got := send("r1"); got != "not_found" {
		t.Fatalf("send with read: %s", got)
	}
	if code := grant(f.aliceToken, "write"); code != 200 {
		t.Fatal(code)
	}
	if got := send("w1"); got != "ok" {
		t.Fatalf("send with write: %s", got)
	}
	// A reader who may write still cannot answer alice's approval: only
	// the person who asked, or an owner.
	f.bobSock.send(map[string]any{"type": "approval.answer", "approval": f.approval, "allow": true, "req": "ap"})
	if m := f.bobSock.expect("error"); m["code"] != "not_found" {
		t.Fatalf("bob answered alice's approval: %v", m)
	}
	if code := grant(f.aliceToken, "none"); code != 200 {
		t.Fatal(code)
	}
	if listed() {
		t.Fatal("still listed after the grant was taken away")
	}
	// Alice herself answers her approval, and the row records her.
	f.aliceSock.send(map[string]any{"type": "approval.answer", "approval": f.approval, "allow": false})
	if res := f.aliceSock.expect("approval.resolved"); res["by"] != f.alice.ID {
		t.Fatalf("resolved by %v", res["by"])
	}
}

// expect2 returns the next frame of either type.
func (cl *client) expect2(a, b string) map[string]any {
	cl.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-cl.in:
			if !ok {
				cl.t.Fatalf("socket closed waiting for %s or %s", a, b)
			}
			if m["type"] == a || m["type"] == b {
				return m
			}
		case <-deadline:
			cl.t.Fatalf("timed out waiting for %s or %s", a, b)
		}
	}
}

// TestTelegramApprovalOnlyByItsPeople: a member linked to a Telegram user
// presses Allow on a shell call waiting in another member's chat: nothing
// happens; the owner's press (their Telegram user linked to them) allows
// it, and the row records the owner.
func TestTelegramApprovalOnlyByItsPeople(t *testing.T) {
	f := newFolks(t, true)
	if _, err := f.people.Link("bob", 5001); err != nil {
		t.Fatal(err)
	}
	if _, err := f.people.Link("owner", 5002); err != nil {
		t.Fatal(err)
	}
	press := func(id, user int64, data string) {
		f.update(fmt.Sprintf(`{"update_id":%d,"callback_query":{"id":"q%d","from":{"id":%d,"is_bot":false,"first_name":"U"},"chat_instance":"x","data":%q,
			"message":{"message_id":7,"date":1700000000,"chat":{"id":%d,"type":"private"},"text":"approve?"}}}`, id, id, user, data, user))
	}
	press(10, 5001, "y:"+f.approval)
	// The webhook answers once the update is handled: the approval waits.
	f.aliceSock.send(map[string]any{"type": "chat.open", "chat": f.aliceChat.ID, "req": "s"})
	if aps, _ := f.aliceSock.expect("chat.snapshot")["approvals"].([]any); len(aps) != 1 {
		t.Fatal("bob's press from Telegram answered alice's approval")
	}
	press(11, 5002, "y:"+f.approval)
	res := f.aliceSock.expect("approval.resolved")
	first, _ := f.people.First()
	if res["by"] != first.ID || res["approval"].(map[string]any)["allow"] != true {
		t.Fatalf("resolved %v", res)
	}
	// /chats for bob lists bob's chat only.
	f.update(`{"update_id":12,"message":{"message_id":2,"from":{"id":5001,"is_bot":false,"first_name":"B"},"chat":{"id":5001,"type":"private"},"date":1700000000,"text":"/chats"}}`)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case s := <-f.sent:
			if strings.Contains(s, f.aliceSecret) {
				t.Fatalf("bob's /chats shows alice's chat: %s", s)
			}
			if strings.Contains(s, "Your chats") {
				return
			}
		case <-deadline:
			t.Fatal("no /chats answer")
		}
	}
}

// anyWildcard is a pattern's wildcard, digits in its name included.
var anyWildcard = regexp.MustCompile(`\{([a-zA-Z0-9_]+)(\.\.\.)?\}`)

// TestToolPoliciesPerRole: people.policies deny a member shell. In the
// member's own chat shell is not offered at all (the model is told only of
// the tools it may call, and list_dir, allowed, runs); in an owner's chat
// shell is offered and asks; when the member asks in the owner's chat
// shared with them, the offered shell is still refused for the person who
// asked.
func TestToolPoliciesPerRole(t *testing.T) {
	pols := map[string]map[string]string{"member": {"shell": "deny", "list_*": "allow"}}
	e := newEdge(t, edgeOpts{people: true, chatsOpt: func(o *chats.Options) { o.RolePolicies = pols }})
	_, tok, err := e.people.Add("mia", "")
	if err != nil {
		t.Fatal(err)
	}
	open := func(tok string) (*client, any) {
		cl, _ := e.connectAs(tok)
		cl.send(map[string]any{"type": "chat.create", "req": "c"})
		chat := cl.expect("chat.created")["chat"].(map[string]any)["id"]
		cl.send(map[string]any{"type": "chat.open", "chat": chat})
		cl.expect("chat.snapshot")
		return cl, chat
	}
	n := 0
	say := func(cl *client, chat any, text string) map[string]any {
		n++
		cl.send(map[string]any{"type": "message.send", "chat": chat, "text": text, "client_id": fmt.Sprint(n)})
		return cl.expect2("approval.requested", "tool.result")
	}
	mia, miaChat := open(tok)
	mia.send(map[string]any{"type": "message.send", "chat": miaChat, "text": `/tool shell {"command":"echo hi"}`, "client_id": "s"})
	fin := mia.expect("turn.finished")
	if reply := fmt.Sprint(fin["reply"]); !strings.Contains(reply, "«shell» is not available here") || strings.Contains(reply, "shell,") || !strings.Contains(reply, "list_dir") {
		t.Fatalf("member's chat offered shell, or not list_dir: %v", fin)
	}
	got := say(mia, miaChat, `/tool list_dir {}`)
	if res, _ := got["result"].(map[string]any); got["type"] != "tool.result" || res["is_error"] == true {
		t.Fatalf("member's list_dir: %v", got)
	}
	owner, ownerChat := open(testToken)
	if got := say(owner, ownerChat, `/tool shell {"command":"echo hi"}`); got["type"] != "approval.requested" {
		t.Fatalf("owner's shell: %v", got)
	}
	_, shared := open(testToken)
	if _, err := e.people.Share(shared.(string), "mia", people.Write); err != nil {
		t.Fatal(err)
	}
	mia.send(map[string]any{"type": "chat.open", "chat": shared})
	mia.expect("chat.snapshot")
	got = say(mia, shared, `/tool shell {"command":"echo hi"}`)
	res, _ := got["result"].(map[string]any)
	if got["type"] != "tool.result" || !strings.Contains(fmt.Sprint(res["content"]), "not allowed for the person who asked") {
		t.Fatalf("member's shell in the owner's chat: %v", got)
	}
}

// TestPerPersonLimits: limits.messages_per_minute counts per person (alice
// spending hers leaves bob his), and people.tokens_per_day refuses a
// person whose turns used the day's tokens with rate_limited and when it
// frees up (the next UTC midnight), in the browser and on Telegram, until
// the day turns; a refused rate recovers once it refills; the Monitor's
// usage route shows who used what.
func TestPerPersonLimits(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 3, 22, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f := newFolksWith(t, edgeOpts{people: true, telegram: true, now: clock,
		mutate:   func(c *config.Config) { c.Limits.MessagesPerMinute = 3 },
		chatsOpt: func(o *chats.Options) { o.TokensPerDay, o.Now = 1, clock }})
	send := func(cl *client, chat, id string) map[string]any {
		cl.send(map[string]any{"type": "message.send", "chat": chat, "text": "hello " + id, "client_id": id, "req": id})
		for {
			if m := cl.expect2("message.accepted", "error"); m["req"] == id {
				return m
			}
		}
	}
	// newFolks spent one of alice's three: two more go, the next is refused.
	b := f.bobChat.ID
	for i := range 2 {
		if m := send(f.aliceSock, f.aliceChat.ID, fmt.Sprint("a", i)); m["type"] != "message.accepted" {
			t.Fatalf("alice's message %d: %v", i, m)
		}
	}
	if m := send(f.aliceSock, f.aliceChat.ID, "a-over"); m["code"] != "rate_limited" || m["retry_after_ms"].(float64) <= 0 {
		t.Fatalf("alice past her rate: %v", m)
	}
	// Bob's rate is his own. His first turn uses tokens (the builtin
	// model bills what it reads and writes)...
	f.bobSock.send(map[string]any{"type": "chat.open", "chat": b})
	f.bobSock.expect("chat.snapshot")
	if m := send(f.bobSock, b, "b0"); m["type"] != "message.accepted" {
		t.Fatalf("bob: %v", m)
	}
	f.bobSock.expect("turn.finished")
	// ...so with tokens_per_day 1 his next message is refused until midnight.
	m := send(f.bobSock, b, "b1")
	if m["code"] != "rate_limited" || m["retry_after_ms"].(float64) != float64(2*time.Hour/time.Millisecond) ||
		!strings.Contains(m["message"].(string), "frees up at 2026-12-04 00:00 UTC") {
		t.Fatalf("bob past his day: %v", m)
	}
	code, body := f.ask("GET", "/api/people/usage?day=2026-12-03", testToken, "")
	if code != 200 || !strings.Contains(body, `"name":"bob"`) || strings.Contains(body, `"name":"carol"`) {
		t.Fatalf("usage: %d %s", code, body)
	}
	// On Telegram too, as bob.
	if _, err := f.people.Link("bob", 6001); err != nil {
		t.Fatal(err)
	}
	f.update(`{"update_id":30,"message":{"message_id":3,"from":{"id":6001,"is_bot":false,"first_name":"B"},"chat":{"id":6001,"type":"private"},"date":1700000000,"text":"hi"}}`)
	waitSent(t, f.sent, "Not sent: today's tokens are spent")
	// The day turns: bob may send again.
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	if m := send(f.bobSock, b, "b2"); m["type"] != "message.accepted" {
		t.Fatalf("bob the next day: %v", m)
	}
	// Alice's rate has refilled meanwhile: her messages go again.
	if m := send(f.aliceSock, f.aliceChat.ID, "a-later"); m["type"] != "message.accepted" {
		t.Fatalf("alice after her rate refilled: %v", m)
	}
}

// waitSent waits for a Telegram message starting with prefix.
func waitSent(t *testing.T, sent chan string, prefix string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case s := <-sent:
			if strings.HasPrefix(s, prefix) {
				return
			}
		case <-deadline:
			t.Fatalf("Telegram was not sent %q", prefix)
		}
	}
}
