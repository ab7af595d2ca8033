package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/mirror-gateway/mirror/config"
)

// focusJS describes document.activeElement: its id (or first class), and
// whether a keyboard focus ring is drawn on it (its own outline, or for the
// message box the composer's ring around it).
const focusJS = `(() => {
  const e = document.activeElement;
  if (!e || e === document.body) return JSON.stringify({ name: 'body', ring: false });
  const name = e.id || (e.classList[0] || e.tagName.toLowerCase());
  const cs = getComputedStyle(e);
  let ring = e.matches(':focus-visible') && cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 1;
  if (e.id === 'input') {
    const box = e.closest('.composer-box');
    box.getAnimations().forEach((a) => a.finish()); // the ring fades in
    ring = box.matches(':focus-within') && getComputedStyle(box).boxShadow.includes('0px 0px 0px 3px');
  }
  return JSON.stringify({ name, ring });
})()`

type focused struct {
	Name string `json:"name"`
	Ring bool   `json:"ring"`
}

// tabThrough presses Tab from first (the page's first stop) up to max
// times and returns what took focus each time, until focus comes back to
// first. Focus leaving the page for the browser's own UI shows as the body
// and is left out.
func tabThrough(t *testing.T, ctx context.Context, first string, max int) []focused {
	t.Helper()
	tabTo(t, ctx, first)
	out := []focused{focusNow(t, ctx)}
	for range max {
		do(t, ctx, chromedp.KeyEvent(kb.Tab))
		f := focusNow(t, ctx)
		if f.Name == first {
			return out
		}
		if f.Name != "body" {
			out = append(out, f)
		}
	}
	t.Fatalf("Tab does not come back to %s after %d presses: %v", first, max, out)
	return nil
}

