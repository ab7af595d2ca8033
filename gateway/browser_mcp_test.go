package gateway

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/tools"
	"github.com/mirror-gateway/mirror/runtime/tools/mcp"
	"github.com/mirror-gateway/mirror/runtime/tools/mcp/mcptest"
)

// TestBrowserMCPTool: an MCP tool (a real server on the same SDK, over
// loopback HTTP) shows the same approval card as a built-in; allowed, its
// progress shows on its chip; Stop cancels it on the server; the Monitor
// lists the server with its state and tool count.
func TestBrowserMCPTool(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	ts := httptest.NewServer(mcptest.Handler(t.TempDir(), "", cancelled))
	t.Cleanup(ts.Close)
	m, err := mcp.New(mcp.Options{Servers: []config.MCPServer{{Name: "srv", URL: ts.URL, Timeout: time.Minute}}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	m.Start(context.Background())
	t.Cleanup(func() { m.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for !slices.ContainsFunc(m.Tools(), func(x tools.External) bool { return x.Name == "srv__slow" }) {
		if time.Now().After(deadline) {
			t.Fatal("the MCP tools never came")
		}
		time.Sleep(2 * time.Millisecond) // polling a condition, bounded
	}
	st := newStackWith(t, nil, []tools.Source{m}, func() any { return m.Status() })
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(st.http.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), testToken),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS("#chat-list")))
	until(t, ctx, "connected", `document.querySelector('#status').dataset.state === 'connected'`)
	click(t, ctx, "#new-chat")
	until(t, ctx, "chat open", `!!document.querySelector('.chat-item.active')`)
	typeAndSend(t, ctx, `/tool srv__slow {}`)
	until(t, ctx, "approval card", `!!document.querySelector('.card.approval button.allow')`)
	if !strings.Contains(js[string](t, ctx, `document.querySelector('.card.approval').textContent`), "srv__slow") {
		t.Fatal("the approval card does not name the MCP tool")
	}
	click(t, ctx, ".card.approval button.allow")
	until(t, ctx, "progress on the chip", `[...document.querySelectorAll('.msg.streaming .tools .tool')].some(e => e.textContent === 'srv__slow: working 1/2')`)
	shot(t, ctx, "mcp-progress")
	click(t, ctx, "#stop")
	select {
	case <-cancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("the server never saw the cancellation")
	}
	until(t, ctx, "turn over", `!document.querySelector('.msg.streaming')`)

	do(t, ctx, chromedp.Navigate(st.http.URL+"/monitor"))
	until(t, ctx, "MCP section", `!document.querySelector('#mcp-section').hidden`)
	got := js[string](t, ctx, `(() => { const e = document.querySelector('.mcp-server[data-name="srv"]'); return e.dataset.state + ' ' + e.querySelector('.transport').textContent + ' ' + e.querySelector('.tools').textContent })()`)
	if got != "ready http 7" {
		t.Fatalf("the Monitor shows srv as %q", got)
	}
}
