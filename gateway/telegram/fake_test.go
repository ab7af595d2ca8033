package telegram

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"image"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAPI is a Bot API server on 127.0.0.1: real HTTP, the library's form
// encoding, Telegram's error texts, one message per interval per chat and a
// global rate enforced with 429 retry_after, and a getUpdates long poll that
// blocks until an update is pushed or the request's context ends.
type fakeAPI struct {
	t        testing.TB
	srv      *httptest.Server
	interval time.Duration // per chat; sends closer than this get 429
	global   int           // sends per second in all

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced on every change
	updates    []json.RawMessage
	ids        []int
	nextID     int
	nextUpdate int
	msgs       map[int64][]*fakeMsg
	lastSend   map[int64]time.Time
	recent     []time.Time
	n429       int
	calls      map[string]int
	offsets    []int // offset of each getUpdates
	answers    []string
	webhook    map[string]string
	edits      map[int64]int
	sendsAt    map[int64][]time.Time
	// pollFail and sendFail, when set, answer every getUpdates, or every
	// sendMessage and editMessageText, with that Bot API error.
	pollFail *fakeErr
	sendFail *fakeErr
	// all is when every send (sendMessage, editMessageText) was accepted,
	// in all chats, for the sliding-window check.
	all []time.Time
	// dead are tokens of "killed" bots: their requests are dropped (the
	// connection closed) and reach nothing, as if the process had died.
	dead map[string]bool
	// hold, when it says so for a request, keeps it waiting until the
	// test calls releaseHeld or its bot is killed; held counts them.
	hold     func(token, method string, chat int64) bool
	held     int
	released chan struct{}
	// lose, when it says so, has a request done but its answer lost: the
	// connection closes instead (Telegram got it, the network broke).
	lose func(method string, chat int64) bool
	// files are what getFile and the download path serve, by file_id;
	// sent are the files the bot sent (sendPhoto, sendDocument).
	files     map[string]*fakeFile
	sent      []*fakeSent
	downloads map[string]int
	// actions are the sendChatAction requests (typing) with their topic.
	actions []fakeAction
}

// fakeAction is one sendChatAction: its chat and message_thread_id (0: none).
type fakeAction struct {
	Chat   int64
	Thread int
}

// fakeFile is a file Telegram holds: its bytes, or (for a file too big to
// build) only its size. failDownload answers its download with that status.
type fakeFile struct {
	data         []byte
	size         int64
	failDownload int
}

// fakeSent is a file the bot sent, as the server parsed it.
type fakeSent struct {
	Method  string
	Chat    int64
	Thread  int // message_thread_id (0: none)
	ID      int
	Caption string
	Name    string
	Type    string // the part's Content-Type
	Data    []byte
}

// addFile makes a file Telegram holds and returns its file_id.
func (f *fakeAPI) addFile(data []byte, size int64) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.files == nil {
		f.files = map[string]*fakeFile{}
	}
	id := fmt.Sprintf("BQAC%d", len(f.files)+1)
	if size == 0 {
		size = int64(len(data))
	}
	f.files[id] = &fakeFile{data: data, size: size}
	return id
}

// sentFiles returns the files the bot sent so far.
func (f *fakeAPI) sentFiles() []*fakeSent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*fakeSent(nil), f.sent...)
}

// serveFile serves /file/bot<token>/<file_path>, as the Bot API does for
// a path getFile gave.
func (f *fakeAPI) serveFile(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/file/bot")
	token, fp, _ := strings.Cut(rest, "/")
	f.mu.Lock()
	dead := f.dead[token]
	id := strings.TrimPrefix(fp, "documents/")
	file := f.files[id]
	if f.downloads == nil {
		f.downloads = map[string]int{}
	}
	f.downloads[id]++
	f.notifyLocked()
	f.mu.Unlock()
	switch {
	case dead:
		drop(w)
	case token != botToken && !strings.HasPrefix(token, "123456:"), file == nil:
		http.NotFound(w, r)
	case file.failDownload != 0:
		w.WriteHeader(file.failDownload)
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(file.data)))
		w.Write(file.data)
	}
}