func focusNow(t *testing.T, ctx context.Context) focused {
	t.Helper()
	var f focused
	if err := json.Unmarshal([]byte(js[string](t, ctx, focusJS)), &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// tabTo presses Tab from the top until the element named name has focus.
func tabTo(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	js[bool](t, ctx, `(document.activeElement?.blur(), true)`)
	for range 60 {
		do(t, ctx, chromedp.KeyEvent(kb.Tab))
		if focusNow(t, ctx).Name == name {
			return
		}
	}
	t.Fatalf("Tab never reaches %s", name)
}

// inOrder reports the first of want not found in got after the previous one.
func inOrder(got []focused, want []string) string {
	i := 0
	for _, w := range want {
		for i < len(got) && got[i].Name != w {
			i++
		}
		if i == len(got) {
			return w
		}
		i++
	}
	return ""
}

func themeState(t *testing.T, ctx context.Context) string {
	return js[string](t, ctx, `document.documentElement.dataset.themeChoice + '/' + document.documentElement.dataset.theme + '/' + (localStorage.getItem('mirror.theme') || '-')`)
}

// TestBrowserKeyboard: the chat page and the Monitor work from the keyboard
// in real Chromium. Enter sends and Shift+Enter makes a new line; Tab moves
// through the main actions in reading order, each with a visible focus
// ring; the theme toggle cycles system → light → dark by Enter and Space,
// is remembered across a reload, and "system" follows the system's scheme
// live; Escape closes the chat menu and the Model dialog, returning focus.
func TestBrowserKeyboard(t *testing.T) {
	model := newHeldModel(t)
	st := newMonitorStackWith(t, func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "fake", Kind: "openai", BaseURL: model.srv.URL + "/v1"})
		c.Models[0].Provider, c.Models[0].Model = "fake", "fake-model"
	})
	ctx := browser(t)
	login(t, ctx, st.stack)
	click(t, ctx, "#new-chat")
	until(t, ctx, "chat open", `!!document.querySelector('.chat-item.active')`)

	// The composer, by keys: Shift+Enter is a new line, Enter sends.
	do(t, ctx, chromedp.Focus(chromedp.CSS("#input")), chromedp.KeyEvent("hello"),
		chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierShift)), chromedp.KeyEvent("world"))
	if v := js[string](t, ctx, `document.querySelector('#input').value`); v != "hello\nworld" {
		t.Fatalf("after Shift+Enter the box holds %q", v)
	}
	do(t, ctx, chromedp.KeyEvent(kb.Enter))
	if got := model.next(t); got != "hello\nworld" {
		t.Fatalf("model read %q", got)
	}
	until(t, ctx, "reply shown", `[...document.querySelectorAll('.msg.assistant:not(.streaming)')].some(e => e.textContent.includes('— done.'))`)
	if v := js[string](t, ctx, `document.querySelector('#input').value`); v != "" {
		t.Fatalf("after sending the box holds %q", v)
	}

	for _, scheme := range []string{"light", "dark"} {
		t.Run("tab order "+scheme, func(t *testing.T) {
			do(t, ctx, colorScheme(scheme), chromedp.Reload())
			until(t, ctx, "reply shown", `[...document.querySelectorAll('.msg.assistant:not(.streaming)')].some(e => e.textContent.includes('— done.')) && document.querySelector('#status').dataset.state === 'connected'`)
			got := tabThrough(t, ctx, "skip-link", 60)
			var names []string
			for _, f := range got {
				names = append(names, f.Name)
				if !f.Ring {
					t.Errorf("%s takes focus with no visible focus ring", f.Name)
				}
			}
			want := []string{"skip-link", "new-chat", "search", "chat-link", "memory-open", "settings-open", "monitor-link", "theme-toggle",
				"model-open", "chat-menu-btn", "msg-menu-btn", "attach", "input", "send"}
			if miss := inOrder(got, want); miss != "" {
				t.Errorf("Tab order %v: %s missing or out of order (want %v in this order)", names, miss, want)
			}
			shot(t, ctx, "keyboard-"+scheme)
		})
	}

	// The theme toggle by keyboard, from the system's (dark here).
	do(t, ctx, colorScheme("dark"), chromedp.Reload())
	until(t, ctx, "connected", `document.querySelector('#status').dataset.state === 'connected'`)
	if s := themeState(t, ctx); s != "system/dark/-" {
		t.Fatalf("theme at first %s, want system/dark/-", s)
	}
	tabTo(t, ctx, "theme-toggle")
	steps := []struct {
		key, want string
	}{{kb.Enter, "light/light/light"}, {" ", "dark/dark/dark"}, {kb.Enter, "system/dark/-"}, {kb.Enter, "light/light/light"}}
	for _, s := range steps {
		do(t, ctx, chromedp.KeyEvent(s.key))
		if got := themeState(t, ctx); got != s.want {
			t.Fatalf("after %q the theme is %s, want %s", s.key, got, s.want)
		}
		if l := js[string](t, ctx, `document.querySelector('#theme-toggle .theme-label').textContent`); !strings.EqualFold(l, strings.Split(s.want, "/")[0]) {
			t.Errorf("toggle reads %q in %s", l, s.want)
		}
	}
	// highlight.js's theme follows the chosen theme, not the system's.
	if m := js[string](t, ctx, `[...document.querySelectorAll('link[data-scheme]')].map(l => l.dataset.scheme + ':' + l.media).join(' ')`); m != "light:all dark:not all" {
		t.Errorf("highlight style sheets with the light theme chosen under a dark system: %s", m)
	}
	// Remembered across a reload.
	do(t, ctx, chromedp.Reload())
	until(t, ctx, "connected", `document.querySelector('#status').dataset.state === 'connected'`)
	if s := themeState(t, ctx); s != "light/light/light" {
		t.Fatalf("after a reload the theme is %s, want light/light/light", s)
	}
	// Back to system: it follows the system's scheme live, with no reload.
	tabTo(t, ctx, "theme-toggle")
	do(t, ctx, chromedp.KeyEvent(kb.Enter), chromedp.KeyEvent(kb.Enter))
	if s := themeState(t, ctx); s != "system/dark/-" {
		t.Fatalf("theme %s, want system/dark/-", s)
	}
	do(t, ctx, colorScheme("light"))
	until(t, ctx, "system light followed live", `document.documentElement.dataset.theme === 'light' && getComputedStyle(document.body).backgroundColor === 'rgb(247, 247, 245)'`)
	do(t, ctx, colorScheme("dark"))
	until(t, ctx, "system dark followed live", `document.documentElement.dataset.theme === 'dark' && getComputedStyle(document.body).backgroundColor === 'rgb(20, 21, 23)'`)

	// Escape closes the chat menu and the Model dialog, focus goes back.
	tabTo(t, ctx, "chat-menu-btn")
	do(t, ctx, chromedp.KeyEvent(kb.Enter))
	until(t, ctx, "chat menu open", `!document.querySelector('#chat-menu').hidden`)
	do(t, ctx, chromedp.KeyEvent(kb.Escape))
	until(t, ctx, "chat menu closed", `document.querySelector('#chat-menu').hidden && document.activeElement.id === 'chat-menu-btn'`)
	tabTo(t, ctx, "model-open")
	do(t, ctx, chromedp.KeyEvent(kb.Enter))
	until(t, ctx, "Model dialog open", `document.querySelector('#panel').open`)
	do(t, ctx, chromedp.KeyEvent(kb.Escape))
	until(t, ctx, "Model dialog closed", `!document.querySelector('#panel').open`)

	// A phone: the sidebar opens from the keyboard, its theme button fits
	// the screen and works by Enter, Escape closes the sidebar.
	do(t, ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
			Width: 390, Height: 844, DeviceScaleFactor: 2, Mobile: true})
		return err
	}), chromedp.Reload())
	until(t, ctx, "phone layout", `innerWidth <= 400 && document.querySelector('#status').dataset.state === 'connected'`)
	tabTo(t, ctx, "menu")
	do(t, ctx, chromedp.KeyEvent(kb.Enter))
	until(t, ctx, "sidebar open", `document.querySelector('#app').dataset.sidebar === 'open'`)
	tabTo(t, ctx, "theme-toggle")
	until(t, ctx, "theme button on the screen", `(() => { const r = document.querySelector('#theme-toggle').getBoundingClientRect(); return r.width > 0 && r.left >= 0 && r.right <= innerWidth && r.bottom <= innerHeight })()`)
	do(t, ctx, chromedp.KeyEvent(kb.Enter))
	if s := themeState(t, ctx); s != "light/light/light" {
		t.Fatalf("phone: theme after Enter %s, want light/light/light", s)
	}
	shot(t, ctx, "keyboard-phone-sidebar")
	do(t, ctx, chromedp.KeyEvent(kb.Escape))
	until(t, ctx, "Escape closes the sidebar", `document.querySelector('#app').dataset.sidebar !== 'open' && document.activeElement.id === 'menu'`)

	// The Monitor, on the phone: its toggle is reached by Tab, fits the
	// screen and shares the choice.
	do(t, ctx, chromedp.Navigate(st.http.URL+"/monitor"))
	until(t, ctx, "monitor loaded", `document.querySelector('#feed').dataset.state !== 'connecting'`)
	got := tabThrough(t, ctx, "brand", 30)
	for _, f := range got {
		if !f.Ring {
			t.Errorf("Monitor: %s takes focus with no visible focus ring", f.Name)
		}
	}
	if miss := inOrder(got, []string{"brand", "theme-toggle"}); miss != "" {
		t.Errorf("Monitor Tab order %v: %s missing", got, miss)
	}
	if s := themeState(t, ctx); s != "light/light/light" {
		t.Fatalf("Monitor theme on arrival %s, want the chat page's choice light/light/light", s)
	}
	tabTo(t, ctx, "theme-toggle")
	if !js[bool](t, ctx, `(() => { const r = document.querySelector('#theme-toggle').getBoundingClientRect(); return r.left >= 0 && r.right <= innerWidth })()`) {
		t.Error("Monitor: the theme button is off the phone's screen")
	}
	do(t, ctx, chromedp.KeyEvent(kb.Enter))
	shot(t, ctx, "keyboard-phone-monitor")
	if s := themeState(t, ctx); s != "dark/dark/dark" {
		t.Fatalf("Monitor theme after Enter %s, want dark/dark/dark", s)
	}
	if bg := js[string](t, ctx, `getComputedStyle(document.body).backgroundColor`); bg != "rgb(20, 21, 23)" {
		t.Errorf("Monitor background in dark %s", bg)
	}
}
