package openai

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// errorInfo is what an error body says.
type errorInfo struct {
	message, typ, code string
}

// parseErrorBody reads {"error":{message,type,param,code}} and the shapes
// compatible servers use instead: {"error":"text"}, {"message":…},
// {"detail":…} (FastAPI), or plain text.
func parseErrorBody(raw []byte, key string) errorInfo {
	raw = bytes.TrimSpace(raw)
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Detail  json.RawMessage `json:"detail"`
		Type    json.RawMessage `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if len(raw) == 0 {
		return errorInfo{}
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return errorInfo{message: snippet(raw, key)}
	}
	var obj struct {
		Message json.RawMessage `json:"message"`
		Type    json.RawMessage `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if len(env.Error) > 0 && env.Error[0] == '{' && json.Unmarshal(env.Error, &obj) == nil {
		return errorInfo{message: scalar(obj.Message), typ: scalar(obj.Type), code: scalar(obj.Code)}
	}
	info := errorInfo{message: scalar(env.Error), typ: scalar(env.Type), code: scalar(env.Code)}
	if info.message == "" {
		info.message = scalar(env.Message)
	}
	if info.message == "" && len(env.Detail) > 0 {
		if info.message = scalar(env.Detail); info.message == "" {
			info.message = snippet(env.Detail, key)
		}
	}
	return info
}

// scalar renders a JSON string or number; null and other values give "".
func scalar(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// bodyError maps an HTTP status (0 for an error event inside a stream), its
// headers and error body into a provider error.
func (c *Client) bodyError(status int, h http.Header, raw []byte) *provider.Error {
	info := parseErrorBody(raw, c.key)
	msg := info.message
	if msg == "" && status != 0 {
		msg = http.StatusText(status)
	}
	e := &provider.Error{
		Provider: c.name,
		Class:    classify(status, info),
		Status:   status,
		Code:     provider.Redact(info.code, c.key),
		Message:  provider.Redact(strings.TrimSpace(msg), c.key),
	}
	if e.Class != provider.ClassQuota {
		e.RetryAfter = retryAfter(h, info.message, time.Now())
	}
	e.Limits = provider.ParseRateLimits(h, time.Now())
	return e
}

// classify picks the class of a failure. HTTP status decides first; the
// code, type and message refine 400/429 and classify in-stream errors,
// which have no status.
func classify(status int, info errorInfo) provider.Class {
	code, typ, msg := strings.ToLower(info.code), strings.ToLower(info.typ), strings.ToLower(info.message)
	quota := code == "insufficient_quota" || typ == "insufficient_quota"
	ctxLen := code == "context_length_exceeded" || typ == "exceed_context_size_error" ||
		strings.Contains(msg, "context window") || strings.Contains(msg, "context length") ||
		strings.Contains(msg, "context size")
	switch {
	case status == 0:
		switch {
		case quota:
			return provider.ClassQuota
		case ctxLen:
			return provider.ClassContextLength
		case code == "rate_limit_exceeded" || typ == "tokens" || typ == "requests" || typ == "rate_limit_error":
			return provider.ClassRateLimited
		case strings.Contains(code, "overloaded") || strings.Contains(typ, "overloaded"):
			return provider.ClassOverloaded
		case code == "invalid_api_key" || typ == "authentication_error":
			return provider.ClassAuth
		case typ == "invalid_request_error":
			return provider.ClassBadRequest
		}
		return provider.ClassServer
	case status == http.StatusUnauthorized:
		return provider.ClassAuth
	case status == http.StatusPaymentRequired: // OpenRouter: out of credits
		return provider.ClassQuota
	case status == http.StatusForbidden:
		return provider.ClassPermission
	case status == http.StatusNotFound:
		return provider.ClassNotFound
	case status == http.StatusRequestTimeout:
		return provider.ClassNetwork
	case status == http.StatusTooManyRequests:
		if quota {
			return provider.ClassQuota
		}
		return provider.ClassRateLimited
	case status == http.StatusRequestEntityTooLarge:
		return provider.ClassContextLength
	case status == http.StatusServiceUnavailable || status == 529:
		return provider.ClassOverloaded
	case status >= 500:
		return provider.ClassServer
	case status >= 400:
		if ctxLen {
			return provider.ClassContextLength
		}
		return provider.ClassBadRequest
	}
	return provider.ClassServer
}

var (
	// "Please try again in 644ms." / "in 20s." / "in 6m0s." / "in 1.898s."
	tryAgainIn = regexp.MustCompile(`(?i)try again in\s+((?:\d+(?:\.\d+)?(?:ms|s|m|h))+)`)
	// Azure: "Please retry after 6 seconds."
	retryAfterSeconds = regexp.MustCompile(`(?i)retry after\s+(\d+)\s+seconds?`)
)

// maxRetryAfter caps what a server may ask for; anything longer is nonsense.
const maxRetryAfter = 24 * time.Hour

// retryAfter reads how long to wait, the way OpenAI's SDK does:
// retry-after-ms, then retry-after (seconds or an HTTP date), then the
// message text. 0 when none.
func retryAfter(h http.Header, msg string, now time.Time) time.Duration {
	if h != nil {
		if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 && f < float64(maxRetryAfter/time.Millisecond) {
				return time.Duration(f * float64(time.Millisecond))
			}
		}
		if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
			if f, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(f) {
				if f > 0 && f < maxRetryAfter.Seconds() {
					return time.Duration(f * float64(time.Second))
				}
			} else if t, err := http.ParseTime(v); err == nil {
				if d := t.Sub(now); d > 0 && d < maxRetryAfter {
					return d
				}
			}
		}
	}
	if m := tryAgainIn.FindStringSubmatch(msg); m != nil {
		if d, err := time.ParseDuration(m[1]); err == nil && d > 0 && d < maxRetryAfter {
			return d
		}
	}
	if m := retryAfterSeconds.FindStringSubmatch(msg); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil && n > 0 && time.Duration(n)*time.Second < maxRetryAfter {
			return time.Duration(n) * time.Second
		}
	}
	return 0
}

// snippet is a short one-line excerpt of raw for messages, key redacted.
func snippet(raw []byte, key string) string { return provider.Snippet(raw, key) }
