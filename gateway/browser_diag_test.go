package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/quota"
	"github.com/mirror-gateway/mirror/runtime/tools"
)

// diagKey is the fake provider's API key: it must reach neither the log
// nor a stored row, though the fake echoes it in a refusal.
const diagKey = "sk-diagtest-0123456789SECRETabcdef"

// newDiagModel is a fake OpenAI-compatible server speaking the real wire
// format. Every answer names a request id (x-request-id) and the model that
// answered ("model" in its chunks). A last user message containing
// "fail400" is refused with 400, echoing the key the way a provider echoes
// a bad one; "fail503" is refused with 503 (overloaded) by every model.
func newDiagModel(t *testing.T) *httptest.Server {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Model    string                           `json:"model"`
			Messages []struct{ Role, Content string } `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, 400)
			return
		}
		last := ""
		for _, m := range body.Messages {
			if m.Role == "user" {
				last = m.Content
			}
		}
		id := fmt.Sprintf("req_%s_%d", body.Model, n.Add(1))
		w.Header().Set("x-request-id", id)
		switch {
		case strings.Contains(last, "fail400"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"error":{"message":"Incorrect request for key %s: messages[1] is malformed","type":"invalid_request_error","code":null}}`, r.Header.Get("Authorization"))
			return
		case strings.Contains(last, "fail503"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(503)
			fmt.Fprint(w, `{"error":{"message":"The server is overloaded, try again later","type":"server_error"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		answered := body.Model + "-2026-01-01"
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Answer to: %s\"},\"finish_reason\":null}]}\n\n", answered, strings.ReplaceAll(last, `"`, ``))
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":5}}\n\ndata: [DONE]\n\n", answered)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// newDiagStack is the gateway as `mirror serve` wires it, on a chain of two
// models of the fake provider (primary, then backup), its runtime and chats
// logging to log.
func newDiagStack(t *testing.T, model *httptest.Server, log *syncBuffer) *stack {
	t.Helper()
	cfg := config.Default()
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "fake", Kind: config.KindOpenAI, BaseURL: model.URL + "/v1", APIKeyEnv: "FAKE_API_KEY"})
	cfg.Models = []config.Model{
		{Name: "primary", Provider: "fake", Model: "gpt-primary", Window: 128000, ContextLimit: config.ContextAuto,
			Compaction: config.Compaction{SoftRatio: 0.2, HardRatio: 0.25}, Boundary: config.Boundary{ContinuityBudgetTokens: 8000}},
		{Name: "backup", Provider: "fake", Model: "gpt-backup", Window: 128000, ContextLimit: config.ContextAuto,
			Compaction: config.Compaction{SoftRatio: 0.2, HardRatio: 0.25}, Boundary: config.Boundary{ContinuityBudgetTokens: 8000}},
	}
	cfg.Chains = map[string][]string{"default": {"primary", "backup"}}
	cfg.Roles = config.Roles{Chat: "default", Reflect: "default"}
	db, err := chats.OpenDB(filepath.Join(t.TempDir(), "mirror.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	store, err := chats.NewStore(db)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := runtime.New(cfg, func(name string) string {
		if name == "FAKE_API_KEY" {
			return diagKey
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools.Workspace = filepath.Join(t.TempDir(), "workspace")
	reg, err := tools.New(tools.OptionsFrom(cfg, nil))
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(log, nil))
	if err := eng.Provision(runtime.Options{Tools: reg, Settings: db, Log: logger}); err != nil {
		t.Fatal(err)
	}
	svc := chats.New(chats.Options{Store: store, Turner: eng, Log: logger})
	st := serveStack(t, cfg, svc, store, db, Options{Models: eng})
	return st
}

// loginNewChat logs in (login) and starts a new chat.
func loginNewChat(t *testing.T, ctx context.Context, st *stack) {
	t.Helper()
	login(t, ctx, st)
	click(t, ctx, "#new-chat")
	until(t, ctx, "chat open", `!!document.querySelector('.chat-item.active')`)
}

// drawn is what the conversation shows, in order: each item's key (the
// message, divider, note, error or boundary it draws) and its text, the
// details included. Live and after a reload it must read the same.
// A command's answer (.note.command) is the page's own, never stored, so
// it is not compared.
const drawn = `[...document.querySelectorAll('#messages > [data-key]:not(.note.command)')].map(e => e.dataset.key + ' | ' + e.className + ' | ' + e.textContent.replace(/\d+ ms/g, 'N ms').replace(/\s+/g, ' ').trim())`

// reloadSame reloads the page and waits until it draws what it drew live.
func reloadSame(t *testing.T, ctx context.Context, what string) []string {
	t.Helper()
	live := js[[]string](t, ctx, drawn)
	do(t, ctx, chromedp.Reload())
	until(t, ctx, "reconnected", `document.querySelector('#status')?.dataset.state === 'connected'`)
	want, _ := json.Marshal(live)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`JSON.stringify(%s) === JSON.stringify(%s)`, drawn, want), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		got := js[[]string](t, ctx, drawn)
		shot(t, ctx, "reload-differs")
		t.Fatalf("%s: after a reload the page draws\n%s\nlive it drew\n%s", what, strings.Join(got, "\n"), strings.Join(live, "\n"))
	}
	return live
}

