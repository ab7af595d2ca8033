package gateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/config"
)

// partsModel is a fake OpenAI-compatible server (the real SSE wire format)
// that reads the parts of the last user message: its text and how many
// image_url parts came with it, each a data: URL of the image's bytes. A
// message whose text contains "question" is held until the test releases
// it, so what is sent after it stays queued.
type partsModel struct {
	srv      *httptest.Server
	requests chan seenUser
	release  chan struct{}
}

type seenUser struct {
	text   string
	images []string // the data: URLs
}

func newPartsModel(t *testing.T) *partsModel {
	p := &partsModel{requests: make(chan seenUser, 100), release: make(chan struct{}, 100)}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&body) != nil {
			http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error","code":null}}`, 400)
			return
		}
		var last seenUser
		for _, m := range body.Messages {
			if m.Role != "user" {
				continue
			}
			last = seenUser{}
			var s string
			if json.Unmarshal(m.Content, &s) == nil {
				last.text = s
				continue
			}
			var parts []struct {
				Type     string `json:"type"`
				Text     string `json:"text"`
				ImageURL *struct {
					URL string `json:"url"`
				} `json:"image_url"`
			}
			_ = json.Unmarshal(m.Content, &parts)
			for _, pt := range parts {
				switch {
				case pt.Type == "text":
					last.text += pt.Text
				case pt.Type == "image_url" && pt.ImageURL != nil:
					last.images = append(last.images, pt.ImageURL.URL)
				}
			}
		}
		p.requests <- last
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		chunk := func(delta, finish string) {
			d, _ := json.Marshal(map[string]any{"content": delta})
			f := "null"
			if finish != "" {
				f = `"` + finish + `"`
			}
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake\",\"choices\":[{\"index\":0,\"delta\":%s,\"logprobs\":null,\"finish_reason\":%s}],\"usage\":null}\n\n", d, f)
			fl.Flush()
		}
		chunk("Seen", "")
		if strings.Contains(last.text, "question") {
			select {
			case <-p.release:
			case <-r.Context().Done():
				return
			}
		}
		chunk(fmt.Sprintf(" %d images.", len(last.images)), "")
		chunk("", "stop")
		fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake\",\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":5,\"total_tokens\":25}}\n\ndata: [DONE]\n\n")
		fl.Flush()
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *partsModel) next(t *testing.T) seenUser {
	t.Helper()
	select {
	case s := <-p.requests:
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for a model request")
		return seenUser{}
	}
}

// login opens the page with the token and waits for the socket.
func login(t *testing.T, ctx context.Context, st *stack) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(st.http.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), testToken),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS("#chat-list")))
	until(t, ctx, "connected", `document.querySelector('#status').dataset.state === 'connected'`)
}

// fileJS is a page expression making a File of b.
func fileJS(b []byte, name, typ string) string {
	return fmt.Sprintf(`new File([Uint8Array.from(atob(%q), c => c.charCodeAt(0))], %q, {type: %q})`, base64.StdEncoding.EncodeToString(b), name, typ)
}

// drop dispatches a drop of files on the conversation, as a drag from the
// desktop ends.
func drop(t *testing.T, ctx context.Context, files ...string) {
	t.Helper()
	js[bool](t, ctx, fmt.Sprintf(`(() => { const dt = new DataTransfer(); for (const f of [%s]) dt.items.add(f);
		const at = document.querySelector('#messages');
		at.dispatchEvent(new DragEvent('dragenter', {dataTransfer: dt, bubbles: true, cancelable: true}));
		at.dispatchEvent(new DragEvent('dragover', {dataTransfer: dt, bubbles: true, cancelable: true}));
		return !at.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true})) })()`, strings.Join(files, ",")))
}

// paste dispatches a paste of files into the message box, as a screenshot
// pastes.
func paste(t *testing.T, ctx context.Context, files ...string) bool {
	t.Helper()
	return js[bool](t, ctx, fmt.Sprintf(`(() => { const dt = new DataTransfer(); for (const f of [%s]) dt.items.add(f);
		return !document.querySelector('#input').dispatchEvent(new ClipboardEvent('paste', {clipboardData: dt, bubbles: true, cancelable: true})) })()`, strings.Join(files, ",")))
}

