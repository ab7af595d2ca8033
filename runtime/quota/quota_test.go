package quota

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Tests run in testing/synctest bubbles: time.Now and timers are a fake
// clock that moves only when every goroutine is blocked, so waits of
// minutes take no real time and nothing synchronises by sleeping.

// tpm is a structured 429 of a per-minute input-token quota.
func tpm(limit int64, retry time.Duration) *provider.QuotaInfo {
	v := provider.QuotaViolation{
		Metric: "generativelanguage.googleapis.com/generate_content_free_tier_input_token_count",
		ID:     "GenerateContentInputTokensPerModelPerMinute-FreeTier",
		Limit:  limit, HasLimit: true,
	}
	provider.ClassifyQuotaID(&v)
	return &provider.QuotaInfo{QuotaViolation: v, All: []provider.QuotaViolation{v}, RetryAfter: retry}
}

func status(t *testing.T, b *Book, k Key) Status {
	t.Helper()
	for _, s := range b.Snapshot() {
		if s.Key == k {
			return s
		}
	}
	t.Fatalf("no status for %v", k)
	return Status{}
}

func TestChatsShareLearnedQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 1_000_000
		// The run lasts about half an hour: the observation must outlive it
		// (expiry is its own test).
		book := New(Options{Expiry: time.Hour})
		book.Observe429(simKey, tpm(limit, 0), 0)
		up := &upstream{now: time.Now, limit: limit}
		res := simulate(book, up, simConfig{
			chats: 10, requests: 20,
			size:    func(c, n int) int { return 50_000 + (c*37_000+n*11_000)%150_000 },
			latency: func(c, n int) time.Duration { return 2*time.Second + time.Duration(c*113+n*7)*time.Millisecond },
			start:   func(c int) time.Duration { return 0 }, // all at once: the hardest case
			sleep:   time.Sleep,
			now:     time.Now,
		})
		if len(res.failures) > 0 {
			t.Fatalf("failures: %v", res.failures)
		}
		if res.refusals != 0 {
			t.Errorf("%d 429s under a learned quota", res.refusals)
		}
		if len(up.admitted) != 200 {
			t.Errorf("%d requests admitted, want 200", len(up.admitted))
		}
		budget := int(limit * (1 - DefaultHeadroom))
		if got := maxWindow(up.admitted, time.Time{}); got > budget {
			t.Errorf("a 60 s window held %d tokens, budget %d", got, budget)
		}
		if res.waits == 0 {
			t.Error("10 chats never waited under a quota they exceed together")
		}
		st := status(t, book, simKey)
		if st.Waiting != 0 || st.Reserved != 0 {
			t.Errorf("after the run: %+v", st)
		}
	})
}

func TestSimulationLearnsFromFirst429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 1_000_000 // the upstream's; the Book starts not knowing it
		book := New(Options{Expiry: time.Hour})
		up := &upstream{now: time.Now, limit: limit}
		start := time.Now()
		res := simulate(book, up, simConfig{
			chats: 10, requests: 20,
			size:    func(c, n int) int { return 50_000 + (c*37_000+n*11_000)%150_000 },
			latency: func(c, n int) time.Duration { return 2*time.Second + time.Duration(c*113+n*7)*time.Millisecond },
			start:   func(c int) time.Duration { return time.Duration(c) * 150 * time.Millisecond },
			sleep:   time.Sleep,
			now:     time.Now,
		})
		if len(res.failures) > 0 {
			t.Fatalf("failures: %v", res.failures)
		}
		if res.refusals != 1 || res.observations != 1 {
			t.Errorf("%d 429s, %d observations: want the one that teaches the quota", res.refusals, res.observations)
		}
		if res.refusedKnown != 0 {
			t.Errorf("%d 429s drawn after the quota was known", res.refusedKnown)
		}
		if time.Since(start) > time.Hour {
			t.Fatalf("the run outlived an observation (%s); the count above is per observation", time.Since(start))
		}
		st := status(t, book, simKey)
		if st.Quota == nil || st.Quota.Limit != limit || st.Quota.Source != "429" || !st.Quota.Active {
			t.Errorf("learned %+v", st.Quota)
		}
		// Once learned, the Book keeps every window within the budget.
		var learned time.Time
		for _, a := range up.admitted {
			if a.at.After(st.Quota.ObservedAt) {
				learned = a.at
				break
			}
		}
		budget := int(limit * (1 - DefaultHeadroom))
		// The first window after learning still holds the burst that taught
		// it; every later one must fit the budget.
		if got := maxWindow(up.admitted, learned.Add(Window)); got > budget {
			t.Errorf("after learning, a 60 s window held %d tokens, budget %d", got, budget)
		}
	})
}

func TestStopDuringWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		book := New(Options{})
		book.Observe429(simKey, tpm(100_000, 0), 0)
		release, err := book.Reserve(context.Background(), simKey, 80_000, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var (
			werr  error
			waits []Wait
			done  = make(chan struct{})
		)
		start := time.Now()
		go func() {
			defer close(done)
			var rel func(Usage)
			rel, werr = book.Reserve(ctx, simKey, 50_000, func(w Wait) { waits = append(waits, w) })
			if rel != nil {
				t.Error("a stopped wait handed out a release")
			}
		}()
		synctest.Wait() // the second request is waiting for the window
		if st := status(t, book, simKey); st.Waiting != 1 {
			t.Fatalf("waiting %d, want 1", st.Waiting)
		}
		cancel()
		<-done
		if !errors.Is(werr, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", werr)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("Stop took %s of the clock", d)
		}
		if len(waits) != 1 || waits[0].Quota != 100_000 || waits[0].Usage != 80_000 || waits[0].Wait != Window {
			t.Errorf("waits %+v", waits)
		}
		st := status(t, book, simKey)
		if st.Waiting != 0 || st.Usage != 80_000 || st.Reserved != 80_000 {
			t.Errorf("after Stop: %+v", st)
		}
		release(Usage{Input: 30_000, Cached: 20_000})
		release(Usage{Input: 1}) // a second release changes nothing
		if st := status(t, book, simKey); st.Usage != 30_000 || st.Reserved != 0 {
			t.Errorf("after release twice: %+v", st)
		}
	})
}

func TestWaitsInOrderAndCorrections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		book := New(Options{})
		book.Observe429(simKey, tpm(100_000, 0), 0) // budget 90 000
		rel, _ := book.Reserve(context.Background(), simKey, 60_000, nil)
		time.Sleep(10 * time.Second)
		// Billed less than estimated: the window frees the difference.
		rel(Usage{Input: 40_000})
		start := time.Now()
		if _, err := book.Reserve(context.Background(), simKey, 50_000, nil); err != nil || time.Since(start) != 0 {
			t.Fatalf("40 000 + 50 000 fits 90 000 at once: err %v after %s", err, time.Since(start))
		}
		// Now 90 000 are held: a big one waits for both to expire, and a
		// small one behind it keeps its turn.
		var mu sync.Mutex
		var order []int
		var wg sync.WaitGroup
		for i, n := range []int{80_000, 5_000} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := book.Reserve(context.Background(), simKey, n, nil); err != nil {
					t.Error(err)
				}
				mu.Lock()
				order = append(order, n)
				mu.Unlock()
			}()
			if i == 0 {
				synctest.Wait() // the big one is first in line
			}
		}
		wg.Wait()
		if len(order) != 2 || order[0] != 80_000 {
			t.Errorf("order %v: the first in line goes first", order)
		}
		// 60 s after the second reservation (made at +10 s) both are free.
		if got := time.Since(start); got != Window {
			t.Errorf("waited %s, want %s", got, Window)
		}
	})
}