// TestBrowserDiagnosticsInDetailsAndLog: every model attempt leaves a
// diagnostic row, shown in the details under the answer or the failed
// turn's error: the model asked, the model that answered, the request id,
// the attempt, the outcome, the HTTP status and the latency. A 400 ends the
// turn at once; a 503 falls over to the chain's next model, which fails
// too. A refused slash command is a diagnostic of its own. The server log
// has one line per failed attempt, and neither it nor any stored row holds
// the API key, though the provider echoed it. A reload draws the same.
func TestBrowserDiagnosticsInDetailsAndLog(t *testing.T) {
	model := newDiagModel(t)
	var log syncBuffer
	st := newDiagStack(t, model, &log)
	ctx := browser(t)
	loginNewChat(t, ctx, st)

	// An answer: one attempt, ok, with what the provider said.
	typeAndSend(t, ctx, "hello there")
	until(t, ctx, "the answer", `!!document.querySelector('.msg.assistant[data-message]:not(.streaming)')`)
	details := `document.querySelector('.msg.assistant[data-message]:not(.streaming) details.diagnostics')`
	until(t, ctx, "its details", `!!`+details)
	if open := js[bool](t, ctx, details+`.open`); open {
		t.Error("the details are open before they are asked for")
	}
	click(t, ctx, ".msg.assistant[data-message]:not(.streaming) details.diagnostics summary")
	until(t, ctx, "details open", details+`.open && `+details+`.querySelector('.diag').getBoundingClientRect().height > 0`)
	field := func(sel, f string) string {
		return js[string](t, ctx, fmt.Sprintf(`(%s?.querySelector('[data-field=%q]')?.textContent || '')`, sel, f))
	}
	row := details + `.querySelector('.diag[data-kind="attempt"]')`
	for f, want := range map[string]string{
		"attempt": "# 1", "model": "asked primary (gpt-primary)", "answered": "answered by gpt-primary-2026-01-01",
		"outcome": "outcome ok", "request-id": "request id req_gpt-primary_1",
	} {
		if got := field(row, f); got != want {
			t.Errorf("the answer's attempt %s reads %q, want %q", f, got, want)
		}
	}
	if got := field(row, "latency"); !strings.HasPrefix(got, "took ") || !strings.HasSuffix(got, " ms") {
		t.Errorf("latency reads %q", got)
	}
	shot(t, ctx, "diag-answer")

	// A 400: not retried, the turn fails; the error has the details.
	typeAndSend(t, ctx, "please fail400 now")
	errSel := `[...document.querySelectorAll('.msg.error')].pop()`
	until(t, ctx, "the 400's error with details", `(() => { const e = `+errSel+`; return !!e && !!e.querySelector('details.diagnostics .diag') })()`)
	if n := js[int](t, ctx, errSel+`.querySelectorAll('.diag').length`); n != 1 {
		t.Fatalf("the 400 left %d diagnostics, want 1", n)
	}
	row = errSel + `.querySelector('.diag')`
	for f, want := range map[string]string{"outcome": "outcome bad_request", "status": "HTTP 400", "request-id": "request id req_gpt-primary_2", "model": "asked primary (gpt-primary)"} {
		if got := field(row, f); got != want {
			t.Errorf("the 400's %s reads %q, want %q", f, got, want)
		}
	}

	// A 503 on both models: two attempts, overloaded, then the turn fails.
	typeAndSend(t, ctx, "please fail503 now")
	until(t, ctx, "the 503's error", `document.querySelectorAll('.msg.error').length === 2 && `+errSel+`.querySelectorAll('.diag').length === 2`)
	attempts := js[[]string](t, ctx, `[...`+errSel+`.querySelectorAll('.diag')].map(d => ['attempt','model','outcome','status'].map(f => d.querySelector('[data-field="'+f+'"]')?.textContent || '').join(' / '))`)
	want := []string{"# 1 / asked primary (gpt-primary) / outcome overloaded / HTTP 503", "# 2 / asked backup (gpt-backup) / outcome overloaded / HTTP 503"}
	if fmt.Sprint(attempts) != fmt.Sprint(want) {
		t.Errorf("the 503's attempts read %q, want %q", attempts, want)
	}
	click(t, ctx, ".msg.error:last-of-type details.diagnostics summary")

	// A refused slash command: a diagnostic of the chat, shown in place.
	typeAndSend(t, ctx, "/pin")
	until(t, ctx, "the command's diagnostic", `!!document.querySelector('.diag-note details.diagnostics .diag[data-kind="command"][data-outcome="bad_input"]')`)
	shot(t, ctx, "diag-failed")

	// One log line per failed attempt (three), with the same fields.
	lines := 0
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "model attempt failed") {
			lines++
			if !strings.Contains(l, "request_id=req_gpt-") || !strings.Contains(l, "status=") {
				t.Errorf("log line without its request id or status: %s", l)
			}
		}
	}
	if lines != 3 {
		t.Errorf("%d log lines of failed attempts, want 3:\n%s", lines, log.String())
	}
	// The key reached neither the log nor the record.
	if strings.Contains(log.String(), diagKey) || strings.Contains(log.String(), "SECRET") {
		t.Errorf("the API key is in the log:\n%s", log.String())
	}
	if !strings.Contains(log.String(), "[redacted]") {
		t.Errorf("the echoed key was not redacted in the log:\n%s", log.String())
	}
	chat := js[string](t, ctx, `document.querySelector('.chat-item.active').dataset.chat`)
	frames, err := st.svc.Events(context.Background(), chat, 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, f := range frames {
		raw := string(f.Raw)
		if strings.Contains(raw, diagKey) || strings.Contains(raw, "SECRET") {
			t.Errorf("the API key is in a stored row: %s", raw)
		}
		if strings.HasPrefix(raw, `{"type":"`+chats.EvDiagnostic+`"`) {
			rows++
		}
	}
	if rows != 5 { // ok, 400, 503 twice, /pin
		t.Errorf("%d diagnostic rows, want 5", rows)
	}

	// A reload draws the same, the details included.
	reloadSame(t, ctx, "diagnostics")
}

