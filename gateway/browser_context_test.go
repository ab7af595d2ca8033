package gateway

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// TestBrowserBoundaryRecordPinAndRing drives a chat on the builtin model
// with a tiny window (3000 tokens, hard 750) from the page until a boundary
// archives and clears it, then checks what the person sees: the boundary
// divider with its handoff record (collapsed, then expanded), the memory
// note it wrote, the continuity message as a runtime note, the usage ring's
// numbers, pinning from the message menu, and the same after a reload
// (the snapshot path) and in the past-handoffs panel.
// ringText is what the usage ring says: its aria-valuetext, then its label.
// It measures against the limit the chat is nearer to (limits.js): the
// conversation against hard, or the request against the ceiling.
var ringText = regexp.MustCompile(`^((Conversation: [\d,]+ of [\d,]+ tokens, \d+% of the hard limit, where it is written down and started fresh\. Soft [\d,]+: (not )?reached · Hard: (not )?reached\.( Request: [\d,]+ of the [\d,]+-token ceiling\.)?)|((Request|Conversation): [\d,]+ of [\d,]+ tokens, \d+% of the (request ceiling|window)\.( Next checkpoint at [\d,]+\.)?( Conversation: [\d,]+ of hard [\d,]+ \(soft [\d,]+\)\.)?)) \| [\d.]+k? / [\d.]+k?$`)

