package telegram

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/monitor"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
	"github.com/mirror-gateway/mirror/runtime/provider/openai"
	"github.com/mirror-gateway/mirror/runtime/quota"
	"github.com/mirror-gateway/mirror/runtime/tools"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
)

// bleve (chats/search) starts its analysis workers at init, for the
// life of the process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"))
}

const botToken = "123456:TEST-secret-token"

// Test pacing: the bot spaces a chat's sends 70ms apart; the fake refuses
// closer than 45ms (network jitter under -race eats into the margin).
const (
	testChatInterval = 70 * time.Millisecond
	fakeInterval     = 50 * time.Millisecond
	testGlobalRate   = 200
	fakeGlobal       = 250
)

type stack struct {
	t     testing.TB
	cfg   *config.Config
	svc   *chats.Service
	store *chats.Store
	db    *bolt.DB
	fake  *fakeAPI
	bot   *Bot
	mon   *monitor.Monitor
	so    stackOpts
	path  string
	// blobDir holds the attachments (data_dir/blobs).
	blobDir string
	now     time.Time
	nowMu   sync.Mutex
}

// stackOpts say how a test stack is built; the zero value of a field is the
// default.
type stackOpts struct {
	delay    time.Duration // the builtin model's delay between pieces
	mutate   func(*config.Config)
	interval time.Duration
	global   int
	fake     *fakeAPI
	// model replaces the builtin model of the default chain.
	model provider.Provider
	// thresholds, when set, give the bot a Monitor (a Telegram breaker).
	thresholds *monitor.Thresholds
	log        *slog.Logger
	// prep runs on each new Bot before Start (a fake clock, a command seam).
	prep func(*Bot)
	// quota, when set, is the engine's quota Book.
	quota *quota.Book
	// sources add tools to the registry (MCP servers).
	sources []tools.Source
	// leader and offsets make the bot a cluster node's (cluster.go);
	// client, when set, makes its Bot API requests.
	leader  Leader
	offsets Offsets
	replica Replica
	client  *http.Client
	// stt, when set, is the base URL of an OpenAI-compatible
	// /audio/transcriptions server the engine's transcribe role asks (its
	// chat model: model, else the builtin one).
	stt string
}

func newStack(t testing.TB, delay time.Duration, mutate func(*config.Config), interval time.Duration, global int, fake *fakeAPI) *stack {
	t.Helper()
	return newStackWith(t, stackOpts{delay: delay, mutate: mutate, interval: interval, global: global, fake: fake})
}

func newStackWith(t testing.TB, so stackOpts) *stack {
	t.Helper()
	if so.interval == 0 {
		so.interval, so.global = testChatInterval, testGlobalRate
	}
	if so.fake == nil {
		so.fake = newFake(t, fakeInterval, fakeGlobal)
	}
	cfg := config.Default()
	cfg.Providers[0].Delay = &so.delay
	cfg.Telegram.Enabled = true
	cfg.Telegram.AllowedUsers = []int64{111}
	if so.mutate != nil {
		so.mutate(cfg)
	}
	cfg.Tools.Workspace = filepath.Join(t.TempDir(), "workspace")
	cfg.Telegram.APIEndpoint = so.fake.endpoint()
	st := &stack{t: t, cfg: cfg, fake: so.fake, so: so, now: time.Now(), path: filepath.Join(t.TempDir(), "mirror.db")}
	st.open(t)
	t.Cleanup(func() {
		if st.bot != nil {
			st.bot.Close()
		}
		st.closeService()
	})
	st.bot = st.start(t, so.interval, so.global)
	return st
}

