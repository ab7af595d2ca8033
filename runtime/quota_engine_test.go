package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
	"github.com/mirror-gateway/mirror/runtime/provider/gemini"
	"github.com/mirror-gateway/mirror/runtime/quota"
)

// fakeClock is a quota clock that moves only when advanced: waits need no
// real sleeping.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at   time.Time
	c    chan time.Time
	done bool // fired or stopped
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.done = true
		t.c <- c.now
	} else {
		c.timers = append(c.timers, t)
	}
	return t.c, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.done
		t.done = true
		return was
	}
}

// advance moves the clock to the earliest pending timer and fires every
// timer due by then. It reports whether there was one.
func (c *fakeClock) advance() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	live := c.timers[:0]
	var next time.Time
	for _, t := range c.timers {
		if t.done {
			continue
		}
		live = append(live, t)
		if next.IsZero() || t.at.Before(next) {
			next = t.at
		}
	}
	c.timers = live
	if next.IsZero() {
		return false
	}
	if next.After(c.now) {
		c.now = next
	}
	live = c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			t.done = true
			t.c <- c.now
			continue
		}
		live = append(live, t)
	}
	c.timers = live
	return true
}

// tpmGemini is a fake Gemini API on 127.0.0.1 that enforces an
// input-tokens-per-minute quota on the fake clock, charging each request
// charge tokens, and refuses with Google's structured 429 (QuotaFailure and
// RetryInfo) when the minute is full.
type tpmGemini struct {
	*httptest.Server
	clock  *fakeClock
	limit  int
	charge int

	mu       sync.Mutex
	window   []time.Time // accepted requests, oldest first
	refused  map[string]int
	served   int
	inflight atomic.Int32
}

var chatName = regexp.MustCompile(`chat-\d+`)

func newTPMGemini(t *testing.T, clock *fakeClock, limit, charge int) *tpmGemini {
	f := &tpmGemini{clock: clock, limit: limit, charge: charge, refused: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.inflight.Add(1)
		defer f.inflight.Add(-1)
		body, _ := io.ReadAll(r.Body)
		chat := chatName.FindString(string(body))
		if r.URL.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" {
			http.Error(w, "unexpected path "+r.URL.Path, http.StatusNotFound)
			return
		}
		f.mu.Lock()
		now := f.clock.Now()
		n := 0
		for n < len(f.window) && !now.Before(f.window[n].Add(time.Minute)) {
			n++
		}
		f.window = f.window[n:]
		if (len(f.window)+1)*f.charge > f.limit {
			f.refused[chat]++
			delay := f.window[0].Add(time.Minute).Sub(now)
			f.mu.Unlock()
			w.Header().Set("Content-Type", "application/json; charset=UTF-8")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, `{"error":{"code":429,
 "message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
 "status":"RESOURCE_EXHAUSTED",
 "details":[
  {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"%d"}]},
  {"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},
  {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"%.3fs"}]}}`, f.limit, delay.Seconds())
			return
		}
		f.window = append(f.window, now)
		f.served++
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		p := f.charge
		io.WriteString(w, `data: {"candidates": [{"content": {"parts": [{"text": "Hello"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": `+fmt.Sprint(p)+`,"candidatesTokenCount": 1,"totalTokenCount": `+fmt.Sprint(p+1)+`,"promptTokensDetails": [{"modality": "TEXT","tokenCount": `+fmt.Sprint(p)+`}]},"modelVersion": "gemini-2.5-flash","responseId": "_V2BapveKcPg8QGa35aRCw"}`+"\r\n\r\n")
		w.(http.Flusher).Flush()
		io.WriteString(w, `data: {"candidates": [{"content": {"parts": [{"text": " there."}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": {"promptTokenCount": `+fmt.Sprint(p)+`,"candidatesTokenCount": 3,"totalTokenCount": `+fmt.Sprint(p+3)+`},"modelVersion": "gemini-2.5-flash","responseId": "_V2BapveKcPg8QGa35aRCw"}`+"\r\n\r\n")
	}))
	t.Cleanup(f.Close)
	return f
}

// busy says a request is inside the fake.
func (f *tpmGemini) busy() bool { return f.inflight.Load() != 0 }

// waitHost is a Host that counts quota waits and may act on them.
type waitHost struct {
	journal
	waits  atomic.Int32
	onWait func(quota.Wait)
}

