package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// updateSeeds are real update shapes (wire-formats §1.5, the Bot API's
// Update, Message, MessageEntity and CallbackQuery): texts with entities
// in UTF-16 units, captions, edits, button presses, group, supergroup and
// forum messages, and the poison update of issue 14. User 111 has access;
// 222 has not; 42 is the bot (@fake_bot).
var updateSeeds = []string{
	`{"update_id":1,"message":{"message_id":42,"from":{"id":111,"is_bot":false,"first_name":"Ann","username":"ann","language_code":"en"},"chat":{"id":111,"type":"private","first_name":"Ann","username":"ann"},"date":1767225600,"text":"/start hi","entities":[{"type":"bot_command","offset":0,"length":6}]}}`,
	`{"update_id":2,"message":{"message_id":43,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private"},"date":1767225600,"text":"hello 😀 **bold** https://example.org","entities":[{"type":"bold","offset":9,"length":8},{"type":"url","offset":18,"length":19}]}}`,
	`{"update_id":3,"message":{"message_id":44,"from":{"id":222,"is_bot":false,"first_name":"Eve","last_name":"\u001b[2J","username":"eve"},"chat":{"id":222,"type":"private"},"date":1767225600,"text":"let me in"}}`,
	`{"update_id":4,"message":{"message_id":45,"from":{"id":222,"is_bot":false,"first_name":"Eve"},"chat":{"id":-1001,"type":"supergroup","title":"Team"},"date":1767225600,"text":"@fake_bot@fake_bot","entities":[{"type":"mention","offset":9,"length":9},{"type":"mention","offset":0,"length":9}]}}`,
	`{"update_id":5,"message":{"message_id":46,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":-1001,"type":"supergroup","title":"Team"},"date":1767225600,"text":"@fake_bot@fake_bot what now","entities":[{"type":"mention","offset":9,"length":9},{"type":"mention","offset":0,"length":9}]}}`,
	`{"update_id":6,"message":{"message_id":47,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":-1001,"type":"supergroup","title":"Team"},"date":1767225600,"photo":[{"file_id":"AgAC","file_unique_id":"AQAD","width":90,"height":67,"file_size":1234}],"caption":"@fake_bot what is this?","caption_entities":[{"type":"mention","offset":0,"length":9}]}}`,
	`{"update_id":7,"message":{"message_id":48,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private"},"date":1767225600,"sticker":{"file_id":"CAAC","file_unique_id":"AgAD","type":"regular","width":512,"height":512,"is_animated":false,"is_video":false}}}`,
	`{"update_id":8,"edited_message":{"message_id":43,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private"},"date":1767225600,"edit_date":1767225700,"text":"hello, edited"}}`,
	`{"update_id":9,"edited_message":{"message_id":46,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":-1001,"type":"supergroup","title":"Team"},"date":1767225600,"edit_date":1767225700,"text":"@fake_bot edited","entities":[{"type":"mention","offset":0,"length":900}]}}`,
	`{"update_id":10,"callback_query":{"id":"4382bfdwdsb323b2d9","from":{"id":111,"is_bot":false,"first_name":"Ann"},"message":{"message_id":43,"from":{"id":42,"is_bot":true,"first_name":"Fake","username":"fake_bot"},"chat":{"id":111,"type":"private"},"date":1767225601,"text":"Pick","reply_markup":{"inline_keyboard":[[{"text":"Yes","callback_data":"y:a_c_0123456789abcdef_1"}]]}},"chat_instance":"-123456789","data":"y:a_c_0123456789abcdef_1"}}`,
	`{"update_id":11,"callback_query":{"id":"cb2","from":{"id":111,"is_bot":false,"first_name":"Ann"},"message":{"chat":{"id":111,"type":"private"},"message_id":40,"date":0},"chat_instance":"-1","data":"x:c_1:m1"}}`,
	`{"update_id":12,"callback_query":{"id":"cb3","from":{"id":222,"is_bot":false,"first_name":"Eve"},"chat_instance":"-1","data":"c:c_0123456789abcdef"}}`,
	`{"update_id":13,"message":{"message_id":49,"message_thread_id":7,"is_topic_message":true,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":-1002,"type":"supergroup","title":"Forum","is_forum":true},"date":1767225600,"text":"/status@fake_bot","entities":[{"type":"bot_command","offset":0,"length":16}],"reply_to_message":{"message_id":7,"date":1767225500,"chat":{"id":-1002,"type":"supergroup"},"forum_topic_created":{"name":"Topic","icon_color":7322096}}}}`,
	`{"update_id":14,"message":{"message_id":50,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":-1003,"type":"group","title":"Old group"},"date":1767225600,"text":"go on","reply_to_message":{"message_id":1001,"from":{"id":42,"is_bot":true,"first_name":"Fake","username":"fake_bot"},"chat":{"id":-1003,"type":"group"},"date":1767225500,"text":"earlier"}}}`,
	`{"update_id":15,"message":{"message_id":51,"from":{"id":1087968824,"is_bot":true,"first_name":"Group","username":"GroupAnonymousBot"},"sender_chat":{"id":-1001,"type":"supergroup","title":"Team"},"chat":{"id":-1001,"type":"supergroup","title":"Team"},"date":1767225600,"text":"@fake_bot hi","entities":[{"type":"mention","offset":0,"length":9}]}}`,
	`{"update_id":16,"message":{"message_id":52,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":-1001,"type":"supergroup","title":"Team"},"date":1767225600,"text":"😀😀 hey","entities":[{"type":"text_mention","offset":1,"length":3,"user":{"id":42,"is_bot":true,"first_name":"Fake"}},{"type":"bold","offset":-3,"length":99999999999}]}}`,
	`{"update_id":17,"channel_post":{"message_id":1,"sender_chat":{"id":-1009,"type":"channel","title":"News"},"chat":{"id":-1009,"type":"channel","title":"News"},"date":1767225600,"text":"@fake_bot"}}`,
	`{"update_id":18,"my_chat_member":{"chat":{"id":-1001,"type":"supergroup","title":"Team"},"from":{"id":111,"is_bot":false,"first_name":"Ann"},"date":1767225600,"old_chat_member":{"user":{"id":42,"is_bot":true,"first_name":"Fake"},"status":"left"},"new_chat_member":{"user":{"id":42,"is_bot":true,"first_name":"Fake"},"status":"member"}}}`,
	`{"update_id":19,"message":{"message_id":"not a number","from":{"id":111,"is_bot":false,"first_name":"A"},"chat":{"id":111,"type":"private"}}}`,
	`{"update_id":20,"message":{"message_id":53,"from":{"id":111,"is_bot":false,"first_name":"A"},"chat":{"id":111,"type":"private"},"date":1,"text":"x","entities":{"type":"bold"}}}`,
	`{"update_id":21,"message":{"message_id":54,"date":1}}`,
	`{"update_id":22,"message":null}`,
	`{"update_id":23}`,
	// Media (issue 16): an album's parts, a document, voice, audio, a video
	// note, a sticker with its emoji, a file past 20 MB, an edited caption,
	// a kind the bot cannot read, and broken media fields.
	`{"update_id":24,"message":{"message_id":60,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private"},"date":1767225600,"media_group_id":"13960","photo":[{"file_id":"AgAD1","file_unique_id":"q1","width":90,"height":60,"file_size":1200},{"file_id":"AgAD2","file_unique_id":"q2","width":1280,"height":853,"file_size":98000}],"caption":"compare","caption_entities":[{"type":"bold","offset":0,"length":7}]}}`,
	`{"update_id":25,"message":{"message_id":61,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private"},"date":1767225600,"media_group_id":"13960","photo":[{"file_id":"AgAD3","file_unique_id":"q3","width":1280,"height":853}]}}`,
	`{"update_id":26,"message":{"message_id":62,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private"},"date":1767225600,"document":{"file_id":"BQAD","file_unique_id":"d1","file_name":"../../etc/passwd.pdf","mime_type":"application/pdf","file_size":20480},"caption":"read this"}}`,
	`{"update_id":27,"message":{"message_id":63,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private"},"date":1767225600,"voice":{"file_id":"AwAD","file_unique_id":"v1","duration":4,"mime_type":"audio/ogg","file_size":9000}}}`,
	`{"update_id":28,"message":{"message_id":64,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private"},"date":1767225600,"audio":{"file_id":"CQAD","file_unique_id":"a1","duration":180,"performer":"X","title":"Y","file_name":"y.mp3","mime_type":"audio/mpeg","file_size":3000000}}}`,
	`{"update_id":29,"message":{"message_id":65,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private"},"date":1767225600,"video_note":{"file_id":"DQAD","file_unique_id":"n1","length":240,"duration":5,"file_size":400000}}}`,
	`{"update_id":30,"message":{"message_id":66,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private"},"date":1767225600,"sticker":{"file_id":"CAAD","file_unique_id":"s1","type":"regular","width":512,"height":512,"is_animated":true,"is_video":false,"emoji":"👍"}}}`,
	`{"update_id":31,"message":{"message_id":67,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private"},"date":1767225600,"document":{"file_id":"BQAE","file_unique_id":"d2","file_name":"big.zip","mime_type":"application/zip","file_size":26214400}}}`,
	`{"update_id":32,"edited_message":{"message_id":62,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private"},"date":1767225600,"edit_date":1767225700,"document":{"file_id":"BQAD","file_unique_id":"d1"},"caption":""}}`,
	`{"update_id":33,"edited_message":{"message_id":60,"media_group_id":"13960","from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private"},"date":1767225600,"edit_date":1767225700,"photo":[],"caption":"compare again"}}`,
	`{"update_id":34,"message":{"message_id":68,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private"},"date":1767225600,"video":{"file_id":"BAAD","file_unique_id":"x1","width":1,"height":1,"duration":1},"caption":"watch"}}`,
	`{"update_id":35,"message":{"message_id":69,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private"},"date":1767225600,"media_group_id":"a/b","photo":[{"file_id":"","file_unique_id":"","width":-1,"height":0,"file_size":-5}]}}`,
	`{"update_id":36,"message":{"message_id":70,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private"},"date":1767225600,"photo":"not a list"}}`,
	`{"update_id":37,"message":{"message_id":71,"from":{"id":222,"is_bot":false,"first_name":"Eve"},"chat":{"id":222,"type":"private"},"date":1767225600,"document":{"file_id":"BQAF","file_unique_id":"d3","file_name":"x.pdf","mime_type":"application/pdf","file_size":100}}}`,
	// Forum topics (issue 18): a topic's creation and renames (a name, an
	// icon only), a topic message, the General topic (no thread id; its
	// own id 1), a reply thread of a plain group, a topic album part, an
	// edit in a topic, and forum fields of the wrong type.
	`{"update_id":38,"message":{"message_id":80,"message_thread_id":80,"is_topic_message":true,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":-1002,"type":"supergroup","title":"Forum","is_forum":true},"date":1767225600,"forum_topic_created":{"name":"Plans","icon_color":7322096}}}`,
	`{"update_id":39,"message":{"message_id":81,"message_thread_id":80,"is_topic_message":true,"from":{"id":222,"is_bot":false,"first_name":"Eve"},"chat":{"id":-1002,"type":"supergroup","title":"Forum","is_forum":true},"date":1767225600,"forum_topic_edited":{"name":"Plans, renamed by someone without access"}}}`,
	`{"update_id":40,"message":{"message_id":82,"message_thread_id":80,"is_topic_message":true,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":-1002,"type":"supergroup","title":"Forum","is_forum":true},"date":1767225600,"forum_topic_edited":{"icon_custom_emoji_id":"5312241539987020022"}}}`,
	`{"update_id":41,"message":{"message_id":83,"message_thread_id":80,"is_topic_message":true,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":-1002,"type":"supergroup","title":"Forum","is_forum":true},"date":1767225600,"text":"@fake_bot plan it","entities":[{"type":"mention","offset":0,"length":9}],"reply_to_message":{"message_id":80,"message_thread_id":80,"is_topic_message":true,"date":1767225500,"chat":{"id":-1002,"type":"supergroup","is_forum":true},"forum_topic_created":{"name":"Plans","icon_color":7322096}}}}`,
	`{"update_id":42,"message":{"message_id":84,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":-1002,"type":"supergroup","title":"Forum","is_forum":true},"date":1767225600,"text":"@fake_bot in General","entities":[{"type":"mention","offset":0,"length":9}]}}`,
	`{"update_id":43,"message":{"message_id":85,"message_thread_id":1,"is_topic_message":true,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":-1002,"type":"supergroup","title":"Forum","is_forum":true},"date":1767225600,"forum_topic_edited":{"name":"General, renamed"}}}`,
	`{"update_id":44,"message":{"message_id":86,"message_thread_id":46,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":-1001,"type":"supergroup","title":"Team"},"date":1767225600,"text":"@fake_bot in a reply thread","entities":[{"type":"mention","offset":0,"length":9}]}}`,
	`{"update_id":45,"message":{"message_id":87,"message_thread_id":80,"is_topic_message":true,"media_group_id":"24680","from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":-1002,"type":"supergroup","title":"Forum","is_forum":true},"date":1767225600,"photo":[{"file_id":"AgAD9","file_unique_id":"q9","width":90,"height":60,"file_size":1200}],"caption":"@fake_bot look","caption_entities":[{"type":"mention","offset":0,"length":9}]}}`,
	`{"update_id":46,"edited_message":{"message_id":83,"message_thread_id":80,"is_topic_message":true,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":-1002,"type":"supergroup","title":"Forum","is_forum":true},"date":1767225600,"edit_date":1767225700,"text":"@fake_bot plan it better","entities":[{"type":"mention","offset":0,"length":9}]}}`,
	`{"update_id":47,"message":{"message_id":88,"message_thread_id":"80","is_topic_message":"yes","from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":-1002,"type":"supergroup","is_forum":1},"date":1767225600,"forum_topic_created":{"name":7},"text":"@fake_bot odd fields","entities":[{"type":"mention","offset":0,"length":9}]}}`,
	`[1,2]`,
	`"just a string"`,
	`{"update_id":`,
}

