package chats

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/config/datadir"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
	"github.com/mirror-gateway/mirror/runtime/provider/openai"
)

// attachEnv is a service whose model is model, with a blob store, over a
// bbolt file it can reopen (a restart).
type attachEnv struct {
	t     *testing.T
	path  string
	data  string
	model provider.Provider
	kind  string
	svc   *Service
	store *Store
	close func()
	// engine, when set, builds the turn engine instead of the one-model
	// default (more models, roles, tools).
	engine func(a *attachEnv) *runtime.Engine
}

func newAttachEnv(t *testing.T, model provider.Provider, kind string, engine ...func(a *attachEnv) *runtime.Engine) *attachEnv {
	t.Helper()
	data, err := datadir.Prepare(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	a := &attachEnv{t: t, path: filepath.Join(t.TempDir(), "mirror.db"), data: data, model: model, kind: kind}
	if len(engine) > 0 {
		a.engine = engine[0]
	}
	a.start()
	t.Cleanup(a.stop)
	return a
}

func (a *attachEnv) start() {
	a.t.Helper()
	db, err := OpenDB(a.path, time.Second)
	if err != nil {
		a.t.Fatal(err)
	}
	store, err := NewStore(db)
	if err != nil {
		a.t.Fatal(err)
	}
	var eng *runtime.Engine
	if a.engine != nil {
		eng = a.engine(a)
	} else if eng, err = runtime.NewEngine([]*runtime.Model{{Name: "m", ProvName: "p", ProvKind: a.kind, Provider: a.model, Remote: "gpt-4o", Window: 128000, MaxOutput: 200}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default", Reflect: "default"}, 4); err != nil {
		a.t.Fatal(err)
	}
	blobs, err := OpenBlobs(a.data, BlobLimits{Image: 1 << 20, Document: 1 << 20, Audio: 1 << 20}, 24*time.Hour)
	if err != nil {
		a.t.Fatal(err)
	}
	a.store = store
	a.svc = New(Options{Store: store, Turner: eng, Idle: time.Minute, DataDir: a.data, Blobs: blobs})
	a.close = func() { store.Close(); db.Close() }
}

func (a *attachEnv) stop() {
	if a.svc == nil {
		return
	}
	a.svc.Close(bg)
	a.close()
	a.svc = nil
}

// turn sends text with the attachments sums and waits for its turn's end.
func (a *attachEnv) turn(s *sub, chat, text string, sums ...string) {
	a.t.Helper()
	n := count(s.events(), EvTurnFinished) + count(s.events(), EvTurnFailed)
	if _, err := a.svc.SendAttached(bg, chat, text, fmt.Sprintf("k%d", time.Now().UnixNano()), "", sums, Origin{}); err != nil {
		a.t.Fatal(err)
	}
	evs := s.waitFor(a.t, "the turn's end", func(evs []*Event) bool { return count(evs, EvTurnFinished)+count(evs, EvTurnFailed) > n })
	if count(evs, EvTurnFailed) > 0 {
		a.t.Fatalf("the turn failed: %+v", evs[len(evs)-1])
	}
}

// upload stores data as an upload, as the composer sends one.
func (a *attachEnv) upload(data []byte, mediaType, name string) Attachment {
	a.t.Helper()
	att, err := a.svc.Upload(bg, bytes.NewReader(data), mediaType, name)
	if err != nil {
		a.t.Fatal(err)
	}
	return att
}

// openChat creates a chat and opens it for a new subscriber.
func (a *attachEnv) openChat() (Chat, *sub) {
	a.t.Helper()
	c, err := a.svc.Create(bg, "test", "", Origin{})
	if err != nil {
		a.t.Fatal(err)
	}
	s := newSub()
	if err := a.svc.Open(bg, c.ID, nil, s, ""); err != nil {
		a.t.Fatal(err)
	}
	return c, s
}

// imageURLs returns the image_url parts of a request's user messages, and
// whether some user message was empty (no text and no parts).
func imageURLs(t *testing.T, msgs []json.RawMessage) (urls []string, empty bool) {
	t.Helper()
	for _, raw := range msgs {
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if m.Role != "user" {
			continue
		}
		var parts []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL *struct {
				URL string `json:"url"`
			} `json:"image_url"`
		}
		if json.Unmarshal(m.Content, &parts) != nil {
			var s string
			if json.Unmarshal(m.Content, &s) == nil && strings.TrimSpace(s) == "" {
				empty = true
			}
			continue
		}
		if len(parts) == 0 {
			empty = true
		}
		for _, p := range parts {
			switch {
			case p.Type == "image_url" && p.ImageURL != nil:
				urls = append(urls, p.ImageURL.URL)
			case p.Type == "text" && strings.TrimSpace(p.Text) == "":
				empty = true
			}
		}
	}
	return urls, empty
}

// An uploaded PNG named by a message reaches an OpenAI server over HTTP as
// an image_url part carrying its base64 data URL, read from the blob store
// when the request is built; a message with the image and no text reaches
// it as the image alone, never as an empty message; and after a restart
// (the chat reloaded from bbolt) the conversation so far is sent as the
// same bytes again.
func TestAttachedImageReachesOpenAIAndStaysByteStable(t *testing.T) {
	f := &playOpenAI{}
	a := newAttachEnv(t, openai.New(openai.Config{Name: "p", BaseURL: f.serve(t)}), config.KindOpenAI)
	png := pngBytes(t, 4, 5)
	att := a.upload(png, "image/png", "a.png")
	if att.Width != 4 || att.Height != 5 {
		t.Fatalf("upload's pixel size: %+v", att)
	}
	c, s := a.openChat()
	a.turn(s, c.ID, "what is this?", att.SHA256)
	a.turn(s, c.ID, "", att.SHA256) // the image alone

	want := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for i, want := range [][]string{{want}, {want, want}} {
		urls, empty := imageURLs(t, reqs[i])
		if strings.Join(urls, "|") != strings.Join(want, "|") {
			t.Errorf("request %d: image_url parts %d (%.60q), want %d", i+1, len(urls), urls, len(want))
		}
		if empty {
			t.Errorf("request %d carries an empty user message: %s", i+1, reqs[i])
		}
	}

	a.stop()
	a.start()
	s2 := newSub()
	if err := a.svc.Open(bg, c.ID, nil, s2, ""); err != nil {
		t.Fatal(err)
	}
	a.turn(s2, c.ID, "and now?")
	reqs = f.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	// Every message the turn before the restart sent is sent again, byte
	// for byte, in its place.
	before, after := reqs[1], reqs[2]
	if len(after) < len(before) {
		t.Fatalf("after the restart %d messages, before %d", len(after), len(before))
	}
	for i := range before {
		if !bytes.Equal(before[i], after[i]) {
			t.Fatalf("message %d differs after the restart:\nbefore %.300s\nafter  %.300s", i, before[i], after[i])
		}
	}
	if urls, _ := imageURLs(t, after); len(urls) != 2 {
		t.Fatalf("after the restart %d images, want 2", len(urls))
	}
}

// A blob changed under its name never reaches the model: the part checks
// the bytes against the stored sha256 and the turn fails plainly.
func TestAChangedBlobIsNotSent(t *testing.T) {
	f := &playOpenAI{}
	a := newAttachEnv(t, openai.New(openai.Config{Name: "p", BaseURL: f.serve(t)}), config.KindOpenAI)
	att := a.upload(pngBytes(t, 4, 5), "image/png", "a.png")
	p := filepath.Join(a.data, "blobs", att.SHA256[:2], att.SHA256)
	other := pngBytes(t, 5, 4)
	if len(other) != int(att.Size) {
		t.Skipf("the test needs a same-size replacement (%d vs %d bytes)", len(other), att.Size)
	}
	if err := os.WriteFile(p, other, 0o600); err != nil {
		t.Fatal(err)
	}
	c, s := a.openChat()
	if _, err := a.svc.SendAttached(bg, c.ID, "what is this?", "k", "", []string{att.SHA256}, Origin{}); err != nil {
		t.Fatal(err)
	}
	evs := s.waitFor(t, "the turn's end", func(evs []*Event) bool { return count(evs, EvTurnFinished)+count(evs, EvTurnFailed) > 0 })
	if count(evs, EvTurnFailed) != 1 {
		t.Fatalf("the turn did not fail: %+v", evs[len(evs)-1])
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d requests reached the model", n)
	}
}

// The built-in model answers describing the attachment from its stored
// row: kind, media type and pixel size, with no network at all.
func TestBuiltinDescribesAStoredAttachment(t *testing.T) {
	a := newAttachEnv(t, builtin.New(0), config.KindBuiltin)
	att := a.upload(pngBytes(t, 4, 5), "image/png", "a.png")
	c, s := a.openChat()
	a.turn(s, c.ID, "", att.SHA256)
	var answer string
	for _, ev := range s.events() {
		if m := ev.Message(); m != nil && m.Role == provider.RoleAssistant && m.State == MsgDone {
			answer = m.Text
		}
	}
	for _, want := range []string{"a.png: image, image/png", "4×5 pixels"} {
		if !strings.Contains(answer, want) {
			t.Errorf("the answer %q does not say %q", answer, want)
		}
	}
}
