package quota

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// upstream is a fake provider that enforces a real per-minute input-token
// limit the Book does not know: it counts billed tokens in a sliding
// 60-second window and refuses a request that would go over with Google's
// structured 429 (a per-minute input-token violation and a retry delay).
type upstream struct {
	now   func() time.Time
	limit int64
	// bill turns an estimate into what is billed (nil: the estimate).
	bill func(tokens int) int

	mu       sync.Mutex
	window   []admission
	admitted []admission // every admission, for checking windows afterwards
	refusals int
}

type admission struct {
	at     time.Time
	tokens int
}

func (u *upstream) call(tokens int) (provider.Result, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.now()
	n := 0
	for n < len(u.window) && !now.Before(u.window[n].at.Add(Window)) {
		n++
	}
	u.window = u.window[n:]
	billed := tokens
	if u.bill != nil {
		billed = u.bill(tokens)
	}
	sum := 0
	for _, a := range u.window {
		sum += a.tokens
	}
	if int64(sum+billed) > u.limit {
		u.refusals++
		// Google's delay: until enough of its window frees, in whole seconds.
		free, delay := int64(sum+billed)-u.limit, time.Second
		for _, a := range u.window {
			free -= int64(a.tokens)
			if free <= 0 {
				delay = a.at.Add(Window).Sub(now).Truncate(time.Second) + time.Second
				break
			}
		}
		v := provider.QuotaViolation{
			Metric:     "generativelanguage.googleapis.com/generate_content_paid_tier_input_token_count",
			ID:         "GenerateContentPaidTierInputTokensPerModelPerMinute",
			Dimensions: map[string]string{"model": "gemini-2.5-pro"},
			Limit:      u.limit, HasLimit: true,
		}
		provider.ClassifyQuotaID(&v)
		q := &provider.QuotaInfo{QuotaViolation: v, All: []provider.QuotaViolation{v}, RetryAfter: delay}
		return provider.Result{}, &provider.Error{Provider: "gemini", Class: provider.ClassRateLimited, Status: 429,
			Message: "Resource has been exhausted", Quota: q, RetryAfter: delay}
	}
	a := admission{now, billed}
	u.window = append(u.window, a)
	u.admitted = append(u.admitted, a)
	return provider.Result{Text: "ok", Usage: provider.Usage{InputTokens: billed, OutputTokens: 100}}, nil
}

// maxWindow is the most any 60-second window of admissions holds, counting
// only windows that end at or after from.
func maxWindow(adm []admission, from time.Time) int {
	best := 0
	for i, end := range adm {
		if end.at.Before(from) {
			continue
		}
		sum := 0
		for _, a := range adm[:i+1] {
			if end.at.Before(a.at.Add(Window)) {
				sum += a.tokens
			}
		}
		best = max(best, sum)
	}
	return best
}

// simConfig is one simulation: chats sharing one key, each sending its
// requests one after another the way the engine's answer loop does.
type simConfig struct {
	chats, requests int
	size            func(chat, n int) int           // input tokens of a request
	latency         func(chat, n int) time.Duration // how long the provider takes to answer
	start           func(chat int) time.Duration    // when the chat's first message comes
	sleep           func(time.Duration)             // on the simulation's clock
	now             func() time.Time
	done            func() // a chat has finished (the auto clock counts them)
}

type simResult struct {
	tokens       int // billed by the upstream
	refusals     int
	observations int // 429s the Book learned a quota from
	waits        int
	failures     []error
	// refusedKnown counts 429s drawn by requests reserved while the Book
	// already knew a quota (learned before they reserved): the goal is none.
	refusedKnown int
	first, last  time.Time // first and last admission
}

var simKey = Key{Provider: "gemini", Model: "gemini-2.5-pro", Fingerprint: "0123456789ab"}

