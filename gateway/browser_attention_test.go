package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
)

// asked collects the approvals a chat asks for, as the chat's subscriber.
type asked chan string

func (a asked) Deliver(d chats.Delivery) {
	if d.Event == nil || d.Event.Type != chats.EvApprovalRequested {
		return
	}
	if p, ok := d.Event.Payload.(*chats.ApprovalRequested); ok && p.Approval != nil {
		select {
		case a <- p.Approval.ID:
		default:
		}
	}
}

func (a asked) next(t *testing.T) string {
	t.Helper()
	select {
	case id := <-a:
		return id
	case <-time.After(20 * time.Second):
		t.Fatal("no approval was asked for")
		return ""
	}
}

// attentionStack is the builtin model (it calls tools, shell asking for
// approval) on chain "default" and the held fake model on chain "slow".
func attentionStack(t *testing.T) (*stack, *heldModel) {
	model := newHeldModel(t)
	st := newStack(t, func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "fake", Kind: "openai", BaseURL: model.srv.URL + "/v1"})
		m := c.Models[0]
		m.Name, m.Provider, m.Model = "slow", "fake", "fake-model"
		c.Models = append(c.Models, m)
		c.Chains["slow"] = []string{"slow"}
	})
	return st, model
}

// toolCall sends chat a message the builtin model answers with a shell
// call, and returns the approval it asks for.
func toolCall(t *testing.T, st *stack, chat string, a asked, key string) string {
	t.Helper()
	if _, err := st.svc.Send(t.Context(), chat, `/tool shell {"command":"echo `+key+`"}`, key, "", chats.Origin{}); err != nil {
		t.Fatal(err)
	}
	return a.next(t)
}

// viewports are the sizes each visible check runs at, in light and dark.
var viewports = []struct {
	name          string
	width, height int64
	scheme        string
}{
	{"desktop-light", 1200, 800, "light"},
	{"phone-dark", 390, 800, "dark"},
	{"desktop-dark", 1200, 800, "dark"},
	{"phone-light", 390, 800, "light"},
}

// sidebarSettled: at a phone's width the chat list is a drawer; after a
// resize from a desktop's it slides away, and covers the page meanwhile.
const sidebarSettled = `innerWidth > 760 || document.querySelector('#sidebar').getBoundingClientRect().right <= 0`

// uncovered lists the action buttons in view (Send, Stop, Allow, Deny, the
// header's) that something else covers at their centre, as the browser's
// hit test (elementFromPoint) finds it.
const uncovered = `(() => {
	const sel = '#send, #stop, #attach, .card.approval button, .card.recovery button, #chain-pick, #model-open, #chat-menu-btn, #menu';
	const bad = [];
	for (const b of document.querySelectorAll(sel)) {
		const r = b.getBoundingClientRect();
		if (b.hidden || r.width === 0 || r.height === 0) continue;
		const x = r.left + r.width / 2, y = r.top + r.height / 2;
		if (x < 0 || y < 0 || x > innerWidth || y > innerHeight) continue;
		const top = document.elementFromPoint(x, y);
		if (!top || !(top === b || b.contains(top))) bad.push((b.id || b.className) + ' under ' + (top ? (top.id || top.className || top.tagName) : 'nothing'));
	}
	return bad;
})()`

