package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
)

// heldStack is the gateway on the held fake model.
func heldStack(t *testing.T) (*stack, *heldModel) {
	model := newHeldModel(t)
	st := newStack(t, func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "fake", Kind: "openai", BaseURL: model.srv.URL + "/v1"})
		c.Models[0].Provider, c.Models[0].Model = "fake", "fake-model"
	})
	return st, model
}

// TestBrowserNotesAndHeldQueue: a command's answer is a note in the
// conversation, not a toast; Stop with a message queued says it is held,
// the message does not start, and Send on the empty box starts it. The
// notes are checked at desktop and phone sizes, light and dark: seen, with
// contrast enough, covering nothing.
func TestBrowserNotesAndHeldQueue(t *testing.T) {
	st, model := heldStack(t)
	ctx := browser(t)
	loginNewChat(t, ctx, st)
	chat := js[string](t, ctx, `document.querySelector('.chat-item.active').dataset.chat`)

	typeAndSend(t, ctx, "/status")
	until(t, ctx, "the command's note", `(() => { const n = [...document.querySelectorAll('#messages .note.command')].pop(); return !!n && n.querySelector('.note-head').textContent === '/status' && n.querySelector('.note-body').textContent.startsWith('Context') })()`)
	if n := js[int](t, ctx, `document.querySelectorAll('#toasts .toast').length`); n != 0 {
		t.Fatalf("%d toasts for a command", n)
	}

	typeAndSend(t, ctx, "first question")
	if got := model.next(t); got != "first question" {
		t.Fatalf("model read %q", got)
	}
	until(t, ctx, "streaming", `!!document.querySelector('.msg.streaming')`)
	typeAndSend(t, ctx, "queued one")
	until(t, ctx, "queued", `document.querySelectorAll('.msg.pending[data-message]').length === 1`)
	click(t, ctx, "#stop")
	until(t, ctx, "the held note", `[...document.querySelectorAll('#messages .note.held')].some(e => e.textContent === '1 queued message held — Send to continue.')`)
	until(t, ctx, "the box says so", `/^1 held — Send to continue/.test(document.querySelector('#input').placeholder)`)
	if c, _ := st.svc.Get(t.Context(), chat); !c.Paused || c.Pending != 1 || c.State != chats.StateIdle {
		t.Fatalf("after Stop the chat is %+v: want it paused with the message held", c)
	}
	select {
	case got := <-model.requests:
		t.Fatalf("the held message %q went to the model", got)
	default:
	}

	for _, vp := range viewports {
		do(t, ctx, chromedp.EmulateViewport(vp.width, vp.height), colorScheme(vp.scheme))
		do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('#messages .note.held').scrollIntoView({block: 'center'})`))
		until(t, ctx, "the drawer away", sidebarSettled)
		shot(t, ctx, "notes-"+vp.name)
		vis := js[string](t, ctx, `['.note.command', '.note.held'].map(s => { const r = document.querySelector(s).getBoundingClientRect(); return r.width > 0 && r.height > 0 }).join(',')`)
		if vis != "true,true" {
			t.Errorf("%s: notes shown: %s", vp.name, vis)
		}
		if bad := js[[]string](t, ctx, uncovered); len(bad) > 0 {
			t.Errorf("%s: covered actions: %v", vp.name, bad)
		}
		if v := axeContrast(t, ctx); len(v) > 0 {
			for _, l := range v {
				if strings.Contains(l, "note") {
					t.Errorf("%s: contrast: %s", vp.name, l)
				}
			}
		}
	}
	do(t, ctx, chromedp.EmulateViewport(1200, 800), colorScheme("light"))

	// Send on the empty box: the held message starts.
	click(t, ctx, "#send")
	if got := model.next(t); got != "queued one" {
		t.Fatalf("after Send the model read %q", got)
	}
	model.release <- struct{}{}
	until(t, ctx, "answered", `[...document.querySelectorAll('.msg.assistant:not(.streaming)')].some(e => e.textContent.includes('queued one — done.'))`)
	if c, _ := st.svc.Get(t.Context(), chat); c.Paused {
		t.Fatalf("still paused: %+v", c)
	}
}

// TestBrowserNoStaleErrorAfterARecoveredRestart: a turn the gateway's stop
// interrupted is answered again at the next start; the chat then shows
// the answer and a note that the restart interrupted it, not a red "reply
// failed" box that stays after the answer came.
func TestBrowserNoStaleErrorAfterARecoveredRestart(t *testing.T) {
	model := newHeldModel(t)
	cfg := config.Default()
	zero := time.Duration(0)
	cfg.Providers[0].Delay = &zero
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "fake", Kind: "openai", BaseURL: model.srv.URL + "/v1"})
	cfg.Models[0].Provider, cfg.Models[0].Model = "fake", "fake-model"
	db, store, eng := openStack(t, cfg)
	first := chats.New(chats.Options{Store: store, Turner: eng})
	c, err := first.Create(t.Context(), "Restarted", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Send(t.Context(), c.ID, "a question", "q", "", chats.Origin{}); err != nil {
		t.Fatal(err)
	}
	model.next(t)
	// The gateway stops while the turn runs: it is journaled interrupted.
	stop, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	first.Close(stop)
	cancel()

	second := chats.New(chats.Options{Store: store, Turner: eng})
	st := serveStack(t, cfg, second, store, db, Options{})
	if _, err := second.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := model.next(t); got != "a question" {
		t.Fatalf("the resumed turn asked %q", got)
	}
	model.release <- struct{}{}

	ctx := browser(t)
	login(t, ctx, st)
	for _, vp := range viewports {
		do(t, ctx, chromedp.EmulateViewport(vp.width, vp.height), colorScheme(vp.scheme), chromedp.Navigate(st.http.URL+"/#"+c.ID))
		until(t, ctx, "the answer", `[...document.querySelectorAll('.msg.assistant:not(.streaming)')].some(e => e.textContent.includes('a question — done.'))`)
		until(t, ctx, "the restart's note", `[...document.querySelectorAll('.note.interrupted')].some(e => e.textContent.includes('restarted'))`)
		shot(t, ctx, "restarted-"+vp.name)
		if n := js[int](t, ctx, `document.querySelectorAll('.msg.error').length`); n != 0 {
			t.Fatalf("%s: %d error boxes after the recovered restart: %s", vp.name, n, js[string](t, ctx, `[...document.querySelectorAll('.msg.error')].map(e => e.textContent).join(' | ')`))
		}
		if v := axeContrast(t, ctx); len(v) > 0 {
			for _, l := range v {
				if strings.Contains(l, "note") {
					t.Errorf("%s: contrast: %s", vp.name, l)
				}
			}
		}
	}
}