// storedMessage reads a message as the server stores it: the pending one
// (or the transcript's) with that text, from a fresh chat.open.
func storedMessage(t *testing.T, st *stack, chat, text string) map[string]any {
	t.Helper()
	cl := st.connect()
	defer cl.c.Close()
	cl.send(map[string]any{"type": "chat.open", "chat": chat})
	sn := cl.expect("chat.snapshot")
	for _, key := range []string{"pending", "messages"} {
		list, _ := sn[key].([]any)
		for _, x := range list {
			if m, _ := x.(map[string]any); m != nil && m["text"] == text {
				return m
			}
		}
	}
	t.Fatalf("no stored message %q in %v", text, sn)
	return nil
}

func attachmentNames(m map[string]any) []string {
	var out []string
	list, _ := m["attachments"].([]any)
	for _, x := range list {
		out = append(out, x.(map[string]any)["name"].(string))
	}
	return out
}

// The browser attaches by drag and drop and by paste, uploads with a
// progress bar, shows thumbnails in the composer, the queue and the
// transcript (after a reload too), lets a queued message drop a file,
// refuses bad files in the composer without losing the typed text, and
// renders what the assistant sends (file.sent) and voice transcripts
// (message.transcribed).
func TestBrowserAttachments(t *testing.T) {
	model := newPartsModel(t)
	st := newStack(t, func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "fake", Kind: "openai", BaseURL: model.srv.URL + "/v1"})
		c.Models[0].Provider, c.Models[0].Model = "fake", "fake-model"
		c.Attachments.MaxImageBytes = 4 << 10
	})
	ctx := browser(t)
	login(t, ctx, st)
	click(t, ctx, "#new-chat")
	until(t, ctx, "chat open", `!!document.querySelector('.chat-item.active')`)
	chat := js[string](t, ctx, `document.querySelector('.chat-item.active').dataset.chat`)

	// A turn the model holds, so what follows waits in the queue.
	typeAndSend(t, ctx, "first question")
	if got := model.next(t); got.text != "first question" {
		t.Fatalf("model read %q", got.text)
	}

	// Typed text stays whatever happens to the files.
	do(t, ctx, chromedp.SetValue(chromedp.CSS("#input"), "two pictures"))
	red, blue := pngOf(t, 3, 2), pngOf(t, 4, 5)
	// Each file shows a progress bar while it goes up (watched, not polled:
	// a small file is up at once).
	js[bool](t, ctx, `(() => { window.sawProgress = false; new MutationObserver(() => {
		if (document.querySelector('#attachments li.upload[data-state=uploading] progress.upload-progress[aria-label]')) window.sawProgress = true;
	}).observe(document.querySelector('#attachments'), {childList: true, subtree: true}); return true })()`)
	drop(t, ctx, fileJS(red, "dropped.png", "image/png"))
	if !paste(t, ctx, fileJS(blue, "image.png", "image/png")) {
		t.Fatal("the pasted image was not taken from the clipboard")
	}
	until(t, ctx, "two thumbnails in the composer", `[...document.querySelectorAll('#attachments li.upload[data-state=done] img.thumb')].filter(i => i.complete && i.naturalWidth > 0).length === 2`)
	shot(t, ctx, "composer-thumbnails")
	if !js[bool](t, ctx, `window.sawProgress`) {
		t.Fatal("no progress bar was shown while uploading")
	}
	// Refused: over the image limit (the browser knows it from
	// /api/uploads/limits), and a text declared as an image (the server
	// says no).
	drop(t, ctx, fileJS(make([]byte, 5<<10), "huge.png", "image/png"), fileJS([]byte("just words"), "fake.png", "image/png"))
	until(t, ctx, "two refusals", `document.querySelectorAll('#attachments li.upload[data-state=error] .upload-error[role=alert]').length === 2`)
	errs := js[string](t, ctx, `[...document.querySelectorAll('#attachments .upload-error')].map(e => e.textContent).join(' | ')`)
	if !strings.Contains(errs, "at most 4.0 KB") || !strings.Contains(errs, "text/plain") {
		t.Fatalf("refusals say %q", errs)
	}
	if v := js[string](t, ctx, `document.querySelector('#input').value`); v != "two pictures" {
		t.Fatalf("the typed text became %q", v)
	}
	// A clipboard that holds text pastes the text: no file is taken.
	if js[bool](t, ctx, fmt.Sprintf(`(() => { const dt = new DataTransfer(); dt.setData('text/plain', 'cells'); dt.items.add(%s);
		return !document.querySelector('#input').dispatchEvent(new ClipboardEvent('paste', {clipboardData: dt, bubbles: true, cancelable: true})) })()`, fileJS(red, "cells.png", "image/png"))) {
		t.Fatal("a paste with text was taken as a file")
	}
	for range 2 {
		click(t, ctx, `#attachments li.upload[data-state=error] button.remove-upload`)
	}
	until(t, ctx, "refused files removed", `document.querySelectorAll('#attachments li.upload').length === 2`)
	click(t, ctx, "#send")

	// Queued with both thumbnails; one is removed while it waits.
	until(t, ctx, "queued with two thumbnails", `[...document.querySelectorAll('.msg.pending[data-message] .attachments img.thumb')].filter(i => i.complete && i.naturalWidth > 0).length === 2`)
	until(t, ctx, "composer tray emptied", `document.querySelector('#attachments').hidden`)
	shot(t, ctx, "queued")
	if got := attachmentNames(storedMessage(t, st, chat, "two pictures")); strings.Join(got, ",") != "dropped.png,image.png" {
		t.Fatalf("stored attachments %v", got)
	}
	click(t, ctx, `.msg.pending button.remove-attachment[aria-label="Remove dropped.png"]`)
	until(t, ctx, "one thumbnail left", `document.querySelectorAll('.msg.pending[data-message] .attachments img.thumb').length === 1`)
	if got := attachmentNames(storedMessage(t, st, chat, "two pictures")); strings.Join(got, ",") != "image.png" {
		t.Fatalf("stored attachments after the removal %v", got)
	}

	// The model gets the one image left, with the text.
	model.release <- struct{}{}
	got := model.next(t)
	if got.text != "two pictures" || len(got.images) != 1 || got.images[0] != "data:image/png;base64,"+base64.StdEncoding.EncodeToString(blue) {
		t.Fatalf("model read %q with %d images", got.text, len(got.images))
	}
	until(t, ctx, "thumbnail in the transcript", `[...document.querySelectorAll('.msg.user[data-message] .attachments a.attachment.image img.thumb')].some(i => i.complete && i.naturalWidth === 4)`)
	until(t, ctx, "answered", `[...document.querySelectorAll('.msg.assistant:not(.streaming)')].some(e => e.textContent.includes('1 images.'))`)

	// After a reload the snapshot brings the attachments back.
	do(t, ctx, chromedp.Reload())
	until(t, ctx, "connected again", `document.querySelector('#status').dataset.state === 'connected'`)
	until(t, ctx, "thumbnail after reload", `[...document.querySelectorAll('.msg.user[data-message] .attachments img.thumb')].some(i => i.complete && i.naturalWidth === 4 && i.alt === 'image.png')`)
	// Send pressed while a file is still going up sends once it is up.
	do(t, ctx, chromedp.SetValue(chromedp.CSS("#input"), "late file"))
	js[bool](t, ctx, `(() => { const o = new MutationObserver(() => {
		if (!document.querySelector('#attachments li.upload[data-state=uploading]')) return;
		o.disconnect(); document.querySelector('#send').click();
	}); o.observe(document.querySelector('#attachments'), {childList: true, subtree: true}); return true })()`)
	drop(t, ctx, fileJS(red, "late.png", "image/png"))
	if got := model.next(t); got.text != "late file" || len(got.images) != 1 {
		t.Fatalf("model read %q with %d images", got.text, len(got.images))
	}
	until(t, ctx, "sent with its file", `[...document.querySelectorAll('.msg.user[data-message]')].some(m => m.textContent.includes('late file') && m.querySelector('img.thumb[alt="late.png"]'))
		&& document.querySelector('#attach-status').hidden && document.querySelector('#attachments').hidden`)
	userMsg := js[string](t, ctx, `document.querySelector('.msg.user[data-message] .attachments').closest('.msg').dataset.message`)

	// What the assistant sends: an image inline (full size in a new tab)
	// and a document as a download link. The events come as the hub
	// delivers any chat event.
	img := storedMessage(t, st, chat, "two pictures")["attachments"].([]any)[0].(map[string]any)
	doc := st.upload(t, "text/plain", "report.txt", []byte("quarterly numbers\n"))
	st.srv.hub.Broadcast(map[string]any{"type": "file.sent", "chat": chat, "seq": 1 << 40, "turn": "t9",
		"message": map[string]any{"id": "fs1", "role": "assistant", "text": "Here is the chart", "attachments": []any{img}}})
	st.srv.hub.Broadcast(map[string]any{"type": "file.sent", "chat": chat, "seq": 1<<40 + 1, "turn": "t9",
		"message": map[string]any{"id": "fs2", "role": "assistant", "attachments": []any{map[string]any{"sha256": doc, "type": "text/plain", "size": 18, "name": "report.txt"}}}})
	until(t, ctx, "sent image inline", `(() => { const a = document.querySelector('.msg.assistant[data-message=fs1] a.attachment.image'); const i = a && a.querySelector('img');
		return !!i && i.complete && i.naturalWidth === 4 && a.target === '_blank' && a.closest('.msg').textContent.includes('Here is the chart') })()`)
	until(t, ctx, "sent document as a link", `(() => { const a = document.querySelector('.msg.assistant[data-message=fs2] a.attachment.file[download="report.txt"]');
		return !!a && a.textContent.includes('report.txt') && a.textContent.includes('18 B') })()`)
	got2, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => { const r = await fetch(document.querySelector('a.attachment.file').href); return r.status + ' ' + r.headers.get('content-disposition') + ' ' + await r.text() })()`, chromedp.EvalAwaitPromise))
	if err != nil || got2 != "200 attachment; filename=report.txt quarterly numbers\n" {
		t.Fatalf("the download link gives %q (%v)", got2, err)
	}

	// A voice note's transcript under it; a failed one says why.
	voice := st.upload(t, "audio/ogg", "voice.ogg", append([]byte("OggS\x00\x02"), make([]byte, 64)...))
	att := map[string]any{"sha256": voice, "type": "audio/ogg", "size": 70, "name": "voice.ogg"}
	st.srv.hub.Broadcast(map[string]any{"type": "message.transcribed", "chat": chat, "seq": 1<<40 + 2, "error": "the transcription server answered 503",
		"message": map[string]any{"id": userMsg, "attachments": []any{att}}})
	until(t, ctx, "transcription error", fmt.Sprintf(`(document.querySelector('.msg.user[data-message=%q] .transcript-error[role=alert]')?.textContent || '').includes('503')`, userMsg))
	att["transcript"] = "buy milk and call Ana"
	st.srv.hub.Broadcast(map[string]any{"type": "message.transcribed", "chat": chat, "seq": 1<<40 + 3,
		"message": map[string]any{"id": userMsg, "attachments": []any{att}}})
	until(t, ctx, "transcript under the voice note", fmt.Sprintf(`(() => { const m = document.querySelector('.msg.user[data-message=%q]');
		return !!m && !!m.querySelector('.attachment.audio audio[controls]') && m.querySelector('.transcript')?.textContent === 'buy milk and call Ana' && !m.querySelector('.transcript-error') })()`, userMsg))
	shot(t, ctx, "media")

	// Every control and link has a name a screen reader can say, every
	// image an alt text.
	if bad := js[[]string](t, ctx, `[...document.querySelectorAll('#composer button, #composer input:not([hidden]), #messages button, #messages a, #messages audio')]
		.filter(e => !(e.getAttribute('aria-label') || e.textContent.trim() || e.title)).map(e => e.outerHTML.slice(0, 80))
		.concat([...document.querySelectorAll('#messages img, #composer img')].filter(i => !i.alt).map(i => i.outerHTML.slice(0, 80)))`); len(bad) > 0 {
		t.Fatalf("unnamed controls: %v", bad)
	}
}
