package anthropic

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Wire shape of an error: {"type":"error","error":{type,message,details},"request_id"}.
type wireError struct {
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Details *struct {
			ErrorCode string `json:"error_code"`
		} `json:"details"`
	} `json:"error"`
}

// errorInfo is what an error body says.
type errorInfo struct {
	typ, message, detail string
}

func parseErrorBody(raw []byte, key string) errorInfo {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return errorInfo{}
	}
	var we wireError
	if json.Unmarshal(raw, &we) != nil || we.Error == nil {
		return errorInfo{message: provider.Snippet(raw, key)}
	}
	info := errorInfo{typ: we.Error.Type, message: strings.TrimSpace(we.Error.Message)}
	if we.Error.Details != nil {
		info.detail = we.Error.Details.ErrorCode
	}
	return info
}

// bodyError maps an HTTP status (0 for an error event inside a stream), its
// headers and error body into a provider error.
func (c *Client) bodyError(status int, h http.Header, raw []byte, now time.Time) *provider.Error {
	info := parseErrorBody(raw, c.key)
	msg := info.message
	if msg == "" && status != 0 {
		msg = http.StatusText(status)
	}
	code := info.typ
	if info.detail != "" {
		code = info.detail
	}
	e := &provider.Error{
		Provider: c.name,
		Class:    classify(status, info),
		Status:   status,
		Code:     provider.Redact(code, c.key),
		Message:  provider.Redact(msg, c.key),
		Limits:   provider.ParseRateLimits(h, now),
	}
	if e.Class.Retryable() {
		e.RetryAfter = provider.RetryAfterHeader(h, now)
	}
	return e
}

// classify picks the class of a failure. The error type decides (it is
// also all an in-stream error has); the status decides for bodies without
// one (proxies, gateways).
func classify(status int, info errorInfo) provider.Class {
	msg := strings.ToLower(info.message)
	switch info.typ {
	case "authentication_error":
		return provider.ClassAuth
	case "permission_error":
		return provider.ClassPermission
	case "not_found_error":
		return provider.ClassNotFound
	case "billing_error":
		return provider.ClassQuota
	case "request_too_large":
		return provider.ClassContextLength
	case "rate_limit_error":
		return rateLimit(info)
	case "overloaded_error":
		return provider.ClassOverloaded
	case "api_error", "timeout_error":
		return provider.ClassServer
	case "invalid_request_error":
		return invalidRequest(msg)
	}
	switch {
	case status == http.StatusUnauthorized:
		return provider.ClassAuth
	case status == http.StatusPaymentRequired:
		return provider.ClassQuota
	case status == http.StatusForbidden:
		return provider.ClassPermission
	case status == http.StatusNotFound:
		return provider.ClassNotFound
	case status == http.StatusRequestTimeout:
		return provider.ClassNetwork
	case status == http.StatusRequestEntityTooLarge:
		return provider.ClassContextLength
	case status == http.StatusTooManyRequests:
		return rateLimit(info)
	case status == 529 || status == http.StatusServiceUnavailable:
		return provider.ClassOverloaded
	case status >= 500:
		return provider.ClassServer
	case status >= 400:
		return invalidRequest(msg)
	}
	return provider.ClassServer
}

// rateLimit tells a passing rate limit from a spend limit, which Anthropic
// marks with details.error_code and which no wait lifts.
func rateLimit(info errorInfo) provider.Class {
	if strings.Contains(info.detail, "spend_limit") || strings.Contains(strings.ToLower(info.message), "spend limit") {
		return provider.ClassQuota
	}
	return provider.ClassRateLimited
}

// invalidRequest refines invalid_request_error by its message: Anthropic
// reports both a prompt too long and an empty credit balance this way.
func invalidRequest(msg string) provider.Class {
	switch {
	case strings.Contains(msg, "prompt is too long") || strings.Contains(msg, "exceed context limit") ||
		strings.Contains(msg, "context window"):
		return provider.ClassContextLength
	case strings.Contains(msg, "credit balance"):
		return provider.ClassQuota
	}
	return provider.ClassBadRequest
}
