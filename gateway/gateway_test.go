package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/search"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/config/datadir"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"go.uber.org/goleak"
)

// bleve (chats/search) starts its analysis workers at init, for the
// life of the process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"))
}

const testToken = "test-token-0123456789abcdef"

// stack is the whole gateway over a real bbolt file, the builtin model and a
// real HTTP server on 127.0.0.1.
type stack struct {
	t     *testing.T
	srv   *Server
	http  *httptest.Server
	svc   *chats.Service
	store *chats.Store
	data  string // the data dir
}

func newStack(t *testing.T, mutate func(*config.Config)) *stack {
	t.Helper()
	return newStackWith(t, mutate, nil, nil)
}

// newStackWith is newStack whose registry also has sources (MCP servers)
// and whose /api/mcp answers mcpStatus (nil: 503).
func newStackWith(t *testing.T, mutate func(*config.Config), sources []tools.Source, mcpStatus func() any) *stack {
	t.Helper()
	cfg := config.Default()
	zero := time.Duration(0)
	cfg.Providers[0].Delay = &zero
	if mutate != nil {
		mutate(cfg)
	}
	db, store, eng := openStack(t, cfg)
	cfg.Tools.Workspace = filepath.Join(t.TempDir(), "workspace")
	topt := tools.OptionsFrom(cfg, nil)
	topt.Sources = sources
	reg, err := tools.New(topt)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Provision(runtime.Options{Tools: reg}); err != nil {
		t.Fatal(err)
	}
	data, err := datadir.Prepare(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	at := cfg.Attachments
	blobs, err := chats.OpenBlobs(data, chats.BlobLimits{Image: at.MaxImageBytes, Document: at.MaxDocumentBytes, Audio: at.MaxAudioBytes}, at.UnreferencedTTL)
	if err != nil {
		t.Fatal(err)
	}
	index, err := search.Open(filepath.Join(data, "search"))
	if err != nil {
		t.Fatal(err)
	}
	svc := chats.New(chats.Options{Store: store, Turner: eng, Blobs: blobs, Search: index, UndoDelete: 5 * time.Second})
	st := serveStack(t, cfg, svc, store, db, Options{MCP: mcpStatus, Models: eng}, index.Close)
	st.data = data
	return st
}

// serveStack serves svc over a test HTTP server as a gateway made with
// opts (Config, Chats, Token and Addr filled in), and closes, when t ends,
// the server, the gateway, svc, then each of more, store and db.
func serveStack(t *testing.T, cfg *config.Config, svc *chats.Service, store *chats.Store, db io.Closer, opts Options, more ...func() error) *stack {
	t.Helper()
	st := &stack{t: t, svc: svc, store: store}
	st.http = httptest.NewUnstartedServer(nil)
	opts.Config, opts.Chats, opts.Token, opts.Addr = cfg, svc, testToken, st.http.Listener.Addr().String()
	st.srv = New(opts)
	st.http.Config.Handler = st.srv.Handler()
	st.http.Start()
	t.Cleanup(func() {
		st.http.Close()
		st.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		svc.Close(ctx)
		for _, c := range more {
			c()
		}
		store.Close()
		db.Close()
	})
	return st
}

func (st *stack) wsURL() string { return "ws" + strings.TrimPrefix(st.http.URL, "http") + "/ws" }

// client is a test WebSocket client.
type client struct {
	t  *testing.T
	c  *websocket.Conn
	in chan map[string]any
}

func (st *stack) dial(header http.Header) (*client, *http.Response, error) {
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	c, resp, err := d.Dial(st.wsURL(), header)
	if err != nil {
		return nil, resp, err
	}
	cl := &client{t: st.t, c: c, in: make(chan map[string]any, 4096)}
	go func() {
		defer close(cl.in)
		for {
			_, b, err := c.ReadMessage()
			if err != nil {
				cl.in <- map[string]any{"type": "_closed", "err": err}
				return
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				cl.in <- map[string]any{"type": "_garbage", "raw": string(b)}
				continue
			}
			cl.in <- m
		}
	}()
	st.t.Cleanup(func() {
		c.Close()
		for range cl.in {
		}
	})
	return cl, resp, nil
}

func bearer() http.Header { return http.Header{"Authorization": {"Bearer " + testToken}} }

// connect dials with the token and says hello.
func (st *stack) connect() *client {
	st.t.Helper()
	cl, _, err := st.dial(bearer())
	if err != nil {
		st.t.Fatal(err)
	}
	cl.send(map[string]any{"type": "hello", "client": "test"})
	cl.expect("welcome")
	return cl
}

func (cl *client) send(v any) {
	cl.t.Helper()
	if err := cl.c.WriteJSON(v); err != nil {
		cl.t.Fatal(err)
	}
}

// expect returns the next frame of type typ, failing on an error frame
// (unless typ is "error") or after a bounded wait.
func (cl *client) expect(typ string) map[string]any {
	cl.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-cl.in:
			if !ok {
				cl.t.Fatalf("socket closed waiting for %s", typ)
			}
			if m["type"] == typ {
				return m
			}
			if m["type"] == "error" || m["type"] == "_closed" {
				cl.t.Fatalf("waiting for %s got %v", typ, m)
			}
		case <-deadline:
			cl.t.Fatalf("timed out waiting for %s", typ)
		}
	}
}