// open opens the database and the chats service (and the monitor).
func (st *stack) open(t testing.TB) {
	t.Helper()
	db, err := chats.OpenDB(st.path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	store, err := chats.NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	var eng *runtime.Engine
	if st.so.stt != "" {
		var chat provider.Provider = builtin.New(*st.cfg.Providers[0].Delay)
		if st.so.model != nil {
			chat = st.so.model
		}
		eng, err = runtime.NewEngine([]*runtime.Model{
			{Name: "m", ProvName: "builtin", ProvKind: config.KindBuiltin, Provider: chat, Remote: "echo", Window: 128000},
			{Name: "stt", ProvName: "whisper", ProvKind: config.KindOpenAI, Provider: openai.New(openai.Config{Name: "whisper", BaseURL: st.so.stt}), Remote: "whisper-1", Window: 8192},
		}, map[string][]string{"default": {"m"}, "stt": {"stt"}}, config.Roles{Chat: "default", Reflect: "default", Transcribe: "stt"}, 8)
	} else if st.so.model != nil {
		eng, err = runtime.NewEngine([]*runtime.Model{{Name: "m", Provider: st.so.model, Remote: "fake", Window: 128000}},
			map[string][]string{"default": {"m"}}, config.Roles{Chat: "default", Reflect: "default"}, 8)
	} else {
		eng, err = runtime.New(st.cfg, func(string) string { return "" })
	}
	if err != nil {
		t.Fatal(err)
	}
	topt := tools.OptionsFrom(st.cfg, nil)
	topt.Sources = st.so.sources
	reg, err := tools.New(topt)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Provision(runtime.Options{Tools: reg, Quota: st.so.quota}); err != nil {
		t.Fatal(err)
	}
	if st.so.thresholds != nil {
		if st.mon, err = monitor.Open(db, st.cfg, monitor.Options{Thresholds: *st.so.thresholds}); err != nil {
			t.Fatal(err)
		}
	}
	st.db, st.store = db, store
	if st.blobDir == "" {
		// Kept across a crash's copy of the database, as the data dir is.
		st.blobDir = filepath.Dir(st.path)
	}
	at := st.cfg.Attachments
	blobs, err := chats.OpenBlobs(st.blobDir, chats.BlobLimits{Image: at.MaxImageBytes, Document: at.MaxDocumentBytes, Audio: at.MaxAudioBytes}, at.UnreferencedTTL)
	if err != nil {
		t.Fatal(err)
	}
	// People as a gateway keeps them: allowed_users speak for the first
	// owner, an approved pairing links its user to a member.
	folks, err := people.Open(db, "")
	if err != nil {
		t.Fatal(err)
	}
	st.svc = chats.New(chats.Options{Store: store, Turner: eng, Blobs: blobs, People: folks})
}

func (st *stack) closeService() {
	if st.svc == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st.svc.Close(ctx)
	if st.mon != nil {
		st.mon.Close()
	}
	st.store.Close()
	st.db.Close()
	st.svc = nil
}

// restart stops the bot and the chats service as a shutdown does, opens
// the same database again and starts a new bot on it.
func (st *stack) restart(t testing.TB) {
	t.Helper()
	st.bot.Close()
	st.bot = nil
	st.closeService()
	st.open(t)
	if _, err := st.svc.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	st.bot = st.start(t, st.so.interval, st.so.global)
}

func (st *stack) clock() time.Time {
	st.nowMu.Lock()
	defer st.nowMu.Unlock()
	return st.now
}

func (st *stack) start(t testing.TB, interval time.Duration, global int) *Bot {
	t.Helper()
	b, err := New(context.Background(), Options{Config: st.cfg, Token: botToken, Chats: st.svc, Store: st.store,
		ChatInterval: interval, GlobalRate: global, PollTimeout: 10 * time.Second, Now: st.clock, WebhookSecret: "s3cret",
		Monitor: st.mon, Log: st.so.log, Leader: st.so.leader, Offsets: st.so.offsets, Replica: st.so.replica, HTTPClient: st.so.client})
	if err != nil {
		t.Fatal(err)
	}
	if st.so.prep != nil {
		st.so.prep(b)
	}
	if err := b.Start(context.Background()); err != nil {
		b.Close()
		t.Fatal(err)
	}
	return b
}

func testStack(t *testing.T, delay time.Duration, mutate func(*config.Config)) *stack {
	return newStack(t, delay, mutate, testChatInterval, testGlobalRate, newFake(t, fakeInterval, fakeGlobal))
}

// reply returns the stored final reply of the chat's last turn.
func (st *stack) lastReply(t *testing.T, chat string) string {
	t.Helper()
	var sn *chats.Snapshot
	got := make(chan *chats.Snapshot, 1)
	sub := &subFunc{f: func(d chats.Delivery) {
		if d.Snapshot != nil {
			select {
			case got <- d.Snapshot:
			default:
			}
		}
	}}
	ctx := context.Background()
	if err := st.svc.Open(ctx, chat, nil, sub, ""); err != nil {
		t.Fatal(err)
	}
	_ = st.svc.Unsubscribe(ctx, chat, sub)
	sn = <-got
	for i := len(sn.Messages) - 1; i >= 0; i-- {
		if sn.Messages[i].Role == "assistant" && sn.Messages[i].State == chats.MsgDone {
			return sn.Messages[i].Text
		}
	}
	t.Fatal("no reply stored")
	return ""
}

type subFunc struct{ f func(chats.Delivery) }

func (s *subFunc) Deliver(d chats.Delivery) { s.f(d) }

func (st *stack) idle(_ testing.TB, chat string) bool {
	c, err := st.svc.Get(context.Background(), chat)
	return err == nil && c.State == chats.StateIdle && c.Pending == 0
}

// waitReply waits until chat tg shows the final reply of its current chat
// and returns that chat's id.
func (st *stack) waitReply(t *testing.T, tg int64, sub string) string {
	t.Helper()
	st.fake.waitFor("reply containing "+sub, func() bool { return st.fake.hasTextLocked(tg, sub) })
	chat := st.bot.currentChat(tg)
	var want string
	st.fake.waitFor("final text in chat", func() bool {
		st.fake.mu.Unlock()
		ok := st.idle(t, chat)
		if ok {
			want, _ = visible(render(st.lastReply(t, chat)))
		}
		st.fake.mu.Lock()
		return ok && st.fake.msgWithLocked(tg, want) != nil && st.fake.msgWithLocked(tg, want).Text == want
	})
	return chat
}

func count(texts []string, sub string) int {
	n := 0
	for _, s := range texts {
		if strings.Contains(s, sub) {
			n++
		}
	}
	return n
}

func TestDMConversation(t *testing.T) {
	st := testStack(t, time.Millisecond, nil)
	st.fake.pushText(111, 111, "hello there")
	chat := st.waitReply(t, 111, "You said")
	if n := count(st.fake.texts(111), "You said"); n != 1 {
		t.Fatalf("reply in %d messages, want 1: %q", n, st.fake.texts(111))
	}
	// The chat is the browser's too.
	list, _ := st.svc.List(context.Background())
	if len(list) != 1 || list[0].ID != chat {
		t.Fatalf("chats = %+v", list)
	}
	if st.fake.n429 != 0 {
		t.Fatalf("%d 429s", st.fake.n429)
	}
}

// cmdSeam records the texts the bot hands to the chats service's Command.
// /changes goes through to the real Command; anything else is answered
// "cmd: TEXT" here, so the tests do not depend on which commands chats
// knows yet.
type cmdSeam struct {
	mu    sync.Mutex
	texts []string
}

func (c *cmdSeam) install(b *Bot) {
	real := b.runCmd
	b.runCmd = func(ctx context.Context, chat, text string, o chats.Origin) (string, error) {
		c.mu.Lock()
		c.texts = append(c.texts, text)
		c.mu.Unlock()
		if strings.HasPrefix(text, "/changes") {
			return real(ctx, chat, text, o)
		}
		return "cmd: " + text, nil
	}
}

func (c *cmdSeam) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.texts...)
}