// serveUpload parses a sendPhoto or sendDocument as the server does
// (multipart/form-data with the file under "photo" or "document"), checks
// the Bot API's limits and records what a person would see.
func (f *fakeAPI) serveUpload(w http.ResponseWriter, r *http.Request, m string, chat int64) {
	field, limit := "document", int64(50<<20)
	if m == "sendPhoto" {
		field, limit = "photo", 10<<20
	}
	file, hdr, err := r.FormFile(field)
	if err != nil {
		f.fail(w, 400, "Bad Request: there is no "+field+" in the request", "")
		return
	}
	defer file.Close()
	data := make([]byte, hdr.Size)
	if _, err := io.ReadFull(file, data); err != nil {
		f.fail(w, 400, "Bad Request: can't read the file", "")
		return
	}
	if int64(len(data)) > limit {
		f.fail(w, 400, "Bad Request: file is too big", "")
		return
	}
	if m == "sendPhoto" {
		cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			f.fail(w, 400, "Bad Request: IMAGE_PROCESS_FAILED", "")
			return
		}
		if cfg.Width+cfg.Height > 10000 || cfg.Width > 20*cfg.Height || cfg.Height > 20*cfg.Width {
			f.fail(w, 400, "Bad Request: PHOTO_INVALID_DIMENSIONS", "")
			return
		}
	}
	caption := r.FormValue("caption")
	if utf16Len(caption) > 1024 {
		f.fail(w, 400, "Bad Request: message caption is too long", "")
		return
	}
	thread, ok := fakeThread(r)
	if !ok {
		f.fail(w, 400, "Bad Request: message thread not found", "")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.limitLocked(w, chat) {
		return
	}
	f.nextID++
	f.sent = append(f.sent, &fakeSent{Method: m, Chat: chat, Thread: thread, ID: f.nextID, Caption: caption, Name: hdr.Filename, Type: hdr.Header.Get("Content-Type"), Data: data})
	f.msgs[chat] = append(f.msgs[chat], &fakeMsg{ID: f.nextID, Text: caption, Thread: thread, At: time.Now()})
	f.notifyLocked()
	f.reply(w, fmt.Sprintf(`{"message_id":%d,"date":1,"chat":{"id":%d,"type":"private"},"caption":%q}`, f.nextID, chat, caption))
}

// kill makes the bot of token dead to the fake, from now on.
func (f *fakeAPI) kill(token string) {
	f.mu.Lock()
	if f.dead == nil {
		f.dead = map[string]bool{}
	}
	f.dead[token] = true
	f.notifyLocked()
	f.mu.Unlock()
}

// releaseHeld lets every held request go on.
func (f *fakeAPI) releaseHeld() {
	f.mu.Lock()
	close(f.released)
	f.released = make(chan struct{})
	f.hold = nil
	f.notifyLocked()
	f.mu.Unlock()
}

// maxInWindow is the most sends accepted in any sliding window of d.
func (f *fakeAPI) maxInWindow(d time.Duration) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maxInWindow(f.all, d)
}

