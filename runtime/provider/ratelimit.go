package provider

import (
	"math"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// RateLimits is what a provider's response headers say about the key's
// rate limits, as of the response. Every window is nil when the provider
// sent nothing about it. OpenAI sends requests and tokens
// (x-ratelimit-{limit,remaining,reset}-{requests,tokens}); Anthropic sends
// all four (anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}).
// Gemini sends none.
type RateLimits struct {
	Requests     *RateWindow
	Tokens       *RateWindow
	InputTokens  *RateWindow
	OutputTokens *RateWindow
}

// RateWindow is one limit. Limit and Remaining are -1 when their header was
// absent or unreadable. Reset is how long until the window refills (OpenAI
// says it as a duration, Anthropic as a time; both are converted), 0 when
// unknown; ResetAt is the same instant on the local clock.
type RateWindow struct {
	Limit     int64
	Remaining int64
	Reset     time.Duration
	ResetAt   time.Time
}

// Empty reports that no window is known.
func (r *RateLimits) Empty() bool {
	return r == nil || (r.Requests == nil && r.Tokens == nil && r.InputTokens == nil && r.OutputTokens == nil)
}

// ParseRateLimits reads OpenAI's and Anthropic's rate-limit headers from h;
// now is the local time the response arrived. It returns nil when h holds
// none, so a Result or Error carries Limits only when there is something to
// learn.
func ParseRateLimits(h http.Header, now time.Time) *RateLimits {
	if h == nil || !hasRateLimits(h) {
		return nil
	}
	var rl RateLimits
	// OpenAI: x-ratelimit-limit-requests, x-ratelimit-reset-tokens, ...
	rl.Requests = window(h, now, &openAIWindows[0])
	rl.Tokens = window(h, now, &openAIWindows[1])
	// Anthropic: anthropic-ratelimit-requests-limit, ... A response has one
	// vendor's headers, never both; if a proxy mixed them, Anthropic's win.
	for i, dst := range [...]**RateWindow{&rl.Requests, &rl.Tokens, &rl.InputTokens, &rl.OutputTokens} {
		if win := window(h, now, &anthropicWindows[i]); win != nil {
			*dst = win
		}
	}
	if rl.Empty() {
		return nil
	}
	return &rl
}

// windowHeaders are the canonical names of one limit's three headers,
// built once: h.Get canonicalised each name on every response, and
// Anthropic's ("…-Input-Tokens-…") were built and canonicalised anew.
type windowHeaders struct{ limit, remaining, reset string }

var (
	openAIWindows = [...]windowHeaders{
		{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
		{"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
	}
	// anthropicWindows are in RateLimits' order: requests, tokens, input
	// tokens, output tokens.
	anthropicWindows = func() (w [4]windowHeaders) {
		for i, name := range []string{"requests", "tokens", "input-tokens", "output-tokens"} {
			p := "Anthropic-Ratelimit-" + name
			w[i] = windowHeaders{textproto.CanonicalMIMEHeaderKey(p + "-Limit"),
				textproto.CanonicalMIMEHeaderKey(p + "-Remaining"), textproto.CanonicalMIMEHeaderKey(p + "-Reset")}
		}
		return w
	}()
)

// hasRateLimits reports whether h may hold a rate-limit header: most
// responses (Gemini's, local servers') have none, and a look at the names
// costs less than the fourteen lookups.
func hasRateLimits(h http.Header) bool {
	for k := range h {
		if strings.HasPrefix(k, "X-Ratelimit-") || strings.HasPrefix(k, "Anthropic-Ratelimit-") {
			return true
		}
	}
	return false
}

// get is h.Get of a canonical name, without canonicalising it again.
func get(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// window reads one limit's three headers; nil when all three are absent.
func window(h http.Header, now time.Time, names *windowHeaders) *RateWindow {
	l, r, s := get(h, names.limit), get(h, names.remaining), get(h, names.reset)
	if l == "" && r == "" && s == "" {
		return nil
	}
	w := &RateWindow{Limit: count(l), Remaining: count(r)}
	if d, at, ok := resetTime(s, now); ok {
		w.Reset, w.ResetAt = d, at
	}
	return w
}

// count parses a non-negative header count; -1 when absent or malformed.
func count(s string) int64 {
	if s == "" {
		return -1 // absent: without a parse error to build
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// maxWait caps any wait a header may ask for; anything longer is nonsense
// and treated as unknown.
const maxWait = 24 * time.Hour

// resetTime reads a reset header: a Go-style duration ("1s", "6m0s",
// "12ms", as OpenAI sends), bare seconds ("20"), or an RFC 3339 time
// (Anthropic). A reset already past is 0 from now.
func resetTime(s string, now time.Time) (time.Duration, time.Time, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, time.Time{}, false
	}
	// OpenAI's durations are not tried as times: the failed parse built an
	// error per header. A time starts with a four-byte year and a '-'.
	if len(s) > 4 && s[4] == '-' {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			d := max(t.Sub(now), 0)
			if d > maxWait {
				return 0, time.Time{}, false
			}
			return d, now.Add(d), true
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || math.IsNaN(f) || f < 0 || f > maxWait.Seconds() {
			return 0, time.Time{}, false
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 || d > maxWait {
		return 0, time.Time{}, false
	}
	return d, now.Add(d), true
}

// RetryAfterHeader reads the standard Retry-After header (seconds, possibly
// fractional, or an HTTP date) as a wait from now; 0 when absent, past or
// unreasonable.
func RetryAfterHeader(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(f) || f <= 0 || f >= maxWait.Seconds() {
			return 0
		}
		return time.Duration(f * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 && d < maxWait {
			return d
		}
	}
	return 0
}
