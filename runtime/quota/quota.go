// Package quota keeps learned input-token quotas per provider, model and
// key fingerprint, and makes requests wait their turn under them.
//
// No tokens-per-minute value is configured anywhere: a provider teaches the
// quota, either with a structured 429 (Google's QuotaFailure, see
// provider.QuotaInfo) or with rate-limit headers (OpenAI, Anthropic, see
// provider.RateLimits). Until one has, a key is unlimited and requests go at
// once. Once one has, every request reserves its input tokens (cached input
// counted in full, because the provider counts it) in the key's sliding
// 60-second window, against the quota less a headroom that absorbs the
// difference between local estimates and what the provider bills.
//
// An observation expires, so a raised quota (a project upgrade) is found
// without a restart: the key is unlimited again until the next 429 teaches
// it anew. A provider's retry delay blocks the key outright, because it
// also accounts for traffic this process cannot see (other keys of the same
// project, other processes).
//
// The last observation of each key outlives a restart when Options.Store
// keeps it (BoltStore, in the gateway's bbolt file): Book.Load shows it
// again, and enforces it until it expires.
//
// Waits are bounded (Options.MaxWait) and so are attempts
// (Options.MaxAttempts, see Book.Retry); a context cancel (Stop) ends a wait
// at once.
package quota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Window is the span a per-minute quota counts over.
const Window = time.Minute

// Defaults for the zero Options.
const (
	DefaultHeadroom    = 0.10
	DefaultExpiry      = 10 * time.Minute
	DefaultMaxWait     = 2 * time.Minute
	DefaultMaxAttempts = 4
)

// Options tune a Book. The zero value is usable: every field has a default.
type Options struct {
	// Clock reads the time; nil means time.Now.
	Clock func() time.Time
	// NewTimer starts a timer on Clock's time, returning its channel and a
	// stop function; nil means time.NewTimer. A fake clock in tests fires
	// it when advanced, so waits need no real sleeping.
	NewTimer func(d time.Duration) (<-chan time.Time, func() bool)
	// Headroom is the share of a learned quota left unused, for estimates
	// that come in under what the provider bills; 0 means DefaultHeadroom.
	// Use a tiny positive value to mean "almost none".
	Headroom float64
	// Expiry is how long an observation is trusted; 0 means DefaultExpiry.
	Expiry time.Duration
	// MaxWait bounds how long one Reserve may wait; 0 means DefaultMaxWait.
	MaxWait time.Duration
	// MaxAttempts bounds the attempts of one request on one model, the
	// first one included (see Book.Retry); 0 means DefaultMaxAttempts.
	MaxAttempts int
	// Store keeps the last observation of each key across restarts (see
	// Book.Load); nil keeps them in memory only.
	Store Store
	// Log reports a Store that fails to save; nil means slog.Default().
	Log *slog.Logger
}

// Key names one quota: the same API key (by fingerprint, never the key
// itself) and model share it across roles and chats.
type Key struct {
	Provider    string `json:"provider"`
	Model       string `json:"model"`
	Fingerprint string `json:"fingerprint"`
}

func (k Key) String() string {
	s := k.Provider + "/" + k.Model
	if k.Fingerprint != "" {
		s += " key " + k.Fingerprint
	}
	return s
}

// Usage is what the provider billed for one request's input. Input counts
// every input token, cached ones included (as provider.Usage.InputTokens
// does for every adapter); Cached is the part of it read from a cache, kept
// for display. A negative Input means "unknown": the reservation keeps its
// estimate (see KeepEstimate).
type Usage struct {
	Input  int `json:"input"`
	Cached int `json:"cached"`
}

// KeepEstimate is the Usage to release with when what was billed is not
// known (a stream broken after the provider accepted it): the window keeps
// the estimate rather than guess low.
var KeepEstimate = Usage{Input: -1}

// counted is what the window holds for u: cached input in full, because
// the provider's per-minute quota counts it.
func (u Usage) counted() int { return max(u.Input, u.Cached, 0) }

// FromProvider converts what an adapter reported.
func FromProvider(u provider.Usage) Usage {
	return Usage{Input: u.InputTokens, Cached: u.CachedTokens}
}

