package quota

import (
	"testing"
	"time"
)

// BenchmarkChatsUnderQuota runs 10 chats × 50 requests of 100k–250k input
// tokens (the seed's quarter-million-token context) against an upstream
// enforcing a 2M tokens-per-minute quota the Book starts not knowing, on a
// fake clock, with the default Options (10 % headroom, 10 min expiry, so
// the run relearns the quota several times). Billing differs from the
// estimate by up to ±4 %, which the headroom absorbs.
//
// Metrics: tpm_ratio is tokens per minute admitted against the quota
// (its ceiling in steady state is 1−headroom, 0.90; each relearning burst
// lets one window reach the quota itself); budget_ratio is the same against
// the budget (quota less headroom); 429/observation is 429s drawn per
// observation window (1 is the one that teaches); 429_after_learning
// counts those drawn while a quota was known (goal 0).
func BenchmarkChatsUnderQuota(b *testing.B) {
	const (
		chats, requests = 10, 50
		limit           = 2_000_000
	)
	var last simResult
	for b.Loop() {
		clock := newAutoClock(chats)
		book := New(Options{Clock: clock.Now, NewTimer: clock.NewTimer})
		up := &upstream{now: clock.Now, limit: limit,
			bill: func(tokens int) int { return tokens * (96 + tokens%9) / 100 }}
		last = simulate(book, up, simConfig{
			chats: chats, requests: requests,
			size:    func(c, n int) int { return 100_000 + (c*53_000+n*29_000)%150_001 },
			latency: func(c, n int) time.Duration { return 3*time.Second + time.Duration(c*131+n*17%900)*time.Millisecond },
			start:   func(c int) time.Duration { return time.Duration(c) * 170 * time.Millisecond },
			sleep:   clock.Sleep,
			now:     clock.Now,
			done:    clock.Done,
		})
		clock.Stop()
		if len(last.failures) > 0 {
			b.Fatalf("failures: %v", last.failures)
		}
	}
	// The span counts the last admission's own minute, so a run that packs
	// every window to the budget scores exactly the budget.
	minutes := (last.last.Sub(last.first) + Window).Minutes()
	tpm := float64(last.tokens) / minutes
	b.ReportMetric(tpm/limit, "tpm_ratio")
	b.ReportMetric(tpm/(limit*(1-DefaultHeadroom)), "budget_ratio")
	b.ReportMetric(float64(last.refusals)/float64(max(last.observations, 1)), "429/observation")
	b.ReportMetric(float64(last.refusedKnown), "429_after_learning")
	b.ReportMetric(float64(last.observations), "observations")
	b.ReportMetric(minutes, "sim_minutes")
	b.ReportMetric(float64(last.waits), "waits")
}
