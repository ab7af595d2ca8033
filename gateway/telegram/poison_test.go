package telegram

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"github.com/mirror-gateway/mirror/chats"
	bolt "go.etcd.io/bbolt"
)

// lastUpdate is the update_id of the update pushed last.
func (f *fakeAPI) lastUpdate() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nextUpdate
}

// storedOffset is the getUpdates offset committed in the database.
func (st *stack) storedOffset() int {
	var n uint64
	_ = st.db.View(func(tx *bolt.Tx) error { n = parseUint(tx.Bucket(bucket).Get([]byte("offset"))); return nil })
	return int(n)
}

// TestPoisonMentionUpdate: the group message of issue 14 (two mentions of
// the bot, their entities out of order) panicked in the mention parser
// before the access check, for anyone in the group. It is now read like
// any other: ignored from a user without access, answered from one with
// it, nothing quarantined, the offset past it, and the next update
// answered.
func TestPoisonMentionUpdate(t *testing.T) {
	logs := &logRec{}
	st := newStackWith(t, stackOpts{delay: time.Millisecond, log: logs.logger()})
	const group = -1004
	const poison = `[{"type":"mention","offset":9,"length":9},{"type":"mention","offset":0,"length":9}]`
	st.fake.pushGroup(group, 222, "@fake_bot@fake_bot", poison, 0, 0) // no access
	st.fake.pushGroup(group, 111, "@fake_bot@fake_bot", poison, 0, 0)
	id := st.fake.lastUpdate()
	const nothing = "Write your message along with the mention."
	st.fake.waitFor(nothing, func() bool { return st.fake.hasTextLocked(group, nothing) })
	st.fake.pushGroup(group, 111, "@fake_bot@fake_bot and now?", poison, 0, 0)
	st.waitReply(t, group, "You said: «and now?»")
	if got := st.storedOffset(); got <= id {
		t.Fatalf("offset %d, want past %d", got, id)
	}
	if q, err := readQuarantine(st.db); err != nil || len(q) != 0 {
		t.Fatalf("quarantine %+v %v, want empty: the update is readable", q, err)
	}
	if n := count(st.fake.texts(group), nothing); n != 1 {
		t.Fatalf("%d answers %q, want 1 (the user without access gets none): %q", n, nothing, st.fake.texts(group))
	}
}

