package telegram

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
	bolt "go.etcd.io/bbolt"
)

// crash does to the stack what kill -9 does to the process: from this
// instant the bot reaches Telegram no more (the fake drops its requests),
// and the next process finds the database as committed now (a consistent
// copy taken in one read transaction). The old bot and service are then
// torn down, out of sight of the fake and of the copy, and a new process
// starts on the copy under token: chats resumed, then the bot.
func (st *stack) crash(t *testing.T, oldToken, newToken string) {
	t.Helper()
	st.fake.kill(oldToken)
	copyPath := filepath.Join(t.TempDir(), fmt.Sprintf("crashed-%d.db", time.Now().UnixNano()))
	if err := st.db.View(func(tx *bolt.Tx) error { return tx.CopyFile(copyPath, 0o600) }); err != nil {
		t.Fatal(err)
	}
	st.bot.Close()
	st.bot = nil
	st.closeService()
	st.path = copyPath
	st.open(t)
	if _, err := st.svc.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	st.bot = st.startAs(t, newToken)
}

// startAs starts a bot like start, under another token (so the fake can
// tell the processes apart).
func (st *stack) startAs(t testing.TB, token string) *Bot {
	t.Helper()
	b, err := New(context.Background(), Options{Config: st.cfg, Token: token, Chats: st.svc, Store: st.store,
		ChatInterval: st.so.interval, GlobalRate: st.so.global, PollTimeout: 10 * time.Second, Now: st.clock,
		WebhookSecret: "s3cret", Monitor: st.mon, Log: st.so.log})
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

const restartToken = "123456:TEST-secret-second"

// TestCrashBeforeFirstReplyText: killed before a new chat's first reply
// text reached Telegram, the next process still follows the chat (the link
// was committed before the message was accepted) and delivers the answer,
// once, without the person writing again; and what they write next is
// answered too. Each case makes its new chat a different way.
func TestCrashBeforeFirstReplyText(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(st *stack) // runs before the message, with nothing held
	}{
		{"first message", func(st *stack) {}},
		{"after /new", func(st *stack) {
			st.fake.pushText(111, 111, "hello before")
			st.waitReply(t, 111, "You said: «hello before»")
			st.fake.pushText(111, 111, "/new Fresh")
			st.fake.waitFor("new chat", func() bool { return st.fake.hasTextLocked(111, "New chat: Fresh") })
		}},
		{"after a /chats switch", func(st *stack) {
			st.fake.pushText(111, 111, "hello before")
			first := st.waitReply(t, 111, "You said: «hello before»")
			st.fake.pushText(111, 111, "/new Other")
			st.fake.waitFor("new chat", func() bool { return st.fake.hasTextLocked(111, "New chat: Other") })
			st.fake.pushCallback(111, 111, 1, "c:"+first)
			st.fake.waitFor("switched", func() bool { return st.fake.hasTextLocked(111, "Now in chat") })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t, fakeInterval, fakeGlobal)
			st := newStackWith(t, stackOpts{delay: time.Millisecond, fake: fake})
			tc.setup(st)
			// Hold the first reply text of the old process.
			fake.mu.Lock()
			fake.hold = func(token, method string, chat int64) bool {
				return token == botToken && method == "sendMessage" && chat == 111
			}
			fake.mu.Unlock()
			fake.pushText(111, 111, "answer me")
			fake.waitFor("the first reply text on its way", func() bool { return fake.held > 0 })
			st.crash(t, botToken, restartToken)

			const want = "You said: «answer me»"
			st.waitReply(t, 111, want)
			if n := count(fake.texts(111), want); n != 1 {
				t.Fatalf("the answer is in %d messages, want 1: %q", n, fake.texts(111))
			}
			fake.pushText(111, 111, "and again")
			st.waitReply(t, 111, "You said: «and again»")
		})
	}
}

// TestCrashMidStreamContinuesInTheSameMessage: killed while a reply
// streams, with a message queued behind it, the next process finishes that
// reply in the message it had started (no cut-off message left behind, no
// second message with the answer), and the queued message gets its own
// answer, in a message of its own, after it.
func TestCrashMidStreamContinuesInTheSameMessage(t *testing.T) {
	gate := &gateModel{release: make(chan struct{}, 10)}
	fake := newFake(t, fakeInterval, fakeGlobal)
	st := newStackWith(t, stackOpts{model: gate, fake: fake, prep: func(b *Bot) { b.afterSave = fake.poke }})
	fake.pushText(111, 111, "first")
	fake.waitFor("streaming", func() bool { return fake.hasTextLocked(111, "partial") })
	fake.mu.Lock()
	started := fake.msgWithLocked(111, "partial").ID
	fake.mu.Unlock()
	second := fake.pushText(111, 111, "second")
	// The follower sends the Queued reply only after it committed the
	// streaming message's id.
	ack, _, _ := st.ackOf(t, 111, second)
	chat := st.bot.currentChat(111)
	fake.waitFor("the Queued reply recorded", func() bool {
		fs, _ := st.bot.loadFollow(at(111), chat)
		return len(fs.Acks) > 0
	})
	st.crash(t, botToken, restartToken)

	gate.release <- struct{}{}
	gate.release <- struct{}{}
	fake.waitFor("both answers", func() bool {
		return fake.hasTextLocked(111, "answer to first") && fake.hasTextLocked(111, "answer to second")
	})
	fake.waitFor("idle", func() bool {
		fake.mu.Unlock()
		defer fake.mu.Lock()
		return st.idle(t, chat)
	})
	st.waitText(t, 111, started, "partial answer to first")
	st.waitText(t, 111, ack.ID, "Picked up")
	fake.mu.Lock()
	defer fake.mu.Unlock()
	var replies []string
	for _, m := range fake.msgs[111] {
		if m.ID != ack.ID {
			replies = append(replies, m.Text)
		}
	}
	if len(replies) != 2 || !strings.Contains(replies[0], "answer to first") || !strings.Contains(replies[1], "answer to second") ||
		strings.Contains(replies[1], "first") {
		t.Fatalf("the bot's messages %q, want the first reply finished in its own message, then the second's", replies)
	}
}

