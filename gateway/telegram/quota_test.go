package telegram

import (
	"sync"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/chats"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/quota"
)

// bookClock is the quota Book's clock: it moves only when the test
// advances it, firing the timers it passes, so a minute's wait takes none.
type bookClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []bookTimer
}

type bookTimer struct {
	at time.Time
	c  chan time.Time
}

func (c *bookClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *bookClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := bookTimer{at: c.now.Add(d), c: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	return t.c, func() bool { return true }
}

func (c *bookClock) Advance(d time.Duration) {
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

// TestQuotaWaitShowsShortStatus: the provider reported a 40,000-token
// minute quota with 38,000 used, so the reply's request waits. The
// Telegram chat shows one short status line in the reply's message, within
// the chat's pacing; when the window has room the reply replaces it.
func TestQuotaWaitShowsShortStatus(t *testing.T) {
	clock := &bookClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	book := quota.New(quota.Options{Clock: clock.Now, NewTimer: clock.NewTimer})
	book.ObserveLimits(quota.Key{Provider: "builtin", Model: "echo"},
		&provider.RateLimits{InputTokens: &provider.RateWindow{Limit: 40_000, Remaining: 2_000, Reset: time.Minute}})
	st := newStackWith(t, stackOpts{delay: time.Millisecond, quota: book})

	st.fake.pushText(111, 111, "hello under a busy quota")
	const line = "⏳ Waiting about 60 s for the provider's per-minute quota (38k of 40k used)."
	st.fake.waitFor("the wait status", func() bool { return st.fake.hasTextLocked(111, line) })
	if n := count(st.fake.texts(111), "Waiting about"); n != 1 {
		t.Errorf("the status is in %d messages, want 1: %q", n, st.fake.texts(111))
	}

	clock.Advance(61 * time.Second)
	st.waitReply(t, 111, "You said")
	if n := count(st.fake.texts(111), "Waiting about"); n != 0 {
		t.Errorf("the status stayed after the reply: %q", st.fake.texts(111))
	}
	if st.fake.n429 != 0 {
		t.Errorf("%d 429s: the status broke the chat's pacing", st.fake.n429)
	}
}

func TestWaitLine(t *testing.T) {
	for _, tc := range []struct {
		ev   *chats.QuotaWait
		want string
	}{
		{&chats.QuotaWait{Quota: 40_000, Usage: 38_000, WaitMS: 12_400}, "⏳ Waiting about 12 s for the provider's per-minute quota (38k of 40k used)."},
		{&chats.QuotaWait{Quota: 2_000_000, Usage: 1_260_000, WaitMS: 100}, "⏳ Waiting about 1 s for the provider's per-minute quota (1.3M of 2M used)."},
		{&chats.QuotaWait{Quota: 0, WaitMS: 30_000}, "⏳ Waiting about 30 s: the provider asked to retry later."},
		{&chats.QuotaWait{Quota: 900, Usage: 950, WaitMS: 1_600}, "⏳ Waiting about 2 s for the provider's per-minute quota (950 of 900 used)."},
	} {
		if got := waitLine(tc.ev); got != tc.want {
			t.Errorf("waitLine(%d, %d, %d) = %q, want %q", tc.ev.Quota, tc.ev.Usage, tc.ev.WaitMS, got, tc.want)
		}
	}
}
