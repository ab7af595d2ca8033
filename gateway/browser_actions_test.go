package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/config"
)

// screen is a size and theme the browser tests look at.
type screen struct {
	name          string
	width, height int64
	mobile        bool
	scheme        string // prefers-color-scheme
}

var screens = []screen{
	{"desktop-light", 1200, 800, false, "light"},
	{"phone-dark", 390, 844, true, "dark"},
}

// emulate makes the page s's size and color scheme.
func emulate(s screen) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
			Width: s.width, Height: s.height, DeviceScaleFactor: 1, Mobile: s.mobile}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: s.scheme}}})
		return err
	})
}

// noSideScroll is true when neither the page nor an element inside sel
// scrolls sideways.
func noSideScroll(sel string) string {
	return fmt.Sprintf(`document.documentElement.scrollWidth <= innerWidth && [...document.querySelectorAll(%q)].every(e => e.scrollWidth <= e.clientWidth + 1)`, sel)
}

// axeContrastIn is axeContrast limited to the elements sel matches: what
// these tests add, whatever else the page shows at that moment.
func axeContrastIn(t *testing.T, ctx context.Context, sel string) []string {
	t.Helper()
	src, err := os.ReadFile("web/testdata/axe/axe.min.js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](string(src)+"\n;void 0")); err != nil {
		t.Fatalf("load axe-core: %v", err)
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`axe.run({ include: [...document.querySelectorAll(%q)] }, { runOnly: { type: 'rule', values: ['color-contrast'] }, resultTypes: ['violations'] })
		.then((r) => JSON.stringify(r.violations.flatMap((v) => v.nodes.map((n) => n.target.join(' ') + ': ' + (n.any[0]?.message || n.failureSummary)))))`, sel), chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe.run: %v", err)
	}
	var out []string
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBrowserApprovalsYouCanJudge: an edit_file approval shows its diff, a
// shell approval its command as code, both wrapping on a phone; Allow for
// this chat runs the call and stops the next ask, the model details list
// the tool, and Revoke brings the question back. At desktop and phone
// sizes, light and dark.
func TestBrowserApprovalsYouCanJudge(t *testing.T) {
	for _, sc := range screens {
		t.Run(sc.name, func(t *testing.T) {
			st := newStack(t, func(c *config.Config) {
				c.Tools.Policies.WriteFile = config.PolicyAllow
				c.Tools.Policies.EditFile = config.PolicyAsk
			})
			ctx := browser(t)
			do(t, ctx, emulate(sc))
			loginNewChat(t, ctx, st)
			if sc.mobile {
				until(t, ctx, "phone layout", `innerWidth <= 400`)
			}
			typeAndSend(t, ctx, `/tool write_file {"path":"plan.md","content":"one\ntwo\nthree\n"}`)
			until(t, ctx, "written", `[...document.querySelectorAll('.msg.assistant:not(.streaming)')].some(e => e.textContent.includes('wrote'))`)

			typeAndSend(t, ctx, `/tool edit_file {"path":"plan.md","old":"two","new":"TWO"}`)
			until(t, ctx, "the diff", `(() => { const d = document.querySelector('.card.approval .change[data-status=modified] pre.diff'); if (!d) return false;
  const lines = [...d.querySelectorAll('.line')].map(l => l.className + ' ' + l.textContent);
  return lines.join('|') === 'line hunk @@ -1,3 +1,3 @@|line ctx  one|line del -two|line add +TWO|line ctx  three' })()`)
			if head := js[string](t, ctx, `document.querySelector('.card.approval .change-head').textContent`); !strings.Contains(head, "plan.md") || !strings.Contains(head, "+1") {
				t.Fatalf("change head %q", head)
			}
			until(t, ctx, "no sideways scroll", noSideScroll(".card.approval pre"))
			if v := axeContrastIn(t, ctx, ".card.approval"); len(v) > 0 {
				t.Fatalf("contrast under 4.5:1 in the approval: %v", v)
			}
			shot(t, ctx, sc.name+"-diff")
			click(t, ctx, ".card.approval button.allow")
			until(t, ctx, "edited", `!document.querySelector('.card.approval') && [...document.querySelectorAll('.msg.assistant:not(.streaming)')].some(e => e.textContent.includes('replaced 1 occurrence'))`)

			long := strings.Repeat("echo allowed-for-chat-", 12) + "done"
			typeAndSend(t, ctx, fmt.Sprintf(`/tool shell {"command":%q}`, long))
			until(t, ctx, "the command as code", fmt.Sprintf(`document.querySelector('.card.approval pre.code.shell')?.textContent === %q`, long))
			until(t, ctx, "the command wraps", noSideScroll(".card.approval pre"))
			shot(t, ctx, sc.name+"-shell")
			click(t, ctx, ".card.approval button.allow-chat")
			until(t, ctx, "ran", `!document.querySelector('.card.approval') && [...document.querySelectorAll('.msg.assistant:not(.streaming)')].some(e => e.textContent.includes('returned: «allowed-for-chat'))`)

			// The next shell call is not asked about.
			typeAndSend(t, ctx, `/tool shell {"command":"echo second-run"}`)
			until(t, ctx, "ran without asking", `[...document.querySelectorAll('.msg.assistant:not(.streaming)')].some(e => e.textContent.includes('second-run'))`)
			if n := js[int](t, ctx, `document.querySelectorAll('.card.approval').length`); n != 0 {
				t.Fatal("an allowed tool was asked about")
			}

			// The model details list it; Revoke brings the question back.
			click(t, ctx, "#model-open")
			until(t, ctx, "allowed tools listed", `!!document.querySelector('section.allowed-tools li[data-tool=shell] button.revoke')`)
			shot(t, ctx, sc.name+"-allowed")
			click(t, ctx, "section.allowed-tools li[data-tool=shell] button.revoke")
			until(t, ctx, "revoked", `!document.querySelector('section.allowed-tools li[data-tool=shell]')`)
			do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.activeElement.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape', bubbles: true}))`))
			typeAndSend(t, ctx, `/tool shell {"command":"echo third-run"}`)
			until(t, ctx, "asked again", `!!document.querySelector('.card.approval pre.code.shell')`)
		})
	}
}