// TestBrowserAttention: chats waiting for an approval are marked apart
// from one that generates (words and an icon, the spinner gone), in the
// list, at desktop and phone sizes in light and dark, with contrast
// enough; the header's chain picker sets the open chat's chain; toasts,
// however many, cover no action button; and desktop notifications are
// asked for only on the Settings toggle's click, then come for chats in
// the background (approval needed, reply finished) and never for the
// chat in view.
func TestBrowserAttention(t *testing.T) {
	st, model := attentionStack(t)
	ctx := t.Context()
	mk := func(title, chain string) (chats.Chat, asked) {
		c, err := st.svc.Create(ctx, title, chain, chats.Origin{})
		if err != nil {
			t.Fatal(err)
		}
		a := make(asked, 10)
		if err := st.svc.Open(ctx, c.ID, nil, a, ""); err != nil {
			t.Fatal(err)
		}
		return c, a
	}
	slow, _ := mk("Slow one", "slow")
	if _, err := st.svc.Send(ctx, slow.ID, "a long question", "q", "", chats.Origin{}); err != nil {
		t.Fatal(err)
	}
	model.next(t) // held: generating
	chatB, askB := mk("Chat B", "")
	apB := toolCall(t, st, chatB.ID, askB, "b1")
	chatA, askA := mk("Chat A", "")
	toolCall(t, st, chatA.ID, askA, "a1")

	bctx := browser(t)
	login(t, bctx, st)
	item := func(id string) string { return fmt.Sprintf(`.chat-item[data-chat=%q]`, id) }
	for _, vp := range viewports {
		do(t, bctx, chromedp.EmulateViewport(vp.width, vp.height), colorScheme(vp.scheme), chromedp.Navigate(st.http.URL+"/#"+chatA.ID))
		until(t, bctx, "connected", `document.querySelector('#status').dataset.state === 'connected'`)
		until(t, bctx, "both waiting chats marked", fmt.Sprintf(`[%q, %q].every(s => { const e = document.querySelector(s + '.waiting[data-waiting="approval"] .attn'); return !!e && e.textContent === 'Needs approval' && !!e.querySelector('svg') })`, item(chatA.ID), item(chatB.ID)))
		// The generating chat keeps its spinner and no mark; a waiting one
		// shows its words instead of the spinner.
		got := js[string](t, bctx, fmt.Sprintf(`(() => {
			const slow = document.querySelector(%q), a = document.querySelector(%q);
			const shown = (e) => !!e && getComputedStyle(e).display !== 'none';
			return [slow.classList.contains('busy'), slow.classList.contains('waiting'), shown(slow.querySelector('.spinner')), !!slow.querySelector('.attn'),
				shown(a.querySelector('.spinner')), shown(a.querySelector('.attn'))].join(',');
		})()`, item(slow.ID), item(chatA.ID)))
		if got != "true,false,true,false,false,true" {
			t.Errorf("%s: generating vs waiting (busy, waiting, spinner, mark | A: spinner, mark) = %s", vp.name, got)
		}
		if vp.width < 760 {
			click(t, bctx, "#menu") // the list is a drawer on a phone
			until(t, bctx, "drawer open", `document.querySelector('#app').dataset.sidebar === 'open'`)
		}
		shot(t, bctx, "attention-list-"+vp.name)
		if v := axeContrast(t, bctx); len(v) > 0 {
			var ours []string
			for _, l := range v {
				if strings.Contains(l, "attn") || strings.Contains(l, "chain") {
					ours = append(ours, l)
				}
			}
			if len(ours) > 0 {
				t.Errorf("%s: contrast of the marks:\n%s", vp.name, strings.Join(ours, "\n"))
			}
		}
		if vp.width < 760 {
			click(t, bctx, "#menu")
			until(t, bctx, "drawer closed", `document.querySelector('#app').dataset.sidebar !== 'open' && document.querySelector('#sidebar').getBoundingClientRect().right <= 0`)
		}

		// The chain picker shows the open chat's chain; choosing the
		// other one sets it on the server.
		until(t, bctx, "chain picker", `(() => { const s = document.querySelector('#chain-pick'); return !!s && !s.hidden && s.options.length === 2 })()`)
		was := js[string](t, bctx, `document.querySelector('#chain-pick').value`)
		cur, _ := st.svc.Get(ctx, chatA.ID)
		if was != cur.Chain {
			t.Fatalf("%s: the picker shows %q, the chat's chain is %q", vp.name, was, cur.Chain)
		}
		want := map[string]string{"default": "slow", "slow": "default"}[was]
		do(t, bctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const s = document.querySelector('#chain-pick'); s.value = %q; s.dispatchEvent(new Event('change', {bubbles: true})) })()`, want)))
		until(t, bctx, "chain saved", fmt.Sprintf(`(() => { const s = document.querySelector('#chain-pick'); return s.value === %q && !s.disabled && document.querySelector('#chain-error').hidden })()`, want))
		if c, _ := st.svc.Get(ctx, chatA.ID); c.Chain != want {
			t.Fatalf("%s: after choosing %q the chat's chain is %q", vp.name, want, c.Chain)
		}
		r := js[[]float64](t, bctx, `(() => { const r = document.querySelector('#chain-pick').getBoundingClientRect(); return [r.left, r.right, r.top, r.bottom] })()`)
		if r[0] < 0 || r[1] > float64(vp.width) || r[2] < 0 || r[3] > 56 {
			t.Errorf("%s: the chain picker is at %v, outside the header", vp.name, r)
		}

		// Toasts, three long ones, cover no action: not the approval's
		// Allow and Deny, not Send, not the header's buttons.
		until(t, bctx, "approval card", `!!document.querySelector('.card.approval button.allow')`)
		do(t, bctx, chromedp.Evaluate[chromedp.Void](`(() => {
			const box = document.querySelector('#toasts');
			for (let i = 0; i < 3; i++) {
				const t = document.createElement('div');
				t.className = 'toast command';
				t.setAttribute('role', 'alert');
				t.innerHTML = '<span>' + 'A long answer of a command, line after line. '.repeat(6) + '</span><button class="toast-close" type="button" aria-label="Dismiss">×</button>';
				box.append(t);
			}
		})()`))
		do(t, bctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('.card.approval').scrollIntoView({block: 'end'})`))
		until(t, bctx, "the drawer away", sidebarSettled)
		shot(t, bctx, "attention-toasts-"+vp.name)
		if bad := js[[]string](t, bctx, uncovered); len(bad) > 0 {
			t.Errorf("%s: covered actions: %v", vp.name, bad)
		}
		do(t, bctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('#toasts').replaceChildren()`))
	}

	// Notifications: a fake Notification API records what is shown and
	// whether permission was asked.
	do(t, bctx, chromedp.EmulateViewport(1200, 800), colorScheme("light"), chromedp.Navigate(st.http.URL+"/#"+chatA.ID))
	until(t, bctx, "connected", `document.querySelector('#status').dataset.state === 'connected'`)
	do(t, bctx, chromedp.Evaluate[chromedp.Void](`(() => {
		window.__shown = []; window.__asked = 0;
		class Fake { constructor(title, o) { window.__shown.push(title + ': ' + o.body); } close() {} }
		Fake.permission = 'default';
		Fake.requestPermission = () => { window.__asked++; Fake.permission = 'granted'; return Promise.resolve('granted'); };
		window.Notification = Fake;
	})()`))
	until(t, bctx, "chat A open", fmt.Sprintf(`!!document.querySelector('%s.active')`, item(chatA.ID)))
	click(t, bctx, "#settings-open")
	until(t, bctx, "the toggle", `!!document.querySelector('#panel[open] #notify-toggle')`)
	if n := js[int](t, bctx, `window.__asked`); n != 0 {
		t.Fatalf("permission asked %d times before the toggle was pressed", n)
	}
	if js[bool](t, bctx, `document.querySelector('#notify-toggle').checked`) {
		t.Fatal("notifications are on before the person turned them on")
	}
	shot(t, bctx, "attention-settings")
	click(t, bctx, "#notify-toggle")
	until(t, bctx, "turned on", `window.__asked === 1 && localStorage.getItem('mirror.notify') === 'on' && /^On/.test(document.querySelector('#notify-status').textContent)`)
	click(t, bctx, "#panel-close")

	// Chat B in the background: its approval answered, its reply finishes;
	// then it asks again. The slow chat finishes too. Chat A, in view,
	// finishes without a word.
	if err := st.svc.AnswerApproval(ctx, apB, true, chats.Origin{}); err != nil {
		t.Fatal(err)
	}
	until(t, bctx, "B finished", `window.__shown.includes('Chat B: Reply finished')`)
	toolCall(t, st, chatB.ID, askB, "b2")
	until(t, bctx, "B asks", `window.__shown.some(s => s.startsWith('Chat B: Approval needed'))`)
	model.release <- struct{}{}
	until(t, bctx, "slow finished", `window.__shown.includes('Slow one: Reply finished')`)
	click(t, bctx, ".card.approval button.allow") // A's, answered on the page
	until(t, bctx, "A answered and listed idle", fmt.Sprintf(`!document.querySelector('%s.busy') && !document.querySelector('%[1]s.waiting')`, item(chatA.ID)))
	if got := js[[]string](t, bctx, `window.__shown.filter(s => s.startsWith('Chat A'))`); len(got) > 0 {
		t.Fatalf("notified for the chat in view: %v", got)
	}
}
