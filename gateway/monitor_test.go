package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/monitor"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// monStack is a stack whose server has a Monitor (on a bbolt file of its
// own) and Metrics.
type monStack struct {
	*stack
	mon *monitor.Monitor
	met *monitor.Metrics
}

func newMonitorStack(t *testing.T) *monStack { return newMonitorStackWith(t, nil) }

// openMonitor opens a monitor over a database of its own, closed with t.
func openMonitor(t *testing.T, cfg *config.Config) *monitor.Monitor {
	t.Helper()
	db, err := chats.OpenDB(filepath.Join(t.TempDir(), "monitor.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	mon, err := monitor.Open(db, cfg, monitor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mon.Close)
	return mon
}

// newMonitorStackWith builds newStack's chats service with a second server
// in front of it that has the monitor; st.http and st.srv are that server.
func newMonitorStackWith(t *testing.T, mutate func(*config.Config)) *monStack {
	t.Helper()
	base := newStack(t, mutate)
	cfg := config.Default()
	if mutate != nil {
		mutate(cfg)
	}
	mon := openMonitor(t, cfg)
	met := monitor.NewMetrics()
	hs := httptest.NewUnstartedServer(nil)
	srv := New(Options{Config: cfg, Chats: base.svc, Token: testToken, Addr: hs.Listener.Addr().String(), Monitor: mon, Metrics: met})
	hs.Config.Handler = srv.Handler()
	hs.Start()
	// The feeds end first: httptest's Close waits for running handlers.
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
	})
	st := *base
	st.srv, st.http = srv, hs
	return &monStack{stack: &st, mon: mon, met: met}
}

// trip fails a provider breaker until it opens.
func trip(t *testing.T, b *monitor.Breaker) {
	t.Helper()
	for i := 0; i < 100 && b.View().State != monitor.StateOpen; i++ {
		done, err := b.Allow()
		if err != nil {
			t.Fatalf("Allow: %v", err)
		}
		done(errors.New("boom"), monitor.ClassServer)
	}
	if b.View().State != monitor.StateOpen {
		t.Fatal("breaker did not trip")
	}
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("content type %q, body %s", ct, a.body)
	}
	var m map[string]any
	if err := json.Unmarshal(a.body, &m); err != nil {
		t.Fatalf("%v: %s", err, a.body)
	}
	return m
}

func call(t *testing.T, method, u string, h http.Header) answer {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, b}
}

// checkBreaker checks a BREAKER object against the contract.
func checkBreaker(t *testing.T, b any, id, state string) map[string]any {
	t.Helper()
	m, ok := b.(map[string]any)
	if !ok {
		t.Fatalf("BREAKER is %T", b)
	}
	for _, k := range []string{"id", "kind", "scope", "state", "reason", "opened_at", "closed_at", "trips"} {
		if _, ok := m[k]; !ok {
			t.Errorf("BREAKER has no %q: %v", k, m)
		}
	}
	if m["id"] != id || m["state"] != state {
		t.Errorf("BREAKER %v, want id %s state %s", m, id, state)
	}
	for _, k := range []string{"opened_at", "closed_at"} {
		s, isString := m[k].(string)
		if m[k] == nil {
			continue
		}
		if tm, err := time.Parse(time.RFC3339, s); !isString || err != nil || !strings.HasSuffix(s, "Z") || tm.Location() != time.UTC {
			t.Errorf("%s = %v: not RFC 3339 UTC", k, m[k])
		}
	}
	if _, ok := m["trips"].(float64); !ok {
		t.Errorf("trips = %v", m["trips"])
	}
	return m
}

