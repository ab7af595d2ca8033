// Package limit holds rate limits kept per key (a client address, an access
// token): token buckets of golang.org/x/time/rate in a map whose size is
// bounded, so a stream of new keys cannot grow memory without end.
package limit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Keyed is a rate limit per key: perMinute events a minute, burst at once.
// It is safe for concurrent use.
type Keyed[K comparable] struct {
	mu      sync.Mutex
	every   rate.Limit
	burst   int
	maxKeys int
	m       map[K]*rate.Limiter
	// Now is the clock (tests move it); nil is time.Now.
	Now func() time.Time
}

// New returns a limit of perMinute events a minute per key, burst at once,
// remembering at most maxKeys keys (a key forgotten starts again full).
func New[K comparable](perMinute, burst, maxKeys int) *Keyed[K] {
	if burst < 1 {
		burst = 1
	}
	if maxKeys < 1 {
		maxKeys = 1
	}
	return &Keyed[K]{every: rate.Limit(float64(perMinute) / 60), burst: burst, maxKeys: maxKeys, m: map[K]*rate.Limiter{}}
}

// Messages is the limit of messages a minute per principal that every
// transport spends from (limits.messages_per_minute), so a person's browser
// and Telegram messages share one allowance; nil when perMinute is 0 (no
// cap).
func Messages(perMinute int) *Keyed[string] {
	if perMinute <= 0 {
		return nil
	}
	return New[string](perMinute, perMinute, 1<<16)
}

func (k *Keyed[K]) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// Take spends one event of key. When none is left it spends nothing and
// returns false with how long until one frees up.
func (k *Keyed[K]) Take(key K) (retry time.Duration, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	r := k.get(key, now).ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return ceilMS(d), false
	}
	return 0, true
}

// Wait returns how long until key may spend an event (0: now), spending
// nothing.
func (k *Keyed[K]) Wait(key K) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	l, ok := k.m[key]
	if !ok {
		return 0
	}
	r := l.ReserveN(now, 1)
	d := r.DelayFrom(now)
	r.CancelAt(now)
	return ceilMS(d)
}

// ceilMS rounds a wait up to whole milliseconds: the bucket's float
// arithmetic leaves nanosecond crumbs, and a client told "6s" must not be
// refused at 5.999999999 s.
func ceilMS(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// Len returns how many keys are remembered.
func (k *Keyed[K]) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}

// get returns key's bucket, making room first when the map is full: keys
// whose bucket has refilled are forgotten (they would start full anyway),
// else one arbitrary key.
func (k *Keyed[K]) get(key K, now time.Time) *rate.Limiter {
	if l, ok := k.m[key]; ok {
		return l
	}
	if len(k.m) >= k.maxKeys {
		for kk, l := range k.m {
			if l.TokensAt(now) >= float64(k.burst) {
				delete(k.m, kk)
			}
		}
		for kk := range k.m {
			if len(k.m) < k.maxKeys {
				break
			}
			delete(k.m, kk)
		}
	}
	l := rate.NewLimiter(k.every, k.burst)
	k.m[key] = l
	return l
}