func TestObservations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		book := New(Options{})
		book.Observe429(simKey, tpm(100_000, 0), 0)

		// A new throttle replaces the observation, lower or higher.
		book.Observe429(simKey, tpm(50_000, 0), 0)
		_, err := book.Reserve(ctx, simKey, 60_000, nil)
		var big *TooLargeError
		if !errors.As(err, &big) || !errors.Is(err, ErrTooLarge) || big.Quota != 50_000 || big.Budget != 45_000 {
			t.Fatalf("60 000 under a new 50 000 quota: %v", err)
		}
		for _, want := range []string{"60000", "50000", "45000", "10%"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not say %s", err, want)
			}
		}

		// Expiry: the quota was raised meanwhile; after Expiry the key is
		// unlimited again and the larger request goes at once.
		time.Sleep(DefaultExpiry)
		st := status(t, book, simKey)
		if st.Quota == nil || st.Quota.Active || st.Quota.Limit != 50_000 || st.Budget != 0 {
			t.Errorf("after expiry the last quota stays on show, inactive: %+v", st.Quota)
		}
		start := time.Now()
		if _, err := book.Reserve(ctx, simKey, 400_000, nil); err != nil || time.Since(start) != 0 {
			t.Fatalf("after expiry: %v after %s", err, time.Since(start))
		}
		book.Observe429(simKey, tpm(1_000_000, 0), 0)
		if st := status(t, book, simKey); st.Quota.Limit != 1_000_000 || !st.Quota.Active || st.Budget != 900_000 {
			t.Errorf("relearned %+v budget %d", st.Quota, st.Budget)
		}

		// A retry delay blocks the key, then unblocks it, even with an
		// empty local window: other traffic is Google's to count.
		other := Key{Provider: "gemini", Model: "gemini-2.5-flash", Fingerprint: "ffffffffffff"}
		book.Observe429(other, &provider.QuotaInfo{}, 30*time.Second)
		var waits []Wait
		start = time.Now()
		if _, err := book.Reserve(ctx, other, 10, func(w Wait) { waits = append(waits, w) }); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 30*time.Second {
			t.Errorf("blocked for %s, want 30s", got)
		}
		if len(waits) != 1 || waits[0].Wait != 30*time.Second || waits[0].Quota != 0 {
			t.Errorf("waits %+v", waits)
		}
		if st := status(t, book, other); st.BlockedUntil != nil || st.LastWait == nil {
			t.Errorf("after the delay: %+v", st)
		}

		// A delay beyond MaxWait fails at once, with the numbers.
		book.Observe429(other, nil, 5*time.Minute)
		start = time.Now()
		_, err = book.Reserve(ctx, other, 10, nil)
		var long *WaitTooLongError
		if !errors.As(err, &long) || !errors.Is(err, ErrWaitTooLong) || !long.Blocked || long.Wait != 5*time.Minute || time.Since(start) != 0 {
			t.Errorf("5 min delay: %v", err)
		}
	})
}

func TestObserveLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		book := New(Options{})
		k := Key{Provider: "anthropic", Model: "claude", Fingerprint: "aaaaaaaaaaaa"}
		// Another process has used 80 000 of 100 000; it resets in 10 s.
		book.ObserveLimits(k, &provider.RateLimits{
			Requests:    &provider.RateWindow{Limit: 50, Remaining: 49},
			InputTokens: &provider.RateWindow{Limit: 100_000, Remaining: 20_000, Reset: 10 * time.Second},
		})
		st := status(t, book, k)
		if st.Quota == nil || st.Quota.Limit != 100_000 || st.Quota.Metric != "input_tokens" || st.Outside != 80_000 {
			t.Fatalf("%+v", st)
		}
		start := time.Now()
		if _, err := book.Reserve(context.Background(), k, 20_000, nil); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 10*time.Second {
			t.Errorf("waited %s for the reset, want 10s", got)
		}
		// OpenAI's tokens window serves when there is no input window.
		o := Key{Provider: "openai", Model: "gpt"}
		book.ObserveLimits(o, &provider.RateLimits{Tokens: &provider.RateWindow{Limit: 30_000, Remaining: -1}})
		if st := status(t, book, o); st.Quota == nil || st.Quota.Metric != "tokens" || st.Budget != 27_000 || st.Outside != 0 {
			t.Errorf("%+v", st)
		}
		book.ObserveLimits(o, nil) // teaches nothing, breaks nothing
	})
}