func TestCommands(t *testing.T) {
	seam := &cmdSeam{}
	st := newStackWith(t, stackOpts{delay: time.Millisecond, prep: seam.install})
	st.fake.pushText(111, 111, "hi")
	first := st.waitReply(t, 111, "You said")
	for _, tc := range []struct{ cmd, want, handed string }{
		{"/status", "cmd: /status", "/status"},
		{"/compact keep the plan", "cmd: /compact keep the plan", "/compact keep the plan"},
		{"/changes", "No file tools are configured", "/changes"},
		{"/pin", "Send /pin as a reply", ""},
		{"/new Second", "New chat: Second", ""},
		{"/stop", "Nothing is running", ""},
		{"/chats", "Tap one to switch", ""},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			before := len(seam.got())
			st.fake.pushText(111, 111, tc.cmd)
			st.fake.waitFor(tc.want, func() bool { return st.fake.hasTextLocked(111, tc.want) })
			got := seam.got()[before:]
			switch {
			case tc.handed == "" && len(got) != 0:
				t.Fatalf("Command got %q", got)
			case tc.handed != "" && (len(got) != 1 || got[0] != tc.handed):
				t.Fatalf("Command got %q, want %q", got, tc.handed)
			}
		})
	}
	st.fake.mu.Lock()
	status := st.fake.msgWithLocked(111, "cmd: /status").Text
	st.fake.mu.Unlock()
	if !strings.Contains(status, "Pending: 0") {
		t.Fatalf("/status shows %q, want the chat's state and Command's answer", status)
	}
	if cur := st.bot.currentChat(111); cur == first {
		t.Fatal("/new did not switch")
	}
	// Switch back with the /chats button.
	st.fake.mu.Lock()
	kb := st.fake.msgWithLocked(111, "Tap one").Markup
	st.fake.mu.Unlock()
	if !strings.Contains(kb, "c:"+first) {
		t.Fatalf("keyboard %s lacks %s", kb, first)
	}
	st.fake.pushCallback(111, 111, 1, "c:"+first)
	st.fake.waitFor("switched", func() bool { return st.fake.hasTextLocked(111, "Now in chat") })
	if cur := st.bot.currentChat(111); cur != first {
		t.Fatalf("current %s, want %s", cur, first)
	}
}

