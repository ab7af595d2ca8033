package chats

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/monitor"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/anthropic"
	"github.com/mirror-gateway/mirror/runtime/provider/openai"
)

// billedServer is a fake model server speaking a provider's wire format
// that bills each request the usage it is given next.
type billedServer struct {
	kind  string
	mu    sync.Mutex
	usage [][3]int // input (cached included), output, cached per request
	n     int
}

func (f *billedServer) next() (in, out, cached int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.usage[f.n%len(f.usage)]
	f.n++
	return u[0], u[1], u[2]
}

func (f *billedServer) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *billedServer) serve(t testing.TB) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, out, cached := f.next()
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(event string, v any) {
			b, _ := json.Marshal(v)
			if event != "" {
				fmt.Fprintf(w, "event: %s\n", event)
			}
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		switch f.kind {
		case config.KindOpenAI: // prompt_tokens counts the cached ones too
			send("", map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": "Priced."}}}})
			send("", map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}})
			send("", map[string]any{"choices": []any{}, "usage": map[string]any{"prompt_tokens": in, "completion_tokens": out,
				"prompt_tokens_details": map[string]any{"cached_tokens": cached}}})
			fmt.Fprint(w, "data: [DONE]\n\n")
		case config.KindAnthropic: // input_tokens leaves the cache read out
			send("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant",
				"model": "claude", "content": []any{}, "usage": map[string]any{"input_tokens": in - cached, "cache_read_input_tokens": cached, "output_tokens": 1}}})
			send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "Priced."}})
			send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
			send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn"}, "usage": map[string]any{"output_tokens": out}})
			send("message_stop", map[string]any{"type": "message_stop"})
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// costEnv is a service whose one model "m" is served by a billedServer,
// with a monitor keeping the cost ledger in the same bbolt file.
type costEnv struct {
	t     *testing.T
	path  string
	prov  provider.Provider
	kind  string
	cfg   *config.Config
	clock *fakeClock
	svc   *Service
	mon   *monitor.Monitor
	close func()
}

func (c *costEnv) start() {
	c.t.Helper()
	db, err := OpenDB(c.path, time.Second)
	if err != nil {
		c.t.Fatal(err)
	}
	store, err := NewStore(db)
	if err != nil {
		c.t.Fatal(err)
	}
	mon, err := monitor.Open(db, c.cfg, monitor.Options{Clock: c.clock.Now})
	if err != nil {
		c.t.Fatal(err)
	}
	eng, err := runtime.NewEngine([]*runtime.Model{{Name: "m", ProvName: "p", ProvKind: c.kind, Provider: c.prov, Remote: "gpt-4o", Window: 128000, MaxOutput: 200}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default", Reflect: "default"}, 4)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := eng.Provision(runtime.Options{Monitor: mon}); err != nil {
		c.t.Fatal(err)
	}
	c.svc, c.mon = New(Options{Store: store, Turner: eng, Idle: time.Minute}), mon
	c.close = func() { mon.Close(); store.Close(); db.Close() }
}

func (c *costEnv) stop() {
	if c.svc == nil {
		return
	}
	c.svc.Close(bg)
	c.close()
	c.svc = nil
}

// turn sends text and returns the turn's last event (finished or failed).
func (c *costEnv) turn(s *sub, chat, text string) *Event {
	c.t.Helper()
	n := count(s.events(), EvTurnFinished) + count(s.events(), EvTurnFailed)
	if _, err := c.svc.Send(bg, chat, text, fmt.Sprintf("k%d", time.Now().UnixNano()), "", Origin{}); err != nil {
		c.t.Fatal(err)
	}
	evs := s.waitFor(c.t, "the turn's end", func(evs []*Event) bool { return count(evs, EvTurnFinished)+count(evs, EvTurnFailed) > n })
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == EvTurnFinished || evs[i].Type == EvTurnFailed {
			return evs[i]
		}
	}
	return nil
}