func TestMonitorRoutesNeedTheToken(t *testing.T) {
	st := newMonitorStack(t)
	for _, r := range []struct{ method, path string }{
		{"GET", "/api/breakers"},
		{"POST", "/api/breakers/provider%3Aopenai%2Fgpt-4o/reset"},
		{"POST", "/api/breakers/provider:openai/gpt-4o/reset"},
		{"GET", "/api/monitor/events"},
		{"GET", "/metrics"},
	} {
		for _, h := range []http.Header{nil, {"Authorization": {"Bearer wrong"}}, {"Cookie": {CookieName + "=wrong"}}} {
			a := call(t, r.method, st.http.URL+r.path, h)
			if a.status != 401 {
				t.Errorf("%s %s with %v: %d, want 401", r.method, r.path, h, a.status)
				continue
			}
			if e, _ := a.json(t)["error"].(string); e == "" {
				t.Errorf("%s %s: 401 without an error", r.method, r.path)
			}
		}
	}
	// The dashboard behaves like /: the login page, with 401.
	a := call(t, "GET", st.http.URL+"/monitor", nil)
	if a.status != 401 || !strings.Contains(string(a.body), `name="token"`) {
		t.Errorf("GET /monitor without the cookie: %d %.200s", a.status, a.body)
	}
	a = call(t, "GET", st.http.URL+"/monitor", http.Header{"Cookie": {CookieName + "=" + testToken}})
	if a.status != 200 || !strings.Contains(string(a.body), "/static/monitor.js") || a.header.Get("Content-Security-Policy") == "" {
		t.Errorf("GET /monitor with the cookie: %d %v %.200s", a.status, a.header, a.body)
	}
	for _, f := range []string{"/static/monitor.js", "/static/monitor.css"} {
		if a := call(t, "GET", st.http.URL+f, http.Header{"Cookie": {CookieName + "=" + testToken}}); a.status != 200 || len(a.body) == 0 {
			t.Errorf("GET %s: %d", f, a.status)
		}
		if a := call(t, "GET", st.http.URL+f, nil); a.status != 401 {
			t.Errorf("GET %s without the token: %d, want 401", f, a.status)
		}
	}
}

func TestBreakerAPI(t *testing.T) {
	st := newMonitorStack(t)
	const id = "provider:openai/gpt-4o"
	b := st.mon.Provider("openai", "gpt-4o")
	trip(t, b)
	st.mon.Provider("openai", "o3") // closed: never listed

	get := func() map[string]any {
		t.Helper()
		a := call(t, "GET", st.http.URL+"/api/breakers", bearer())
		if a.status != 200 {
			t.Fatalf("GET /api/breakers: %d %s", a.status, a.body)
		}
		m := a.json(t)
		if len(m) != 2 || m["unresolved"] == nil || m["history"] == nil {
			t.Fatalf("body %s: want exactly unresolved and history, both arrays", a.body)
		}
		// Exactly monitor.Snapshot.
		snap, err := st.mon.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(snap)
		var w map[string]any
		_ = json.Unmarshal(want, &w)
		if !jsonSame(m, w) {
			t.Fatalf("GET /api/breakers\n %s\nSnapshot\n %s", a.body, want)
		}
		return m
	}

	m := get()
	un := m["unresolved"].([]any)
	if len(un) != 1 || len(m["history"].([]any)) != 0 {
		t.Fatalf("%v", m)
	}
	br := checkBreaker(t, un[0], id, "open")
	if br["kind"] != "provider" || br["scope"] != "openai/gpt-4o" || br["closed_at"] != nil || br["opened_at"] == nil || br["trips"] != 1.0 || br["reason"] == "" {
		t.Fatalf("open breaker %v", br)
	}

	// Reset with the id percent-encoded, as the dashboard sends it.
	a := call(t, "POST", st.http.URL+"/api/breakers/"+url.PathEscape(id)+"/reset", bearer())
	if a.status != 200 {
		t.Fatalf("reset: %d %s", a.status, a.body)
	}
	if r := a.json(t); r["id"] != id || r["reset"] != true {
		t.Fatalf("reset answered %v", r)
	}
	if !strings.Contains(url.PathEscape(id), "%2F") {
		t.Fatal("the test meant to send an encoded slash")
	}
	m = get()
	if len(m["unresolved"].([]any)) != 0 {
		t.Fatalf("still unresolved after reset: %v", m)
	}
	hist := m["history"].([]any)
	if len(hist) != 1 {
		t.Fatalf("history %v", hist)
	}
	day := hist[0].(map[string]any)
	entries := day["entries"].([]any)
	if len(entries) != 1 {
		t.Fatalf("day %v", day)
	}
	closed := checkBreaker(t, entries[0], id, "closed")
	if closed["closed_by"] != "manual" || closed["closed_at"] == nil || day["date"] != closed["closed_at"].(string)[:10] {
		t.Fatalf("history entry %v of day %v", closed, day["date"])
	}
	if _, err := time.Parse(time.DateOnly, day["date"].(string)); err != nil {
		t.Fatalf("date %v: %v", day["date"], err)
	}
	recs, err := st.mon.Records(id)
	if err != nil || len(recs) == 0 || !recs[len(recs)-1].Manual || recs[len(recs)-1].To != monitor.StateClosed {
		t.Fatalf("records %+v %v", recs, err)
	}

	// Already closed: nothing to do, nothing recorded.
	a = call(t, "POST", st.http.URL+"/api/breakers/"+url.PathEscape(id)+"/reset", bearer())
	if r := a.json(t); a.status != 200 || r["reset"] != false {
		t.Fatalf("second reset: %d %v", a.status, r)
	}
	if again, _ := st.mon.Records(id); len(again) != len(recs) {
		t.Fatalf("a reset of a closed breaker was recorded")
	}

	// The id's slash sent as is works too.
	trip(t, st.mon.Provider("anthropic", "claude"))
	a = call(t, "POST", st.http.URL+"/api/breakers/provider:anthropic/claude/reset", bearer())
	if r := a.json(t); a.status != 200 || r["reset"] != true || r["id"] != "provider:anthropic/claude" {
		t.Fatalf("raw slash reset: %d %v", a.status, r)
	}

	// Unknown ids and other paths: 404 with a JSON error.
	for _, p := range []string{
		"/api/breakers/" + url.PathEscape("provider:nope/x") + "/reset",
		"/api/breakers/provider:nope/x/reset",
		"/api/breakers/" + url.PathEscape(id),
		"/api/breakers//reset",
	} {
		a := call(t, "POST", st.http.URL+p, bearer())
		if a.status != 404 {
			t.Errorf("POST %s: %d %s", p, a.status, a.body)
			continue
		}
		if e, _ := a.json(t)["error"].(string); e == "" {
			t.Errorf("POST %s: 404 without an error", p)
		}
	}

	// A browser on another origin is refused even with the cookie (the
	// shared forged-request check); its own origin is let through.
	trip(t, b)
	h := http.Header{"Cookie": {"mirror_token=" + testToken}}
	h.Set("Origin", "http://evil.example")
	if a := call(t, "POST", st.http.URL+"/api/breakers/"+url.PathEscape(id)+"/reset", h); a.status != 403 {
		t.Fatalf("cross-origin reset: %d", a.status)
	}
	h.Set("Origin", st.http.URL)
	if a := call(t, "POST", st.http.URL+"/api/breakers/"+url.PathEscape(id)+"/reset", h); a.status != 200 {
		t.Fatalf("same-origin reset: %d %s", a.status, a.body)
	}
}

