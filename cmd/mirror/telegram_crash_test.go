package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// tgFake is a small Bot API on 127.0.0.1 for the process tests: getMe, a
// long-polling getUpdates, sendMessage and editMessageText (recording what
// a person would see), sendChatAction. While hold is set, a sendMessage
// waits until the hold is lifted, or until its connection dies with the
// process that made it, in which case Telegram never got it.
type tgFake struct {
	srv *httptest.Server

	mu      sync.Mutex
	changed chan struct{}
	updates []string
	nextUpd int
	nextMsg int
	msgs    []*tgMsg
	hold    bool
	held    int
	// offsets are the offsets getUpdates was asked for; files what getFile
	// and the download path serve, by file_id; holdFile, when set, is a
	// file whose download stops after half its bytes until the hold is
	// lifted or the process that asked dies (fileHeld counts them).
	offsets  []int
	files    map[string][]byte
	holdFile string
	fileHeld int
}

type tgMsg struct {
	ID   int
	Text string
}

func newTGFake(t *testing.T) *tgFake {
	f := &tgFake{changed: make(chan struct{}), nextMsg: 500}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *tgFake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// push queues a private text message from user 111 and returns its id.
func (f *tgFake) push(text string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextUpd++
	f.nextMsg++
	id := f.nextMsg
	f.updates = append(f.updates, fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":111,"is_bot":false,"first_name":"Ann"},"chat":{"id":111,"type":"private","first_name":"Ann"},"date":1767225600,"text":%q}}`,
		f.nextUpd, id, text))
	f.notifyLocked()
	return id
}

func (f *tgFake) setHold(h bool) {
	f.mu.Lock()
	f.hold = h
	f.notifyLocked()
	f.mu.Unlock()
}

// waitFor waits (bounded) until cond, run under the lock, holds.
func (f *tgFake) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		f.mu.Lock()
		ok, ch := cond(), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			f.mu.Lock()
			defer f.mu.Unlock()
			var got []string
			for _, m := range f.msgs {
				got = append(got, fmt.Sprintf("%d:%.60q", m.ID, m.Text))
			}
			t.Fatalf("timed out waiting for %s; messages %v", what, got)
		}
	}
}

// withLocked returns the messages containing sub.
func (f *tgFake) withLocked(sub string) []*tgMsg {
	var out []*tgMsg
	for _, m := range f.msgs {
		if strings.Contains(m.Text, sub) {
			out = append(out, m)
		}
	}
	return out
}

