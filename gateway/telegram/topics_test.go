package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/chats/people"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/ids"
	"github.com/mirror-gateway/mirror/runtime/provider"
	bolt "go.etcd.io/bbolt"
)

// tgForum is the tests' tgForum supergroup; tgGroup a plain one.
const (
	tgForum int64 = -1001234567890
	tgGroup int64 = -1009876543210
)

// atBot is the entities of a text that starts with "@fake_bot".
const atBot = `[{"type":"mention","offset":0,"length":9}]`

// barrier is a model whose turns each wait, bounded, until n turns run at
// once: chats answered one after another would never get there, and their
// answers would be the error instead.
type barrier struct {
	n   int
	mu  sync.Mutex
	in  int
	all chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, all: make(chan struct{})} }

func (m *barrier) Stream(ctx context.Context, req provider.Request, emit func(provider.Delta) error) (provider.Result, error) {
	last := ""
	for _, msg := range req.Messages {
		if msg.Role == provider.RoleUser {
			last = msg.Content
		}
	}
	first := "Working on " + last + ". "
	if err := emit(provider.Delta{Text: first}); err != nil {
		return provider.Result{}, err
	}
	m.mu.Lock()
	if m.in++; m.in == m.n {
		close(m.all)
	}
	m.mu.Unlock()
	select {
	case <-m.all:
	case <-time.After(20 * time.Second):
		return provider.Result{}, errors.New("the other chats' turns never ran alongside this one")
	case <-ctx.Done():
		return provider.Result{}, ctx.Err()
	}
	rest := "Answer to " + last + "."
	if err := emit(provider.Delta{Text: rest}); err != nil {
		return provider.Result{}, err
	}
	return provider.Result{Text: first + rest, FinishReason: "stop"}, nil
}

// TestForumTopicsAreParallelChats: three topics of a tgForum are three
// chats, named after their topics, answered at the same time (the model
// holds each turn until all three run), each reply sent into its own
// topic (message_thread_id) and streamed there, typing shown in the
// topic; the General topic is a fourth chat whose replies go without a
// thread id (Telegram refuses 1); a topic's rename renames its chat.
func TestForumTopicsAreParallelChats(t *testing.T) {
	st := newStackWith(t, stackOpts{model: newBarrier(3)})
	topics := []struct {
		thread int
		name   string
	}{{11, "Alpha"}, {12, "Beta"}, {13, "Gamma"}}
	for _, tp := range topics {
		st.fake.pushTopicEvent(tgForum, 111, tp.thread, "forum_topic_created", tp.name)
	}
	for _, tp := range topics {
		st.fake.pushForum(tgForum, 111, tp.thread, tp.name, "@fake_bot question "+tp.name, atBot)
	}
	for _, tp := range topics {
		want := "Answer to question " + tp.name + "."
		st.fake.waitFor(want+" in its topic", func() bool {
			m := st.fake.msgWithLocked(tgForum, want)
			return m != nil && m.Thread == tp.thread && strings.HasPrefix(m.Text, "Working on question "+tp.name)
		})
	}
	seen := map[string]bool{}
	for _, tp := range topics {
		chat := st.bot.chatAt(place{tgForum, tp.thread})
		c, err := st.svc.Get(context.Background(), chat)
		if err != nil || c.Title != tp.name || seen[chat] {
			t.Fatalf("topic %d: chat %q %+v %v", tp.thread, chat, c, err)
		}
		seen[chat] = true
	}
	st.fake.mu.Lock()
	for _, m := range st.fake.msgs[tgForum] {
		for _, tp := range topics {
			if strings.Contains(m.Text, "question "+tp.name) && m.Thread != tp.thread {
				t.Errorf("topic %s's reply in thread %d: %q", tp.name, m.Thread, m.Text)
			}
		}
		if m.Thread == 0 {
			t.Errorf("a topic's message went to General: %q", m.Text)
		}
	}
	typed := 0
	for _, a := range st.fake.actions {
		if a.Chat == tgForum {
			typed++
			if a.Thread != 11 && a.Thread != 12 && a.Thread != 13 {
				t.Errorf("typing shown outside the topics: thread %d", a.Thread)
			}
		}
	}
	edits := st.fake.edits[tgForum]
	st.fake.mu.Unlock()
	if typed == 0 || edits == 0 {
		t.Fatalf("typing actions %d, edits %d: each topic's reply streams there", typed, edits)
	}

	// The General topic: no thread id either way.
	st.fake.pushForum(tgForum, 111, 0, "", "@fake_bot in general", atBot)
	st.fake.waitFor("General's answer", func() bool {
		m := st.fake.msgWithLocked(tgForum, "Answer to in general.")
		return m != nil && m.Thread == 0
	})
	if g := st.bot.chatAt(at(tgForum)); g == "" || seen[g] {
		t.Fatalf("General's chat %q is not a chat of its own", g)
	}

	// Renaming a topic renames its chat.
	beta := st.bot.chatAt(place{tgForum, 12})
	st.fake.pushTopicEvent(tgForum, 111, 12, "forum_topic_edited", "Beta, renamed")
	st.fake.waitFor("the chat renamed", func() bool {
		st.fake.mu.Unlock()
		defer st.fake.mu.Lock()
		c, err := st.svc.Get(context.Background(), beta)
		return err == nil && c.Title == "Beta, renamed"
	})
	// A rename by someone without access, and an edit of the icon only,
	// keep the name.
	st.fake.pushTopicEvent(tgForum, 222, 12, "forum_topic_edited", "Hijacked")
	st.fake.push("message", fmt.Sprintf(`{"message_id":%d,"from":{"id":111,"is_bot":false,"first_name":"U"},"chat":{"id":%d,"type":"supergroup","is_forum":true},"date":1767225600,"message_thread_id":12,"is_topic_message":true,"forum_topic_edited":{"icon_custom_emoji_id":"5312241539987020022"}}`, nextMsgID(), tgForum))
	st.fake.pushForum(tgForum, 111, 12, "Beta", "@fake_bot again", atBot)
	st.fake.waitFor("the renamed topic answers", func() bool { return st.fake.hasTextLocked(tgForum, "Answer to again.") })
	if c, _ := st.svc.Get(context.Background(), beta); c.Title != "Beta, renamed" || st.bot.chatAt(place{tgForum, 12}) != beta {
		t.Fatalf("after an icon edit: %+v", c)
	}
}

