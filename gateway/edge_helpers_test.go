package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/mirror-gateway/mirror/monitor"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/config/datadir"
	"github.com/mirror-gateway/mirror/gateway/limit"
	"github.com/mirror-gateway/mirror/gateway/telegram"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/tools"
	bolt "go.etcd.io/bbolt"
)

// edge is a whole gateway served by the http.Server HTTPServer returns (the
// one `mirror serve` runs), with the runtime's model settings, optionally a
// Telegram bot in webhook mode on a fake Bot API, every request and its
// answer recorded, and the log kept.
type edge struct {
	*stack
	cfg *config.Config
	tg  *telegram.Bot
	// sent receives the text of every sendMessage the bot made.
	sent chan string
	seen *seenLog
	// people and dataDir are set with edgeOpts.people.
	people  *people.Registry
	dataDir string
	logs    *syncBuffer
	// mon is the monitor of the people stack (nil without people).
	mon *monitor.Monitor
}

const webhookSecret = "webhook-secret-0123456789"

type edgeOpts struct {
	mutate   func(*config.Config)
	telegram bool
	// chatsOpt changes the chats service's options.
	chatsOpt func(*chats.Options)
	// model, when set, answers every chat (a fake OpenAI server).
	model *heldModel
	// people keeps people (the test token is the first owner's), with a
	// data dir for memory notes and a replay route.
	people bool
	// now is the gateway's clock of message rates (nil: time.Now).
	now func() time.Time
}

func newEdge(t *testing.T, o edgeOpts) *edge {
	t.Helper()
	cfg := config.Default()
	zero := time.Duration(0)
	cfg.Providers[0].Delay = &zero
	if o.mutate != nil {
		o.mutate(cfg)
	}
	if o.model != nil {
		cfg.Providers = append(cfg.Providers, config.Provider{Name: "fake", Kind: "openai", BaseURL: o.model.srv.URL + "/v1"})
		cfg.Models[0].Provider, cfg.Models[0].Model = "fake", "fake-model"
	}
	db, store, eng := openStack(t, cfg)
	cfg.Tools.Workspace = filepath.Join(t.TempDir(), "workspace")
	reg, err := tools.New(tools.OptionsFrom(cfg, nil))
	if err != nil {
		t.Fatal(err)
	}
	copt := chats.Options{Store: store, Turner: eng, MaxPending: cfg.Limits.PendingPerChat}
	var folks *people.Registry
	var dataDir string
	var replay func(io.Writer, string) error
	if o.people {
		if folks, err = people.Open(db, testToken); err != nil {
			t.Fatal(err)
		}
		copt.People = folks
		if dataDir, err = datadir.Prepare(filepath.Join(t.TempDir(), "data")); err != nil {
			t.Fatal(err)
		}
		at := cfg.Attachments
		if copt.Blobs, err = chats.OpenBlobs(dataDir, chats.BlobLimits{Image: at.MaxImageBytes, Document: at.MaxDocumentBytes, Audio: at.MaxAudioBytes}, at.UnreferencedTTL); err != nil {
			t.Fatal(err)
		}
		replay = func(w io.Writer, chat string) error { _, err := fmt.Fprintf(w, "replay of %s\n", chat); return err }
		copt.DataDir = dataDir // memory notes: recall_memory reads them
	}
	// With people the engine keeps memory in the data dir, as serve does.
	if err := eng.Provision(runtime.Options{Tools: reg, DataDir: dataDir}); err != nil {
		t.Fatal(err)
	}
	if o.chatsOpt != nil {
		o.chatsOpt(&copt)
	}
	svc := chats.New(copt)
	e := &edge{people: folks, dataDir: dataDir, cfg: cfg, seen: &seenLog{changed: make(chan struct{}, 1)}, logs: &syncBuffer{}}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var routes []Route
	// One allowance per person across the browser and Telegram, as serve
	// wires it.
	sends := limit.Messages(cfg.Limits.MessagesPerMinute)
	if sends != nil {
		sends.Now = o.now
	}
	if o.telegram {
		e.sent = make(chan string, 100)
		api := newFakeBotAPI(t, e.sent)
		cfg.Telegram.Enabled, cfg.Telegram.Mode = true, config.ModeWebhook
		cfg.Telegram.APIEndpoint = api.URL + "/bot%s/%s"
		cfg.Telegram.WebhookURL = "https://bot.example.com/telegram/webhook"
		e.tg, err = telegram.New(context.Background(), telegram.Options{Config: cfg, Token: "123:bot-token", WebhookSecret: webhookSecret,
			Chats: svc, Store: store, Log: log, ChatInterval: time.Millisecond, GlobalRate: 1000, Sends: sends})
		if err != nil {
			t.Fatal(err)
		}
		routes = append(routes, Route{Pattern: "/api/telegram/", Handler: e.tg.PairingHandler(), Private: true, Owner: true},
			Route{Pattern: "POST " + e.tg.WebhookPath(), Handler: e.tg.WebhookHandler()})
	}
	st := &stack{t: t, svc: svc, store: store}
	var mon *monitor.Monitor
	if o.people { // the people tables reach the monitor's routes too
		if mon, err = monitor.Open(db, cfg, monitor.Options{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mon.Close() })
	}
	st.http = httptest.NewUnstartedServer(nil)
	st.srv = New(Options{Config: cfg, Chats: svc, Token: testToken, Addr: st.http.Listener.Addr().String(),
		Models: eng, Routes: routes, Log: log, People: folks, DataDir: dataDir, Replay: replay, Monitor: mon, Now: o.now, Sends: sends})
	e.mon = mon
	hs := st.srv.HTTPServer(nil)
	inner := hs.Handler
	hs.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusWriter{ResponseWriter: w}
		_, cookie := r.Cookie(CookieName)
		inner.ServeHTTP(rec, r)
		e.seen.add(seen{Method: r.Method, Path: r.URL.Path, Status: rec.status(), Cookie: cookie == nil,
			Origin: r.Header.Get("Origin"), Bearer: strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ")})
	})
	st.http.Config = hs
	st.http.Start()
	e.stack = st
	t.Cleanup(func() {
		st.http.Close()
		st.srv.Close()
		if e.tg != nil {
			e.tg.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		svc.Close(ctx)
		store.Close()
		db.Close()
	})
	return e
}

// statusWriter remembers the status a handler answered with; it unwraps,
// so WebSockets and streams work through it.
type statusWriter struct {
	http.ResponseWriter
	mu   sync.Mutex
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.mu.Lock()
	if w.code == 0 {
		w.code = code
	}
	w.mu.Unlock()
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.mu.Unlock()
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// seen is one request the server answered.
type seen struct {
	Method, Path, Origin string
	Status               int
	Cookie, Bearer       bool
}

type seenLog struct {
	mu      sync.Mutex
	all     []seen
	changed chan struct{}
}

func (l *seenLog) add(s seen) {
	l.mu.Lock()
	l.all = append(l.all, s)
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// since returns the requests from index i on.
func (l *seenLog) since(i int) []seen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]seen(nil), l.all[min(i, len(l.all)):]...)
}