func (f *tgFake) answer(w http.ResponseWriter, result string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"ok":true,"result":%s}`, result)
}

func (f *tgFake) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/file/bot") {
		f.serveFile(w, r)
		return
	}
	_ = r.ParseForm()
	switch path.Base(r.URL.Path) {
	case "getFile":
		id := r.Form.Get("file_id")
		f.mu.Lock()
		data, ok := f.files[id]
		f.mu.Unlock()
		if !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			fmt.Fprint(w, `{"ok":false,"error_code":400,"description":"Bad Request: invalid file_id"}`)
			return
		}
		f.answer(w, fmt.Sprintf(`{"file_id":%q,"file_unique_id":"u%s","file_size":%d,"file_path":"photos/%s.jpg"}`, id, id, len(data), id))
	case "getMe":
		f.answer(w, `{"id":42,"is_bot":true,"first_name":"Fake","username":"fake_bot"}`)
	case "getUpdates":
		offset, _ := strconv.Atoi(r.Form.Get("offset"))
		f.mu.Lock()
		f.offsets = append(f.offsets, offset)
		f.notifyLocked()
		f.mu.Unlock()
		for {
			f.mu.Lock()
			var out []string
			for i, u := range f.updates {
				if i+1 >= offset {
					out = append(out, u)
				}
			}
			ch := f.changed
			f.mu.Unlock()
			if len(out) > 0 {
				f.answer(w, "["+strings.Join(out, ",")+"]")
				return
			}
			select {
			case <-ch:
			case <-r.Context().Done():
				return
			}
		}
	case "sendMessage":
		for {
			f.mu.Lock()
			hold, ch := f.hold, f.changed
			if hold {
				f.held++
				f.notifyLocked()
				ch = f.changed
			}
			f.mu.Unlock()
			if !hold {
				break
			}
			select {
			case <-ch:
				f.mu.Lock()
				f.held--
				f.mu.Unlock()
				continue
			case <-r.Context().Done():
				f.mu.Lock()
				f.held--
				f.mu.Unlock()
				return // the process died: Telegram never got it
			}
		}
		f.mu.Lock()
		f.nextMsg++
		m := &tgMsg{ID: f.nextMsg, Text: r.Form.Get("text")}
		f.msgs = append(f.msgs, m)
		f.notifyLocked()
		f.mu.Unlock()
		b, _ := json.Marshal(m.Text)
		f.answer(w, fmt.Sprintf(`{"message_id":%d,"date":1,"chat":{"id":111,"type":"private"},"text":%s}`, m.ID, b))
	case "editMessageText":
		id, _ := strconv.Atoi(r.Form.Get("message_id"))
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, m := range f.msgs {
			if m.ID == id {
				if m.Text == r.Form.Get("text") {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(400)
					fmt.Fprint(w, `{"ok":false,"error_code":400,"description":"Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"}`)
					return
				}
				m.Text = r.Form.Get("text")
				f.notifyLocked()
				b, _ := json.Marshal(m.Text)
				f.answer(w, fmt.Sprintf(`{"message_id":%d,"date":1,"chat":{"id":111,"type":"private"},"text":%s}`, m.ID, b))
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		fmt.Fprint(w, `{"ok":false,"error_code":400,"description":"Bad Request: message to edit not found"}`)
	case "sendChatAction", "answerCallbackQuery":
		f.answer(w, "true")
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(404)
		fmt.Fprint(w, `{"ok":false,"error_code":404,"description":"Not Found: method not found"}`)
	}
}

// tgConfig writes a runtime.yaml with Telegram on, polling the fake, and
// the builtin model pausing delay between pieces.
func tgConfig(t *testing.T, f *tgFake, delay string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "runtime.yaml")
	y := fmt.Sprintf("providers: [{name: builtin, kind: builtin, delay: %s}]\ntelegram:\n  enabled: true\n  api_endpoint: %s/bot%%s/%%s\n  allowed_users: [111]\n",
		delay, f.srv.URL)
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const tgToken = "TELEGRAM_BOT_TOKEN=123456:process-test-token"

// TestTelegramKillMinusNineBeforeFirstReplyText runs the gateway as a real
// process with Telegram on: killed with SIGKILL while a new chat's first
// reply text is on its way (Telegram never gets it), the next start still
// follows the chat and delivers the answer, once, with no new message from
// the person; what they write next is answered too.
func TestTelegramKillMinusNineBeforeFirstReplyText(t *testing.T) {
	f := newTGFake(t)
	cfg := tgConfig(t, f, "1ms")
	data := filepath.Join(t.TempDir(), "data")
	p := startChild(t, cfg, data, "MIRROR_AS_MAIN=1", tgToken)
	f.setHold(true)
	f.push("answer me")
	f.waitFor(t, "the first reply text on its way", func() bool { return f.held > 0 })
	p.kill()
	f.setHold(false)

	p = startChild(t, cfg, data, "MIRROR_AS_MAIN=1", tgToken)
	const want = "You said: «answer me»"
	f.waitFor(t, "the answer after the restart", func() bool {
		ms := f.withLocked("answer me")
		return len(ms) == 1 && strings.Contains(ms[0].Text, want)
	})
	f.push("and again")
	f.waitFor(t, "the next answer", func() bool { return len(f.withLocked("You said: «and again»")) == 1 })
	if n := len(f.withLocked("answer me")); n != 1 {
		t.Fatalf("the first answer is in %d messages", n)
	}
	p.stop(t)
}

// TestTelegramKillMinusNineMidStream: killed with SIGKILL while a reply
// streams into its message and a second message waits in the queue, the
// next start finishes the reply in that same message (nothing cut off left
// behind, no second copy), marks the queued message picked up and answers
// it in a message of its own.
func TestTelegramKillMinusNineMidStream(t *testing.T) {
	f := newTGFake(t)
	cfg := tgConfig(t, f, "150ms") // the long answer streams for ~13 s
	data := filepath.Join(t.TempDir(), "data")
	p := startChild(t, cfg, data, "MIRROR_AS_MAIN=1", tgToken)
	f.push("long please")
	var reply *tgMsg
	f.waitFor(t, "the reply streaming", func() bool {
		if ms := f.withLocked("Here is a longer answer"); len(ms) == 1 {
			reply = ms[0]
		}
		return reply != nil
	})
	f.push("second")
	var ack *tgMsg
	var seen string
	f.waitFor(t, "the Queued reply, then one more edit of the reply", func() bool {
		if ack == nil {
			if ms := f.withLocked("Queued"); len(ms) == 1 {
				ack, seen = ms[0], reply.Text
			}
			return false
		}
		// The follower records the Queued reply before its next edit.
		return reply.Text != seen
	})
	if st := chatState(t, p.addr); st != "running" {
		t.Fatalf("the reply is %s before the kill, want running (a slow machine?)", st)
	}
	p.kill()

	// The same data, the model fast now.
	p = startChild(t, tgConfig(t, f, "5ms"), data, "MIRROR_AS_MAIN=1", tgToken)
	f.waitFor(t, "the reply finished in its message, the second answered", func() bool {
		return strings.Contains(reply.Text, "why.") && strings.Contains(ack.Text, "Picked up") &&
			len(f.withLocked("You said: «second»")) == 1
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.msgs) != 3 {
		var got []string
		for _, m := range f.msgs {
			got = append(got, fmt.Sprintf("%.50q", m.Text))
		}
		t.Fatalf("%d messages, want the reply, the Queued note and the second answer: %v", len(f.msgs), got)
	}
	p.stop(t)
}

// chatState is the state of the gateway's only chat, from /api/chats.
func chatState(t *testing.T, addr string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/chats", nil)
	req.Header.Set("Authorization", "Bearer "+benchToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct{ Chats []struct{ State string } }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Chats) != 1 {
		t.Fatalf("chats %+v: %v", list, err)
	}
	return list.Chats[0].State
}
