package telegram

import (
	"context"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// manualClock is a clock that moves only when the test moves it; its
// timers fire, in order, as it passes them.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

type manualTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func newManualClock() *manualClock { return &manualClock{now: time.Unix(1_700_000_000, 0)} }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// step fires the earliest timer due by until (moving the clock to it) and
// reports whether there was one; with none, the clock moves to until.
func (c *manualClock) step(until time.Time) bool {
	c.mu.Lock()
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	for len(c.timers) > 0 && c.timers[0].stopped {
		c.timers = c.timers[1:]
	}
	if len(c.timers) == 0 || c.timers[0].at.After(until) {
		if c.now.Before(until) {
			c.now = until
		}
		c.mu.Unlock()
		return false
	}
	t := c.timers[0]
	c.timers = c.timers[1:]
	t.stopped = true
	if c.now.Before(t.at) {
		c.now = t.at
	}
	c.mu.Unlock()
	t.f()
	return true
}

// tracked is a reserved send: when it was granted and when Telegram
// received it (somewhere between the grant and its answer).
type tracked struct {
	g        *grant
	prio     int
	n        int // order of reservation
	at       time.Time
	received time.Time
	granted  bool
}

// collect records the grant time of every send granted since the last
// look, sends it (its answer comes after a random latency of up to 300 ms,
// Telegram receiving it at a random moment of that), and returns those
// still waiting.
func collect(c *manualClock, l *limiter, rng *rand.Rand, waiting []*tracked) []*tracked {
	now := c.Now()
	out := waiting[:0]
	for _, x := range waiting {
		select {
		case <-x.g.ready:
			x.granted, x.at = true, now
			lat := time.Duration(rng.IntN(300)) * time.Millisecond
			x.received = now.Add(time.Duration(rng.Float64() * float64(lat)))
			g := x.g
			c.AfterFunc(lat, func() { l.finish(g) })
		default:
			out = append(out, x)
		}
	}
	return out
}

// TestLimiterHoldsEverySlidingWindow drives the limiter with bursts of
// sends of every priority at random moments of a manual clock, each send
// taking a random time on the network, and checks what Telegram receives:
// no window of one second (t-1s, t] ever holds more than the budget. Every
// send is granted in the end, and none while one of a more urgent
// priority, reserved before it, still waits.
func TestLimiterHoldsEverySlidingWindow(t *testing.T) {
	for _, rate := range []int{1, 4, 25} {
		clk := newManualClock()
		l := newLimiter(clk, rate, time.Second)
		rng := rand.New(rand.NewPCG(uint64(rate), 7))
		var all, waiting []*tracked
		for round := 0; round < 150; round++ {
			for range rng.IntN(2 * rate) {
				p := rng.IntN(numPrios)
				x := &tracked{g: l.reserve(p), prio: p, n: len(all)}
				all, waiting = append(all, x), append(waiting, x)
				waiting = collect(clk, l, rng, waiting)
			}
			until := clk.Now().Add(time.Duration(rng.IntN(400)+1) * time.Millisecond)
			for clk.step(until) {
				waiting = collect(clk, l, rng, waiting)
			}
			waiting = collect(clk, l, rng, waiting)
		}
		// Drain: everything is granted once the clock runs on.
		for i := 0; i < 100000 && clk.step(clk.Now().Add(time.Hour)); i++ {
			waiting = collect(clk, l, rng, waiting)
		}
		var times []time.Time
		for _, x := range all {
			if !x.granted {
				t.Fatalf("rate %d: send %d (priority %d) never granted", rate, x.n, x.prio)
			}
			times = append(times, x.received)
		}
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		if got := maxInWindow(times, time.Second); got > rate {
			t.Fatalf("rate %d: Telegram received %d sends in one sliding second", rate, got)
		}
		// In reservation order: the latest grant so far of each priority.
		var latest [numPrios]time.Time
		for _, a := range all {
			for p := 0; p < a.prio; p++ {
				if latest[p].After(a.at) {
					t.Fatalf("rate %d: send %d (priority %d) granted at %v while a more urgent one reserved before it waited until %v",
						rate, a.n, a.prio, a.at, latest[p])
				}
			}
			if a.at.After(latest[a.prio]) {
				latest[a.prio] = a.at
			}
		}
		if len(all) < 50*rate {
			t.Fatalf("rate %d: only %d sends; the test drives too few", rate, len(all))
		}
	}
}

// TestLimiterPriorities: with the window full, first texts go before final
// texts, and both before streaming edits, each in the order they came; a
// cancelled wait takes no slot.
func TestLimiterPriorities(t *testing.T) {
	clk := newManualClock()
	l := newLimiter(clk, 5, time.Second)
	for range 5 {
		g := l.reserve(prioEdit)
		select {
		case <-g.ready:
			l.finish(g) // answered at once: it counts for the second after
		default:
			t.Fatal("an empty window held a send")
		}
	}
	var order []string
	var mu sync.Mutex
	type want struct {
		name string
		prio int
	}
	sends := []want{{"edit1", prioEdit}, {"final1", prioFinal}, {"edit2", prioEdit}, {"first1", prioFirst}, {"first2", prioFirst}, {"final2", prioFinal}, {"edit3", prioEdit}}
	grants := map[string]*grant{}
	for _, s := range sends {
		grants[s.name] = l.reserve(s.prio)
	}
	// A send that gives up while waiting leaves its place to the others.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.wait(ctx, prioFirst); err == nil {
		t.Fatal("a cancelled wait was granted with the window full")
	}
	look := func() {
		for _, s := range sends {
			g := grants[s.name]
			if g == nil {
				continue
			}
			select {
			case <-g.ready:
				mu.Lock()
				order = append(order, s.name)
				mu.Unlock()
				grants[s.name] = nil
				l.finish(g)
			default:
			}
		}
	}
	look()
	if len(order) != 0 {
		t.Fatalf("granted %v with the window full", order)
	}
	clk.step(clk.Now().Add(time.Second))
	look()
	sort.Strings(order)
	if got := strings.Join(order, " "); got != "edit1 final1 final2 first1 first2" {
		t.Fatalf("granted %s, want the first and final texts and the oldest edit", got)
	}
	clk.step(clk.Now().Add(time.Second))
	look()
	if got := strings.Join(order[5:], " "); len(order) != 7 || got != "edit2 edit3" {
		t.Fatalf("then %v", order)
	}
}

func TestMaxInWindow(t *testing.T) {
	base := time.Unix(0, 0)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, base.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	for _, tc := range []struct {
		ts   []time.Time
		want int
	}{
		{nil, 0},
		{at(0), 1},
		{at(0, 999), 2},
		{at(0, 1000), 1}, // a whole second apart: never in one window
		{at(0, 500, 999, 1000, 1400), 4},
	} {
		if got := maxInWindow(tc.ts, time.Second); got != tc.want {
			t.Errorf("maxInWindow(%v) = %d, want %d", tc.ts, got, tc.want)
		}
	}
}