// Billed picks the Usage to release a reservation with after a request
// ended with res and err: the provider's own count when it gave one; zero
// when the provider refused the request before processing it (a 429, a bad
// key, a malformed or oversized request: those are not counted against a
// quota); the estimate otherwise (a failure mid-way, where the provider may
// well have counted the input).
func Billed(res provider.Result, err error) Usage {
	if res.Usage.InputTokens > 0 || res.Usage.CachedTokens > 0 {
		return FromProvider(res.Usage)
	}
	if err == nil {
		return KeepEstimate // the provider reported no usage
	}
	switch provider.ClassOf(err) {
	case provider.ClassRateLimited, provider.ClassQuota, provider.ClassAuth, provider.ClassPermission,
		provider.ClassNotFound, provider.ClassBadRequest, provider.ClassContextLength:
		return Usage{}
	}
	return KeepEstimate
}

// Wait describes one wait for the window (or a retry delay) to allow a
// request: the quota in force, the window's usage when the wait began, and
// how long it is expected to last. It is what the chat shows
// (quota.wait {quota, usage, wait_ms}).
type Wait struct {
	Quota  int64         // the learned per-minute quota, 0 when only a retry delay blocks
	Usage  int           // tokens counted in the window when the wait began
	Wait   time.Duration // expected wait
	Tokens int           // the request's input tokens
	At     time.Time     // when the wait began
}

// MarshalJSON writes the chat event's and the snapshot's snake_case form.
func (w Wait) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Quota  int64     `json:"quota"`
		Usage  int       `json:"usage"`
		WaitMS int64     `json:"wait_ms"`
		Tokens int       `json:"tokens"`
		At     time.Time `json:"at"`
	}{w.Quota, w.Usage, w.Wait.Milliseconds(), w.Tokens, w.At.UTC()})
}

