package gateway

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/gateway/ws"
)

// TestBrowserChatListLoadsMoreOnScroll: the welcome lists the newest
// ws.MaxWelcomeChats chats; scrolling to the end of the list loads the
// older ones page by page (chatlist.js), each chat once, oldest last,
// until none is left and the "More chats" button goes.
func TestBrowserChatListLoadsMoreOnScroll(t *testing.T) {
	st := newStack(t, nil)
	n := ws.MaxWelcomeChats + 110
	var first, last string
	for i := range n {
		c, err := st.svc.Create(context.Background(), fmt.Sprintf("chat %d", i), "", chats.Origin{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = c.ID
		}
		last = c.ID
	}
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(st.http.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), testToken),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS("#chat-list")))
	until(t, ctx, "connected", `document.querySelector('#status').dataset.state === 'connected'`)
	until(t, ctx, "the welcome's chats", fmt.Sprintf(`document.querySelectorAll('#chat-list .chat-item').length === %d`, ws.MaxWelcomeChats))
	if got := js[string](t, ctx, `document.querySelector('#chat-list .chat-item').dataset.chat`); got != last {
		t.Fatalf("first listed %s, want the newest %s", got, last)
	}
	until(t, ctx, "the more button", `!document.querySelector('#chat-list-more').hidden`)
	for _, want := range []int{ws.MaxWelcomeChats + 100, n} {
		js[bool](t, ctx, `(document.querySelector('#chat-list-more').scrollIntoView(), true)`)
		until(t, ctx, fmt.Sprint(want, " chats listed"), fmt.Sprintf(`document.querySelectorAll('#chat-list .chat-item').length === %d`, want))
	}
	until(t, ctx, "the more button gone", `document.querySelector('#chat-list-more').hidden`)
	items := js[[]string](t, ctx, `[...document.querySelectorAll('#chat-list .chat-item')].map(e => e.dataset.chat)`)
	seen := map[string]bool{}
	for _, id := range items {
		if seen[id] {
			t.Fatalf("chat %s listed twice", id)
		}
		seen[id] = true
	}
	if items[len(items)-1] != first {
		t.Fatalf("last listed %s, want the oldest %s", items[len(items)-1], first)
	}
}
