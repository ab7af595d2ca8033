package quota

import (
	"context"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Keeper is what the engine asks of a quota book. *Book is the one of a
// single gateway; in cluster mode chats/cluster's QuotaBook asks the
// cluster's leader for every grant, so the nodes share one window per key.
type Keeper interface {
	// Reserve waits for room for tokens under key's quota (see Book.Reserve).
	Reserve(ctx context.Context, key Key, tokens int, onWait func(Wait)) (release func(used Usage), err error)
	// ObserveLimits learns from rate-limit headers (see Book.ObserveLimits).
	ObserveLimits(key Key, l *provider.RateLimits)
	// ObserveError learns from a provider's refusal (see Book.ObserveError).
	ObserveError(key Key, err error)
	// Retry says whether to try again after err (see Book.Retry).
	Retry(ctx context.Context, key Key, attempt int, err error) (again bool, wait time.Duration)
	// Snapshot returns every key's state, for /api/quotas.
	Snapshot() []Status
}

var _ Keeper = (*Book)(nil)

// Learn installs o as key's observation when it was observed after the
// one the Book knows (or the Book knows none): a cluster's leader learns
// this way what the nodes' providers reported. An expired o is only shown.
func (b *Book) Learn(key Key, o Observation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.state(key)
	if s.last != nil && !o.ObservedAt.After(s.last.ObservedAt) {
		return
	}
	o.Active = false
	last := o
	s.last = &last
	s.savedAt = o.ObservedAt // it came from a store: nothing to save again
	if b.opt.Clock().Before(o.ExpiresAt) {
		o.Active = true
		s.obs = &o
	} else {
		s.obs = nil
	}
	s.wake()
}

// Restore puts back into key's window a grant made at at (by an earlier
// holder of the book, a cluster's former leader): tokens count until at
// plus Window, as they did there. released says its request has ended;
// otherwise the returned release ends it with what was billed.
func (b *Book) Restore(key Key, at time.Time, tokens int, released bool) (release func(used Usage)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.state(key)
	r := &reservation{at: at, tokens: max(tokens, 0), released: released}
	// Oldest first: prune drops from the front.
	i := len(s.entries)
	for i > 0 && s.entries[i-1].at.After(at) {
		i--
	}
	s.entries = append(s.entries, nil)
	copy(s.entries[i+1:], s.entries[i:])
	s.entries[i] = r
	s.wake()
	return func(used Usage) { b.release(s, r, used) }
}
