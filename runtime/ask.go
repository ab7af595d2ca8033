package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/quota"
)

// answer asks the chain: models in order, falling over only when nothing was
// streamed yet and the failure is one another model may not share. With a
// quota Book, each attempt first reserves its estimated input tokens in the
// model's key window (waiting its turn, shown to p), and a
// rate-limit refusal that says when it passes is tried again on the same
// model, the next Reserve doing the waiting. It returns the answer, the
// model that gave it, and the local estimate of the request's input (what
// the quota reserved, and what calibration compares the bill with).
func (e *Engine) answer(ctx context.Context, chain []*Model, req provider.Request, p Person, onDelta func(string) error) (provider.Result, string, int, error) {
	var lastErr error
	est := e.estimate(req)
	var onWait func(quota.Wait)
	if e.quota != nil && p != nil {
		onWait = p.QuotaWait
	}
models:
	for _, m := range chain {
		key := quota.Key{Provider: m.ProvName, Model: m.Remote, Fingerprint: m.Fingerprint}
		for attempt := 1; ; attempt++ {
			release := func(quota.Usage) {}
			if e.quota != nil {
				rel, err := e.quota.Reserve(ctx, key, est, onWait)
				if err != nil {
					if ctx.Err() != nil {
						return provider.Result{}, m.Name, est, err
					}
					lastErr = err // too large or too long a wait here: the next model may fit
					continue models
				}
				release = rel
			}
			done := func(error, string) {}
			if e.mon != nil {
				d, err := e.mon.Provider(m.ProvName, m.Remote).Allow()
				if err != nil {
					release(quota.Usage{}) // nothing was sent
					lastErr = err          // open: the next model answers
					continue models
				}
				done = d
			}
			streamed := false
			r := req
			r.Model, r.MaxTokens = m.Remote, e.outputCap(m)
			res, err := e.ask(ctx, m, r, func(d provider.Delta) error {
				streamed = true
				return onDelta(d.Text)
			})
			if err != nil && ctx.Err() != nil {
				done(ctx.Err(), "canceled") // a stopped turn is not the provider's failure
			} else {
				done(err, string(provider.ClassOf(err)))
			}
			if e.quota != nil {
				if err != nil {
					e.quota.ObserveError(key, err)
				} else {
					e.quota.ObserveLimits(key, res.Limits)
				}
				release(quota.Billed(res, err))
			}
			if err == nil || streamed || ctx.Err() != nil {
				return res, m.Name, est, err
			}
			lastErr = err
			if e.quota != nil {
				if again, _ := e.quota.Retry(ctx, key, attempt, err); again {
					continue // the same model: Reserve waits out the window or delay
				}
			}
			if !provider.ClassOf(err).Retryable() {
				return res, m.Name, est, err
			}
			continue models
		}
	}
	if lastErr == nil {
		lastErr = errors.New("empty chain")
	}
	return provider.Result{}, "", est, lastErr
}

func (e *Engine) ask(ctx context.Context, m *Model, req provider.Request, emit func(provider.Delta) error) (provider.Result, error) {
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return provider.Result{}, ctx.Err()
	}
	defer func() { <-e.sem }()
	res, err := m.Provider.Stream(ctx, req, emit)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return res, err
}
