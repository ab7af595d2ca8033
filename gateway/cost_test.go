package gateway

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"net/http/httptest"

	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/runtime"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/monitor"
)

// TestChatCostRoute: GET /api/chats/{id}/cost answers the chat's ledger
// (only that chat's requests), 404 for a chat that does not exist, 401
// without the token.
func TestChatCostRoute(t *testing.T) {
	st := newMonitorStackWith(t, func(c *config.Config) {
		c.Models[0].Prices = config.Prices{Input: 1, CachedInput: 0.1, Output: 4}
		c.Limits.ChatDailyBudget = 2
	})
	model := config.Default().Models[0].Name
	ch, err := st.svc.Create(t.Context(), "priced", "", chats.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	st.mon.RecordCost(ch.ID, model, 1_000_000, 250_000, 500_000) // 0.5 + 0.05 + 1
	st.mon.RecordCost("another", model, 1_000_000, 0, 0)

	for _, c := range []struct {
		name, path string
		auth       bool
		status     int
	}{
		{"the chat", "/api/chats/" + ch.ID + "/cost", true, 200},
		{"no such chat", "/api/chats/c_nothere/cost", true, 404},
		{"no token", "/api/chats/" + ch.ID + "/cost", false, 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := bearer()
			if !c.auth {
				h = nil
			}
			a := call(t, "GET", st.http.URL+c.path, h)
			if a.status != c.status {
				t.Fatalf("status %d, want %d: %s", a.status, c.status, a.body)
			}
			if c.status != 200 {
				return
			}
			var got monitor.ChatCost
			if err := json.Unmarshal(a.body, &got); err != nil {
				t.Fatal(err)
			}
			if got.Chat != ch.ID || got.Total.Requests != 1 || got.Total.In != 1_000_000 || got.Total.Cached != 500_000 || got.Total.Out != 250_000 ||
				math.Abs(got.Total.Cost-1.55) > 1e-9 || got.Today != got.Total || len(got.Days) != 1 || got.Days[0].Model != model || got.Budget != 2 {
				t.Errorf("body %s", a.body)
			}
		})
	}
}

// TestBrowserChatCost: the details panel of the open chat shows what the
// ledger holds for it, today and in all, with the daily budget.
func TestBrowserChatCost(t *testing.T) {
	mutate := func(c *config.Config) {
		c.Models[0].Prices = config.Prices{Input: 1, CachedInput: 0.1, Output: 4}
		c.Limits.DailyBudget = 5
	}
	base := newStack(t, mutate)
	cfg := config.Default()
	mutate(cfg)
	mon := openMonitor(t, cfg)
	eng, err := runtime.New(cfg, nil) // the Model details panel's models
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(nil)
	srv := New(Options{Config: cfg, Chats: base.svc, Token: testToken, Addr: hs.Listener.Addr().String(), Monitor: mon, Models: eng})
	hs.Config.Handler = srv.Handler()
	hs.Start()
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
	})
	st := &monStack{stack: &stack{t: t, srv: srv, http: hs, svc: base.svc}, mon: mon}
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(st.http.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), testToken),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS("#chat-list")))
	until(t, ctx, "connected", `document.querySelector('#status').dataset.state === 'connected'`)
	click(t, ctx, "#new-chat")
	until(t, ctx, "a chat open", `!!document.querySelector('.chat-item.active')`)
	id := js[string](t, ctx, `document.querySelector('.chat-item.active').dataset.chat`)
	if _, err := st.mon.RecordCost(id, config.Default().Models[0].Name, 1_000_000, 250_000, 500_000); err != nil { // 1.55
		t.Fatal(err)
	}
	click(t, ctx, "#model-open")
	until(t, ctx, "the chat's cost", fmt.Sprintf(`(() => { const s = document.querySelector('#panel[open] section.chat-cost[data-chat=%q]'); return !!s && s.dataset.total === '1.55' })()`, id))
	today := js[string](t, ctx, `document.querySelector('.chat-cost-today').textContent`)
	for _, want := range []string{"$1.55", "1 request", "1,000,000 input (500,000 cached)", "250,000 output", "daily budget of $5.00"} {
		if !strings.Contains(today, want) {
			t.Errorf("today's line %q lacks %q", today, want)
		}
	}
	shot(t, ctx, "chat-cost")
}
