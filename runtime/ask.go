package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mirror-gateway/mirror/runtime/budget"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/quota"
	"github.com/mirror-gateway/mirror/runtime/view"
)

// answer asks the chain: models in order, falling over only when nothing was
// streamed yet and the failure is one another model may not share. With a
// quota Book, each attempt first reserves its estimated input tokens in the
// model's key window (waiting its turn, shown to p), and a
// rate-limit refusal that says when it passes is tried again on the same
// model, the next Reserve doing the waiting. It returns the answer, the
// model that gave it, and the local estimate of the request's input (what
// the quota reserved, and what calibration compares the bill with).
//
// Every request the runtime sends passes here, so here is the request
// budget's last word: a model whose ceiling the request, corrected with
// what that model's provider bills, does not fit is not asked, and when no
// model fits, the turn gets the budget error before anything is sent.
//
// Every attempt, sent or not, is reported to the asker's journal as a
// diagnostic, and a failed one is logged (see attempt).
func (e *Engine) answer(ctx context.Context, chain []*Model, req provider.Request, to asker, onDelta func(string) error) (provider.Result, string, int, error) {
	var lastErr error
	kind := ""
	if len(chain) > 0 {
		kind = chain[0].ProvKind
	}
	est := e.estimate(req, kind)
	var onWait func(quota.Wait)
	if e.quota != nil && to.person != nil {
		onWait = to.person.QuotaWait
	}
	seq := 0
models:
	for _, m := range chain {
		if err := e.fits(m, est); err != nil {
			seq++
			e.attempt(ctx, to, Diagnostic{Model: m.Name, Remote: m.Remote, Attempt: seq, Outcome: OutcomeBudget}, provider.Result{}, err, time.Time{})
			lastErr = err // nothing sent, nothing reserved: a larger window may take it
			continue
		}
		key := quota.Key{Provider: m.ProvName, Model: m.Remote, Fingerprint: m.Fingerprint}
		for attempt := 1; ; attempt++ {
			seq++
			diag := Diagnostic{Model: m.Name, Remote: m.Remote, Attempt: seq}
			release := func(quota.Usage) {}
			if e.quota != nil {
				rel, err := e.quota.Reserve(ctx, key, est, onWait)
				if err != nil {
					diag.Outcome = OutcomeQuota
					e.attempt(ctx, to, diag, provider.Result{}, err, time.Time{})
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
					diag.Outcome = OutcomeBreakerOpen
					e.attempt(ctx, to, diag, provider.Result{}, err, time.Time{})
					lastErr = err // open: the next model answers
					continue models
				}
				done = d
			}
			streamed := false
			r := req
			r.Model, r.MaxTokens = m.Remote, e.outputCap(m)
			start := time.Now()
			deltas := newDeltaPump(onDelta)
			res, err := e.ask(ctx, m, r, func(d provider.Delta) error {
				streamed = true
				return deltas.send(d.Text)
			})
			// Every delta is handed over before anything else of this
			// request is reported, as when onDelta ran in emit.
			if derr := deltas.close(); derr != nil && err == nil {
				err = derr
			}
			e.attempt(ctx, to, diag, res, err, start)
			e.bill(to.chat, to.payer, m.Name, res.Usage)
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

// fits checks a built request against m's request ceiling: its local
// estimate est, corrected with the calibration learned from m's bills
// (margin included), must fit the window less the reserve the answer may
// use.
func (e *Engine) fits(m *Model, est int) error {
	b, err := budget.New(m.Window, e.contextLimit(m), 0)
	if err != nil {
		return nil // a limit that does not parse was refused at load
	}
	need := est
	if e.cal != nil {
		need = e.cal.Correct(m.Name, est)
	}
	if need <= b.Ceiling {
		return nil
	}
	return &view.BudgetError{Stage: "request", Size: need, Limit: b.Ceiling,
		Hint: "nothing was sent; the request, with the system prompt and tools, still cannot fit the model after the view and the safety net; " +
			"send a shorter message or split it, start a /new chat, or choose a larger context limit"}
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

// bill adds what the provider billed for one request to the cost ledger,
// whatever the request's outcome: a failed stream may still have been
// billed. A ledger that cannot be written is logged; the answer stands.
func (e *Engine) bill(chat, payer, model string, u provider.Usage) {
	if e.mon == nil {
		return
	}
	if _, err := e.mon.RecordCostBy(chat, payer, model, u.InputTokens, u.OutputTokens, u.CachedTokens); err != nil && e.log != nil {
		e.log.Error("cost ledger", "chat", chat, "model", model, "err", err)
	}
}
