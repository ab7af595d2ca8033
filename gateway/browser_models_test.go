package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/budget"
	"github.com/mirror-gateway/mirror/runtime/tools"
)

// newWideStack is the gateway with the builtin model on a 1,000,000-token
// window, so it offers context limits (Auto, the steps below Full, Full),
// and the engine keeping the chosen limit in the chats' bbolt file as
// `mirror serve` does.
func newWideStack(t *testing.T) *stack {
	t.Helper()
	cfg := config.Default()
	zero := time.Duration(0)
	cfg.Providers[0].Delay = &zero
	cfg.Models[0].Window = 1_000_000
	db, err := chats.OpenDB(filepath.Join(t.TempDir(), "mirror.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	store, err := chats.NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := runtime.New(cfg, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.UseLimits(db); err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Workspace = filepath.Join(t.TempDir(), "workspace")
	reg, err := tools.New(tools.OptionsFrom(cfg, nil))
	if err != nil {
		t.Fatal(err)
	}
	eng.SetTools(reg)
	svc := chats.New(chats.Options{Store: store, Turner: eng})
	st := &stack{t: t, svc: svc, store: store}
	st.http = httptest.NewUnstartedServer(nil)
	st.srv = New(Options{Config: cfg, Chats: svc, Token: testToken, Addr: st.http.Listener.Addr().String(), Models: eng})
	st.http.Config.Handler = st.srv.Handler()
	st.http.Start()
	t.Cleanup(func() {
		st.http.Close()
		st.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		svc.Close(ctx)
		store.Close()
		db.Close()
	})
	return st
}

// field is the digits of a model-details number, "" when the row is missing.
func field(name string) string {
	return fmt.Sprintf(`(document.querySelector('#panel[open] .model-details dd[data-field=%q] .fact-value')?.textContent || '').replace(/\D/g, '')`, name)
}

// TestBrowserModelDetailsContextLimit opens the model details from the
// usage ring of a chat on a 1M-token model: the ceiling reads Auto's
// 272,000; choosing 600k shows the new ceiling, the server keeps it (GET
// /api/models), and the next turn's ring measures against it. A limit the
// server refuses shows an error line and changes nothing; the Model button
// opens the same panel.
func TestBrowserModelDetailsContextLimit(t *testing.T) {
	st := newWideStack(t)
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(st.http.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), testToken),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS("#chat-list")))
	until(t, ctx, "connected", `document.querySelector('#status').dataset.state === 'connected'`)
	click(t, ctx, "#new-chat")
	until(t, ctx, "chat open", `!!document.querySelector('.chat-item.active')`)

	// One turn, so the ring has a reading naming the chat's model.
	typeAndSend(t, ctx, "hello")
	until(t, ctx, "ring against Auto's ceiling", `(() => { const c = document.querySelector('#context'); return !!c && !c.hidden && / \/ 272k$/.test(c.querySelector('.ring-value')?.textContent || '') })()`)

	// The ring opens the model details of the chat's model: Auto's budget,
	// a ceiling of about 272,000 tokens.
	auto, _ := budget.New(1_000_000, "auto", 0)
	if auto.Ceiling < 271_000 || auto.Ceiling > 272_000 {
		t.Fatalf("Auto's ceiling on a 1M window is %d, not about 272,000", auto.Ceiling)
	}
	click(t, ctx, "#context")
	until(t, ctx, "model details", `!!document.querySelector('#panel[open] .model-details[data-model="default"] select#context-limit')`)
	for name, want := range map[string]int{
		"window": 1_000_000, "reserve": auto.Reserve, "ceiling": auto.Ceiling, "mark": auto.Mark, "warn": auto.Warn,
	} {
		if got := js[string](t, ctx, field(name)); got != fmt.Sprint(want) {
			t.Errorf("%s shows %q, want %d", name, got, want)
		}
	}
	if got := js[string](t, ctx, `document.querySelector('.model-details dd[data-field="limit"] .fact-value').textContent`); got != "Auto" {
		t.Errorf("the context limit in force shows %q, want Auto", got)
	}
	// The select is labeled and offers Auto, the steps below Full, and Full,
	// each with its ceiling.
	if got := js[string](t, ctx, `document.querySelector('label[for="context-limit"]').textContent`); got != "Context limit" {
		t.Errorf("the select's label is %q", got)
	}
	opts := js[[]string](t, ctx, `[...document.querySelectorAll('#context-limit option')].map(o => o.value + '=' + o.textContent.replace(/[^\dA-Za-z=]/g, ''))`)
	if got := strings.Join(opts, " "); !strings.HasPrefix(got, "auto=Auto272000tokens 128k=128k128000tokens 200k=200k200000tokens 400k=400k400000tokens 600k=600k600000tokens full=Full") {
		t.Errorf("options: %s", got)
	}
	if v := js[string](t, ctx, `document.querySelector('#context-limit').value`); v != "auto" {
		t.Errorf("the select shows %q, want auto", v)
	}
	shot(t, ctx, "model-auto")

	// Choose 600k: the panel shows the new ceiling and what was saved.
	step, _ := budget.New(1_000_000, "600k", 0)
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('#context-limit'); s.value = '600k'; s.dispatchEvent(new Event('change', {bubbles: true})) })()`))
	until(t, ctx, "new ceiling", fmt.Sprintf(`%s === '%d' && document.querySelector('.model-details')?.dataset.limit === '600k'`, field("ceiling"), step.Ceiling))
	until(t, ctx, "saved line", fmt.Sprintf(`(() => { const s = document.querySelector('.model-status')?.textContent || ''; return s.startsWith('Saved: 600k.') && s.replace(/\D/g, '').endsWith('%d') && document.querySelector('.model-error').hidden })()`, step.Ceiling))
	if got := js[string](t, ctx, field("mark")); got != fmt.Sprint(step.Mark) {
		t.Errorf("the mark after 600k shows %q, want %d", got, step.Mark)
	}
	if got := js[string](t, ctx, `document.querySelector('.model-details dd[data-field="limit"] .fact-value').textContent + '|' + document.querySelector('#context-limit').value`); got != "600k|600k" {
		t.Errorf("limit in force / select after the choice: %q", got)
	}
	shot(t, ctx, "model-600k")

	// The server kept it.
	code, body, _ := get(t, st, "/api/models", bearer())
	var got struct{ Models []runtime.ModelInfo }
	if code != 200 || json.Unmarshal([]byte(body), &got) != nil || len(got.Models) != 1 {
		t.Fatalf("GET /api/models: %d %s", code, body)
	}
	if m := got.Models[0]; m.ContextLimit != "600k" || m.Budget.Ceiling != step.Ceiling {
		t.Fatalf("GET /api/models says context_limit %q, ceiling %d; want 600k, %d", m.ContextLimit, m.Budget.Ceiling, step.Ceiling)
	}

	// A limit the server refuses: an error line, nothing changed.
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('#context-limit'); s.append(new Option('3k', '3k')); s.value = '3k'; s.dispatchEvent(new Event('change', {bubbles: true})) })()`))
	until(t, ctx, "error line", `(() => { const e = document.querySelector('#panel[open] .model-error'); return !!e && !e.hidden && e.getAttribute('role') === 'alert' && e.textContent.includes('not changed') && e.textContent.includes('not one it offers') })()`)
	if got, want := js[string](t, ctx, field("ceiling")+` + '|' + document.querySelector('#context-limit').value`), fmt.Sprintf("%d|600k", step.Ceiling); got != want {
		t.Errorf("after a refused limit the panel shows %q, want %q", got, want)
	}
	shot(t, ctx, "model-refused")
	click(t, ctx, "#panel-close")
	until(t, ctx, "panel closed", `!document.querySelector('#panel').open`)

	// The next turn measures against the new ceiling.
	typeAndSend(t, ctx, "hello again")
	until(t, ctx, "ring against 600k", `/ \/ 600k$/.test(document.querySelector('#context .ring-value')?.textContent || '')`)

	// After a reload the snapshot's reading names the chat's model; the
	// Model button opens its details, in dark mode too.
	do(t, ctx, chromedp.Reload())
	until(t, ctx, "reconnected", `document.querySelector('#status')?.dataset.state === 'connected' && !document.querySelector('#context').hidden`)
	dark := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	})
	if err := chromedp.Do(ctx, dark); err != nil {
		t.Logf("dark mode: %v", err)
	}
	click(t, ctx, "#model-open")
	until(t, ctx, "model details again", fmt.Sprintf(`!!document.querySelector('#panel[open] #context-limit') && %s === '%d' && document.querySelector('#context-limit').value === '600k'`, field("ceiling"), step.Ceiling))
	if intro := js[string](t, ctx, `document.querySelector('.model-intro').textContent`); !strings.Contains(intro, "the model of this chat") {
		t.Errorf("the details do not name the chat's model: %q", intro)
	}
	shot(t, ctx, "model-dark")
}

// TestBrowserModelDetailsNothingToSet: a model whose Auto already is its
// whole window shows no select, only the line saying so.
func TestBrowserModelDetailsNothingToSet(t *testing.T) {
	st, _ := newLongStack(t) // a 3000-token window
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(st.http.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), testToken),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS("#chat-list")))
	until(t, ctx, "connected", `document.querySelector('#status').dataset.state === 'connected'`)
	click(t, ctx, "#model-open")
	until(t, ctx, "nothing to set", `(() => { const n = document.querySelector('#panel[open] .model-details .model-none'); return !!n && n.textContent.includes('nothing to set') && !document.querySelector('#context-limit') })()`)
	shot(t, ctx, "model-none")
}
