package gemini

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Wire shape of an error: {"error":{code,message,status,details}}, where
// details are google.rpc messages told apart by "@type".
type wireError struct {
	Error *struct {
		Code    int          `json:"code"`
		Message string       `json:"message"`
		Status  string       `json:"status"`
		Details []wireDetail `json:"details"`
	} `json:"error"`
}

type wireDetail struct {
	Type string `json:"@type"`
	// google.rpc.ErrorInfo
	Reason string `json:"reason"`
	// google.rpc.QuotaFailure
	Violations []struct {
		QuotaMetric     string            `json:"quotaMetric"`
		QuotaID         string            `json:"quotaId"`
		QuotaDimensions map[string]string `json:"quotaDimensions"`
		// QuotaValue is an int64, which proto3 JSON writes as a string
		// ("250000"); accept a number too.
		QuotaValue json.RawMessage `json:"quotaValue"`
	} `json:"violations"`
	// google.rpc.RetryInfo
	RetryDelay string `json:"retryDelay"`
}

// errorInfo is what an error body says.
type errorInfo struct {
	code    int
	message string
	status  string
	reasons []string
	quota   *provider.QuotaInfo
}

// parseErrorBody reads Google's error body. The non-SSE stream endpoint
// wraps it in an array, so accept [{"error":…}] too; anything else keeps a
// snippet as the message.
func parseErrorBody(raw []byte, key string) errorInfo {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return errorInfo{}
	}
	var we wireError
	if raw[0] == '[' {
		var arr []wireError
		if json.Unmarshal(raw, &arr) == nil && len(arr) > 0 {
			we = arr[0]
		}
	} else if err := json.Unmarshal(raw, &we); err != nil {
		return errorInfo{message: provider.Snippet(raw, key)}
	}
	if we.Error == nil {
		return errorInfo{message: provider.Snippet(raw, key)}
	}
	e := we.Error
	info := errorInfo{code: e.Code, message: strings.TrimSpace(e.Message), status: strings.ToUpper(e.Status)}
	var (
		violations []provider.QuotaViolation
		retry      time.Duration
		sawQuota   bool
	)
	for _, d := range e.Details {
		switch {
		case strings.HasSuffix(d.Type, "google.rpc.ErrorInfo"):
			if d.Reason != "" {
				info.reasons = append(info.reasons, d.Reason)
			}
		case strings.HasSuffix(d.Type, "google.rpc.QuotaFailure"):
			sawQuota = true
			for _, v := range d.Violations {
				qv := provider.QuotaViolation{Metric: v.QuotaMetric, ID: v.QuotaID, Dimensions: v.QuotaDimensions}
				qv.Limit, qv.HasLimit = int64Value(v.QuotaValue)
				provider.ClassifyQuotaID(&qv)
				violations = append(violations, qv)
			}
		case strings.HasSuffix(d.Type, "google.rpc.RetryInfo"):
			if dur, err := time.ParseDuration(strings.TrimSpace(d.RetryDelay)); err == nil && dur > 0 && dur < maxRetryAfter {
				retry = dur
			}
		}
	}
	// The message also lists violations ("Quota exceeded for metric: …,
	// limit: 0, model: …") and a retry ("Please retry in 20.04s."). Use
	// them where the structured details are missing or leave the limit out.
	textual := messageViolations(info.message)
	if len(violations) == 0 {
		violations = textual
	} else {
		for i := range violations {
			if violations[i].HasLimit {
				continue
			}
			for _, t := range textual {
				if t.Metric == violations[i].Metric {
					violations[i].Limit, violations[i].HasLimit = t.Limit, true
					break
				}
			}
		}
	}
	if retry == 0 {
		retry = messageRetry(info.message)
	}
	if sawQuota || len(violations) > 0 {
		q := &provider.QuotaInfo{All: violations, RetryAfter: retry}
		q.QuotaViolation, _ = provider.Decisive(violations)
		info.quota = q
	} else if retry > 0 {
		info.quota = &provider.QuotaInfo{RetryAfter: retry}
	}
	return info
}

