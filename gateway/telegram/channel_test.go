package telegram

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/monitor"
	"github.com/mirror-gateway/mirror/runtime/provider"
	bolt "go.etcd.io/bbolt"
)

// testWait bounds every single wait of these tests.
const testWait = 20 * time.Second

// fakeClock stands in for the bot's pauses: each pause reports how long it
// would wait and returns only when the test advances the clock.
type fakeClock struct {
	waits   chan time.Duration
	release chan struct{}
}

func newFakeClock() *fakeClock {
	return &fakeClock{waits: make(chan time.Duration), release: make(chan struct{})}
}

func (c *fakeClock) pause(ctx context.Context, d time.Duration) error {
	select {
	case c.waits <- d:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-c.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next returns the wait the bot asks for next.
func (c *fakeClock) next(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-c.waits:
		return d
	case <-time.After(testWait):
		t.Fatal("the bot asked for no wait")
		return 0
	}
}

// advance ends the wait the bot is in.
func (c *fakeClock) advance(t *testing.T) {
	t.Helper()
	select {
	case c.release <- struct{}{}:
	case <-time.After(testWait):
		t.Fatal("the bot is not waiting")
	}
}

// logRec records log lines (any level) as text.
type logRec struct {
	mu    sync.Mutex
	lines []logLine
}

type logLine struct {
	level slog.Level
	text  string
}

type recHandler struct {
	rec   *logRec
	attrs string
}

func (h recHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	h.rec.mu.Lock()
	h.rec.lines = append(h.rec.lines, logLine{r.Level, b.String()})
	h.rec.mu.Unlock()
	return nil
}
func (h recHandler) WithAttrs(as []slog.Attr) slog.Handler {
	for _, a := range as {
		h.attrs += fmt.Sprintf(" %s=%v", a.Key, a.Value)
	}
	return h
}
func (h recHandler) WithGroup(string) slog.Handler { return h }

func (l *logRec) logger() *slog.Logger { return slog.New(recHandler{rec: l}) }

// count counts lines at level whose text contains sub.
func (l *logRec) count(level slog.Level, sub string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, x := range l.lines {
		if x.level == level && strings.Contains(x.text, sub) {
			n++
		}
	}
	return n
}

func (l *logRec) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, x := range l.lines {
		b.WriteString(x.text + "\n")
	}
	return b.String()
}

// noToken fails when the bot token shows in the log.
func (l *logRec) noToken(t *testing.T) {
	t.Helper()
	if all := l.all(); strings.Contains(all, botToken) || strings.Contains(all, "TEST-secret") {
		t.Fatalf("the bot token is in the log:\n%s", all)
	}
}

func telegramBreaker(st *stack) monitor.BreakerView { return st.mon.Telegram().View() }

// pollingBreaker is the breaker of getUpdates, apart from sending.
func pollingBreaker(st *stack) monitor.BreakerView { return st.mon.TelegramPolling().View() }

// TestPollConflictBacksOff: a 409 Conflict from getUpdates (another poller,
// or a webhook set) is logged once with what to do, backs off exponentially
// up to a bound, is counted by the Telegram breaker (which opens and then
// holds polling back), and polling resumes when the conflict ends.
func TestPollConflictBacksOff(t *testing.T) {
	clock, logs := newFakeClock(), &logRec{}
	fake := newFake(t, fakeInterval, fakeGlobal)
	fake.pollFail = errConflict
	st := newStackWith(t, stackOpts{delay: time.Millisecond, fake: fake, log: logs.logger(),
		thresholds: &monitor.Thresholds{Failures: 8, Cooldown: time.Hour},
		prep:       func(b *Bot) { b.pause = clock.pause }})
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute, time.Minute}
	for i, w := range want {
		if d := clock.next(t); d != w {
			t.Fatalf("wait %d: %v, want %v", i, d, w)
		}
		// One getUpdates per wait: the loop never asks again without waiting.
		if n := fake.count("getUpdates"); n != i+1 {
			t.Fatalf("after %d waits, %d getUpdates", i+1, n)
		}
		clock.advance(t)
	}
	// The eighth conflict opens the breaker; then the loop waits for its
	// cooldown (bounded) without asking Telegram at all.
	for i := 0; i < 3; i++ {
		if d := clock.next(t); d != maxBreakerWait {
			t.Fatalf("breaker wait %v, want %v", d, maxBreakerWait)
		}
		if n := fake.count("getUpdates"); n != 8 {
			t.Fatalf("%d getUpdates while the breaker is open, want 8", n)
		}
		clock.advance(t)
	}
	if v := pollingBreaker(st); v.State != monitor.StateOpen || !strings.Contains(v.Reason, "8 consecutive failures") {
		t.Fatalf("breaker %+v", v)
	}
	if v := telegramBreaker(st); v.State != monitor.StateClosed {
		t.Fatalf("a polling conflict opened the sending breaker: %+v", v)
	}
	if n := logs.count(slog.LevelError, "getUpdates conflict: another process polls this bot token"); n != 1 {
		t.Fatalf("conflict logged %d times at error, want once:\n%s", n, logs.all())
	}

	// The other instance stops; the operator resets the breaker while the
	// loop waits.
	clock.next(t)
	fake.setPollFail(nil)
	fake.pushText(111, 111, "back again")
	if _, err := st.mon.Reset(pollingBreaker(st).ID); err != nil {
		t.Fatal(err)
	}
	clock.advance(t)
	st.waitReply(t, 111, "back again")
	if n := logs.count(slog.LevelInfo, "getUpdates works again"); n != 1 {
		t.Fatalf("recovery logged %d times:\n%s", n, logs.all())
	}
	logs.noToken(t)
}

