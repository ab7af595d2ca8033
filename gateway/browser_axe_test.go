package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/config"
)

// axeContrast runs the vendored axe-core (gateway/web/testdata/axe, put
// there by vendor.sh; the binary does not embed it) on the page and returns
// its color-contrast violations, one line per node: WCAG AA asks 4.5:1 for
// text (3:1 for large text).
func axeContrast(t *testing.T, ctx context.Context) []string {
	t.Helper()
	src, err := os.ReadFile("web/testdata/axe/axe.min.js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](string(src)+"\n;void 0")); err != nil {
		t.Fatalf("load axe-core: %v", err)
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, { runOnly: { type: 'rule', values: ['color-contrast'] }, resultTypes: ['violations'] })
		.then((r) => JSON.stringify(r.violations.flatMap((v) => v.nodes.map((n) => n.target.join(' ') + ': ' + (n.any[0]?.message || n.failureSummary)))))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe.run: %v", err)
	}
	var out []string
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	})
}

// TestBrowserContrast: axe-core finds no text under 4.5:1 (3:1 when large)
// on the chat page, with a conversation, a code block, timestamps and the
// composer's hint, nor on the Monitor with a breaker, its history and the
// charts, in light and in dark: the system's either way, and each theme
// chosen with the toggle against the other system scheme.
func TestBrowserContrast(t *testing.T) {
	model := newHeldModel(t)
	st := newMonitorStackWith(t, func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "fake", Kind: "openai", BaseURL: model.srv.URL + "/v1"})
		c.Models[0].Provider, c.Models[0].Model = "fake", "fake-model"
	})
	ctx := browser(t)
	login(t, ctx, st.stack)
	click(t, ctx, "#new-chat")
	until(t, ctx, "chat open", `!!document.querySelector('.chat-item.active')`)
	typeAndSend(t, ctx, "a *reply* with [a link](https://example.org) and\n\n```go\nfunc main() { return }\n```\n")
	model.next(t)
	until(t, ctx, "reply shown", `[...document.querySelectorAll('.msg.assistant:not(.streaming)')].some(e => e.textContent.includes('— done.'))`)
	b := st.mon.Provider("fake", "m")
	trip(t, b)
	if _, err := st.mon.Reset(b.ID()); err != nil {
		t.Fatal(err)
	}
	trip(t, st.mon.Provider("fake", "n"))
	if err := st.mon.Flush(); err != nil {
		t.Fatal(err)
	}

	// Each scheme from a fresh load: switching under a live page would
	// catch colours mid-transition.
	for _, m := range themeModes {
		choose(t, ctx, m)
		do(t, ctx, colorScheme(m.system), chromedp.Reload())
		until(t, ctx, "reply shown", `[...document.querySelectorAll('.msg.assistant:not(.streaming)')].some(e => e.textContent.includes('— done.')) && document.querySelector('#status').dataset.state === 'connected'`)
		checkTheme(t, ctx, m)
		shot(t, ctx, "contrast-chat-"+m.name())
		if v := axeContrast(t, ctx); len(v) > 0 {
			t.Errorf("chat page, %s: %d contrast violations:\n%s", m.name(), len(v), strings.Join(v, "\n"))
		}
	}
	for _, m := range themeModes {
		choose(t, ctx, m)
		do(t, ctx, colorScheme(m.system), chromedp.Navigate(st.http.URL+"/monitor"))
		until(t, ctx, "charts drawn", `document.querySelector('#charts').dataset.span === 'day' && !!document.querySelector('#history .breaker') && !!document.querySelector('#unresolved .breaker')`)
		checkTheme(t, ctx, m)
		shot(t, ctx, "contrast-monitor-"+m.name())
		if v := axeContrast(t, ctx); len(v) > 0 {
			t.Errorf("Monitor, %s: %d contrast violations:\n%s", m.name(), len(v), strings.Join(v, "\n"))
		}
	}
}

// themeMode is a system scheme and the theme chosen with the toggle.
type themeMode struct{ system, choice, want string }

func (m themeMode) name() string {
	if m.choice == "system" {
		return m.want
	}
	return m.choice + "-on-" + m.system + "-system"
}

// themeModes: the system's theme either way, and each chosen theme against
// the other system scheme, so a colour that still follows the system's
// scheme instead of the toggle shows.
var themeModes = []themeMode{
	{"light", "system", "light"}, {"dark", "system", "dark"},
	{"dark", "light", "light"}, {"light", "dark", "dark"},
}

// choose stores the toggle's choice for the next load, as the toggle does.
func choose(t *testing.T, ctx context.Context, m themeMode) {
	t.Helper()
	js[bool](t, ctx, fmt.Sprintf(`(%q === 'system' ? localStorage.removeItem('mirror.theme') : localStorage.setItem('mirror.theme', %[1]q), true)`, m.choice))
}

// checkTheme: the page shows the theme the mode wants.
func checkTheme(t *testing.T, ctx context.Context, m themeMode) {
	t.Helper()
	if got := js[string](t, ctx, `document.documentElement.dataset.themeChoice + '/' + document.documentElement.dataset.theme`); got != m.choice+"/"+m.want {
		t.Fatalf("%s: theme %s, want %s/%s", m.name(), got, m.choice, m.want)
	}
}