func jsonSame(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestMonitorRoutesWithoutAMonitor(t *testing.T) {
	st := newStack(t, nil)
	for _, r := range []struct{ method, path string }{
		{"GET", "/api/breakers"},
		{"POST", "/api/breakers/provider%3Aopenai%2Fgpt-4o/reset"},
		{"GET", "/api/monitor/events"},
		{"GET", "/metrics"},
	} {
		a := call(t, r.method, st.http.URL+r.path, bearer())
		if a.status != 503 {
			t.Errorf("%s %s: %d, want 503", r.method, r.path, a.status)
			continue
		}
		if e, _ := a.json(t)["error"].(string); e == "" {
			t.Errorf("%s %s: 503 without an error", r.method, r.path)
		}
	}
}

type sse struct {
	event string
	data  map[string]any
}

// openFeed opens the live feed; the events come on the channel, which is
// closed when the stream ends.
func openFeed(t *testing.T, client *http.Client, base string) (<-chan sse, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/monitor/events", nil)
	req.Header = bearer()
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		cancel()
		t.Fatalf("feed: %d %v", resp.StatusCode, resp.Header)
	}
	ch := make(chan sse, 100)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		var ev sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" {
					ch <- ev
				}
				ev = sse{}
			case strings.HasPrefix(line, "event: "):
				ev.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data); err != nil {
					ch <- sse{event: "_garbage"}
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return ch, cancel
}