// TestAddressedEntities: entity ranges in any order, overlapping, past the
// text, negative or inside a surrogate pair are read safely and cut once.
func TestAddressedEntities(t *testing.T) {
	b := &Bot{api: &tgbotapi.BotAPI{Self: tgbotapi.User{ID: 42, IsBot: true, UserName: "fake_bot"}}}
	ent := func(typ string, off, n int) tgbotapi.MessageEntity {
		return tgbotapi.MessageEntity{Type: typ, Offset: off, Length: n}
	}
	for _, tc := range []struct {
		name    string
		text    string
		ents    []tgbotapi.MessageEntity
		want    string
		forBot  bool
		caption bool
	}{
		{"issue 14: out of order", "@fake_bot@fake_bot", []tgbotapi.MessageEntity{ent("mention", 9, 9), ent("mention", 0, 9)}, "", true, false},
		{"in order", "@fake_bot@fake_bot", []tgbotapi.MessageEntity{ent("mention", 0, 9), ent("mention", 9, 9)}, "", true, false},
		{"repeated", "@fake_bot hi", []tgbotapi.MessageEntity{ent("mention", 0, 9), ent("mention", 0, 9)}, "hi", true, false},
		{"overlapping", "x @fake_bot y", []tgbotapi.MessageEntity{ent("bold", 0, 13), ent("mention", 2, 9), ent("italic", 1, 5)}, "x  y", true, false},
		{"past the end", "@fake_bot", []tgbotapi.MessageEntity{ent("mention", 0, 9), ent("bold", 5, 1<<62), ent("mention", 100, 9)}, "", true, false},
		{"huge", "hi @fake_bot", []tgbotapi.MessageEntity{ent("mention", 1<<62, 1<<62), ent("mention", 3, 9)}, "hi", true, false},
		// Clamped to the text, [-5, 9) is [0, 9): the mention.
		{"negative", "@fake_bot hi", []tgbotapi.MessageEntity{ent("mention", -5, 14), ent("mention", -1<<62, 1<<62)}, "hi", true, false},
		{"before the text", "@fake_bot hi", []tgbotapi.MessageEntity{ent("mention", -9, 9)}, "@fake_bot hi", false, false},
		{"zero length", "@fake_bot", []tgbotapi.MessageEntity{ent("mention", 0, 0), ent("mention", 3, -4)}, "@fake_bot", false, false},
		// UTF-16: the emoji is two code units, so the mention starts at 3.
		{"after an emoji", "😀 @fake_bot what?", []tgbotapi.MessageEntity{ent("mention", 3, 9)}, "😀  what?", true, false},
		{"inside a surrogate pair", "😀@fake_bot", []tgbotapi.MessageEntity{ent("bold", 1, 1), ent("mention", 2, 9)}, "😀", true, false},
		{"command naming it", "/status@fake_bot now", []tgbotapi.MessageEntity{ent("bot_command", 0, 16)}, "/status now", true, false},
		{"command past the end", "/status@fake_bot", []tgbotapi.MessageEntity{ent("bot_command", 0, 400)}, "/status", true, false},
		{"another bot's command", "/status@other_bot", []tgbotapi.MessageEntity{ent("bot_command", 0, 17)}, "/status@other_bot", false, false},
		{"no entities", "ȺȺ @FAKE_BOT hi", nil, "ȺȺ  hi", true, false},
		{"caption", "@fake_bot look", []tgbotapi.MessageEntity{ent("mention", 0, 9)}, "look", true, true},
		{"caption, no entities", "look @fake_bot", nil, "look", true, true},
		{"text mention", "direct", []tgbotapi.MessageEntity{{Type: "text_mention", Offset: 0, Length: 6, User: &tgbotapi.User{ID: 42}}}, "direct", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &tgbotapi.Message{Text: tc.text, Entities: tc.ents, Chat: &tgbotapi.Chat{ID: -1, Type: "supergroup"}}
			if tc.caption {
				m = &tgbotapi.Message{Caption: tc.text, CaptionEntities: tc.ents, Chat: m.Chat}
			}
			got, ok := b.addressed(m)
			if got != tc.want || ok != tc.forBot {
				t.Fatalf("addressed(%q, %+v) = %q, %v; want %q, %v", tc.text, tc.ents, got, ok, tc.want, tc.forBot)
			}
		})
	}
}

// FuzzEntities: no entity, however placed, makes parseEntities or cutting
// its ranges fail, and a cut removes exactly the union of the ranges.
func FuzzEntities(f *testing.F) {
	f.Add("@fake_bot@fake_bot", 9, 9, 0, 9)
	f.Add("😀@fake_bot", 1, 1, 2, 9)
	f.Add("", -1, 3, 1<<62, 1<<62)
	f.Fuzz(func(t *testing.T, text string, o1, n1, o2, n2 int) {
		et := parseEntities(text, []tgbotapi.MessageEntity{{Type: "a", Offset: o1, Length: n1}, {Type: "b", Offset: o2, Length: n2}})
		cut := make([]bool, len(et.units))
		for i, s := range et.spans {
			if s.Start < 0 || s.End > len(et.units) || s.Start >= s.End || i > 0 && et.spans[i-1].Start > s.Start {
				t.Fatalf("span %+v of %d units, spans %+v", s, len(et.units), et.spans)
			}
			_ = et.text(s)
			for j := s.Start; j < s.End; j++ {
				cut[j] = true
			}
		}
		var keep []uint16
		for i, u := range et.units {
			if !cut[i] {
				keep = append(keep, u)
			}
		}
		want := parseEntities("", nil)
		want.units = keep
		if got := et.without(et.spans); got != want.without(nil) {
			t.Fatalf("cut %q by %+v = %q, want %q", text, et.spans, got, want.without(nil))
		}
	})
}

// panicSeam makes the chats' Command panic on one text, as a bug deep in
// the handling of an update would: the recover around each update must
// hold whatever panics.
func panicSeam(text string) func(*Bot) {
	return func(b *Bot) {
		real := b.runCmd
		b.runCmd = func(ctx context.Context, chat, cmd string, o chats.Origin) (string, error) {
			if cmd == text {
				var s []int
				_ = s[len(cmd)] // index out of range
			}
			return real(ctx, chat, cmd, o)
		}
	}
}