func TestManyChatsNoFloods(t *testing.T) {
	st := testStack(t, time.Millisecond, func(c *config.Config) {
		for i := int64(0); i < 50; i++ {
			c.Telegram.AllowedUsers = append(c.Telegram.AllowedUsers, 5000+i)
		}
	})
	for i := int64(0); i < 50; i++ {
		st.fake.pushText(5000+i, 5000+i, "markdown please")
	}
	for i := int64(0); i < 50; i++ {
		st.waitReply(t, 5000+i, "You said")
	}
	if st.fake.n429 != 0 {
		t.Fatalf("%d 429s", st.fake.n429)
	}
}

func TestRestartMidReply(t *testing.T) {
	fake := newFake(t, fakeInterval, fakeGlobal)
	st := newStack(t, 15*time.Millisecond, nil, testChatInterval, testGlobalRate, fake)
	fake.pushText(111, 111, "long please")
	fake.mu.Lock()
	id := fake.nextUpdate
	fake.mu.Unlock()
	fake.waitFor("partial reply", func() bool { return fake.hasTextLocked(111, "Here is a longer answer") })
	st.bot.Close()
	chat := st.bot.currentChat(111)
	if st.idle(t, chat) {
		t.Log("the turn finished before the restart; the replay path is tested instead")
	}
	st.bot = st.start(t, testChatInterval, testGlobalRate)
	st.waitReply(t, 111, "Here is a longer answer")
	if n := count(fake.texts(111), "Here is a longer answer"); n != 1 {
		t.Fatalf("reply in %d messages, want 1", n)
	}
	fake.mu.Lock()
	last := fake.offsets[len(fake.offsets)-1]
	fake.mu.Unlock()
	if last != id+1 {
		t.Fatalf("after restart getUpdates offset %d, want %d", last, id+1)
	}
	// A third start with everything landed sends nothing new.
	st.bot.Close()
	before := len(fake.texts(111))
	st.bot = st.start(t, testChatInterval, testGlobalRate)
	fake.waitFor("poll", func() bool { return len(fake.offsets) >= 3 })
	st.bot.Close()
	if after := len(fake.texts(111)); after != before {
		t.Fatalf("restart sent %d more messages", after-before)
	}
	st.bot = nil
}

var codeRE = regexp.MustCompile(`pairing code is ([A-Z0-9]{8})`)

