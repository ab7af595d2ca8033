package provider

import (
	"strings"
	"time"
)

// QuotaInfo is what a provider said about the quota a request ran into,
// from a structured refusal (Google's google.rpc.QuotaFailure and
// RetryInfo). The embedded QuotaViolation is the one that decides how to
// react (see Decisive); All lists every violation in the order given.
type QuotaInfo struct {
	QuotaViolation
	// All is every violation reported, the decisive one included.
	All []QuotaViolation
	// RetryAfter is the provider's retry delay (RetryInfo.retryDelay), 0
	// when none. It is kept even when retrying cannot help (a daily or zero
	// quota), for display; Error.RetryAfter is set only when it can.
	RetryAfter time.Duration
}

// QuotaViolation is one quota a request exceeded.
type QuotaViolation struct {
	// Metric is what is counted, e.g.
	// "generativelanguage.googleapis.com/generate_content_free_tier_input_token_count".
	Metric string
	// ID names the limit, e.g. "GenerateContentInputTokensPerModelPerMinute-FreeTier".
	ID string
	// Dimensions scope the limit, e.g. {"location":"global","model":"gemini-2.5-flash"}.
	Dimensions map[string]string
	// Limit is the quota's value (quotaValue); meaningful only with HasLimit,
	// because Google sometimes leaves it out and 0 means "no quota at all".
	Limit    int64
	HasLimit bool
	// PerDay and PerMinute say which window the limit counts over.
	PerDay    bool
	PerMinute bool
	// Tokens reports an input-token metric (as opposed to requests), the
	// kind a local token reservation can learn and respect.
	Tokens bool
}

// Zero reports a limit of 0: the key has no access to this model at all
// (a model that is not on the free tier), so waiting never helps.
func (v QuotaViolation) Zero() bool { return v.HasLimit && v.Limit == 0 }

// Fatal reports a violation that retrying within minutes cannot cure: a
// daily quota or a zero quota.
func (v QuotaViolation) Fatal() bool { return v.PerDay || v.Zero() }

// Fatal reports whether any violation is fatal; such a refusal maps to
// ClassQuota and fails at once.
func (q *QuotaInfo) Fatal() bool {
	if q == nil {
		return false
	}
	for _, v := range q.All {
		if v.Fatal() {
			return true
		}
	}
	return q.QuotaViolation.Fatal()
}

// InputTokensPerMinute returns the per-minute input-token violation, the
// one a quota learner records, if there is one with a known limit.
func (q *QuotaInfo) InputTokensPerMinute() (QuotaViolation, bool) {
	if q == nil {
		return QuotaViolation{}, false
	}
	for _, v := range q.All {
		if v.Tokens && v.PerMinute && v.HasLimit {
			return v, true
		}
	}
	return QuotaViolation{}, false
}

// Decisive picks the violation that decides the reaction: a fatal one
// first (it must fail the request), then a per-minute input-token one (the
// one a learner can act on), then the first. ok is false for none.
func Decisive(all []QuotaViolation) (v QuotaViolation, ok bool) {
	for _, v := range all {
		if v.Fatal() {
			return v, true
		}
	}
	for _, v := range all {
		if v.Tokens && v.PerMinute {
			return v, true
		}
	}
	if len(all) > 0 {
		return all[0], true
	}
	return QuotaViolation{}, false
}

// ClassifyQuotaID fills PerDay, PerMinute and Tokens from a violation's
// quota id and metric. Google's ids spell the window out
// ("…PerModelPerMinute…", "…PerDayPerProjectPerModel…") and its metrics the
// thing counted ("…_input_token_count", "…_requests").
func ClassifyQuotaID(v *QuotaViolation) {
	id := strings.ToLower(v.ID)
	metric := strings.ToLower(v.Metric)
	v.PerDay = strings.Contains(id, "perday")
	v.PerMinute = strings.Contains(id, "perminute")
	v.Tokens = strings.Contains(metric, "input_token") || strings.Contains(id, "inputtokens")
}
