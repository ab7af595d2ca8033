package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
)

func pngOf(t testing.TB, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// post sends body to /api/uploads and returns the status and decoded answer.
func (st *stack) post(t testing.TB, header http.Header, contentType, name string, body io.Reader, length int64) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", st.http.URL+"/api/uploads?name="+name, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1, map[string]any{"err": err.Error()}
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// endless counts what is read of it and never ends.
type endless struct{ n atomic.Int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	e.n.Add(int64(len(p)))
	return len(p), nil
}

// POST /api/uploads: authenticated, bounded by its kind's limit (declared
// or streamed), sniffed against the declared type, and answered with the
// attachment.
func TestUploadRoute(t *testing.T) {
	st := newStack(t, func(c *config.Config) { c.Attachments.MaxDocumentBytes = 64 << 10 })
	img := pngOf(t, 7, 3)
	for _, tc := range []struct {
		name     string
		header   http.Header
		typ      string
		body     []byte
		length   int64
		status   int
		contains string
	}{
		{"unauthenticated", nil, "image/png", img, int64(len(img)), http.StatusUnauthorized, ""},
		{"the login cookie from another site", http.Header{"Cookie": {CookieName + "=" + testToken}, "Origin": {"http://evil.example"}},
			"image/png", img, int64(len(img)), http.StatusForbidden, "forbidden"},
		{"the login cookie from Mirror's page", http.Header{"Cookie": {CookieName + "=" + testToken}, "Sec-Fetch-Site": {"same-origin"}},
			"image/png", img, int64(len(img)), http.StatusCreated, `"height":3`},
		{"an image", bearer(), "image/png", img, int64(len(img)), http.StatusCreated, `"width":7`},
		{"a page declared as an image", bearer(), "image/png", []byte("<html><script>x</script>"), 24, http.StatusBadRequest, "text/html"},
		{"declared length over the limit", bearer(), "text/plain", bytes.Repeat([]byte("a"), 65<<10), 65 << 10, http.StatusRequestEntityTooLarge, "65536"},
		{"no media type", bearer(), "", []byte("hi"), 2, http.StatusBadRequest, "media type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := st.post(t, tc.header, tc.typ, "f", bytes.NewReader(tc.body), tc.length)
			raw, _ := json.Marshal(out)
			if status != tc.status || !strings.Contains(string(raw), tc.contains) {
				t.Fatalf("status %d %s; want %d with %q", status, raw, tc.status, tc.contains)
			}
		})
	}
	// A body of unknown length past the limit is cut off: the server stops
	// reading long before the client would stop sending.
	body := &endless{}
	status, out := st.post(t, bearer(), "text/plain", "big.txt", body, -1)
	if status != -1 && status != http.StatusRequestEntityTooLarge {
		t.Fatalf("endless body: %d %v", status, out)
	}
	if n := body.n.Load(); n > 64<<20 {
		t.Fatalf("the server read %d bytes of an endless body", n)
	}
}

// message.send names uploads over the WebSocket; an unknown one is refused
// with unknown_attachment; a pending message drops its attachments with
// message.edit.
func TestSendAttachmentsOverWebSocket(t *testing.T) {
	st := newStack(t, nil)
	status, out := st.post(t, bearer(), "image/png", "a.png", bytes.NewReader(pngOf(t, 2, 2)), -1)
	if status != http.StatusCreated {
		t.Fatalf("upload: %d %v", status, out)
	}
	sum := out["attachment"].(map[string]any)["sha256"].(string)
	cl := st.connect()
	cl.send(map[string]any{"type": "chat.create", "title": "Photos"})
	id := cl.expect("chat.created")["chat"].(map[string]any)["id"].(string)
	cl.send(map[string]any{"type": "chat.open", "chat": id})
	cl.expect("chat.snapshot")
	cl.send(map[string]any{"type": "message.send", "chat": id, "attachments": []string{strings.Repeat("0", 64)}, "client_id": "x", "req": "1"})
	if e := cl.expect("error"); e["code"] != "unknown_attachment" || e["req"] != "1" {
		t.Fatalf("unknown attachment: %v", e)
	}
	cl.send(map[string]any{"type": "message.send", "chat": id, "attachments": []string{sum}, "client_id": "y", "req": "2"})
	acc := cl.expect("message.accepted")
	atts, _ := acc["message"].(map[string]any)["attachments"].([]any)
	if len(atts) != 1 || atts[0].(map[string]any)["sha256"] != sum || atts[0].(map[string]any)["name"] != "a.png" {
		t.Fatalf("accepted %v", acc)
	}
	cl.expect("turn.finished")
}

