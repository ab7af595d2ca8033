package gateway

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
)

// benchChat serves a gateway (the builtin model, no tools) whose one chat
// holds n messages (n/2 questions and their answers), and returns its URL
// and the chat's id.
func benchChat(b *testing.B, n int) (string, string) {
	b.Helper()
	cfg := config.Default()
	zero := time.Duration(0)
	cfg.Providers[0].Delay = &zero
	db, store, eng := openStack(b, cfg)
	svc := chats.New(chats.Options{Store: store, Turner: eng})
	srv := httptest.NewUnstartedServer(nil)
	gw := New(Options{Config: cfg, Chats: svc, Token: testToken, Addr: srv.Listener.Addr().String()})
	srv.Config.Handler = gw.Handler()
	srv.Start()
	b.Cleanup(func() {
		srv.Close()
		gw.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		svc.Close(ctx)
		store.Close()
		db.Close()
	})
	ctx := context.Background()
	c, err := svc.Create(ctx, "Long chat", "", chats.Origin{})
	if err != nil {
		b.Fatal(err)
	}
	w := make(turnEnds, 1)
	if err := svc.Open(ctx, c.ID, nil, w, ""); err != nil {
		b.Fatal(err)
	}
	for i := range n / 2 {
		text := fmt.Sprintf("Question %d: what about the %d-th paragraph of the plan, and its *risks*?", i, i)
		if _, err := svc.Send(ctx, c.ID, text, fmt.Sprint("k", i), "", chats.Origin{}); err != nil {
			b.Fatal(err)
		}
		select {
		case <-w:
		case <-time.After(30 * time.Second):
			b.Fatalf("message %d: no answer", i)
		}
	}
	_ = svc.Unsubscribe(ctx, c.ID, w)
	return srv.URL, c.ID
}

// BenchmarkBrowserFirstPaint measures, in headless Chromium at desktop
// size, the page's first contentful paint (the Performance API's
// first-contentful-paint of a load of /, logged in) and how long after
// navigation starts a 1,000-message chat opened by its link (/#ID) is
// painted (its newest message in the DOM, then two animation frames).
// Figures are in docs/benchmarks.md.
func BenchmarkBrowserFirstPaint(b *testing.B) {
	path, err := exec.LookPath("chromium")
	if err != nil {
		b.Skip("chromium not installed")
	}
	url, chat := benchChat(b, 1000)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.UserDataDir(b.TempDir()), chromedp.WindowSize(1200, 800))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 10*time.Minute)
	defer cancelT()
	if err := chromedp.Do(ctx, chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), testToken),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS("#chat-list"))); err != nil {
		b.Fatal(err)
	}
	last := fmt.Sprintf("Question %d:", 1000/2-1)
	measure := func(b *testing.B, target, ready, metric string) {
		var total float64
		for b.Loop() {
			// A fresh document each time: about:blank between loads, so
			// a hash change is a navigation and not an in-page jump.
			if err := chromedp.Do(ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(target)); err != nil {
				b.Fatal(err)
			}
			ms, err := chromedp.Run(ctx, chromedp.Poll[float64](ready, chromedp.WithPollingTimeout(60*time.Second), chromedp.WithPollingInterval(5*time.Millisecond)))
			if err != nil {
				b.Fatal(err)
			}
			total += ms
		}
		b.ReportMetric(total/float64(b.N), metric)
	}
	b.Run("page", func(b *testing.B) {
		measure(b, url+"/", `(() => { const e = performance.getEntriesByName('first-contentful-paint')[0]; return e ? e.startTime : 0 })()`, "fcp-ms")
	})
	b.Run("chat-1000", func(b *testing.B) {
		// Ready: the newest question is in the DOM; the time is taken two
		// frames later, once it has been painted.
		measure(b, url+"/#"+chat, fmt.Sprintf(`(() => {
			if (window.__painted) return window.__painted;
			if (!window.__conn && document.querySelector('#status')?.dataset.state === 'connected') window.__conn = performance.now();
			if (!window.__first && document.querySelector('#messages .msg')) window.__first = performance.now();
			if (!window.__waiting && [...document.querySelectorAll('#messages .msg.user')].some(e => e.textContent.includes(%q))) {
				window.__waiting = true;
				requestAnimationFrame(() => requestAnimationFrame(() => { window.__painted = performance.now() }));
			}
			return 0;
		})()`, last), "painted-ms")
		// Where the time went, the last load: the socket connected, the
		// first message drawn, the chat painted (ms after navigation).
		if at, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`[window.__conn || 0, window.__first || 0, window.__painted || 0]`)); err == nil {
			b.ReportMetric(at[0], "connected-ms")
			b.ReportMetric(at[1], "first-msg-ms")
		}
		// How many messages the first screen drew (the snapshot's newest
		// page; older ones load as the person scrolls up).
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#messages .msg').length`))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(n), "msgs-drawn")
	})
}