func (h *waitHost) QuotaWait(w quota.Wait) {
	h.waits.Add(1)
	if h.onWait != nil {
		h.onWait(w)
	}
}

// engineEstimate is the engine's local count of a turn's first request
// over hist: the system prompt, hist, the runtime context and the tools.
func engineEstimate(t *testing.T, hist []provider.Message, window int) int {
	t.Helper()
	e, err := NewEngine([]*Model{{Name: "m", Provider: builtin.New(0), Window: window}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	in := TurnInput{Chain: "default", History: hist, Host: &journal{}, Picked: len(hist)}
	e.Prepare(&in)
	msgs := append([]provider.Message{{Role: provider.RoleSystem, Content: SystemPrompt}}, in.Prepared.View.Messages...)
	return e.estimate(provider.Request{Messages: msgs, Tools: e.offered(true)}, "")
}

func TestQuotaSharedKeyWaitsInsteadOfFailing(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	book := quota.New(quota.Options{Clock: clock.Now, NewTimer: clock.NewTimer, MaxWait: 10 * time.Minute})

	history := func(i int) []provider.Message {
		return []provider.Message{{Role: provider.RoleUser, Content: fmt.Sprintf("chat-%d: say hello", i), Tokens: 1000}}
	}
	charge := engineEstimate(t, history(0), 1<<20)    // what the engine estimates
	srv := newTPMGemini(t, clock, 5*charge-1, charge) // four requests a minute
	const secret = "AIza-test-key"
	g := gemini.New(gemini.Config{Name: "google", BaseURL: srv.URL + "/v1beta", APIKey: secret})
	e, err := NewEngine([]*Model{{Name: "flash", ProvName: "google", Provider: g, Remote: "gemini-2.5-flash",
		Window: 1 << 20, Fingerprint: provider.Fingerprint(secret)}},
		map[string][]string{"default": {"flash"}}, config.Roles{Chat: "default"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Provision(Options{Quota: book}); err != nil {
		t.Fatal(err)
	}

	const chats = 10
	host := &waitHost{}
	runChats(t, e, host, 0, chats, clock, srv)
	srv.mu.Lock()
	served, refused := srv.served, srv.refused
	srv.mu.Unlock()
	if served != chats {
		t.Errorf("served %d requests, want %d", served, chats)
	}
	total := 0
	for chat, n := range refused {
		total += n
		if n > 1 {
			t.Errorf("%s was refused %d times: once the quota is learned it should wait, not be refused again", chat, n)
		}
	}
	if total == 0 || total > chats-4 {
		t.Errorf("%d refusals in all; want some (the quota is learned from one) and at most %d", total, chats-4)
	}
	if host.waits.Load() == 0 {
		t.Error("no quota.wait reached the Host")
	}
	st := e.Quotas()
	if len(st) != 1 || st[0].Quota == nil || st[0].Quota.Limit != int64(srv.limit) || st[0].Fingerprint != provider.Fingerprint(secret) {
		t.Errorf("quotas %+v", st)
	}
	t.Logf("%d refusals, %d waits, fake time %s", total, host.waits.Load(), clock.Now().Sub(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)))

	// A Stop during a wait returns at once: the clock no longer moves, and a
	// retry delay blocks the key for minutes.
	key := quota.Key{Provider: "google", Model: "gemini-2.5-flash", Fingerprint: provider.Fingerprint(secret)}
	book.Observe429(key, nil, 5*time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var canceledAt atomic.Int64
	stopHost := &waitHost{onWait: func(quota.Wait) { canceledAt.Store(time.Now().UnixNano()); cancel() }}
	before := srv.served
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, TurnInput{Chat: "chat-99", Chain: "default", History: history(99), Host: stopHost}, func(string) error { return nil })
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("stopped during a wait: %v, want context.Canceled", err)
		}
		if d := time.Since(time.Unix(0, canceledAt.Load())); d > 2*time.Second {
			t.Fatalf("returned %s after the stop", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a stop during a quota wait did not return")
	}
	srv.mu.Lock()
	after := srv.served
	srv.mu.Unlock()
	if stopHost.waits.Load() == 0 || after != before {
		t.Fatalf("waits %d, requests sent %d", stopHost.waits.Load(), after-before)
	}
}
