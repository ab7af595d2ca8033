package provider

import (
	"net/http"
	"testing"
	"time"
)

// TestParseRateLimitsAllocations: a response without rate-limit headers
// costs nothing to read, and one with OpenAI's costs only what is
// returned (the limits and their two windows), not a canonicalised name
// per header.
func TestParseRateLimitsAllocations(t *testing.T) {
	now := time.Now()
	plain := http.Header{"Content-Type": {"text/event-stream"}, "Date": {"Fri, 04 Dec 2026 09:00:00 GMT"}, "X-Request-Id": {"req_1"}}
	openai := plain.Clone()
	for k, v := range map[string]string{
		"x-ratelimit-limit-requests": "60", "x-ratelimit-limit-tokens": "150000",
		"x-ratelimit-remaining-requests": "59", "x-ratelimit-remaining-tokens": "149984",
		"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s",
	} {
		openai.Set(k, v)
	}
	anthropic := plain.Clone()
	anthropic.Set("anthropic-ratelimit-input-tokens-remaining", "7")
	for _, tt := range []struct {
		name string
		h    http.Header
		max  float64
	}{{"none", plain, 0}, {"openai", openai, 3}, {"anthropic input tokens", anthropic, 2}} {
		var rl *RateLimits
		if n := testing.AllocsPerRun(50, func() { rl = ParseRateLimits(tt.h, now) }); n > tt.max {
			t.Errorf("%s: %v allocations, want at most %v", tt.name, n, tt.max)
		}
		if (rl == nil) != (tt.max == 0) {
			t.Errorf("%s: limits %+v", tt.name, rl)
		}
	}
	if rl := ParseRateLimits(anthropic, now); rl.InputTokens == nil || rl.InputTokens.Remaining != 7 {
		t.Errorf("anthropic input tokens read as %+v", rl)
	}
}