// Observation is the last quota a provider reported for a key.
type Observation struct {
	Limit int64 `json:"limit"` // input tokens per minute
	// Metric is what the provider counts: Google's metric name, or
	// "input_tokens" / "tokens" for a header window.
	Metric string `json:"metric"`
	// ID is Google's quota id, when the observation came from a 429.
	ID string `json:"id,omitempty"`
	// Source is "429" or "headers".
	Source     string    `json:"source"`
	ObservedAt time.Time `json:"observed_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	// Active is false once the observation has expired: it is still shown,
	// but no longer enforced.
	Active bool `json:"active"`
}

// Status is one key's state, for /api/quotas.
type Status struct {
	Key
	// Quota is the last quota the provider reported, nil until one is known.
	Quota *Observation `json:"quota,omitempty"`
	// Budget is what the window may hold under an active quota (the quota
	// less headroom); 0 when none is active.
	Budget int `json:"budget"`
	// Usage is every token counted in the current window: billed amounts of
	// finished requests and estimates of running ones.
	Usage int `json:"usage"`
	// Reserved is the part of Usage still held as estimates by running
	// requests.
	Reserved int `json:"reserved"`
	// Outside is what the provider's headers say it counts beyond Usage
	// (other processes on the same key), until its reset.
	Outside int `json:"outside"`
	// Waiting is how many requests wait for the window now.
	Waiting int `json:"waiting"`
	// LastWait is the most recent wait, nil when none has happened.
	LastWait *Wait `json:"last_wait,omitempty"`
	// BlockedUntil is the end of a provider's retry delay still in force.
	BlockedUntil *time.Time `json:"blocked_until,omitempty"`
}

// ErrTooLarge is what a TooLargeError wraps.
var ErrTooLarge = errors.New("request larger than the quota allows")

// ErrWaitTooLong is what a WaitTooLongError wraps.
var ErrWaitTooLong = errors.New("quota wait longer than allowed")

// TooLargeError reports a request whose input alone is more than the key's
// whole budget: no wait can make it fit, so it fails at once. A smaller
// context (the handoff boundary) or another model is the way out.
type TooLargeError struct {
	Key      Key
	Tokens   int
	Quota    int64
	Budget   int
	Headroom float64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("quota: %s: a request of %d input tokens can never fit: the per-minute quota is %d, %d after %.0f%% headroom",
		e.Key, e.Tokens, e.Quota, e.Budget, e.Headroom*100)
}

// Unwrap lets errors.Is(err, ErrTooLarge) match.
func (e *TooLargeError) Unwrap() error { return ErrTooLarge }

// WaitTooLongError reports a wait beyond Options.MaxWait: the request
// fails now instead of hanging the chat.
type WaitTooLongError struct {
	Key     Key
	Tokens  int
	Quota   int64 // 0 when only a retry delay blocks
	Usage   int
	Wait    time.Duration // how long it would have had to wait from now
	MaxWait time.Duration
	// Blocked is true when a provider's retry delay is what is too long.
	Blocked bool
}

func (e *WaitTooLongError) Error() string {
	why := fmt.Sprintf("%d of a per-minute quota of %d in use", e.Usage, e.Quota)
	if e.Blocked {
		why = "the provider asked to retry later"
	}
	return fmt.Sprintf("quota: %s: a request of %d input tokens would wait %s (%s), more than the %s allowed",
		e.Key, e.Tokens, e.Wait.Round(time.Millisecond), why, e.MaxWait)
}

// Unwrap lets errors.Is(err, ErrWaitTooLong) match.
func (e *WaitTooLongError) Unwrap() error { return ErrWaitTooLong }

// Book holds every key's window and observation. It is safe for concurrent
// use by every chat.
type Book struct {
	opt  Options
	mu   sync.Mutex
	keys map[Key]*state
	// saving orders saves to Options.Store, so the last write of a key is
	// always its latest observation.
	saving sync.Mutex
}

// New returns an empty Book: every key is unlimited until a provider
// teaches it a quota.
func New(opt Options) *Book {
	if opt.Clock == nil {
		opt.Clock = time.Now
	}
	if opt.NewTimer == nil {
		opt.NewTimer = func(d time.Duration) (<-chan time.Time, func() bool) {
			t := time.NewTimer(d)
			return t.C, t.Stop
		}
	}
	if opt.Headroom <= 0 || opt.Headroom >= 1 || math.IsNaN(opt.Headroom) {
		opt.Headroom = DefaultHeadroom
	}
	if opt.Expiry <= 0 {
		opt.Expiry = DefaultExpiry
	}
	if opt.MaxWait <= 0 {
		opt.MaxWait = DefaultMaxWait
	}
	if opt.MaxAttempts <= 0 {
		opt.MaxAttempts = DefaultMaxAttempts
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	return &Book{opt: opt, keys: map[Key]*state{}}
}

// state is one key's accounting. Every field is guarded by Book.mu.
type state struct {
	entries []*reservation // in the window, oldest first
	obs     *Observation   // enforced; nil when unknown or expired
	last    *Observation   // last reported, kept for display after expiry
	blocked time.Time      // a retry delay in force until then
	// outside is what headers say the provider counts beyond the local
	// entries, held until outsideUntil (the provider's reset).
	outside      int
	outsideUntil time.Time
	queue        []*waiter // FIFO: only the head may reserve
	lastWait     *Wait
	// unsaved says last differs from what Options.Store holds; savedAt is
	// when it last held it.
	unsaved bool
	savedAt time.Time
	// changed is closed and replaced whenever something a waiter's plan
	// depends on changes, so waiters recompute instead of polling.
	changed chan struct{}
}

type reservation struct {
	at       time.Time
	tokens   int // the estimate, then what was billed
	released bool
}

type waiter struct{ tokens int }

func (b *Book) state(k Key) *state {
	s := b.keys[k]
	if s == nil {
		s = &state{changed: make(chan struct{})}
		b.keys[k] = s
	}
	return s
}

// wake tells every waiter of s to recompute its plan.
func (s *state) wake() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// prune drops what no longer counts at now: reservations older than the
// window, an expired observation, a past retry delay or outside count.
func (s *state) prune(now time.Time) {
	n := 0
	for n < len(s.entries) && !now.Before(s.entries[n].at.Add(Window)) {
		n++
	}
	if n > 0 {
		s.entries = append(s.entries[:0:0], s.entries[n:]...)
	}
	if s.obs != nil && !now.Before(s.obs.ExpiresAt) {
		s.obs = nil // a raised quota is found by the next 429, not assumed away
	}
	if !now.Before(s.blocked) {
		s.blocked = time.Time{}
	}
	if !now.Before(s.outsideUntil) {
		s.outside, s.outsideUntil = 0, time.Time{}
	}
}

// usage is every token counted in the window now (after prune), outside
// counts included.
func (s *state) usage() int {
	u := s.outside
	for _, r := range s.entries {
		u += r.tokens
	}
	return u
}

// budget is what the window may hold: the quota less headroom. ok is false
// when no quota is active.
func (b *Book) budget(s *state) (int, bool) {
	if s.obs == nil {
		return 0, false
	}
	return int(math.Floor(float64(s.obs.Limit) * (1 - b.opt.Headroom))), true
}

// expiring is one amount counted in the window until until.
type expiring struct {
	until  time.Time
	tokens int
}

// plan returns when the waiter at index i of the queue may reserve, by
// playing the queue forward in order: each waiter ahead of it reserves at
// its own earliest time, and its tokens then count for a window from
// there. It assumes nothing else changes (no new throttle, no corrections),
// which is why a waiter recomputes whenever anything does.
func (b *Book) plan(s *state, now time.Time, i int) time.Time {
	from := now
	if s.blocked.After(from) {
		from = s.blocked
	}
	budget, limited := b.budget(s)
	if !limited {
		return from
	}
	held := make([]expiring, 0, len(s.entries)+len(s.queue)+1)
	if s.outside > 0 {
		until := s.outsideUntil
		if limit := now.Add(Window); until.After(limit) {
			until = limit
		}
		held = append(held, expiring{until, s.outside})
	}
	for _, r := range s.entries {
		held = append(held, expiring{r.at.Add(Window), r.tokens})
	}
	sort.Slice(held, func(a, c int) bool { return held[a].until.Before(held[c].until) })
	at := from
	for j := 0; j <= i && j < len(s.queue); j++ {
		need := s.queue[j].tokens
		if need > budget {
			continue // it fails at once and leaves; it takes nothing
		}
		at = fit(held, at, budget-need)
		held = append(held, expiring{at.Add(Window), need})
	}
	if exp := s.obs.ExpiresAt; exp.Before(at) {
		// The observation lapses first; from then on the key is unlimited
		// until the provider teaches it again.
		at = exp
		if at.Before(from) {
			at = from
		}
	}
	return at
}

// fit is the earliest time from t on when what held still counts is at
// most room. held is sorted by until; the last entries may be as late as
// t+Window, so the answer always exists.
func fit(held []expiring, t time.Time, room int) time.Time {
	count := 0
	for _, h := range held {
		if h.until.After(t) {
			count += h.tokens
		}
	}
	if count <= room {
		return t
	}
	for _, h := range held {
		if !h.until.After(t) {
			continue // already gone at t, so never counted
		}
		// Amounts expiring at the same instant leave together: the next
		// one with the same until is subtracted before t moves on.
		count -= h.tokens
		if count <= room {
			return h.until
		}
	}
	return t // unreachable: count reaches 0 and room is never negative
}

func (s *state) leave(w *waiter) {
	for i, q := range s.queue {
		if q == w {
			s.queue = append(s.queue[:i:i], s.queue[i+1:]...)
			break
		}
	}
	s.wake() // the next in line may go now
}

// Reserve holds tokens input tokens (cached input counted in full) in the
// key's window before a request. With no quota learned for key it reserves
// at once. Under a learned quota it waits, in arrival order, until the
// window has room within the quota less headroom or until a provider's
// retry delay has passed, calling onWait (if not nil) when a wait begins
// and again if the expected end moves later; onWait runs without the
// Book's lock held and may be slow.
//
// It fails at once with a *TooLargeError when tokens exceed the whole
// budget, and with a *WaitTooLongError when the wait would pass
// Options.MaxWait; it returns ctx.Err() as soon as ctx is done, having
// reserved nothing.
//
// On success, release must be called exactly once when the request ends,
// with what the provider billed (see Billed): the window then holds real
// numbers rather than estimates. Calling it again does nothing.
func (b *Book) Reserve(ctx context.Context, key Key, tokens int, onWait func(Wait)) (release func(used Usage), err error) {
	tokens = max(tokens, 0)
	b.mu.Lock()
	s := b.state(key)
	start := b.opt.Clock()
	deadline := start.Add(b.opt.MaxWait)
	w := &waiter{tokens: tokens}
	s.queue = append(s.queue, w)
	var reported time.Time // expected end of the last wait reported
	for {
		now := b.opt.Clock()
		s.prune(now)
		if err := ctx.Err(); err != nil {
			s.leave(w)
			b.mu.Unlock()
			return nil, err
		}
		budget, limited := b.budget(s)
		if limited && tokens > budget {
			s.leave(w)
			b.mu.Unlock()
			return nil, &TooLargeError{Key: key, Tokens: tokens, Quota: s.obs.Limit, Budget: budget, Headroom: b.opt.Headroom}
		}
		head := s.queue[0] == w
		at := b.plan(s, now, b.index(s, w))
		if head && !at.After(now) {
			r := &reservation{at: now, tokens: tokens}
			s.entries = append(s.entries, r)
			s.leave(w)
			b.mu.Unlock()
			return func(used Usage) { b.release(s, r, used) }, nil
		}
		usage := s.usage()
		var limit int64
		if s.obs != nil {
			limit = s.obs.Limit
		}
		if at.After(deadline) {
			s.leave(w)
			blocked := s.blocked.After(deadline) // read under the lock
			b.mu.Unlock()
			return nil, &WaitTooLongError{Key: key, Tokens: tokens, Quota: limit, Usage: usage,
				Wait: at.Sub(now), MaxWait: b.opt.MaxWait, Blocked: blocked}
		}
		var report *Wait
		if at.After(now) && (reported.IsZero() || at.After(reported.Add(time.Second))) {
			reported = at
			report = &Wait{Quota: limit, Usage: usage, Wait: at.Sub(now), Tokens: tokens, At: now}
			s.lastWait = report
		}
		changed := s.changed
		var fire <-chan time.Time
		stop := func() bool { return false }
		if at.After(now) {
			// Not yet: sleep until the plan says so. A waiter behind the
			// head whose turn is due now waits for the head to go instead.
			fire, stop = b.opt.NewTimer(at.Sub(now))
		}
		b.mu.Unlock()
		if report != nil && onWait != nil {
			onWait(*report)
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-fire:
		}
		stop()
		b.mu.Lock()
	}
}

func (b *Book) index(s *state, w *waiter) int {
	for i, q := range s.queue {
		if q == w {
			return i
		}
	}
	return len(s.queue)
}

func (b *Book) release(s *state, r *reservation, used Usage) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.released {
		return
	}
	r.released = true
	if used.Input >= 0 {
		// Harmless when r already left the window: nothing reads it then.
		r.tokens = used.counted()
	}
	s.wake()
}

// observe installs o as key's observation, replacing any older one: a new
// throttle is the truth now, higher or lower.
func (b *Book) observe(s *state, o Observation) {
	o.Active = true
	s.obs = &o
	prev := s.last
	last := o
	s.last = &last
	// Save when what the provider says changed; a repeat only refreshes
	// the saved expiry now and then, so steady headers cost no write per
	// response, yet a restart still finds the quota in force.
	if prev == nil || prev.Limit != o.Limit || prev.Metric != o.Metric || prev.ID != o.ID || prev.Source != o.Source ||
		o.ObservedAt.Sub(s.savedAt) >= b.opt.Expiry/2 {
		s.unsaved = true
	}
}

// Load restores the observations Options.Store kept from before a
// restart: each is shown as the key's last reported quota, and one that
// has not expired yet is enforced again for what remains of its expiry.
// A key that has learned something since New keeps what it learned. Call
// it before the first request; without a Store it does nothing.
func (b *Book) Load() error {
	if b.opt.Store == nil {
		return nil
	}
	saved, err := b.opt.Store.LoadObservations()
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.opt.Clock()
	for k, o := range saved {
		s := b.state(k)
		if s.last != nil {
			continue
		}
		o.Active = false
		last := o
		s.last = &last
		s.savedAt = o.ObservedAt
		if now.Before(o.ExpiresAt) {
			o.Active = true
			s.obs = &o
		}
		s.wake()
	}
	return err
}

// persist writes key's last observation to Options.Store when it has
// changed. It runs after the Book's lock is released (bbolt syncs to disk;
// no chat should wait on that), in order with other saves.
func (b *Book) persist(key Key) {
	if b.opt.Store == nil {
		return
	}
	b.mu.Lock()
	s := b.keys[key]
	due := s != nil && s.unsaved
	b.mu.Unlock()
	if !due {
		return // the common case: a repeat, no wait for another key's save
	}
	b.saving.Lock()
	defer b.saving.Unlock()
	b.mu.Lock()
	if s.last == nil || !s.unsaved {
		b.mu.Unlock()
		return
	}
	o := *s.last
	s.unsaved = false
	b.mu.Unlock()
	err := b.opt.Store.SaveObservation(key, o)
	b.mu.Lock()
	if err != nil {
		s.unsaved = true // the next observation tries again
	} else {
		s.savedAt = o.ObservedAt
	}
	b.mu.Unlock()
	if err != nil {
		b.opt.Log.Warn("quota: the observation was not saved; it is kept in memory", "key", key.String(), "err", err)
	}
}

// Observe429 learns from a structured rate-limit refusal for key: a
// per-minute input-token violation with a limit becomes the key's
// observation (replacing any older one) for Options.Expiry, and
// retryAfter (or, when 0, the refusal's own retry delay) blocks the key
// until it has passed. A zero quota teaches nothing: it is a refusal
// (ClassQuota), not a budget. q may be nil when only a delay is known.
func (b *Book) Observe429(key Key, q *provider.QuotaInfo, retryAfter time.Duration) {
	defer b.persist(key) // after the unlock below
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.state(key)
	now := b.opt.Clock()
	s.prune(now)
	if v, ok := q.InputTokensPerMinute(); ok && v.Limit > 0 {
		b.observe(s, Observation{Limit: v.Limit, Metric: v.Metric, ID: v.ID, Source: "429",
			ObservedAt: now.UTC(), ExpiresAt: now.Add(b.opt.Expiry).UTC()})
	}
	if retryAfter <= 0 && q != nil && !q.Fatal() {
		retryAfter = q.RetryAfter
	}
	if retryAfter > 0 {
		// The provider's delay covers traffic this Book cannot see, so it
		// holds even when the local window looks empty.
		if until := now.Add(retryAfter); until.After(s.blocked) {
			s.blocked = until
		}
	}
	s.wake()
}

// ObserveLimits learns from rate-limit headers (OpenAI, Anthropic) of a
// response or a refusal for key: the input-tokens window (or, without one,
// the tokens window) becomes the key's observation, and what the provider
// says it counts beyond the local window is held until its reset, so other
// processes using the key are respected. nil teaches nothing.
func (b *Book) ObserveLimits(key Key, l *provider.RateLimits) {
	if l == nil {
		return
	}
	w, metric := l.InputTokens, "input_tokens"
	if w == nil || w.Limit <= 0 {
		w, metric = l.Tokens, "tokens"
	}
	if w == nil || w.Limit <= 0 {
		return
	}
	defer b.persist(key) // after the unlock below
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.state(key)
	now := b.opt.Clock()
	s.prune(now)
	b.observe(s, Observation{Limit: w.Limit, Metric: metric, Source: "headers",
		ObservedAt: now.UTC(), ExpiresAt: now.Add(b.opt.Expiry).UTC()})
	if w.Remaining >= 0 {
		reset := w.Reset
		if reset <= 0 || reset > Window {
			reset = Window
		}
		local := 0
		for _, r := range s.entries {
			local += r.tokens
		}
		// Answers to requests in flight together arrive in any order: one
		// the provider answered earlier reports less use than one it
		// answered later. So within the provider's window the outside
		// count only rises; it goes when that window has passed (prune).
		if outside := int(w.Limit-w.Remaining) - local; outside > s.outside {
			s.outside = outside
			if until := now.Add(reset); until.After(s.outsideUntil) {
				s.outsideUntil = until
			}
		}
	}
	s.wake()
}

// ObserveError learns from a failed request's error: a rate-limit refusal
// through Observe429, and any headers through ObserveLimits. Errors that
// are not provider errors teach nothing.
func (b *Book) ObserveError(key Key, err error) {
	var pe *provider.Error
	if !errors.As(err, &pe) {
		return
	}
	if pe.Class == provider.ClassRateLimited || pe.Quota != nil {
		b.Observe429(key, pe.Quota, pe.RetryAfter)
	}
	b.ObserveLimits(key, pe.Limits)
}

// Retry decides whether a request that failed with err on attempt (1 for
// the first) is tried again on the same model. Only a rate-limit refusal
// that says when it passes is: a per-minute quota, a retry delay or a
// token window in the headers. A ClassQuota refusal (daily, zero quota,
// billing) never is, nor anything once ctx is done, attempt reaches
// Options.MaxAttempts, or the key is blocked beyond Options.MaxWait.
//
// wait is how long the key stays blocked by a retry delay; the caller
// need not sleep it, since the next Reserve waits (and reports the wait).
// Call ObserveError first, so the Book has learned from err. Never retry
// once anything was streamed: a partial reply is not replayed.
func (b *Book) Retry(ctx context.Context, key Key, attempt int, err error) (again bool, wait time.Duration) {
	var pe *provider.Error
	if ctx.Err() != nil || !errors.As(err, &pe) || pe.Class != provider.ClassRateLimited || pe.Quota.Fatal() {
		return false, 0
	}
	if attempt >= b.opt.MaxAttempts {
		return false, 0
	}
	perMinute := false
	if pe.Quota != nil {
		perMinute = pe.Quota.PerMinute
		for _, v := range pe.Quota.All {
			perMinute = perMinute || v.PerMinute
		}
	}
	headers := pe.Limits != nil && ((pe.Limits.InputTokens != nil && pe.Limits.InputTokens.Limit > 0) ||
		(pe.Limits.Tokens != nil && pe.Limits.Tokens.Limit > 0))
	if !perMinute && pe.RetryAfter <= 0 && !headers {
		return false, 0 // nothing says it passes: let the chain move on
	}
	b.mu.Lock()
	now := b.opt.Clock()
	if s := b.keys[key]; s != nil && s.blocked.After(now) {
		wait = s.blocked.Sub(now)
	}
	b.mu.Unlock()
	if wait > b.opt.MaxWait {
		return false, wait
	}
	return true, wait
}

// Snapshot returns every key's state, sorted by provider, model and
// fingerprint, for /api/quotas. Times are UTC.
func (b *Book) Snapshot() []Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.opt.Clock()
	out := make([]Status, 0, len(b.keys))
	for k, s := range b.keys {
		s.prune(now)
		st := Status{Key: k, Usage: s.usage(), Outside: s.outside, Waiting: len(s.queue)}
		if budget, ok := b.budget(s); ok {
			st.Budget = budget
		}
		for _, r := range s.entries {
			if !r.released {
				st.Reserved += r.tokens
			}
		}
		if s.last != nil {
			o := *s.last
			o.Active = s.obs != nil
			st.Quota = &o
		}
		if s.lastWait != nil {
			w := *s.lastWait
			st.LastWait = &w
		}
		if !s.blocked.IsZero() {
			t := s.blocked.UTC()
			st.BlockedUntil = &t
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		a, c := out[i].Key, out[j].Key
		if a.Provider != c.Provider {
			return a.Provider < c.Provider
		}
		if a.Model != c.Model {
			return a.Model < c.Model
		}
		return a.Fingerprint < c.Fingerprint
	})
	return out
}
