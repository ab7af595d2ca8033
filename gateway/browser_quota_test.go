package gateway

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/quota"
)

// quotaClock is the quota Book's clock in a test: it moves only when the
// test advances it, and fires the timers it passed, so a one-minute quota
// wait takes no real minute and nothing sleeps.
type quotaClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []quotaTimer
}

type quotaTimer struct {
	at time.Time
	c  chan time.Time
}

func (c *quotaClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *quotaClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := quotaTimer{at: c.now.Add(d), c: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	return t.c, func() bool { return true }
}

func (c *quotaClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	keep := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			keep = append(keep, t)
			continue
		}
		t.c <- c.now
	}
	c.timers = keep
}

// newQuotaStack is the gateway as `mirror serve` wires it for quotas: the
// engine reserving every request in a quota Book on clock, /api/quotas
// showing it, /api/models the model settings.
func newQuotaStack(t *testing.T, clock *quotaClock) (*stack, *quota.Book, *runtime.Engine) {
	t.Helper()
	cfg := config.Default()
	zero := time.Duration(0)
	cfg.Providers[0].Delay = &zero
	db, store, eng := openStack(t, cfg)
	book := quota.New(quota.Options{Clock: clock.Now, NewTimer: clock.NewTimer, Store: quota.NewBoltStore(db)})
	if err := eng.Provision(runtime.Options{Settings: db, Quota: book}); err != nil {
		t.Fatal(err)
	}
	svc := chats.New(chats.Options{Store: store, Turner: eng})
	st := serveStack(t, cfg, svc, store, db, Options{Models: eng, Quotas: func() any { return book.Snapshot() }})
	return st, book, eng
}

// TestBrowserQuotaWaitAndSettings: the provider reported a 40,000-token
// minute quota of which 38,000 are used, so the next request waits. The
// live reply shows the wait, the numbers and a countdown, without covering
// the conversation; Settings → Chains lists the chain's model with the
// reported quota, the local usage and the waiting request; when the window
// has room the turn proceeds and the status goes. Settings → Chat shows the
// chat model's soft and hard limits and the current reading.
func TestBrowserQuotaWaitAndSettings(t *testing.T) {
	clock := &quotaClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	st, book, eng := newQuotaStack(t, clock)
	key := quota.Key{Provider: "builtin", Model: "echo"}
	book.ObserveLimits(key, &provider.RateLimits{InputTokens: &provider.RateWindow{Limit: 40_000, Remaining: 2_000, Reset: time.Minute}})

	ctx := browser(t)
	loginNewChat(t, ctx, st)

	typeAndSend(t, ctx, "hello under a busy quota")
	const notice = `document.querySelector('.msg.streaming .notice.quota-wait[role="status"]')`
	until(t, ctx, "the wait status", `!!`+notice)
	text := js[string](t, ctx, notice+`.textContent`)
	var secs int
	if _, err := fmt.Sscanf(text, "Waiting %d s for the provider's tokens-per-minute quota (used 38k of 40k), then the same request continues.", &secs); err != nil || secs < 50 || secs > 60 {
		t.Fatalf("the wait status reads %q (%v)", text, err)
	}
	// It counts down on the page's own clock.
	until(t, ctx, "the countdown", fmt.Sprintf(`(() => { const m = /Waiting (\d+) s/.exec(%s?.textContent || ''); return !!m && Number(m[1]) < %d })()`, notice, secs))
	// Non-covering: it sits in the reply's column, in the flow of the log.
	if pos := js[string](t, ctx, `getComputedStyle(`+notice+`).position`); pos != "static" {
		t.Errorf("the status is positioned %q, not in the flow of the conversation", pos)
	}
	shot(t, ctx, "quota-wait")

	// Settings → Chains while the request waits.
	click(t, ctx, "#settings-open")
	until(t, ctx, "settings", `!!document.querySelector('#panel[open] .settings')`)
	click(t, ctx, `.settings-tab[data-tab="chains"]`)
	row := `#panel[open] .settings[data-tab="chains"] .chain[data-chain="default"] .chain-model[data-model="default"] .quota-row`
	until(t, ctx, "the chain's model with its quota", `!!document.querySelector('`+row+`')`)
	fieldText := func(f string) string {
		return js[string](t, ctx, fmt.Sprintf(`document.querySelector('%s dd[data-field=%q]')?.textContent || ''`, row, f))
	}
	for f, want := range map[string]string{
		"quota": "40,000 input tokens per minute",
		"usage": "38,000 tokens in the last minute of 36,000 usable",
		"wait":  "1 request waiting now",
	} {
		if got := fieldText(f); !strings.Contains(got, want) {
			t.Errorf("Chains %s reads %q, want %q in it", f, got, want)
		}
	}
	if got := fieldText("quota"); !strings.Contains(got, "enforced until") {
		t.Errorf("an active quota reads %q", got)
	}
	shot(t, ctx, "settings-chains")
	click(t, ctx, "#panel-close")

	// The model's details show the same quota.
	click(t, ctx, "#model-open")
	q := `#panel[open] .model-details[data-model="default"] section.model-quota dd[data-field="quota-quota"]`
	until(t, ctx, "the model's quota", `(document.querySelector('`+q+`')?.textContent || '').includes('40,000 input tokens per minute')`)
	click(t, ctx, "#panel-close")

	// The window has room a minute on: the same request goes, the status
	// goes with it, and the reply lands.
	clock.Advance(61 * time.Second)
	until(t, ctx, "the reply", `!!document.querySelector('.msg.assistant[data-message]') && !document.querySelector('.msg.streaming')`)
	if n := js[int](t, ctx, `document.querySelectorAll('.notice.quota-wait').length`); n != 0 {
		t.Errorf("%d wait statuses after the turn proceeded", n)
	}

	// Settings → Chat: the chat model's limits and the current reading.
	until(t, ctx, "a context reading", `!document.querySelector('#context').hidden`)
	click(t, ctx, "#settings-open")
	sel := `#panel[open] .settings[data-tab="chat"] .settings-chat[data-model="default"]`
	until(t, ctx, "the chat view", `!!document.querySelector('`+sel+`')`)
	m := eng.Models()[0]
	for f, want := range map[string]string{"soft": fmt.Sprint(m.Soft), "hard": fmt.Sprint(m.Hard)} {
		got := js[string](t, ctx, fmt.Sprintf(`(document.querySelector('%s dd[data-field=%q] .fact-value')?.textContent || '').replace(/\D/g, '')`, sel, f))
		if got != want {
			t.Errorf("Chat %s shows %q, want %s", f, got, want)
		}
	}
	if got := js[string](t, ctx, fmt.Sprintf(`document.querySelector('%s dd[data-field="reading"]').textContent`, sel)); !strings.Contains(got, "tokens of the conversation") {
		t.Errorf("the reading shows %q", got)
	}
	if got := js[string](t, ctx, fmt.Sprintf(`document.querySelector('%s dd[data-field="chain"]').textContent`, sel)); got != "default" {
		t.Errorf("the chain shows %q", got)
	}
	shot(t, ctx, "settings-chat")
	// Its button leads to where soft and hard are moved.
	click(t, ctx, sel+" button.open-model")
	until(t, ctx, "the model details", `!!document.querySelector('#panel[open] .model-details[data-model="default"] form.compaction-form')`)
}
