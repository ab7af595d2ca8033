package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/chats"
)

// turnEnds signals every turn's end of the chat it is subscribed to.
type turnEnds chan struct{}

func (w turnEnds) Deliver(d chats.Delivery) {
	if d.Event != nil && (d.Event.Type == chats.EvTurnFinished || d.Event.Type == chats.EvTurnFailed) {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// TestBrowserLoadsOlderMessagesWhenScrolledUp opens a chat longer than one
// snapshot page: the page shows the newest messages, and scrolling to the
// top loads the older ones with chat.history until the first message is
// there, each message once.
func TestBrowserLoadsOlderMessagesWhenScrolledUp(t *testing.T) {
	st := newStack(t, nil)
	ctx := context.Background()
	c, err := st.svc.Create(ctx, "Long", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	w := make(turnEnds, 1)
	if err := st.svc.Open(ctx, c.ID, nil, w, ""); err != nil {
		t.Fatal(err)
	}
	const n = 4 // 4 × 190 KiB: more than one page (512 KiB)
	for i := range n {
		text := fmt.Sprintf("MESSAGE-%d-START %s", i, strings.Repeat("word ", 38<<10))
		if _, err := st.svc.Send(ctx, c.ID, text, fmt.Sprintf("k%d", i), "", chats.Origin{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w:
		case <-time.After(60 * time.Second):
			t.Fatalf("message %d: no answer", i)
		}
	}
	_ = st.svc.Unsubscribe(ctx, c.ID, w)

	bctx := browser(t)
	do(t, bctx, chromedp.Navigate(st.http.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), testToken),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS("#chat-list")))
	until(t, bctx, "the newest message", `document.querySelector('#messages').textContent.includes('MESSAGE-3-START')`)
	if js[bool](t, bctx, `document.querySelector('#messages').textContent.includes('MESSAGE-0-START')`) {
		t.Fatal("the first message came with the snapshot: the test needs a longer chat")
	}
	until(t, bctx, "the load-earlier control", `!!document.querySelector('.older .load-older')`)
	until(t, bctx, "the first message after scrolling up", `(() => {
		const sc = document.querySelector('#scroller');
		sc.scrollTop = 0;
		sc.dispatchEvent(new Event('scroll'));
		return document.querySelector('#messages').textContent.includes('MESSAGE-0-START');
	})()`)
	until(t, bctx, "no more to load", `!document.querySelector('.older')`)
	for i := range n {
		got := js[int](t, bctx, fmt.Sprintf(`[...document.querySelectorAll('.msg.user')].filter(e => e.textContent.includes('MESSAGE-%d-START')).length`, i))
		if got != 1 {
			t.Fatalf("message %d is shown %d times", i, got)
		}
	}
	ids := js[[]string](t, bctx, `[...document.querySelectorAll('.msg[data-message]')].map(e => e.dataset.message)`)
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("message %s is shown twice", id)
		}
		seen[id] = true
	}
}