// message.edit with attachments sets which attachments a still-pending
// message keeps.
func TestEditDropsAttachmentsOverWebSocket(t *testing.T) {
	slow := time.Second
	st := newStack(t, func(c *config.Config) { c.Providers[0].Delay = &slow })
	_, out := st.post(t, bearer(), "text/plain", "n.txt", strings.NewReader("notes"), -1)
	sum := out["attachment"].(map[string]any)["sha256"].(string)
	cl := st.connect()
	cl.send(map[string]any{"type": "chat.create", "title": "Edits"})
	id := cl.expect("chat.created")["chat"].(map[string]any)["id"].(string)
	cl.send(map[string]any{"type": "chat.open", "chat": id})
	cl.expect("chat.snapshot")
	cl.send(map[string]any{"type": "message.send", "chat": id, "text": "first", "client_id": "1"})
	cl.expect("turn.started")
	cl.send(map[string]any{"type": "message.send", "chat": id, "text": "second", "attachments": []string{sum}, "client_id": "2"})
	m := cl.expect("message.accepted")["message"].(map[string]any)
	if m["state"] != "pending" || len(m["attachments"].([]any)) != 1 {
		t.Fatalf("pending %v", m)
	}
	cl.send(map[string]any{"type": "message.edit", "chat": id, "message": m["id"], "attachments": []string{}})
	up := cl.expect("message.updated")["message"].(map[string]any)
	if up["text"] != "second" || up["attachments"] != nil {
		t.Fatalf("updated %v", up)
	}
	cl.send(map[string]any{"type": "turn.stop", "chat": id})
	cl.expect("turn.finished")
}

// slowBody yields head, waits pause, then yields tail: a file that takes
// longer than limits.body_timeout to arrive.
type slowBody struct {
	parts [][]byte
	pause time.Duration
}

func (b *slowBody) Read(p []byte) (int, error) {
	if len(b.parts) == 0 {
		return 0, io.EOF
	}
	if len(b.parts) == 1 {
		time.Sleep(b.pause) // the client is slow: not a synchronisation
	}
	n := copy(p, b.parts[0])
	b.parts = b.parts[1:]
	return n, nil
}

// An upload may take longer than limits.body_timeout (meant for forms):
// it gets that plus its kind's limit at 64 KiB/s.
func TestUploadOutlivesTheFormBodyTimeout(t *testing.T) {
	st := newStack(t, func(c *config.Config) {
		c.Limits.BodyTimeout = 200 * time.Millisecond
		c.Attachments.MaxDocumentBytes = 128 << 10 // 2 s more at 64 KiB/s
	})
	body := &slowBody{parts: [][]byte{[]byte("first line\n"), []byte("second line\n")}, pause: 600 * time.Millisecond}
	status, out := st.post(t, bearer(), "text/plain", "slow.txt", body, -1)
	if status != http.StatusCreated {
		t.Fatalf("slow upload: %d %v", status, out)
	}
}

// Every upload the server refuses leaves a diagnostic (kind media, named
// browser, saying why) in the chat the composer named with ?chat=, and
// nothing else in it; an accepted upload leaves none (issue 16 item 7).
func TestUploadRefusalsLeaveADiagnostic(t *testing.T) {
	st := newStack(t, func(c *config.Config) { c.Attachments.MaxDocumentBytes = 64 << 10 })
	ctx := context.Background()
	img := pngOf(t, 7, 3)
	corrupt := []byte("\x89PNG\r\n\x1a\nnot really a png")
	for _, tc := range []struct {
		name    string
		typ     string
		body    []byte
		length  int64
		outcome string // "" for no diagnostic
	}{
		{"an image", "image/png", img, int64(len(img)), ""},
		{"declared length over the limit", "text/plain", bytes.Repeat([]byte("a"), 65<<10), 65 << 10, runtime.OutcomeTooLarge},
		{"streamed past the limit", "text/plain", bytes.Repeat([]byte("a"), 65<<10), -1, runtime.OutcomeTooLarge},
		{"a corrupt image", "image/png", corrupt, int64(len(corrupt)), runtime.OutcomeBadFile},
		{"a page declared as an image", "image/png", []byte("<html><script>x</script>"), 24, runtime.OutcomeBadFile},
		{"an empty file", "text/plain", nil, 0, runtime.OutcomeBadFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := st.svc.Create(ctx, "attach", "", chats.Origin{})
			if err != nil {
				t.Fatal(err)
			}
			status, out := st.post(t, bearer(), tc.typ, "f&chat="+c.ID, bytes.NewReader(tc.body), tc.length)
			if (status == http.StatusCreated) != (tc.outcome == "") {
				t.Fatalf("status %d %v", status, out)
			}
			frames, err := st.svc.Events(ctx, c.ID, 0, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, fr := range frames {
				var ev chats.Event
				if err := json.Unmarshal(fr.Raw, &ev); err != nil {
					t.Fatal(err)
				}
				p, ok := ev.Payload.(*chats.Diagnosed)
				if !ok {
					continue
				}
				d := p.Diagnostic
				if d == nil || d.Kind != runtime.DiagMedia || d.Name != "browser" || d.Error == "" || d.Error != runtime.DiagError(errors.New(d.Error)) {
					t.Fatalf("diagnostic %s", fr.Raw)
				}
				if msg, _ := out["message"].(string); !strings.Contains(msg, strings.TrimSuffix(d.Error, "…")[:20]) {
					t.Errorf("the diagnostic says %q, the person was told %q", d.Error, msg)
				}
				got = append(got, d.Outcome)
			}
			if strings.Join(got, " ") != tc.outcome {
				t.Fatalf("diagnostics %q, want %q", got, tc.outcome)
			}
		})
	}
}
