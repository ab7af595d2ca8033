package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/config"
)

// heldModel is a fake OpenAI-compatible server speaking the real SSE wire
// format. A request whose last user message contains "question" streams its
// first words, then holds until the test releases it; others answer at once.
type heldModel struct {
	srv      *httptest.Server
	requests chan string
	release  chan struct{}
}

func newHeldModel(t *testing.T) *heldModel {
	h := &heldModel{requests: make(chan string, 100), release: make(chan struct{}, 100)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		var body struct {
			Messages []struct{ Role, Content string } `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error","code":null}}`, 400)
			return
		}
		last := ""
		for _, m := range body.Messages {
			if m.Role == "user" {
				last = m.Content
			}
		}
		h.requests <- last
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		chunk := func(delta, finish string) {
			d, _ := json.Marshal(map[string]any{"content": delta})
			f := "null"
			if finish != "" {
				f = `"` + finish + `"`
			}
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake\",\"choices\":[{\"index\":0,\"delta\":%s,\"logprobs\":null,\"finish_reason\":%s}],\"usage\":null}\n\n", d, f)
			fl.Flush()
		}
		chunk("Thinking about "+last, "")
		if strings.Contains(last, "question") {
			select {
			case <-h.release:
			case <-r.Context().Done():
				return
			}
		}
		chunk(" — done.", "")
		chunk("", "stop")
		fmt.Fprint(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake\",\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":5,\"total_tokens\":25}}\n\ndata: [DONE]\n\n")
		fl.Flush()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *heldModel) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-h.requests:
		return s
	case <-time.After(15 * time.Second):
		t.Fatal("timed out waiting for a model request")
		return ""
	}
}

// browser starts Debian's headless Chromium. Under CI a missing browser
// fails the test: .ci/run installs it, so the browser tests always run there.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed; .ci/run installs it (apt-get install -y chromium)")
		}
		t.Skip("chromium not installed (apt-get install -y chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 800))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	return ctx
}

// js evaluates expr in the page.
func js[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// until polls a page condition, bounded by ctx.
func until(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		shot(t, ctx, "failed")
		t.Fatalf("waiting for %s (%s): %v", what, expr, err)
	}
}

// shot saves a screenshot when MIRROR_SCREENSHOTS names a folder.
func shot(t *testing.T, ctx context.Context, name string) {
	dir := os.Getenv("MIRROR_SCREENSHOTS")
	if dir == "" {
		return
	}
	if b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		_ = os.WriteFile(filepath.Join(dir, name+".png"), b, 0o644)
	}
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		shot(t, ctx, "failed")
		t.Fatal(err)
	}
}

// click waits for the element and clicks it in one step inside the page, so
// a re-render between finding and clicking cannot lose the click.
func click(t *testing.T, ctx context.Context, css string) {
	t.Helper()
	until(t, ctx, "click "+css, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true })()`, css))
}

func typeAndSend(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	do(t, ctx, chromedp.SetValue(chromedp.CSS("#input"), text),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#input').dispatchEvent(new Event('input', {bubbles:true}))`))
	click(t, ctx, "#send")
}

