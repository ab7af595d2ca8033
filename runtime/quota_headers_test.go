package runtime

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/anthropic"
	"github.com/mirror-gateway/mirror/runtime/provider/gemini"
	"github.com/mirror-gateway/mirror/runtime/provider/openai"
	"github.com/mirror-gateway/mirror/runtime/quota"
	"github.com/mirror-gateway/mirror/runtime/tokens"
)

// set moves the fake clock to t without firing timers.
func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// headerTPM is a fake OpenAI or Anthropic API on 127.0.0.1 that enforces a
// tokens-per-minute limit on the fake clock and reports it in the vendor's
// rate-limit headers on every response, refusals included.
type headerTPM struct {
	*httptest.Server
	clock     *fakeClock
	anthropic bool
	limit     int
	charge    int

	mu       sync.Mutex
	window   []time.Time
	refused  map[string]int
	served   int
	inflight atomic.Int32
}

func newHeaderTPM(t *testing.T, clock *fakeClock, anth bool, limit, charge int) *headerTPM {
	f := &headerTPM{clock: clock, anthropic: anth, limit: limit, charge: charge, refused: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.inflight.Add(1)
		defer f.inflight.Add(-1)
		body, _ := io.ReadAll(r.Body)
		chat := chatName.FindString(string(body))
		want := "/v1/chat/completions"
		if anth {
			want = "/v1/messages"
		}
		if r.URL.Path != want {
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
		over := (len(f.window)+1)*f.charge > f.limit
		if !over {
			f.window = append(f.window, now)
			f.served++
		} else {
			f.refused[chat]++
		}
		used := len(f.window) * f.charge
		reset := time.Duration(0)
		if len(f.window) > 0 {
			reset = f.window[0].Add(time.Minute).Sub(now)
		}
		limit := f.limit
		f.mu.Unlock()
		h := w.Header()
		if anth {
			at := time.Now().Add(reset).UTC().Format(time.RFC3339)
			h.Set("anthropic-ratelimit-input-tokens-limit", fmt.Sprint(limit))
			h.Set("anthropic-ratelimit-input-tokens-remaining", fmt.Sprint(max(limit-used, 0)))
			h.Set("anthropic-ratelimit-input-tokens-reset", at)
			h.Set("anthropic-ratelimit-requests-limit", "50")
			h.Set("anthropic-ratelimit-requests-remaining", "49")
			h.Set("anthropic-ratelimit-requests-reset", at)
		} else {
			h.Set("x-ratelimit-limit-requests", "500")
			h.Set("x-ratelimit-remaining-requests", "499")
			h.Set("x-ratelimit-reset-requests", "120ms")
			h.Set("x-ratelimit-limit-tokens", fmt.Sprint(limit))
			h.Set("x-ratelimit-remaining-tokens", fmt.Sprint(max(limit-used, 0)))
			h.Set("x-ratelimit-reset-tokens", reset.String())
		}
		if over {
			h.Set("Content-Type", "application/json")
			if anth {
				h.Set("retry-after", fmt.Sprint(int(reset.Seconds())+1))
				h.Set("request-id", "req_011CV5J4YZo4J3KLTDZgDN7S")
				w.WriteHeader(http.StatusTooManyRequests)
				io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization (xxx) of `+fmt.Sprint(limit)+` input tokens per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later. You may also contact sales at https://www.anthropic.com/contact-sales to discuss your options for a rate limit increase."},"request_id":"req_011CV5J4YZo4J3KLTDZgDN7S"}`)
				return
			}
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprintf(w, `{"error":{"message":"Rate limit reached for gpt-4o in organization org-xxx on tokens per min (TPM): Limit %d, Used %d, Requested %d. Please try again in %dms. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
				limit, used, f.charge, reset.Milliseconds())
			return
		}
		h.Set("Content-Type", "text/event-stream; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		send := func(s string) { io.WriteString(w, s); w.(http.Flusher).Flush() }
		p := f.charge
		if anth {
			ev := func(typ, data string) { send("event: " + typ + "\ndata: " + data + "\n\n") }
			ev("message_start", `{"type":"message_start","message":{"id":"msg_019Q1hrJbZG26Fb9BQhrkHEr","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`+fmt.Sprint(p)+`,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1,"service_tier":"standard"}}}`)
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
			ev("ping", `{"type": "ping"}`)
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`)
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" there."}}`)
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`)
			ev("message_stop", `{"type":"message_stop"}`)
			return
		}
		head := `{"id":"chatcmpl-ABfw0RdYmzAcDqP7AlR4wnLbS6mWz","object":"chat.completion.chunk","created":1727346168,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_5050236cbd",`
		send("data: " + head + `"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
		send("data: " + head + `"choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
		send("data: " + head + `"choices":[{"index":0,"delta":{"content":" there."},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
		send("data: " + head + `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}` + "\n\n")
		send("data: " + head + fmt.Sprintf(`"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":3,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`, p, p+3) + "\n\n")
		send("data: [DONE]\n\n")
	}))
	t.Cleanup(f.Close)
	return f
}

// idler is a fake provider that says whether a request is inside it.
type idler interface{ busy() bool }

func (f *headerTPM) busy() bool { return f.inflight.Load() != 0 }

// runChats runs n chats at once through e and fails t unless all finish
// in time with the fake reply. With a clock, it moves that clock to its
// next timer whenever every chat still running waits in e's quota book
// and srv holds no request: then no request is between its reservation
// and the server, so the move cannot put a request at a time the book did
// not plan (a real-time "quiet for 20 ms" guess could, on a loaded
// machine). Without one, the clock stands still.
func runChats(t *testing.T, e *Engine, host Host, first, n int, clock *fakeClock, srv idler) {
	t.Helper()
	var wg sync.WaitGroup
	var running atomic.Int32
	running.Store(int32(n))
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			defer running.Add(-1)
			c := first + i
			hist := []provider.Message{{Role: provider.RoleUser, Content: fmt.Sprintf("chat-%d: say hello", c), Tokens: 1000}}
			res, err := e.Run(context.Background(), TurnInput{Chat: fmt.Sprintf("chat-%d", c), Chain: "default", History: hist, Host: host},
				func(string) error { return nil })
			if err == nil && res.Reply != "Hello there." {
				err = fmt.Errorf("reply %q", res.Reply)
			}
			errs[i] = err
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	parked := func() bool {
		left := running.Load()
		if left == 0 || srv.busy() {
			return false
		}
		waiting := 0
		for _, st := range e.Quotas() {
			waiting += st.Waiting
		}
		return int32(waiting) == left
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case <-finished:
			for i, err := range errs {
				if err != nil {
					t.Errorf("chat-%d: %v", first+i, err)
				}
			}
			return
		case <-deadline:
			t.Fatal("the chats did not finish")
		case <-tick.C:
			if clock != nil && parked() {
				clock.advance()
			}
		}
	}
}

func testHeaderQuota(t *testing.T, anth bool, chats int) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	book := quota.New(quota.Options{Clock: clock.Now, NewTimer: clock.NewTimer, MaxWait: 10 * time.Minute})
	charge := tokens.Count(SystemPrompt) + 1000 + tokens.Overhead(2)
	srv := newHeaderTPM(t, clock, anth, 5*charge-1, charge) // four requests a minute
	var (
		p      provider.Provider
		secret string
		remote string
		name   string
	)
	if anth {
		secret, remote, name = "sk-ant-api03-test-key", "claude-sonnet-4-20250514", "anthropic"
		p = anthropic.New(anthropic.Config{Name: name, BaseURL: srv.URL + "/v1", APIKey: secret})
	} else {
		secret, remote, name = "sk-proj-test-key", "gpt-4o", "openai"
		p = openai.New(openai.Config{Name: name, BaseURL: srv.URL + "/v1", APIKey: secret})
	}
	e, err := NewEngine([]*Model{{Name: "m", ProvName: name, Provider: p, Remote: remote,
		Window: 1 << 20, Fingerprint: provider.Fingerprint(secret)}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Provision(Options{Quota: book}); err != nil {
		t.Fatal(err)
	}
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
			t.Errorf("%s was refused %d times: once the headers are seen it should wait, not be refused again", chat, n)
		}
	}
	if total > chats-4 {
		t.Errorf("%d refusals in all; want at most %d", total, chats-4)
	}
	if host.waits.Load() == 0 {
		t.Error("no quota.wait reached the Host")
	}
	st := e.Quotas()
	if len(st) != 1 || st[0].Quota == nil || st[0].Quota.Limit != int64(srv.limit) || st[0].Quota.Source != "headers" ||
		st[0].Fingerprint != provider.Fingerprint(secret) || st[0].Fingerprint == secret {
		t.Errorf("quotas %+v", st)
	} else if js := fmt.Sprintf("%+v", st); len(secret) > 0 && contains(js, secret) {
		t.Errorf("the key leaks into the quotas: %s", js)
	}
	t.Logf("%d refusals, %d waits, fake time %s", total, host.waits.Load(), clock.Now().Sub(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)))
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestQuotaOpenAIHeadersSharedKey(t *testing.T)    { testHeaderQuota(t, false, 10) }
func TestQuotaAnthropicHeadersSharedKey(t *testing.T) { testHeaderQuota(t, true, 5) }

// After Expiry a learned quota is no longer enforced: a raised limit is
// found without a restart.
func TestQuotaExpiryFindsRaisedLimit(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := &fakeClock{now: start}
	const expiry = 5 * time.Minute
	book := quota.New(quota.Options{Clock: clock.Now, NewTimer: clock.NewTimer, MaxWait: 10 * time.Minute, Expiry: expiry})
	charge := tokens.Count(SystemPrompt) + 1000 + tokens.Overhead(2)
	srv := newTPMGemini(t, clock, 5*charge-1, charge)
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

	runChats(t, e, &waitHost{}, 0, 6, clock, srv)
	st := e.Quotas()
	if len(st) != 1 || st[0].Quota == nil || !st[0].Quota.Active || st[0].Quota.Limit != int64(srv.limit) {
		t.Fatalf("no quota learned: %+v", st)
	}
	learned := st[0].Quota.ObservedAt

	// Past the Expiry (and any window or retry delay), with a raised limit.
	clock.set(learned.Add(expiry + time.Second))
	srv.mu.Lock()
	srv.limit = 100 * charge
	before, refusedBefore := srv.served, len(srv.refused)
	srv.mu.Unlock()
	if st := e.Quotas(); len(st) != 1 || st[0].Quota == nil || st[0].Quota.Active {
		t.Fatalf("quota still active after its expiry: %+v", st)
	}

	// The clock stands still now: a wait would never end, so every chat
	// must go out at once.
	host := &waitHost{}
	runChats(t, e, host, 100, 8, nil, srv)
	srv.mu.Lock()
	served, refusedAfter := srv.served-before, len(srv.refused)
	srv.mu.Unlock()
	if host.waits.Load() != 0 {
		t.Errorf("%d quota waits after the expiry: the old quota is still enforced", host.waits.Load())
	}
	if served != 8 || refusedAfter != refusedBefore {
		t.Errorf("served %d of 8, refusals %d -> %d", served, refusedBefore, refusedAfter)
	}
	if !clock.Now().Equal(learned.Add(expiry + time.Second)) {
		t.Errorf("the clock moved")
	}
}

// A daily quota is a refusal, not a budget: the turn fails at once, with no
// retry.
func TestQuotaDailyFailsAtOnce(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	book := quota.New(quota.Options{Clock: clock.Now, NewTimer: clock.NewTimer, MaxWait: 10 * time.Minute})
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"code":429,
 "message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
 "status":"RESOURCE_EXHAUSTED",
 "details":[
  {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"250"}]},
  {"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},
  {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"19s"}]}}`)
	}))
	defer srv.Close()
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
	host := &waitHost{}
	done := make(chan error, 1)
	go func() {
		hist := []provider.Message{{Role: provider.RoleUser, Content: "chat-0: say hello", Tokens: 1000}}
		_, err := e.Run(context.Background(), TurnInput{Chat: "chat-0", Chain: "default", History: hist, Host: host}, func(string) error { return nil })
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a daily quota refusal succeeded")
		}
		if c := provider.ClassOf(err); c != provider.ClassQuota {
			t.Errorf("class %q, want %q: %v", c, provider.ClassQuota, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a daily quota refusal did not fail the turn at once")
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("the server saw %d requests, want 1 (no retry)", n)
	}
	if host.waits.Load() != 0 {
		t.Errorf("%d quota waits for a daily quota", host.waits.Load())
	}
}
