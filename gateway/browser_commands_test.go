package gateway

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/chats"
)

// TestBrowserOffersEveryChatCommand: the page learns the slash commands
// from the server's table (welcome.commands): typing "/" lists each of
// them in the composer's hints, and each one typed and sent goes to the
// gateway as chat.command, never to the assistant as a message.
func TestBrowserOffersEveryChatCommand(t *testing.T) {
	st := newStack(t, nil)
	ctx := browser(t)
	loginNewChat(t, ctx, st)

	table := chats.Commands()
	names := make([]string, len(table))
	for i, c := range table {
		names[i] = c.Name
	}
	want, _ := json.Marshal(names)
	do(t, ctx, chromedp.SetValue(chromedp.CSS("#input"), "/"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#input').dispatchEvent(new Event('input', {bubbles:true}))`))
	until(t, ctx, "every command hinted", fmt.Sprintf(`(() => { const h = document.querySelector('#command-hints');
		return !h.hidden && JSON.stringify([...h.querySelectorAll('button.command-hint')].map(b => b.dataset.command)) === %q })()`, want))
	// The hints narrow as the word grows, and a click puts the command in
	// the composer.
	do(t, ctx, chromedp.SetValue(chromedp.CSS("#input"), "/comp"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#input').dispatchEvent(new Event('input', {bubbles:true}))`))
	until(t, ctx, "one hint", `document.querySelectorAll('#command-hints button.command-hint').length === 1`)
	click(t, ctx, `#command-hints button[data-command="/compact"]`)
	until(t, ctx, "command in the composer", `document.querySelector('#input').value === '/compact ' && document.querySelector('#command-hints').hidden`)

	// Record what the page sends from now on.
	if !js[bool](t, ctx, `(() => { window.__sent = []; const send = WebSocket.prototype.send;
		WebSocket.prototype.send = function (d) { try { window.__sent.push(JSON.parse(d)); } catch {} return send.call(this, d); };
		return true })()`) {
		t.Fatal("could not watch the socket")
	}
	for _, c := range table {
		typeAndSend(t, ctx, c.Name)
		until(t, ctx, c.Name+" sent as chat.command", fmt.Sprintf(`window.__sent.some(f => f.type === 'chat.command' && f.text === %q)`, c.Name))
	}
	if n := js[int](t, ctx, `window.__sent.filter(f => f.type === 'message.send').length`); n != 0 {
		t.Fatalf("%d commands were sent to the assistant as messages", n)
	}
}