// TestBotAPIFailuresBackOffWithBreaker: when the Bot API keeps failing, the
// polling loop and the senders back off, the Telegram breaker opens, and
// while it is open nothing is asked of Telegram.
func TestBotAPIFailuresBackOffWithBreaker(t *testing.T) {
	t.Run("polling", func(t *testing.T) {
		clock, logs := newFakeClock(), &logRec{}
		fake := newFake(t, fakeInterval, fakeGlobal)
		fake.pollFail = errInternal
		st := newStackWith(t, stackOpts{delay: time.Millisecond, fake: fake, log: logs.logger(),
			thresholds: &monitor.Thresholds{Failures: 3, Cooldown: time.Hour},
			prep:       func(b *Bot) { b.pause = clock.pause }})
		for i, w := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
			if d := clock.next(t); d != w {
				t.Fatalf("wait %d: %v, want %v", i, d, w)
			}
			clock.advance(t)
		}
		for i := 0; i < 3; i++ {
			if d := clock.next(t); d != maxBreakerWait {
				t.Fatalf("breaker wait %v", d)
			}
			clock.advance(t)
		}
		if n := fake.count("getUpdates"); n != 3 {
			t.Fatalf("%d getUpdates, want 3 (then the breaker holds)", n)
		}
		if v := pollingBreaker(st); v.State != monitor.StateOpen || !strings.Contains(v.Reason, "server") {
			t.Fatalf("breaker %+v", v)
		}
		if n := logs.count(slog.LevelWarn, "Telegram breaker is open"); n != 1 {
			t.Fatalf("breaker wait logged %d times", n)
		}
		logs.noToken(t)
	})
	t.Run("sending", func(t *testing.T) {
		clock, logs := newFakeClock(), &logRec{}
		fake := newFake(t, fakeInterval, fakeGlobal)
		st := newStackWith(t, stackOpts{delay: time.Millisecond, fake: fake, log: logs.logger(),
			thresholds: &monitor.Thresholds{Failures: 3, Cooldown: time.Hour},
			mutate: func(c *config.Config) {
				c.Telegram.Mode = config.ModeWebhook
				c.Telegram.WebhookURL = "https://bot.example.com/telegram/webhook"
			},
			prep: func(b *Bot) { b.pause = clock.pause }})
		fake.mu.Lock()
		fake.sendFail = errInternal
		fake.mu.Unlock()
		req := httptest.NewRequest("POST", "/telegram/webhook", strings.NewReader(
			`{"update_id":1,"message":{"message_id":1,"from":{"id":111,"is_bot":false,"first_name":"A"},"chat":{"id":111,"type":"private"},"date":1,"text":"hello"}}`))
		req.Header.Set(SecretHeader, "s3cret")
		rec := httptest.NewRecorder()
		st.bot.WebhookHandler().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("webhook %d", rec.Code)
		}
		// Backoff first, then the breaker's cooldown (bounded by 30 s).
		d := clock.next(t)
		for i := 0; i < 10 && d < 10*time.Second; i++ {
			clock.advance(t)
			d = clock.next(t)
		}
		if d < 10*time.Second {
			t.Fatalf("the sender never waited for the breaker (last wait %v)", d)
		}
		sends := fake.count("sendMessage") + fake.count("editMessageText")
		for i := 0; i < 3; i++ {
			clock.advance(t)
			if d := clock.next(t); d < 10*time.Second {
				t.Fatalf("wait %v while the breaker is open", d)
			}
		}
		if n := fake.count("sendMessage") + fake.count("editMessageText"); n != sends || n > 5 {
			t.Fatalf("%d sends, then %d while the breaker is open", sends, n)
		}
		if v := telegramBreaker(st); v.State != monitor.StateOpen {
			t.Fatalf("breaker %+v", v)
		}
		logs.noToken(t)
	})
}

