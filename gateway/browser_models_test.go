package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	db, store, eng := openStack(t, cfg)
	cfg.Tools.Workspace = filepath.Join(t.TempDir(), "workspace")
	reg, err := tools.New(tools.OptionsFrom(cfg, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Provision(runtime.Options{Tools: reg, Settings: db}); err != nil {
		t.Fatal(err)
	}
	svc := chats.New(chats.Options{Store: store, Turner: eng})
	st := serveStack(t, cfg, svc, store, db, Options{Models: eng})
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
	loginNewChat(t, ctx, st)

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
	login(t, ctx, st)
	click(t, ctx, "#model-open")
	until(t, ctx, "nothing to set", `(() => { const n = document.querySelector('#panel[open] .model-details .model-none'); return !!n && n.textContent.includes('nothing to set') && !document.querySelector('#context-limit') })()`)
	shot(t, ctx, "model-none")
}

// TestBrowserModelCompaction moves the conversation limits of a 1M-token
// model from the Model details: soft 20 % and hard 25 % from runtime.yaml
// (hard capped by the checkpoint mark) become 10 % and 15 %, the panel
// redraws from the server's answer with a saved line and the token
// figures, and GET /api/models reports them. Soft 20 % over hard 15 % is
// refused in the page before anything is sent, and a refusal by the server
// (an unknown model) shows its error; neither changes anything.
func TestBrowserModelCompaction(t *testing.T) {
	st := newWideStack(t)
	models := func() runtime.ModelInfo {
		t.Helper()
		code, body, _ := get(t, st, "/api/models", bearer())
		var got struct{ Models []runtime.ModelInfo }
		if code != 200 || json.Unmarshal([]byte(body), &got) != nil || len(got.Models) != 1 {
			t.Fatalf("GET /api/models: %d %s", code, body)
		}
		return got.Models[0]
	}
	before := models()
	if before.SoftRatio != 0.2 || before.HardRatio != 0.25 || before.Compaction != (runtime.Compaction{SoftRatio: 0.2, HardRatio: 0.25}) {
		t.Fatalf("runtime.yaml's shares: %+v", before)
	}
	if before.Hard >= 250_000 {
		t.Fatalf("hard on a 1M window at Auto is %d: the checkpoint mark should cap it below 250,000", before.Hard)
	}

	ctx := browser(t)
	login(t, ctx, st)
	click(t, ctx, "#model-open")
	until(t, ctx, "conversation limits", `!!document.querySelector('#panel[open] .model-details[data-model="default"] section.compaction form.compaction-form #hard-ratio')`)

	// What is in force: the shares in the inputs, the tokens in the facts,
	// hard noted as capped, runtime.yaml's shares for reference.
	if got := js[string](t, ctx, `document.querySelector('.compaction-title').textContent + '|' + document.querySelector('label[for="soft-ratio"]').textContent + '|' + document.querySelector('label[for="hard-ratio"]').textContent`); got != "Conversation limits|Soft, % of the window|Hard, % of the window" {
		t.Errorf("title and labels: %q", got)
	}
	if got := js[string](t, ctx, `['soft-ratio', 'hard-ratio'].map(id => { const e = document.getElementById(id); return e.type + ':' + e.step + ':' + e.value }).join(' ')`); got != "number:1:20 number:1:25" {
		t.Errorf("inputs: %q", got)
	}
	if got, want := js[string](t, ctx, field("soft")+` + '|' + `+field("hard")), fmt.Sprintf("%d|%d", before.Soft, before.Hard); got != want {
		t.Errorf("soft|hard tokens show %q, want %q", got, want)
	}
	if hint := js[string](t, ctx, `document.querySelector('dd[data-field="hard"] .fact-hint').textContent`); !strings.Contains(hint, "capped by the checkpoint mark") || !strings.Contains(hint, "250,000 tokens") {
		t.Errorf("hard's hint does not say it is capped: %q", hint)
	}
	if got := js[string](t, ctx, `document.querySelector('dd[data-field="configured-compaction"]').textContent`); !strings.Contains(got, "soft 20 % · hard 25 %") || !strings.Contains(got, "in force") {
		t.Errorf("runtime.yaml's shares: %q", got)
	}
	if intro := js[string](t, ctx, `document.querySelector('.compaction-intro').textContent`); !strings.Contains(intro, "Lower hard and the assistant consolidates more often and spends less per turn") || !strings.Contains(intro, "soft decides how early") {
		t.Errorf("the explanation: %q", intro)
	}
	shotCompaction(t, ctx, "compaction-default")

	// Count the PUTs the page sends from here on.
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`(() => { window.__puts = []; const f = window.fetch; window.fetch = (u, o) => { if (o && o.method === 'PUT') window.__puts.push(String(u)); return f(u, o) } })()`))
	set := func(soft, hard string) {
		t.Helper()
		do(t, ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { for (const [id, v] of [['soft-ratio', %q], ['hard-ratio', %q]]) { const e = document.getElementById(id); e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})) } })()`, soft, hard)))
	}

	// Soft 10 %, hard 15 %: saved, redrawn from the answer.
	set("10", "15")
	if got := js[string](t, ctx, `document.querySelector('#soft-ratio-tokens').textContent + '|' + document.querySelector('#hard-ratio-tokens').textContent`); got != "100,000 tokens of the window|150,000 tokens of the window" {
		t.Errorf("the preview while editing: %q", got)
	}
	click(t, ctx, ".compaction-save")
	until(t, ctx, "saved line", `(() => { const s = document.querySelector('#panel[open] .compaction-status')?.textContent || ''; const c = document.querySelector('section.compaction'); return s.startsWith('Saved: soft 10 %, hard 15 %.') && s.includes('100,000 tokens') && s.includes('150,000 tokens') && c.dataset.soft === '0.1' && c.dataset.hard === '0.15' && document.querySelector('.compaction-error').hidden })()`)
	if got := js[string](t, ctx, field("soft")+` + '|' + `+field("hard")+` + '|' + document.getElementById('soft-ratio').value + '|' + document.getElementById('hard-ratio').value`); got != "100000|150000|10|15" {
		t.Errorf("after saving, soft|hard tokens|inputs: %q", got)
	}
	if hint := js[string](t, ctx, `document.querySelector('dd[data-field="hard"] .fact-hint').textContent`); strings.Contains(hint, "capped") {
		t.Errorf("15 %% is below the mark, but hard's hint says capped: %q", hint)
	}
	if got := js[string](t, ctx, `document.querySelector('dd[data-field="configured-compaction"]').textContent`); !strings.Contains(got, "soft 20 % · hard 25 %") || !strings.Contains(got, "chosen here instead") {
		t.Errorf("runtime.yaml's shares after a choice: %q", got)
	}
	shotCompaction(t, ctx, "compaction-saved")
	saved := models()
	if saved.SoftRatio != 0.1 || saved.HardRatio != 0.15 || saved.Soft != 100_000 || saved.Hard != 150_000 || saved.Compaction != before.Compaction {
		t.Fatalf("GET /api/models after saving: soft_ratio %v hard_ratio %v soft %d hard %d configured %+v; want 0.1, 0.15, 100000, 150000, 0.2/0.25",
			saved.SoftRatio, saved.HardRatio, saved.Soft, saved.Hard, saved.Compaction)
	}

	// Soft 20 % over hard 15 %: refused in the page, nothing sent.
	set("20", "15")
	click(t, ctx, ".compaction-save")
	until(t, ctx, "refusal", `(() => { const e = document.querySelector('#panel[open] .compaction-error'); return !!e && !e.hidden && e.getAttribute('role') === 'alert' && e.textContent.startsWith('The limits were not changed: soft must stay below hard') && e.textContent.includes('soft 20 % is not below hard 15 %') && !document.querySelector('.compaction-status').textContent })()`)
	if got := js[[]string](t, ctx, `window.__puts`); len(got) != 1 || !strings.HasSuffix(got[0], "/api/models/default/compaction") {
		t.Errorf("PUTs sent: %q, want only the one that saved", got)
	}
	if got := js[string](t, ctx, field("soft")+` + '|' + `+field("hard")+` + '|' + document.querySelector('section.compaction').dataset.soft + '|' + document.querySelector('section.compaction').dataset.hard`); got != "100000|150000|0.1|0.15" {
		t.Errorf("after the refusal the panel shows %q", got)
	}
	shotCompaction(t, ctx, "compaction-refused")
	// The server refuses the same pair, and keeps what was saved.
	code, body := putModel(t, st, "/api/models/default/compaction", `{"soft_ratio": 0.2, "hard_ratio": 0.15}`)
	if code != 400 || !strings.Contains(body, "soft 0.20 and hard 0.15: want 0") {
		t.Errorf("PUT soft 0.2 hard 0.15: %d %s", code, body)
	}
	if m := models(); m.SoftRatio != 0.1 || m.HardRatio != 0.15 || m.Soft != 100_000 || m.Hard != 150_000 {
		t.Fatalf("after the refusals GET /api/models says soft_ratio %v hard_ratio %v soft %d hard %d", m.SoftRatio, m.HardRatio, m.Soft, m.Hard)
	}

	// A refusal by the server (the form names a model it does not have)
	// shows the server's error.
	set("12", "18")
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('.compaction-form').dataset.model = 'nope'`))
	click(t, ctx, ".compaction-save")
	until(t, ctx, "server's refusal", `(() => { const e = document.querySelector('#panel[open] .compaction-error'); return !!e && !e.hidden && e.textContent.startsWith('The limits were not changed: ') && e.textContent.includes('no such model') && !document.querySelector('.compaction-save').disabled })()`)
	if m := models(); m.SoftRatio != 0.1 || m.HardRatio != 0.15 {
		t.Fatalf("after the server's refusal GET /api/models says soft_ratio %v hard_ratio %v", m.SoftRatio, m.HardRatio)
	}
}

// putModel PUTs body to path with the token.
func putModel(t *testing.T, st *stack, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("PUT", st.http.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = bearer()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// shotCompaction scrolls the conversation limits into view for a screenshot.
func shotCompaction(t *testing.T, ctx context.Context, name string) {
	do(t, ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('section.compaction')?.scrollIntoView({block: 'end'})`))
	shot(t, ctx, name)
}