// TestObserveLimitsOutOfOrder: answers to requests in flight together
// arrive in any order, so headers that report less use than the book has
// already seen, within the provider's window, lower nothing; the count
// goes when the window has passed.
func TestObserveLimitsOutOfOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		book := New(Options{})
		k := Key{Provider: "openai", Model: "gpt", Fingerprint: "bbbbbbbbbbbb"}
		seen := func(remaining int64, reset time.Duration) {
			book.ObserveLimits(k, &provider.RateLimits{Tokens: &provider.RateWindow{Limit: 100_000, Remaining: remaining, Reset: reset}})
		}
		seen(10_000, 30*time.Second) // the later answer: 90 000 used
		seen(60_000, 40*time.Second) // an earlier one, arriving after it
		if st := status(t, book, k); st.Outside != 90_000 {
			t.Fatalf("outside %d after a stale answer, want 90000 kept", st.Outside)
		}
		seen(5_000, 30*time.Second) // more use is learnt at once
		if st := status(t, book, k); st.Outside != 95_000 {
			t.Fatalf("outside %d, want 95000", st.Outside)
		}
		time.Sleep(31 * time.Second) // synctest's fake clock: past the window
		if st := status(t, book, k); st.Outside != 0 {
			t.Fatalf("outside %d after the window, want 0", st.Outside)
		}
		seen(70_000, 30*time.Second) // a new window starts from what it says
		if st := status(t, book, k); st.Outside != 30_000 {
			t.Fatalf("outside %d in a new window, want 30000", st.Outside)
		}
	})
}

func TestRetry(t *testing.T) {
	live := context.Background()
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	daily := provider.QuotaViolation{ID: "GenerateRequestsPerDayPerProjectPerModel-FreeTier", Metric: "x_requests", Limit: 50, HasLimit: true}
	provider.ClassifyQuotaID(&daily)
	rpm := provider.QuotaViolation{ID: "GenerateRequestsPerMinutePerProjectPerModel", Metric: "x_requests", Limit: 10, HasLimit: true}
	provider.ClassifyQuotaID(&rpm)
	rate := func(q *provider.QuotaInfo, after time.Duration) error {
		return &provider.Error{Provider: "gemini", Class: provider.ClassRateLimited, Status: 429, Quota: q, RetryAfter: after}
	}
	tests := []struct {
		name    string
		ctx     context.Context
		attempt int
		err     error
		again   bool
	}{
		{"per-minute tokens", live, 1, rate(tpm(250_000, 0), 0), true},
		{"retry delay only", live, 1, rate(nil, 5*time.Second), true},
		{"per-minute requests", live, 1, rate(&provider.QuotaInfo{QuotaViolation: rpm, All: []provider.QuotaViolation{rpm}}, 0), true},
		{"header window", live, 1, &provider.Error{Class: provider.ClassRateLimited, Limits: &provider.RateLimits{Tokens: &provider.RateWindow{Limit: 1000, Remaining: 0}}}, true},
		{"nothing says when", live, 1, rate(nil, 0), false},
		{"last attempt", live, DefaultMaxAttempts, rate(tpm(250_000, 0), 0), false},
		{"stopped", stopped, 1, rate(tpm(250_000, 0), 0), false},
		{"daily", live, 1, &provider.Error{Class: provider.ClassQuota, Quota: &provider.QuotaInfo{QuotaViolation: daily, All: []provider.QuotaViolation{daily}}}, false},
		{"daily though classed rate-limited", live, 1, rate(&provider.QuotaInfo{QuotaViolation: daily, All: []provider.QuotaViolation{tpm(250_000, 0).QuotaViolation, daily}}, 0), false},
		{"zero quota", live, 1, &provider.Error{Class: provider.ClassQuota, Quota: tpm(0, 0)}, false},
		{"billing", live, 1, &provider.Error{Class: provider.ClassQuota, Status: 403}, false},
		{"auth", live, 1, &provider.Error{Class: provider.ClassAuth, Status: 401}, false},
		{"overloaded is the chain's business", live, 1, &provider.Error{Class: provider.ClassOverloaded, RetryAfter: time.Second}, false},
		{"not a provider error", live, 1, errors.New("boom"), false},
		{"wrapped", live, 1, errors.Join(errors.New("ctx"), rate(tpm(250_000, 0), 0)), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			book := New(Options{})
			book.ObserveError(simKey, tt.err)
			again, _ := book.Retry(tt.ctx, simKey, tt.attempt, tt.err)
			if again != tt.again {
				t.Errorf("again %v, want %v", again, tt.again)
			}
			// A refusal that cannot pass soon teaches no block and no budget.
			if provider.ClassOf(tt.err) == provider.ClassQuota {
				for _, st := range book.Snapshot() {
					if st.BlockedUntil != nil || st.Quota != nil {
						t.Errorf("a fatal refusal changed the key: %+v", st)
					}
				}
			}
		})
	}

	synctest.Test(t, func(t *testing.T) {
		book := New(Options{MaxWait: time.Minute})
		err := rate(nil, 3*time.Minute)
		book.ObserveError(simKey, err)
		if again, wait := book.Retry(live, simKey, 1, err); again || wait != 3*time.Minute {
			t.Errorf("a delay beyond MaxWait: again %v wait %s", again, wait)
		}
		err = rate(nil, 20*time.Second)
		other := Key{Provider: "gemini", Model: "m"}
		book.ObserveError(other, err)
		if again, wait := book.Retry(live, other, 1, err); !again || wait != 20*time.Second {
			t.Errorf("again %v wait %s", again, wait)
		}
	})
}

