package gateway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// inPanelScrollers lists the elements of the open panel (the dialog
// included) whose content overflows them and that scroll it: one, the
// body, when the panel has no double scrollbar.
const inPanelScrollers = `(() => {
	const d = document.querySelector('#panel[open]');
	return [d, ...d.querySelectorAll('*')].filter(e => e.scrollHeight > e.clientHeight + 1 && ['auto', 'scroll'].includes(getComputedStyle(e).overflowY)).map(e => e.id || e.className);
})()`

// TestBrowserRingScaleAndModelDetails, on a 1M-token model (Auto: a
// 272,000-token ceiling; hard capped at its checkpoint mark): the ring
// measures against the limit the chat is nearer to and moves the moment
// limits are saved, with no turn between; the Model details preview a
// share past the mark as the runtime will use it (capped), not as the
// bare share, agreeing with the facts; and the panel scrolls in one place
// at desktop and phone sizes, light and dark.
func TestBrowserRingScaleAndModelDetails(t *testing.T) {
	st := newWideStack(t)
	ctx := browser(t)
	loginNewChat(t, ctx, st)
	typeAndSend(t, ctx, "A long brief. "+strings.Repeat("word ", 8000))
	until(t, ctx, "ring against the ceiling", `(() => { const c = document.querySelector('#context'); return !c.hidden && c.dataset.basis === 'ceiling' && / \/ 272k$/.test(c.querySelector('.ring-value').textContent) })()`)

	click(t, ctx, "#context")
	until(t, ctx, "the form", `!!document.querySelector('#panel[open] .compaction-form #hard-ratio')`)
	set := func(soft, hard string) {
		t.Helper()
		do(t, ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { for (const [id, v] of [['soft-ratio', %q], ['hard-ratio', %q]]) { const e = document.getElementById(id); e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})) } })()`, soft, hard)))
	}
	preview := `document.querySelector('#soft-ratio-tokens').textContent + ' | ' + document.querySelector('#hard-ratio-tokens').textContent`
	// 20 % and 25 % as runtime.yaml has them: the facts say soft and hard
	// in force; the previews say the same, and why.
	facts := js[string](t, ctx, field("soft")+` + '|' + `+field("hard"))
	set("20", "25")
	got := js[string](t, ctx, preview)
	if !strings.Contains(got, "capped by the checkpoint mark") || !strings.Contains(got, "lowered with hard") {
		t.Errorf("previews of capped shares: %q", got)
	}
	digits := func(s string) string {
		var b strings.Builder
		for _, r := range s {
			if r >= '0' && r <= '9' {
				b.WriteRune(r)
			}
		}
		return b.String()
	}
	parts := strings.Split(got, " | ")
	lead := func(s string) string { return digits(strings.SplitN(s, " tokens", 2)[0]) }
	if want := strings.Split(facts, "|"); lead(parts[0]) != want[0] || lead(parts[1]) != want[1] {
		t.Errorf("the previews say %q; the facts in force say soft %s, hard %s", got, want[0], want[1])
	}
	// Shares below the mark are what they say.
	set("1", "2")
	if got := js[string](t, ctx, preview); got != "10,000 tokens of the window | 20,000 tokens of the window" {
		t.Errorf("previews of 1 %% and 2 %%: %q", got)
	}

	for _, vp := range viewports {
		do(t, ctx, chromedp.EmulateViewport(vp.width, vp.height), colorScheme(vp.scheme))
		shot(t, ctx, "model-details-"+vp.name)
		if s := js[[]string](t, ctx, inPanelScrollers); len(s) != 1 || s[0] != "panel-body" {
			t.Errorf("%s: the panel scrolls in %v, want the body only", vp.name, s)
		}
	}
	do(t, ctx, chromedp.EmulateViewport(1200, 800), colorScheme("light"))

	// Saved: the ring moves now, to hard (20,000), which the conversation
	// is nearer to than the request to its ceiling.
	click(t, ctx, ".compaction-save")
	until(t, ctx, "saved", `(document.querySelector('#panel[open] .compaction-status')?.textContent || '').startsWith('Saved: soft 1 %, hard 2 %.')`)
	until(t, ctx, "the ring on hard", `(() => { const c = document.querySelector('#context'); return c.dataset.basis === 'hard' && c.getAttribute('aria-valuemax') === '20000' && / \/ 20k$/.test(c.querySelector('.ring-value').textContent) && c.querySelector('.ring-marks').textContent === 'Soft 10k · Hard 20k' })()`)
	if txt := js[string](t, ctx, `document.querySelector('#context').getAttribute('aria-valuetext')`); !strings.Contains(txt, "of the hard limit") {
		t.Errorf("the ring says %q", txt)
	}
	// The context limit too: back to 25 %, then 128k moves the ceiling now.
	set("20", "25")
	click(t, ctx, ".compaction-save")
	until(t, ctx, "saved again", `(document.querySelector('#panel[open] .compaction-status')?.textContent || '').startsWith('Saved: soft 20 %, hard 25 %.')`)
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('#context-limit'); s.value = '128k'; s.dispatchEvent(new Event('change', {bubbles: true})) })()`))
	until(t, ctx, "the ring on 128k", `(() => { const c = document.querySelector('#context'); return / \/ (128k|\d+k)$/.test(c.querySelector('.ring-value').textContent) && Number(c.getAttribute('aria-valuemax')) <= 128000 })()`)
	shot(t, ctx, "ring-128k")
}