// TestBrowserReloadDrawsTheMarksLiveDrew: a checkpoint's "Earlier turns
// checkpointed" divider, a /compact note and a /clear divider, live and
// after a reload, in the same places. After /clear the divider of the
// checkpoint before it goes (the view dropped that checkpoint), live and
// after a reload; a checkpoint planned after the clear draws it again.
func TestBrowserReloadDrawsTheMarksLiveDrew(t *testing.T) {
	st := newStack(t, func(c *config.Config) {
		m := &c.Models[0]
		// A window whose checkpoint target (30 % of the ceiling) a few
		// long messages pass, with limits high enough that no boundary
		// comes first.
		m.Window = 8000
		m.Compaction.SoftRatio, m.Compaction.HardRatio = 0.85, 0.9
	})
	ctx := browser(t)
	loginNewChat(t, ctx, st)
	lorem := strings.Repeat("lorem ipsum dolor ", 120)
	replies := 0
	send := func(text string) {
		t.Helper()
		typeAndSend(t, ctx, text)
		replies++
		until(t, ctx, fmt.Sprintf("reply %d", replies), fmt.Sprintf(`document.querySelectorAll('.msg.assistant[data-message]:not(.streaming)').length >= %d && !document.querySelector('.msg.streaming')`, replies))
	}
	checkpointed := func() {
		t.Helper()
		typeAndSend(t, ctx, "/compact keep the plan")
		until(t, ctx, "compact note", fmt.Sprintf(`document.querySelectorAll('.note.compact').length >= 1`))
		send("Next step, after the compact.")
		until(t, ctx, "checkpoint divider", `!!document.querySelector('.divider.checkpoint')`)
	}
	for i := 1; i <= 5; i++ {
		send(fmt.Sprintf("Step %d: %s", i, lorem))
	}
	checkpointed()
	reloadSame(t, ctx, "after a checkpoint")

	typeAndSend(t, ctx, "/clear")
	until(t, ctx, "cleared divider", `!!document.querySelector('.divider.cleared')`)
	until(t, ctx, "the checkpoint divider gone", `!document.querySelector('.divider.checkpoint')`)
	live := reloadSame(t, ctx, "after a clear")
	if n := js[int](t, ctx, `document.querySelectorAll('.divider.checkpoint').length`); n != 0 {
		t.Fatalf("after a reload a stale checkpoint divider shows:\n%s", strings.Join(live, "\n"))
	}

	for i := 6; i <= 10; i++ {
		send(fmt.Sprintf("Step %d: %s", i, lorem))
	}
	typeAndSend(t, ctx, "/compact again")
	until(t, ctx, "second compact note", `document.querySelectorAll('.note.compact').length === 2`)
	send("Next step, after the second compact.")
	until(t, ctx, "checkpoint divider again", `!!document.querySelector('.divider.checkpoint')`)
	live = reloadSame(t, ctx, "after a checkpoint past the clear")
	// The divider sits below the clear: it names a checkpoint of the
	// conversation after it.
	order := strings.Join(live, "\n")
	if c, cp := strings.Index(order, "divider cleared"), strings.Index(order, "divider checkpoint"); c < 0 || cp < c {
		t.Fatalf("the checkpoint divider is not below the clear:\n%s", order)
	}
	shot(t, ctx, "marks")
}