func (cl *client) closeCode() int {
	cl.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-cl.in:
			if !ok {
				return -1
			}
			if m["type"] == "_closed" {
				var ce *websocket.CloseError
				if err, _ := m["err"].(error); err != nil && asClose(err, &ce) {
					return ce.Code
				}
				return -1
			}
		case <-deadline:
			cl.t.Fatal("socket did not close")
		}
	}
}

func asClose(err error, ce **websocket.CloseError) bool {
	c, ok := err.(*websocket.CloseError)
	*ce = c
	return ok
}

func TestHTTPAuth(t *testing.T) {
	st := newStack(t, nil)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, h http.Header) *http.Response {
		req, _ := http.NewRequest("GET", st.http.URL+path, nil)
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	cases := []struct {
		path   string
		header http.Header
		want   int
	}{
		{"/healthz", nil, 200},
		{"/login", nil, 200},
		{"/api/chats", nil, 401},
		{"/api/chats", http.Header{"Authorization": {"Bearer wrong"}}, 401},
		{"/api/chats", bearer(), 200},
		{"/api/chats", http.Header{"Cookie": {CookieName + "=" + testToken}}, 200},
		{"/", nil, 401},
		{"/", bearer(), 200},
		{"/static/app.js", nil, 401},
		{"/static/app.js", http.Header{"Cookie": {CookieName + "=" + testToken}}, 200},
	}
	for _, tc := range cases {
		if got := get(tc.path, tc.header).StatusCode; got != tc.want {
			t.Errorf("GET %s with %v: %d, want %d", tc.path, tc.header, got, tc.want)
		}
	}
	post := func(token string) *http.Response {
		resp, err := noRedirect.PostForm(st.http.URL+"/login", url.Values{"token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := post("nope"); r.StatusCode != 401 {
		t.Fatalf("wrong login: %d", r.StatusCode)
	}
	r := post(testToken)
	if r.StatusCode != http.StatusSeeOther || len(r.Cookies()) != 1 || !r.Cookies()[0].HttpOnly || r.Cookies()[0].Value != testToken {
		t.Fatalf("login: %d %v", r.StatusCode, r.Cookies())
	}
}

func TestWebSocketAuth(t *testing.T) {
	st := newStack(t, nil)
	t.Run("wrong bearer is 401", func(t *testing.T) {
		_, resp, err := st.dial(http.Header{"Authorization": {"Bearer wrong"}})
		if err == nil || resp == nil || resp.StatusCode != 401 {
			t.Fatalf("err %v resp %v", err, resp)
		}
	})
	t.Run("wrong hello token closes 4401", func(t *testing.T) {
		cl, _, err := st.dial(nil)
		if err != nil {
			t.Fatal(err)
		}
		cl.send(map[string]any{"type": "hello", "token": "wrong"})
		if code := cl.closeCode(); code != 4401 {
			t.Fatalf("close %d", code)
		}
	})
	t.Run("frame before hello closes 4401", func(t *testing.T) {
		cl, _, err := st.dial(nil)
		if err != nil {
			t.Fatal(err)
		}
		cl.send(map[string]any{"type": "chat.create"})
		if code := cl.closeCode(); code != 4401 {
			t.Fatalf("close %d", code)
		}
	})
	t.Run("hello token admits", func(t *testing.T) {
		cl, _, err := st.dial(nil)
		if err != nil {
			t.Fatal(err)
		}
		cl.send(map[string]any{"type": "hello", "token": testToken, "req": "h"})
		if w := cl.expect("welcome"); w["req"] != "h" || w["session"] == "" {
			t.Fatalf("welcome %v", w)
		}
	})
	t.Run("cross-origin upgrade refused", func(t *testing.T) {
		h := bearer()
		h.Set("Origin", "http://evil.example")
		_, resp, err := st.dial(h)
		if err == nil || resp == nil || resp.StatusCode != 403 {
			t.Fatalf("err %v resp %v", err, resp)
		}
		h.Set("Origin", st.http.URL)
		if _, _, err := st.dial(h); err != nil {
			t.Fatalf("same origin refused: %v", err)
		}
	})
}

func TestBadFramesGetErrorsAndTheSocketStaysOpen(t *testing.T) {
	st := newStack(t, nil)
	cl := st.connect()
	cases := []struct {
		frame string
		code  string
	}{
		{`not json`, "bad_frame"},
		{`[1,2]`, "bad_frame"},
		{`{"type":"warp.drive","req":"q"}`, "unknown_type"},
		{`{"req":"q"}`, "bad_frame"},
		{`{"type":"message.send","chat":"c_x","req":"q"}`, "bad_frame"},
		{`{"type":"message.send","chat":"c_x","text":5,"client_id":"k","req":"q"}`, "bad_frame"},
		{`{"type":"message.send","chat":"c_nope","text":"hi","client_id":"k","req":"q"}`, "not_found"},
		{`{"type":"chat.open","chat":"c_nope","req":"q"}`, "not_found"},
		{`{"type":"turn.stop","chat":"c_nope","req":"q"}`, "not_found"},
	}
	for _, tc := range cases {
		if err := cl.c.WriteMessage(websocket.TextMessage, []byte(tc.frame)); err != nil {
			t.Fatal(err)
		}
		e := cl.expect("error")
		if e["code"] != tc.code || e["message"] == "" {
			t.Errorf("%s: got %v, want code %s", tc.frame, e, tc.code)
		}
		if strings.Contains(tc.frame, `"req"`) && e["req"] != "q" {
			t.Errorf("%s: req not echoed: %v", tc.frame, e)
		}
	}
	// Still open and working.
	cl.send(map[string]any{"type": "chat.create", "title": "after errors", "req": "ok"})
	if c := cl.expect("chat.created"); c["req"] != "ok" {
		t.Fatalf("%v", c)
	}
}

func TestOversizedFrameCloses1009(t *testing.T) {
	st := newStack(t, nil)
	cl := st.connect()
	big := `{"type":"hello","client":"` + strings.Repeat("x", 1<<20) + `"}`
	_ = cl.c.WriteMessage(websocket.TextMessage, []byte(big))
	if code := cl.closeCode(); code != websocket.CloseMessageTooBig {
		t.Fatalf("close %d, want 1009", code)
	}
}

func TestChatOverWebSocket(t *testing.T) {
	st := newStack(t, nil)
	cl := st.connect()
	other := st.connect() // watches the chat list only
	cl.send(map[string]any{"type": "chat.create", "title": "Plans", "req": "1"})
	created := cl.expect("chat.created")
	chat := created["chat"].(map[string]any)
	id := chat["id"].(string)
	if chat["title"] != "Plans" || created["req"] != "1" {
		t.Fatalf("%v", created)
	}
	if o := other.expect("chat.created"); o["chat"].(map[string]any)["id"] != id {
		t.Fatalf("other socket: %v", o)
	}
	cl.send(map[string]any{"type": "chat.open", "chat": id, "req": "2"})
	snap := cl.expect("chat.snapshot")
	if snap["req"] != "2" || snap["running"] != nil || len(snap["pending"].([]any)) != 0 {
		t.Fatalf("snapshot %v", snap)
	}
	cl.send(map[string]any{"type": "message.send", "chat": id, "text": "hello there", "client_id": "k1", "req": "3"})
	acc := cl.expect("message.accepted")
	if acc["req"] != "3" || acc["message"].(map[string]any)["text"] != "hello there" {
		t.Fatalf("accepted %v", acc)
	}
	cl.expect("message.picked")
	cl.expect("turn.started")
	fin := cl.expect("turn.finished")
	if !strings.Contains(fin["reply"].(string), "hello there") {
		t.Fatalf("builtin reply does not echo: %v", fin["reply"])
	}
	if up := other.expect("chat.updated"); up["chat"].(map[string]any)["id"] != id {
		t.Fatalf("list update %v", up)
	}

	// Resume from the accepted event on a new socket: exactly what came after.
	seq := acc["seq"].(float64)
	again := st.connect()
	again.send(map[string]any{"type": "chat.open", "chat": id, "since": seq, "req": "4"})
	for _, typ := range []string{"message.picked", "turn.started", "turn.finished"} {
		ev := again.expect(typ)
		if ev["seq"].(float64) <= seq {
			t.Fatalf("%s seq %v not after %v", typ, ev["seq"], seq)
		}
		seq = ev["seq"].(float64)
	}
	if res := again.expect("chat.resumed"); res["seq"].(float64) != seq || res["req"] != "4" {
		t.Fatalf("resumed %v", res)
	}

	// The chat list over HTTP shows it.
	req, _ := http.NewRequest("GET", st.http.URL+"/api/chats", nil)
	req.Header = bearer()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Chats []map[string]any `json:"chats"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Chats) != 1 || list.Chats[0]["id"] != id || list.Chats[0]["state"] != "idle" {
		t.Fatalf("api/chats %v %v", list, err)
	}
}