func TestBilled(t *testing.T) {
	tests := []struct {
		name string
		res  provider.Result
		err  error
		want Usage
	}{
		{"reported", provider.Result{Usage: provider.Usage{InputTokens: 1000, CachedTokens: 800}}, nil, Usage{1000, 800}},
		{"none reported", provider.Result{}, nil, KeepEstimate},
		{"429 is not counted", provider.Result{}, &provider.Error{Class: provider.ClassRateLimited}, Usage{}},
		{"bad request is not counted", provider.Result{}, &provider.Error{Class: provider.ClassBadRequest}, Usage{}},
		{"broken stream may be", provider.Result{}, &provider.Error{Class: provider.ClassNetwork}, KeepEstimate},
		{"stopped", provider.Result{}, context.Canceled, KeepEstimate},
	}
	for _, tt := range tests {
		if got := Billed(tt.res, tt.err); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
	// Cached input counts in full, even if an adapter left it out of Input.
	if got := (Usage{Input: 100, Cached: 300}).counted(); got != 300 {
		t.Errorf("counted %d", got)
	}
}

func TestSnapshotJSON(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		book := New(Options{})
		key := Key{Provider: "gemini", Model: "gemini-2.5-pro", Fingerprint: provider.Fingerprint("AIza-secret")}
		book.Observe429(key, tpm(100_000, 0), 15*time.Second)
		if _, err := book.Reserve(context.Background(), key, 1000, nil); err != nil {
			t.Fatal(err)
		}
		book.Observe429(key, tpm(100_000, 0), 15*time.Second)
		b, err := json.Marshal(book.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for _, want := range []string{`"provider":"gemini"`, `"model":"gemini-2.5-pro"`, `"fingerprint":"` + key.Fingerprint + `"`,
			`"limit":100000`, `"metric":"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count"`,
			`"observed_at":"2000-01-01T00:00:15Z"`, `"expires_at":"2000-01-01T00:10:15Z"`, `"usage":1000`, `"reserved":1000`,
			`"waiting":0`, `"last_wait":{"quota":100000,"usage":0,"wait_ms":15000`, `"blocked_until":"2000-01-01T00:00:30Z"`} {
			if !strings.Contains(s, want) {
				t.Errorf("snapshot lacks %s:\n%s", want, s)
			}
		}
		if strings.Contains(s, "secret") {
			t.Error("the snapshot shows a key")
		}
	})
}

// Amounts that expire at the same instant free the window together: a
// plan that let only one of them go would oversleep by up to a minute
// (and, on a fake clock, leave the next in line waiting for nobody).
func TestFitSameInstant(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	held := []expiring{
		{t0.Add(10 * time.Second), 300},
		{t0.Add(10 * time.Second), 300},
		{t0.Add(10 * time.Second), 300},
		{t0.Add(50 * time.Second), 500},
	}
	tests := []struct {
		room int
		want time.Duration
	}{
		{1400, 0},
		{500, 10 * time.Second},
		{499, 50 * time.Second},
		{0, 50 * time.Second},
	}
	for _, tt := range tests {
		if got := fit(held, t0, tt.room).Sub(t0); got != tt.want {
			t.Errorf("room %d: fits after %s, want %s", tt.room, got, tt.want)
		}
	}
	// Already gone at t: not counted.
	if got := fit(held, t0.Add(20*time.Second), 500).Sub(t0); got != 20*time.Second {
		t.Errorf("from +20s: %s", got)
	}
}