func nextEvent(t *testing.T, ch <-chan sse, event string) sse {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the feed ended waiting for %s", event)
			}
			if ev.event == event {
				return ev
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s", event)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestMonitorFeed(t *testing.T) {
	st := newMonitorStack(t)
	b := st.mon.Provider("fake", "m")
	trip(t, st.mon.Provider("old", "one")) // open before the feed: in the snapshot

	cl := st.connect()
	cl.send(map[string]any{"type": "chat.create", "title": "watched"})
	chat := cl.expect("chat.created")["chat"].(map[string]any)["id"].(string)

	feed, cancel := openFeed(t, http.DefaultClient, st.http.URL)
	snap := nextEvent(t, feed, "snapshot").data
	if un := snap["unresolved"].([]any); len(un) != 1 {
		t.Fatalf("snapshot %v", snap)
	} else {
		checkBreaker(t, un[0], "provider:old/one", "open")
	}
	list := nextEvent(t, feed, "chats").data["chats"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["id"] != chat {
		t.Fatalf("chats %v", list)
	}
	if st.srv.monitorStreams() != 1 {
		t.Fatalf("%d streams", st.srv.monitorStreams())
	}

	trip(t, b)
	ev := nextEvent(t, feed, "breaker")
	checkBreaker(t, ev.data, "provider:fake/m", "open")
	if _, err := st.mon.Reset(b.ID()); err != nil {
		t.Fatal(err)
	}
	ev = nextEvent(t, feed, "breaker")
	if checkBreaker(t, ev.data, "provider:fake/m", "closed")["closed_by"] != "manual" {
		t.Fatalf("closed %v", ev.data)
	}
	nextEvent(t, feed, "chats") // the periodic list

	// The client goes away: the handler ends and unsubscribes.
	cancel()
	waitFor(t, "the feed handler to end", func() bool { return st.srv.monitorStreams() == 0 })
	trip(t, st.mon.Provider("after", "cancel")) // no subscriber left to block or panic

	// Server.Close ends open feeds and refuses new ones.
	feed2, _ := openFeed(t, http.DefaultClient, st.http.URL)
	nextEvent(t, feed2, "snapshot")
	done := make(chan struct{})
	go func() { st.srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Server.Close did not end the feed")
	}
	for range feed2 {
	}
	if a := call(t, "GET", st.http.URL+"/api/monitor/events", bearer()); a.status != 503 {
		t.Fatalf("feed after Close: %d", a.status)
	}
}

// An http.Server's Shutdown does not cancel running handlers; the feed
// watches for it so an open dashboard does not hold a graceful shutdown.
func TestMonitorFeedEndsOnShutdown(t *testing.T) {
	st := newMonitorStack(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: st.srv.Handler(), ReadHeaderTimeout: 5 * time.Second, WriteTimeout: time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	feed, _ := openFeed(t, &http.Client{Transport: tr}, "http://"+ln.Addr().String())
	nextEvent(t, feed, "snapshot")
	// Outlives the server's WriteTimeout: the feed lifts it per write.
	time.Sleep(1500 * time.Millisecond)
	trip(t, st.mon.Provider("fake", "m"))
	nextEvent(t, feed, "breaker")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := hs.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v after %v", err, time.Since(start))
	}
	for range feed {
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatal(err)
	}
}

func TestMetricsRoute(t *testing.T) {
	st := newMonitorStack(t)
	st.met.TurnFinished("default", 2*time.Second, 100, 20, 50, "ok")
	st.met.QueueDepth(2)
	trip(t, st.mon.Provider("fake", "m"))

	a := call(t, "GET", st.http.URL+"/metrics", bearer())
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %d %v", a.status, a.header)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(a.body)))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, a.body)
	}
	find := func(name string, labels map[string]string) *dto.Metric {
		t.Helper()
		f := fams[name]
		if f == nil {
			t.Fatalf("no %s in\n%s", name, a.body)
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			return m
		}
		t.Fatalf("no %s%v", name, labels)
		return nil
	}
	if v := find("mirror_breakers", map[string]string{"kind": "provider", "state": "open"}).GetGauge().GetValue(); v != 1 {
		t.Errorf("open provider breakers %v", v)
	}
	if v := find("mirror_breakers", map[string]string{"kind": "telegram", "state": "open"}).GetGauge().GetValue(); v != 0 {
		t.Errorf("open telegram breakers %v", v)
	}
	if v := find("mirror_breaker_transitions_total", map[string]string{"kind": "provider", "from": "closed", "to": "open"}).GetCounter().GetValue(); v != 1 {
		t.Errorf("transitions %v", v)
	}
	if v := find("mirror_turns_total", map[string]string{"outcome": "ok"}).GetCounter().GetValue(); v != 1 {
		t.Errorf("turns %v", v)
	}
	if v := find("mirror_queue_depth", nil).GetGauge().GetValue(); v != 2 {
		t.Errorf("queue depth %v", v)
	}
	if !strings.Contains(string(a.body), "# TYPE mirror_turn_seconds histogram") {
		t.Error("no turn histogram")
	}
}