// TestTokenNeverLogged: transport errors name the URL, which holds the
// token; the log shows it redacted.
func TestTokenNeverLogged(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	clock, logs := newFakeClock(), &logRec{}
	newStackWith(t, stackOpts{log: logs.logger(), prep: func(b *Bot) {
		b.pause = clock.pause
		b.api.SetAPIEndpoint(deadURL + "/bot%s/%s") // getMe worked; now nothing listens
	}})
	clock.next(t)
	if logs.count(slog.LevelWarn, "<bot-token>") == 0 {
		t.Fatalf("no redacted transport error logged:\n%s", logs.all())
	}
	logs.noToken(t)
}

// TestGroupAddressing: in a group the bot answers only messages addressed
// to it (a mention, a command naming it, a reply to it) by an allowed user.
// Each ignored message is followed by an addressed one: updates are handled
// in order, so once the second is answered the first was passed over.
func TestGroupAddressing(t *testing.T) {
	st := testStack(t, time.Millisecond, nil)
	const group = -1001
	mention := func(name string, off int) string {
		return fmt.Sprintf(`[{"type":"mention","offset":%d,"length":%d}]`, off, len(name))
	}
	ignored := []struct {
		name string
		push func()
	}{
		{"not addressed", func() { st.fake.pushGroup(group, 111, "hello everyone", "", 0, 0) }},
		{"addressed by a user without access", func() { st.fake.pushGroup(group, 222, "@fake_bot let me in", mention("@fake_bot", 0), 0, 0) }},
		{"reply to the bot by a user without access", func() { st.fake.pushGroup(group, 222, "me too", "", 77, 42) }},
		{"another bot's command", func() {
			st.fake.pushGroup(group, 111, "/status@other_bot", `[{"type":"bot_command","offset":0,"length":17}]`, 0, 0)
		}},
		{"a longer name", func() { st.fake.pushGroup(group, 111, "@fake_botany hi", mention("@fake_botany", 0), 0, 0) }},
		{"reply to someone else", func() { st.fake.pushGroup(group, 111, "right", "", 78, 555) }},
		{"a bare command", func() { st.fake.pushGroup(group, 111, "/new", `[{"type":"bot_command","offset":0,"length":4}]`, 0, 0) }},
	}
	addressed := []struct {
		push func()
		want string
	}{
		{func() { st.fake.pushGroup(group, 111, "@fake_bot first question", mention("@fake_bot", 0), 0, 0) }, "You said: «first question»"},
		{func() { st.fake.pushGroup(group, 111, "a follow-up", "", 77, 42) }, "You said: «a follow-up»"},
		{func() { st.fake.pushGroup(group, 111, "tell me, @FAKE_BOT, more", mention("@FAKE_BOT", 9)+"", 0, 0) }, "You said: «tell me, , more»"},
		{func() {
			st.fake.pushGroup(group, 111, "/status@fake_bot", `[{"type":"bot_command","offset":0,"length":16}]`, 0, 0)
		}, "Pending: 0"},
		{func() {
			st.fake.pushGroup(group, 111, "psst @fake_bot", "", 0, 0) // no entities at all
		}, "You said: «psst»"},
		{func() {
			st.fake.pushGroup(group, 111, "direct", `[{"type":"text_mention","offset":0,"length":6,"user":{"id":42,"is_bot":true,"first_name":"Fake"}}]`, 0, 0)
		}, "You said: «direct»"},
		{func() { st.fake.pushGroup(group, 111, "last one @fake_bot", mention("@fake_bot", 9), 0, 0) }, "You said: «last one»"},
	}
	for i, ig := range ignored {
		t.Run(ig.name, func(t *testing.T) {
			before := len(st.fake.texts(group))
			ig.push()
			a := addressed[i]
			a.push()
			st.fake.waitFor(a.want, func() bool { return st.fake.hasTextLocked(group, a.want) })
			chat := st.bot.currentChat(group)
			st.fake.waitFor("idle", func() bool {
				st.fake.mu.Unlock()
				defer st.fake.mu.Lock()
				return st.idle(t, chat)
			})
			want := 1
			if i == 0 {
				want = 2 // the group's chat begins: the group is told it is shared
			}
			if n := len(st.fake.texts(group)) - before; n != want {
				t.Fatalf("%d messages in the group, want %d: %q", n, want, st.fake.texts(group)[before:])
			}
		})
	}
	// Nothing reached the user without access, not even a pairing code.
	if got := st.fake.texts(222); len(got) != 0 {
		t.Fatalf("user 222 got %q", got)
	}
	if list, _ := st.svc.List(context.Background()); len(list) != 1 {
		t.Fatalf("%d chats, want the group's one", len(list))
	}
	for _, m := range st.snapshot(t, st.bot.currentChat(group)).Messages {
		if m.Role == "user" && (strings.Contains(m.Text, "let me in") || strings.Contains(m.Text, "everyone") || strings.Contains(m.Text, "me too")) {
			t.Fatalf("an ignored message reached the chat: %q", m.Text)
		}
	}
}