// TestTopicMappingSurvivesRestart: a topic's chat is found again after a
// restart (the mapping is stored), and /new in a topic gives the topic a
// fresh chat that stays in the topic.
func TestTopicMappingSurvivesRestart(t *testing.T) {
	st := testStack(t, time.Millisecond, nil)
	st.fake.pushTopicEvent(tgForum, 111, 21, "forum_topic_created", "Plans")
	st.fake.pushForum(tgForum, 111, 21, "Plans", "@fake_bot one", atBot)
	st.fake.waitFor("first answer", func() bool { return st.fake.hasTextLocked(tgForum, "You said: «one»") })
	chat := st.bot.chatAt(place{tgForum, 21})
	st.restart(t)
	if got := st.bot.chatAt(place{tgForum, 21}); got != chat {
		t.Fatalf("after restart the topic maps to %q, not %q", got, chat)
	}
	// The follower the start resumed streams into the topic, not General.
	st.bot.mu.Lock()
	_, inTopic := st.bot.followers[followKey{place{tgForum, 21}, chat}]
	for k := range st.bot.followers {
		if k.chat == chat && k.where != (place{tgForum, 21}) {
			t.Errorf("after restart the topic's chat is followed at %v", k.where)
		}
	}
	st.bot.mu.Unlock()
	if !inTopic {
		t.Fatal("after restart nothing follows the topic's chat in the topic")
	}
	st.fake.pushForum(tgForum, 111, 21, "Plans", "@fake_bot two", atBot)
	st.fake.waitFor("second answer in the topic", func() bool {
		m := st.fake.msgWithLocked(tgForum, "You said: «two»")
		return m != nil && m.Thread == 21
	})
	st.fake.waitFor("the chat idle", func() bool {
		st.fake.mu.Unlock()
		defer st.fake.mu.Lock()
		return st.idle(t, chat)
	})
	st.fake.mu.Lock()
	for _, m := range st.fake.msgs[tgForum] {
		if m.Thread != 21 {
			t.Errorf("after the restart the topic's chat spoke outside the topic: thread %d %q", m.Thread, m.Text)
		}
	}
	st.fake.mu.Unlock()
	n := 0
	for _, m := range st.snapshot(t, chat).Messages {
		if m.Role == "user" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("the topic's chat holds %d messages of the person, want 2", n)
	}
	st.fake.pushForum(tgForum, 111, 21, "Plans", "/new@fake_bot", `[{"type":"bot_command","offset":0,"length":13}]`)
	st.fake.waitFor("a new chat for the topic", func() bool {
		m := st.fake.msgWithLocked(tgForum, "New chat for this topic: Plans")
		return m != nil && m.Thread == 21
	})
	if fresh := st.bot.chatAt(place{tgForum, 21}); fresh == chat || fresh == "" {
		t.Fatalf("/new in a topic: %q", fresh)
	}
}