// maxInWindow is the most of the sorted times ts in any window (t-d, t].
func maxInWindow(ts []time.Time, d time.Duration) int {
	best, lo := 0, 0
	for hi := range ts {
		for ts[hi].Sub(ts[lo]) >= d {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// drop closes the request's connection without an answer.
func drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// lostWriter swallows an answer that is to be lost.
type lostWriter struct{ h http.Header }

func (l *lostWriter) Header() http.Header         { return l.h }
func (l *lostWriter) Write(p []byte) (int, error) { return len(p), nil }
func (l *lostWriter) WriteHeader(int)             {}

// fakeErr is a Bot API error answer.
type fakeErr struct {
	code int
	desc string
}

// Telegram's texts for the errors the tests provoke (wire-formats §1.3).
var (
	errConflict = &fakeErr{409, "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}
	errInternal = &fakeErr{500, "Internal Server Error"}
)

func (f *fakeAPI) setPollFail(e *fakeErr) {
	f.mu.Lock()
	f.pollFail = e
	f.notifyLocked()
	f.mu.Unlock()
}

func (f *fakeAPI) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// pushRaw queues an update whose body after the update_id is raw JSON
// (possibly malformed for its fields).
func (f *fakeAPI) pushRaw(raw string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextUpdate++
	id := f.nextUpdate
	f.updates = append(f.updates, json.RawMessage(fmt.Sprintf(`{"update_id":%d,%s}`, id, raw)))
	f.ids = append(f.ids, id)
	f.notifyLocked()
	return id
}

// pushGroup pushes a message in group chat (negative id) with the given
// entities JSON ("" for none) and, when replyTo is set, as a reply to that
// message of replyFrom (a user id; 42 is the bot). It returns the message_id.
func (f *fakeAPI) pushGroup(chat, user int64, text, entities string, replyTo int, replyFrom int64) int {
	id := nextMsgID()
	extra := ""
	if entities != "" {
		extra += `,"entities":` + entities
	}
	if replyTo != 0 {
		extra += fmt.Sprintf(`,"reply_to_message":{"message_id":%d,"from":{"id":%d,"is_bot":%t,"first_name":"R","username":"r"},"chat":{"id":%d,"type":"supergroup"},"date":1767225500,"text":"earlier"}`,
			replyTo, replyFrom, replyFrom == 42, chat)
	}
	f.push("message", fmt.Sprintf(`{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"U%d"},"chat":{"id":%d,"type":"supergroup","title":"Team"},"date":1767225600,"text":%q%s}`,
		id, user, user, chat, text, extra))
	return id
}

// pushReply pushes a private message that replies to message replyTo.
func (f *fakeAPI) pushReply(chat, user int64, text string, replyTo int) int {
	id := nextMsgID()
	ents := ""
	if strings.HasPrefix(text, "/") {
		ents = fmt.Sprintf(`,"entities":[{"type":"bot_command","offset":0,"length":%d}]`, len(strings.Fields(text)[0]))
	}
	f.push("message", fmt.Sprintf(`{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"U"},"chat":{"id":%d,"type":"private"},"date":1767225600,"text":%q%s,"reply_to_message":{"message_id":%d,"date":1767225500,"chat":{"id":%d,"type":"private"},"text":"earlier"}}`,
		id, user, chat, text, ents, replyTo, chat))
	return id
}

// poke wakes every waitFor (for a condition outside the fake).
func (f *fakeAPI) poke() {
	f.mu.Lock()
	f.notifyLocked()
	f.mu.Unlock()
}

// answerCount returns the texts of answerCallbackQuery so far.
func (f *fakeAPI) answerCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.answers)
}

type fakeMsg struct {
	ID      int
	Text    string // visible text
	Raw     string
	Markup  string
	ReplyTo int
	// Thread is the forum topic it was sent to (message_thread_id; 0: none).
	Thread int
	// At is when the message last changed (sent or edited).
	At time.Time
}

func newFake(t testing.TB, interval time.Duration, global int) *fakeAPI {
	f := &fakeAPI{t: t, interval: interval, global: global, changed: make(chan struct{}), nextID: 1000, released: make(chan struct{}),
		msgs: map[int64][]*fakeMsg{}, lastSend: map[int64]time.Time{}, calls: map[string]int{},
		edits: map[int64]int{}, sendsAt: map[int64][]time.Time{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) endpoint() string { return f.srv.URL + "/bot%s/%s" }

func (f *fakeAPI) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// waitFor waits until cond (run under the lock) holds, woken by changes
// to the fake and, since a cond may also read the bot's own state (a chat
// gone idle, a follow landed) which changes without a call reaching the
// fake, re-checked every few milliseconds; bounded by 60 s (generous: a
// loaded machine under -race is slow, and a wait that holds ends as soon
// as its condition does).
func (f *fakeAPI) waitFor(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		f.mu.Lock()
		ok, ch := cond(), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-deadline:
			f.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// push queues an update; its update_id is assigned here.
func (f *fakeAPI) push(kind string, body string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextUpdate++
	id := f.nextUpdate
	f.updates = append(f.updates, json.RawMessage(fmt.Sprintf(`{"update_id":%d,%q:%s}`, id, kind, body)))
	f.ids = append(f.ids, id)
	f.notifyLocked()
	return id
}

var msgSeq struct {
	sync.Mutex
	n int
}

func nextMsgID() int {
	msgSeq.Lock()
	defer msgSeq.Unlock()
	msgSeq.n++
	return msgSeq.n
}

// pushText pushes a text message and returns its message_id.
func (f *fakeAPI) pushText(chat, user int64, text string) int {
	id := nextMsgID()
	ents := ""
	if strings.HasPrefix(text, "/") {
		n := len(strings.Fields(text)[0])
		ents = fmt.Sprintf(`,"entities":[{"type":"bot_command","offset":0,"length":%d}]`, n)
	}
	typ := "private"
	if chat < 0 {
		typ = "group"
	}
	f.push("message", fmt.Sprintf(`{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"U%d"},"chat":{"id":%d,"type":%q},"date":1767225600,"text":%q%s}`,
		id, user, user, chat, typ, text, ents))
	return id
}

func (f *fakeAPI) pushEdit(chat, user int64, msgID int, text string) {
	f.push("edited_message", fmt.Sprintf(`{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"U"},"chat":{"id":%d,"type":"private"},"date":1767225600,"edit_date":1767225700,"text":%q}`,
		msgID, user, chat, text))
}

func (f *fakeAPI) pushCallback(chat, user int64, msgID int, data string) {
	f.push("callback_query", fmt.Sprintf(`{"id":"cb%d","from":{"id":%d,"is_bot":false,"first_name":"U"},"chat_instance":"1","data":%q,"message":{"message_id":%d,"date":1767225600,"chat":{"id":%d,"type":"private"},"text":"x"}}`,
		nextMsgID(), user, data, msgID, chat))
}

func (f *fakeAPI) reply(w http.ResponseWriter, result string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"ok":true,"result":%s}`, result)
}

func (f *fakeAPI) fail(w http.ResponseWriter, code int, desc string, params string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if params != "" {
		params = `,"parameters":` + params
	}
	fmt.Fprintf(w, `{"ok":false,"error_code":%d,"description":%q%s}`, code, desc, params)
}

var tagRE = regexp.MustCompile(`</?([a-z]+)[^>]*>`)

// visible checks Telegram HTML the way the server does (known tags,
// properly nested) and returns the text a person sees.
func visible(s string) (string, bool) {
	var stack []string
	for _, m := range tagRE.FindAllStringSubmatch(s, -1) {
		switch m[1] {
		case "b", "i", "s", "u", "code", "pre", "a":
		default:
			return "", false
		}
		if strings.HasPrefix(m[0], "</") {
			if len(stack) == 0 || stack[len(stack)-1] != m[1] {
				return "", false
			}
			stack = stack[:len(stack)-1]
		} else {
			stack = append(stack, m[1])
		}
	}
	if len(stack) > 0 || strings.ContainsAny(tagRE.ReplaceAllString(s, ""), "<>") {
		return "", false
	}
	return html.UnescapeString(tagRE.ReplaceAllString(s, "")), true
}

// logf logs to the test that made the fake. A fuzz target's testing.F must
// not be written to from a handler while its inputs run (the race detector
// says so), so under FuzzUpdate the line is dropped: n429 still counts it.
func (f *fakeAPI) logf(format string, args ...any) {
	if _, fuzz := f.t.(*testing.F); !fuzz {
		f.t.Logf(format, args...)
	}
}

// limitLocked applies the flood limits to one send to chat.
func (f *fakeAPI) limitLocked(w http.ResponseWriter, chat int64) bool {
	now := time.Now()
	if last, ok := f.lastSend[chat]; ok && now.Sub(last) < f.interval*9/10 {
		f.n429++
		f.logf("429 chat %d: %v since the last send", chat, now.Sub(last))
		f.notifyLocked()
		w.Header().Set("Retry-After", "1")
		f.fail(w, 429, "Too Many Requests: retry after 1", `{"retry_after":1}`)
		return false
	}
	cut := 0
	for cut < len(f.recent) && now.Sub(f.recent[cut]) > time.Second {
		cut++
	}
	f.recent = f.recent[cut:]
	if len(f.recent) >= f.global {
		f.n429++
		f.logf("429: %d sends in the last second", len(f.recent))
		f.notifyLocked()
		f.fail(w, 429, "Too Many Requests: retry after 1", `{"retry_after":1}`)
		return false
	}
	f.recent = append(f.recent, now)
	f.all = append(f.all, now)
	f.lastSend[chat] = now
	f.sendsAt[chat] = append(f.sendsAt[chat], now)
	return true
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/file/bot") {
		f.serveFile(w, r)
		return
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		if err := r.ParseMultipartForm(64 << 20); err != nil {
			f.fail(w, 400, "Bad Request: can't parse multipart request", "")
			return
		}
	}
	if err := r.ParseForm(); err != nil {
		f.fail(w, 400, "Bad Request: can't parse request", "")
		return
	}
	m := path.Base(r.URL.Path)
	token := strings.TrimPrefix(path.Dir(r.URL.Path), "/bot")
	chat, _ := strconv.ParseInt(r.Form.Get("chat_id"), 10, 64)
	f.mu.Lock()
	dead, hold, lose := f.dead[token], f.hold, f.lose
	f.mu.Unlock()
	if dead {
		drop(w)
		return
	}
	if hold != nil && hold(token, m, chat) {
		f.mu.Lock()
		f.held++
		f.notifyLocked()
		f.mu.Unlock()
		for {
			f.mu.Lock()
			rel, ch, dead := f.released, f.changed, f.dead[token]
			f.mu.Unlock()
			if dead {
				drop(w)
				return
			}
			select {
			case <-rel:
			case <-ch:
				continue
			case <-r.Context().Done():
				return
			}
			break
		}
	}
	if lose != nil && lose(m, chat) {
		orig := w
		w = &lostWriter{h: http.Header{}}
		defer drop(orig)
	}
	f.mu.Lock()
	f.calls[m]++
	f.mu.Unlock()
	switch m {
	case "getMe":
		f.reply(w, `{"id":42,"is_bot":true,"first_name":"Fake","username":"fake_bot"}`)
	case "getUpdates":
		offset, _ := strconv.Atoi(r.Form.Get("offset"))
		f.mu.Lock()
		f.offsets = append(f.offsets, offset)
		fail := f.pollFail
		f.notifyLocked()
		f.mu.Unlock()
		if fail != nil {
			f.fail(w, fail.code, fail.desc, "")
			return
		}
		for {
			f.mu.Lock()
			var out []json.RawMessage
			for i, id := range f.ids {
				if id >= offset {
					out = append(out, f.updates[i])
				}
			}
			ch := f.changed
			f.mu.Unlock()
			if len(out) > 0 {
				b, _ := json.Marshal(out)
				f.reply(w, string(b))
				return
			}
			select {
			case <-ch:
			case <-r.Context().Done():
				return
			}
		}
	case "sendMessage", "editMessageText":
		f.mu.Lock()
		fail := f.sendFail
		f.mu.Unlock()
		if fail != nil {
			f.fail(w, fail.code, fail.desc, "")
			return
		}
		text, mode := r.Form.Get("text"), r.Form.Get("parse_mode")
		if markup := r.Form.Get("reply_markup"); markup != "" && markup != "null" {
			var kb struct {
				Rows [][]struct {
					Data string `json:"callback_data"`
				} `json:"inline_keyboard"`
			}
			_ = json.Unmarshal([]byte(markup), &kb)
			for _, row := range kb.Rows {
				for _, b := range row {
					if len(b.Data) > 64 {
						f.fail(w, 400, "Bad Request: BUTTON_DATA_INVALID", "")
						return
					}
				}
			}
		}
		vis := text
		if strings.EqualFold(mode, "HTML") {
			var ok bool
			if vis, ok = visible(text); !ok {
				f.fail(w, 400, "Bad Request: can't parse entities: Can't find end of the entity starting at byte offset 0", "")
				return
			}
		}
		if strings.TrimSpace(vis) == "" {
			f.fail(w, 400, "Bad Request: message text is empty", "")
			return
		}
		if utf16Len(vis) > 4096 {
			f.fail(w, 400, "Bad Request: message is too long", "")
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		markup := r.Form.Get("reply_markup")
		if m == "editMessageText" {
			id, _ := strconv.Atoi(r.Form.Get("message_id"))
			var msg *fakeMsg
			for _, x := range f.msgs[chat] {
				if x.ID == id {
					msg = x
				}
			}
			if msg == nil {
				f.fail(w, 400, "Bad Request: message to edit not found", "")
				return
			}
			if msg.Raw == text && msg.Markup == markup {
				f.fail(w, 400, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message", "")
				return
			}
			if !f.limitLocked(w, chat) {
				return
			}
			msg.Text, msg.Raw, msg.Markup, msg.At = vis, text, markup, time.Now()
			f.edits[chat]++
			f.notifyLocked()
			f.reply(w, fmt.Sprintf(`{"message_id":%d,"date":1,"chat":{"id":%d,"type":"private"},"text":%q}`, id, chat, vis))
			return
		}
		thread, ok := fakeThread(r)
		if !ok {
			f.fail(w, 400, "Bad Request: message thread not found", "")
			return
		}
		if !f.limitLocked(w, chat) {
			return
		}
		f.nextID++
		reply, _ := strconv.Atoi(r.Form.Get("reply_to_message_id"))
		msg := &fakeMsg{ID: f.nextID, Text: vis, Raw: text, Markup: markup, ReplyTo: reply, Thread: thread, At: time.Now()}
		f.msgs[chat] = append(f.msgs[chat], msg)
		f.notifyLocked()
		f.reply(w, fmt.Sprintf(`{"message_id":%d,"date":1,"chat":{"id":%d,"type":"private"},"text":%q}`, msg.ID, chat, vis))
	case "deleteMessage":
		id, _ := strconv.Atoi(r.Form.Get("message_id"))
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, x := range f.msgs[chat] {
			if x.ID == id {
				f.msgs[chat] = append(f.msgs[chat][:i], f.msgs[chat][i+1:]...)
				f.notifyLocked()
				f.reply(w, "true")
				return
			}
		}
		f.fail(w, 400, "Bad Request: message to delete not found", "")
	case "getFile":
		id := r.Form.Get("file_id")
		f.mu.Lock()
		file := f.files[id]
		f.mu.Unlock()
		switch {
		case file == nil:
			f.fail(w, 400, "Bad Request: invalid file_id", "")
		case file.size > 20<<20:
			f.fail(w, 400, "Bad Request: file is too big", "")
		default:
			f.reply(w, fmt.Sprintf(`{"file_id":%q,"file_unique_id":"u%s","file_size":%d,"file_path":"documents/%s"}`, id, id, file.size, id))
		}
	case "sendPhoto", "sendDocument":
		f.serveUpload(w, r, m, chat)
	case "answerCallbackQuery":
		f.mu.Lock()
		f.answers = append(f.answers, r.Form.Get("text"))
		f.notifyLocked()
		f.mu.Unlock()
		f.reply(w, "true")
	case "sendChatAction":
		if r.Form.Get("action") != "typing" {
			f.fail(w, 400, "Bad Request: wrong parameter action in request", "")
			return
		}
		thread, ok := fakeThread(r)
		if !ok {
			f.fail(w, 400, "Bad Request: message thread not found", "")
			return
		}
		f.mu.Lock()
		f.actions = append(f.actions, fakeAction{Chat: chat, Thread: thread})
		f.notifyLocked()
		f.mu.Unlock()
		f.reply(w, "true")
	case "setWebhook":
		f.mu.Lock()
		f.webhook = map[string]string{"url": r.Form.Get("url"), "secret": r.Form.Get("secret_token")}
		f.notifyLocked()
		f.mu.Unlock()
		f.reply(w, "true")
	default:
		f.fail(w, 404, "Not Found: method not found", "")
	}
}

// texts returns the visible texts of the bot's messages in chat.
func (f *fakeAPI) textsLocked(chat int64) []string {
	var out []string
	for _, m := range f.msgs[chat] {
		out = append(out, m.Text)
	}
	return out
}

func (f *fakeAPI) texts(chat int64) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.textsLocked(chat)
}

func (f *fakeAPI) hasTextLocked(chat int64, sub string) bool {
	for _, m := range f.msgs[chat] {
		if strings.Contains(m.Text, sub) {
			return true
		}
	}
	return false
}

func (f *fakeAPI) msgWithLocked(chat int64, sub string) *fakeMsg {
	for _, m := range f.msgs[chat] {
		if strings.Contains(m.Text, sub) {
			return m
		}
	}
	return nil
}

// fakeThread reads a send's message_thread_id as the server does: absent
// is no topic (a chat without topics, or a forum's General topic); 1, the
// General topic's own id, is refused with "message thread not found"
// (tdlib/telegram-bot-api#798), as is anything but a topic's id.
func fakeThread(r *http.Request) (int, bool) {
	s := r.Form.Get("message_thread_id")
	if s == "" {
		return 0, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 1 {
		return 0, false
	}
	return n, true
}

// pushForum pushes a message of user in forum supergroup chat: in topic
// thread (as a topic's messages come: message_thread_id, is_topic_message,
// and a reply_to_message that is the topic's creation, named name), or in
// the General topic for thread 0 (no thread id at all). entities is JSON
// ("" for none). It returns the message_id.
func (f *fakeAPI) pushForum(chat, user int64, thread int, name, text, entities string) int {
	id := nextMsgID()
	extra := ""
	if entities != "" {
		extra += `,"entities":` + entities
	}
	if thread != 0 {
		extra += fmt.Sprintf(`,"message_thread_id":%d,"is_topic_message":true,"reply_to_message":{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"C"},"chat":{"id":%d,"type":"supergroup","title":"Forum","is_forum":true},"date":1767225500,"message_thread_id":%d,"is_topic_message":true,"forum_topic_created":{"name":%q,"icon_color":7322096}}`,
			thread, thread, user, chat, thread, name)
	}
	f.push("message", fmt.Sprintf(`{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"U%d"},"chat":{"id":%d,"type":"supergroup","title":"Forum","is_forum":true},"date":1767225600,"text":%q%s}`,
		id, user, user, chat, text, extra))
	return id
}

// pushTopicEvent pushes the service message of a topic's creation (kind
// "forum_topic_created") or rename ("forum_topic_edited") by user.
func (f *fakeAPI) pushTopicEvent(chat, user int64, thread int, kind, name string) {
	body := fmt.Sprintf(`{"name":%q}`, name)
	if kind == "forum_topic_created" {
		body = fmt.Sprintf(`{"name":%q,"icon_color":7322096}`, name)
	}
	f.push("message", fmt.Sprintf(`{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"U%d"},"chat":{"id":%d,"type":"supergroup","title":"Forum","is_forum":true},"date":1767225600,"message_thread_id":%d,"is_topic_message":true,%q:%s}`,
		nextMsgID(), user, user, chat, thread, kind, body))
}

// pushGroupCallback pushes a button press by user on message msgID of
// group chat.
func (f *fakeAPI) pushGroupCallback(chat, user int64, msgID int, data string) {
	f.push("callback_query", fmt.Sprintf(`{"id":"cb%d","from":{"id":%d,"is_bot":false,"first_name":"U"},"chat_instance":"1","data":%q,"message":{"message_id":%d,"date":1767225600,"chat":{"id":%d,"type":"supergroup","title":"Team"},"text":"x"}}`,
		nextMsgID(), user, data, msgID, chat))
}