// TestPoisonUpdateQuarantined: an update whose handling panics, through
// the real fake Bot API. The gateway keeps serving and answers the next
// update; the poison one is in quarantine with its error and where it
// panicked, logged once, its sender told; the offset moved past it, and
// after a restart it is not seen again. The webhook does the same.
func TestPoisonUpdateQuarantined(t *testing.T) {
	logs := &logRec{}
	st := newStackWith(t, stackOpts{delay: time.Millisecond, log: logs.logger(), prep: panicSeam("/compact boom")})
	st.fake.pushText(111, 111, "hello")
	st.waitReply(t, 111, "You said: «hello»")
	st.fake.pushText(111, 111, "/compact boom")
	poison := st.fake.lastUpdate()
	st.fake.pushText(111, 111, "after the poison")
	st.waitReply(t, 111, "You said: «after the poison»")

	q, err := readQuarantine(st.db)
	if err != nil || len(q) != 1 {
		t.Fatalf("quarantine %+v %v, want the poison update", q, err)
	}
	if q[0].UpdateID != poison || q[0].Kind != kindPanic || !strings.Contains(q[0].Error, "index out of range") ||
		!strings.Contains(q[0].At, "poison_test.go") || !strings.Contains(q[0].Update, "/compact boom") || q[0].Stack == "" {
		t.Fatalf("quarantined %+v", q[0])
	}
	if got := st.storedOffset(); got <= poison {
		t.Fatalf("offset %d, want past %d", got, poison)
	}
	const told = "I could not read that message"
	st.fake.waitFor(told, func() bool { return st.fake.hasTextLocked(111, told) })
	if n := logs.count(slog.LevelError, "update quarantined"); n != 1 {
		t.Fatalf("quarantine logged %d times, want once:\n%s", n, logs.all())
	}
	if strings.Contains(logs.all(), "/compact boom") {
		t.Fatalf("the update's text reached the log:\n%s", logs.all())
	}

	// A restart polls from past the poison update: it never comes again.
	st.restart(t)
	st.fake.mu.Lock()
	polls := len(st.fake.offsets)
	st.fake.mu.Unlock()
	st.fake.pushText(111, 111, "after the restart")
	st.waitReply(t, 111, "You said: «after the restart»")
	st.fake.mu.Lock()
	for _, o := range st.fake.offsets[polls:] {
		if o <= poison {
			t.Errorf("getUpdates offset %d after the restart: the poison update %d is asked for again", o, poison)
		}
	}
	st.fake.mu.Unlock()
	if n := logs.count(slog.LevelError, "update quarantined"); n != 1 {
		t.Fatalf("quarantine logged %d times across a restart, want once:\n%s", n, logs.all())
	}

	// The webhook quarantines the same way, answers 200 so Telegram stops
	// delivering it, and a second delivery is known.
	h := st.bot.WebhookHandler()
	id := st.storedOffset() + 10
	body := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":111,"is_bot":false,"first_name":"A"},"chat":{"id":111,"type":"private"},"date":1767225600,"text":"/compact boom","entities":[{"type":"bot_command","offset":0,"length":8}]}}`,
		id, nextMsgID())
	for range 2 {
		req := httptest.NewRequest("POST", "/telegram/webhook", strings.NewReader(body))
		req.Header.Set(SecretHeader, "s3cret")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("webhook answered %d %s, want 200", rec.Code, rec.Body)
		}
	}
	if q, _ := readQuarantine(st.db); len(q) != 2 || q[1].UpdateID != id {
		t.Fatalf("quarantine after the webhook: %+v", q)
	}
	if n := logs.count(slog.LevelError, "update quarantined"); n != 2 {
		t.Fatalf("quarantine logged %d times, want twice (once per poison update):\n%s", n, logs.all())
	}
}

// TestQuarantineBounded: the quarantine keeps the newest updates only.
func TestQuarantineBounded(t *testing.T) {
	st := newStackWith(t, stackOpts{delay: time.Millisecond, log: (&logRec{}).logger()})
	for i := range maxQuarantined + 5 {
		if err := st.bot.quarantine(1_000_000+i, []byte(`{"x":1}`), quarantined{Kind: kindUnreadable, Error: "bad"}); err != nil {
			t.Fatal(err)
		}
	}
	q, err := readQuarantine(st.db)
	if err != nil || len(q) != maxQuarantined || q[0].UpdateID != 1_000_005 || q[len(q)-1].UpdateID != 1_000_000+maxQuarantined+4 {
		t.Fatalf("%d kept (%v), first %d", len(q), err, q[0].UpdateID)
	}
}