// members links Telegram users to people: bob (222) and carol (333),
// members; 111 is in allowed_users, so the first owner.
func (st *stack) members(t *testing.T) (owner, bob, carol people.Person) {
	t.Helper()
	reg := st.svc.People()
	for _, n := range []struct {
		name string
		tg   int64
	}{{"bob", 222}, {"carol", 333}} {
		if _, _, err := reg.Add(n.name, people.RoleMember); err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Link(n.name, n.tg); err != nil {
			t.Fatal(err)
		}
	}
	owner, _ = reg.First()
	bob, _ = reg.ByTelegram(222)
	carol, _ = reg.ByTelegram(333)
	return owner, bob, carol
}

// TestGroupIsOneChatWithBy: a group's messages from two members go to one
// chat, each row saying who sent it; the group is told once that its
// chat is shared and its replies seen by all.
func TestGroupIsOneChatWithBy(t *testing.T) {
	st := testStack(t, time.Millisecond, nil)
	owner, bob, _ := st.members(t)
	st.fake.pushGroup(tgGroup, 111, "@fake_bot from the owner", atBot, 0, 0)
	st.fake.waitFor("owner's answer", func() bool { return st.fake.hasTextLocked(tgGroup, "You said: «from the owner»") })
	st.fake.pushGroup(tgGroup, 222, "@fake_bot from bob", atBot, 0, 0)
	st.fake.waitFor("bob's answer", func() bool { return st.fake.hasTextLocked(tgGroup, "You said: «from bob»") })
	chat := st.bot.currentChat(tgGroup)
	by := map[string]string{}
	for _, m := range st.snapshot(t, chat).Messages {
		if m.Role == "user" {
			by[m.Text] = m.By
		}
	}
	if by["from the owner"] != owner.ID || by["from bob"] != bob.ID {
		t.Fatalf("by %v (owner %s, bob %s)", by, owner.ID, bob.ID)
	}
	if n := count(st.fake.texts(tgGroup), "visible to everyone here"); n != 1 {
		t.Fatalf("the group was told %d times that its chat is shared", n)
	}
}