// pushUpdate queues an update object as the fake's next one, its
// update_id replaced by the fake's own; it returns that id.
func (f *fakeAPI) pushUpdate(obj map[string]json.RawMessage) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextUpdate++
	id := f.nextUpdate
	obj["update_id"], _ = json.Marshal(id)
	raw, _ := json.Marshal(obj)
	f.updates = append(f.updates, raw)
	f.ids = append(f.ids, id)
	f.notifyLocked()
	return id
}

// polledPast waits until the bot asks getUpdates for what comes after id:
// it has handled (or quarantined) update id and committed past it.
func (f *fakeAPI) polledPast(t *testing.T, id int) {
	t.Helper()
	deadline := time.After(testWait)
	for {
		f.mu.Lock()
		past := len(f.offsets) > 0 && f.offsets[len(f.offsets)-1] > id
		ch := f.changed
		f.mu.Unlock()
		if past {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("the gateway stopped serving: update %d was not confirmed in %v", id, testWait)
		}
	}
}

// passedOn counts the person's messages the bot has passed on to chats.
func passedOn(db *bolt.DB) int {
	n := 0
	_ = db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, v := c.Seek([]byte("m/")); k != nil && bytes.HasPrefix(k, []byte("m/")); k, v = c.Next() {
			var r sentRecord
			if json.Unmarshal(v, &r) == nil && !r.Reply {
				n++
			}
		}
		return nil
	})
	return n
}