// TestLostSendAnswerMakesAtMostOneDuplicate: Telegram got a sendMessage but
// its answer was lost. The bot sends it once more (one visible duplicate at
// most); when that answer is lost too, it sends no third copy; either way
// the final text lands in the message whose id it knows.
func TestLostSendAnswerMakesAtMostOneDuplicate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lose     int // how many sendMessage answers to chat 111 are lost
		maxSends int
	}{
		{"one answer lost", 1, 2},
		{"every answer lost", 1 << 30, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &logRec{}
			fake := newFake(t, fakeInterval, fakeGlobal)
			var mu sync.Mutex
			lost := 0
			fake.lose = func(method string, chat int64) bool {
				mu.Lock()
				defer mu.Unlock()
				if method == "sendMessage" && chat == 111 && lost < tc.lose {
					lost++
					return true
				}
				return false
			}
			st := newStackWith(t, stackOpts{delay: time.Millisecond, fake: fake, log: logs.logger(),
				prep: func(b *Bot) { b.afterLand = fake.poke }})
			fake.pushText(111, 111, "hello")
			fake.waitFor("a send", func() bool { return fake.calls["sendMessage"] > 0 })
			chat := ""
			fake.waitFor("landed", func() bool {
				fake.mu.Unlock()
				defer fake.mu.Lock()
				if chat == "" {
					chat = st.bot.currentChat(111)
				}
				if chat == "" || !st.idle(t, chat) {
					return false
				}
				fs, ok := st.bot.loadFollow(at(111), chat)
				return ok && fs.Landed
			})
			n := fake.count("sendMessage")
			if n > tc.maxSends {
				t.Fatalf("%d sendMessage for one reply, want at most %d", n, tc.maxSends)
			}
			if got := len(fake.texts(111)); got > 2 {
				t.Fatalf("%d messages, want the reply and at most one duplicate: %q", got, fake.texts(111))
			}
			if tc.lose == 1 {
				st.waitReply(t, 111, "You said: «hello»")
			} else if logs.count(slog.LevelWarn, "answer lost twice") != 1 {
				t.Fatalf("the double loss was not logged:\n%s", logs.all())
			}
			logs.noToken(t)
		})
	}
}

// shrinkModel streams a two-message answer and then hangs, the first time;
// afterwards it answers "short answer" at once.
type shrinkModel struct {
	mu    sync.Mutex
	calls int
}

func (m *shrinkModel) Stream(ctx context.Context, req provider.Request, emit func(provider.Delta) error) (provider.Result, error) {
	m.mu.Lock()
	m.calls++
	first := m.calls == 1
	m.mu.Unlock()
	if !first {
		if err := emit(provider.Delta{Text: "short answer"}); err != nil {
			return provider.Result{}, err
		}
		return provider.Result{Text: "short answer", FinishReason: "stop"}, nil
	}
	long := strings.Repeat("word ", 600) + "\n\n" + strings.Repeat("more ", 600) // ~6000 characters: two messages
	if err := emit(provider.Delta{Text: long}); err != nil {
		return provider.Result{}, err
	}
	<-ctx.Done()
	return provider.Result{Text: long}, ctx.Err()
}

// TestCrashResumedShorterReplyDropsExtraParts: a reply cut off by a crash
// after it had grown into two messages is answered again shorter: the
// answer goes in the first message and the second, now stale, is deleted.
func TestCrashResumedShorterReplyDropsExtraParts(t *testing.T) {
	fake := newFake(t, fakeInterval, fakeGlobal)
	st := newStackWith(t, stackOpts{model: &shrinkModel{}, fake: fake, prep: func(b *Bot) { b.afterSave = fake.poke }})
	fake.pushText(111, 111, "go")
	fake.waitFor("two parts", func() bool { return len(fake.msgs[111]) == 2 })
	chat := st.bot.currentChat(111)
	fake.waitFor("both recorded", func() bool {
		fs, _ := st.bot.loadFollow(at(111), chat)
		return len(fs.MsgIDs) == 2
	})
	fake.mu.Lock()
	firstID := fake.msgs[111][0].ID
	fake.mu.Unlock()
	st.crash(t, botToken, restartToken)
	fake.waitFor("the short answer alone", func() bool {
		m := fake.msgs[111]
		return len(m) == 1 && m[0].ID == firstID && m[0].Text == "short answer"
	})
}