func TestBrowserBoundaryRecordPinAndRing(t *testing.T) {
	st, _ := newLongStack(t)
	ctx := browser(t)
	loginNewChat(t, ctx, st)

	// One message at a time, each after the previous reply, until the
	// boundary divider shows.
	lorem := strings.Repeat("lorem ipsum dolor ", 40)
	for i := 1; ; i++ {
		if js[bool](t, ctx, `!!document.querySelector('.boundary')`) {
			break
		}
		if i > 12 {
			shot(t, ctx, "no-boundary")
			t.Fatal("no boundary divider after 12 long messages")
		}
		n := js[int](t, ctx, `document.querySelectorAll('.msg.assistant:not(.streaming)').length`)
		typeAndSend(t, ctx, fmt.Sprintf("Step %d of the export: %s", i, lorem))
		until(t, ctx, fmt.Sprintf("reply %d", i), fmt.Sprintf(`document.querySelectorAll('.msg.assistant:not(.streaming)').length > %d || !!document.querySelector('.boundary')`, n))
		if i == 1 {
			// The ring shows the first reading's numbers.
			until(t, ctx, "usage ring", `(() => { const c = document.querySelector('#context'); return !!c && !c.hidden && /\d/.test(c.querySelector('.ring-value')?.textContent || '') })()`)
		}
	}
	until(t, ctx, "boundary visible", `(() => { const b = document.querySelector('.boundary'); return !!b && b.getBoundingClientRect().height > 0 })()`)
	if got := js[string](t, ctx, `(() => { const b = document.querySelector('.boundary'); return b.dataset.reason + '/' + b.dataset.continued })()`); got != "hard/true" {
		t.Fatalf("boundary reason/continued = %q, want hard/true", got)
	}
	if txt := js[string](t, ctx, `document.querySelector('.boundary').textContent`); !strings.Contains(txt, "Hard limit reached") || !strings.Contains(txt, "carried on") {
		t.Fatalf("boundary text = %q", txt)
	}
	// Collapsed by default; expanded it shows the record as markdown.
	if !js[bool](t, ctx, `document.querySelector('.boundary .record').hidden`) {
		t.Fatal("the handoff record is not collapsed by default")
	}
	click(t, ctx, ".boundary button.toggle-record")
	until(t, ctx, "record expanded", `(() => {
		const r = document.querySelector('.boundary .record');
		if (!r || r.hidden || r.getBoundingClientRect().height === 0) return false;
		return [...r.querySelectorAll('h1,h2,h3,h4,h5,h6')].some(h => h.textContent.trim() === 'Objective' && h.getBoundingClientRect().height > 0)
	})()`)
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('.boundary').scrollIntoView({block: 'start'})`))
	shot(t, ctx, "record")
	if got := js[string](t, ctx, `document.querySelector('.boundary button.toggle-record').getAttribute('aria-expanded')`); got != "true" {
		t.Fatalf("aria-expanded = %q", got)
	}
	// The record the page shows is the one the server kept, "## Objective"
	// and all.
	chat := js[string](t, ctx, `document.querySelector('.chat-item.active').dataset.chat`)
	code, body, _ := get(t, st, "/api/chats/"+chat+"/handoffs", bearer())
	if code != 200 || !strings.Contains(body, `## Objective`) {
		t.Fatalf("handoffs: %d %s", code, body)
	}
	if !js[bool](t, ctx, `document.querySelector('.boundary .record').textContent.includes('Step 1 of the export')`) {
		t.Fatal("the record shown lacks its objective")
	}

	// The continuity message is a runtime note, not the person's bubble.
	until(t, ctx, "runtime note", `!!document.querySelector('.msg.runtime-note[data-state="continuity"]')`)
	if n := js[int](t, ctx, `[...document.querySelectorAll('.msg.user')].filter(e => e.textContent.includes('consolidated and cleared')).length`); n != 0 {
		t.Fatal("the continuity message is drawn as a user bubble")
	}
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('.msg.runtime-note').scrollIntoView({block: 'center'})`))
	shot(t, ctx, "runtime-note")

	// The memory note the boundary wrote is linked and opens in the panel.
	until(t, ctx, "memory note link", `!!document.querySelector('.boundary a.note-link[data-note]')`)
	note := js[string](t, ctx, `document.querySelector('.boundary a.note-link').dataset.note`)
	click(t, ctx, ".boundary a.note-link")
	until(t, ctx, "note open", fmt.Sprintf(`(() => { const d = document.querySelector('#panel'); const n = d && d.open && d.querySelector('.panel-note'); return !!n && n.dataset.note === %q && n.textContent.trim().length > 0 })()`, note))
	shot(t, ctx, "memory-note")
	click(t, ctx, "#panel-close")
	until(t, ctx, "panel closed", `!document.querySelector('#panel').open`)

	// The ring: the request against the ceiling (the next checkpoint
	// marked) or the conversation against hard (soft marked), whichever is
	// nearer.
	ring := js[string](t, ctx, `document.querySelector('#context').getAttribute('aria-valuetext') + ' | ' + document.querySelector('#context .ring-value').textContent`)
	if !ringText.MatchString(ring) || (strings.Contains(ring, "of the request ceiling") && !strings.Contains(ring, "Next checkpoint at")) {
		t.Fatalf("usage ring says %q", ring)
	}

	// Pin the last reply from its menu; the mark appears under it.
	target := js[string](t, ctx, `[...document.querySelectorAll('.msg.assistant[data-message]:not(.streaming)')].pop().dataset.message`)
	sel := fmt.Sprintf(`.msg[data-message=%q]`, target)
	click(t, ctx, sel+" button.msg-menu-btn")
	until(t, ctx, "menu open", fmt.Sprintf(`document.querySelector('%s .msg-menu button.pin')?.textContent === 'Pin to agent context'`, sel))
	shot(t, ctx, "menu")
	click(t, ctx, sel+" .msg-menu button.pin")
	until(t, ctx, "pinned mark", fmt.Sprintf(`(() => { const m = document.querySelector('%s .pinned-mark'); return !!m && m.getBoundingClientRect().height > 0 && !document.querySelector('.msg-menu') })()`, sel))
	shot(t, ctx, "boundary")

	// After a reload the snapshot draws the same: the boundary with its
	// reason and note, the runtime note, the pin and the ring.
	do(t, ctx, chromedp.Reload())
	until(t, ctx, "reconnected", `document.querySelector('#status')?.dataset.state === 'connected'`)
	until(t, ctx, "boundary from the snapshot", `(() => { const b = document.querySelector('.boundary'); return !!b && b.dataset.reason === 'hard' && b.dataset.continued === 'true' && !!b.querySelector('a.note-link') })()`)
	until(t, ctx, "pin from the snapshot", fmt.Sprintf(`!!document.querySelector('%s .pinned-mark')`, sel))
	until(t, ctx, "ring from the snapshot", `(() => { const c = document.querySelector('#context'); return !c.hidden && /\d/.test(c.textContent) })()`)
	if !js[bool](t, ctx, `!!document.querySelector('.msg.runtime-note')`) {
		t.Fatal("no runtime note after a reload")
	}
	// Unpin from the right-click menu.
	do(t, ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector('%s .bubble').dispatchEvent(new MouseEvent('contextmenu', {bubbles: true, cancelable: true}))`, sel)))
	until(t, ctx, "unpin offered", fmt.Sprintf(`document.querySelector('%s .msg-menu button.pin')?.textContent === 'Unpin from agent context'`, sel))
	click(t, ctx, sel+" .msg-menu button.pin")
	until(t, ctx, "unpinned", fmt.Sprintf(`!document.querySelector('%s .pinned-mark')`, sel))

	// Past handoffs of the chat.
	click(t, ctx, "#handoffs-open")
	until(t, ctx, "past handoffs", `(() => { const d = document.querySelector('#panel'); return d.open && [...d.querySelectorAll('.handoff-item')].length === 1 && d.querySelector('.handoff-item .record').textContent.includes('Objective') })()`)
	shot(t, ctx, "handoffs")
	click(t, ctx, "#panel-close")
	// The memory list names the note.
	click(t, ctx, "#memory-open")
	until(t, ctx, "memory list", fmt.Sprintf(`!!document.querySelector('#panel[open] button.note-item[data-note=%q]')`, note))
	shot(t, ctx, "memory")
	click(t, ctx, "#panel-close")
	// /compact and /clear typed in the composer go to the gateway as chat
	// commands: a "checkpoint requested" note and a "Context cleared here"
	// divider appear, never a user bubble.
	typeAndSend(t, ctx, "/compact keep the plan")
	until(t, ctx, "compact note", `!!document.querySelector('.note.compact')`)
	typeAndSend(t, ctx, "/clear")
	until(t, ctx, "cleared divider", `[...document.querySelectorAll('.divider.cleared')].some(e => e.textContent.includes('Context cleared here'))`)
	if n := js[int](t, ctx, `[...document.querySelectorAll('.msg.user, .msg.outbox, .msg.pending')].filter(e => /\/(compact|clear)/.test(e.textContent)).length`); n != 0 {
		t.Fatal("a chat command was sent as a message")
	}

	// A look at dark mode, for the screenshots.
	dark := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	})
	if err := chromedp.Do(ctx, dark); err == nil {
		do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('.boundary').scrollIntoView({block: 'start'})`))
		shot(t, ctx, "dark")
	}
}
