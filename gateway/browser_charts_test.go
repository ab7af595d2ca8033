package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/monitor"
)

// fillAggregates sends requests through two provider breakers (b fails
// until it opens), counts a turn's tokens and samples one quota, then
// closes the monitor, which stores what it gathered; and bills two requests
// to the cost ledger.
func fillAggregates(t *testing.T, path string) {
	t.Helper()
	db, err := chats.OpenDB(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cfg := config.Default()
	cfg.Models[0].Prices = config.Prices{Input: 2, Output: 8}
	mon, err := monitor.Open(db, cfg, monitor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	// Billed requests: one priced (2 + 4), one of a model without prices
	// (no cost, so no bar).
	if _, err := mon.RecordCost("c1", cfg.Models[0].Name, 1_000_000, 500_000, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := mon.RecordCost("c1", "unpriced", 10, 10, 0); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		done, err := mon.Provider("fake", "a").Allow()
		if err != nil {
			t.Fatal(err)
		}
		done(nil, "")
	}
	trip(t, mon.Provider("fake", "b"))
	met := monitor.NewMetrics()
	met.KeepAggregates(mon)
	met.TurnFinished("main", time.Second, 1200, 300, 0, "ok")
	mon.SampleQuotas(func() []monitor.QuotaSample {
		return []monitor.QuotaSample{{Key: "fake/a", Used: 30000, Limit: 40000}}
	})
	if err := mon.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserMonitorChartsAfterRestart: aggregates stored by one monitor are
// served by the next one (a restart) at GET /api/monitor/aggregates and
// drawn by uPlot on the Monitor, at desktop and phone sizes.
func TestBrowserMonitorChartsAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "monitor.db")
	fillAggregates(t, path)

	// The restart: a new database handle and monitor on the same file.
	base := newStack(t, nil)
	cfg := config.Default()
	db, err := chats.OpenDB(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	mon, err := monitor.Open(db, cfg, monitor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mon.Close)
	hs := httptest.NewUnstartedServer(nil)
	srv := New(Options{Config: cfg, Chats: base.svc, Token: testToken, Addr: hs.Listener.Addr().String(), Monitor: mon})
	hs.Config.Handler = srv.Handler()
	hs.Start()
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
	})

	// The data route returns the stored points.
	sum := func(v any) (n float64) {
		for _, x := range v.([]any) {
			if f, ok := x.(float64); ok {
				n += f
			}
		}
		return n
	}
	for _, span := range []string{"day", "week"} {
		a := call(t, "GET", hs.URL+"/api/monitor/aggregates?span="+span, bearer())
		if a.status != http.StatusOK {
			t.Fatalf("%s: %d %s", span, a.status, a.body)
		}
		m := a.json(t)
		provs := m["providers"].([]any)
		if len(provs) != 2 {
			t.Fatalf("%s: providers %v", span, provs)
		}
		pa, pb := provs[0].(map[string]any), provs[1].(map[string]any)
		if pa["id"] != "provider:fake/a" || sum(pa["requests"]) != 3 || sum(pa["errors"]) != 0 ||
			pb["id"] != "provider:fake/b" || sum(pb["requests"]) != 5 || sum(pb["errors"]) != 5 {
			t.Errorf("%s: providers %v", span, provs)
		}
		if tok := m["tokens"].([]any); len(tok) != 1 || sum(tok[0].(map[string]any)["in"]) != 1200 || sum(tok[0].(map[string]any)["out"]) != 300 {
			t.Errorf("%s: tokens %v", span, tok)
		}
		if c := m["costs"].([]any); len(c) != 2 || c[0].(map[string]any)["model"] != config.Default().Models[0].Name || sum(c[0].(map[string]any)["cost"]) != 6 || sum(c[1].(map[string]any)["cost"]) != 0 {
			t.Errorf("%s: costs %v", span, c)
		}
		if q := m["quotas"].([]any); len(q) != 1 || q[0].(map[string]any)["key"] != "fake/a" {
			t.Errorf("%s: quotas %v", span, q)
		}
		if b := m["breakers"].([]any); len(b) != 1 || b[0].(map[string]any)["id"] != "provider:fake/b" {
			t.Errorf("%s: breakers %v", span, b)
		}
	}
	for _, c := range []struct {
		name, url string
		h         http.Header
		status    int
	}{
		{"no token", "/api/monitor/aggregates", nil, http.StatusUnauthorized},
		{"unknown span", "/api/monitor/aggregates?span=year", bearer(), http.StatusBadRequest},
		{"default span", "/api/monitor/aggregates", bearer(), http.StatusOK},
	} {
		if a := call(t, "GET", hs.URL+c.url, c.h); a.status != c.status {
			t.Errorf("%s: %d, want %d (%s)", c.name, a.status, c.status, a.body)
		}
	}
	if a := call(t, "POST", hs.URL+"/api/monitor/aggregates", bearer()); a.status != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", a.status)
	}

	// The page draws them.
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(hs.URL+"/monitor"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), testToken),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS("#chat-list")),
		chromedp.Navigate(hs.URL+"/monitor"))
	want := map[string]int{"breakers": 1, "requests": 2, "errors": 1, "latency": 2, "quota": 2, "tokens": 1, "cost": 1}
	check := func(span string) {
		t.Helper()
		until(t, ctx, "charts drawn ("+span+")", fmt.Sprintf(`document.querySelector('#charts').dataset.span === %q`, span))
		for name, n := range want {
			fig := fmt.Sprintf(`document.querySelector('#charts figure.chart[data-chart=%q]')`, name)
			got := js[string](t, ctx, fmt.Sprintf(`(() => { const f = %s; const p = f.querySelector('.uplot'); return f.dataset.series + '|' + (f.querySelectorAll('canvas').length > 0) + '|' + (p ? p.querySelectorAll('.u-legend .u-series').length - 1 : -1) })()`, fig))
			if wantStr := fmt.Sprintf("%d|true|%d", n, n); got != wantStr {
				t.Errorf("%s, %s chart: series|canvas|legend %s, want %s", span, name, got, wantStr)
			}
		}
	}
	check("day")
	shot(t, ctx, "monitor-charts-day")
	click(t, ctx, `#charts button.span[data-span="week"]`)
	check("week")
	if js[string](t, ctx, `document.querySelector('#charts button.span[data-span="week"]').getAttribute('aria-pressed')`) != "true" {
		t.Error("the week button is not pressed")
	}

	// A phone: the charts fit the screen, no sideways scrolling; in dark too.
	phone := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 390, Height: 844, DeviceScaleFactor: 2, Mobile: true}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	})
	if err := chromedp.Do(ctx, phone, chromedp.Navigate(hs.URL+"/monitor")); err != nil {
		t.Fatal(err)
	}
	check("day")
	if w := js[int](t, ctx, `Math.max(...[...document.querySelectorAll('#charts .uplot')].map(e => e.getBoundingClientRect().right))`); w > 390 {
		t.Errorf("a chart reaches %d px on a 390 px screen", w)
	}
	if js[bool](t, ctx, `document.documentElement.scrollWidth > window.innerWidth`) {
		t.Error("the Monitor scrolls sideways on a phone")
	}
	shot(t, ctx, "monitor-charts-phone-dark")
}