// snapshot returns a chat's snapshot.
func (st *stack) snapshot(t *testing.T, chat string) *chats.Snapshot {
	t.Helper()
	got := make(chan *chats.Snapshot, 1)
	sub := &subFunc{f: func(d chats.Delivery) {
		if d.Snapshot != nil {
			select {
			case got <- d.Snapshot:
			default:
			}
		}
	}}
	if err := st.svc.Open(context.Background(), chat, nil, sub, ""); err != nil {
		t.Fatal(err)
	}
	_ = st.svc.Unsubscribe(context.Background(), chat, sub)
	select {
	case sn := <-got:
		return sn
	case <-time.After(testWait):
		t.Fatal("no snapshot")
		return nil
	}
}

// gateModel answers "partial " at once and the rest ("answer to LAST") only
// after a release, so a turn runs as long as a test needs.
type gateModel struct{ release chan struct{} }

func (g *gateModel) Stream(ctx context.Context, req provider.Request, emit func(provider.Delta) error) (provider.Result, error) {
	last := ""
	for _, m := range req.Messages {
		if m.Role == provider.RoleUser {
			last = m.Content
		}
	}
	if err := emit(provider.Delta{Text: "partial "}); err != nil {
		return provider.Result{}, err
	}
	select {
	case <-g.release:
	case <-ctx.Done():
		return provider.Result{Text: "partial "}, ctx.Err()
	}
	rest := "answer to " + last
	if err := emit(provider.Delta{Text: rest}); err != nil {
		return provider.Result{}, err
	}
	return provider.Result{Text: "partial " + rest, FinishReason: "stop"}, nil
}