func (l *seenLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

// waitFor waits, bounded, until done holds for the requests from index i on.
func (l *seenLog) waitFor(t *testing.T, i int, what string, done func([]seen) bool) []seen {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		got := l.since(i)
		if done(got) {
			return got
		}
		select {
		case <-l.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; the server saw %+v", what, got)
		}
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// newFakeBotAPI answers the Bot API methods the pairing path calls, in the
// Bot API's wire format: getMe, setWebhook and sendMessage.
func newFakeBotAPI(t *testing.T, sent chan<- string) *httptest.Server {
	var mu sync.Mutex
	next := 100
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		method := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		w.Header().Set("Content-Type", "application/json")
		switch method {
		case "getMe":
			fmt.Fprint(w, `{"ok":true,"result":{"id":1,"is_bot":true,"first_name":"Mirror","username":"mirror_test_bot","can_join_groups":true}}`)
		case "sendMessage":
			mu.Lock()
			next++
			id := next
			mu.Unlock()
			chat, _ := strconv.ParseInt(r.Form.Get("chat_id"), 10, 64)
			select {
			case sent <- r.Form.Get("text") + markup(r.Form.Get("reply_markup")):
			default:
			}
			text, _ := json.Marshal(r.Form.Get("text"))
			fmt.Fprintf(w, `{"ok":true,"result":{"message_id":%d,"date":1700000000,"chat":{"id":%d,"type":"private"},"text":%s}}`, id, chat, text)
		default:
			fmt.Fprint(w, `{"ok":true,"result":true}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// markup is a message's buttons as sent appends them ("" when none), so
// a test sees what a keyboard offers.
func markup(m string) string {
	if m == "" {
		return ""
	}
	return "\n[buttons] " + m
}

// do sends one request to the gateway and returns its status and body.
func (e *edge) do(method, path string, header http.Header, body string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.http.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 20 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// update posts one Telegram update to the webhook.
func (e *edge) update(raw string) {
	e.t.Helper()
	if code, body := e.do("POST", e.tg.WebhookPath(), http.Header{telegram.SecretHeader: {webhookSecret}, "Content-Type": {"application/json"}}, raw); code != 200 {
		e.t.Fatalf("webhook: %d %s", code, body)
	}
}

// strangerWrites makes a Telegram user without access write to the bot
// through the webhook, and returns the pairing code they were given.
func (e *edge) strangerWrites(user int64) string {
	e.t.Helper()
	e.update(fmt.Sprintf(`{"update_id":%d,"message":{"message_id":1,"from":{"id":%d,"is_bot":false,"first_name":"Stranger"},"chat":{"id":%d,"type":"private"},"date":1700000000,"text":"let me in"}}`, user, user, user))
	for _, p := range e.pairings() {
		if p.User == user {
			return p.Code
		}
	}
	e.t.Fatalf("no pairing for user %d", user)
	return ""
}

// pairings lists the waiting pairing codes, asked with the bearer token.
func (e *edge) pairings() []telegram.Pairing {
	e.t.Helper()
	code, body := e.do("GET", "/api/telegram/pairing", bearer(), "")
	var out struct{ Pairings []telegram.Pairing }
	if code != 200 || json.Unmarshal([]byte(body), &out) != nil {
		e.t.Fatalf("pairing list: %d %s", code, body)
	}
	return out.Pairings
}

// openStack opens a fresh database under t's temp dir, its chat store, and
// a runtime engine for cfg (no environment): the base of every test stack.
func openStack(t testing.TB, cfg *config.Config) (*bolt.DB, *chats.Store, *runtime.Engine) {
	t.Helper()
	db, err := chats.OpenDB(filepath.Join(t.TempDir(), "mirror.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	store, err := chats.NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := runtime.New(cfg, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return db, store, eng
}