// FuzzUpdate drives the whole path of an update, from its raw JSON bytes
// to its effects: a JSON object goes through the fake Bot API's getUpdates
// and the bot's polling loop, decoding and handling (addressing, access,
// pairing, commands, the chats service); anything else goes to the
// webhook. Whatever the bytes, the gateway keeps serving (the offset moves
// past the update), nothing panics (a quarantined panic is a bug found), an
// unreadable update is quarantined, and someone without access reaches no
// chat.
func FuzzUpdate(f *testing.F) {
	for _, s := range updateSeeds {
		f.Add([]byte(s))
	}
	// Albums are passed on when the test steps this clock, never in the
	// middle of an input's checks.
	clk := newManualClock()
	st := newStackWith(f, stackOpts{delay: time.Millisecond, prep: func(b *Bot) { b.clk = clk }})
	hook := st.bot.WebhookHandler()
	f.Fuzz(func(t *testing.T, raw []byte) {
		for i := 0; i < 10 && clk.step(clk.Now().Add(time.Hour)); i++ {
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
			if json.Valid(raw) {
				obj = map[string]json.RawMessage{"message": raw}
			} else {
				// Not JSON: only a webhook post can carry it.
				req := httptest.NewRequest("POST", "/telegram/webhook", bytes.NewReader(raw))
				req.Header.Set(SecretHeader, "s3cret")
				rec := httptest.NewRecorder()
				hook.ServeHTTP(rec, req)
				if rec.Code != 400 {
					t.Fatalf("webhook answered %d to %q, want 400", rec.Code, raw)
				}
				return
			}
		}
		stranger := false
		for _, k := range []string{"message", "edited_message", "callback_query"} {
			var part struct {
				From *struct {
					ID int64 `json:"id"`
				} `json:"from"`
			}
			if json.Unmarshal(obj[k], &part) == nil && part.From != nil && part.From.ID != 111 {
				stranger = true
			}
		}
		chatsBefore, passedBefore := len(mustList(t, st)), passedOn(st.db)

		id := st.fake.pushUpdate(obj)
		whole := st.fake.update(id)
		st.fake.polledPast(t, id)

		q, err := readQuarantine(st.db)
		if err != nil {
			t.Fatal(err)
		}
		var mine *quarantined
		for i := range q {
			if q[i].UpdateID == id {
				mine = &q[i]
			}
		}
		if mine != nil && mine.Kind == kindPanic {
			t.Fatalf("handling update %s panicked at %s: %s\n%s", whole, mine.At, mine.Error, mine.Stack)
		}
		if mine == nil && !decodes(whole) {
			t.Fatalf("update %s could not be read, and it is not in quarantine", whole)
		}
		if stranger {
			if n := len(mustList(t, st)); n != chatsBefore {
				t.Fatalf("an update of someone without access made a chat (%d → %d): %s", chatsBefore, n, whole)
			}
			if n := passedOn(st.db); n != passedBefore {
				t.Fatalf("an update of someone without access reached a chat: %s", whole)
			}
		}
	})
}

func mustList(t *testing.T, st *stack) []string {
	t.Helper()
	list, err := st.svc.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(list))
	for i, c := range list {
		ids[i] = c.ID
	}
	return ids
}

// update returns the raw update id the fake holds.
func (f *fakeAPI) update(id int) json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, x := range f.ids {
		if x == id {
			return f.updates[i]
		}
	}
	return nil
}

// decodes reports whether raw decodes as one update.
func decodes(raw json.RawMessage) bool {
	ps, err := decodeUpdates(json.RawMessage("[" + string(raw) + "]"))
	return err == nil && len(ps) == 1 && ps[0].bad == nil
}