func TestPairing(t *testing.T) {
	st := testStack(t, time.Millisecond, nil)
	st.fake.pushText(222, 222, "let me in")
	st.fake.waitFor("pairing code", func() bool { return st.fake.hasTextLocked(222, "pairing code") })
	m := codeRE.FindStringSubmatch(strings.Join(st.fake.texts(222), "\n"))
	if m == nil {
		t.Fatal("no code")
	}
	if list, _ := st.svc.List(context.Background()); len(list) != 0 {
		t.Fatal("an unpaired user made a chat")
	}
	h := st.bot.PairingHandler()
	do := func(method, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec.Code, rec.Body.String()
	}
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/api/telegram/pairing", 200, m[1]},
		{"POST", "/api/telegram/pairing/NOPE2345/approve", 404, "no such pairing code"},
		{"POST", "/api/telegram/pairing/" + strings.ToLower(m[1]) + "/approve", 200, `"user":222`},
		{"POST", "/api/telegram/pairing/" + m[1] + "/approve", 404, "no such pairing code"},
		{"GET", "/api/telegram/pairing", 200, `"pairings":[]`},
	} {
		code, body := do(tc.method, tc.path)
		if code != tc.code || !strings.Contains(body, tc.body) {
			t.Fatalf("%s %s = %d %s; want %d %s", tc.method, tc.path, code, body, tc.code, tc.body)
		}
	}
	st.fake.waitFor("access message", func() bool { return st.fake.hasTextLocked(222, "You have access now") })
	st.fake.pushText(222, 222, "hello")
	st.waitReply(t, 222, "You said")

	// A code expires after an hour.
	st.fake.pushText(333, 333, "me too")
	st.fake.waitFor("second code", func() bool { return st.fake.hasTextLocked(333, "pairing code") })
	code := codeRE.FindStringSubmatch(strings.Join(st.fake.texts(333), "\n"))[1]
	st.nowMu.Lock()
	st.now = st.now.Add(PairingTTL + time.Minute)
	st.nowMu.Unlock()
	if _, err := ApprovePairing(st.db, code, "", st.clock()); err == nil {
		t.Fatal("expired code approved")
	}
}

func TestEditQueuedMessage(t *testing.T) {
	st := testStack(t, 10*time.Millisecond, nil)
	st.fake.pushText(111, 111, "long please")
	st.fake.waitFor("streaming", func() bool { return st.fake.hasTextLocked(111, "Here is a longer") })
	second := st.fake.pushText(111, 111, "second")
	st.fake.waitFor("queued ack", func() bool { return st.fake.hasTextLocked(111, "Queued") })
	st.fake.pushEdit(111, 111, second, "second, edited")
	st.fake.waitFor("edit answer", func() bool {
		return st.fake.hasTextLocked(111, "Updated the queued message") || st.fake.hasTextLocked(111, "Already in use")
	})
	if st.fake.hasTextLocked(111, "Already in use") {
		t.Skip("the first reply ended before the edit; cannot test the pending edit on this machine")
	}
	st.fake.waitFor("picked", func() bool { return st.fake.hasTextLocked(111, "Picked up") })
	st.fake.pushEdit(111, 111, second, "too late")
	st.fake.waitFor("in use", func() bool { return st.fake.hasTextLocked(111, "Already in use") })
	chat := st.bot.currentChat(111)
	st.fake.waitFor("idle", func() bool {
		st.fake.mu.Unlock()
		defer st.fake.mu.Lock()
		return st.idle(t, chat)
	})
	if r := st.lastReply(t, chat); !strings.Contains(r, "second, edited") {
		t.Fatalf("the model read %q, want the edited text", r)
	}
}

