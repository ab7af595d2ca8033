package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Real Anthropic error bodies (wire-formats.md §4; docs.claude.com errors).
const (
	bodyRateLimit  = `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization (d3f27ff7-7e3e-4e1d-a1c5-6f0b2a6d0c11) of 40,000 input tokens per minute. For details, refer to: https://docs.anthropic.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later. You may also contact sales at https://www.anthropic.com/contact-sales to discuss your options for a rate limit increase."},"request_id":"req_011CV5J4YZo4J3KLTDZgDN7S"}`
	bodySpendLimit = `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your specified workspace API usage limits. You will regain access on 2026-02-01 at 00:00 UTC.","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_011"}`
	bodyOverloaded = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011"}`
	bodyTooLong    = `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 205351 tokens > 200000 maximum"},"request_id":"req_011CV5J4YZo4J3KLTDZgDN7S"}`
	bodyCtxLimit   = `{"type":"error","error":{"type":"invalid_request_error","message":"input length and ` + "`max_tokens`" + ` exceed context limit: 188240 + 21333 > 200000, decrease input length or ` + "`max_tokens`" + ` and try again"},"request_id":"req_011"}`
	bodyCredit     = `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."},"request_id":"req_011"}`
	bodyInvalid    = `{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0.tool_result: unexpected tool_use_id found in tool_result blocks: toolu_01. Each tool_result block must have a corresponding tool_use block in the previous message."},"request_id":"req_011"}`
	bodyAuth       = `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_011"}`
	bodyPermission = `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."},"request_id":"req_011"}`
	bodyNotFound   = `{"type":"error","error":{"type":"not_found_error","message":"model: claude-9-opus"},"request_id":"req_011"}`
	bodyTooLarge   = `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."},"request_id":"req_011"}`
	bodyAPIError   = `{"type":"error","error":{"type":"api_error","message":"Internal server error"},"request_id":"req_011"}`
	bodyBilling    = `{"type":"error","error":{"type":"billing_error","message":"Your organization has a billing issue."},"request_id":"req_011"}`
)

var fixedNow = time.Date(2025, 8, 21, 12, 40, 0, 0, time.UTC)

func TestErrorConformance(t *testing.T) {
	limitHeaders := map[string]string{
		"retry-after":                                "17",
		"anthropic-ratelimit-input-tokens-limit":     "40000",
		"anthropic-ratelimit-input-tokens-remaining": "0",
		"anthropic-ratelimit-input-tokens-reset":     "2099-01-01T00:00:00Z",
	}
	tests := []struct {
		name   string
		status int
		header map[string]string
		body   string
		class  provider.Class
		code   string
		retry  time.Duration
		limits bool // Error.Limits.InputTokens expected
	}{
		{"rate limit", 429, limitHeaders, bodyRateLimit, provider.ClassRateLimited, "rate_limit_error", 17 * time.Second, true},
		{"spend limit fails at once", 429, map[string]string{"retry-after": "60"}, bodySpendLimit, provider.ClassQuota, "enforced_spend_limit_reached", 0, false},
		{"overloaded 529", 529, map[string]string{"retry-after": "2"}, bodyOverloaded, provider.ClassOverloaded, "overloaded_error", 2 * time.Second, false},
		{"prompt too long", 400, nil, bodyTooLong, provider.ClassContextLength, "invalid_request_error", 0, false},
		{"input + max_tokens over context", 400, nil, bodyCtxLimit, provider.ClassContextLength, "invalid_request_error", 0, false},
		{"credit balance", 400, nil, bodyCredit, provider.ClassQuota, "invalid_request_error", 0, false},
		{"invalid request", 400, nil, bodyInvalid, provider.ClassBadRequest, "invalid_request_error", 0, false},
		{"auth", 401, nil, bodyAuth, provider.ClassAuth, "authentication_error", 0, false},
		{"permission", 403, nil, bodyPermission, provider.ClassPermission, "permission_error", 0, false},
		{"not found", 404, nil, bodyNotFound, provider.ClassNotFound, "not_found_error", 0, false},
		{"request too large", 413, nil, bodyTooLarge, provider.ClassContextLength, "request_too_large", 0, false},
		{"api error", 500, nil, bodyAPIError, provider.ClassServer, "api_error", 0, false},
		{"billing", 402, nil, bodyBilling, provider.ClassQuota, "billing_error", 0, false},
		{"proxy html 502", 502, nil, "<html><body><h1>502 Bad Gateway</h1></body></html>", provider.ClassServer, "", 0, false},
		{"proxy 429 without body", 429, map[string]string{"retry-after": "3"}, "", provider.ClassRateLimited, "", 3 * time.Second, false},
		{"empty 503", 503, nil, "", provider.ClassOverloaded, "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) { errorJSON(w, tt.status, tt.header, tt.body) })
			res, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err %v is not a provider error", err)
			}
			if pe.Class != tt.class || pe.Status != tt.status || pe.Code != tt.code || pe.RetryAfter != tt.retry || pe.Provider != "test" {
				t.Fatalf("got class=%s status=%d code=%q retry=%s provider=%s, want %s %d %q %s",
					pe.Class, pe.Status, pe.Code, pe.RetryAfter, pe.Provider, tt.class, tt.status, tt.code, tt.retry)
			}
			if got, want := provider.ClassOf(err).Group(), tt.class.Group(); got != want {
				t.Fatalf("group %s, want %s", got, want)
			}
			if tt.class == provider.ClassQuota && pe.Class.Retryable() {
				t.Fatal("a quota refusal must fail at once")
			}
			if pe.Message == "" || strings.Contains(err.Error(), testKey) {
				t.Fatalf("message %q / error %q", pe.Message, err)
			}
			if tt.limits && (pe.Limits == nil || pe.Limits.InputTokens == nil || pe.Limits.InputTokens.Remaining != 0 || pe.Limits.InputTokens.Limit != 40000) {
				t.Fatalf("limits %+v", pe.Limits)
			}
			if res.Text != "" || res.ToolCalls != nil {
				t.Fatalf("result %+v on error", res)
			}
		})
	}
}