// simulate runs cfg against up with book and reports what happened.
func simulate(book *Book, up *upstream, cfg simConfig) simResult {
	var (
		mu  sync.Mutex
		res simResult
		wg  sync.WaitGroup
	)
	known := func() bool {
		for _, s := range book.Snapshot() {
			if s.Key == simKey {
				return s.Quota != nil && s.Quota.Active
			}
		}
		return false
	}
	for c := range cfg.chats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if cfg.done != nil {
				defer cfg.done()
			}
			cfg.sleep(cfg.start(c))
			for n := range cfg.requests {
				tokens := cfg.size(c, n)
				for attempt := 1; ; attempt++ {
					release, err := book.Reserve(context.Background(), simKey, tokens, func(Wait) {
						mu.Lock()
						res.waits++
						mu.Unlock()
					})
					if err != nil {
						mu.Lock()
						res.failures = append(res.failures, fmt.Errorf("chat %d request %d: %w", c, n, err))
						mu.Unlock()
						break
					}
					wasKnown := known()
					r, err := up.call(tokens)
					if err != nil {
						// Learn before releasing, so the next in line sees
						// the quota rather than an empty window.
						book.ObserveError(simKey, err)
						release(Billed(r, err))
						mu.Lock()
						if wasKnown {
							res.refusedKnown++
						}
						if _, ok := err.(*provider.Error).Quota.InputTokensPerMinute(); ok {
							res.observations++
						}
						mu.Unlock()
						if again, _ := book.Retry(context.Background(), simKey, attempt, err); again {
							continue
						}
						mu.Lock()
						res.failures = append(res.failures, fmt.Errorf("chat %d request %d: %w", c, n, err))
						mu.Unlock()
						break
					}
					cfg.sleep(cfg.latency(c, n))
					release(Billed(r, nil))
					book.ObserveLimits(simKey, r.Limits)
					break
				}
			}
		}()
	}
	wg.Wait()
	up.mu.Lock()
	defer up.mu.Unlock()
	res.refusals = up.refusals
	for _, a := range up.admitted {
		res.tokens += a.tokens
	}
	if len(up.admitted) > 0 {
		res.first, res.last = up.admitted[0].at, up.admitted[len(up.admitted)-1].at
	}
	return res
}

// autoClock is a fake clock for benchmarks (testing/synctest bubbles are
// for tests only): it jumps to the earliest timer once every running
// goroutine of the simulation waits on one of its timers, so a simulated
// hour takes milliseconds. A goroutine just woken may not yet have
// stopped its old timer; the driver lets the scheduler run and checks
// that nothing changed before it jumps, and a jump that still comes early
// only costs throughput (the Book checks the time itself), never a wrong
// admission.
type autoClock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*autoTimer]struct{}
	active int
	gen    uint64
	kick   chan struct{}
	quit   chan struct{}
}

type autoTimer struct {
	at time.Time
	c  chan time.Time
}

func newAutoClock(active int) *autoClock {
	c := &autoClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), timers: map[*autoTimer]struct{}{},
		active: active, kick: make(chan struct{}, 1), quit: make(chan struct{})}
	go c.drive()
	return c
}

func (c *autoClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *autoClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &autoTimer{at: c.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.c <- c.now
		return t.c, func() bool { return false }
	}
	c.timers[t] = struct{}{}
	c.gen++
	c.signal()
	return t.c, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.timers[t]
		delete(c.timers, t)
		c.gen++
		return ok
	}
}

func (c *autoClock) Sleep(d time.Duration) {
	ch, _ := c.NewTimer(d)
	<-ch
}

// Done says one goroutine of the simulation has finished.
func (c *autoClock) Done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active--
	c.gen++
	c.signal()
}

func (c *autoClock) Stop() { close(c.quit) }

func (c *autoClock) signal() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *autoClock) drive() {
	for {
		select {
		case <-c.quit:
			return
		case <-c.kick:
		}
		for {
			c.mu.Lock()
			ready := len(c.timers) > 0 && len(c.timers) >= c.active
			g := c.gen
			c.mu.Unlock()
			if !ready {
				break
			}
			for range 50 {
				runtime.Gosched()
			}
			c.mu.Lock()
			if c.gen == g && len(c.timers) >= c.active {
				var next time.Time
				for t := range c.timers {
					if next.IsZero() || t.at.Before(next) {
						next = t.at
					}
				}
				c.now = next
				for t := range c.timers {
					if !t.at.After(next) {
						t.c <- next
						delete(c.timers, t)
					}
				}
				c.gen++
			}
			c.mu.Unlock()
		}
	}
}