// int64Value reads a proto3 int64 written as a JSON string or number.
func int64Value(raw json.RawMessage) (int64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		s = string(raw)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

var (
	// "* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_input_token_count, limit: 0, model: gemini-2.5-pro"
	quotaLine = regexp.MustCompile(`Quota exceeded for metric: ([^,\s]+), limit: (\d+)(?:, model: ([^,\s]+))?`)
	// "Please retry in 20.04466179s." / "in 500ms"
	retryIn = regexp.MustCompile(`(?i)retry in\s+(\d+(?:\.\d+)?(?:ms|s|m))\b`)
)

// maxRetryAfter caps what a server may ask for; anything longer is nonsense.
const maxRetryAfter = 24 * time.Hour

func messageViolations(msg string) []provider.QuotaViolation {
	var out []provider.QuotaViolation
	for _, m := range quotaLine.FindAllStringSubmatch(msg, -1) {
		v := provider.QuotaViolation{Metric: m[1]}
		if n, err := strconv.ParseInt(m[2], 10, 64); err == nil {
			v.Limit, v.HasLimit = n, true
		}
		if m[3] != "" {
			v.Dimensions = map[string]string{"model": m[3]}
		}
		provider.ClassifyQuotaID(&v)
		out = append(out, v)
	}
	return out
}

func messageRetry(msg string) time.Duration {
	m := retryIn.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	if d, err := time.ParseDuration(m[1]); err == nil && d > 0 && d < maxRetryAfter {
		return d
	}
	return 0
}

// bodyError maps an HTTP status (0 for an error inside a stream, where the
// body's own code stands in), its headers and error body into a provider
// error.
func (c *Client) bodyError(status int, h http.Header, raw []byte, now time.Time) *provider.Error {
	info := parseErrorBody(raw, c.key)
	msg := info.message
	if msg == "" && status != 0 {
		msg = http.StatusText(status)
	}
	code := info.status
	if len(info.reasons) > 0 {
		code = info.reasons[0] // more specific: API_KEY_INVALID, SERVICE_DISABLED, ...
	}
	e := &provider.Error{
		Provider: c.name,
		Class:    classify(status, info),
		Status:   status,
		Code:     provider.Redact(code, c.key),
		Message:  provider.Redact(msg, c.key),
		Quota:    info.quota,
		Limits:   provider.ParseRateLimits(h, now),
	}
	if e.Class != provider.ClassQuota && e.Class.Retryable() {
		if info.quota != nil && info.quota.RetryAfter > 0 {
			e.RetryAfter = info.quota.RetryAfter
		} else {
			e.RetryAfter = provider.RetryAfterHeader(h, now)
		}
	}
	return e
}

// classify picks the class of a failure from the HTTP status (or the body's
// code inside a stream), Google's status name, ErrorInfo reasons and, where
// Google gives nothing structured, the message.
func classify(status int, info errorInfo) provider.Class {
	if status == 0 {
		status = info.code
	}
	msg := strings.ToLower(info.message)
	reason := func(rs ...string) bool {
		for _, have := range info.reasons {
			for _, r := range rs {
				if strings.EqualFold(have, r) {
					return true
				}
			}
		}
		return false
	}
	// A bad key is a 400 INVALID_ARGUMENT on this API, and a leaked or
	// expired one a 403: both need a new key, not a changed request.
	badKey := reason("API_KEY_INVALID", "API_KEY_EXPIRED") ||
		strings.Contains(msg, "api key not valid") || strings.Contains(msg, "api key expired") ||
		strings.Contains(msg, "reported as leaked")
	// Only 400 and 403 are read for billing: every 429 says "check your
	// plan and billing details".
	billing := reason("BILLING_DISABLED") || strings.Contains(msg, "billing account") ||
		strings.Contains(msg, "billing to be enabled") || strings.Contains(msg, "enable billing")
	st := info.status
	switch {
	case badKey || status == http.StatusUnauthorized || st == "UNAUTHENTICATED":
		return provider.ClassAuth
	case status == http.StatusForbidden || st == "PERMISSION_DENIED":
		if billing {
			return provider.ClassQuota
		}
		return provider.ClassPermission
	case status == http.StatusNotFound || st == "NOT_FOUND":
		return provider.ClassNotFound
	case status == http.StatusTooManyRequests || st == "RESOURCE_EXHAUSTED":
		// Daily and zero quotas do not pass within a retry's wait.
		if info.quota.Fatal() {
			return provider.ClassQuota
		}
		return provider.ClassRateLimited
	case status == http.StatusRequestEntityTooLarge:
		return provider.ClassContextLength
	case status == http.StatusServiceUnavailable || st == "UNAVAILABLE":
		return provider.ClassOverloaded
	case status == http.StatusRequestTimeout:
		return provider.ClassNetwork
	case status >= 500 || st == "INTERNAL" || st == "DEADLINE_EXCEEDED":
		return provider.ClassServer
	case status >= 400 || st == "INVALID_ARGUMENT" || st == "FAILED_PRECONDITION":
		switch {
		case billing:
			return provider.ClassQuota
		case contextTooLong(msg):
			return provider.ClassContextLength
		case strings.Contains(msg, "location is not supported"):
			return provider.ClassPermission
		}
		return provider.ClassBadRequest
	}
	return provider.ClassServer
}

// contextTooLong recognizes Gemini's "The input token count (1196265)
// exceeds the maximum number of tokens allowed (1048575)." and its kin.
func contextTooLong(msg string) bool {
	return (strings.Contains(msg, "input token count") && strings.Contains(msg, "exceeds")) ||
		strings.Contains(msg, "exceeds the maximum number of tokens") ||
		strings.Contains(msg, "context window") || strings.Contains(msg, "too many tokens") ||
		strings.Contains(msg, "prompt is too long")
}