// buttons returns the callback data of a message's inline keyboard.
func buttons(t *testing.T, m *fakeMsg) []string {
	t.Helper()
	var kb struct {
		Rows [][]struct {
			Data string `json:"callback_data"`
		} `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(m.Markup), &kb); err != nil {
		t.Fatalf("markup %q: %v", m.Markup, err)
	}
	var out []string
	for _, r := range kb.Rows {
		for _, b := range r {
			out = append(out, b.Data)
		}
	}
	return out
}

// ackOf waits for the "Queued" reply to Telegram message id and returns it
// with its Delete and Redirect data.
func (st *stack) ackOf(t *testing.T, tg int64, id int) (m *fakeMsg, del, redirect string) {
	t.Helper()
	st.fake.waitFor("queued reply", func() bool {
		for _, x := range st.fake.msgs[tg] {
			if x.ReplyTo == id && strings.Contains(x.Text, "Queued") {
				m = x
				return true
			}
		}
		return false
	})
	st.fake.mu.Lock()
	defer st.fake.mu.Unlock()
	b := buttons(t, m)
	if len(b) != 2 || !strings.HasPrefix(b[0], "d:") || !strings.HasPrefix(b[1], "x:") {
		t.Fatalf("buttons %q", b)
	}
	return m, b[0], b[1]
}

// press presses a button and returns the answerCallbackQuery text.
func (st *stack) press(t *testing.T, tg int64, msg int, data string) string {
	t.Helper()
	n := st.fake.answerCount()
	st.fake.pushCallback(tg, 111, msg, data)
	var ans string
	st.fake.waitFor("callback answer", func() bool {
		if len(st.fake.answers) > n {
			ans = st.fake.answers[n]
			return true
		}
		return false
	})
	return ans
}

func (st *stack) waitText(t *testing.T, tg int64, id int, sub string) {
	t.Helper()
	st.fake.waitFor(fmt.Sprintf("message %d to show %q", id, sub), func() bool {
		for _, x := range st.fake.msgs[tg] {
			if x.ID == id {
				return strings.Contains(x.Text, sub)
			}
		}
		return false
	})
}

// TestPendingRedirectAndDelete: a message sent while a turn runs is
// acknowledged with Delete and Redirect buttons. Redirect makes it a
// redirect (once, however often pressed), Delete removes it, and once the
// message is picked up both answer "already in use".
func TestPendingRedirectAndDelete(t *testing.T) {
	gate := &gateModel{release: make(chan struct{}, 10)}
	st := newStackWith(t, stackOpts{model: gate})
	st.fake.pushText(111, 111, "first")
	st.fake.waitFor("streaming", func() bool { return st.fake.hasTextLocked(111, "partial") })
	chat := st.bot.currentChat(111)

	second := st.fake.pushText(111, 111, "second")
	ack2, _, redirect2 := st.ackOf(t, 111, second)
	if ans := st.press(t, 111, ack2.ID, redirect2); !strings.HasPrefix(ans, "Redirected") {
		t.Fatalf("redirect: %q", ans)
	}
	st.waitText(t, 111, ack2.ID, "Redirected")
	// Pressed again (or handled again after a crash): still one message.
	if ans := st.press(t, 111, ack2.ID, redirect2); !strings.HasPrefix(ans, "Redirected") {
		t.Fatalf("second redirect: %q", ans)
	}
	sn := st.snapshot(t, chat)
	if len(sn.Pending) != 1 || sn.Pending[0].Mode != chats.ModeRedirect || sn.Pending[0].Text != "second" {
		t.Fatalf("pending %+v", sn.Pending)
	}
	// Editing the Telegram message now edits the redirect.
	st.fake.pushEdit(111, 111, second, "second, edited")
	st.fake.waitFor("edit applied", func() bool { return st.fake.hasTextLocked(111, "Updated the queued message") })

	third := st.fake.pushText(111, 111, "third")
	ack3, del3, _ := st.ackOf(t, 111, third)
	if ans := st.press(t, 111, ack3.ID, del3); ans != "Deleted." {
		t.Fatalf("delete: %q", ans)
	}
	st.waitText(t, 111, ack3.ID, "Deleted from the queue")
	if ans := st.press(t, 111, ack3.ID, del3); !strings.Contains(ans, "no longer queued") {
		t.Fatalf("second delete: %q", ans)
	}
	sn = st.snapshot(t, chat)
	if len(sn.Pending) != 1 || sn.Pending[0].Text != "second, edited" {
		t.Fatalf("pending after delete %+v", sn.Pending)
	}

	// The first turn ends; the second picks the redirect up. A message sent
	// now is picked up by the third.
	gate.release <- struct{}{}
	st.fake.waitFor("second turn", func() bool { return count(st.fake.textsLocked(111), "partial") >= 2 })
	fourth := st.fake.pushText(111, 111, "fourth")
	ack4, del4, redirect4 := st.ackOf(t, 111, fourth)
	gate.release <- struct{}{}
	st.waitText(t, 111, ack4.ID, "Picked up")
	for _, data := range []string{del4, redirect4, redirect2} {
		if ans := st.press(t, 111, ack4.ID, data); !strings.HasPrefix(ans, "Already in use") {
			t.Fatalf("%s after pickup: %q", data, ans)
		}
	}
	gate.release <- struct{}{}
	st.fake.waitFor("idle", func() bool {
		st.fake.mu.Unlock()
		defer st.fake.mu.Lock()
		return st.idle(t, chat)
	})
	var users []string
	for _, m := range st.snapshot(t, chat).Messages {
		if m.Role == "user" {
			users = append(users, m.Mode+":"+m.Text)
		}
	}
	if strings.Join(users, "|") != "queue:first|redirect:second, edited|queue:fourth" {
		t.Fatalf("the model read %q", users)
	}
}

// TestRecoveryFromOtherChat: a tool call cut short by a restart comes back
// as Repeat/Skip buttons; answered while the Telegram chat's current chat is
// another one, the answer still reaches the chat that owns the call, and
// its reply still arrives.
func TestRecoveryFromOtherChat(t *testing.T) {
	st := testStack(t, time.Millisecond, nil)
	st.fake.pushText(111, 111, `/tool shell {"command":"sleep 30"}`)
	st.fake.waitFor("approval", func() bool { return st.fake.hasTextLocked(111, "wants to run shell") })
	owner := st.bot.currentChat(111)
	st.fake.mu.Lock()
	ask := st.fake.msgWithLocked(111, "wants to run shell")
	allow := buttons(t, ask)[0]
	st.fake.mu.Unlock()
	if ans := st.press(t, 111, ask.ID, allow); ans != "Allowed." {
		t.Fatalf("allow: %q", ans)
	}
	// The call is journaled (tool.call) before its approval is asked, and
	// allowed now: the restart leaves it without a result.
	st.restart(t)

	st.fake.waitFor("recovery", func() bool { return st.fake.hasTextLocked(111, "The gateway stopped while shell") })
	st.fake.mu.Lock()
	rec := st.fake.msgWithLocked(111, "The gateway stopped while shell")
	b := buttons(t, rec)
	st.fake.mu.Unlock()
	if len(b) != 2 || !strings.HasPrefix(b[0], "r:r_"+owner) || !strings.HasPrefix(b[1], "s:r_"+owner) {
		t.Fatalf("buttons %q", b)
	}
	st.fake.pushText(111, 111, "/new Elsewhere")
	st.fake.waitFor("new chat", func() bool { return st.fake.hasTextLocked(111, "New chat: Elsewhere") })
	elsewhere := st.bot.currentChat(111)
	if elsewhere == owner {
		t.Fatal("/new did not switch")
	}
	if ans := st.press(t, 111, rec.ID, b[1]); ans != "Answered: skip." {
		t.Fatalf("skip: %q", ans)
	}
	st.waitText(t, 111, rec.ID, "Answered: skip.")
	st.fake.waitFor("owner idle", func() bool {
		st.fake.mu.Unlock()
		defer st.fake.mu.Lock()
		return st.idle(t, owner)
	})
	reply, _ := visible(render(st.lastReply(t, owner)))
	st.fake.waitFor("the owner's reply", func() bool { return st.fake.hasTextLocked(111, reply) })
	if cur := st.bot.currentChat(111); cur != elsewhere {
		t.Fatalf("current chat %s, want %s", cur, elsewhere)
	}
	if ans := st.press(t, 111, rec.ID, b[0]); !strings.Contains(ans, "no longer waiting") {
		t.Fatalf("second answer: %q", ans)
	}
}

// textModel streams a fixed text in pieces.
type textModel struct{ text string }

func (m textModel) Stream(ctx context.Context, req provider.Request, emit func(provider.Delta) error) (provider.Result, error) {
	r := []rune(m.text)
	for i := 0; i < len(r); i += 400 {
		if err := emit(provider.Delta{Text: string(r[i:min(i+400, len(r))])}); err != nil {
			return provider.Result{}, err
		}
	}
	return provider.Result{Text: m.text, FinishReason: "stop"}, nil
}

// TestLongReply: a reply longer than 4096 characters continues in a new
// message, cut at a paragraph, and each part's final text lands once.
func TestLongReply(t *testing.T) {
	var paras []string
	for i := 1; i <= 4; i++ {
		paras = append(paras, strings.TrimSpace(strings.Repeat(fmt.Sprintf("para%d words ", i), 125))) // 1500 chars
	}
	text := strings.Join(paras, "\n\n")
	fake := newFake(t, fakeInterval, fakeGlobal)
	st := newStackWith(t, stackOpts{model: textModel{text}, fake: fake, prep: func(b *Bot) { b.afterLand = fake.poke }})
	st.fake.pushText(111, 111, "tell me a lot")
	chat := ""
	st.fake.waitFor("both parts", func() bool {
		return st.fake.hasTextLocked(111, paras[3]) && st.fake.hasTextLocked(111, paras[0])
	})
	chat = st.bot.currentChat(111)
	st.fake.waitFor("idle", func() bool {
		st.fake.mu.Unlock()
		defer st.fake.mu.Lock()
		return st.idle(t, chat)
	})
	want := []string{paras[0] + "\n\n" + paras[1], paras[2] + "\n\n" + paras[3]}
	st.fake.waitFor("final parts", func() bool {
		got := st.fake.textsLocked(111)
		return len(got) == 2 && got[0] == want[0] && got[1] == want[1]
	})
	if n := st.fake.count("sendMessage"); n != 2 {
		t.Fatalf("%d sendMessage, want one per part", n)
	}
	// The bot's replies map to the assistant message, for /pin.
	sn := st.snapshot(t, chat)
	last := sn.Messages[len(sn.Messages)-1]
	st.fake.mu.Lock()
	ids := []int{st.fake.msgs[111][0].ID, st.fake.msgs[111][1].ID}
	st.fake.mu.Unlock()
	st.fake.waitFor("mapping", func() bool {
		for _, id := range ids {
			if rec, ok := st.bot.mapped(111, id); !ok || rec.Msg != last.ID || rec.Chat != chat || !rec.Reply {
				return false
			}
		}
		return true
	})
}

// TestPin: /pin as a reply hands "/pin <Mirror message id>" of the replied
// message to the chat's Command; without a reply, or to a message the bot
// does not know, it is answered and nothing is handed over.
func TestPin(t *testing.T) {
	seam := &cmdSeam{}
	fake := newFake(t, fakeInterval, fakeGlobal)
	st := newStackWith(t, stackOpts{delay: time.Millisecond, fake: fake, prep: func(b *Bot) { seam.install(b); b.afterLand = fake.poke }})
	hello := st.fake.pushText(111, 111, "hello")
	chat := st.waitReply(t, 111, "You said")
	sn := st.snapshot(t, chat)
	var user, assistant string
	for _, m := range sn.Messages {
		switch m.Role {
		case "user":
			user = m.ID
		case "assistant":
			assistant = m.ID
		}
	}
	st.fake.mu.Lock()
	replyID := st.fake.msgWithLocked(111, "You said").ID
	st.fake.mu.Unlock()
	st.fake.waitFor("mapping", func() bool { _, ok := st.bot.mapped(111, replyID); return ok })
	for _, tc := range []struct {
		name    string
		replyTo int
		handed  string
		want    string
	}{
		{"the bot's reply", replyID, "/pin " + assistant, "cmd: /pin " + assistant},
		{"the person's message", hello, "/pin " + user, "cmd: /pin " + user},
		{"an unknown message", 999999, "", "I cannot pin that message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(seam.got())
			st.fake.pushReply(111, 111, "/pin", tc.replyTo)
			st.fake.waitFor(tc.want, func() bool { return st.fake.hasTextLocked(111, tc.want) })
			got := seam.got()[before:]
			if tc.handed == "" && len(got) != 0 || tc.handed != "" && (len(got) != 1 || got[0] != tc.handed) {
				t.Fatalf("Command got %q, want %q", got, tc.handed)
			}
		})
	}
	if chat2, cmd, problem := st.bot.pinCommand(111, "/pin", nil); chat2 != "" || cmd != "" || !strings.Contains(problem, "as a reply") {
		t.Fatalf("pinCommand(nil) = %q %q %q", chat2, cmd, problem)
	}
}

// TestBadUpdates: malformed updates, missing fields, unknown or expired
// button data get clear answers (or are skipped with a log line) and never
// block the updates after them.
func TestBadUpdates(t *testing.T) {
	logs := &logRec{}
	st := newStackWith(t, stackOpts{delay: time.Millisecond, log: logs.logger()})
	bad := st.fake.pushRaw(`"message":{"message_id":"not a number","from":{"id":111,"is_bot":false,"first_name":"A"},"chat":{"id":111,"type":"private"}}`)
	st.fake.pushRaw(`"message":{"message_id":5,"date":1}`) // no chat, no sender
	st.fake.pushRaw(`"callback_query":{"id":"cbx","from":{"id":111,"is_bot":false,"first_name":"A"},"chat_instance":"1","data":"x:c_1:m1"}`)
	st.fake.pushText(111, 111, "after the bad ones")
	st.waitReply(t, 111, "after the bad ones")
	if n := logs.count(slog.LevelError, "update quarantined"); n != 1 {
		t.Fatalf("malformed update logged %d times:\n%s", n, logs.all())
	}
	var kept []byte
	_ = st.db.View(func(tx *bolt.Tx) error {
		kept = append(kept, tx.Bucket(quarantineBucket).Get(quarantineKey(bad))...)
		return nil
	})
	if !strings.Contains(string(kept), "not a number") || !strings.Contains(string(kept), kindUnreadable) {
		t.Fatalf("the malformed update was not kept: %q", kept)
	}
	// Its sender is told, so they do not take it as delivered.
	const told = "I could not read that message"
	st.fake.waitFor(told, func() bool { return st.fake.hasTextLocked(111, told) })
	st.fake.waitFor("answer to the button without a message", func() bool {
		return len(st.fake.answers) > 0 && strings.Contains(st.fake.answers[0], "no longer works")
	})
	for _, tc := range []struct{ data, want string }{
		{"zz:1", "This button is not known"},
		{"", "This button is not known"},
		{"x:", "This button is not known"},
		{"y:a_c_0123456789abcdef_1", "no longer waiting"},
		{"n:bogus", "no longer waiting"},
		{"r:r_c_0123456789abcdef_1", "no longer waiting"},
		{"s:", "no longer waiting"},
		{"c:c_0123456789abcdef", "That chat no longer exists"},
		{"d:c_0123456789abcdef:m1", "no longer queued"},
		{"x:c_0123456789abcdef:m1", "I do not know that message's text"},
	} {
		if ans := st.press(t, 111, 1, tc.data); !strings.Contains(ans, tc.want) {
			t.Errorf("button %q answered %q, want %q", tc.data, ans, tc.want)
		}
	}
	// A button of someone without access.
	n := st.fake.answerCount()
	st.fake.pushCallback(111, 999, 1, "y:a_c_0123456789abcdef_1")
	st.fake.waitFor("no access", func() bool {
		return len(st.fake.answers) > n && strings.Contains(st.fake.answers[n], "no access")
	})

	// The webhook refuses what is not an update and keeps what it cannot read.
	h := st.bot.WebhookHandler()
	for _, tc := range []struct {
		body string
		code int
	}{
		{`not json`, 400},
		{`{"message":{"message_id":1}}`, 400}, // no update_id
		{`[1,2]`, 400},
		{`{"update_id":100000,"message":{"message_id":"x"}}`, 200},
		{`{"update_id":100000,"message":{"message_id":"x"}}`, 200}, // again: handled already
	} {
		req := httptest.NewRequest("POST", "/telegram/webhook", strings.NewReader(tc.body))
		req.Header.Set(SecretHeader, "s3cret")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("webhook %s: %d, want %d", tc.body, rec.Code, tc.code)
		}
	}
	logs.noToken(t)
}

func TestIndexFoldIsSafeOnAnyText(t *testing.T) {
	for _, c := range []struct {
		s    string
		want int
	}{
		{"psst @fake_bot", 5},
		{"PSST @FAKE_BOT!", 5},
		{"Ⱥ @fake_bot", 3},
		{"ȺȺȺȺȺȺȺȺȺȺ@fake_bot", 20}, // lower-casing Ⱥ grows it: indexes come from the text itself
		{"İ@fake_bot", 2},
		{"foo@fake_bot", -1}, // mid-word
		{"@fake_bo", -1},
	} {
		if got := indexFold(c.s, "@fake_bot"); got != c.want {
			t.Errorf("indexFold(%q) = %d, want %d", c.s, got, c.want)
		}
	}
}

func FuzzIndexFold(f *testing.F) {
	f.Add("ȺȺ@fake_bot hi")
	f.Add("İ@FAKE_BOT")
	f.Fuzz(func(t *testing.T, s string) {
		if i := indexFold(s, "@fake_bot"); i >= 0 && !strings.EqualFold(s[i:i+len("@fake_bot")], "@fake_bot") {
			t.Fatalf("index %d of %q is no match", i, s)
		}
	})
}

func TestGroupChatsListStaysPrivate(t *testing.T) {
	st := testStack(t, time.Millisecond, nil)
	const group = -1002
	st.fake.pushGroup(group, 111, "/chats@fake_bot", `[{"type":"bot_command","offset":0,"length":15}]`, 0, 0)
	const want = "use it in a private chat with me"
	st.fake.waitFor(want, func() bool { return st.fake.hasTextLocked(group, want) })
}