// TestGroupApprovalOnlyByAskerOrOwner: in a group's shared chat, carol's
// shell call waits for approval; bob, a member who can write to the
// chat, presses Allow and nothing happens; the owner's press allows it,
// and the row records the owner.
func TestGroupApprovalOnlyByAskerOrOwner(t *testing.T) {
	st := testStack(t, time.Millisecond, nil)
	owner, _, _ := st.members(t)
	st.fake.pushGroup(tgGroup, 222, "@fake_bot hello", atBot, 0, 0) // bob joins the group's chat first
	st.fake.waitFor("bob's answer", func() bool { return st.fake.hasTextLocked(tgGroup, "You said: «hello»") })
	st.fake.pushGroup(tgGroup, 333, `@fake_bot /tool shell {"command":"echo hi"}`, atBot, 0, 0)
	st.fake.waitFor("approval", func() bool { return st.fake.hasTextLocked(tgGroup, "wants to run shell") })
	st.fake.mu.Lock()
	ask := st.fake.msgWithLocked(tgGroup, "wants to run shell")
	st.fake.mu.Unlock()
	var kb struct {
		Rows [][]struct {
			Data string `json:"callback_data"`
		} `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(ask.Markup), &kb); err != nil || !strings.HasPrefix(kb.Rows[0][0].Data, "y:") {
		t.Fatalf("markup %s", ask.Markup)
	}
	chat := st.bot.currentChat(tgGroup)
	n := st.fake.answerCount()
	st.fake.pushGroupCallback(tgGroup, 222, ask.ID, kb.Rows[0][0].Data)
	st.fake.waitFor("bob's press answered", func() bool { return len(st.fake.answers) > n })
	if ans := st.fake.answers[n]; !strings.Contains(ans, "no longer waiting") {
		t.Fatalf("bob's press: %q", ans)
	}
	if sn := st.snapshot(t, chat); len(sn.Approvals) != 1 {
		t.Fatalf("bob's press answered carol's approval: %+v", sn.Approvals)
	}
	st.fake.pushGroupCallback(tgGroup, 111, ask.ID, kb.Rows[0][0].Data)
	st.fake.waitFor("allowed", func() bool { return st.fake.hasTextLocked(tgGroup, "Allowed.") })
	frames, err := st.svc.Events(context.Background(), chat, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var resolved *chats.Header
	for _, fr := range frames {
		var h chats.Header
		if json.Unmarshal(fr.Raw, &h) == nil && h.Type == chats.EvApprovalResolved {
			resolved = &h
		}
	}
	if resolved == nil || resolved.By != owner.ID {
		t.Fatalf("approval.resolved %+v, want by the owner %s", resolved, owner.ID)
	}
}

// TestRatePerPerson: limits.messages_per_minute counts per person: bob's
// two linked Telegram accounts share one allowance, and the owner's is
// their own.
func TestRatePerPerson(t *testing.T) {
	st := testStack(t, time.Millisecond, func(c *config.Config) { c.Limits.MessagesPerMinute = 2 })
	st.members(t)
	if _, err := st.svc.People().Link("bob", 444); err != nil {
		t.Fatal(err)
	}
	st.fake.pushText(222, 222, "one")
	st.fake.waitFor("bob's first", func() bool { return st.fake.hasTextLocked(222, "You said: «one»") })
	st.fake.pushText(444, 444, "two")
	st.fake.waitFor("bob's second, from his other account", func() bool { return st.fake.hasTextLocked(444, "You said: «two»") })
	st.fake.pushText(222, 222, "three")
	st.fake.waitFor("bob refused", func() bool { return st.fake.hasTextLocked(222, "Not sent: too many messages") })
	st.fake.pushText(111, 111, "mine")
	st.fake.waitFor("the owner's own allowance", func() bool { return st.fake.hasTextLocked(111, "You said: «mine»") })
}

// TestPlaceKey: a place's key part reads back as itself, old keys (a bare
// chat id) keep their meaning, and nothing else reads as a place.
func TestPlaceKey(t *testing.T) {
	for _, p := range []place{{111, 0}, {-1001234567890, 0}, {-1001234567890, 7}, {0, 0}} {
		got, err := parsePlace(p.String())
		if err != nil || got != p {
			t.Errorf("%v: %v %v", p, got, err)
		}
	}
	for _, s := range []string{"", "x", "1:", "1:0", "1:-2", "01", "1:07", "1:2:3", "+1", "1 "} {
		if p, err := parsePlace(s); err == nil {
			t.Errorf("%q read as %v", s, p)
		}
	}
}

// FuzzPlace: whatever parses prints back to the same key.
func FuzzPlace(f *testing.F) {
	for _, s := range []string{"111", "-1001234567890:7", "1:0", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parsePlace(s)
		if err == nil && p.String() != s {
			t.Fatalf("%q read as %v, written %q", s, p, p.String())
		}
	})
}

// TestTopicFields: which messages are in a topic.
func TestTopicFields(t *testing.T) {
	cases := []struct {
		name, msg string
		thread    int
		title     string
	}{
		{"topic message", `{"chat":{"is_forum":true},"message_thread_id":5,"is_topic_message":true,"reply_to_message":{"forum_topic_created":{"name":"T"}}}`, 5, "T"},
		{"General: no thread id", `{"chat":{"is_forum":true}}`, 0, ""},
		{"General's own id", `{"chat":{"is_forum":true},"message_thread_id":1,"is_topic_message":true}`, 0, ""},
		{"reply thread of a plain group", `{"chat":{"is_forum":false},"message_thread_id":9}`, 0, ""},
		{"reply thread in a tgForum's General", `{"chat":{"is_forum":true},"message_thread_id":9}`, 0, ""},
		{"topic created", `{"chat":{"is_forum":true},"message_thread_id":8,"forum_topic_created":{"name":"New"}}`, 8, "New"},
		{"topic renamed", `{"chat":{"is_forum":true},"message_thread_id":8,"is_topic_message":true,"forum_topic_edited":{"name":"Renamed"}}`, 8, "Renamed"},
		{"icon edited", `{"chat":{"is_forum":true},"message_thread_id":8,"is_topic_message":true,"forum_topic_edited":{}}`, 8, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tf := readTopics([]byte(`{"update_id":1,"message":` + c.msg + `}`)).Message
			if tf.thread() != c.thread || tf.name() != c.title {
				t.Fatalf("thread %d name %q", tf.thread(), tf.name())
			}
		})
	}
	// A field of the wrong type elsewhere loses nothing here.
	tf := readTopics([]byte(`{"update_id":1,"edited_message":{"message_thread_id":"x"},"message":{"chat":{"is_forum":true},"message_thread_id":5,"is_topic_message":true}}`)).Message
	if tf.thread() != 5 {
		t.Fatalf("thread %d", tf.thread())
	}
}

// TestTelegramUploadsAreTheSenders: a member's photo from Telegram is
// stored as their upload (until a message names it, only they may fetch
// it), its message says who sent it, and the diagnostic of a file that
// could not be passed on says so too.
func TestTelegramUploadsAreTheSenders(t *testing.T) {
	st := testStack(t, time.Millisecond, nil)
	_, bob, _ := st.members(t)
	id := st.fake.pushMedia(222, 222, `"photo":`+st.fake.photoSizes(640, 480, 7)+`,"caption":"look"`)
	st.fake.waitFor("the photo's answer", func() bool { return st.fake.hasTextLocked(222, "You said: «look»") })
	m, ok := st.passedMessage(t, 222, id)
	if !ok || len(m.Attachments) != 1 || m.By != bob.ID {
		t.Fatalf("the photo's message %+v", m)
	}
	var up struct {
		By []string `json:"by"`
	}
	_ = st.db.View(func(tx *bolt.Tx) error {
		return json.Unmarshal(tx.Bucket([]byte("uploads")).Get([]byte(m.Attachments[0].SHA256)), &up)
	})
	if len(up.By) != 1 || up.By[0] != bob.ID {
		t.Fatalf("the upload is %v's, want bob's (%s)", up.By, bob.ID)
	}
	st.fake.pushMedia(222, 222, `"video":{"file_id":"BAAD","file_unique_id":"x1","width":1,"height":1,"duration":1}`)
	st.fake.waitFor("the refusal", func() bool { return st.fake.hasTextLocked(222, "I cannot read") })
	chat := st.bot.currentChat(222)
	var by []string
	st.fake.waitFor("the diagnostic", func() bool {
		st.fake.mu.Unlock()
		defer st.fake.mu.Lock()
		frames, err := st.svc.Events(context.Background(), chat, 0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		by = nil
		for _, fr := range frames {
			var ev chats.Event
			if json.Unmarshal(fr.Raw, &ev) != nil {
				continue
			}
			if p, ok := ev.Payload.(*chats.Diagnosed); ok && p.Diagnostic != nil && p.Diagnostic.Kind == runtime.DiagMedia {
				by = append(by, ev.By)
			}
		}
		return len(by) > 0
	})
	for _, b := range by {
		if b != bob.ID {
			t.Fatalf("diagnostics by %v, want bob's", by)
		}
	}
}

// groupPress presses button data on message msg of the test group as
// user and returns the answer the presser sees.
func (st *stack) groupPress(t *testing.T, user int64, msg int, data string) string {
	t.Helper()
	n := st.fake.answerCount()
	st.fake.pushGroupCallback(tgGroup, user, msg, data)
	var ans string
	st.fake.waitFor("the press answered", func() bool {
		if len(st.fake.answers) > n {
			ans = st.fake.answers[n]
			return true
		}
		return false
	})
	return ans
}

// TestGroupRecoveryOnlyByAskerOrOwner: a shell call carol started in the
// group's chat is cut short by a restart; its Repeat/Skip buttons answer
// bob (a member who writes to the same chat) that nothing waits, and the
// recovery still waits; carol's Skip answers it.
func TestGroupRecoveryOnlyByAskerOrOwner(t *testing.T) {
	st := testStack(t, time.Millisecond, nil)
	st.members(t)
	st.fake.pushGroup(tgGroup, 222, "@fake_bot hello", atBot, 0, 0)
	st.fake.waitFor("bob's answer", func() bool { return st.fake.hasTextLocked(tgGroup, "You said: «hello»") })
	st.fake.pushGroup(tgGroup, 333, `@fake_bot /tool shell {"command":"sleep 30"}`, atBot, 0, 0)
	st.fake.waitFor("approval", func() bool { return st.fake.hasTextLocked(tgGroup, "wants to run shell") })
	st.fake.mu.Lock()
	ask := st.fake.msgWithLocked(tgGroup, "wants to run shell")
	allow := buttons(t, ask)[0]
	st.fake.mu.Unlock()
	if ans := st.groupPress(t, 333, ask.ID, allow); ans != "Allowed." {
		t.Fatalf("carol's allow: %q", ans)
	}
	chat := st.bot.currentChat(tgGroup)
	st.restart(t)
	st.fake.waitFor("recovery", func() bool { return st.fake.hasTextLocked(tgGroup, "The gateway stopped while shell") })
	st.fake.mu.Lock()
	rec := st.fake.msgWithLocked(tgGroup, "The gateway stopped while shell")
	b := buttons(t, rec)
	st.fake.mu.Unlock()
	if ans := st.groupPress(t, 222, rec.ID, b[1]); !strings.Contains(ans, "no longer waiting") {
		t.Fatalf("bob's skip: %q", ans)
	}
	if sn := st.snapshot(t, chat); len(sn.Recoveries) != 1 {
		t.Fatalf("bob's press answered carol's recovery: %+v", sn.Recoveries)
	}
	if ans := st.groupPress(t, 333, rec.ID, b[1]); ans != "Answered: skip." {
		t.Fatalf("carol's skip: %q", ans)
	}
}

// BenchmarkChatAt finds a topic's chat among n mapped topics: one key
// read (cur/<place>), so the cost stays flat as topics grow.
func BenchmarkChatAt(b *testing.B) {
	for _, n := range []int{1, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			st := newStackWith(b, stackOpts{delay: time.Millisecond})
			if err := st.bot.write(func(bk stateBucket) error {
				for i := 1; i <= n; i++ {
					if err := bk.Put(tgKey("cur", place{tgForum, i + 1}), []byte(fmt.Sprintf("c_%016x", i))); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			want := fmt.Sprintf("c_%016x", n)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if st.bot.chatAt(place{tgForum, n + 1}) != want {
					b.Fatal("wrong chat")
				}
			}
		})
	}
}

// TestTranscriptBeforeItsRecord: a transcript can come before the update
// that passed its voice note on has committed its record (a quick
// transcriber, a slow disk); the message's client id says where it came
// from, so the reply still goes, to the voice note, in its topic.
func TestTranscriptBeforeItsRecord(t *testing.T) {
	st := newStackWith(t, stackOpts{delay: time.Millisecond})
	// A follower of its own, with no goroutine: nothing else touches it.
	f := &follower{b: st.bot, key: followKey{place{tgForum, 31}, ids.NewChat()}, signal: make(chan struct{}, 1), ctx: st.bot.ctx}
	m := &chats.Message{ID: "m_1", ClientID: fmt.Sprintf("tg:%d:77", tgForum),
		Attachments: []chats.Attachment{{Type: "audio/ogg", Transcript: "buy milk"}}}
	if err := f.transcribed(&chats.MessageTranscribed{Message: m}); err != nil {
		t.Fatal(err)
	}
	st.fake.mu.Lock()
	defer st.fake.mu.Unlock()
	got := st.fake.msgWithLocked(tgForum, "buy milk")
	if got == nil || got.ReplyTo != 77 || got.Thread != 31 {
		t.Fatalf("the transcript went as %+v", got)
	}
}
