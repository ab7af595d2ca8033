package provider

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRateLimits(t *testing.T) {
	now := time.Date(2025, 8, 21, 12, 40, 0, 0, time.UTC)
	w := func(limit, remaining int64, reset time.Duration) *RateWindow {
		rw := &RateWindow{Limit: limit, Remaining: remaining, Reset: reset}
		if reset >= 0 {
			rw.ResetAt = now.Add(reset)
		} else {
			rw.Reset = 0
		}
		return rw
	}
	tests := []struct {
		name   string
		header map[string]string
		want   *RateLimits
	}{
		{"none", nil, nil},
		{"unrelated headers", map[string]string{"Content-Type": "text/event-stream", "Retry-After": "3"}, nil},
		{"openai (wire-formats §2.2)", map[string]string{
			"x-ratelimit-limit-requests": "60", "x-ratelimit-limit-tokens": "150000",
			"x-ratelimit-remaining-requests": "59", "x-ratelimit-remaining-tokens": "149984",
			"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s",
		}, &RateLimits{Requests: w(60, 59, time.Second), Tokens: w(150000, 149984, 6*time.Minute)}},
		{"openai milliseconds and fractions", map[string]string{
			"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "12ms",
			"x-ratelimit-reset-requests": "1.5s",
		}, &RateLimits{Requests: w(-1, -1, 1500*time.Millisecond), Tokens: w(-1, 0, 12*time.Millisecond)}},
		{"anthropic (wire-formats §4)", map[string]string{
			"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "49",
			"anthropic-ratelimit-requests-reset":          "2025-08-21T12:40:01Z",
			"anthropic-ratelimit-tokens-limit":            "80000",
			"anthropic-ratelimit-tokens-remaining":        "79000",
			"anthropic-ratelimit-tokens-reset":            "2025-08-21T12:40:59Z",
			"anthropic-ratelimit-input-tokens-limit":      "40000",
			"anthropic-ratelimit-input-tokens-remaining":  "0",
			"anthropic-ratelimit-input-tokens-reset":      "2025-08-21T12:40:30+00:00",
			"anthropic-ratelimit-output-tokens-limit":     "16000",
			"anthropic-ratelimit-output-tokens-remaining": "16000",
			"anthropic-ratelimit-output-tokens-reset":     "2025-08-21T12:40:00Z",
		}, &RateLimits{Requests: w(50, 49, time.Second), Tokens: w(80000, 79000, 59*time.Second),
			InputTokens: w(40000, 0, 30*time.Second), OutputTokens: w(16000, 16000, 0)}},
		{"reset in the past is now", map[string]string{
			"anthropic-ratelimit-requests-reset": "2025-08-21T12:00:00Z",
		}, &RateLimits{Requests: w(-1, -1, 0)}},
		{"garbage values are unknown", map[string]string{
			"x-ratelimit-limit-requests": "lots", "x-ratelimit-remaining-requests": "-3", "x-ratelimit-reset-requests": "soon",
		}, &RateLimits{Requests: w(-1, -1, -1)}},
		{"bare seconds reset", map[string]string{"x-ratelimit-reset-tokens": "20"}, &RateLimits{Tokens: w(-1, -1, 20*time.Second)}},
		{"absurd reset is unknown", map[string]string{"x-ratelimit-reset-tokens": "9000h"}, &RateLimits{Tokens: w(-1, -1, -1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h http.Header
			if tt.header != nil {
				h = http.Header{}
				for k, v := range tt.header {
					h.Set(k, v)
				}
			}
			got := ParseRateLimits(h, now)
			if (got == nil) != (tt.want == nil) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if got == nil {
				return
			}
			for _, c := range []struct {
				name      string
				got, want *RateWindow
			}{
				{"requests", got.Requests, tt.want.Requests}, {"tokens", got.Tokens, tt.want.Tokens},
				{"input", got.InputTokens, tt.want.InputTokens}, {"output", got.OutputTokens, tt.want.OutputTokens},
			} {
				if (c.got == nil) != (c.want == nil) || c.got != nil && (*c.got != *c.want) {
					t.Errorf("%s: got %+v, want %+v", c.name, c.got, c.want)
				}
			}
		})
	}
}

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		value string
		want  time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{"1.5", 1500 * time.Millisecond},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"NaN", 0},
		{"-3", 0},
		{"1e300", 0},
		{"soon", 0},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.value != "" {
			h.Set("Retry-After", tt.value)
		}
		if got := RetryAfterHeader(h, now); got != tt.want {
			t.Errorf("Retry-After %q: %s, want %s", tt.value, got, tt.want)
		}
	}
	if RetryAfterHeader(nil, now) != 0 {
		t.Error("nil header")
	}
}