// TestCostLedgerMatchesWhatTheProviderBilled runs real turns against fake
// OpenAI and Anthropic servers over HTTP: the chat's ledger holds their
// billed tokens exactly, cached input priced apart, and survives a
// restart. Once the chat's daily budget is spent the next turn fails with
// spending_limit before any request, and the next UTC day it runs again.
func TestCostLedgerMatchesWhatTheProviderBilled(t *testing.T) {
	for _, kind := range []string{config.KindOpenAI, config.KindAnthropic} {
		t.Run(kind, func(t *testing.T) {
			f := &billedServer{kind: kind, usage: [][3]int{{12_000, 300, 10_000}, {25_000, 700, 0}}}
			var prov provider.Provider
			if kind == config.KindOpenAI {
				prov = openai.New(openai.Config{Name: "p", BaseURL: f.serve(t)})
			} else {
				prov = anthropic.New(anthropic.Config{Name: "p", BaseURL: f.serve(t)})
			}
			cfg := config.Default()
			cfg.Models = []config.Model{{Name: "m", Prices: config.Prices{Input: 30, CachedInput: 3, Output: 150}}}
			cfg.Limits.ChatDailyBudget = 1
			day0 := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)
			c := &costEnv{t: t, path: filepath.Join(t.TempDir(), "mirror.db"), prov: prov, kind: kind, cfg: cfg, clock: &fakeClock{t: day0}}
			c.start()
			t.Cleanup(c.stop)
			ch, err := c.svc.Create(bg, "test", "", Origin{})
			if err != nil {
				t.Fatal(err)
			}
			s := newSub()
			if err := c.svc.Open(bg, ch.ID, nil, s, ""); err != nil {
				t.Fatal(err)
			}

			// 2k input at 30, 10k cached at 3, 300 output at 150: 0.135;
			// then 25k input and 700 output: 0.855. Together 0.99 < 1.
			want := []monitor.Spend{
				{Requests: 1, In: 12_000, Cached: 10_000, Out: 300, Cost: 0.06 + 0.03 + 0.045},
				{Requests: 2, In: 37_000, Cached: 10_000, Out: 1_000, Cost: 0.135 + 0.75 + 0.105},
			}
			for i, w := range want {
				if ev := c.turn(s, ch.ID, "hello"); ev.Type != EvTurnFinished {
					t.Fatalf("turn %d: %+v", i, ev)
				}
				got, err := c.mon.ChatCost(ch.ID)
				if err != nil {
					t.Fatal(err)
				}
				if g := got.Total; g.Requests != w.Requests || g.In != w.In || g.Cached != w.Cached || g.Out != w.Out || math.Abs(g.Cost-w.Cost) > 1e-9 {
					t.Fatalf("after turn %d the ledger is %+v, want %+v", i, g, w)
				}
			}

			// A third turn spends past the budget (0.99 + 0.135).
			if ev := c.turn(s, ch.ID, "once more"); ev.Type != EvTurnFinished {
				t.Fatalf("third turn: %+v", ev)
			}
			c.stop()
			c.start()
			s = newSub()
			if err := c.svc.Open(bg, ch.ID, nil, s, ""); err != nil {
				t.Fatal(err)
			}
			got, err := c.mon.ChatCost(ch.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Total.Requests != 3 || got.Total.In != 49_000 || got.Total.Cached != 20_000 || math.Abs(got.Today.Cost-1.125) > 1e-9 || got.Budget != 1 {
				t.Fatalf("after the restart the ledger is %+v", got)
			}

			sent := f.requests()
			ev := c.turn(s, ch.ID, "too much")
			fail, _ := ev.Payload.(*TurnFailed)
			if fail == nil || fail.Class != string(runtime.ClassSpending) ||
				!strings.Contains(fail.Error, "today's spending limit for this chat of $1.00 is reached") || !strings.Contains(fail.Error, "resets at 00:00 UTC") {
				t.Fatalf("over the budget: %+v", ev)
			}
			if f.requests() != sent {
				t.Fatalf("a refused turn sent %d requests", f.requests()-sent)
			}

			c.clock.Set(day0.Add(15 * time.Hour)) // 00:00 UTC the next day
			if ev := c.turn(s, ch.ID, "a new day"); ev.Type != EvTurnFinished {
				t.Fatalf("the next day: %+v", ev)
			}
			got, _ = c.mon.ChatCost(ch.ID)
			if got.Today.Requests != 1 || got.Total.Requests != 4 || len(got.Days) != 2 {
				t.Fatalf("the next day the ledger is %+v", got)
			}
		})
	}
}