func TestBrowserMonitorDashboard(t *testing.T) {
	model := newHeldModel(t)
	st := newMonitorStackWith(t, func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "fake", Kind: "openai", BaseURL: model.srv.URL + "/v1"})
		c.Models[0].Provider, c.Models[0].Model = "fake", "fake-model"
	})
	ctx := browser(t)
	var mu sync.Mutex
	var pageErrors []string
	if err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *cdpruntime.EventExceptionThrown:
			mu.Lock()
			pageErrors = append(pageErrors, fmt.Sprintf("exception: %s %v", e.ExceptionDetails.Text, e.ExceptionDetails.Exception))
			mu.Unlock()
		case *cdpruntime.EventConsoleAPICalled:
			if e.Type == cdpruntime.ConsoleAPICalledTypeError {
				mu.Lock()
				pageErrors = append(pageErrors, "console.error")
				mu.Unlock()
			}
		}
	}); err != nil {
		t.Fatal(err)
	}

	// Without the cookie /monitor is the login page; sign in, come back.
	do(t, ctx, chromedp.Navigate(st.http.URL+"/monitor"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), testToken),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
		chromedp.WaitVisible(chromedp.CSS("#chat-list")),
		chromedp.Navigate(st.http.URL+"/monitor"),
		chromedp.WaitVisible(chromedp.CSS("#unresolved-empty")))
	until(t, ctx, "feed live", `document.querySelector('#feed').dataset.state === 'connected'`)

	// A chat with a running turn and one queued message.
	cl := st.connect()
	cl.send(map[string]any{"type": "chat.create", "title": "busy chat"})
	chat := cl.expect("chat.created")["chat"].(map[string]any)["id"].(string)
	cl.send(map[string]any{"type": "message.send", "chat": chat, "text": "a long question", "client_id": "k1"})
	cl.expect("message.accepted")
	model.next(t)
	cl.send(map[string]any{"type": "message.send", "chat": chat, "text": "queued", "client_id": "k2"})
	cl.expect("message.accepted")
	until(t, ctx, "running chat with its queue", fmt.Sprintf(`(() => { const e = document.querySelector('#running .running-chat[data-chat=%q]'); return !!e && e.classList.contains('busy') && e.querySelector('.queue').textContent === '1' })()`, chat))

	// A provider breaker trips: it shows up live, no reload.
	const id = "provider:fake/m"
	sel := fmt.Sprintf(`#unresolved .breaker[data-id=%q]`, id)
	trip(t, st.mon.Provider("fake", "m"))
	until(t, ctx, "breaker live under #unresolved", fmt.Sprintf(`document.querySelector('%s .state')?.textContent === 'open'`, sel))
	if got := js[string](t, ctx, fmt.Sprintf(`document.querySelector('%s .scope').textContent + '|' + document.querySelector('%s .kind').textContent + '|' + document.querySelector('%s .trips').textContent`, sel, sel, sel)); got != "fake/m|provider|1" {
		t.Fatalf("breaker shows %q", got)
	}
	if js[bool](t, ctx, `!!document.querySelector('#history .breaker')`) {
		t.Fatal("history before any reset")
	}
	shot(t, ctx, "monitor-open")

	// Reset by hand: it leaves #unresolved for today's group in #history.
	click(t, ctx, sel+" button.reset")
	until(t, ctx, "breaker gone from #unresolved", fmt.Sprintf(`!document.querySelector('%s')`, sel))
	today := time.Now().UTC().Format(time.DateOnly)
	hsel := fmt.Sprintf(`#history .day[data-date=%q] .breaker[data-id=%q]`, today, id)
	until(t, ctx, "breaker in #history", fmt.Sprintf(`document.querySelector('%s .state')?.textContent === 'closed'`, hsel))
	recs, err := st.mon.Records(id)
	if err != nil || len(recs) == 0 || !recs[len(recs)-1].Manual {
		t.Fatalf("the reset was not recorded as manual: %+v %v", recs, err)
	}
	shot(t, ctx, "monitor-reset")

	// The turn ends and the queued message is answered: the chat leaves #running.
	model.release <- struct{}{}
	until(t, ctx, "running list empties", fmt.Sprintf(`!document.querySelector('.running-chat[data-chat=%q]')`, chat))

	// No quota source yet: the section stays hidden, and nothing threw.
	if !js[bool](t, ctx, `document.querySelector('#quotas-section').hidden`) {
		t.Error("quotas shown without /api/quotas")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pageErrors) > 0 {
		t.Errorf("page errors: %v", pageErrors)
	}
}