// failingModel is an OpenAI-compatible server that is always overloaded.
func failingModel(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":{"message":"overloaded","type":"server_error","code":null}}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestBrowserMessageActions: Copy puts a message's Markdown on the
// clipboard; Regenerate makes a second answer and keeps the first; Edit &
// resend puts the text in the box and sends a new message, the old kept;
// an answer names its model, a fallback marked. At desktop and phone sizes.
func TestBrowserMessageActions(t *testing.T) {
	for _, sc := range screens {
		t.Run(sc.name, func(t *testing.T) {
			busy := failingModel(t)
			st := newStack(t, func(c *config.Config) {
				c.Providers = append(c.Providers, config.Provider{Name: "busy", Kind: "openai", BaseURL: busy.URL + "/v1"})
				m := c.Models[0]
				m.Name, m.Provider, m.Model = "busy-model", "busy", "busy"
				c.Models = append(c.Models, m)
				c.Chains["default"] = []string{"busy-model", c.Models[0].Name}
			})
			ctx := browser(t)
			// The clipboard, as a person's browser grants it to a focused page
			// (headless Chromium has no window focus of its own).
			do(t, ctx, emulate(sc), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				for _, p := range []string{"clipboard-read", "clipboard-write"} {
					if _, err := cdp.Call(ctx, tg, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
						Permission: &cdpbrowser.PermissionDescriptor{Name: p, AllowWithoutSanitization: true}, Setting: cdpbrowser.PermissionSettingGranted}); err != nil {
						return err
					}
				}
				_, err := cdp.Call(ctx, tg, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true})
				return err
			}))
			loginNewChat(t, ctx, st)
			typeAndSend(t, ctx, "say **hello**")
			answer := `[...document.querySelectorAll('.msg.assistant:not(.streaming)')]`
			until(t, ctx, "an answer", answer+`.length === 1`)
			until(t, ctx, "the fallback marked", answer+`[0].querySelector('.model-mark.fallback')?.dataset.model === 'default'`)
			if v := axeContrastIn(t, ctx, ".msg.assistant .meta"); len(v) > 0 {
				t.Fatalf("contrast under 4.5:1 in the answer's marks: %v", v)
			}
			shot(t, ctx, sc.name+"-fallback")

			openMenu := func(sel string) {
				t.Helper()
				click(t, ctx, sel+" .msg-menu-btn")
				until(t, ctx, "menu", `!!document.querySelector('.msg-menu')`)
			}
			// Copy the person's message: its Markdown source.
			openMenu(`.msg.user[data-message]`)
			click(t, ctx, ".msg-menu button.copy-message")
			until(t, ctx, "copied", `document.body.dataset.copied === '13'`)
			do(t, ctx, chromedp.Evaluate[chromedp.Void](`navigator.clipboard.readText().then(t => { window.__clip = t })`))
			until(t, ctx, "on the clipboard", `window.__clip === 'say **hello**'`)

			// Regenerate from the answer: a second answer, the first kept.
			openMenu(`.msg.assistant[data-message]`)
			click(t, ctx, ".msg-menu button.regenerate")
			until(t, ctx, "two answers", answer+`.length === 2`)
			until(t, ctx, "the question asked again", `document.querySelectorAll('.msg.user .regen-mark').length === 1`)
			shot(t, ctx, sc.name+"-regenerated")

			// Edit & resend: the text in the box; sending makes a new message.
			openMenu(`.msg.user[data-message]`)
			click(t, ctx, ".msg-menu button.resend")
			until(t, ctx, "text in the box", `document.querySelector('#input').value === 'say **hello**'`)
			if got := js[string](t, ctx, `(() => { const a = document.activeElement; return a === document.querySelector('#input') ? 'input' : a.tagName + '.' + a.className + ' ' + (a.textContent || '').slice(0, 40) })()`); got != "input" {
				t.Errorf("the focus is on %s, not the message box", got)
			}
			typeAndSend(t, ctx, "say **hello** again")
			until(t, ctx, "three answers", answer+`.length === 3`)
			users := js[[]string](t, ctx, `[...document.querySelectorAll('.msg.user .text')].map(e => e.textContent)`)
			if strings.Join(users, "|") != "say **hello**|say **hello**|say **hello** again" {
				t.Fatalf("user messages %q", users)
			}
			until(t, ctx, "no sideways scroll", noSideScroll("#messages"))
		})
	}
}