// TestBrowserReloadShowsTheQuotaWait: a reload while the turn's request
// waits for its quota shows the wait again, with the numbers and what is
// left of it, and it goes when the request does.
func TestBrowserReloadShowsTheQuotaWait(t *testing.T) {
	clock := &quotaClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	st, book, _ := newQuotaStack(t, clock)
	book.ObserveLimits(quota.Key{Provider: "builtin", Model: "echo"},
		&provider.RateLimits{InputTokens: &provider.RateWindow{Limit: 40_000, Remaining: 2_000, Reset: time.Minute}})
	ctx := browser(t)
	loginNewChat(t, ctx, st)

	typeAndSend(t, ctx, "hello under a busy quota")
	const notice = `document.querySelector('.msg.streaming .notice.quota-wait[role="status"]')`
	until(t, ctx, "the wait status", `!!`+notice)
	do(t, ctx, chromedp.Reload())
	until(t, ctx, "reconnected", `document.querySelector('#status')?.dataset.state === 'connected'`)
	until(t, ctx, "the wait status after a reload", `!!`+notice)
	text := js[string](t, ctx, notice+`.textContent`)
	var secs int
	if _, err := fmt.Sscanf(text, "Waiting %d s for the provider's tokens-per-minute quota (used 38k of 40k), then the same request continues.", &secs); err != nil || secs < 1 || secs > 60 {
		t.Fatalf("after a reload the wait status reads %q (%v)", text, err)
	}
	clock.Advance(61 * time.Second)
	until(t, ctx, "the reply", `!!document.querySelector('.msg.assistant[data-message]') && !document.querySelector('.msg.streaming')`)
	if n := js[int](t, ctx, `document.querySelectorAll('.notice.quota-wait').length`); n != 0 {
		t.Errorf("%d wait statuses after the turn proceeded", n)
	}
	// A reload now shows no wait: the request went through.
	do(t, ctx, chromedp.Reload())
	until(t, ctx, "reconnected", `document.querySelector('#status')?.dataset.state === 'connected'`)
	until(t, ctx, "the reply after a reload", `!!document.querySelector('.msg.assistant[data-message]')`)
	if n := js[int](t, ctx, `document.querySelectorAll('.notice.quota-wait').length`); n != 0 {
		t.Errorf("%d wait statuses after a reload of a finished turn", n)
	}
}
