package gateway

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"github.com/mirror-gateway/mirror/runtime/provider/providertest"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/config"
)

// TestBrowserMediaEndToEnd: the whole path in headless Chromium, no
// hand-built event. The builtin model's send_file call on a workspace file
// shows the approval card; Allow delivers it (file.sent from the runtime),
// shown once as an inline image whose link downloads the file's exact
// bytes through /api/blobs, and a document as a download link with its
// bytes. A voice note dropped on the page is transcribed by the transcribe
// role's server, which gets its bytes, and the transcript shows under it.
func TestBrowserMediaEndToEnd(t *testing.T) {
	stt := &providertest.Whisper{Text: "call Ana about the invoice"}
	url := stt.Serve(t)
	st := newStack(t, func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "whisper", Kind: config.KindOpenAI, BaseURL: url})
		c.Models = append(c.Models, config.Model{Name: "stt", Provider: "whisper", Model: "whisper-1", Window: 8192})
		c.Chains["stt"] = []string{"stt"}
		c.Roles.Transcribe = "stt"
	})
	ws := st.srv.opt.Config.Tools.Workspace
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	chart, notes := pngOf(t, 12, 7), []byte("line one\nline two\n")
	for name, data := range map[string][]byte{"chart.png": chart, "notes.txt": notes} {
		if err := os.WriteFile(filepath.Join(ws, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx := browser(t)
	login(t, ctx, st)
	click(t, ctx, "#new-chat")
	until(t, ctx, "chat open", `!!document.querySelector('.chat-item.active')`)

	fetchJS := func(sel string) string {
		return fmt.Sprintf(`(async () => { const r = await fetch(document.querySelector(%q).href);
			const b = new Uint8Array(await r.arrayBuffer()); let s = ''; for (const c of b) s += String.fromCharCode(c); return r.status + ' ' + btoa(s) })()`, sel)
	}
	for _, tc := range []struct {
		args, sel string
		data      []byte
	}{
		{`{"path":"chart.png","caption":"the chart"}`, `.msg.assistant a.attachment.image`, chart},
		{`{"path":"notes.txt"}`, `.msg.assistant a.attachment.file[download="notes.txt"]`, notes},
	} {
		typeAndSend(t, ctx, "/tool send_file "+tc.args)
		until(t, ctx, "approval card", `!!document.querySelector('.card.approval button.allow')`)
		click(t, ctx, ".card.approval button.allow")
		until(t, ctx, "the file shown", fmt.Sprintf(`!!document.querySelector(%q)`, tc.sel))
		until(t, ctx, "card gone", `!document.querySelector('.card.approval')`)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fetchJS(tc.sel), chromedp.EvalAwaitPromise))
		if want := "200 " + base64.StdEncoding.EncodeToString(tc.data); err != nil || got != want {
			t.Fatalf("%s downloads %q (%v), want %q", tc.sel, got, err, want)
		}
	}
	until(t, ctx, "the image loaded", `(() => { const i = document.querySelector('.msg.assistant a.attachment.image img'); return !!i && i.complete && i.naturalWidth === 12 })()`)
	if n := js[int](t, ctx, `document.querySelectorAll('.msg.assistant a.attachment').length`); n != 2 {
		t.Fatalf("%d files shown, want 2 (each once)", n)
	}
	if !js[bool](t, ctx, `[...document.querySelectorAll('.msg.assistant')].some(m => m.querySelector('a.attachment.image') && m.textContent.includes('the chart'))`) {
		t.Fatal("the caption is not shown with the image")
	}

	// A voice note, dropped and sent.
	voice := append([]byte("OggS\x00\x02"), bytes.Repeat([]byte{5}, 300)...)
	drop(t, ctx, fileJS(voice, "voice.ogg", "audio/ogg"))
	until(t, ctx, "voice uploaded", `!!document.querySelector('#attachments li.upload[data-state=done]')`)
	typeAndSend(t, ctx, "listen")
	until(t, ctx, "transcript under the voice note", `[...document.querySelectorAll('.msg.user')].some(m => !!m.querySelector('.attachment.audio') && m.querySelector('.transcript')?.textContent === 'call Ana about the invoice')`)
	files := stt.Files()
	if len(files) != 1 || !bytes.Equal(files[0], voice) {
		t.Fatalf("the transcription server got %d files, want the voice note's bytes once", len(files))
	}
	shot(t, ctx, "media-end-to-end")
}