// TestKeyNeverInError checks every path an error takes: an echo of the
// exact key in a status error and in a stream, and a transport error.
func TestKeyNeverInError(t *testing.T) {
	bodies := []string{
		`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key: ` + testKey + `"}}`,
		`{"type":"error","error":{"type":"authentication_error","message":"key sk-ant-api03-someoneElsesKey-xyz revoked"}}`,
		`{"type":"error","error":{"type":"` + testKey + `","message":"x"}}`,
		`<html>bad key ` + testKey + `</html>`,
	}
	check := func(t *testing.T, err error) {
		t.Helper()
		if err == nil {
			t.Fatal("no error")
		}
		for e := err; e != nil; e = errors.Unwrap(e) {
			for _, s := range []string{e.Error(), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e)} {
				if strings.Contains(s, testKey) || strings.Contains(s, "0123456789abcdef") || strings.Contains(s, "someoneElses") {
					t.Fatalf("key leaked: %s", s)
				}
			}
		}
		var pe *provider.Error
		if !errors.As(err, &pe) || strings.Contains(pe.Message, testKey) || strings.Contains(pe.Code, testKey) {
			t.Fatalf("err %#v", err)
		}
	}
	for i, body := range bodies {
		t.Run(fmt.Sprint("status/", i), func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) { errorJSON(w, 401, nil, body) })
			_, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
			check(t, err)
		})
		t.Run(fmt.Sprint("stream/", i), func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				sseHeaders(w)
				send(w, "event: error\ndata: "+body+"\n\n")
			})
			_, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
			check(t, err)
		})
	}
	t.Run("transport", func(t *testing.T) {
		c := New(Config{Name: "dead", BaseURL: "http://127.0.0.1:1/" + testKey, APIKey: testKey})
		_, err := c.Stream(context.Background(), hello(), collect(new([]string)))
		check(t, err)
		if provider.ClassOf(err) != provider.ClassNetwork {
			t.Fatalf("class %s", provider.ClassOf(err))
		}
	})
}

// FuzzErrorBody: any error body classifies without panicking, into a class
// of the closed vocabulary.
func FuzzErrorBody(f *testing.F) {
	for _, b := range []string{bodyRateLimit, bodySpendLimit, bodyCredit, `{"error":null}`, `{"error":{"details":null}}`} {
		f.Add(b, 429)
	}
	f.Fuzz(func(t *testing.T, body string, status int) {
		c := New(Config{Name: "fuzz", APIKey: testKey})
		e := c.bodyError(status%600, http.Header{"Retry-After": {"5"}}, []byte(body), fixedNow)
		if !slices.Contains(provider.Classes(), e.Class) {
			t.Fatalf("class %q outside the vocabulary", e.Class)
		}
		if !e.Class.Retryable() && e.RetryAfter != 0 {
			t.Fatalf("final class with a retry: %+v", e)
		}
	})
}