func TestBrowserTwoChatsPendingEditDeleteAndStreaming(t *testing.T) {
	model := newHeldModel(t)
	st := newStack(t, func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "fake", Kind: "openai", BaseURL: model.srv.URL + "/v1"})
		c.Models[0].Provider, c.Models[0].Model = "fake", "fake-model"
	})
	ctx := browser(t)

	// Log in with the token.
	login(t, ctx, st)

	// Chat A: a question the model holds, then two queued messages.
	click(t, ctx, "#new-chat")
	until(t, ctx, "chat A open", `!!document.querySelector('.chat-item.active')`)
	chatA := js[string](t, ctx, `document.querySelector('.chat-item.active').dataset.chat`)
	typeAndSend(t, ctx, "first question")
	if got := model.next(t); got != "first question" {
		t.Fatalf("model read %q", got)
	}
	until(t, ctx, "A streams", `[...document.querySelectorAll('.msg.streaming')].some(e => e.textContent.includes('Thinking about first question'))`)
	typeAndSend(t, ctx, "queued one")
	typeAndSend(t, ctx, "queued two")
	until(t, ctx, "two pending bubbles", `document.querySelectorAll('.msg.pending[data-message]').length === 2`)
	shot(t, ctx, "pending")

	// Edit the first pending message, delete the second.
	first := js[string](t, ctx, `[...document.querySelectorAll('.msg.pending[data-message]')].find(e => e.textContent.includes('queued one')).dataset.message`)
	second := js[string](t, ctx, `[...document.querySelectorAll('.msg.pending[data-message]')].find(e => e.textContent.includes('queued two')).dataset.message`)
	sel := func(id, rest string) string {
		return fmt.Sprintf(`.msg.pending[data-message="%s"] %s`, id, rest)
	}
	edit := func(id, text string) {
		click(t, ctx, sel(id, "button.edit"))
		do(t, ctx, chromedp.WaitVisible(chromedp.CSS(sel(id, "textarea"))),
			chromedp.SetValue(chromedp.CSS(sel(id, "textarea")), text),
			chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector('%s').dispatchEvent(new Event('input', {bubbles:true}))`, sel(id, "textarea"))))
	}
	edit(first, "queued one, edited")
	click(t, ctx, sel(first, "button.save"))
	until(t, ctx, "edit applied", fmt.Sprintf(`(() => { const e = document.querySelector('.msg.pending[data-message="%s"]'); return !!e && !e.classList.contains('editing') && e.textContent.includes('queued one, edited') })()`, first))
	click(t, ctx, sel(second, "button.delete"))
	until(t, ctx, "deleted", fmt.Sprintf(`!document.querySelector('.msg.pending[data-message="%s"]')`, second))

	// Chat B runs at the same time; A keeps showing that it is busy.
	click(t, ctx, "#new-chat")
	until(t, ctx, "chat B open", fmt.Sprintf(`(() => { const e = document.querySelector('.chat-item.active'); return !!e && e.dataset.chat !== %q })()`, chatA))
	typeAndSend(t, ctx, "second chat question")
	if got := model.next(t); got != "second chat question" {
		t.Fatalf("model read %q", got)
	}
	until(t, ctx, "B streams", `[...document.querySelectorAll('.msg.streaming')].some(e => e.textContent.includes('Thinking about second chat question'))`)
	until(t, ctx, "A busy in the list", fmt.Sprintf(`!!document.querySelector('.chat-item.busy[data-chat=%q]')`, chatA))
	shot(t, ctx, "two-running")

	// Let both answers finish: B's reply lands, and A goes on to its edited
	// queued message (the deleted one never reaches the model).
	model.release <- struct{}{}
	model.release <- struct{}{}
	if got := model.next(t); got != "queued one, edited" {
		t.Fatalf("after the first turn the model read %q, want the edited message", got)
	}
	until(t, ctx, "B finished", `[...document.querySelectorAll('.msg.assistant:not(.streaming)')].some(e => e.textContent.includes('second chat question — done.'))`)
	click(t, ctx, fmt.Sprintf(`.chat-item[data-chat=%q]`, chatA))
	until(t, ctx, "A finished both", `[...document.querySelectorAll('.msg.assistant:not(.streaming)')].filter(e => e.textContent.includes('— done.')).length === 2`)
	if n := js[int](t, ctx, `[...document.querySelectorAll('#messages .msg')].filter(e => e.textContent.includes('queued two')).length`); n != 0 {
		t.Fatal("the deleted message is still shown")
	}

	// An edit that loses the race to the pickup says so.
	typeAndSend(t, ctx, "another question")
	model.next(t)
	typeAndSend(t, ctx, "late edit")
	until(t, ctx, "pending", `[...document.querySelectorAll('.msg.pending[data-message]')].some(e => e.textContent.includes('late edit'))`)
	late := js[string](t, ctx, `[...document.querySelectorAll('.msg.pending[data-message]')].find(e => e.textContent.includes('late edit')).dataset.message`)
	edit(late, "too late")
	model.release <- struct{}{}
	if got := model.next(t); got != "late edit" { // the server has picked it up
		t.Fatalf("model read %q", got)
	}
	// The browser shows the pickup while the editor stays open; saving then
	// meets the server's in_use.
	until(t, ctx, "picked while editing", fmt.Sprintf(`document.querySelector('.msg.pending[data-message="%s"]')?.dataset.state === 'picked'`, late))
	click(t, ctx, sel(late, "button.save"))
	until(t, ctx, "in-use notice", `[...document.querySelectorAll('.notice.in-use')].some(e => /already in use/i.test(e.textContent))`)
	shot(t, ctx, "in-use")
}

// TestBrowserApprovesAToolCall: the builtin model asks to run shell, the
// page shows the approval card, Allow runs it, and the answer arrives.
func TestBrowserApprovesAToolCall(t *testing.T) {
	st := newStack(t, nil)
	ctx := browser(t)
	loginNewChat(t, ctx, st)
	typeAndSend(t, ctx, `/tool shell {"command":"echo approved-and-ran"}`)
	until(t, ctx, "approval card", `!!document.querySelector('.card.approval button.allow')`)
	shot(t, ctx, "approval")
	if !strings.Contains(js[string](t, ctx, `document.querySelector('.card.approval').textContent`), "shell") {
		t.Fatal("the approval card does not name the tool")
	}
	click(t, ctx, ".card.approval button.allow")
	until(t, ctx, "answer after the tool", `[...document.querySelectorAll('.msg.assistant:not(.streaming)')].some(e => e.textContent.includes('approved-and-ran'))`)
	until(t, ctx, "card gone", `!document.querySelector('.card.approval')`)

	// A chat command typed in the composer is run by the gateway, not sent
	// to the model, and its answer is shown.
	typeAndSend(t, ctx, "/changes")
	until(t, ctx, "command answer", `[...document.querySelectorAll('#messages .note.command')].some(e => e.querySelector('.note-head').textContent === '/changes' && e.textContent.includes('changes'))`)
	if n := js[int](t, ctx, `[...document.querySelectorAll('.msg.user')].filter(e => e.textContent.includes('/changes')).length`); n != 0 {
		t.Fatal("the command was sent as a message")
	}
}