func TestApprovalFromOtherChat(t *testing.T) {
	st := testStack(t, time.Millisecond, nil)
	st.fake.pushText(111, 111, `/tool shell {"command":"echo hi"}`)
	st.fake.waitFor("approval", func() bool { return st.fake.hasTextLocked(111, "wants to run shell") })
	first := st.bot.currentChat(111)
	st.fake.pushText(111, 111, "/new Elsewhere")
	st.fake.waitFor("new chat", func() bool { return st.fake.hasTextLocked(111, "New chat: Elsewhere") })
	st.fake.mu.Lock()
	ask := st.fake.msgWithLocked(111, "wants to run shell")
	st.fake.mu.Unlock()
	var kb struct {
		Rows [][]struct {
			Data string `json:"callback_data"`
		} `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(ask.Markup), &kb); err != nil || !strings.HasPrefix(kb.Rows[0][0].Data, "y:a_"+first) {
		t.Fatalf("markup %s", ask.Markup)
	}
	st.fake.pushCallback(111, 111, ask.ID, kb.Rows[0][0].Data)
	st.fake.waitFor("allowed", func() bool { return st.fake.hasTextLocked(111, "Allowed.") })
	st.fake.waitFor("answered", func() bool { return len(st.fake.answers) > 0 && st.fake.answers[0] == "Allowed." })
	st.fake.waitFor("first chat idle", func() bool {
		st.fake.mu.Unlock()
		defer st.fake.mu.Lock()
		return st.idle(t, first)
	})
	reply, _ := visible(render(st.lastReply(t, first)))
	st.fake.waitFor("the other chat's reply", func() bool { return st.fake.hasTextLocked(111, reply) })
	// An answer to an approval that no longer waits is told so.
	st.fake.pushCallback(111, 111, ask.ID, kb.Rows[0][0].Data)
	st.fake.waitFor("expired answer", func() bool {
		return len(st.fake.answers) > 1 && strings.Contains(st.fake.answers[1], "no longer waiting")
	})
}

func TestWebhookSecret(t *testing.T) {
	st := testStack(t, time.Millisecond, func(c *config.Config) {
		c.Telegram.Mode = config.ModeWebhook
		c.Telegram.WebhookURL = "https://bot.example.com/telegram/webhook"
	})
	st.fake.waitFor("setWebhook", func() bool { return st.fake.webhook != nil })
	if st.fake.webhook["secret"] != "s3cret" || st.fake.calls["getUpdates"] != 0 {
		t.Fatalf("webhook %v, getUpdates %d", st.fake.webhook, st.fake.calls["getUpdates"])
	}
	h := st.bot.WebhookHandler()
	update := `{"update_id":7,"message":{"message_id":1,"from":{"id":111,"is_bot":false,"first_name":"A"},"chat":{"id":111,"type":"private"},"date":1,"text":"hello"}}`
	for _, tc := range []struct {
		secret string
		code   int
	}{{"", 401}, {"wrong", 401}, {"s3cret", 200}, {"s3cret", 200}} {
		req := httptest.NewRequest("POST", "/telegram/webhook", strings.NewReader(update))
		if tc.secret != "" {
			req.Header.Set(SecretHeader, tc.secret)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Fatalf("secret %q: %d, want %d", tc.secret, rec.Code, tc.code)
		}
	}
	st.waitReply(t, 111, "You said")
	if n := count(st.fake.texts(111), "You said"); n != 1 {
		t.Fatalf("a repeated webhook update made %d replies", n)
	}
}

func TestTokenRedacted(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens: the transport error names the URL
	cfg := config.Default()
	cfg.Telegram.APIEndpoint = url + "/bot%s/%s"
	db, err := chats.OpenDB(filepath.Join(t.TempDir(), "m.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store, _ := chats.NewStore(db)
	defer store.Close()
	_, err = New(context.Background(), Options{Config: cfg, Token: botToken, Chats: chats.New(chats.Options{Store: store}), Store: store})
	if err == nil || strings.Contains(err.Error(), botToken) || !strings.Contains(err.Error(), "<bot-token>") {
		t.Fatalf("err = %v", err)
	}
}

func TestRenderAndSplit(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a < b & c", "a &lt; b &amp; c"},
		{"**bold** and *it*", "<b>bold</b> and <i>it</i>"},
		{"`x<y`", "<code>x&lt;y</code>"},
		{"**unclosed", "**unclosed"},
		{"# Title", "<b>Title</b>"},
		{"[go](https://go.dev)", `<a href="https://go.dev">go</a>`},
		{"```go\nfmt.Println(1<2)\n```", `<pre><code class="language-go">fmt.Println(1&lt;2)</code></pre>`},
		{"```\nstill streaming", "<pre><code>still streaming</code></pre>"},
	} {
		if got := render(tc.in); got != tc.want {
			t.Errorf("render(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if _, ok := visible(render(tc.in)); !ok {
			t.Errorf("render(%q) is not valid Telegram HTML", tc.in)
		}
	}
	para := strings.Repeat("word ", 500) // 2500 chars
	text := para + "\n\n" + para + "\n\n" + para
	parts := split(text, MaxMessage)
	if len(parts) != 3 || !strings.HasSuffix(parts[0], "word") || utf16Len(parts[0]) > MaxMessage {
		t.Fatalf("split into %d parts, first %d units", len(parts), utf16Len(parts[0]))
	}
	if p2 := split(text+" more", MaxMessage); p2[0] != parts[0] {
		t.Fatal("an earlier part changed as the text grew")
	}
	emoji := strings.Repeat("😀", 3000) // 6000 UTF-16 units, no break
	for _, p := range split(emoji, MaxMessage) {
		if utf16Len(p) > MaxMessage {
			t.Fatalf("part of %d units", utf16Len(p))
		}
	}
}
